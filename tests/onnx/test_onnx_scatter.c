/* tests/onnx/test_onnx_scatter.c - src/onnx/onnx_scatter.c: ScatterElements,
 * ScatterND (reductions none and add) and TopK as the importer builds them,
 * their gradients against finite differences and their kernels against the
 * reference (the forward values are ONNX's own cases in onnx/conformance),
 * and what they refuse, by name. ScatterElements with indices given at run
 * time and MaxPool's Indices output (onnx_ops_norm.c), the pair a SegNet's
 * unpooling exports to, through the engine.
 *
 * TG_TEST_LABELS: onnx
 */
#include "onnx_node_model.h"

#include "runtime/interp.h"
#include "tilegraph/options.h"

#include <string.h>

static const int64_t rows2x4[] = {2, 0, 1, 2, 0, 2, 0, 1};     /* [2, 4]: no column repeats */
static const int64_t cols3x3[] = {1, 1, 0, 2, -1, 2, 0, 0, 3}; /* [3, 3] along axis 1, repeats */
static const int64_t nd_rows[] = {1, 3, 1};                    /* [3, 1] */
static const int64_t nd_cells[] = {0, 2, 3, 1};                /* [2, 2] */
static const int64_t k2[] = {2};

static void test_scatter_gradients(void)
{
    onnx_node none = {
        .op_type = "ScatterElements",
        .opset = 13,
        .n_outputs = 1,
        .in = {F32("data", 2, 3, 4), INTS("idx", rows2x4, 2, 2, 4), F32("upd", 2, 2, 4)}};
    onnx_node_check("ScatterElements none", &none, 1e-6);
    onnx_node add = {
        .op_type = "ScatterElements",
        .opset = 16,
        .n_outputs = 1,
        .in = {F32("data", 2, 3, 4), INTS("idx", cols3x3, 2, 3, 3), F32("upd", 2, 3, 3)},
        .attr = {INT("axis", 1), STR("reduction", "add")}};
    onnx_node_check("ScatterElements add, repeated and negative indices", &add, 1e-6);
    onnx_node old = none;
    old.op_type = "Scatter";
    old.opset = 9;
    onnx_node_check("Scatter (opset 9)", &old, 1e-6);
    onnx_node nd_add = {
        .op_type = "ScatterND",
        .opset = 16,
        .n_outputs = 1,
        .in = {F32("data", 2, 4, 3), INTS("idx", nd_rows, 2, 3, 1), F32("upd", 2, 3, 3)},
        .attr = {STR("reduction", "add")}};
    onnx_node_check("ScatterND add of rows", &nd_add, 1e-6);
    onnx_node nd_cell = {
        .op_type = "ScatterND",
        .opset = 13,
        .n_outputs = 1,
        .in = {F32("data", 2, 4, 3), INTS("idx", nd_cells, 2, 2, 2), F32("upd", 1, 2)}};
    onnx_node_check("ScatterND none of cells", &nd_cell, 1e-6);
}

static void test_gather_nd(void)
{
    static const int64_t cells[] = {0, 2, 3, 1, 0, 2}; /* [3, 2] into [4, 3] */
    static const int64_t batch[] = {1, 0, 2, 2, 0, 1}; /* [2, 3, 1], batch_dims 1 */
    onnx_node nd = {.op_type = "GatherND",
                    .opset = 13,
                    .n_outputs = 1,
                    .in = {F32("data", 2, 4, 3), INTS("idx", cells, 2, 3, 2)}};
    onnx_node_check("GatherND of cells, one twice", &nd, 1e-6);
    onnx_node bd = {.op_type = "GatherND",
                    .opset = 13,
                    .n_outputs = 1,
                    .in = {F32("data", 3, 2, 3, 4), INTS("idx", batch, 3, 2, 3, 1)},
                    .attr = {INT("batch_dims", 1)}};
    onnx_node_check("GatherND of rows, batch_dims 1", &bd, 1e-6);
}

/* The values' gradient and kernels (the indices are checked by ONNX's cases). */
static void test_topk(void)
{
    for (int largest = 0; largest <= 1; largest++) {
        onnx_node nd = {.op_type = "TopK",
                        .opset = 11,
                        .n_outputs = 2,
                        .in = {F32("x", 3, 2, 5, 3), INTS("k", k2, 1, 1)},
                        .attr = {INT("axis", 1), INT("largest", largest)}};
        onnx_node_check(largest ? "TopK largest" : "TopK smallest", &nd, 1e-6);
    }
}

