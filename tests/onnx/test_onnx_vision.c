/* tests/onnx/test_onnx_vision.c - the vision mappings (src/onnx/onnx_ops_elementwise.c,
 * onnx_ops_norm.c, onnx_ops_resize.c, onnx_ops_random.c)
 * that ONNX's own test cases do not reach: nn.SiLU's exported
 * Sigmoid -> Mul (either operand order) built as one silu op while a
 * squeeze-excitation gate (x times the sigmoid of another tensor) stays a
 * sigmoid and a product, with the output against PyTorch's
 * (fixtures/make_vision_fixtures.py); GroupNormalization (opset 18's
 * per-group affine and 21's per-channel one) against a double-precision
 * group norm written here, with its gradient; RandomNormal(Like) and
 * RandomUniform: shapes, moments and draws that change with the step. */
#include "tg_test.h"

#include "onnx_node_model.h"
#include "onnx_run.h"

#include "runtime/interp.h"

#include <math.h>

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

static const double *data_of(tg_interp *ip, tg_graph *g, const char *name)
{
    for (int t = 0; t < tg_graph_tensor_count(g); t++)
        if (!strcmp(tg_tensor_name(tg_graph_tensor(g, t)), name))
            return tg_interp_data(ip, tg_graph_tensor(g, t));
    return NULL;
}

/* x [2, 6, 5] in 3 groups; scale and bias [3] (opset 18) or [6] (21). */
static void test_group_norm(void)
{
    for (int opset = 18; opset <= 21; opset += 3) {
        int64_t per = opset == 18 ? 3 : 6;
        onnx_node nd = {.op_type = "GroupNormalization",
                        .opset = opset,
                        .n_outputs = 1,
                        .in = {F32("x", 3, 2, 6, 5), F32("scale", 1, per), F32("bias", 1, per)},
                        .attr = {INT("num_groups", 3), FLOAT("epsilon", 0.01f)}};
        onnx_node_check(opset == 18 ? "GroupNormalization-18" : "GroupNormalization-21", &nd, 1e-5);
        tg_graph *g = tg_graph_create();
        tg_tensor *y = onnx_node_build(g, &nd);
        tg_interp *ip = NULL;
        if (!y || tg_interp_create(g, 0, &ip) != TG_OK || tg_interp_run(ip, 0) != TG_OK) {
            tg_test_fail(__FILE__, __LINE__, "GroupNormalization-%d: not built or run", opset);
            tg_interp_destroy(ip);
            tg_graph_destroy(g);
            continue;
        }
        const double *x = data_of(ip, g, "x"), *sc = data_of(ip, g, "scale");
        const double *bi = data_of(ip, g, "bias"), *got = tg_interp_data(ip, y);
        for (int n = 0; x && sc && bi && n < 2; n++)
            for (int grp = 0; grp < 3; grp++) {
                const double *v = x + (n * 6 + grp * 2) * 5;
                double mean = 0, var = 0;
                for (int k = 0; k < 10; k++)
                    mean += v[k] / 10;
                for (int k = 0; k < 10; k++)
                    var += (v[k] - mean) * (v[k] - mean) / 10;
                for (int k = 0; k < 10; k++) {
                    int c = grp * 2 + k / 5, a = opset == 18 ? grp : c;
                    double want = (v[k] - mean) / sqrt(var + (double)0.01f) * sc[a] + bi[a];
                    TG_CHECK_NEAR(got[(n * 6 + grp * 2) * 5 + k], want, 1e-12);
                }
            }
        tg_interp_destroy(ip);
        tg_graph_destroy(g);
    }
    onnx_node bad = {.op_type = "GroupNormalization",
                     .opset = 21,
                     .n_outputs = 1,
                     .in = {F32("x", 3, 2, 6, 5), F32("scale", 1, 6), F32("bias", 1, 6)},
                     .attr = {INT("num_groups", 4)}};
    TG_CHECK(strstr(onnx_node_refusal(&bad), "num_groups 4 does not divide 6 channels") != NULL);
    bad.opset = 18;
    bad.attr[0] = (onnx_node_attr)INT("num_groups", 3);
    TG_CHECK(strstr(onnx_node_refusal(&bad), "scale must be [3] at opset 18") != NULL);
}

/* What the random ops build: the shape, the moments of the draws (the
 * kernels' own tests: ops/random), new draws at the next step. */
static void test_random_ops(void)
{
    static const int64_t shape[] = {200, 100};
    static const struct {
        const char *op;
        double mean, sd;
    } cases[] = {{"RandomNormal", 1.0, 2.0},
                 {"RandomNormalLike", 1.0, 2.0},
                 {"RandomUniform", 0.5, 1.0 / sqrt(3.0)}};
    for (int i = 0; i < 3; i++) {
        bool like = i == 1, uniform = i == 2;
        onnx_node nd = {.op_type = cases[i].op, .opset = 13, .n_outputs = 1};
        if (like)
            nd.in[0] = (onnx_node_input)F32("x", 2, 200, 100);
        else
            nd.attr[2] = (onnx_node_attr)INTS_ATTR("shape", shape, 2);
        nd.attr[0] = (onnx_node_attr)FLOAT(uniform ? "low" : "mean", uniform ? -0.5f : 1.0f);
        nd.attr[1] = (onnx_node_attr)FLOAT(uniform ? "high" : "scale", uniform ? 1.5f : 2.0f);
        tg_graph *g = tg_graph_create();
        tg_tensor *y = onnx_node_build(g, &nd);
        TG_CHECK(y && tg_shape_numel(tg_tensor_shape(y)) == 20000 && tg_tensor_shape(y).ndim == 2);
        tg_session *s = NULL;
        TG_CHECK_OK(y ? tg_session_create(g, NULL, &s) : TG_ERR_INVALID_ARG);
        static float a[20000], b2[20000];
        if (s && tg_session_run(s) == TG_OK && tg_session_read(s, y, a, sizeof a) == TG_OK &&
            tg_session_run(s) == TG_OK && tg_session_read(s, y, b2, sizeof b2) == TG_OK) {
            double sum = 0, sq = 0;
            int same = 0;
            for (int k = 0; k < 20000; k++)
                sum += a[k], sq += (a[k] - cases[i].mean) * (a[k] - cases[i].mean),
                    same += a[k] == b2[k];
            TG_CHECK_NEAR(sum / 20000, cases[i].mean, 0.05);
            TG_CHECK_NEAR(sqrt(sq / 20000), cases[i].sd, 0.05);
            TG_CHECK(same < 20); /* each run draws afresh */
        } else {
            tg_test_fail(__FILE__, __LINE__, "%s: did not run", cases[i].op);
        }
        tg_session_destroy(s);
        tg_graph_destroy(g);
    }
}

int main(void)
{
    TG_RUN(test_group_norm);
    TG_RUN(test_random_ops);
    TG_RUN(test_silu_fused);
    return tg_test_finish();
}
