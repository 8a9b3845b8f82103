/* tests/data/test_loader.c - shuffling, step filling and normalisation.
 * TG_TEST_LABELS: quick */
#include "core/alloc.h"
#include "data/loader.h"
#include "tg_test.h"

#include <string.h>

#define N 103
#define C 1
#define H 2
#define W 3

static tg_dataset *make_dataset(void)
{
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_create("synthetic", N, C, H, W, 7, &ds));
    for (int i = 0; i < N; i++) {
        for (int p = 0; p < C * H * W; p++)
            ds->images[i * C * H * W + p] = (uint8_t)((i * 5 + p * 40) & 255);
        ds->labels[i] = i % 7;
    }
    return ds;
}

static int is_permutation(const int64_t *o, int64_t n)
{
    char seen[N] = {0};
    for (int64_t i = 0; i < n; i++) {
        if (o[i] < 0 || o[i] >= n || seen[o[i]])
            return 0;
        seen[o[i]] = 1;
    }
    return 1;
}

static void test_shuffle_deterministic(void)
{
    tg_dataset *ds = make_dataset();
    tg_loader_config cfg = tg_loader_defaults(ds, 10);
    cfg.seed = 42;
    tg_loader *a, *b, *c;
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &a));
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &b));
    cfg.seed = 43;
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &c));
    int64_t e0[N], e1[N];
    memcpy(e0, tg_loader_order(a), sizeof e0);
    TG_CHECK(is_permutation(e0, N));
    TG_CHECK(memcmp(e0, tg_loader_order(b), sizeof e0) == 0); /* same seed: same order */
    TG_CHECK(memcmp(e0, tg_loader_order(c), sizeof e0) != 0); /* other seed: another order */
    int fixed = 0;
    for (int i = 0; i < N; i++)
        fixed += e0[i] == i;
    TG_CHECK(fixed < N / 4); /* really shuffled */

    tg_loader_start_epoch(a, 1);
    memcpy(e1, tg_loader_order(a), sizeof e1);
    TG_CHECK(is_permutation(e1, N));
    TG_CHECK(memcmp(e0, e1, sizeof e0) != 0); /* a new order each epoch */
    TG_CHECK(tg_loader_epoch(a) == 1);
    /* Epoch 1's order does not depend on history: jump there directly, and back. */
    tg_loader_start_epoch(b, 5);
    tg_loader_start_epoch(b, 1);
    TG_CHECK(memcmp(e1, tg_loader_order(b), sizeof e1) == 0);
    tg_loader_start_epoch(a, 0);
    TG_CHECK(memcmp(e0, tg_loader_order(a), sizeof e0) == 0);

    cfg.shuffle = false;
    tg_loader *d;
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &d));
    tg_loader_start_epoch(d, 3);
    for (int i = 0; i < N; i++)
        TG_CHECK(tg_loader_order(d)[i] == i);
    tg_loader_destroy(a);
    tg_loader_destroy(b);
    tg_loader_destroy(c);
    tg_loader_destroy(d);
    tg_dataset_destroy(ds);
}

/* Runs one epoch; returns the number of steps and checks every sample. */
static int run_epoch(tg_loader *l, const tg_dataset *ds, int64_t sps, int64_t *total, int64_t *last)
{
    static float img[N * C * H * W];
    static int32_t lab[N];
    const int64_t *order = tg_loader_order(l);
    int steps = 0;
    int64_t pos = 0, count;
    *last = 0;
    for (;;) {
        TG_CHECK_OK(tg_loader_next(l, img, lab, &count));
        if (count == 0)
            break;
        TG_CHECK(count <= sps);
        for (int64_t k = 0; k < count; k++) {
            int64_t idx = order[pos + k];
            TG_CHECK(lab[k] == ds->labels[idx]);
            for (int p = 0; p < C * H * W; p++) {
                double want =
                    ((double)ds->images[idx * C * H * W + p] / 255.0 - ds->mean) / ds->std;
                if (fabs(img[k * C * H * W + p] - want) > 1e-6) {
                    TG_CHECK_NEAR(img[k * C * H * W + p], want, 1e-6);
                    return steps;
                }
            }
        }
        pos += count;
        *last = count;
        steps++;
    }
    *total = pos;
    return steps;
}

