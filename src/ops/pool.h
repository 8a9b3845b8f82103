/* ops/pool.h - the params of the pooling ops (ops/pool.c: MAXPOOL2D,
 * AVGPOOL2D and their gradients), named once here, and the geometry their
 * reference and kernels share. */
#ifndef TG_OPS_POOL_H
#define TG_OPS_POOL_H

#include "ops/op.h"

TG_PARAM_I(pool, kernel_h, 0)
TG_PARAM_I(pool, kernel_w, 1)
TG_PARAM_I(pool, stride_h, 2)
TG_PARAM_I(pool, stride_w, 3)
TG_PARAM_I(pool, pad_top, 4)
TG_PARAM_I(pool, pad_left, 5)
/* The backward ops: the input's height and width (not derivable from dy). */
TG_PARAM_I(pool, in_h, 6)
TG_PARAM_I(pool, in_w, 7)
TG_PARAM_I(pool, pad_bottom, 8)
TG_PARAM_I(pool, pad_right, 9)
TG_PARAM_I(pool, dilation_h, 10) /* max pooling only */
TG_PARAM_I(pool, dilation_w, 11)
TG_PARAM_I(pool, ceil_mode, 12)
TG_PARAM_I(pool, count_include_pad, 13) /* average pooling */

/* ---- what the references (ops/pool.c) and every backend's kernels read
 * alike: the geometry and an average window's part inside the input. */

/* A pooling node's geometry: (sample, channel) planes, the input and
 * output sizes, the window, strides, padding, dilation, count_include_pad. */
typedef struct {
    int64_t planes, ih, iw, oh, ow;
    int kh, kw, sh, sw, pt, pl, pb, pr, dh, dw;
    bool cip;
} tg_pool_geom;

static inline tg_pool_geom tg_pool_geom_of(const tg_tensor *node, tg_shape in_shape,
                                           tg_shape out_shape)
{
    tg_pool_geom g = {in_shape.dim[0] * in_shape.dim[1],
                      in_shape.dim[2],
                      in_shape.dim[3],
                      out_shape.dim[2],
                      out_shape.dim[3],
                      (int)tg_pool_kernel_h(node),
                      (int)tg_pool_kernel_w(node),
                      (int)tg_pool_stride_h(node),
                      (int)tg_pool_stride_w(node),
                      (int)tg_pool_pad_top(node),
                      (int)tg_pool_pad_left(node),
                      (int)tg_pool_pad_bottom(node),
                      (int)tg_pool_pad_right(node),
                      (int)tg_pool_dilation_h(node),
                      (int)tg_pool_dilation_w(node),
                      tg_pool_count_include_pad(node) != 0};
    return g;
}

/* The input shape of a pooling node (forward: its input; backward: stored). */
static inline tg_shape tg_pool_input_shape(const tg_tensor *node)
{
    if (node->op == TG_OP_MAXPOOL2D || node->op == TG_OP_AVGPOOL2D)
        return node->in[0]->shape;
    tg_shape s = node->in[0]->shape;
    s.dim[2] = tg_pool_in_h(node);
    s.dim[3] = tg_pool_in_w(node);
    return s;
}

static inline tg_shape tg_pool_output_shape(const tg_tensor *node)
{
    return node->op == TG_OP_MAXPOOL2D || node->op == TG_OP_AVGPOOL2D ? node->shape
                                                                      : node->in[0]->shape;
}

static inline int64_t tg_pool_min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}
static inline int64_t tg_pool_max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* The part of window (oy, ox) inside the input: rows [y0, y1), columns
 * [x0, x1); returns the divisor: with count_include_pad the window's size
 * within the padded input (PyTorch: a ceil_mode window hanging past the
 * bottom/right padding counts only up to it), else the covered input
 * elements. Without ceil_mode or cut windows that is kh * kw. */
static inline int64_t tg_pool_window_bounds(const tg_pool_geom *g, int64_t oy, int64_t ox,
                                            int64_t *y0, int64_t *y1, int64_t *x0, int64_t *x1)
{
    int64_t ys = oy * g->sh - g->pt, xs = ox * g->sw - g->pl;
    int64_t ye = tg_pool_min64(ys + g->kh, g->ih + g->pb),
            xe = tg_pool_min64(xs + g->kw, g->iw + g->pr);
    *y0 = tg_pool_max64(ys, 0);
    *x0 = tg_pool_max64(xs, 0);
    *y1 = tg_pool_min64(ye, g->ih);
    *x1 = tg_pool_min64(xe, g->iw);
    return g->cip ? (ye - ys) * (xe - xs) : (*y1 - *y0) * (*x1 - *x0);
}

#endif
