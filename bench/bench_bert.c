/* bench/bench_bert.c - a BERT-base-shaped encoder's training step against
 * PyTorch, measured in the same run (issue item 2, "transformer ops at
 * speed").
 *
 * The model is bench/torch_bert.py's, built here with the graph API: hidden
 * 768, 12 heads of 64, sequence 128, batch 8, intermediate 3072, exact GELU,
 * LayerNorm (eps 1e-12), dropout 0.1, attention with an additive mask
 * ([B, 1, 1, S]: 0 for tokens, -10000 for the padded last eighth), a
 * token-classification head (16 classes) and cross-entropy over every token,
 * AdamW (lr 1e-4, weight decay 0.01). The input is the embedded tokens, so
 * what is timed is the encoder. A train step is forward, backward and the
 * optimizer. Layers default to 2 (BERT-base has 12; every layer is the same
 * work, so the ratio does not depend on the count but the run time does):
 * TG_BENCH_LAYERS sets it.
 *
 * tilegraph and PyTorch alternate, TG_BENCH_REPS times each; each line gives
 * both ranges and the ratio of the medians, at 1 and at 2 threads, per
 * second of wall time and per second of the process's CPU time (see
 * `rate`). A last line compares tilegraph's bf16.bf16 with 32.32 at 1
 * thread (same alternation).
 *
 * Environment: TG_BENCH_REPS (default 3), TG_BENCH_STEPS (timed steps per
 * measurement, default 3), TG_BENCH_LAYERS (default 2), TG_BENCH_THREADS
 * (1 or 2 for one thread count only), TG_BENCH_NO_TORCH=1, TG_BENCH_NO_BF16=1,
 * TG_BENCH_ONLY=bf16 (the bf16 line alone), TG_BENCH_PROFILE=DIR (write
 * tilegraph's profile there, for `tilegraph analyse DIR`).
 */
#include "bench_util.h"
#include "bench_bert_model.h"
#include "tilegraph/graph.h"
#include "tilegraph/optim.h"
#include "tilegraph/options.h"
#include "tilegraph/session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TG_SOURCE_DIR
#define TG_SOURCE_DIR "."
#endif

#define MAX_REPS 16

typedef struct bench_config {
    int reps, steps, threads;
    int no_torch, no_bf16, bf16_only;
} bench_config;

static void die(const char *what)
{
    fprintf(stderr, "bench_bert: %s: %s\n", what, tg_error_message());
    exit(1);
}

/* The process's CPU time (user + system, every thread), in seconds. */
typedef bench_rate rate;

/* Sequences per second of `steps` host steps after two untimed ones. */
static rate tilegraph_rate(const bert_shape *m, int threads, const char *precision, int steps)
{
    bert_graph b = build_bert(m);
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", threads);
    tg_options_set(o, "precision", precision);
    const char *profile = getenv("TG_BENCH_PROFILE");
    if (profile) {
        tg_options_set(o, "autoReport.all", "true");
        tg_options_set(o, "autoReport.directory", profile);
    }
    tg_session *s = NULL;
    if (tg_session_create(b.g, o, &s) != TG_OK)
        die("session");
    size_t n = (size_t)m->batch * m->seq * m->hidden, tokens = (size_t)m->batch * m->seq;
    float *x = malloc(n * sizeof(float)), *mask = malloc(tokens * sizeof(float));
    int32_t *lab = malloc(tokens * sizeof(int32_t));
    uint32_t lcg = 12345;
    for (size_t i = 0; i < n; i++) {
        lcg = lcg * 1664525u + 1013904223u;
        x[i] = (float)(lcg >> 8) / 16777216.0f * 3.4f - 1.7f; /* variance about 1 */
    }
    for (size_t i = 0; i < tokens; i++) {
        mask[i] = (int)(i % m->seq) >= m->seq - m->seq / 8 ? -10000.0f : 0.0f;
        lab[i] = (int32_t)(i * 7 % m->classes);
    }
    double t0 = 0, c0 = 0;
    for (int k = 0; k < steps + 2; k++) {
        if (k == 2) {
            t0 = bench_now();
            c0 = bench_cpu_seconds();
        }
        tg_session_write(s, b.x, x, n * sizeof(float));
        tg_session_write(s, b.mask, mask, tokens * sizeof(float));
        tg_session_write(s, b.labels, lab, tokens * sizeof(int32_t));
        if (tg_session_run(s) != TG_OK)
            die("run");
    }
    rate r = {(double)steps * m->batch / (bench_now() - t0),
              (double)steps * m->batch / (bench_cpu_seconds() - c0)};
    free(x);
    free(mask);
    free(lab);
    tg_session_destroy(s);
    tg_graph_destroy(b.g);
    tg_options_destroy(o);
    return r;
}

/* PyTorch's sequences per second (wall and CPU), -1 when it cannot run.
 * Its products are OpenBLAS's (Debian's build), whose own threads
 * torch.set_num_threads does not bound: unset, a "1-thread" PyTorch ran
 * its products on both cores of the quiet test machine (9.8 sequences/s
 * of wall time, 5.0 of CPU time; with OPENBLAS_NUM_THREADS=1, 5.8 and
 * 6.1). So the child gets OPENBLAS_NUM_THREADS = threads. */
