/* tests/onnx/test_onnx_scatter.c - src/onnx/onnx_scatter.c: ScatterElements,
 * ScatterND (reductions none and add) and TopK as the importer builds them,
 * their gradients against finite differences and their kernels against the
 * reference (the forward values are ONNX's own cases in onnx/conformance),
 * and what they refuse, by name.
 *
 * TG_TEST_LABELS: onnx
 */
#include "onnx_node_model.h"

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

int main(void)
{
    TG_RUN(test_scatter_gradients);
    TG_RUN(test_gather_nd);
    TG_RUN(test_topk);
    TG_RUN(test_refused);
    return tg_test_finish();
}
