/* data/shapes.c - a synthetic segmentation data set: shapes on a noisy
 * background, and the class of every pixel.
 *
 * For segmentation models without files, as data/synthetic.c is for
 * classifiers. Each image has a background of one random grey level plus
 * uniform noise, and 1 to 3 shapes (disc, square, upward triangle) of
 * random class, size (radius h/8 to h/4) and position, painted in order so
 * a later shape covers an earlier one. A shape is a brighter grey, tinted
 * towards the channel of its class (discs channel 0, squares 1, triangles
 * 2), with the same pixel noise: a short run learns the tints and the
 * outlines; with one channel only the outlines tell the classes apart. The
 * mask records the class that painted each pixel last (0: background).
 * Every shape is left-right symmetric, so a horizontal flip of image and
 * mask together is another sample of the same task.
 */
#include "data/dataset.h"

#include "core/alloc.h"
#include "core/check.h"
#include "core/error.h"
#include "core/rng.h"

#include <stdio.h>

#define NOISE 48 /* pixel noise: values are the level +- NOISE/2 */
#define TINT 48  /* added to the shape's own channel */

static const char *const shape_classes[TG_SHAPES_CLASSES] = {"background", "disc", "square",
                                                             "triangle"};

enum { BACKGROUND, DISC, SQUARE, TRIANGLE };

/* Whether pixel (x, y) (its centre) lies in shape `cls` of centre (cx, cy)
 * and radius r: the disc's radius, the square's half side, the triangle's
 * half height and half base (apex up). */
static bool inside(int cls, int x, int y, int cx, int cy, int r)
{
    int dx = x - cx, dy = y - cy;
    switch (cls) {
    case DISC:
        return dx * dx + dy * dy <= r * r;
    case SQUARE:
        return dx >= -r && dx <= r && dy >= -r && dy <= r;
    case TRIANGLE: /* the row dy from the apex's -r is dy + r tall: half of it each side */
        return dy >= -r && dy <= r && 2 * (dx < 0 ? -dx : dx) <= dy + r;
    default:
        TG_UNREACHABLE("shape class", cls);
    }
}

static uint8_t clamp_u8(int v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* One sample: which shape covers each pixel (0: none), then the pixels,
 * then the mask as classes. */
static void draw_sample(tg_rng *r, int c, int h, int w, uint8_t *img, uint8_t *mask, int32_t *label)
{
    enum { MAX_SHAPES = 3 };
    int cls_of[MAX_SHAPES + 1] = {BACKGROUND}, level[MAX_SHAPES + 1][3];
    int bg = 40 + (int)tg_rng_below(r, 60);
    for (int ch = 0; ch < 3; ch++)
        level[0][ch] = bg;
    for (int k = 0; k < h * w; k++)
        mask[k] = 0;
    int side = h < w ? h : w, rmin = side / 8 > 2 ? side / 8 : 2,
        rmax = side / 4 > rmin ? side / 4 : rmin;
    int shapes = 1 + (int)tg_rng_below(r, MAX_SHAPES);
    for (int s = 1; s <= shapes; s++) {
        int cls = 1 + (int)tg_rng_below(r, 3);
        int rad = rmin + (int)tg_rng_below(r, (uint64_t)(rmax - rmin + 1));
        int cx = rad + (int)tg_rng_below(r, (uint64_t)(w - 2 * rad > 0 ? w - 2 * rad : 1));
        int cy = rad + (int)tg_rng_below(r, (uint64_t)(h - 2 * rad > 0 ? h - 2 * rad : 1));
        int grey = 130 + (int)tg_rng_below(r, 80);
        cls_of[s] = cls;
        for (int ch = 0; ch < 3; ch++)
            level[s][ch] = grey + (ch == cls - 1 ? TINT : 0);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                if (inside(cls, x, y, cx, cy, rad))
                    mask[y * w + x] = (uint8_t)s;
    }
    int64_t count[TG_SHAPES_CLASSES] = {0};
    for (int k = 0; k < h * w; k++) {
        int s = mask[k];
        for (int ch = 0; ch < c; ch++)
            img[(int64_t)ch * h * w + k] =
                clamp_u8(level[s][ch] + (int)tg_rng_below(r, NOISE) - NOISE / 2);
        mask[k] = (uint8_t)cls_of[s];
        count[cls_of[s]]++;
    }
    /* the class of most shape pixels: what a classifier of these would say */
    *label = BACKGROUND;
    for (int cls = 1; cls < TG_SHAPES_CLASSES; cls++)
        if (count[cls] > 0 && (*label == BACKGROUND || count[cls] > count[*label]))
            *label = cls;
}

tg_status tg_dataset_shapes(int64_t n, int c, int h, int w, uint64_t seed, tg_dataset **out)
{
    *out = NULL;
    if (c < 1 || c > 3 || h < 8 || w < 8)
        return tg_error(TG_ERR_INVALID_ARG,
                        "shapes dataset: %dx%dx%d images; it draws 1 to 3 channels of at least "
                        "8x8 pixels",
                        c, h, w);
    tg_status st = tg_dataset_create("shapes", n, c, h, w, TG_SHAPES_CLASSES, out);
    if (st != TG_OK)
        return tg_error_prefix(st, "shapes dataset");
    tg_dataset *ds = *out;
    ds->masks = tg_malloc((size_t)(n * h * w));
    if (!ds->masks) {
        tg_dataset_destroy(ds);
        *out = NULL;
        return tg_error(TG_ERR_NOMEM, "shapes dataset: out of memory for %lld masks of %dx%d",
                        (long long)n, h, w);
    }
    ds->class_names = shape_classes;
    tg_rng r;
    tg_rng_seed(&r, tg_hash64(seed ^ 0x5A9E5ull));
    const int64_t per = (int64_t)c * h * w;
    for (int64_t i = 0; i < n; i++)
        draw_sample(&r, c, h, w, ds->images + i * per, ds->masks + i * h * w, &ds->labels[i]);
    return TG_OK;
}
