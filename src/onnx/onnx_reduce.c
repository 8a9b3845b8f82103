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
 * (x, or |x| and x^2). ReduceProd is folded on constants (a dynamic-batch
 * export's element count, Shape then ReduceProd, before nn.EmbeddingBag's
 * offsets) and on tensors is the product of the slices along each reduced
 * axis in turn: float multiplications in index order, exact as such, with
 * Mul's gradients; an axis longer than 64 is refused.
 * At x = 0, ReduceL2's gradient is NaN (sqrt's at 0 times 0), where
 * PyTorch's norm gives 0.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"
#include "core/check.h"

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
    case R_LOG_SUM_EXP: {
        /* m twice: the two paths' gradients (dy and -sum(dy softmax)) would
         * meet at one m as a difference that is zero but for rounding */
        tg_tensor *m = tg_floor(g, tg_reduce_max(g, x, mask, true));
        tg_tensor *s = tg_reduce_sum(g, tg_exp(g, tg_sub(g, x, m)), mask, keep);
        tg_tensor *mk = tg_floor(g, tg_reduce_max(g, x, mask, keep));
        return ob_set(b, 0, tg_add(g, tg_log(g, s), mk));
    }
    default:
        TG_UNREACHABLE("reduce kind", k);
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

/* ReduceProd of a constant, with the output shape os. */
static tg_status fold_prod(onnx_builder *b, const tg_onnx_data *x, unsigned mask, tg_shape os)
{
    tg_onnx_data out;
    TG_TRY(ob_data_new(b, x->f != NULL, os.ndim, os.dim, &out));
    double *acc = tg_malloc((size_t)(out.n ? out.n : 1) * sizeof *acc);
    if (!acc) {
        tg_onnx_data_free(&out);
        return ob_fail(b, TG_ERR_NOMEM, "out of memory");
    }
    for (int64_t k = 0; k < out.n; k++)
        acc[k] = 1.0;
    for (int64_t e = 0; e < x->n; e++) {
        int64_t r = e, o = 0, stride = 1;
        for (int d = x->ndim - 1; d >= 0; d--) {
            int64_t at = r % x->dim[d];
            r /= x->dim[d];
            if (!(mask >> d & 1u))
                o += at * stride, stride *= x->dim[d];
        }
        acc[o] *= ob_get(x, e);
    }
    for (int64_t k = 0; k < out.n; k++)
        ob_put(&out, k, acc[k]);
    tg_free(acc);
    return ob_set_const(b, 0, &out);
}

/* ReduceProd of a tensor: along each reduced axis the product of its
 * slices, kept as a dim of 1, then those dims dropped unless keepdims. */
static tg_tensor *tensor_prod(onnx_builder *b, tg_tensor *x, unsigned mask, tg_shape os)
{
    tg_shape s = tg_tensor_shape(x);
    for (int d = 0; d < s.ndim; d++) {
        if (!(mask >> d & 1u))
            continue;
        if (s.dim[d] < 1 || s.dim[d] > 64) {
            ob_fail(b, TG_ERR_UNSUPPORTED,
                    "ReduceProd over an axis of %lld elements (1 to 64 are built, as that many "
                    "multiplications)",
                    (long long)s.dim[d]);
            return NULL;
        }
        tg_tensor *acc = tg_slice(b->g, x, d, 0, 1);
        for (int64_t j = 1; j < s.dim[d]; j++)
            acc = tg_mul(b->g, acc, tg_slice(b->g, x, d, j, j + 1));
        x = acc;
    }
    return tg_reshape(b->g, x, os);
}

static tg_status map_reduce_prod(onnx_builder *b)
{
    const tg_onnx_data *xc;
    tg_tensor *x;
    tg_shape s;
    TG_TRY(ob_value_in(b, 0, &xc, &x, &s));
    unsigned mask;
    bool noop;
    TG_TRY(ob_reduce_axes(b, s.ndim, 18, &mask, &noop));
    if (noop)
        mask = 0;
    bool keep = ob_attr_int(b, "keepdims", 1) != 0;
    tg_shape os = tg_shape_of(0, NULL);
    for (int d = 0; d < s.ndim; d++)
        if (!(mask >> d & 1u) || keep)
            os.dim[os.ndim++] = mask >> d & 1u ? 1 : s.dim[d];
    if (xc)
        return fold_prod(b, xc, mask, os);
    tg_tensor *y = tensor_prod(b, x, mask, os);
    return y || tg_graph_status(b->g) != TG_OK ? ob_set(b, 0, y) : TG_ERR_UNSUPPORTED;
}

#define REDUCE_ATTRS "axes,keepdims,noop_with_empty_axes"
const ob_op tg_onnx_reduce_ops[] = {
    {"ReduceL1", map_reduce_l1, REDUCE_ATTRS},
    {"ReduceL2", map_reduce_l2, REDUCE_ATTRS},
    {"ReduceSumSquare", map_reduce_sum_square, REDUCE_ATTRS},
    {"ReduceLogSum", map_reduce_log_sum, REDUCE_ATTRS},
    {"ReduceLogSumExp", map_reduce_log_sum_exp, REDUCE_ATTRS},
    {"ReduceProd", map_reduce_prod, REDUCE_ATTRS},
    {"MeanVarianceNormalization", map_mvn, "axes"},
};
const int tg_onnx_reduce_op_count = (int)(sizeof tg_onnx_reduce_ops / sizeof tg_onnx_reduce_ops[0]);
