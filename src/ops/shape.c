/* ops/shape.c - ops that move or regroup elements without arithmetic (and
 * the sum reduction): RESHAPE (an alias, no copy), TRANSPOSE, CONCAT, SLICE
 * and SLICE_BWD, REDUCE_SUM; builders tg_flatten and tg_reduce_mean.
 *
 * Params: named in ops/shape.h (SLICE's in graph/shape_params.h): RESHAPE's
 * target shape, TRANSPOSE's perm (output dim d is input dim perm[d]),
 * CONCAT's axis (normalised to >= 0), SLICE's axis, start and end
 * (SLICE_BWD: and the sliced input's length along axis), REDUCE_SUM's axes
 * mask (bit i = axis i) and keepdim.
 */
#include "ops/broadcast.h"
#include "ops/shape.h"

#include "core/error.h"

#include <math.h>

static double flops_none(const tg_tensor *node)
{
    return 0;
}

/* ---- RESHAPE -------------------------------------------------------------------- */

/* The output shares the input's storage (TG_OP_VIEWS_INPUT: the graph marks the
 * node TG_NODE_ALIAS): the interpreter and the engine point it at the
 * input's buffer and never run a kernel, so the kernels below have nothing
 * to do. */
static tg_status infer_reshape(tg_tensor *node)
{
    TG_TRY(tg_params_check_shape(&node->p, TG_SHAPE_AT));
    tg_shape to = tg_params_get_shape(&node->p, TG_SHAPE_AT), from = node->in[0]->shape;
    if (tg_shape_numel(to) != tg_shape_numel(from)) {
        char a[96], b[96];
        return tg_error(TG_ERR_SHAPE, "cannot reshape %s (%lld elements) to %s (%lld elements)",
                        tg_shape_str(from, a, sizeof a), (long long)tg_shape_numel(from),
                        tg_shape_str(to, b, sizeof b), (long long)tg_shape_numel(to));
    }
    node->dtype = node->in[0]->dtype;
    node->shape = to;
    return TG_OK;
}

static void ref_alias(const tg_ref_args *a)
{
    (void)a;
}

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
    tg_params_put_shape(&p, TG_SHAPE_AT, shape);
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

static tg_status infer_reduce(tg_tensor *node)
{
    tg_shape in = node->in[0]->shape;
    int64_t mask = tg_reduce_mask(node);
    if (node->in[0]->dtype != TG_F32)
        return tg_error(TG_ERR_DTYPE, "input '%s' is %s; this op takes f32", node->in[0]->name,
                        tg_dtype_name(node->in[0]->dtype));
    if (mask < 0 || (mask >> in.ndim) != 0) {
        char a[96];
        return tg_error(TG_ERR_INVALID_ARG, "axes mask 0x%llx names an axis beyond %s",
                        (unsigned long long)mask, tg_shape_str(in, a, sizeof a));
    }
    node->dtype = TG_F32;
    node->shape = tg_reduce_out_shape(in, mask, tg_reduce_keepdim(node));
    return TG_OK;
}

static double flops_reduce(const tg_tensor *node)
{
    return (double)tg_numel(node->in[0]);
}

static void ref_reduce(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    tg_sum_ref(node->in[0]->shape, tg_reduce_keep_shape(node->in[0]->shape, tg_reduce_mask(node)),
               a->in[0], a->out);
}

/* Every input element receives the gradient of the sum it went into. */
static tg_status bwd_reduce(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                            tg_tensor **din)
{
    tg_tensor *d =
        tg_reduce_keepdim(node)
            ? dout
            : tg_reshape(g, dout, tg_reduce_keep_shape(node->in[0]->shape, tg_reduce_mask(node)));
    din[0] = tg_expand(g, d, node->in[0]->shape);
    return TG_OK;
}

