/* tests/data/test_loader_channels.c - per-channel normalisation in the
 * loader (CIFAR's statistics): each channel with its own mean and std, the
 * single mean and std unchanged, and bad statistics refused. */
#include "data/loader.h"
#include "tg_test.h"

#include <string.h>

#define N 5
#define C 3
#define H 2
#define W 3

static tg_dataset *make_dataset(int channels)
{
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_create("rgb", N, channels, H, W, 10, &ds));
    for (int i = 0; ds && i < N * channels * H * W; i++)
        ds->images[i] = (uint8_t)((i * 37 + 11) & 255);
    for (int i = 0; ds && i < N; i++)
        ds->labels[i] = i;
    return ds;
}

static const float mean[C] = {0.4914f, 0.4822f, 0.4465f}, stdv[C] = {0.2470f, 0.2435f, 0.2616f};

static tg_loader_config per_channel(const tg_dataset *ds)
{
    tg_loader_config cfg = tg_loader_defaults(ds, N);
    cfg.shuffle = false;
    cfg.channel_stats = C;
    memcpy(cfg.channel_mean, mean, sizeof mean);
    memcpy(cfg.channel_std, stdv, sizeof stdv);
    return cfg;
}

static void test_each_channel_its_own_statistics(void)
{
    tg_dataset *ds = make_dataset(C);
    tg_loader_config cfg = per_channel(ds);
    tg_loader *l = NULL;
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &l));
    float x[N * C * H * W];
    int32_t y[N];
    int64_t count = 0;
    if (l)
        TG_CHECK_OK(tg_loader_next(l, x, y, &count));
    TG_CHECK(count == N);
    for (int i = 0; i < count; i++)
        for (int c = 0; c < C; c++)
            for (int p = 0; p < H * W; p++) {
                int k = (i * C + c) * H * W + p;
                double want = ((double)ds->images[k] / 255.0 - mean[c]) / stdv[c];
                TG_CHECK_NEAR(x[k], want, 1e-6);
            }
    tg_loader_destroy(l);

    /* per-channel statistics that are all equal give the single-value result */
    tg_loader_config one = tg_loader_defaults(ds, N), same = one;
    one.shuffle = same.shuffle = false;
    same.channel_stats = C;
    for (int c = 0; c < C; c++) {
        same.channel_mean[c] = one.mean;
        same.channel_std[c] = one.std;
    }
    float a[N * C * H * W], b[N * C * H * W];
    tg_loader *la = NULL, *lb = NULL;
    TG_CHECK_OK(tg_loader_create(ds, &one, &la));
    TG_CHECK_OK(tg_loader_create(ds, &same, &lb));
    if (la && lb) {
        TG_CHECK_OK(tg_loader_next(la, a, y, &count));
        TG_CHECK_OK(tg_loader_next(lb, b, y, &count));
        TG_CHECK(memcmp(a, b, sizeof a) == 0);
        TG_CHECK(memcmp(a, x, sizeof a) != 0); /* and the CIFAR statistics differ */
    }
    tg_loader_destroy(la);
    tg_loader_destroy(lb);
    tg_dataset_destroy(ds);
}

static void test_bad_statistics_refused(void)
{
    tg_dataset *ds = make_dataset(C), *gray = make_dataset(1);
    tg_loader *l = NULL;
    tg_loader_config cfg = per_channel(gray); /* 3 channels' statistics for 1 channel */
    TG_CHECK(tg_loader_create(gray, &cfg, &l) == TG_ERR_CONFIG && !l);
    TG_CHECK(strstr(tg_error_message(), "3 channels") && strstr(tg_error_message(), "have 1"));
    cfg = per_channel(ds);
    cfg.channel_std[2] = 0.0f;
    TG_CHECK(tg_loader_create(ds, &cfg, &l) == TG_ERR_CONFIG && !l);
    TG_CHECK(strstr(tg_error_message(), "channel 2") != NULL);
    cfg = per_channel(ds);
    cfg.channel_mean[1] = NAN;
    TG_CHECK(tg_loader_create(ds, &cfg, &l) == TG_ERR_CONFIG && !l);
    cfg = per_channel(ds);
    cfg.channel_stats = -1;
    TG_CHECK(tg_loader_create(ds, &cfg, &l) == TG_ERR_CONFIG && !l);
    tg_dataset_destroy(ds);
    tg_dataset_destroy(gray);
}

/* More channels than per-channel tables: one mean and std still works. */
static void test_many_channels_single_statistics(void)
{
    tg_dataset *ds = make_dataset(TG_LOADER_MAX_CHANNELS + 2);
    tg_loader_config cfg = tg_loader_defaults(ds, N);
    cfg.shuffle = false;
    tg_loader *l = NULL;
    TG_CHECK_OK(tg_loader_create(ds, &cfg, &l));
    enum { PER = (TG_LOADER_MAX_CHANNELS + 2) * H * W };
    float x[N * PER];
    int32_t y[N];
    int64_t count = 0;
    if (l)
        TG_CHECK_OK(tg_loader_next(l, x, y, &count));
    TG_CHECK(count == N);
    for (int k = 0; k < N * PER; k++)
        TG_CHECK_NEAR(x[k], ((double)ds->images[k] / 255.0 - cfg.mean) / cfg.std, 1e-6);
    tg_loader_destroy(l);
    cfg.channel_stats = TG_LOADER_MAX_CHANNELS + 2;
    TG_CHECK(tg_loader_create(ds, &cfg, &l) == TG_ERR_CONFIG && !l);
    tg_dataset_destroy(ds);
}

int main(void)
{
    TG_RUN(test_each_channel_its_own_statistics);
    TG_RUN(test_bad_statistics_refused);
    TG_RUN(test_many_channels_single_statistics);
    return tg_test_finish();
}
