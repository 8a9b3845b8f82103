/* ops/pad.h - the params of PAD and PAD_BWD (ops/pad.c), named once here.
 * PAD_BWD keeps its forward node's. */
#ifndef TG_OPS_PAD_H
#define TG_OPS_PAD_H

#include "ops/op.h"

#include "core/check.h"

TG_PARAM_I(pad, kind, 0)  /* tg_pad_mode */
TG_PARAM_F(pad, value, 0) /* the constant (constant mode) */

/* The paddings, ONNX's order: all the begins, then all the ends, from
 * p.i[1] on (a negative padding crops). */
static inline int64_t tg_pad_get_begin(const tg_node_params *p, int d)
{
    return p->i[1 + d];
}
static inline int64_t tg_pad_get_end(const tg_node_params *p, int ndim, int d)
{
    return p->i[1 + ndim + d];
}
/* pads[k] for k < 2 * ndim, in that order. */
static inline void tg_pad_set_pads(tg_node_params *p, int ndim, const int64_t *pads)
{
    for (int k = 0; k < 2 * ndim; k++)
        p->i[1 + k] = pads[k];
}

/* PAD's geometry (ops/pad.c), which its reference and every backend's
 * kernel read alike. */
/* The input index that output index o reads along an axis of length n, or -1
 * for the constant. */
static inline int64_t tg_pad_source_index(int64_t o, int64_t begin, int64_t n, int mode)
{
    int64_t j = o - begin;
    if (j >= 0 && j < n)
        return j;
    switch (mode) {
    case TG_PAD_EDGE:
        return j < 0 ? 0 : n - 1;
    case TG_PAD_REFLECT:
        return j < 0 ? -j : 2 * (n - 1) - j;
    case TG_PAD_CONSTANT:
        return -1;
    default:
        TG_UNREACHABLE("pad mode", mode);
    }
}

/* The padded (big) and unpadded (small) shapes seen as rows of the last
 * axis; a 0-d tensor is one row of one element. */
typedef struct tg_pad_view {
    int ndim, mode;
    int64_t big[TG_MAX_DIMS], small[TG_MAX_DIMS], begin[TG_MAX_DIMS];
    int64_t rows; /* rows of the padded tensor */
} tg_pad_view;

static inline tg_pad_view tg_pad_make_view(const tg_tensor *node)
{
    bool bwd = node->op == TG_OP_PAD_BWD;
    tg_shape big = bwd ? node->in[0]->shape : node->shape;
    tg_shape small = bwd ? node->shape : node->in[0]->shape;
    tg_pad_view v = {
        .ndim = big.ndim > 0 ? big.ndim : 1, .mode = (int)tg_pad_kind(node), .rows = 1};
    for (int d = 0; d < v.ndim; d++) {
        v.big[d] = big.ndim > 0 ? big.dim[d] : 1;
        v.small[d] = big.ndim > 0 ? small.dim[d] : 1;
        v.begin[d] = big.ndim > 0 ? tg_pad_get_begin(&node->p, d) : 0;
    }
    for (int d = 0; d < v.ndim - 1; d++)
        v.rows *= v.big[d];
    return v;
}

#endif