static rate torch_rate(const bert_shape *m, int threads, int steps, char *version, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "env -u OMP_WAIT_POLICY OPENBLAS_NUM_THREADS=%d /usr/bin/python3 "
             "'%s/bench/torch_bert.py' --layers %d "
             "--hidden %d --heads %d --inter %d --seq %d --batch %d --classes %d --dropout %g "
             "--threads %d --steps %d 2>/dev/null",
             threads, TG_SOURCE_DIR, m->layers, m->hidden, m->heads, m->inter, m->seq, m->batch,
             m->classes, (double)m->dropout, threads, steps);
    return bench_reference_rates(cmd, version, cap);
}

static void print_shape(const char *bench, const bert_shape *m, int threads, int reps)
{
    printf("{\"bench\":\"%s\",\"layers\":%d,\"hidden\":%d,\"heads\":%d,\"seq\":%d,\"batch\":%d,"
           "\"intermediate\":%d,\"threads\":%d,\"reps\":%d,\"load_average\":%.2f,",
           bench, m->layers, m->hidden, m->heads, m->seq, m->batch, m->inter, threads, reps,
           bench_load_average());
}

static double ratio(double *a, double *b, int n)
{
    double ma = bench_median(a, n), mb = bench_median(b, n);
    return mb > 0 ? ma / mb : 0.0;
}

static void run_case(const bert_shape *m, int threads, const bench_config *cfg)
{
    double ours[MAX_REPS], ref[MAX_REPS], ours_cpu[MAX_REPS], ref_cpu[MAX_REPS];
    char version[64] = "none";
    for (int k = 0; k < cfg->reps; k++) {
        rate o = tilegraph_rate(m, threads, "32.32", cfg->steps);
        rate r = cfg->no_torch ? (rate){-1, -1}
                               : torch_rate(m, threads, cfg->steps, version, sizeof version);
        ours[k] = o.wall, ours_cpu[k] = o.cpu, ref[k] = r.wall, ref_cpu[k] = r.cpu;
    }
    print_shape("bert_train", m, threads, cfg->reps);
    bench_print_range("samples_per_s", ours, cfg->reps);
    printf(",\"reference\":\"%s\",", version);
    bench_print_range("reference_samples_per_s", ref, cfg->reps);
    printf(",\"ratio_of_medians\":%.3f,", ratio(ours, ref, cfg->reps));
    bench_print_range("cpu_samples_per_s", ours_cpu, cfg->reps);
    printf(",");
    bench_print_range("reference_cpu_samples_per_s", ref_cpu, cfg->reps);
    printf(",\"cpu_ratio_of_medians\":%.3f,\"target_ratio\":1.3}\n",
           ratio(ours_cpu, ref_cpu, cfg->reps));
    fflush(stdout);
}

static void run_bf16(const bert_shape *m, const bench_config *cfg)
{
    double f32[MAX_REPS], b16[MAX_REPS], f32c[MAX_REPS], b16c[MAX_REPS];
    for (int k = 0; k < cfg->reps; k++) {
        rate a = tilegraph_rate(m, 1, "32.32", cfg->steps);
        rate b = tilegraph_rate(m, 1, "bf16.bf16", cfg->steps);
        f32[k] = a.wall, f32c[k] = a.cpu, b16[k] = b.wall, b16c[k] = b.cpu;
    }
    print_shape("bert_train_bf16", m, 1, cfg->reps);
    bench_print_range("samples_per_s_32_32", f32, cfg->reps);
    printf(",");
    bench_print_range("samples_per_s_bf16_bf16", b16, cfg->reps);
    printf(",\"speedup_of_medians\":%.3f,", ratio(b16, f32, cfg->reps));
    bench_print_range("cpu_samples_per_s_32_32", f32c, cfg->reps);
    printf(",");
    bench_print_range("cpu_samples_per_s_bf16_bf16", b16c, cfg->reps);
    printf(",\"cpu_speedup_of_medians\":%.3f,\"target_speedup\":1.6}\n",
           ratio(b16c, f32c, cfg->reps));
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int usage = bench_usage(
        argc, argv, 0,
        "usage: bench_bert\nA BERT-base-shaped encoder (hidden 768, 12 heads, sequence 128, "
        "batch 8, intermediate 3072) training step with AdamW against PyTorch, 1 and 2 threads, "
        "and bf16.bf16 against 32.32, in the same run. One JSON line per case.\nenvironment: "
        "TG_BENCH_REPS (3), TG_BENCH_STEPS (3), TG_BENCH_LAYERS (2), TG_BENCH_THREADS (1 or 2), "
        "TG_BENCH_ONLY (bf16), TG_BENCH_PROFILE (dir), TG_BENCH_NO_TORCH, TG_BENCH_NO_BF16\n");
    if (usage >= 0)
        return usage;
    bench_passive_omp(argv);
    bert_shape m = {bench_env_int("TG_BENCH_LAYERS", 2, 1, 24), 768, 12, 3072, 128, 8, 16, 0.1f, 0};
    const char *only = getenv("TG_BENCH_ONLY");
    bench_config cfg = {bench_env_int("TG_BENCH_REPS", 3, 1, MAX_REPS),
                        bench_env_int("TG_BENCH_STEPS", 3, 1, 10000),
                        bench_env_int("TG_BENCH_THREADS", 0, 0, 2),
                        getenv("TG_BENCH_NO_TORCH") != NULL,
                        getenv("TG_BENCH_NO_BF16") != NULL,
                        only && strcmp(only, "bf16") == 0};
    for (int threads = 1; threads <= 2 && !cfg.bf16_only; threads++)
        if (!cfg.threads || cfg.threads == threads)
            run_case(&m, threads, &cfg);
    if (!cfg.no_bf16)
        run_bf16(&m, &cfg);
    return 0;
}