static void test_steps_and_drop_last(void)
{
    tg_dataset *ds = make_dataset();
    tg_loader_config cfg = tg_loader_defaults(ds, 10);
    tg_loader *l;
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &l));
    TG_CHECK(tg_loader_steps_per_epoch(l) == 10);
    TG_CHECK(tg_loader_sample_size(l) == C * H * W);
    int64_t total, last;
    TG_CHECK(run_epoch(l, ds, 10, &total, &last) == 10);
    TG_CHECK(total == 100 && last == 10);
    /* Exhausted until the next epoch starts. */
    int64_t count = -1;
    float img[10 * C * H * W];
    int32_t lab[10];
    TG_CHECK_OK(tg_loader_next(l, img, lab, &count));
    TG_CHECK(count == 0);
    tg_loader_start_epoch(l, 1);
    TG_CHECK(run_epoch(l, ds, 10, &total, &last) == 10);
    tg_loader_destroy(l);

    cfg.drop_last = false;
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &l));
    TG_CHECK(tg_loader_steps_per_epoch(l) == 11);
    TG_CHECK(run_epoch(l, ds, 10, &total, &last) == 11);
    TG_CHECK(total == N && last == 3);
    tg_loader_destroy(l);

    /* One step may be the whole dataset. */
    cfg = tg_loader_defaults(ds, N);
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &l));
    TG_CHECK(run_epoch(l, ds, N, &total, &last) == 1 && total == N);
    tg_loader_destroy(l);
    tg_dataset_destroy(ds);
}

static void test_normalisation_values(void)
{
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_create("px", 3, 1, 1, 2, 2, &ds));
    const uint8_t px[6] = {0, 255, 128, 51, 1, 254};
    memcpy(ds->images, px, 6);
    tg_loader_config cfg = tg_loader_defaults(ds, 3);
    cfg.shuffle = false;
    cfg.mean = 0.2860f;
    cfg.std = 0.3530f;
    tg_loader *l;
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &l));
    float img[6];
    int32_t lab[3];
    int64_t count;
    TG_CHECK_OK(tg_loader_next(l, img, lab, &count));
    TG_CHECK(count == 3);
    TG_CHECK_NEAR(img[0], -0.2860 / 0.3530, 1e-6);        /* black */
    TG_CHECK_NEAR(img[1], (1.0 - 0.2860) / 0.3530, 1e-6); /* white */
    TG_CHECK_NEAR(img[2], (128.0 / 255 - 0.2860) / 0.3530, 1e-6);
    TG_CHECK_NEAR(img[3], (0.2 - 0.2860) / 0.3530, 1e-6);
    tg_loader_destroy(l);
    /* MNIST's constants. */
    cfg.mean = 0.1307f;
    cfg.std = 0.3081f;
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &l));
    TG_CHECK_OK(tg_loader_next(l, img, lab, &count));
    TG_CHECK_NEAR(img[1], (1.0 - 0.1307) / 0.3081, 1e-6);
    tg_loader_destroy(l);
    tg_dataset_destroy(ds);
}

/* tg_loader_sample gives sample i exactly as an unshuffled, unflipped step
 * holds it, resized and as floats or bytes; an index outside the data set
 * fails naming it. */
static void test_one_sample_as_a_step_holds_it(void)
{
    tg_dataset *ds = make_dataset();
    for (int u8 = 0; u8 < 2; u8++) {
        tg_loader_config cfg = tg_loader_defaults(ds, N);
        cfg.shuffle = false;
        cfg.drop_last = false;
        cfg.out_h = 5; /* a resize, so its scratch is used */
        cfg.out_w = 4;
        cfg.output_u8 = u8;
        tg_loader *l;
        TG_CHECK_OK(tg_loader_create(ds, &cfg, &l));
        enum { OUT = C * 5 * 4 };
        float *f = tg_malloc(sizeof(float) * N * OUT), one[OUT];
        uint8_t *u = tg_malloc(N * OUT), one_u8[OUT];
        int32_t labels[N], label = -1;
        int64_t count = 0;
        TG_CHECK_OK(u8 ? tg_loader_next_u8(l, u, labels, &count)
                       : tg_loader_next(l, f, labels, &count));
        TG_CHECK(count == N);
        for (int i = 0; i < N; i += 17) {
            TG_CHECK_OK(tg_loader_sample(l, i, u8 ? (void *)one_u8 : (void *)one, &label));
            TG_CHECK(label == labels[i]);
            TG_CHECK(u8 ? memcmp(one_u8, u + i * OUT, OUT) == 0
                        : memcmp(one, f + i * OUT, sizeof one) == 0);
        }
        TG_CHECK(tg_loader_sample(l, N, one, NULL) == TG_ERR_CONFIG);
        TG_CHECK(strstr(tg_error_message(), "sample 103 does not exist") != NULL);
        TG_CHECK(tg_loader_sample(l, -1, one, NULL) == TG_ERR_CONFIG);
        tg_free(f);
        tg_free(u);
        tg_loader_destroy(l);
    }
    tg_dataset_destroy(ds);
}

