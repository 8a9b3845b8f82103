/* tests/onnx/test_onnx_reduce.c - src/onnx/onnx_reduce.c: ReduceL1, ReduceL2,
 * ReduceSumSquare, ReduceLogSum, ReduceLogSumExp and ReduceProd as the importer builds
 * them (axes as attribute and as the opset 18 input, keepdims or not):
 * values against double-precision sums written here, gradients against
 * finite differences, kernels against the reference; noop_with_empty_axes
 * refused by name; MeanVarianceNormalization's gradient and kernels. (ONNX's
 * own cases: onnx/conformance.)
 *
 * TG_TEST_LABELS: onnx
 */
#include "onnx_node_model.h"

#include "runtime/interp.h"

#include <math.h>
#include <string.h>

static const char *const ops[] = {"ReduceL1",     "ReduceL2",        "ReduceSumSquare",
                                  "ReduceLogSum", "ReduceLogSumExp", "ReduceProd"};
static const int64_t axis1[] = {1}, axes02[] = {0, -1};

/* x [3, 4, 2] reduced over axis 1 (axes02: over 0 and 2) */
static onnx_node node_of(int op, bool input_axes, bool both, bool keep)
{
    onnx_node nd = {.op_type = ops[op], .opset = input_axes ? 18 : 13, .n_outputs = 1};
    nd.in[0] = (onnx_node_input)F32("x", 3, 3, 4, 2);
    if (input_axes)
        nd.in[1] = (onnx_node_input)INTS("axes", both ? axes02 : axis1, 1, both ? 2 : 1);
    else
        nd.attr[1] = (onnx_node_attr)INTS_ATTR("axes", both ? axes02 : axis1, both ? 2 : 1);
    nd.attr[0] = (onnx_node_attr)INT("keepdims", keep);
    if (op == 3) /* log of a sum: positive values */
        nd.lo = 0.1f, nd.hi = 1.0f;
    return nd;
}

static double reduce_ref(int op, const double *x, int64_t i, int64_t j, bool both)
{
    /* over axis 1 at (i, ., j); both: over axes 0 and 2 at (., i, .) */
    double acc = op == 5 ? 1 : 0, m = -INFINITY;
    for (int pass = 0; pass < 2; pass++)
        for (int64_t a = 0; a < (both ? 3 : 4); a++)
            for (int64_t c = 0; c < (both ? 2 : 1); c++) {
                double v = both ? x[(a * 4 + i) * 2 + c] : x[(i * 4 + a) * 2 + j];
                if (pass == 0) {
                    m = fmax(m, v);
                    continue;
                }
                if (op == 5)
                    acc *= v;
                else
                    acc += op == 0              ? fabs(v)
                           : op == 1 || op == 2 ? v * v
                           : op == 3            ? v
                                                : exp(v - m);
            }
    return op == 1 ? sqrt(acc) : op == 3 ? log(acc) : op == 4 ? m + log(acc) : acc;
}

static void test_values_and_gradients(void)
{
    for (int op = 0; op < 6; op++)
        for (int form = 0; form < 4; form++) {
            bool input_axes = form & 1, both = form & 2, keep = form == 1;
            onnx_node nd = node_of(op, input_axes, both, keep);
            char label[96];
            snprintf(label, sizeof label, "%s%s%s%s", ops[op], input_axes ? " axes input" : "",
                     both ? " axes 0,-1" : "", keep ? " keepdims" : "");
            onnx_node_check(label, &nd, 1e-5);
            tg_graph *g = tg_graph_create();
            tg_tensor *y = onnx_node_build(g, &nd);
            tg_interp *ip = NULL;
            if (y && tg_interp_create(g, 0, &ip) == TG_OK && tg_interp_run(ip, 0) == TG_OK) {
                const double *x = NULL, *got = tg_interp_data(ip, y);
                for (int t = 0; t < tg_graph_tensor_count(g); t++)
                    if (!strcmp(tg_tensor_name(tg_graph_tensor(g, t)), "x"))
                        x = tg_interp_data(ip, tg_graph_tensor(g, t));
                TG_CHECK(tg_shape_numel(tg_tensor_shape(y)) == (both ? 4 : 6));
                TG_CHECK(tg_tensor_shape(y).ndim == (keep ? 3 : both ? 1 : 2));
                for (int64_t k = 0; x && k < (both ? 4 : 6); k++)
                    TG_CHECK_NEAR(got[k], reduce_ref(op, x, both ? k : k / 2, k % 2, both), 1e-12);
            } else {
                tg_test_fail(__FILE__, __LINE__, "%s: not built or run", label);
            }
            tg_interp_destroy(ip);
            tg_graph_destroy(g);
        }
}

static void test_mvn(void)
{
    static const int64_t axes[] = {0, 2};
    onnx_node nd = {.op_type = "MeanVarianceNormalization",
                    .opset = 13,
                    .n_outputs = 1,
                    .in = {F32("x", 4, 2, 3, 2, 2)}};
    onnx_node_check("MeanVarianceNormalization", &nd, 1e-5);
    nd.attr[0] = (onnx_node_attr)INTS_ATTR("axes", axes, 2);
    onnx_node_check("MeanVarianceNormalization axes 0, 2", &nd, 1e-5);
}

static void test_refused(void)
{
    onnx_node nd = {.op_type = "ReduceL2",
                    .opset = 18,
                    .n_outputs = 1,
                    .in = {F32("x", 2, 3, 4)},
                    .attr = {INT("noop_with_empty_axes", 1)}};
    const char *msg = onnx_node_refusal(&nd);
    TG_CHECK(strstr(msg, "noop_with_empty_axes with no axes") != NULL);
    onnx_node old = {.op_type = "ReduceL1",
                     .opset = 13,
                     .n_outputs = 1,
                     .in = {F32("x", 2, 3, 4), INTS("axes", axis1, 1, 1)}};
    msg = onnx_node_refusal(&old);
    TG_CHECK(strstr(msg, "an axes input, which ReduceL1 takes from opset 18") != NULL);
    onnx_node prod = {
        .op_type = "ReduceProd", .opset = 13, .n_outputs = 1, .in = {F32("x", 2, 2, 65)}};
    msg = onnx_node_refusal(&prod);
    TG_CHECK(strstr(msg, "ReduceProd over an axis of 65 elements (1 to 64 are built") != NULL);
}

int main(void)
{
    TG_RUN(test_values_and_gradients);
    TG_RUN(test_mvn);
    TG_RUN(test_refused);
    return tg_test_finish();
}