static void expect_refused(const onnx_node *nd, const char *part)
{
    const char *msg = onnx_node_refusal(nd);
    if (!strstr(msg, part))
        tg_test_fail(__FILE__, __LINE__, "%s: expected a refusal with \"%s\", got \"%s\"",
                     nd->op_type, part, msg);
}

static void test_refused(void)
{
    static const int64_t dup[] = {0, 0, 1, 2, 0, 2, 0, 1}; /* element (0, 0) written twice */
    static const int64_t far[] = {0, 0, 1, 2, 1, 2, 0, 3};
    onnx_node nd = {.op_type = "ScatterElements",
                    .opset = 13,
                    .n_outputs = 1,
                    .in = {F32("data", 2, 3, 4), INTS("idx", dup, 2, 2, 4), F32("upd", 2, 2, 4)}};
    expect_refused(&nd, "element 0 of the data is written twice with reduction none");
    nd.in[1].values = far;
    expect_refused(&nd, "index 3 is out of range for axis 0 of size 3");
    nd.in[1].values = rows2x4;
    nd.opset = 16;
    nd.attr[0] = (onnx_node_attr)STR("reduction", "mul");
    expect_refused(&nd, "reduction 'mul' is not implemented (none and add are)");
    nd.opset = 13;
    nd.attr[0] = (onnx_node_attr)STR("reduction", "add");
    expect_refused(&nd, "attribute 'reduction' belongs to ScatterElements");
    static const int64_t k9[] = {9};
    onnx_node topk = {.op_type = "TopK",
                      .opset = 11,
                      .n_outputs = 2,
                      .in = {F32("x", 2, 2, 5), INTS("k", k9, 1, 1)}};
    expect_refused(&topk, "K = 9 along an axis of 5");
}

/* Import nd (inputs made by the importer), run it once with the given
 * input data (f32 or i32 by the input's type, in order), read output k
 * into out (as f32); the run's status. */
static tg_status run_node(const onnx_node *nd, const void *const *in, int k, float *out, int64_t n)
{
    tg_onnx_model *m = onnx_node_model(nd);
    tg_graph *g = tg_graph_create();
    tg_onnx_build_config c = {.batch = 1};
    tg_onnx_outputs io = {0};
    tg_status st = m ? tg_onnx_build(m, g, &c, &io) : TG_ERR_INVALID_ARG;
    tg_onnx_model_destroy(m);
    tg_session *s = NULL;
    tg_options *o = tg_options_create();
    if (st == TG_OK)
        st = tg_session_create(g, o, &s);
    tg_options_destroy(o);
    for (int i = 0; st == TG_OK && i < io.n_inputs; i++) {
        tg_shape sh = tg_tensor_shape(io.inputs[i]);
        st = tg_session_write(s, io.inputs[i], in[i], (size_t)tg_shape_numel(sh) * 4);
    }
    if (st == TG_OK)
        st = tg_session_run(s);
    if (st == TG_OK && tg_tensor_dtype(io.outputs[k]) == TG_I32) {
        int32_t v[64];
        st = n <= 64 ? tg_session_read(s, io.outputs[k], v, (size_t)n * sizeof *v) : TG_ERR_SHAPE;
        for (int64_t e = 0; st == TG_OK && e < n; e++)
            out[e] = (float)v[e];
    } else if (st == TG_OK) {
        st = tg_session_read(s, io.outputs[k], out, (size_t)n * sizeof *out);
    }
    tg_session_destroy(s);
    tg_graph_destroy(g);
    return st;
}

/* MaxPool's Indices: the flat index of each window's first maximum, over
 * the whole [N, C, H, W] input (the second plane's start at 16). */
static const int64_t two2[] = {2, 2};

static void test_maxpool_indices(void)
{
    onnx_node nd = {.op_type = "MaxPool",
                    .opset = 13,
                    .n_outputs = 2,
                    .in = {F32("x", 4, 1, 2, 4, 4)},
                    .attr = {INTS_ATTR("kernel_shape", two2, 2), INTS_ATTR("strides", two2, 2)}};
    float x[32];
    for (int k = 0; k < 32; k++)
        x[k] = (float)((k * 7) % 32);
    x[0] = x[1] = 40; /* a tie: the first wins */
    float idx[8] = {0};
    TG_CHECK_OK(run_node(&nd, (const void *[]){x}, 1, idx, 8));
    for (int p = 0; p < 8; p++) {
        int c = p / 4, r = (p % 4) / 2, q = p % 2, best = -1;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                int at = c * 16 + (2 * r + i) * 4 + 2 * q + j;
                if (best < 0 || x[at] > x[best])
                    best = at;
            }
        TG_CHECK_NEAR(idx[p], best, 0);
    }
    TG_CHECK_NEAR(idx[0], 0, 0);
}

