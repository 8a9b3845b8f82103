/* ops/normalize.h - the params of NORMALIZE_U8 (ops/normalize.c), named once
 * here. */
#ifndef TG_OPS_NORMALIZE_H
#define TG_OPS_NORMALIZE_H

#include "ops/op.h"

enum { TG_NORMALIZE_MAX_CHANNELS = 4 };

/* The channel count C (at most TG_NORMALIZE_MAX_CHANNELS). */
TG_PARAM_I(normalize, channels, 0)
/* 1 (tg_cast_u8): the plain conversion to f32, no mean or std. */
TG_PARAM_I(normalize, raw, 1)

/* Channel c's mean and standard deviation. */
static inline float tg_normalize_mean(const tg_tensor *node, int c)
{
    return node->p.f[c];
}
static inline float tg_normalize_std(const tg_tensor *node, int c)
{
    return node->p.f[TG_NORMALIZE_MAX_CHANNELS + c];
}
static inline void tg_normalize_set_channel(tg_node_params *p, int c, float mean, float std)
{
    p->f[c] = mean;
    p->f[TG_NORMALIZE_MAX_CHANNELS + c] = std;
}

#endif
