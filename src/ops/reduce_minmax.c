/* ops/reduce_minmax.c - REDUCE_MAX and REDUCE_MIN over a set of axes (ONNX
 * ReduceMax / ReduceMin, torch.amax / torch.amin) and their gradient
 * REDUCE_MINMAX_BWD.
 *
 * Params (ops/shape.h): the axes mask (bit i = axis i) and keepdim. A NaN in a
 * group makes its result NaN (as PyTorch). The gradient follows torch.amax:
 * it is split evenly between the elements equal to the result (ties share
 * it), computed as torch.amax does, dy / count * (x == y), so a group whose
 * result is NaN (count 0) gets NaN gradients, as in PyTorch.
 *
 * REDUCE_MINMAX_BWD takes (dy, x, y) with dy and y in the "keep" shape (x's
 * rank, 1 on every reduced axis) and gives dx in x's shape; its mask is the
 * forward one. Its fast kernel counts the ties of each group in scratch.
 */
#include "ops/broadcast.h"
#include "ops/shape.h"

#include "core/error.h"

#include <math.h>

/* ---- shape rules ------------------------------------------------------------------- */

static tg_status need_f32(const tg_tensor *node, int k)
{
    if (node->in[k]->dtype != TG_F32)
        return tg_error(TG_ERR_DTYPE, "input '%s' is %s; this op takes f32", node->in[k]->name,
                        tg_dtype_name(node->in[k]->dtype));
    return TG_OK;
}

static tg_status check_mask(int64_t mask, tg_shape in)
{
    if (mask <= 0 || (mask >> in.ndim) != 0) {
        char a[96];
        return tg_error(TG_ERR_INVALID_ARG,
                        "axes mask 0x%llx must name at least one axis, and only axes of %s",
                        (unsigned long long)mask, tg_shape_str(in, a, sizeof a));
    }
    return TG_OK;
}

static tg_status infer_reduce(tg_tensor *node)
{
    if (node->n_in != 1)
        return tg_error(TG_ERR_INVALID_ARG, "takes 1 input, got %d", node->n_in);
    TG_TRY(need_f32(node, 0));
    tg_shape in = node->in[0]->shape;
    int64_t mask = tg_reduce_mask(node);
    TG_TRY(check_mask(mask, in));
    node->dtype = TG_F32;
    node->shape = tg_reduce_out_shape(in, mask, tg_reduce_keepdim(node));
    return TG_OK;
}

static tg_status infer_bwd(tg_tensor *node)
{
    if (node->n_in != 3)
        return tg_error(TG_ERR_INVALID_ARG, "takes 3 inputs (dy, x, y), got %d", node->n_in);
    for (int k = 0; k < 3; k++)
        TG_TRY(need_f32(node, k));
    tg_shape x = node->in[1]->shape;
    TG_TRY(check_mask(tg_reduce_mask(node), x));
    tg_shape k = tg_reduce_keep_shape(x, tg_reduce_mask(node));
    if (!tg_shape_equal(node->in[0]->shape, k) || !tg_shape_equal(node->in[2]->shape, k)) {
        char a[96];
        return tg_error(TG_ERR_SHAPE, "dy and y must have the reduced shape %s",
                        tg_shape_str(k, a, sizeof a));
    }
    node->dtype = TG_F32;
    node->shape = x;
    return TG_OK;
}

static double flops_fwd(const tg_tensor *node)
{
    return (double)tg_numel(node->in[0]);
}
static double flops_bwd(const tg_tensor *node)
{
    return 3 * (double)tg_numel(node);
}

/* ---- reference kernels (plain loops over every element) ------------------------------ */

static void ref_reduce(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    tg_shape xs = node->in[0]->shape, ks = tg_reduce_keep_shape(xs, tg_reduce_mask(node));
    bool is_max = node->op == TG_OP_REDUCE_MAX;
    for (int64_t k = 0; k < tg_numel(node); k++)
        a->out[k] = is_max ? -INFINITY : INFINITY;
    for (int64_t i = 0; i < tg_shape_numel(xs); i++) {
        double v = a->in[0][i], *r = &a->out[tg_bcast_ref_offset(xs, ks, i)];
        if (isnan(v) || (is_max ? v > *r : v < *r))
            *r = isnan(*r) ? *r : v;
    }
}

