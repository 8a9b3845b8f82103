/* ops/gather.h - the params of GATHER and GATHER_BWD (ops/gather.c). */
#ifndef TG_OPS_GATHER_H
#define TG_OPS_GATHER_H

#include "ops/op.h"

/* The axis indexed, normalised to >= 0. */
TG_PARAM_I(gather, axis, 0)
/* GATHER_BWD: the data's shape (the scattered result's) is kept from p.i[1]
 * on (tg_params_put_shape). */
enum { TG_GATHER_SHAPE_AT = 1 };

#endif
