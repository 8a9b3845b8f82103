/* ops/matmul.h - the params of MATMUL and LINEAR (ops/matmul.c), named once
 * here. */
#ifndef TG_OPS_MATMUL_H
#define TG_OPS_MATMUL_H

#include "ops/op.h"

/* Whether a (trans_a) and b (trans_b) are read transposed (0 or 1). */
TG_PARAM_I(matmul, trans_a, 0)
TG_PARAM_I(matmul, trans_b, 1)
/* MATMUL of two batched operands: 1 sums the products over the batch (a
 * weight gradient); 0 keeps one product per batch entry. */
TG_PARAM_I(matmul, sum, 2)

#endif
