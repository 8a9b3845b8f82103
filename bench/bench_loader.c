/* bench/bench_loader.c - host data loading throughput, sync against async,
 * measured in the same run.
 *
 * CIFAR-shaped synthetic data (3x32x32, 10 classes) resized to 64x64 with
 * random horizontal flips and per-channel normalisation, as seed 003's
 * transform does, 64 samples per host step. Two measurements:
 *   loader_only: the consumer does nothing but take steps (samples/s the
 *     loader can deliver: sync, async with 1 and 2 workers, and 8-bit output);
 *   with_compute / with_idle_device: the consumer spends a fixed time per
 *     step standing in for the devices' work (equal to the measured sync load
 *     time per step), busy on a core (tilegraph's cpu devices share this
 *     machine's 2 cores with the workers) or asleep (an accelerator), so sync
 *     pays load + compute while async can overlap them; the consumer's wait
 *     share shows whether the host keeps up.
 * Prints one JSON line.
 */
#include "bench_util.h"
#include "data/loader.h"

#include <stdio.h>
#include <time.h>

#define N 4096
#define STEP 64
#define EPOCHS 2

/* Device work standing in: a busy CPU (tilegraph's cpu devices compute on
 * this machine's cores) or a sleep (an accelerator working while the host
 * idles). */
static void spin(double seconds)
{
    double end = bench_now() + seconds;
    volatile unsigned x = 0;
    while (bench_now() < end)
        x++;
}

static void idle(double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
}

typedef struct result {
    double samples_per_s, wait_share, seconds;
} result;

/* Run EPOCHS epochs; `compute` seconds of simulated device work per step. */
static result run(const tg_dataset *ds, tg_loader_mode mode, int workers, int u8, double compute,
                  int busy)
{
    result r = {0};
    tg_loader_config cfg = tg_loader_defaults(ds, STEP);
    cfg.seed = 3;
    cfg.flip_prob = 0.5f;
    cfg.out_h = cfg.out_w = 64;
    cfg.mode = mode;
    cfg.num_workers = workers;
    cfg.output_u8 = u8;
    tg_loader *l;
    if (tg_loader_create(ds, &cfg, &l) != TG_OK)
        return r;
    int64_t samples = 0;
    double t0 = bench_now();
    for (int e = 0; e < EPOCHS; e++) {
        tg_loader_start_epoch(l, e);
        for (;;) {
            tg_loader_batch b;
            if (tg_loader_borrow(l, &b) != TG_OK || b.count == 0)
                break;
            samples += b.count;
            if (compute > 0)
                (busy ? spin : idle)(compute);
            tg_loader_release(l, &b);
        }
    }
    r.seconds = bench_now() - t0;
    tg_loader_stats st = tg_loader_get_stats(l);
    r.samples_per_s = (double)samples / r.seconds;
    r.wait_share = st.wait_seconds / r.seconds;
    tg_loader_destroy(l);
    return r;
}

int main(int argc, char **argv)
{
    int usage =
        bench_usage(argc, argv, 0,
                    "usage: bench_loader\nHost data loading throughput (CIFAR-shaped, resize, "
                    "flip, normalise), sync against async, in the same run. One JSON line.\n");
    if (usage >= 0)
        return usage;
    tg_dataset *ds;
    if (tg_dataset_synthetic(N, 3, 32, 32, 10, 1, &ds) != TG_OK)
        return 1;
    ds->channel_stats = 3; /* CIFAR-10's statistics, as the loader would use */
    const float m[3] = {0.4914f, 0.4822f, 0.4465f}, s[3] = {0.2470f, 0.2435f, 0.2616f};
    for (int c = 0; c < 3; c++)
        ds->channel_mean[c] = m[c], ds->channel_std[c] = s[c];

    result sync = run(ds, TG_LOADER_SYNC, 0, 0, 0, 0);
    result a1 = run(ds, TG_LOADER_ASYNC, 1, 0, 0, 0);
    result a2 = run(ds, TG_LOADER_ASYNC, 2, 0, 0, 0);
    result s8 = run(ds, TG_LOADER_SYNC, 0, 1, 0, 0);
    result a8 = run(ds, TG_LOADER_ASYNC, 2, 1, 0, 0);
    /* simulated device time per step: the sync load time of one step */
    double compute = (double)STEP / sync.samples_per_s;
    result csync = run(ds, TG_LOADER_SYNC, 0, 0, compute, 1);
    result c1 = run(ds, TG_LOADER_ASYNC, 1, 0, compute, 1);
    result c2 = run(ds, TG_LOADER_ASYNC, 2, 0, compute, 1);
    result isync = run(ds, TG_LOADER_SYNC, 0, 0, compute, 0);
    result i1 = run(ds, TG_LOADER_ASYNC, 1, 0, compute, 0);
    result i2 = run(ds, TG_LOADER_ASYNC, 2, 0, compute, 0);

    printf(
        "{\"bench\":\"loader\",\"data\":\"synthetic 3x32x32 -> 64x64, flip 0.5, normalised\","
        "\"samples_per_step\":%d,\"samples_per_epoch\":%d,\"epochs\":%d,\"prefetch_depth\":%d,"
        "\"loader_only_samples_per_s\":{\"sync\":%.0f,\"async_1_worker\":%.0f,\"async_2_workers\":%"
        ".0f,"
        "\"sync_u8\":%.0f,\"async_2_workers_u8\":%.0f},"
        "\"with_compute\":{\"compute_ms_per_step\":%.3f,"
        "\"samples_per_s\":{\"sync\":%.0f,\"async_1_worker\":%.0f,\"async_2_workers\":%.0f},"
        "\"consumer_wait_share\":{\"sync\":%.3f,\"async_1_worker\":%.3f,\"async_2_workers\":%.3f},"
        "\"speedup_async_1_worker\":%.2f,\"speedup_async_2_workers\":%.2f},"
        "\"with_idle_device\":{\"samples_per_s\":{\"sync\":%.0f,\"async_1_worker\":%.0f,"
        "\"async_2_workers\":%.0f},\"consumer_wait_share\":{\"sync\":%.3f,\"async_1_worker\":%.3f,"
        "\"async_2_workers\":%.3f},\"speedup_async_1_worker\":%.2f,\"speedup_async_2_workers\":%."
        "2f}}\n",
        STEP, N, EPOCHS, TG_LOADER_DEFAULT_PREFETCH, sync.samples_per_s, a1.samples_per_s,
        a2.samples_per_s, s8.samples_per_s, a8.samples_per_s, compute * 1e3, csync.samples_per_s,
        c1.samples_per_s, c2.samples_per_s, csync.wait_share, c1.wait_share, c2.wait_share,
        c1.samples_per_s / csync.samples_per_s, c2.samples_per_s / csync.samples_per_s,
        isync.samples_per_s, i1.samples_per_s, i2.samples_per_s, isync.wait_share, i1.wait_share,
        i2.wait_share, i1.samples_per_s / isync.samples_per_s,
        i2.samples_per_s / isync.samples_per_s);
    tg_dataset_destroy(ds);
    return 0;
}
