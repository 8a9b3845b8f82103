/* ops/matmul_geom.h - a MATMUL node's geometry (ops/matmul.c), shared by
 * its OpenBLAS kernels and its oneDNN plan (backend/cpu/matmul_dnnl.c). */
#ifndef TG_OPS_MATMUL_GEOM_H
#define TG_OPS_MATMUL_GEOM_H

#include "graph/node.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct tg_mm_dims {
    int64_t batch; /* number of products */
    int64_t M, N, K;
    bool ta, tb, sum;
    bool a_batched, b_batched;
} tg_mm_dims;

/* The geometry of a MATMUL node whose shapes were inferred. */
tg_mm_dims tg_mm_dims_of(const tg_tensor *node);

#endif
