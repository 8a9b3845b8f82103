/* tests/onnx/test_onnx_ops.c - mappings of src/onnx/onnx_ops_*.c that ONNX's
 * own cases check only forward: LayerNormalization's optional Mean and
 * InvStdDev outputs (gradients against finite differences, kernels against
 * the reference), Dropout's mask output (all kept in inference, refused in
 * training by name).
 *
 * TG_TEST_LABELS: onnx
 */
#include "onnx_node_model.h"

#include <string.h>

/* Output `output` of the node plus Y summed to its shape, so that the
 * scale (which the statistics do not read) has a gradient too. */
static tg_tensor *build_with_y(tg_graph *g, void *ctx)
{
    const onnx_node *nd = ctx;
    tg_onnx_model *m = onnx_node_model(nd);
    tg_tensor *x[2] = {tg_param(g, "x", tg_shape3(2, 3, 4), (tg_init){TG_INIT_UNIFORM, -1, 1}),
                       NULL};
    tg_shape ss = tg_shape_of(nd->in[1].ndim, nd->in[1].dim);
    x[1] = tg_param(g, "scale", ss, (tg_init){TG_INIT_UNIFORM, -1, 1});
    tg_onnx_build_config c = {.inputs = x, .n_inputs = 2};
    tg_onnx_outputs io;
    tg_status s = m ? tg_onnx_build(m, g, &c, &io) : TG_ERR_INVALID_ARG;
    tg_onnx_model_destroy(m);
    if (s != TG_OK)
        return NULL;
    tg_tensor *stat = io.outputs[nd->output];
    unsigned mask = nd->attr[0].i == 1 ? 6u : 4u;
    return tg_add(g, stat, tg_reduce_sum(g, io.outputs[0], mask, true));
}

static void test_layer_norm_statistics(void)
{
    for (int out = 0; out < 3; out++)
        for (int axis = 1; axis <= 2; axis++) {
            onnx_node nd = {.op_type = "LayerNormalization",
                            .opset = 17,
                            .n_outputs = 3,
                            .in = {F32("x", 3, 2, 3, 4), F32("scale", 2 - (axis - 1), 3, 4)},
                            .attr = {INT("axis", axis), FLOAT("epsilon", 0.01f)},
                            .output = out};
            if (axis == 2)
                nd.in[1] = (onnx_node_input)F32("scale", 1, 4);
            char label[64];
            snprintf(label, sizeof label, "LayerNormalization axis %d output %d", axis, out);
            /* InvStdDev's backward sums a gradient through the mean that is
             * zero but for rounding (sum of x - mean): that node's fast and
             * reference values differ by float32's rounding of 0, so its
             * kernels are checked through the other outputs alone */
            tg_test_build_fn build = out ? build_with_y : onnx_node_build;
            tg_gradcheck(label, build, &nd, (tg_check_opts){.tol = 1e-5});
            for (int threads = 1; out < 2 && threads <= 2; threads++)
                tg_check_kernels(label, build, &nd, threads, 1e-5, (tg_check_opts){0});
        }
}

static void test_dropout_mask(void)
{
    onnx_node nd = {
        .op_type = "Dropout", .opset = 13, .n_outputs = 2, .in = {F32("x", 2, 3, 4)}, .output = 1};
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, false);
    tg_tensor *mask = onnx_node_build(g, &nd);
    TG_CHECK(mask && tg_tensor_dtype(mask) == TG_I32);
    tg_session *s = NULL;
    TG_CHECK_OK(mask ? tg_session_create(g, NULL, &s) : TG_ERR_INVALID_ARG);
    int32_t m[12] = {0};
    if (s && tg_session_run(s) == TG_OK && tg_session_read(s, mask, m, sizeof m) == TG_OK)
        for (int k = 0; k < 12; k++)
            TG_CHECK(m[k] == 1);
    tg_session_destroy(s);
    tg_graph_destroy(g);
    /* in training the mask is the dropout op's own: refused by name */
    tg_onnx_model *model = onnx_node_model(&nd);
    g = tg_graph_create();
    tg_onnx_build_config c = {.batch = 1};
    tg_onnx_outputs io;
    TG_CHECK(model && tg_onnx_build(model, g, &c, &io) == TG_ERR_UNSUPPORTED);
    TG_CHECK(strstr(tg_error_message(), "the mask output is read, in training") != NULL);
    tg_graph_destroy(g);
    tg_onnx_model_destroy(model);
}

/* Transpose of an integer initializer is folded at import (swin_t's
 * reversed pads): the output is the constant, transposed exactly. A perm
 * that repeats a dim is refused by name. */
static void test_transpose_folds_and_checks_perm(void)
{
    static const int64_t a[6] = {1, 2, 3, 40, 50, 60}, perm[2] = {1, 0}, twice[2] = {0, 0};
    onnx_node nd = {.op_type = "Transpose",
                    .opset = 13,
                    .n_outputs = 1,
                    .in = {INTS("a", a, 2, 2, 3)},
                    .attr = {INTS_ATTR("perm", perm, 2)}};
    tg_graph *g = tg_graph_create();
    tg_tensor *y = onnx_node_build(g, &nd);
    TG_CHECK(y && tg_tensor_shape(y).dim[0] == 3 && tg_tensor_shape(y).dim[1] == 2);
    tg_session *s = NULL;
    TG_CHECK_OK(y ? tg_session_create(g, NULL, &s) : TG_ERR_INVALID_ARG);
    /* a constant graph output is materialised as f32 */
    float got[6] = {0}, want[6] = {1, 40, 2, 50, 3, 60};
    if (s && tg_session_run(s) == TG_OK && tg_session_read(s, y, got, sizeof got) == TG_OK)
        for (int k = 0; k < 6; k++)
            TG_CHECK(got[k] == want[k]);
    tg_session_destroy(s);
    tg_graph_destroy(g);

    onnx_node bad = {.op_type = "Transpose",
                     .opset = 13,
                     .n_outputs = 1,
                     .in = {F32("x", 2, 2, 3)},
                     .attr = {INTS_ATTR("perm", twice, 2)}};
    tg_onnx_model *model = onnx_node_model(&bad);
    g = tg_graph_create();
    tg_tensor *x = tg_param(g, "x", tg_shape2(2, 3), (tg_init){TG_INIT_UNIFORM, -1, 1});
    tg_onnx_build_config c = {.inputs = &x, .n_inputs = 1};
    tg_onnx_outputs io;
    TG_CHECK(model && tg_onnx_build(model, g, &c, &io) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_error_message(), "perm must name each of the 2 dims once") != NULL);
    tg_graph_destroy(g);
    tg_onnx_model_destroy(model);
}

int main(void)
{
    TG_RUN(test_layer_norm_statistics);
    TG_RUN(test_dropout_mask);
    TG_RUN(test_transpose_folds_and_checks_perm);
    return tg_test_finish();
}
