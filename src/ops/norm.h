/* ops/norm.h - the params of the normalisation ops (ops/norm.c: NORM_STATS,
 * NORM_APPLY and their gradients, RUNNING_STATS_UPDATE), named once here for
 * the builders, the shape rules, the kernels (backend/cpu/norm_kernels.c,
 * norm_blocked.c) and the tests.
 */
#ifndef TG_OPS_NORM_H
#define TG_OPS_NORM_H

#include "ops/op.h"

/* How x is grouped for the statistics (mode), with its argument (mode_arg). */
enum {
    TG_NORM_BATCH = 0, /* per channel over [N, C, ...]; mode_arg unused */
    TG_NORM_GROUP = 1, /* per (sample, group); mode_arg = groups */
    TG_NORM_LAYER = 2, /* per row over the last mode_arg dims */
};

TG_PARAM_I(norm, mode, 0)
TG_PARAM_I(norm, mode_arg, 1)
TG_PARAM_I(norm, has_gamma, 2) /* 0 or 1 */
TG_PARAM_I(norm, has_beta, 3)  /* 0 or 1 */
TG_PARAM_F(norm, eps, 0)
/* RUNNING_STATS_UPDATE: running = (1 - momentum) running + momentum batch,
 * with the variance made unbiased by count / (count - 1), count the
 * elements per channel. */
TG_PARAM_F(norm, momentum, 0)
TG_PARAM_I(norm, count, 4)

/* Whether node is a layer norm's statistics or normalisation whose kernel
 * reads and writes operands stored in bf16 in place, a row at a time on
 * its thread's stack (no scratch, no f32 copy of the tensor). */
bool tg_norm_reads_rows_bf16(const tg_tensor *node);

/* A batch norm bn folded into the convolution before it (compile/fuse.c),
 * for output channel c of the norm's n: the weights scaled by
 * gamma / sqrt(var + eps), the bias b made (b - mean) scale + beta, both in
 * double for the caller to round once. stats: the means [n], then the
 * variances [n]; gamma and beta NULL where absent. */
typedef struct tg_norm_fold {
    double scale, shift;
} tg_norm_fold;
tg_norm_fold tg_norm_fold_channel(const tg_tensor *bn, const float *stats, int64_t n,
                                  const float *gamma, const float *beta, int64_t c, double b);

/* ---- what the references (ops/norm.c) and every backend's kernels read
 * alike: x seen as [outer, G, inner] and [a, Caff, b] (ops/norm.c's top). */

typedef struct tg_norm_view {
    int64_t outer, G, inner; /* statistics groups */
    int64_t a, Caff, b;      /* affine parameters */
    int64_t count;           /* elements per group: outer * inner */
} tg_norm_view;

/* The tensor whose shape defines the view: x or dy, by op. */
static inline const tg_tensor *tg_norm_shaped_input(const tg_tensor *node)
{
    return node->op == TG_OP_NORM_STATS_BWD ? node->in[1] : node->in[0];
}

static inline tg_norm_view tg_norm_view_of_shape(const tg_node_params *p, tg_shape s)
{
    tg_norm_view v;
    int64_t numel = tg_shape_numel(s);
    if (tg_norm_get_mode(p) == TG_NORM_LAYER) {
        int64_t inner = 1;
        for (int d = s.ndim - (int)tg_norm_get_mode_arg(p); d < s.ndim; d++)
            inner *= s.dim[d];
        v.outer = 1, v.inner = inner, v.G = inner ? numel / inner : 0;
        v.a = v.G, v.Caff = inner, v.b = 1;
    } else {
        int64_t N = s.dim[0], C = s.dim[1], S = 1;
        for (int d = 2; d < s.ndim; d++)
            S *= s.dim[d];
        v.a = N, v.Caff = C, v.b = S;
        if (tg_norm_get_mode(p) == TG_NORM_BATCH)
            v.outer = N, v.G = C, v.inner = S;
        else
            v.outer = 1, v.G = N * tg_norm_get_mode_arg(p),
            v.inner = C / tg_norm_get_mode_arg(p) * S;
    }
    v.count = v.outer * v.inner;
    return v;
}

static inline tg_norm_view tg_norm_view_of(const tg_tensor *node)
{
    return tg_norm_view_of_shape(&node->p, tg_norm_shaped_input(node)->shape);
}

/* Index helpers on the [outer, G, inner] and [a, Caff, b] views. A run is a
 * stretch of consecutive elements with one group and one affine index:
 * each (o, c) row of b elements for batch/group norm (b divides inner), and
 * for layer norm (b = 1) each row of inner elements with the affine index
 * running along it. */
static inline int64_t tg_norm_group_of(const tg_norm_view *v, int64_t flat)
{
    return (flat / v->inner) % v->G;
}

/* The longest row (normalised elements) read in place from bf16: a row,
 * gamma and beta widened on the stack. */
#define TG_NORM_LAYER_ROW_MAX 4096

#endif
