/* ops/pad.h - the params of PAD and PAD_BWD (ops/pad.c), named once here.
 * PAD_BWD keeps its forward node's. */
#ifndef TG_OPS_PAD_H
#define TG_OPS_PAD_H

#include "ops/op.h"

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

#endif
