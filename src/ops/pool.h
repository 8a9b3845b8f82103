/* ops/pool.h - the params of the pooling ops (ops/pool.c: MAXPOOL2D,
 * AVGPOOL2D and their gradients), named once here. */
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

/* The pooling ops (max and average, forward and gradient) on blocked x,
 * y and their gradients when a->blocked; false (nothing done) otherwise. */
bool tg_pool_blocked_run(const tg_kernel_args *a);

#endif
