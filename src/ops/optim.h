/* ops/optim.h - what the optimizer updates' reference (ops/optim.c) and
 * every backend's kernels share: the per-update scalars and LAMB's trust
 * ratio, in double as PyTorch computes them. */
#ifndef TG_OPS_OPTIM_H
#define TG_OPS_OPTIM_H

#include "graph/optim_params.h"
#include "ops/op.h"

/* The per-update scalars, in double as PyTorch computes them. */
typedef struct tg_adam_scalars {
    double lr, l2, shrink, step_size, bc1, bc2_sqrt;
} tg_adam_scalars;

/* The scalars of the update at `step` (updates done so far). */
tg_adam_scalars tg_adam_prepare(const tg_optimizer *o, int64_t step);

/* ||p|| / ||r|| from the sums of squares, ||p|| clipped to max_weight_norm
 * (0 or inf: no clip); 1 when either norm is 0, as PopTorch. */
double tg_lamb_trust(double sum_p, double sum_r, float max_weight_norm);

#endif
