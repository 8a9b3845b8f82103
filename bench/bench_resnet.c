/* bench/bench_resnet.c - ResNet training and inference throughput against
 * PyTorch, measured in the same run (issue 12's targets).
 *
 * Cases: torchvision's ResNet-18 on 3x32x32, batch 64, and ResNet-50 on
 * 3x64x64, batch 32, both with the ImageNet stem and 10 classes, SGD momentum
 * 0.9; training and inference; 1 and 2 threads. The PyTorch side is
 * bench/torch_resnet.py (torchvision's own models) run as a child process.
 * tilegraph and PyTorch alternate, TG_BENCH_REPS times each, and each line
 * gives both ranges and the ratio of the medians. A last line compares
 * ResNet-50 training in bf16.bf16 with 32.32 (same alternation).
 *
 * Environment: TG_BENCH_REPS (default 3), TG_BENCH_STEPS (timed steps per
 * measurement, default 8), TG_BENCH_ONLY (a case name, e.g. resnet50, or
 * bf16 for the bf16 line alone),
 * TG_BENCH_NO_TORCH=1 (skip PyTorch), TG_BENCH_NO_BF16=1.
 */
#include "bench_util.h"
#include "tilegraph/models.h"
#include "tilegraph/options.h"
#include "tilegraph/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef TG_SOURCE_DIR
#define TG_SOURCE_DIR "."
#endif

#define MAX_REPS 16

typedef struct bench_case {
    const char *model;
    int size, batch;
} bench_case;

typedef struct bench_config {
    int reps, steps;
    const char *only;
    int no_torch, no_bf16;
} bench_config;

static void die(const char *what)
{
    fprintf(stderr, "bench_resnet: %s: %s\n", what, tg_error_message());
    exit(1);
}

/* Samples per second of `steps` host steps after two untimed ones. */
static double tilegraph_rate(const bench_case *c, int threads, int train, const char *precision,
                             int steps)
{
    const tg_model_spec *m = tg_model_find(c->model);
    tg_model_input in = tg_model_default_input(m);
    in.height = in.width = c->size;
    in.stem = TG_STEM_IMAGENET;
    tg_optimizer opt = tg_optimizer_sgd(0.01f, 0.9f);
    tg_model_graph mg;
    if (!m || tg_model_graph_create_ex(m, c->batch, train ? &opt : NULL, &in, &mg) != TG_OK)
        die(c->model);
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", threads);
    tg_options_set(o, "precision", precision);
    tg_session *s = NULL;
    if (tg_session_create(mg.graph, o, &s) != TG_OK)
        die("session");
    size_t n = (size_t)c->batch * 3 * (size_t)c->size * (size_t)c->size;
    float *img = malloc(n * sizeof(float));
    int32_t *lab = malloc((size_t)c->batch * sizeof(int32_t));
    uint32_t r = 12345;
    for (size_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        img[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
    }
    for (int i = 0; i < c->batch; i++)
        lab[i] = i % 10;
    double t0 = 0;
    for (int k = 0; k < steps + 2; k++) {
        if (k == 2)
            t0 = bench_now();
        tg_session_write(s, mg.images, img, n * sizeof(float));
        if (train)
            tg_session_write(s, mg.labels, lab, (size_t)c->batch * sizeof(int32_t));
        if (tg_session_run(s) != TG_OK)
            die("run");
    }
    double rate = (double)steps * c->batch / (bench_now() - t0);
    free(img);
    free(lab);
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    tg_options_destroy(o);
    return rate;
}

/* PyTorch's samples per second, or -1 when it cannot run. */
static double torch_rate(const bench_case *c, int threads, int train, int steps, char *version,
                         size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "env -u OMP_WAIT_POLICY /usr/bin/python3 '%s/bench/torch_resnet.py' --model %s --size "
             "%d --batch %d "
             "--threads %d --mode %s --steps %d 2>/dev/null",
             TG_SOURCE_DIR, c->model, c->size, c->batch, threads, train ? "train" : "infer", steps);
    return bench_reference_rate(cmd, version, cap);
}

