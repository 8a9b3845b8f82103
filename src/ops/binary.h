/* ops/binary.h - the params of binary.c's gradient ops POW_BWD and
 * MINMAX_BWD, named once here (SUM_TO's and EXPAND's target shape is kept
 * as ops/shape.h says). */
#ifndef TG_OPS_BINARY_H
#define TG_OPS_BINARY_H

#include "ops/op.h"

/* The input whose gradient the op gives: 0 = a, 1 = b. */
TG_PARAM_I(grad3, which, 0)
/* MINMAX_BWD: 1 for MINIMUM's gradient, 0 for MAXIMUM's. */
TG_PARAM_I(grad3, is_min, 1)

#endif
