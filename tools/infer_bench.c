/* tools/infer_bench.c - `tilegraph infer` measuring throughput and latency:
 * an inference program of --batch-size samples, run --warmup host steps and
 * then --iterations timed ones on synthetic inputs (or --data's test
 * samples), with the checkpoint's weights or the model's initialisation.
 * Latency is one host step's: inputs written, run, outputs read. */
#include "infer_cmd.h"

#include "tilegraph/analyse.h"
#include "tilegraph/devices.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_DEFAULT_ITERATIONS 20
#define BENCH_DEFAULT_WARMUP 2

/* What a measurement holds (bench_close frees it). */
typedef struct bench_run {
    train_context ctx; /* with --data: the model and its test split */
    const tg_model_spec *model;
    tg_model_input in;
    bool have_data;
    tg_model_graph mg;
    tg_options *o;
    tg_session *s;
    tg_loader *loader;
    step_buffers b;
    int64_t epoch;
    double compile_s;
} bench_run;

/* The data flags that describe images read from --data, refused without it. */
static const char *data_only_flag(const infer_args *a)
{
    const data_args *d = &a->data;
    return d->resize         ? "--resize"
           : d->normalize    ? "--normalize"
           : d->stem         ? "--stem"
           : d->tokens       ? "--tokens"
           : d->eight_bit    ? "--eight-bit-io"
           : a->loader_given ? "--loader"
                             : NULL;
}

/* The model and its input: --data's (as training builds it) or the model's own. */
static int bench_open_model(const infer_args *a, bench_run *r)
{
    r->have_data = a->data_given;
    if (r->have_data) {
        if (train_context_open(&r->ctx, a->model, &a->data, -1, 0) != 0)
            return -1;
        r->model = r->ctx.model, r->in = r->ctx.input;
        return 0;
    }
    const char *bad = data_only_flag(a);
    if (bad) {
        fprintf(stderr,
                "tilegraph infer: %s applies to --data's samples; synthetic inputs are made at the "
                "model's own input: give --data, or drop %s\n",
                bad, bad);
        return -1;
    }
    if (tg_model_open(a->model, TG_LOSS_CROSS_ENTROPY, &r->model) != TG_OK) {
        fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
        return -1;
    }
    if (a->data.freeze && tg_model_set_freeze(r->model, a->data.freeze) != TG_OK) {
        fprintf(stderr, "tilegraph infer: --freeze: %s\n", tg_error_message());
        return -1;
    }
    r->in = tg_model_default_input(r->model);
    if (a->data.seq_len > 0) {
        if (!tg_model_task_tokens(r->model->task)) {
            fprintf(stderr,
                    "tilegraph infer: --seq-len applies to language models; %s takes "
                    "images\n",
                    r->model->name);
            return -1;
        }
        r->in.seq_len = r->in.width = (int)a->data.seq_len;
    }
    return 0;
}

/* xorshift64*: the synthetic inputs, the same for the same --seed. */
static uint64_t next_random(uint64_t *x)
{
    *x ^= *x >> 12, *x ^= *x << 25, *x ^= *x >> 27;
    return *x * 0x2545F4914F6CDD1Dull;
}

/* Synthetic inputs, made once: images uniform in [-1, 1] (about a
 * normalised image's range), token ids uniform over the vocabulary. */
static void fill_synthetic(bench_run *r, uint64_t seed)
{
    step_buffers *b = &r->b;
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    int64_t n = b->samples * (tg_shape_numel(tg_tensor_shape(r->mg.images)) / b->batch);
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = next_random(&x);
        if (b->tokens)
            b->tokens[i] = (int32_t)(v % (uint64_t)r->in.classes);
        else if (b->images_u8)
            b->images_u8[i] = (uint8_t)(v >> 56);
        else
            b->images[i] = (float)((double)(v >> 11) / 9007199254740992.0 * 2 - 1);
    }
}

/* The next host step's samples from --data, from the start again at the end. */
static tg_status next_data(bench_run *r)
{
    int64_t count = 0;
    CLI_TRY(load_step(r->loader, &r->b, &count));
    if (count > 0)
        return TG_OK;
    tg_loader_start_epoch(r->loader, ++r->epoch);
    return load_step(r->loader, &r->b, &count);
}

/* One host step: inputs written, run, every returned output read. */
static tg_status bench_step(bench_run *r)
{
    step_buffers *b = &r->b;
    size_t per = (size_t)(tg_shape_numel(tg_tensor_shape(r->mg.images)) / b->batch * b->samples);
    const void *in = b->tokens      ? (const void *)b->tokens
                     : b->images_u8 ? (const void *)b->images_u8
                                    : (const void *)b->images;
    size_t bytes = per * (b->tokens ? sizeof(int32_t) : b->images_u8 ? 1 : sizeof(float));
    CLI_TRY(tg_session_write(r->s, r->mg.images, in, bytes));
    CLI_TRY(tg_session_run(r->s));
    return tg_session_read(r->s, r->mg.output, b->scores,
                           (size_t)(b->n_scores * b->batch * b->rows * b->classes) * sizeof(float));
}