tg_tensor *tg_reduce_sum(tg_graph *g, tg_tensor *x, unsigned axes_mask, bool keepdim)
{
    tg_node_params p = {0};
    tg_reduce_set_mask(&p, axes_mask);
    tg_reduce_set_keepdim(&p, keepdim);
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

/* ---- helpers ---------------------------------------------------------------------- */

/* Normalise a possibly negative axis of an ndim-dim tensor in place. */
static tg_status norm_axis(int64_t *axis, int ndim)
{
    int64_t a = *axis < 0 ? *axis + ndim : *axis;
    if (a < 0 || a >= ndim)
        return tg_error(TG_ERR_INVALID_ARG, "axis %lld out of range for %d dimensions",
                        (long long)*axis, ndim);
    *axis = a;
    return TG_OK;
}

/* ---- TRANSPOSE ----------------------------------------------------------------------- */

static tg_status infer_transpose(tg_tensor *node)
{
    tg_shape in = node->in[0]->shape;
    bool seen[TG_MAX_DIMS] = {false};
    for (int d = 0; d < in.ndim; d++) {
        int64_t q = tg_transpose_perm(node, d);
        if (q < 0 || q >= in.ndim || seen[q]) {
            char a[96];
            return tg_error(TG_ERR_INVALID_ARG,
                            "perm[%d] = %lld: not a permutation of the %d axes of %s", d,
                            (long long)q, in.ndim, tg_shape_str(in, a, sizeof a));
        }
        seen[q] = true;
    }
    node->dtype = node->in[0]->dtype;
    node->shape = in;
    for (int d = 0; d < in.ndim; d++)
        node->shape.dim[d] = in.dim[tg_transpose_perm(node, d)];
    return TG_OK;
}

static void ref_transpose(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    tg_shape in = node->in[0]->shape;
    int64_t n = tg_numel(node), istride[TG_MAX_DIMS], s = 1;
    for (int d = in.ndim - 1; d >= 0; d--) {
        istride[d] = s;
        s *= in.dim[d];
    }
    for (int64_t o = 0; o < n; o++) {
        int64_t rest = o, off = 0;
        for (int d = node->shape.ndim - 1; d >= 0; d--) {
            off += (rest % node->shape.dim[d]) * istride[tg_transpose_perm(node, d)];
            rest /= node->shape.dim[d];
        }
        a->out[o] = a->in[0][off];
    }
}

static tg_status bwd_transpose(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                               tg_tensor **din)
{
    int inv[TG_MAX_DIMS];
    for (int d = 0; d < node->shape.ndim; d++)
        inv[tg_transpose_perm(node, d)] = d;
    din[0] = tg_transpose(g, dout, inv);
    return TG_OK;
}

tg_tensor *tg_transpose(tg_graph *g, tg_tensor *x, const int *perm)
{
    tg_node_params p = {0};
    if (x && !perm)
        return tg_graph_fail(g, TG_ERR_INVALID_ARG, "transpose: no permutation given");
    for (int d = 0; x && d < x->shape.ndim; d++)
        tg_transpose_set_perm(&p, d, perm[d]);
    return tg_node_create(g, TG_OP_TRANSPOSE, 1, &x, &p);
}

/* ---- CONCAT ----------------------------------------------------------------------- */

static tg_status infer_concat(tg_tensor *node)
{
    const tg_tensor *x0 = node->in[0];
    if (node->n_in < 1)
        return tg_error(TG_ERR_INVALID_ARG, "needs at least one input");
    int64_t axis64 = tg_concat_axis(node);
    TG_TRY(norm_axis(&axis64, x0->shape.ndim));
    tg_concat_set_axis(&node->p, axis64);
    int axis = (int)tg_concat_axis(node);
    node->shape = x0->shape;
    node->dtype = x0->dtype;
    for (int k = 1; k < node->n_in; k++) {
        const tg_tensor *x = node->in[k];
        bool ok = x->shape.ndim == x0->shape.ndim;
        for (int d = 0; ok && d < x0->shape.ndim; d++)
            ok = d == axis || x->shape.dim[d] == x0->shape.dim[d];
        if (!ok) {
            char a[96], b[96];
            return tg_error(TG_ERR_SHAPE, "input %d %s does not match input 0 %s outside axis %d",
                            k, tg_shape_str(x->shape, a, sizeof a),
                            tg_shape_str(x0->shape, b, sizeof b), axis);
        }
        if (x->dtype != x0->dtype)
            return tg_error(TG_ERR_DTYPE, "input %d is %s, input 0 is %s", k,
                            tg_dtype_name(x->dtype), tg_dtype_name(x0->dtype));
        node->shape.dim[axis] += x->shape.dim[axis];
    }
    return TG_OK;
}

static void ref_concat(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    int axis = (int)tg_concat_axis(node);
    int64_t outer, inner;
    tg_outer_inner(node->shape, axis, &outer, &inner);
    double *dst = a->out;
    for (int64_t o = 0; o < outer; o++)
        for (int k = 0; k < node->n_in; k++) {
            int64_t run = node->in[k]->shape.dim[axis] * inner;
            for (int64_t q = 0; q < run; q++)
                *dst++ = a->in[k][o * run + q];
        }
}

static tg_status bwd_concat(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                            tg_tensor **din)
{
    int axis = (int)tg_concat_axis(node);
    int64_t start = 0;
    for (int k = 0; k < node->n_in; k++) {
        int64_t len = node->in[k]->shape.dim[axis];
        if (need[k])
            din[k] = tg_slice(g, dout, axis, start, start + len);
        start += len;
    }
    return TG_OK;
}

/* More than TG_MAX_INPUTS inputs (DenseNet concatenates up to ~60 maps) are
 * joined as a tree: groups of at most TG_MAX_INPUTS, then the groups, so
 * each element is copied ceil(log8(n)) times (twice up to 64 inputs), the
 * result is exact, and the gradient is slices of slices. A node with more
 * inputs would be cheaper by one copy but would grow every node and every
 * compiled step (each carries TG_MAX_INPUTS operands) for a few concats. */
static tg_tensor *concat_tree(tg_graph *g, tg_tensor *const *xs, int n, int axis)
{
    tg_tensor *groups[TG_MAX_INPUTS];
    int per = (n + TG_MAX_INPUTS - 1) / TG_MAX_INPUTS, ng = 0;
    for (int k = 0; k < n; k += per) {
        int m = n - k < per ? n - k : per;
        groups[ng++] = m == 1 ? xs[k] : tg_concat(g, xs + k, m, axis);
    }
    return tg_concat(g, groups, ng, axis);
}

tg_tensor *tg_concat(tg_graph *g, tg_tensor *const *xs, int n, int axis)
{
    if (n < 1 || !xs)
        return tg_graph_fail(g, TG_ERR_INVALID_ARG, "concat: %d inputs (takes 1 or more)", n);
    if (n > TG_MAX_INPUTS)
        return concat_tree(g, xs, n, axis);
    tg_node_params p = {0};
    tg_concat_set_axis(&p, axis);
    return tg_node_create(g, TG_OP_CONCAT, n, xs, &p);
}

/* ---- SLICE and SLICE_BWD ---------------------------------------------------------- */

static tg_status infer_slice(tg_tensor *node)
{
    tg_shape in = node->in[0]->shape;
    int64_t axis64 = tg_slice_axis(node);
    TG_TRY(norm_axis(&axis64, in.ndim));
    tg_slice_set_axis(&node->p, axis64);
    int axis = (int)tg_slice_axis(node);
    int64_t start = tg_slice_start(node), end = tg_slice_end(node);
    /* SLICE cuts from the input; SLICE_BWD places dy into len elements */
    int64_t len = node->op == TG_OP_SLICE ? in.dim[axis] : tg_slice_len(node);
    if (start < 0 || start > end || end > len) {
        char a[96];
        return tg_error(TG_ERR_INVALID_ARG,
                        "range [%lld, %lld) does not fit axis %d of length %lld%s%s",
                        (long long)start, (long long)end, axis, (long long)len,
                        node->op == TG_OP_SLICE ? " in " : "",
                        node->op == TG_OP_SLICE ? tg_shape_str(in, a, sizeof a) : "");
    }
    node->dtype = node->in[0]->dtype;
    node->shape = in;
    if (node->op == TG_OP_SLICE) {
        node->shape.dim[axis] = end - start;
    } else {
        if (in.dim[axis] != end - start)
            return tg_error(TG_ERR_SHAPE,
                            "dy has %lld elements along axis %d, range [%lld, %lld) has %lld",
                            (long long)in.dim[axis], axis, (long long)start, (long long)end,
                            (long long)(end - start));
        node->shape.dim[axis] = len;
    }
    return TG_OK;
}

static void ref_slice(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    bool scatter = node->op == TG_OP_SLICE_BWD;
    const tg_tensor *big = scatter ? node : node->in[0];
    int axis = (int)tg_slice_axis(node);
    int64_t outer, inner, len = big->shape.dim[axis], start = tg_slice_start(node),
                          end = tg_slice_end(node);
    tg_outer_inner(big->shape, axis, &outer, &inner);
    if (scatter)
        for (int64_t k = 0; k < tg_numel(node); k++)
            a->out[k] = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t r = start; r < end; r++)
            for (int64_t q = 0; q < inner; q++) {
                int64_t bi = (o * len + r) * inner + q,
                        si = (o * (end - start) + r - start) * inner + q;
                if (scatter)
                    a->out[bi] = a->in[0][si];
                else
                    a->out[si] = a->in[0][bi];
            }
}

