/* ops/shape.c - ops that move or regroup elements without arithmetic (and
 * the sum reduction): RESHAPE (an alias, no copy), TRANSPOSE, CONCAT, SLICE
 * and SLICE_BWD, REDUCE_SUM; builders tg_flatten and tg_reduce_mean.
 *
 * Params:
 *   RESHAPE     p.i[0..] target shape (tg_params_put_shape)
 *   TRANSPOSE   p.i[0..ndim-1] perm: output dim d is input dim perm[d]
 *   CONCAT      p.i[0] axis (normalised to >= 0)
 *   SLICE       p.i[0] axis, p.i[1] start, p.i[2] end
 *   SLICE_BWD   same, plus p.i[3] = the sliced input's length along axis
 *   REDUCE_SUM  p.i[0] axes mask (bit i = axis i), p.i[1] keepdim
 */
#include "ops/broadcast.h"

#include "core/error.h"

#include <math.h>
#include <string.h>

static double flops_none(const tg_tensor *node) { return 0; }

/* ---- RESHAPE -------------------------------------------------------------------- */

/* The output shares the input's storage (TG_NODE_ALIAS): the interpreter and
 * the engine point it at the input's buffer and never run a kernel, so the
 * kernels below have nothing to do. */
static tg_status infer_reshape(tg_tensor *node)
{
    TG_TRY(tg_params_check_shape(&node->p, 0));
    tg_shape to = tg_params_get_shape(&node->p, 0), from = node->in[0]->shape;
    if (tg_shape_numel(to) != tg_shape_numel(from)) {
        char a[96], b[96];
        return tg_error(TG_ERR_SHAPE, "cannot reshape %s (%lld elements) to %s (%lld elements)",
                        tg_shape_str(from, a, sizeof a), (long long)tg_shape_numel(from),
                        tg_shape_str(to, b, sizeof b), (long long)tg_shape_numel(to));
    }
    node->dtype = node->in[0]->dtype;
    node->shape = to;
    node->flags |= TG_NODE_ALIAS;
    return TG_OK;
}

static void fwd_alias(const tg_kernel_args *a) { (void)a; }
static void ref_alias(const tg_ref_args *a) { (void)a; }

static tg_status bwd_reshape(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                             tg_tensor **din)
{
    din[0] = tg_reshape(g, dout, node->in[0]->shape);
    return TG_OK;
}

tg_tensor *tg_reshape(tg_graph *g, tg_tensor *x, tg_shape shape)
{
    tg_node_params p = {0};
    if (shape.ndim < 0 || shape.ndim > TG_MAX_DIMS)
        return tg_graph_fail(g, TG_ERR_SHAPE, "reshape: %d dimensions (at most %d)", shape.ndim,
                             TG_MAX_DIMS);
    /* One dimension may be -1: inferred from the element count, as in PyTorch. */
    int wild = -1;
    int64_t known = 1;
    for (int d = 0; d < shape.ndim; d++) {
        if (shape.dim[d] == -1 && wild < 0)
            wild = d;
        else
            known *= shape.dim[d];
    }
    if (wild >= 0 && x) {
        int64_t n = tg_numel(x);
        shape.dim[wild] = known > 0 && n % known == 0 ? n / known : -1;
        if (shape.dim[wild] < 0) {
            char a[96];
            return tg_graph_fail(g, TG_ERR_SHAPE,
                                 "reshape: cannot infer the -1 dimension of %s (%lld elements)",
                                 tg_shape_str(x->shape, a, sizeof a), (long long)n);
        }
    }
    tg_params_put_shape(&p, 0, shape);
    return tg_node_create(g, TG_OP_RESHAPE, 1, &x, &p);
}