/* Indices given at run time: zeros with rows of updates written at them
 * (a twice-written element gets the mean, equal values kept exactly), and
 * an index outside the axis stops the run naming it. */
static void test_scatter_runtime_indices(void)
{
    onnx_node nd = {.op_type = "ScatterElements",
                    .opset = 13,
                    .n_outputs = 1,
                    .in = {F32("data", 2, 2, 5), I64_IN("idx", 2, 2, 2), F32("upd", 2, 2, 2)},
                    .attr = {INT("axis", 1)}};
    const float data[10] = {0};
    const int32_t idx[4] = {4, -5, 2, 2};
    const float upd[4] = {1, 2, 7, 7};
    float out[10] = {0};
    TG_CHECK_OK(run_node(&nd, (const void *[]){data, idx, upd}, 0, out, 10));
    const float want[10] = {2, 0, 0, 0, 1, 0, 0, 7, 0, 0};
    for (int k = 0; k < 10; k++)
        TG_CHECK_NEAR(out[k], want[k], 0);
    const int32_t bad[4] = {4, 0, 5, 1};
    TG_CHECK(run_node(&nd, (const void *[]){data, bad, upd}, 0, out, 10) == TG_ERR_INVALID_ARG);
    if (!strstr(tg_error_message(), "indices 'idx' hold 5 at [1, 0]"))
        tg_test_fail(__FILE__, __LINE__, "message: %s", tg_error_message());
}

/* MaxUnpool: the values' gradient and kernels, at the default output
 * shape and at a larger output_shape (the indices moved to the same place
 * of it); the values are ONNX's own cases (onnx/conformance). */
static void test_max_unpool(void)
{
    static const int64_t idx[] = {5, 7, 13, 15}, big[] = {1, 1, 5, 5};
    onnx_node nd = {.op_type = "MaxUnpool",
                    .opset = 11,
                    .n_outputs = 1,
                    .in = {F32("x", 4, 1, 1, 2, 2), INTS("i", idx, 4, 1, 1, 2, 2)},
                    .attr = {INTS_ATTR("kernel_shape", two2, 2), INTS_ATTR("strides", two2, 2)}};
    onnx_node_check("MaxUnpool", &nd, 1e-6);
    nd.in[2] = (onnx_node_input)INTS("shape", big, 1, 4);
    onnx_node_check("MaxUnpool to a larger output_shape", &nd, 1e-6);
}

/* MaxUnpool on [N, C, D, H, W] (a 3-D MaxPool's Indices): x's values at
 * their flat indices of the [1, 1, 2, 4, 4] output, zeros elsewhere. */
static void test_max_unpool_3d(void)
{
    static const int64_t idx[] = {0, 7, 21, 30}, two3[] = {2, 2, 2};
    onnx_node nd = {.op_type = "MaxUnpool",
                    .opset = 11,
                    .n_outputs = 1,
                    .in = {F32("x", 5, 1, 1, 1, 2, 2), INTS("i", idx, 5, 1, 1, 1, 2, 2)},
                    .attr = {INTS_ATTR("kernel_shape", two3, 3), INTS_ATTR("strides", two3, 3)}};
    onnx_node_check("MaxUnpool 3-D", &nd, 1e-6);
    tg_graph *g = tg_graph_create();
    tg_tensor *y = onnx_node_build(g, &nd);
    tg_interp *ip = NULL;
    TG_CHECK_OK(y ? tg_interp_create(g, 0, &ip) : TG_ERR_INVALID_ARG);
    TG_CHECK_OK(ip ? tg_interp_run(ip, 0) : TG_ERR_INVALID_ARG);
    if (ip) {
        const double *x = tg_interp_data(ip, tg_graph_find(g, "x")), *v = tg_interp_data(ip, y);
        TG_CHECK(tg_shape_equal(tg_tensor_shape(y), tg_shape_of(5, (int64_t[]){1, 1, 2, 4, 4})));
        for (int64_t e = 0, k = 0; e < 32; e++)
            TG_CHECK(v[e] == (k < 4 && idx[k] == e ? x[k++] : 0.0));
    }
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_scatter_gradients);
    TG_RUN(test_gather_nd);
    TG_RUN(test_topk);
    TG_RUN(test_refused);
    TG_RUN(test_maxpool_indices);
    TG_RUN(test_scatter_runtime_indices);
    TG_RUN(test_max_unpool);
    TG_RUN(test_max_unpool_3d);
    return tg_test_finish();
}