static tg_tensor *slice_bwd(tg_graph *g, tg_tensor *dy, const tg_node_params *fwd, int64_t len)
{
    tg_node_params p = *fwd;
    tg_slice_set_len(&p, len);
    return tg_node_create(g, TG_OP_SLICE_BWD, 1, &dy, &p);
}

static tg_status bwd_slice(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                           tg_tensor **din)
{
    din[0] = slice_bwd(g, dout, &node->p, node->in[0]->shape.dim[tg_slice_axis(node)]);
    return TG_OK;
}

static tg_status bwd_slice_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                               tg_tensor **din)
{
    din[0] = tg_slice(g, dout, (int)tg_slice_axis(node), tg_slice_start(node), tg_slice_end(node));
    return TG_OK;
}

tg_tensor *tg_slice(tg_graph *g, tg_tensor *x, int axis, int64_t start, int64_t end)
{
    tg_node_params p = {0};
    tg_slice_set_axis(&p, axis);
    tg_slice_set_start(&p, start);
    tg_slice_set_end(&p, end);
    return tg_node_create(g, TG_OP_SLICE, 1, &x, &p);
}

const tg_op_def tg_opdef_RESHAPE = {.infer = infer_reshape,
                                    .flops = flops_none,
                                    .reference = ref_alias,
                                    .backward = bwd_reshape,
                                    .memory = TG_OP_VIEWS_INPUT};
const tg_op_def tg_opdef_REDUCE_SUM = {.infer = infer_reduce,
                                       .flops = flops_reduce,
                                       .reference = ref_reduce,
                                       .backward = bwd_reduce,
                                       .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_TRANSPOSE = {.infer = infer_transpose,
                                      .flops = flops_none,
                                      .reference = ref_transpose,
                                      .backward = bwd_transpose,
                                      .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_CONCAT = {.infer = infer_concat,
                                   .flops = flops_none,
                                   .reference = ref_concat,
                                   .backward = bwd_concat,
                                   .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_SLICE = {.infer = infer_slice,
                                  .flops = flops_none,
                                  .reference = ref_slice,
                                  .backward = bwd_slice,
                                  .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_SLICE_BWD = {.infer = infer_slice,
                                      .flops = flops_none,
                                      .reference = ref_slice,
                                      .backward = bwd_slice_bwd,
                                      .memory = TG_OP_OWN_STORAGE};
