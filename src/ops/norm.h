/* ops/norm.h - the params of the normalisation ops (ops/norm.c: NORM_STATS,
 * NORM_APPLY and their gradients, RUNNING_STATS_UPDATE), named once here for
 * the builders, the shape rules, the kernels (norm.c, norm_blocked.c) and
 * the tests.
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

#endif
