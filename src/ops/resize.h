/* ops/resize.h - the params of RESIZE and RESIZE_BWD (ops/resize.c), named
 * once here. Both ops keep the same params: RESIZE maps [N, C, in_h, in_w]
 * to [N, C, out_h, out_w], RESIZE_BWD maps dy back. */
#ifndef TG_OPS_RESIZE_H
#define TG_OPS_RESIZE_H

#include "ops/op.h"

TG_PARAM_I(resize, kind, 0)     /* tg_resize_mode */
TG_PARAM_I(resize, coords, 1)   /* tg_resize_coord: the coordinate transformation */
TG_PARAM_I(resize, rounding, 2) /* tg_resize_nearest: the nearest rounding */
TG_PARAM_I(resize, out_h, 3)
TG_PARAM_I(resize, out_w, 4)
TG_PARAM_I(resize, in_h, 5)
TG_PARAM_I(resize, in_w, 6)
/* The scales along H and W; 0: the ratio of the sizes. */
TG_PARAM_F(resize, scale_h, 0)
TG_PARAM_F(resize, scale_w, 1)

/* One output index's sources along an axis: indices i0 and i1 and the
 * weight w of i1 (ops/resize.c); the reference and every backend's kernel
 * read the same tables. */
typedef struct tg_resize_axis_entry {
    int64_t i0, i1;
    double w;
} tg_resize_axis_entry;

/* Fills t with the tables for H (out_h entries) then W (out_w entries). */
void tg_resize_make_tables(const tg_node_params *p, tg_resize_axis_entry *t);

#endif
