/* onnx/onnx_reduce.c - ONNX's norm-like reductions, each built from ops
 * that have kernels, reference kernels and gradients:
 *
 *   ReduceL1         reduce_sum(|x|)
 *   ReduceL2         sqrt(reduce_sum(x * x))
 *   ReduceSumSquare  reduce_sum(x * x)
 *   ReduceLogSum     log(reduce_sum(x))
 *   ReduceLogSumExp  m + log(reduce_sum(exp(x - m))), m = floor(reduce_max(x)),
 *                    so that no exp overflows (each is at most e) nor all
 *                    underflow; floor's gradient is 0, so x's is the
 *                    softmax itself, where a shift by the max would add 1
 *                    - sum(softmax), zero but for float32's rounding
 *
 * and MeanVarianceNormalization, (x - mean) / (sqrt(var) + 1e-9) over
 * `axes` (default 0, 2, 3), the statistics as two reduce_means, the 1e-9
 * ONNX's reference adds.
 *
 * Their axes are the attribute before opset 18 and the input from it, as
 * ReduceMean's (ob_reduce_axes). noop_with_empty_axes is refused: ONNX's
 * text and its reference implementation disagree on what these return
 * (x, or |x| and x^2). ReduceProd is not here: no composition of the
 * existing ops is exact for it, and it has no kernel of its own.
 * At x = 0, ReduceL2's gradient is NaN (sqrt's at 0 times 0), where
 * PyTorch's norm gives 0.
 */
#include "onnx/onnx_build.h"

#include <string.h>

typedef enum { R_L1, R_L2, R_SUM_SQUARE, R_LOG_SUM, R_LOG_SUM_EXP } reduce_kind;

static tg_status reduce_norm(onnx_builder *b, reduce_kind k)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    unsigned mask;
    bool noop;
    TG_TRY(ob_reduce_axes(b, tg_tensor_shape(x).ndim, 18, &mask, &noop));
    if (noop)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "noop_with_empty_axes with no axes (ONNX's text and reference differ on "
                       "what %s returns then)",
                       b->node->op_type);
    bool keep = ob_attr_int(b, "keepdims", 1) != 0;
    tg_graph *g = b->g;
    switch (k) {
    case R_L1:
        return ob_set(b, 0, tg_reduce_sum(g, tg_abs(g, x), mask, keep));
    case R_L2:
        return ob_set(b, 0, tg_sqrt(g, tg_reduce_sum(g, tg_mul(g, x, x), mask, keep)));
    case R_SUM_SQUARE:
        return ob_set(b, 0, tg_reduce_sum(g, tg_mul(g, x, x), mask, keep));
    case R_LOG_SUM:
        return ob_set(b, 0, tg_log(g, tg_reduce_sum(g, x, mask, keep)));
    default: {
        /* m twice: the two paths' gradients (dy and -sum(dy softmax)) would
         * meet at one m as a difference that is zero but for rounding */
        tg_tensor *m = tg_floor(g, tg_reduce_max(g, x, mask, true));
        tg_tensor *s = tg_reduce_sum(g, tg_exp(g, tg_sub(g, x, m)), mask, keep);
        tg_tensor *mk = tg_floor(g, tg_reduce_max(g, x, mask, keep));
        return ob_set(b, 0, tg_add(g, tg_log(g, s), mk));
    }
    }
}

static tg_status map_reduce_l1(onnx_builder *b)
{
    return reduce_norm(b, R_L1);
}
static tg_status map_reduce_l2(onnx_builder *b)
{
    return reduce_norm(b, R_L2);
}
static tg_status map_reduce_sum_square(onnx_builder *b)
{
    return reduce_norm(b, R_SUM_SQUARE);
}
static tg_status map_reduce_log_sum(onnx_builder *b)
{
    return reduce_norm(b, R_LOG_SUM);
}
static tg_status map_reduce_log_sum_exp(onnx_builder *b)
{
    return reduce_norm(b, R_LOG_SUM_EXP);
}

static tg_status map_mvn(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    int nd = tg_tensor_shape(x).ndim, n;
    const int64_t *a = ob_attr_ints(b, "axes", &n);
    static const int64_t dflt[3] = {0, 2, 3};
    if (!a)
        a = dflt, n = 3;
    unsigned mask = 0;
    for (int k = 0; k < n; k++) {
        int ax = 0;
        TG_TRY(ob_axis(b, a[k], nd, &ax));
        mask |= 1u << ax;
    }
    tg_graph *g = b->g;
    tg_tensor *d = tg_sub(g, x, tg_reduce_mean(g, x, mask, true));
    tg_tensor *sd = tg_sqrt(g, tg_reduce_mean(g, tg_mul(g, d, d), mask, true));
    return ob_set(b, 0, tg_div(g, d, tg_scale(g, sd, 1.0f, 1e-9f)));
}

#define REDUCE_ATTRS "axes,keepdims,noop_with_empty_axes"
const ob_op tg_onnx_reduce_ops[] = {
    {"ReduceL1", map_reduce_l1, REDUCE_ATTRS},
    {"ReduceL2", map_reduce_l2, REDUCE_ATTRS},
    {"ReduceSumSquare", map_reduce_sum_square, REDUCE_ATTRS},
    {"ReduceLogSum", map_reduce_log_sum, REDUCE_ATTRS},
    {"ReduceLogSumExp", map_reduce_log_sum_exp, REDUCE_ATTRS},
    {"MeanVarianceNormalization", map_mvn, "axes"},
};
const int tg_onnx_reduce_op_count = (int)(sizeof tg_onnx_reduce_ops / sizeof tg_onnx_reduce_ops[0]);
