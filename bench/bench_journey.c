/* bench/bench_journey.c - seed 003's optimisation journey on this machine,
 * every step measured in the same run.
 *
 * The speed story of examples/journey: torchvision's ResNet-18 (the ImageNet
 * stem, as the seed trains torchvision's ResNet-101 unmodified on 32x32
 * CIFAR-10) split at layer3.0 and pipelined over 2 cpu devices of one thread
 * each, micro-batch 16, AdamW, CIFAR-shaped synthetic data with random
 * flips. Each step adds one change to the one before, as the seed does:
 *
 *   base           precision 32.32, gradient accumulation 3
 *   bf16.bf16      half precision as this target computes it: bf16
 *                  storage and arithmetic (oneDNN on AVX512_BF16), bf16
 *                  accumulators and first moment. The seed's 16.16 is the
 *                  tile processor's native half; a CPU without f16
 *                  arithmetic only converts it (docs/precision.md), so
 *                  that line is measured too, after the steps, as a
 *                  comparison
 *   (each later step keeps bf16.bf16)
 *   accumulation 8
 *   iterations 4   device iterations 4
 *   8-bit I/O      u8 images in the host stream, normalised on the device
 *   async loader   one worker thread preparing host steps ahead (depth 3)
 *
 * For each: samples/s over the same number of samples after a warm-up host
 * step, planned memory per device (the arena the engine allocates), and
 * host-stream bytes per sample, each relative to the base; and the share of
 * the time the host spent waiting for data. The steps run in rounds (all
 * steps, then all again) and each reports its best round, so a passing load
 * on the machine does not land on one step only. Prints the table on stderr
 * and one JSON line on stdout. BENCH_JOURNEY_SAMPLES (default 3072) and
 * BENCH_JOURNEY_ROUNDS (default 2) override the samples timed per step and
 * the rounds.
 */
#include "bench_util.h"
#include "core/error.h"
#include "data/loader.h"
#include "runtime/session_internal.h"
#include "tilegraph/models.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 16
#define DATASET 4096

typedef struct step_def {
    const char *name;
    const char *const *kv; /* options, key/value pairs, NULL-terminated */
    int accumulation, iterations;
    bool eight_bit, async;
} step_def;

typedef struct step_result {
    double samples_per_s, wait_share;
    size_t device_bytes[2];
    double stream_bytes_per_sample;
    int64_t samples;
} step_result;

static tg_options *options_for(const step_def *st)
{
    tg_options *o = tg_options_create();
    char m[16], it[16];
    snprintf(m, sizeof m, "%d", st->accumulation);
    snprintf(it, sizeof it, "%d", st->iterations);
    const char *split = getenv("BENCH_JOURNEY_SPLIT");
    const char *common[] = {"split",
                            split && *split ? split : "layer3.0",
                            "executionStrategy",
                            "pipelined",
                            "threadsPerDevice",
                            "1",
                            "Training.gradientAccumulation",
                            m,
                            "deviceIterations",
                            it,
                            "outputMode",
                            "final",
                            NULL};
    for (int i = 0; common[i]; i += 2)
        if (tg_options_set(o, common[i], common[i + 1]) != TG_OK)
            goto bad;
    for (int i = 0; st->kv[i]; i += 2)
        if (tg_options_set(o, st->kv[i], st->kv[i + 1]) != TG_OK)
            goto bad;
    return o;
bad:
    fprintf(stderr, "bench_journey: %s\n", tg_error_message());
    tg_options_destroy(o);
    return NULL;
}

/* Bytes the host streams to the devices per sample: every input buffer of
 * every device, one micro-batch each. */
static double stream_bytes_per_sample(const tg_session *s)
{
    const tg_program *p = tg_session_program(s);
    double bytes = 0;
    for (int d = 0; d < p->n_devices; d++)
        for (int k = 0; k < p->devices[d].n_inputs; k++)
            bytes += (double)p->buffers[p->devices[d].inputs[k]].bytes;
    return bytes / BATCH;
}

