/* tilegraph/shape.h - tensor shapes: up to TG_MAX_DIMS dimensions, row-major. */
#ifndef TILEGRAPH_SHAPE_H
#define TILEGRAPH_SHAPE_H

#include "tilegraph/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TG_MAX_DIMS 6

typedef struct tg_shape {
    int ndim;                 /* 0 for a scalar */
    int64_t dim[TG_MAX_DIMS]; /* dim[ndim..] are unused and kept at 1 */
} tg_shape;

/* Build a shape from a list: tg_shape_of(2, (int64_t[]){3, 4}). */
TG_API tg_shape tg_shape_of(int ndim, const int64_t *dims);
TG_API tg_shape tg_shape1(int64_t a);
TG_API tg_shape tg_shape2(int64_t a, int64_t b);
TG_API tg_shape tg_shape3(int64_t a, int64_t b, int64_t c);
TG_API tg_shape tg_shape4(int64_t a, int64_t b, int64_t c, int64_t d);

TG_API int64_t tg_shape_numel(tg_shape s);
TG_API bool tg_shape_equal(tg_shape a, tg_shape b);
/* "[40, 1, 28, 28]" into buf; returns buf. */
TG_API char *tg_shape_str(tg_shape s, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
