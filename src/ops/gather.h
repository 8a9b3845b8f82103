/* ops/gather.h - the params of GATHER and GATHER_BWD (ops/gather.c) and the
 * geometry their reference and kernels share. */
#ifndef TG_OPS_GATHER_H
#define TG_OPS_GATHER_H

#include "ops/op.h"

#include <stdbool.h>
#include <stdint.h>

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

/* The geometry GATHER and GATHER_BWD read (ops/gather.c), their references'
 * and every backend's kernels alike. */
/* The three extents a gather reads data as: [outer, dim, inner]. */
typedef struct tg_gather_geom {
    int64_t outer, dim, inner, n_idx;
} tg_gather_geom;

static inline tg_gather_geom tg_gather_geom_of(tg_shape data, int axis, int64_t n_idx)
{
    tg_gather_geom g = {1, data.dim[axis], 1, n_idx};
    for (int d = 0; d < axis; d++)
        g.outer *= data.dim[d];
    for (int d = axis + 1; d < data.ndim; d++)
        g.inner *= data.dim[d];
    return g;
}

/* The index k of the table, or -1 when it is out of range: [-dim, dim),
 * or [0, dim) for ids. */
static inline int64_t tg_gather_table_row(int64_t k, int64_t dim, bool ids)
{
    if (k < 0 && !ids)
        k += dim;
    return k >= 0 && k < dim ? k : -1;
}

#endif
