/* ops/binary.h - the params of binary.c's gradient ops POW_BWD and
 * MINMAX_BWD and the element rules the reference and kernels share, named
 * once here (SUM_TO's and EXPAND's target shape is kept
 * as ops/shape.h says). */
#ifndef TG_OPS_BINARY_H
#define TG_OPS_BINARY_H

#include "ops/op.h"

/* The input whose gradient the op gives: 0 = a, 1 = b. */
TG_PARAM_I(grad3, which, 0)
/* MINMAX_BWD: 1 for MINIMUM's gradient, 0 for MAXIMUM's. */
TG_PARAM_I(grad3, is_min, 1)

/* The arithmetic of ADD ... MINIMUM, and EXPAND's copy, as the reference
 * (ops/binary.c) and every backend's kernels name it. */
typedef enum {
    TG_ARITH_ADD,
    TG_ARITH_SUB,
    TG_ARITH_MUL,
    TG_ARITH_DIV,
    TG_ARITH_POW,
    TG_ARITH_MAX,
    TG_ARITH_MIN,
    TG_ARITH_COPY
} tg_arith;

/* The factor dy is multiplied by, for the gradient of input `which` at one
 * element with operands u = a, v = b. Written once for float and double
 * through the macro so that the fast and reference kernels agree. */
#define TG_POW_GRAD(T, POW, LOG, which, u, v)                                                      \
    ((which) == 0 ? ((v) == 0 ? (T)0 : (v)*POW((u), (v) - (T)1))                                   \
                  : ((u) == 0 && (v) >= 0 ? (T)0 : POW((u), (v)) * LOG((u))))
/* PyTorch's rule: on a tie half each; otherwise all to the winner. A NaN
 * compares false both ways, so then both inputs get the whole gradient. */
#define TG_MINMAX_GRAD(T, is_min, which, u, v)                                                     \
    ((u) == (v) ? (T)0.5                                                                           \
     : ((which) == 0 ? ((is_min) ? (u) > (v) : (u) < (v)) : ((is_min) ? (v) > (u) : (v) < (u)))    \
         ? (T)0                                                                                    \
         : (T)1)

#endif