/* Counts live in dx's first slots: group g's count in out[g]. Every element
 * i lies at or after its group's offset g(i) (keep shape strides are never
 * larger), so writing dx from the last element down never overwrites a count
 * still to be read. No allocation: reference kernels cannot fail. */
static void ref_bwd(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    tg_shape xs = node->shape, ks = node->in[2]->shape;
    int64_t n = tg_shape_numel(xs), groups = tg_shape_numel(ks);
    const double *dy = a->in[0], *x = a->in[1], *y = a->in[2];
    for (int64_t g = 0; g < groups; g++)
        a->out[g] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t g = tg_bcast_ref_offset(xs, ks, i);
        a->out[g] += x[i] == y[g];
    }
    for (int64_t i = n - 1; i >= 0; i--) {
        int64_t g = tg_bcast_ref_offset(xs, ks, i);
        a->out[i] = dy[g] / a->out[g] * (x[i] == y[g] ? 1.0 : 0.0);
    }
}

/* ---- builders and gradient rules --------------------------------------------------------- */

static tg_tensor *reduce(tg_graph *g, tg_op op, tg_tensor *x, unsigned axes_mask, bool keepdim)
{
    tg_node_params p = {0};
    tg_reduce_set_mask(&p, axes_mask);
    tg_reduce_set_keepdim(&p, keepdim);
    return tg_node_create(g, op, 1, &x, &p);
}

tg_tensor *tg_reduce_max(tg_graph *g, tg_tensor *x, unsigned axes_mask, bool keepdim)
{
    return reduce(g, TG_OP_REDUCE_MAX, x, axes_mask, keepdim);
}

tg_tensor *tg_reduce_min(tg_graph *g, tg_tensor *x, unsigned axes_mask, bool keepdim)
{
    return reduce(g, TG_OP_REDUCE_MIN, x, axes_mask, keepdim);
}

static tg_status bwd_reduce(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                            tg_tensor **din)
{
    tg_tensor *x = node->in[0];
    tg_shape ks = tg_reduce_keep_shape(x->shape, tg_reduce_mask(node));
    tg_tensor *in[3] = {tg_reshape(g, dout, ks), x, tg_reshape(g, node, ks)};
    tg_node_params p = {0};
    tg_reduce_set_mask(&p, tg_reduce_mask(node));
    din[0] = tg_node_create(g, TG_OP_REDUCE_MINMAX_BWD, 3, in, &p);
    return din[0] ? TG_OK : tg_graph_status(g);
}

/* dx[i] = dy[g(i)] * w[i] with w = (x == y) / count: linear in dy, whose
 * gradient is the group sum of dout * w, and w is this op applied to ones.
 * Piecewise constant in x and y: no gradient there. */
static tg_status bwd_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                         tg_tensor **din)
{
    if (!need[0])
        return TG_OK;
    tg_tensor *dy = node->in[0], *x = node->in[1], *y = node->in[2];
    tg_tensor *ones = tg_constant(g, dy->shape, 1.0f);
    tg_node_params p = node->p;
    tg_tensor *w = tg_node_create(g, TG_OP_REDUCE_MINMAX_BWD, 3, (tg_tensor *[]){ones, x, y}, &p);
    din[0] = tg_reduce_sum(g, tg_mul(g, dout, w), (unsigned)tg_reduce_mask(node), true);
    return din[0] ? TG_OK : tg_graph_status(g);
}

const tg_op_def tg_opdef_REDUCE_MAX = {.infer = infer_reduce,
                                       .flops = flops_fwd,
                                       .reference = ref_reduce,
                                       .backward = bwd_reduce,
                                       .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_REDUCE_MIN = {.infer = infer_reduce,
                                       .flops = flops_fwd,
                                       .reference = ref_reduce,
                                       .backward = bwd_reduce,
                                       .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_REDUCE_MINMAX_BWD = {.infer = infer_bwd,
                                              .flops = flops_bwd,
                                              .reference = ref_bwd,
                                              .backward = bwd_bwd,
                                              .memory = TG_OP_OWN_STORAGE};
