/* tests/onnx/test_onnx_vision.c - the vision mappings of src/onnx/onnx_vision.c
 * that ONNX's own test cases do not reach: nn.SiLU's exported
 * Sigmoid -> Mul (either operand order) built as one silu op while a
 * squeeze-excitation gate (x times the sigmoid of another tensor) stays a
 * sigmoid and a product, with the output against PyTorch's
 * (fixtures/make_vision_fixtures.py). */
#include "tg_test.h"

#include "onnx_run.h"

#include "ops/op.h"

#include <stdio.h>
#include <string.h>

#define FIXTURES TG_SOURCE_DIR "/tests/onnx/fixtures/"

static int count_op(tg_graph *g, tg_op op)
{
    int n = 0;
    for (int i = 0; i < tg_graph_tensor_count(g); i++)
        n += tg_graph_tensor(g, i)->op == op;
    return n;
}

static void test_silu_fused(void)
{
    tg_onnx_model *m = NULL;
    TG_CHECK_OK(tg_onnx_load(FIXTURES "vision_silu.onnx", &m));
    if (!m)
        return;
    tg_onnx_data in, want, got[TG_ONNX_MAX_IO];
    TG_CHECK_OK(tg_onnx_data_read_file(FIXTURES "vision_silu.input.pb", &in));
    TG_CHECK_OK(tg_onnx_data_read_file(FIXTURES "vision_silu.output.pb", &want));
    int n_out = 0;
    bool built;
    TG_CHECK_OK(onnx_run(m, in.dim[0], &in, 1, got, &n_out, &built));
    double worst = 0;
    TG_CHECK(n_out == 1 && onnx_allclose(&got[0], &want, 1e-5, 1e-6, &worst));
    for (int k = 0; k < n_out; k++)
        tg_onnx_data_free(&got[k]);
    tg_onnx_data_free(&in);
    tg_onnx_data_free(&want);

    tg_graph *g = tg_graph_create();
    tg_onnx_build_config c = {.batch = 2};
    tg_onnx_outputs io;
    TG_CHECK_OK(tg_onnx_build(m, g, &c, &io));
    /* three SiLUs (x * s, s * x, F.silu of a slice), the gate's sigmoid apart */
    TG_CHECK(count_op(g, TG_OP_ACTIVATION) == 3);
    TG_CHECK(count_op(g, TG_OP_SIGMOID) == 1);
    TG_CHECK(count_op(g, TG_OP_MUL) == 1);
    tg_graph_destroy(g);
    tg_onnx_model_destroy(m);
}

int main(void)
{
    TG_RUN(test_silu_fused);
    return tg_test_finish();
}