tg_tensor *tg_flatten(tg_graph *g, tg_tensor *x, int axis)
{
    if (!x)
        return tg_node_create(g, TG_OP_RESHAPE, 1, &x, NULL);
    int nd = x->shape.ndim;
    if (axis < 0)
        axis += nd;
    if (axis < 0 || axis > nd)
        return tg_graph_fail(g, TG_ERR_INVALID_ARG, "flatten: axis %d out of range for %d dims",
                             axis, nd);
    tg_shape s = tg_shape_of(axis, x->shape.dim);
    int64_t rest = 1;
    for (int d = axis; d < nd; d++)
        rest *= x->shape.dim[d];
    s.dim[s.ndim++] = rest;
    return tg_reshape(g, x, s);
}

/* ---- REDUCE_SUM ---------------------------------------------------------------------- */

static tg_shape reduce_keep_shape(const tg_tensor *node)
{
    tg_shape s = node->in[0]->shape;
    unsigned mask = (unsigned)node->p.i[0];
    for (int d = 0; d < s.ndim; d++)
        if (mask & (1u << d))
            s.dim[d] = 1;
    return s;
}

static tg_status infer_reduce(tg_tensor *node)
{
    tg_shape in = node->in[0]->shape;
    int64_t mask = node->p.i[0];
    if (node->in[0]->dtype != TG_F32)
        return tg_error(TG_ERR_DTYPE, "input '%s' is %s; this op takes f32", node->in[0]->name,
                        tg_dtype_name(node->in[0]->dtype));
    if (mask < 0 || (mask >> in.ndim) != 0) {
        char a[96];
        return tg_error(TG_ERR_INVALID_ARG, "axes mask 0x%llx names an axis beyond %s",
                        (unsigned long long)mask, tg_shape_str(in, a, sizeof a));
    }
    tg_shape keep = reduce_keep_shape(node);
    node->dtype = TG_F32;
    if (node->p.i[1]) {
        node->shape = keep;
        return TG_OK;
    }
    node->shape = tg_shape_of(0, NULL);
    for (int d = 0; d < in.ndim; d++)
        if (!(mask & (1ll << d)))
            node->shape.dim[node->shape.ndim++] = in.dim[d];
    return TG_OK;
}

static double flops_reduce(const tg_tensor *node) { return (double)tg_numel(node->in[0]); }

static void fwd_reduce(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    tg_sum_f32(a->pool, node->in[0]->shape, reduce_keep_shape(node), a->in[0], a->out);
}

static void ref_reduce(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    tg_sum_ref(node->in[0]->shape, reduce_keep_shape(node), a->in[0], a->out);
}

/* Every input element receives the gradient of the sum it went into. */
static tg_status bwd_reduce(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                            tg_tensor **din)
{
    tg_tensor *d = node->p.i[1] ? dout : tg_reshape(g, dout, reduce_keep_shape(node));
    din[0] = tg_expand(g, d, node->in[0]->shape);
    return TG_OK;
}

tg_tensor *tg_reduce_sum(tg_graph *g, tg_tensor *x, unsigned axes_mask, bool keepdim)
{
    tg_node_params p = {0};
    p.i[0] = axes_mask;
    p.i[1] = keepdim;
    return tg_node_create(g, TG_OP_REDUCE_SUM, 1, &x, &p);
}

tg_tensor *tg_reduce_mean(tg_graph *g, tg_tensor *x, unsigned axes_mask, bool keepdim)
{
    tg_tensor *s = tg_reduce_sum(g, x, axes_mask, keepdim);
    if (!s)
        return NULL;
    int64_t count = tg_numel(x) / (tg_numel(s) ? tg_numel(s) : 1);
    /* mean of nothing is NaN, as in PyTorch */
    return tg_scale(g, s, count ? 1.0f / (float)count : NAN, 0.0f);
}

const tg_op_def tg_opdef_RESHAPE = {"reshape", infer_reshape, flops_none, NULL,
                                    fwd_alias, ref_alias,     bwd_reshape};
const tg_op_def tg_opdef_REDUCE_SUM = {"reduce_sum", infer_reduce, flops_reduce, NULL,
                                       fwd_reduce,   ref_reduce,   bwd_reduce};