static void print_range(const char *key, double *v, int n)
{
    double lo = v[0], hi = v[0];
    for (int i = 1; i < n; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    printf("\"%s\":[%.1f,%.1f]", key, lo, hi);
}

static void run_case(const bench_case *c, int threads, int train, const bench_config *cfg)
{
    double ours[MAX_REPS], ref[MAX_REPS];
    char version[64] = "none";
    for (int k = 0; k < cfg->reps; k++) {
        ours[k] = tilegraph_rate(c, threads, train, "32.32", cfg->steps);
        ref[k] =
            cfg->no_torch ? -1 : torch_rate(c, threads, train, cfg->steps, version, sizeof version);
    }
    printf("{\"bench\":\"resnet_%s\",\"model\":\"%s\",\"input\":\"3x%dx%d\",\"batch\":%d,"
           "\"threads\":%d,\"reps\":%d,",
           train ? "train" : "infer", c->model, c->size, c->size, c->batch, threads, cfg->reps);
    print_range("samples_per_s", ours, cfg->reps);
    printf(",\"reference\":\"%s\",", version);
    print_range("reference_samples_per_s", ref, cfg->reps);
    double mo = bench_median(ours, cfg->reps), mr = bench_median(ref, cfg->reps);
    printf(",\"ratio_of_medians\":%.3f,\"target_ratio\":1.3}\n", mr > 0 ? mo / mr : 0.0);
    fflush(stdout);
}

static void run_bf16(const bench_case *c, const bench_config *cfg)
{
    double f32[MAX_REPS], b16[MAX_REPS];
    for (int k = 0; k < cfg->reps; k++) {
        f32[k] = tilegraph_rate(c, 1, 1, "32.32", cfg->steps);
        b16[k] = tilegraph_rate(c, 1, 1, "bf16.bf16", cfg->steps);
    }
    printf("{\"bench\":\"resnet_train_bf16\",\"model\":\"%s\",\"input\":\"3x%dx%d\",\"batch\":%d,"
           "\"threads\":1,\"reps\":%d,",
           c->model, c->size, c->size, c->batch, cfg->reps);
    print_range("samples_per_s_32_32", f32, cfg->reps);
    printf(",");
    print_range("samples_per_s_bf16_bf16", b16, cfg->reps);
    double m32 = bench_median(f32, cfg->reps), m16 = bench_median(b16, cfg->reps);
    printf(",\"speedup_of_medians\":%.3f,\"target_speedup\":1.6}\n", m32 > 0 ? m16 / m32 : 0.0);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int usage = bench_usage(
        argc, argv, 0,
        "usage: bench_resnet\nResNet-18 (32x32, batch 64) and ResNet-50 (64x64, batch 32) training "
        "and inference against PyTorch, 1 and 2 threads, fp32 and bf16, in the same run. One JSON "
        "line per case.\nenvironment: TG_BENCH_REPS (3), TG_BENCH_STEPS (8), TG_BENCH_ONLY (a case "
        "name, or bf16), TG_BENCH_NO_TORCH, TG_BENCH_NO_BF16\n");
    if (usage >= 0)
        return usage;
    /* PyTorch's child runs with its own default wait policy */
    bench_passive_omp(argv);
    static const bench_case cases[] = {{"resnet18", 32, 64}, {"resnet50", 64, 32}};
    bench_config cfg = {bench_env_int("TG_BENCH_REPS", 3, 1, MAX_REPS),
                        bench_env_int("TG_BENCH_STEPS", 8, 1, 10000), getenv("TG_BENCH_ONLY"),
                        getenv("TG_BENCH_NO_TORCH") != NULL, getenv("TG_BENCH_NO_BF16") != NULL};
    bool bf16_only = cfg.only && strcmp(cfg.only, "bf16") == 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cfg.only && !bf16_only && strcmp(cfg.only, cases[i].model) != 0)
            continue;
        for (int train = 1; train >= 0 && !bf16_only; train--)
            for (int threads = 1; threads <= 2; threads++)
                run_case(&cases[i], threads, train, &cfg);
        if (!cfg.no_bf16 && strcmp(cases[i].model, "resnet50") == 0)
            run_bf16(&cases[i], &cfg);
    }
    return 0;
}