static tg_status run_step(tg_session *s, const tg_model_graph *mg, tg_loader *l, int64_t *count)
{
    tg_loader_batch b;
    TG_TRY(tg_loader_borrow(l, &b));
    if (b.count == 0) { /* epoch over: start the next one */
        tg_loader_release(l, &b);
        tg_loader_start_epoch(l, tg_loader_epoch(l) + 1);
        TG_TRY(tg_loader_borrow(l, &b));
    }
    int64_t n = b.count, pixels = tg_loader_sample_size(l);
    tg_status st = b.images_u8 ? tg_session_write(s, mg->images, b.images_u8, (size_t)(n * pixels))
                               : tg_session_write(s, mg->images, b.images,
                                                  (size_t)(n * pixels) * sizeof(float));
    if (st == TG_OK)
        st = tg_session_write(s, mg->labels, b.labels, (size_t)n * sizeof(int32_t));
    tg_loader_release(l, &b);
    if (st == TG_OK)
        st = tg_session_run(s);
    *count = n;
    return st;
}

static tg_status measure(const step_def *st, const tg_dataset *ds, int64_t samples, step_result *r)
{
    memset(r, 0, sizeof *r);
    const tg_model_spec *spec = tg_model_find("resnet18");
    tg_model_input in = {.channels = 3,
                         .height = 32,
                         .width = 32,
                         .classes = 10,
                         .eight_bit = st->eight_bit,
                         .stem = TG_STEM_IMAGENET};
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    tg_model_graph mg;
    TG_TRY(tg_model_graph_create_ex(spec, BATCH, &opt, &in, &mg));
    tg_options *o = options_for(st);
    tg_session *s = NULL;
    tg_loader *l = NULL;
    tg_status status = o ? tg_session_create(mg.graph, o, &s) : TG_ERR_CONFIG;
    tg_options_destroy(o);
    if (status == TG_OK) {
        tg_loader_config cfg = tg_loader_defaults(ds, tg_session_samples_per_run(s, mg.images));
        cfg.seed = 3;
        cfg.flip_prob = 0.5f;
        cfg.output_u8 = st->eight_bit;
        cfg.mode = st->async ? TG_LOADER_ASYNC : TG_LOADER_SYNC;
        cfg.num_workers = 1;
        status = tg_loader_create(ds, &cfg, &l);
    }
    int64_t n = 0, done = 0;
    if (status == TG_OK)
        status = run_step(s, &mg, l, &n); /* warm-up: first touches, thread start */
    tg_loader_stats before = l ? tg_loader_get_stats(l) : (tg_loader_stats){0};
    double t0 = bench_now();
    while (status == TG_OK && done < samples) {
        status = run_step(s, &mg, l, &n);
        done += n;
    }
    double seconds = bench_now() - t0;
    if (status == TG_OK) {
        tg_loader_stats after = tg_loader_get_stats(l);
        const tg_program *p = tg_session_program(s);
        r->samples = done;
        r->samples_per_s = (double)done / seconds;
        r->wait_share = (after.wait_seconds - before.wait_seconds) / seconds;
        for (int d = 0; d < p->n_devices && d < 2; d++)
            r->device_bytes[d] = p->devices[d].arena_bytes;
        r->stream_bytes_per_sample = stream_bytes_per_sample(s);
    }
    tg_loader_destroy(l);
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    return status;
}

