/* ops/gather.h - the params of GATHER and GATHER_BWD (ops/gather.c). */
#ifndef TG_OPS_GATHER_H
#define TG_OPS_GATHER_H

#include "ops/op.h"

/* The axis indexed, normalised to >= 0. */
TG_PARAM_I(gather, axis, 0)
/* Nonzero: the indices are ids into an embedding table (tg_embedding,
 * nn.Embedding), which PyTorch refuses negative: valid ids are [0, dim),
 * not [-dim, dim) as ONNX's Gather counts from the end. Past the shape
 * GATHER_BWD keeps from p.i[1] (1 + TG_MAX_DIMS values). */
TG_PARAM_I(gather, ids, 1 + 1 + TG_MAX_DIMS)
/* GATHER_BWD: the data's shape (the scattered result's) is kept from p.i[1]
 * on (tg_params_put_shape). */
enum { TG_GATHER_SHAPE_AT = 1 };

#endif
