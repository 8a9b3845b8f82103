/* tests/data/test_shapes.c - the shapes segmentation data set (data/shapes.c)
 * and the loader's masks: the same seed gives the same bytes, every class
 * is drawn and brighter than the background, each mask pixel is a class,
 * and the loader hands out each sample's mask flipped with its image and
 * resized by the nearest pixel, in both loader modes; bad geometry and a
 * classification set's missing masks are errors or NULL, not crashes.
 * TG_TEST_LABELS: quick */
#include "data/dataset.h"
#include "data/loader.h"
#include "tg_test.h"

#include <stdlib.h>
#include <string.h>

static void test_deterministic_and_drawn(void)
{
    tg_dataset *a = NULL, *b = NULL, *c = NULL;
    TG_CHECK_OK(tg_dataset_shapes(64, 3, 32, 32, 7, &a));
    TG_CHECK_OK(tg_dataset_shapes(64, 3, 32, 32, 7, &b));
    TG_CHECK_OK(tg_dataset_shapes(64, 3, 32, 32, 8, &c));
    if (!a || !b || !c)
        goto done;
    TG_CHECK(memcmp(a->images, b->images, 64 * 3 * 32 * 32) == 0);
    TG_CHECK(memcmp(a->masks, b->masks, 64 * 32 * 32) == 0);
    TG_CHECK(memcmp(a->masks, c->masks, 64 * 32 * 32) != 0); /* another seed, other shapes */
    int64_t count[TG_SHAPES_CLASSES] = {0};
    double bright[TG_SHAPES_CLASSES] = {0};
    for (int64_t i = 0; i < 64; i++)
        for (int p = 0; p < 32 * 32; p++) {
            int cls = a->masks[i * 1024 + p];
            TG_CHECK(cls >= 0 && cls < TG_SHAPES_CLASSES);
            if (cls < 0 || cls >= TG_SHAPES_CLASSES)
                goto done;
            count[cls]++;
            for (int ch = 0; ch < 3; ch++)
                bright[cls] += a->images[(i * 3 + ch) * 1024 + p];
        }
    for (int cls = 0; cls < TG_SHAPES_CLASSES; cls++)
        TG_CHECK(count[cls] > 0);
    /* the background is most of it, every shape class a fair share */
    TG_CHECK(count[0] > 64 * 1024 / 2 && count[0] < 64 * 1024 * 19 / 20);
    for (int cls = 1; cls < TG_SHAPES_CLASSES; cls++)
        TG_CHECK(bright[cls] / (double)count[cls] > bright[0] / (double)count[0] + 60);
    TG_CHECK(strcmp(tg_dataset_class_name(a, 3), "triangle") == 0);
    TG_CHECK(tg_dataset_mask(a, 5) == a->masks + 5 * 1024);
    TG_CHECK(tg_dataset_mask(a, 64) == NULL);
    tg_dataset_info info = tg_dataset_describe(a);
    TG_CHECK(info.segmentation && info.classes == 4 && !info.text);
    /* a disc of radius r covers about pi r^2: sample 0's first shape is in there somewhere */
    int label = tg_dataset_label(a, 0);
    TG_CHECK(label >= 1 && label <= 3);
done:
    tg_dataset_destroy(a);
    tg_dataset_destroy(b);
    tg_dataset_destroy(c);
}

static void test_load_and_errors(void)
{
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_open("shapes", NULL, TG_SPLIT_TEST, 10, &ds));
    if (ds) {
        tg_dataset_info d = tg_dataset_describe(ds);
        TG_CHECK(strcmp(d.name, "shapes/test") == 0 && d.samples == 10 && d.channels == 3 &&
                 d.height == 32 && d.width == 32 && d.segmentation);
    }
    tg_dataset_destroy(ds);
    TG_CHECK(tg_dataset_shapes(4, 3, 4, 32, 1, &ds) == TG_ERR_INVALID_ARG && !ds);
    TG_CHECK(strstr(tg_error_message(), "at least 8x8") != NULL);
    TG_CHECK(tg_dataset_shapes(4, 5, 32, 32, 1, &ds) == TG_ERR_INVALID_ARG && !ds);
    /* a classification set has no masks */
    TG_CHECK_OK(tg_dataset_open("synthetic", NULL, TG_SPLIT_TEST, 4, &ds));
    TG_CHECK(ds && tg_dataset_mask(ds, 0) == NULL && !tg_dataset_describe(ds).segmentation);
    tg_dataset_destroy(ds);
}

/* Every step's labels are its samples' masks, flipped with the image
 * (flip probability 1: every sample) and resized by the nearest pixel. */
static void check_loader(tg_loader_mode mode, int flip, int oh, int ow)
{
    enum { N = 24, S = 8, H = 16, W = 20 };
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_shapes(N, 1, H, W, 3, &ds));
    if (!ds)
        return;
    tg_loader_config cfg = tg_loader_defaults(ds, S);
    cfg.mode = mode;
    cfg.flip_prob = (float)flip;
    cfg.out_h = oh, cfg.out_w = ow;
    cfg.output_u8 = true; /* the pixels as bytes: compared with the mask's own */
    cfg.shuffle = false;
    int h = oh ? oh : H, w = ow ? ow : W;
    tg_loader *l = NULL;
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &l));
    uint8_t *img = malloc((size_t)S * h * w);
    int32_t *labels = malloc((size_t)S * h * w * sizeof *labels);
    int64_t got = 0, n, seen = 0;
    for (int step = 0; l && tg_loader_next_u8(l, img, labels, &n) == TG_OK && n > 0; step++) {
        for (int64_t k = 0; k < n; k++, seen++) {
            const uint8_t *mask = tg_dataset_mask(ds, seen);
            int bad = 0;
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) {
                    int fx = flip ? w - 1 - x : x;
                    int sy = (2 * y + 1) * H / (2 * h), sx = (2 * fx + 1) * W / (2 * w);
                    bad += labels[(k * h + y) * w + x] != mask[sy * W + sx];
                    /* without a resize the pixel moved with its label */
                    if (!oh)
                        bad += img[(k * h + y) * w + x] != ds->images[seen * H * W + y * W + fx];
                }
            TG_CHECK(bad == 0);
            got++;
        }
    }
    TG_CHECK(got == N);
    /* evaluation's view of one sample: its mask, never flipped */
    if (l) {
        TG_CHECK_OK(tg_loader_sample(l, 5, img, labels));
        const uint8_t *mask = tg_dataset_mask(ds, 5);
        int bad = 0;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                bad += labels[y * w + x] !=
                       mask[((2 * y + 1) * H / (2 * h)) * W + (2 * x + 1) * W / (2 * w)];
        TG_CHECK(bad == 0);
    }
    free(img);
    free(labels);
    tg_loader_destroy(l);
    tg_dataset_destroy(ds);
}

static void test_loader_masks(void)
{
    for (int mode = 0; mode < 2; mode++)
        for (int flip = 0; flip < 2; flip++) {
            check_loader((tg_loader_mode)mode, flip, 0, 0);
            check_loader((tg_loader_mode)mode, flip, 24, 10); /* up one way, down the other */
        }
}

int main(void)
{
    TG_RUN(test_deterministic_and_drawn);
    TG_RUN(test_load_and_errors);
    TG_RUN(test_loader_masks);
    return tg_test_finish();
}
