/* tests/data/test_loader_async.c - the async loader gives the same steps as
 * the sync one, byte for byte, with any worker count and prefetch depth;
 * augmentations (flip, resize) and 8-bit output are exact and reproducible;
 * destroying a loader whose workers are busy neither hangs nor leaks.
 * TG_TEST_LABELS: threads */
#include "core/alloc.h"
#include "core/error.h"
#include "data/loader.h"
#include "tg_test.h"

#include <stdlib.h>
#include <string.h>

/* A small CIFAR-like dataset: 3 x 8 x 8, 10 classes, per-channel stats. */
static tg_dataset *make_dataset(int64_t n)
{
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_synthetic(n, 3, 8, 8, 10, 5, &ds));
    if (!ds)
        return NULL;
    ds->channel_stats = 3;
    const float m[3] = {0.49f, 0.48f, 0.45f}, s[3] = {0.25f, 0.24f, 0.26f};
    for (int c = 0; c < 3; c++)
        ds->channel_mean[c] = m[c], ds->channel_std[c] = s[c];
    return ds;
}

/* Every step of `epochs` epochs, concatenated: images (f32 or u8) and labels.
 * Epochs are started in the order 0, 1, 3 (a jump), then restarted at 1
 * after a partial read, to cover restarts with busy workers. */
typedef struct run {
    unsigned char *bytes;
    size_t len, cap;
    int64_t steps;
} run;

static void put(run *r, const void *p, size_t n)
{
    if (r->len + n > r->cap) {
        r->cap = (r->len + n) * 2;
        r->bytes = realloc(r->bytes, r->cap);
    }
    memcpy(r->bytes + r->len, p, n);
    r->len += n;
}

static run collect(const tg_dataset *ds, tg_loader_config cfg, int borrow)
{
    run r = {0};
    tg_loader *l = NULL;
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &l));
    if (!l)
        return r;
    int64_t per = tg_loader_sample_size(l), S = cfg.samples_per_step;
    size_t esz = cfg.output_u8 ? 1 : sizeof(float);
    void *img = malloc((size_t)(S * per) * esz);
    int32_t *lab = malloc((size_t)S * sizeof *lab);
    static const int64_t epochs[] = {0, 1, 3, -1, 1};
    for (size_t e = 0; e < sizeof epochs / sizeof epochs[0]; e++) {
        if (epochs[e] < 0) { /* a partial epoch 2, abandoned after 2 steps */
            tg_loader_start_epoch(l, 2);
            int64_t c;
            for (int k = 0; k < 2; k++)
                TG_CHECK_OK(cfg.output_u8 ? tg_loader_next_u8(l, img, lab, &c)
                                          : tg_loader_next(l, img, lab, &c));
            continue;
        }
        tg_loader_start_epoch(l, epochs[e]);
        int64_t k = 0;
        for (;;) {
            int64_t c = 0;
            if (borrow) {
                tg_loader_batch b;
                TG_CHECK_OK(tg_loader_borrow(l, &b));
                c = b.count;
                if (c) {
                    TG_CHECK(b.step == k);
                    put(&r, cfg.output_u8 ? (const void *)b.images_u8 : (const void *)b.images,
                        (size_t)(c * per) * esz);
                    put(&r, b.labels, (size_t)c * sizeof(int32_t));
                }
                tg_loader_release(l, &b);
            } else {
                TG_CHECK_OK(cfg.output_u8 ? tg_loader_next_u8(l, img, lab, &c)
                                          : tg_loader_next(l, img, lab, &c));
                if (c) {
                    put(&r, img, (size_t)(c * per) * esz);
                    put(&r, lab, (size_t)c * sizeof(int32_t));
                }
            }
            if (!c)
                break;
            k++;
            r.steps++;
        }
        TG_CHECK(k == tg_loader_steps_per_epoch(l));
    }
    tg_loader_stats st = tg_loader_get_stats(l);
    TG_CHECK(st.steps == r.steps + 2); /* + the partial epoch's 2 */
    TG_CHECK(st.wait_seconds >= 0 && st.max_wait_seconds <= st.wait_seconds + 1e-12);
    TG_CHECK(st.load_seconds > 0);
    free(img);
    free(lab);
    tg_loader_destroy(l);
    return r;
}

