/* ops/shape.h - the params of the ops that move elements (ops/shape.c,
 * slice_step.c, reduce_minmax.c; binary.c's SUM_TO and EXPAND), named once
 * here. SLICE's are in graph/shape_params.h, which autodiff reads too. */
#ifndef TG_OPS_SHAPE_H
#define TG_OPS_SHAPE_H

#include "graph/shape_params.h"
#include "ops/op.h"

/* RESHAPE, SUM_TO and EXPAND keep their target shape from p.i[0] on
 * (tg_params_put_shape, ops/broadcast.h). */
enum { TG_SHAPE_AT = 0 };

/* TRANSPOSE: output dim d is input dim perm[d], for d < ndim. */
static inline int64_t tg_transpose_perm(const tg_tensor *node, int d)
{
    return node->p.i[d];
}
static inline void tg_transpose_set_perm(tg_node_params *p, int d, int64_t v)
{
    p->i[d] = v;
}

/* SLICE_STEP (slice_step.c): output row r along axis (normalised to >= 0)
 * is input row start + r * step (step not 0), for count (>= 1) rows.
 * SLICE_STEP_BWD adds len, the input's length along the axis. */
TG_PARAM_I(slice_step, axis, 0)
TG_PARAM_I(slice_step, start, 1)
TG_PARAM_I(slice_step, step, 2)
TG_PARAM_I(slice_step, count, 3)
TG_PARAM_I(slice_step, len, 4)

/* REDUCE_SUM, REDUCE_MAX, REDUCE_MIN and REDUCE_MINMAX_BWD: the axes
 * reduced (bit i = axis i), and whether they are kept as 1s. */
TG_PARAM_I(reduce, mask, 0)
TG_PARAM_I(reduce, keepdim, 1)

/* Elements before and after `axis` (the shape family's references and
 * kernels, SLICE_STEP's too). */
static inline void tg_outer_inner(tg_shape s, int axis, int64_t *outer, int64_t *inner)
{
    *outer = *inner = 1;
    for (int d = 0; d < axis; d++)
        *outer *= s.dim[d];
    for (int d = axis + 1; d < s.ndim; d++)
        *inner *= s.dim[d];
}

/* x's shape with 1 on every reduced axis of mask (REDUCE_MAX and
 * REDUCE_MIN: ops/reduce_minmax.c, their references and kernels). */
static inline tg_shape tg_reduce_keep_shape(tg_shape x, int64_t mask)
{
    for (int d = 0; d < x.ndim; d++)
        if (mask & (1ll << d))
            x.dim[d] = 1;
    return x;
}

/* A reduction's output shape: x's with every reduced axis of mask kept as
 * 1 (keepdim) or dropped (REDUCE_SUM, REDUCE_MAX, REDUCE_MIN's shape
 * rules). */
static inline tg_shape tg_reduce_out_shape(tg_shape x, int64_t mask, bool keepdim)
{
    if (keepdim)
        return tg_reduce_keep_shape(x, mask);
    tg_shape out = tg_shape_of(0, NULL);
    for (int d = 0; d < x.ndim; d++)
        if (!(mask & (1ll << d)))
            out.dim[out.ndim++] = x.dim[d];
    return out;
}

#endif