/* The graph at --batch-size, the session (its compile timed), the weights, the inputs. */
static int bench_prepare(const infer_args *a, bench_run *r)
{
    int64_t batch = a->batch > 0 ? a->batch : 1;
    if (tg_model_graph_create_ex(r->model, (int)batch, NULL, &r->in, &r->mg) != TG_OK) {
        fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
        return -1;
    }
    if (!(r->o = infer_options(a)))
        return -1;
    double t0 = cli_now();
    if (tg_session_create(r->mg.graph, r->o, &r->s) != TG_OK) {
        fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
        return -1;
    }
    r->compile_s = cli_now() - t0;
    if (infer_load(a, r->s, r->model) != 0)
        return -1;
    if (step_buffers_init(&r->b, r->s, &r->mg) != TG_OK) {
        fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
        return -1;
    }
    if (!r->have_data) {
        fill_synthetic(r, infer_seed(a));
        return 0;
    }
    tg_loader_config lc;
    if (loader_config(&r->ctx, r->ctx.test, r->b.samples, false, &lc) != TG_OK ||
        tg_loader_create(r->ctx.test, &lc, &r->loader) != TG_OK) {
        fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
        return -1;
    }
    return 0;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The p-th percentile of n sorted values, by nearest rank (p99 of 20 is the largest). */
static double percentile(const double *sorted, int64_t n, double p)
{
    int64_t rank = (int64_t)ceil(p / 100.0 * (double)n);
    return sorted[rank < 1 ? 0 : rank > n ? n - 1 : rank - 1];
}

typedef struct bench_stats {
    double seconds, per_s, p50, p90, p99, mean, min, max; /* latencies in ms */
} bench_stats;

/* Warm-up, then the timed host steps with a progress bar; 0 or -1 (printed). */
static int bench_measure(const infer_args *a, bench_run *r, double *ms, bench_stats *st)
{
    int64_t iters = a->iterations > 0 ? a->iterations : BENCH_DEFAULT_ITERATIONS;
    int64_t warm = a->warmup >= 0 ? a->warmup : BENCH_DEFAULT_WARMUP;
    cli_progress bar;
    cli_progress_start(&bar, "infer", warm + iters, !a->json && isatty(STDERR_FILENO));
    double busy = 0, start = 0;
    for (int64_t k = 0; k < warm + iters; k++) {
        if (k == warm)
            start = cli_now();
        if ((r->have_data && next_data(r) != TG_OK)) {
            fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
            return -1;
        }
        double t0 = cli_now();
        if (bench_step(r) != TG_OK) {
            fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
            return -1;
        }
        double t = cli_now() - t0;
        if (k >= warm)
            ms[k - warm] = t * 1e3, busy += t;
        char status[64];
        snprintf(status, sizeof status, "%s %.2f ms", k < warm ? "warm-up" : "host step", t * 1e3);
        cli_progress_update(&bar, k + 1, status);
    }
    /* wall time: with --data, loading the next samples is part of serving them */
    st->seconds = cli_now() - start;
    if (bar.enabled && bar.tty)
        fprintf(stderr, "\r\033[K");
    st->per_s = (double)(r->b.samples * iters) / st->seconds;
    st->mean = busy * 1e3 / (double)iters;
    qsort(ms, (size_t)iters, sizeof *ms, cmp_double);
    st->min = ms[0], st->max = ms[iters - 1];
    st->p50 = percentile(ms, iters, 50);
    st->p90 = percentile(ms, iters, 90);
    st->p99 = percentile(ms, iters, 99);
    return 0;
}

/* What one host step is: "8 images (batch 8 x 1 replica x 1 device iteration)". */
static void print_bench(const infer_args *a, const bench_run *r, const bench_stats *st)
{
    bool lm = tg_model_task_tokens(r->model->task);
    const char *unit = lm ? "sequences" : "images", *units = unit;
    int64_t iters = a->iterations > 0 ? a->iterations : BENCH_DEFAULT_ITERATIONS;
    int64_t warm = a->warmup >= 0 ? a->warmup : BENCH_DEFAULT_WARMUP;
    int replicas = tg_session_replicas(r->s), threads = tg_session_threads(r->s);
    int64_t per_replica = r->b.samples / (replicas > 0 ? replicas : 1) / r->b.batch;
    tg_host_info host;
    tg_host_query(&host);
    char weights[600];
    infer_weights(a, r->model, weights, sizeof weights);
    const char *cache = tg_session_cache(r->s); /* hit or miss, with --executable(-cache) */
    const char *inputs = r->have_data ? tg_dataset_describe(r->ctx.test).name : "synthetic";
    if (a->json) {
        tg_record_field f[] = {
            {"model", TG_RECORD_STRING, r->model->name, 0, 0},
            {"batch_size", TG_RECORD_INT, NULL, r->b.batch, 0},
            {"replicas", TG_RECORD_INT, NULL, replicas, 0},
            {"device_iterations", TG_RECORD_INT, NULL, per_replica, 0},
            {"samples_per_step", TG_RECORD_INT, NULL, r->b.samples, 0},
            {"threads_per_device", TG_RECORD_INT, NULL, threads, 0},
            {"seq_len", TG_RECORD_INT, NULL, lm ? r->in.seq_len : 0, 0},
            {"weights", TG_RECORD_STRING, infer_weights_kind(a, r->model), 0, 0},
            {"inputs", TG_RECORD_STRING, inputs, 0, 0},
            {"warmup", TG_RECORD_INT, NULL, warm, 0},
            {"iterations", TG_RECORD_INT, NULL, iters, 0},
            {"compile_s", TG_RECORD_NUMBER, NULL, 0, r->compile_s},
            {"executable_cache", TG_RECORD_STRING, cache, 0, 0},
            {"seconds", TG_RECORD_NUMBER, NULL, 0, st->seconds},
            {lm ? "sequences_per_s" : "images_per_s", TG_RECORD_NUMBER, NULL, 0, st->per_s},
            {"tokens_per_s", TG_RECORD_NUMBER, NULL, 0, lm ? st->per_s * r->in.seq_len : NAN},
            {"latency_ms_p50", TG_RECORD_NUMBER, NULL, 0, st->p50},
            {"latency_ms_p90", TG_RECORD_NUMBER, NULL, 0, st->p90},
            {"latency_ms_p99", TG_RECORD_NUMBER, NULL, 0, st->p99},
            {"latency_ms_mean", TG_RECORD_NUMBER, NULL, 0, st->mean},
            {"latency_ms_min", TG_RECORD_NUMBER, NULL, 0, st->min},
            {"latency_ms_max", TG_RECORD_NUMBER, NULL, 0, st->max},
            {"cpu", TG_RECORD_STRING, host.cpu_model, 0, 0},
            {"isa", TG_RECORD_STRING, host.kernel_level, 0, 0},
        };
        tg_print_record(stdout, f, (int)(sizeof f / sizeof f[0]));
        return;
    }
    printf("model %s: %s\n", r->model->name, r->model->description);
    if (r->b.samples == 1)
        unit = lm ? "sequence" : "image";
    printf("host step: %lld %s (batch %lld x %d replica%s x %lld device iteration%s), %d "
           "thread%s per device; session made in %.2f s%s%s\n",
           (long long)r->b.samples, unit, (long long)r->b.batch, replicas, replicas == 1 ? "" : "s",
           (long long)per_replica, per_replica == 1 ? "" : "s", threads, threads == 1 ? "" : "s",
           r->compile_s, cache ? ", executable cache: " : "", cache ? cache : "");
    printf("weights: %s; inputs: %s\n", weights, inputs);
    printf("cpu: %s (kernels %s)\n", host.cpu_model, host.kernel_level);
    printf("%lld host steps after %lld warm-up: %.1f %s/s", (long long)iters, (long long)warm,
           st->per_s, units);
    if (lm)
        printf(" (%.0f tokens/s)", st->per_s * r->in.seq_len);
    printf(", latency p50 %.3f ms, p99 %.3f ms (min %.3f, mean %.3f, max %.3f)\n", st->p50, st->p99,
           st->min, st->mean, st->max);
}

static void bench_close(bench_run *r)
{
    step_buffers_free(&r->b);
    tg_loader_destroy(r->loader);
    tg_session_destroy(r->s);
    tg_options_destroy(r->o);
    tg_model_graph_destroy(&r->mg);
    if (r->have_data)
        train_context_close(&r->ctx);
    else
        tg_model_close(r->model);
}

int infer_bench(const infer_args *a)
{
    bench_run r = {0};
    int64_t iters = a->iterations > 0 ? a->iterations : BENCH_DEFAULT_ITERATIONS;
    double *ms = malloc((size_t)iters * sizeof *ms);
    int status = 1;
    bench_stats st;
    if (!ms)
        fprintf(stderr, "tilegraph infer: out of memory for %lld latencies\n", (long long)iters);
    else if (bench_open_model(a, &r) == 0 && bench_prepare(a, &r) == 0 &&
             bench_measure(a, &r, ms, &st) == 0) {
        print_bench(a, &r, &st);
        status = 0;
    }
    free(ms);
    bench_close(&r);
    return status;
}