static void test_async_matches_sync(void)
{
    tg_dataset *ds = make_dataset(101);
    int64_t live = tg_alloc_live_bytes();
    for (int variant = 0; variant < 3; variant++) {
        tg_loader_config cfg = tg_loader_defaults(ds, 8);
        cfg.seed = 1234;
        cfg.flip_prob = 0.5f;
        if (variant >= 1) { /* CIFAR 32 -> 64 style: resize up */
            cfg.out_h = 12;
            cfg.out_w = 16;
        }
        cfg.drop_last = variant != 1; /* variant 1: a partial final step */
        cfg.output_u8 = variant == 2;
        run ref = collect(ds, cfg, 0);
        TG_CHECK(ref.steps > 0);
        run ref_b = collect(ds, cfg, 1);
        TG_CHECK(ref_b.len == ref.len && memcmp(ref_b.bytes, ref.bytes, ref.len) == 0);
        cfg.mode = TG_LOADER_ASYNC;
        static const int workers[] = {1, 2, 4}, depths[] = {3, 1, 2};
        for (int w = 0; w < 3; w++) {
            cfg.num_workers = workers[w];
            cfg.prefetch_depth = depths[w];
            for (int borrow = 0; borrow < 2; borrow++) {
                run a = collect(ds, cfg, borrow);
                if (a.len != ref.len || memcmp(a.bytes, ref.bytes, ref.len) != 0)
                    tg_test_fail(
                        __FILE__, __LINE__,
                        "variant %d, %d workers, depth %d, borrow %d: async differs from sync",
                        variant, workers[w], depths[w], borrow);
                free(a.bytes);
            }
        }
        free(ref.bytes);
        free(ref_b.bytes);
    }
    TG_CHECK(tg_alloc_live_bytes() == live);
    tg_dataset_destroy(ds);
}

/* f32 output is exactly the normalised u8 output, and flips are mirror images. */
static void test_augmentation_exact(void)
{
    tg_dataset *ds = make_dataset(40);
    tg_loader_config cfg = tg_loader_defaults(ds, 40);
    cfg.shuffle = false;
    cfg.flip_prob = 1.0f;
    tg_loader *l;
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &l));
    static float f[40 * 3 * 13 * 9];
    static uint8_t u[40 * 3 * 13 * 9];
    int32_t lab[40];
    int64_t c;
    TG_CHECK_OK(tg_loader_next(l, f, lab, &c));
    TG_CHECK(c == 40);
    int bad = 0;
    for (int i = 0; i < 40; i++)
        for (int ch = 0; ch < 3; ch++)
            for (int y = 0; y < 8; y++)
                for (int x = 0; x < 8; x++) {
                    uint8_t v = ds->images[i * 192 + ch * 64 + y * 8 + (7 - x)];
                    float want =
                        (float)(((double)v / 255.0 - ds->channel_mean[ch]) / ds->channel_std[ch]);
                    bad += f[i * 192 + ch * 64 + y * 8 + x] != want;
                }
    TG_CHECK(bad == 0);
    tg_loader_destroy(l);

    /* Half the samples flipped, a different half each epoch, u8 matching f32. */
    cfg.flip_prob = 0.5f;
    cfg.out_h = 13, cfg.out_w = 9;
    tg_loader *lf, *lu;
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &lf));
    cfg.output_u8 = true;
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &lu));
    int ch_, h_, w_;
    tg_loader_sample_shape(lu, &ch_, &h_, &w_);
    TG_CHECK(ch_ == 3 && h_ == 13 && w_ == 9 && tg_loader_sample_size(lu) == 3 * 13 * 9);
    TG_CHECK(tg_loader_next(lu, f, lab, &c) == TG_ERR_INVALID_ARG); /* wrong type */
    TG_CHECK(tg_loader_next_u8(lf, u, lab, &c) == TG_ERR_INVALID_ARG);
    const int per = 3 * 13 * 9;
    static uint8_t first[40 * 3 * 13 * 9];
    for (int e = 0; e < 2; e++) {
        tg_loader_start_epoch(lf, e);
        tg_loader_start_epoch(lu, e);
        TG_CHECK_OK(tg_loader_next(lf, f, lab, &c));
        TG_CHECK_OK(tg_loader_next_u8(lu, u, lab, &c));
        bad = 0;
        int flips = 0;
        for (int i = 0; i < 40; i++) {
            for (int p = 0; p < per; p++) {
                int ch = p / (13 * 9);
                float want = (float)(((double)u[i * per + p] / 255.0 - ds->channel_mean[ch]) /
                                     ds->channel_std[ch]);
                bad += f[i * per + p] != want;
            }
            /* a sample flipped in one epoch and not the other differs */
            const uint8_t *img = u + i * per;
            if (e == 0)
                memcpy(first + i * per, img, per);
            else
                flips += memcmp(first + i * per, img, per) != 0;
        }
        TG_CHECK(bad == 0);
        if (e == 1)
            TG_CHECK(flips > 5 && flips < 35); /* epoch 1 flips other samples */
    }
    tg_loader_destroy(lf);
    tg_loader_destroy(lu);
    tg_dataset_destroy(ds);
}

/* Bilinear resize with half-pixel centres: a 1x2 row [0, 100] to 1x4 is
 * [0, 25, 75, 100]; flipped, [100, 75, 25, 0]. */
