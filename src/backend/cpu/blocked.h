/* backend/cpu/blocked.h - the own kernels' variants for the blocked activation
 * layout (ops/op.h TG_CHANNEL_BLOCK, nChw16c), which the compiler's layout
 * pass (compile/layout.h) chooses between oneDNN convolutions.
 *
 * In nChw16c the 16 channels of one pixel are adjacent: per-channel work
 * (batch norm's statistics and scale, pooling windows) runs on one 16-lane
 * vector per pixel. Element-wise ops need no variant when all their
 * operands have one shape (every operand is permuted alike).
 */
#ifndef TG_BACKEND_CPU_BLOCKED_H
#define TG_BACKEND_CPU_BLOCKED_H

#include "ops/op.h"

#include <stdbool.h>

/* Whether node's own kernel can run with its 4-D operands blocked
 * (tg_kernel_args.blocked): batch norm's ops, 2-D pooling, and same-shape
 * element-wise ops. Convolutions are oneDNN's (ops/conv.h). */
bool tg_blocked_kernel_exists(const tg_tensor *node);

/* The batch-norm ops (NORM_STATS, NORM_APPLY, NORM_APPLY_BWD_X,
 * NORM_APPLY_BWD_STATS, NORM_APPLY_BWD_AFFINE, NORM_STATS_BWD) on blocked x
 * and dy; statistics, gamma and beta stay [C] / [2, C] vectors. */
void tg_norm_blocked_run(const tg_kernel_args *a);

/* The pooling ops (max and average, forward and gradient) on blocked x,
 * y and their gradients when a->blocked; false (nothing done) otherwise
 * (backend/cpu/pool_kernels.c). */
bool tg_pool_blocked_run(const tg_kernel_args *a);

#endif