int main(int argc, char **argv)
{
    int usage =
        bench_usage(argc, argv, 0,
                    "usage: bench_journey\nSeed 003's optimisation journey on the cpu target, "
                    "every step measured in the same run. One JSON line per step.\nenvironment: "
                    "BENCH_JOURNEY_SAMPLES, BENCH_JOURNEY_ROUNDS, BENCH_JOURNEY_SPLIT\n");
    if (usage >= 0)
        return usage;
    const char *env = getenv("BENCH_JOURNEY_SAMPLES");
    int64_t samples = env && atoll(env) > 0 ? atoll(env) : 3072;
    const char *env_rounds = getenv("BENCH_JOURNEY_ROUNDS");
    int rounds = env_rounds && atoi(env_rounds) > 0 ? atoi(env_rounds) : 2;
    static const char *const f32[] = {NULL};
    static const char *const half[] = {
        "precision", "bf16.bf16", "accumType", "bf16", "firstOrderMomentumAccumType", "bf16", NULL};
    static const char *const f16[] = {"precision",
                                      "16.16",
                                      "lossScaling",
                                      "static",
                                      "lossScalingFactor",
                                      "1000",
                                      "accumType",
                                      "f16",
                                      "firstOrderMomentumAccumType",
                                      "f16",
                                      NULL};
    const step_def steps[] = {
        {"base", f32, 3, 1, false, false},
        {"bf16.bf16", half, 3, 1, false, false},
        {"accumulation 8", half, 8, 1, false, false},
        {"iterations 4", half, 8, 4, false, false},
        {"8-bit I/O", half, 8, 4, true, false},
        {"async loader", half, 8, 4, true, true},
        {"(16.16 instead of bf16.bf16)", f16, 3, 1, false, false},
    };
    enum { N_STEPS = sizeof steps / sizeof steps[0] };
    tg_dataset *ds;
    if (tg_dataset_synthetic(DATASET, 3, 32, 32, 10, 1, &ds) != TG_OK)
        return 1;
    step_result r[N_STEPS] = {0};
    for (int round = 0; round < rounds; round++)
        for (int i = 0; i < N_STEPS; i++) {
            step_result x;
            if (measure(&steps[i], ds, samples, &x) != TG_OK) {
                fprintf(stderr, "bench_journey: step '%s': %s\n", steps[i].name,
                        tg_error_message());
                tg_dataset_destroy(ds);
                return 1;
            }
            if (x.samples_per_s > r[i].samples_per_s)
                r[i] = x;
        }
    fprintf(stderr,
            "ResNet-18 (ImageNet stem) on 3x32x32, split at layer3.0, 2 cpu devices x 1 thread, "
            "micro-batch %d, %lld samples timed per step, best of %d rounds\n\n",
            BATCH, (long long)samples, rounds);
    fprintf(stderr, "%-16s %10s %7s %12s %12s %7s %14s %7s %9s\n", "step", "samples/s", "x base",
            "device 0", "device 1", "x base", "stream B/smpl", "x base", "host wait");
    for (int i = 0; i < N_STEPS; i++) {
        double mem = (double)(r[i].device_bytes[0] + r[i].device_bytes[1]);
        double mem0 = (double)(r[0].device_bytes[0] + r[0].device_bytes[1]);
        fprintf(stderr, "%-16s %10.0f %6.2fx %8.1f MiB %8.1f MiB %6.2fx %14.0f %6.2fx %8.1f%%\n",
                steps[i].name, r[i].samples_per_s, r[i].samples_per_s / r[0].samples_per_s,
                (double)r[i].device_bytes[0] / 1048576.0, (double)r[i].device_bytes[1] / 1048576.0,
                mem / mem0, r[i].stream_bytes_per_sample,
                r[i].stream_bytes_per_sample / r[0].stream_bytes_per_sample,
                100.0 * r[i].wait_share);
    }
    printf(
        "{\"bench\":\"journey\",\"model\":\"resnet18\",\"input\":\"3x32x32\",\"stem\":\"imagenet\","
        "\"devices\":2,\"micro_batch\":%d,\"samples_timed\":%lld,\"rounds\":%d,\"steps\":[",
        BATCH, (long long)samples, rounds);
    for (int i = 0; i < N_STEPS; i++)
        printf(
            "%s{\"step\":\"%s\",\"samples_per_s\":%.1f,\"speedup\":%.3f,\"device_bytes\":[%zu,%zu],"
            "\"stream_bytes_per_sample\":%.1f,\"stream_ratio\":%.3f,\"host_wait_share\":%.4f}",
            i ? "," : "", steps[i].name, r[i].samples_per_s,
            r[i].samples_per_s / r[0].samples_per_s, r[i].device_bytes[0], r[i].device_bytes[1],
            r[i].stream_bytes_per_sample,
            r[i].stream_bytes_per_sample / r[0].stream_bytes_per_sample, r[i].wait_share);
    printf("]}\n");
    tg_dataset_destroy(ds);
    return 0;
}