static void test_no_allocation_per_step(void)
{
    tg_dataset *ds = make_dataset();
    tg_loader_config cfg = tg_loader_defaults(ds, 8);
    tg_loader *l;
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &l));
    float img[8 * C * H * W];
    int32_t lab[8];
    int64_t count, live = tg_alloc_live_bytes();
    tg_alloc_reset_peak();
    tg_alloc_fail_after(1); /* any allocation now would fail the step */
    for (int e = 0; e < 3; e++) {
        tg_loader_start_epoch(l, e);
        do
            TG_CHECK_OK(tg_loader_next(l, img, lab, &count));
        while (count);
    }
    tg_alloc_fail_after(0);
    TG_CHECK(tg_alloc_peak_bytes() == live && tg_alloc_live_bytes() == live);
    tg_loader_destroy(l);
    tg_dataset_destroy(ds);
}

static void test_bad_configs(void)
{
    tg_dataset *ds = make_dataset();
    tg_loader *l = NULL;
    tg_loader_config cfg = tg_loader_defaults(ds, 0);
    TG_CHECK(tg_loader_create(ds, &cfg, &l) == TG_ERR_CONFIG && l == NULL);
    TG_CHECK(strstr(tg_error_message(), "samples per step must be positive"));
    cfg = tg_loader_defaults(ds, 8);
    cfg.std = 0;
    TG_CHECK(tg_loader_create(ds, &cfg, &l) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "std must be positive"));
    cfg = tg_loader_defaults(ds, N + 1);
    TG_CHECK(tg_loader_create(ds, &cfg, &l) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "104 samples per step but the dataset has only 103"));
    cfg.drop_last = false; /* then one partial step is fine */
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &l));
    TG_CHECK(tg_loader_steps_per_epoch(l) == 1);
    tg_loader_destroy(l);
    tg_dataset_destroy(ds);
}

/* An MPI job's instances (split_parts) each take their chunks of every
 * step; interleaved back, the parts are exactly the whole step, in order, in
 * both modes, including the final partial step. */
static void test_split_parts_make_the_step(void)
{
    tg_dataset *ds = make_dataset();
    const int64_t S = 24, chunk = 4, parts = 3; /* 2 device iterations x 3 instances x 4 */
    float whole[24 * C * H * W], part[3][8 * C * H * W];
    int32_t wl[24], pl[3][8];
    for (int mode = 0; mode < 2; mode++) {
        tg_loader_config cfg = tg_loader_defaults(ds, S);
        cfg.seed = 11;
        cfg.drop_last = false;
        cfg.mode = mode ? TG_LOADER_ASYNC : TG_LOADER_SYNC;
        tg_loader *all = NULL, *l[3] = {NULL};
        TG_CHECK_OK(tg_loader_create(ds, &cfg, &all));
        for (int i = 0; i < parts; i++) {
            tg_loader_config c = cfg;
            c.split_parts = (int)parts, c.split_index = i, c.split_chunk = chunk;
            TG_CHECK_OK(tg_loader_create(ds, &c, &l[i]));
            TG_CHECK(tg_loader_steps_per_epoch(l[i]) == tg_loader_steps_per_epoch(all));
        }
        for (int64_t step = 0; step < tg_loader_steps_per_epoch(all); step++) {
            int64_t n = 0, got = 0, pn[3];
            TG_CHECK_OK(tg_loader_next(all, whole, wl, &n));
            for (int i = 0; i < parts; i++)
                TG_CHECK_OK(tg_loader_next(l[i], part[i], pl[i], &pn[i]));
            for (int64_t q = 0; q < n; q++) { /* position q of the step: whose, where */
                int64_t i = (q / chunk) % parts, k = (q / (chunk * parts)) * chunk + q % chunk;
                TG_CHECK(k < pn[i]);
                TG_CHECK(pl[i][k] == wl[q]);
                TG_CHECK(!memcmp(part[i] + k * C * H * W, whole + q * C * H * W,
                                 sizeof(float) * C * H * W));
            }
            for (int i = 0; i < parts; i++)
                got += pn[i];
            TG_CHECK(got == n); /* nothing twice, nothing left out */
        }
        for (int i = 0; i < parts; i++)
            tg_loader_destroy(l[i]);
        tg_loader_destroy(all);
    }
    /* a split that does not cut the step evenly is refused */
    tg_loader_config bad = tg_loader_defaults(ds, S);
    bad.split_parts = 5, bad.split_index = 0, bad.split_chunk = 4;
    tg_loader *x = NULL;
    TG_CHECK(tg_loader_create(ds, &bad, &x) == TG_ERR_CONFIG && !x);
    tg_dataset_destroy(ds);
}

int main(void)
{
    TG_RUN(test_split_parts_make_the_step);
    TG_RUN(test_shuffle_deterministic);
    TG_RUN(test_steps_and_drop_last);
    TG_RUN(test_normalisation_values);
    TG_RUN(test_one_sample_as_a_step_holds_it);
    TG_RUN(test_no_allocation_per_step);
    TG_RUN(test_bad_configs);
    return tg_test_finish();
}
