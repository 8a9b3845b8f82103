/* tilegraph/shape.h - tensor shapes: up to TG_MAX_DIMS dimensions, row-major. */
#ifndef TILEGRAPH_SHAPE_H
#define TILEGRAPH_SHAPE_H

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
tg_shape tg_shape_of(int ndim, const int64_t *dims);
tg_shape tg_shape1(int64_t a);
tg_shape tg_shape2(int64_t a, int64_t b);
tg_shape tg_shape3(int64_t a, int64_t b, int64_t c);
tg_shape tg_shape4(int64_t a, int64_t b, int64_t c, int64_t d);

int64_t tg_shape_numel(tg_shape s);
int tg_shape_equal(tg_shape a, tg_shape b);
/* "[40, 1, 28, 28]" into buf; returns buf. */
char *tg_shape_str(tg_shape s, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