static void test_resize_values(void)
{
    tg_dataset *ds;
    TG_CHECK_OK(tg_dataset_create("row", 1, 1, 2, 2, 2, &ds));
    uint8_t px[4] = {0, 100, 40, 40};
    memcpy(ds->images, px, 4);
    tg_loader_config cfg = tg_loader_defaults(ds, 1);
    cfg.output_u8 = true;
    cfg.out_h = 2, cfg.out_w = 4;
    tg_loader *l;
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &l));
    uint8_t out[8];
    int32_t lab;
    int64_t c;
    TG_CHECK_OK(tg_loader_next_u8(l, out, &lab, &c));
    static const uint8_t want[8] = {0, 25, 75, 100, 40, 40, 40, 40};
    TG_CHECK(c == 1 && memcmp(out, want, 8) == 0);
    tg_loader_destroy(l);
    cfg.flip_prob = 1.0f;
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &l));
    TG_CHECK_OK(tg_loader_next_u8(l, out, &lab, &c));
    static const uint8_t wantf[8] = {100, 75, 25, 0, 40, 40, 40, 40};
    TG_CHECK(c == 1 && memcmp(out, wantf, 8) == 0);
    tg_loader_destroy(l);
    tg_dataset_destroy(ds);
}

/* Destroy while workers are busy filling a deep ring, at many points. */
static void test_shutdown_mid_epoch(void)
{
    tg_dataset *ds = make_dataset(400);
    int64_t live = tg_alloc_live_bytes();
    for (int rep = 0; rep < 12; rep++) {
        tg_loader_config cfg = tg_loader_defaults(ds, 10);
        cfg.mode = TG_LOADER_ASYNC;
        cfg.num_workers = 1 + rep % 4;
        cfg.prefetch_depth = 1 + rep % 5;
        cfg.out_h = cfg.out_w = 32; /* slow enough to be mid-step */
        cfg.flip_prob = 0.5f;
        tg_loader *l;
        TG_CHECK_OK(tg_loader_create(ds, &cfg, &l));
        static float img[10 * 3 * 32 * 32];
        int32_t lab[10];
        int64_t c;
        for (int k = 0; k < rep % 3; k++)
            TG_CHECK_OK(tg_loader_next(l, img, lab, &c));
        if (rep % 4 == 3) { /* destroy with a step borrowed */
            tg_loader_batch b;
            TG_CHECK_OK(tg_loader_borrow(l, &b));
            TG_CHECK(tg_loader_next(l, img, lab, &c) == TG_ERR_INVALID_ARG);
            tg_loader_batch b2;
            TG_CHECK(tg_loader_borrow(l, &b2) == TG_ERR_INVALID_ARG);
        }
        tg_loader_destroy(l);
    }
    TG_CHECK(tg_alloc_live_bytes() == live);
    tg_dataset_destroy(ds);
}

static void test_config_errors(void)
{
    tg_dataset *ds = make_dataset(20);
    tg_loader *l = (tg_loader *)1;
    tg_loader_config cfg = tg_loader_defaults(ds, 4);
    TG_CHECK(cfg.channel_stats == 3 && cfg.channel_mean[1] == ds->channel_mean[1]);
    TG_CHECK(cfg.prefetch_depth == 3 && cfg.num_workers == 1 && cfg.mode == TG_LOADER_SYNC);
    cfg.flip_prob = 1.5f;
    TG_CHECK(tg_loader_create(ds, &cfg, &l) == TG_ERR_CONFIG && l == NULL);
    cfg = tg_loader_defaults(ds, 4);
    cfg.out_h = 10;
    TG_CHECK(tg_loader_create(ds, &cfg, &l) == TG_ERR_CONFIG);
    cfg = tg_loader_defaults(ds, 4);
    cfg.mode = TG_LOADER_ASYNC;
    cfg.num_workers = -1;
    TG_CHECK(tg_loader_create(ds, &cfg, &l) == TG_ERR_CONFIG);
    cfg.num_workers = 2;
    cfg.prefetch_depth = 1000;
    TG_CHECK(tg_loader_create(ds, &cfg, &l) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "prefetch depth 1000") != NULL);
    tg_loader_mode mode = TG_LOADER_SYNC;
    TG_CHECK(tg_loader_mode_parse("async", &mode) == TG_OK && mode == TG_LOADER_ASYNC);
    TG_CHECK(tg_loader_mode_parse("sync", &mode) == TG_OK && mode == TG_LOADER_SYNC);
    TG_CHECK(tg_loader_mode_parse("fast", &mode) == TG_ERR_INVALID_ARG && mode == TG_LOADER_SYNC);
    TG_CHECK(strstr(tg_error_message(), "loader mode 'fast': expected sync or async") != NULL);
    TG_CHECK(strcmp(tg_loader_mode_name(TG_LOADER_ASYNC), "async") == 0);
    tg_dataset_destroy(ds);
}

int main(void)
{
    TG_RUN(test_async_matches_sync);
    TG_RUN(test_augmentation_exact);
    TG_RUN(test_resize_values);
    TG_RUN(test_shutdown_mid_epoch);
    TG_RUN(test_config_errors);
    return tg_test_finish();
}
