/* bench/bench_infer_weights.c - what the inference planner saves: the
 * convolutions' weights kept in oneDNN's layout (backend/cpu/weight_cache.h),
 * reordered once per host write instead of at every run, and the batch norm
 * and ReLU after a convolution computed by it (compile/fuse.c).
 *
 * ResNet-50 (ImageNet stem, 1000 classes) at 3x224x224, inference, batch 1
 * and 32, precision 32.32 and bf16.bf16 (bf16 programs fuse nothing yet):
 * samples per second planned, with the weights kept alone, and plain
 * (tg_process_set_keep_weights, tg_process_set_fuse_inference),
 * alternating, TG_BENCH_REPS times each (default 3). One JSON line per case
 * with the ranges per second of wall time and of CPU time, the ratios of
 * the medians, the CPU model, the ISA and the load average (the machine is
 * shared: say "under load").
 *
 * Environment: TG_BENCH_REPS, TG_BENCH_THREADS (default 1),
 * TG_BENCH_ONLY=1|32 (one batch size), TG_BENCH_NO_BF16=1.
 */
#include "bench_util.h"
#include "core/isa.h"
#include "core/process.h"
#include "tilegraph/models.h"
#include "tilegraph/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPS 16

static const char *usage =
    "usage: bench_infer_weights\n"
    "ResNet-50 3x224x224 inference, batch 1 and 32, f32 and bf16: samples/s planned\n"
    "(batch norm and ReLU fused, weights kept), weights kept alone, and plain,\n"
    "alternating. Environment: TG_BENCH_REPS (3), TG_BENCH_THREADS (1),\n"
    "TG_BENCH_ONLY=1|32, TG_BENCH_NO_BF16=1.\n";

static void die(const char *what)
{
    fprintf(stderr, "bench_infer_weights: %s: %s\n", what, tg_error_message());
    exit(1);
}

/* Samples per second of wall time and of the process's CPU time (at one
 * thread the work itself, far less disturbed by a busy machine) over `runs`
 * timed runs after 2 untimed ones (the first fills the cache when the
 * weights are kept). */
static bench_rate rate(int batch, int threads, const char *precision, int keep, int fuse, int runs)
{
    tg_process_set_keep_weights(keep);
    tg_process_set_fuse_inference(fuse);
    const tg_model_spec *m = tg_model_find("resnet50");
    tg_model_input in = tg_model_default_input(m);
    in.height = in.width = 224;
    in.stem = TG_STEM_IMAGENET;
    in.classes = 1000;
    tg_model_graph mg;
    if (!m || tg_model_graph_create_ex(m, batch, NULL, &in, &mg) != TG_OK)
        die("resnet50");
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", threads);
    tg_options_set(o, "precision", precision);
    tg_session *s = NULL;
    if (tg_session_create(mg.graph, o, &s) != TG_OK)
        die("session");
    size_t n = (size_t)batch * 3 * 224 * 224;
    float *img = malloc(n * sizeof(float));
    uint32_t r = 12345;
    for (size_t i = 0; img && i < n; i++) {
        r = r * 1664525u + 1013904223u;
        img[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
    }
    double t0 = 0, c0 = 0;
    for (int k = 0; img && k < runs + 2; k++) {
        if (k == 2)
            t0 = bench_now(), c0 = bench_cpu_seconds();
        tg_session_write(s, mg.images, img, n * sizeof(float));
        if (tg_session_run(s) != TG_OK)
            die("run");
    }
    bench_rate v = {(double)runs * batch / (bench_now() - t0),
                    (double)runs * batch / (bench_cpu_seconds() - c0)};
    free(img);
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    tg_options_destroy(o);
    tg_process_set_keep_weights(1);
    tg_process_set_fuse_inference(1);
    return v;
}

static void cpu_model(char *out, size_t cap)
{
    snprintf(out, cap, "?");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            char *v = strchr(line, ':');
            if (v) {
                snprintf(out, cap, "%s", v + 2);
                out[strcspn(out, "\n")] = '\0';
            }
            break;
        }
    if (f)
        fclose(f);
}

/* The three plans, alternated: everything the inference planner does
 * (batch norm and ReLU fused into the convolutions, weights kept), the
 * weights kept alone, and neither (the weights reordered at every run, the
 * batch norms and ReLUs steps of their own). */
static const char *modes[] = {"planned", "kept_only", "plain"};

static void run_case(int batch, int threads, const char *precision, int reps)
{
    double wall[3][MAX_REPS], cpu[3][MAX_REPS];
    int runs = batch == 1 ? 20 : 3;
    for (int k = 0; k < reps; k++)
        for (int m = 0; m < 3; m++) {
            bench_rate v = rate(batch, threads, precision, m < 2, m == 0, runs);
            wall[m][k] = v.wall, cpu[m][k] = v.cpu;
        }
    char model[128], isa[128];
    cpu_model(model, sizeof model);
    tg_isa_describe(isa, sizeof isa);
    printf("{\"bench\":\"infer_weights\",\"model\":\"resnet50\",\"input\":\"3x224x224\","
           "\"batch\":%d,\"threads\":%d,\"precision\":\"%s\",\"reps\":%d,\"runs\":%d",
           batch, threads, precision, reps, runs);
    double med_wall[3], med_cpu[3];
    for (int m = 0; m < 3; m++) {
        char key[64];
        printf(",");
        snprintf(key, sizeof key, "%s_samples_per_s", modes[m]);
        bench_print_range(key, wall[m], reps);
        printf(",");
        snprintf(key, sizeof key, "%s_samples_per_cpu_s", modes[m]);
        bench_print_range(key, cpu[m], reps);
        med_wall[m] = bench_median(wall[m], reps), med_cpu[m] = bench_median(cpu[m], reps);
    }
    printf(",\"planned_over_plain\":%.3f,\"cpu_planned_over_plain\":%.3f,"
           "\"cpu_kept_over_plain\":%.3f,\"cpu\":\"%s\",\"isa\":\"%s\",\"load_average\":%.2f}\n",
           med_wall[0] / med_wall[2], med_cpu[0] / med_cpu[2], med_cpu[1] / med_cpu[2], model, isa,
           bench_load_average());
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int u = bench_usage(argc, argv, 0, usage);
    if (u >= 0)
        return u;
    bench_passive_omp(argv);
    int reps = bench_env_int("TG_BENCH_REPS", 3, 1, MAX_REPS);
    int threads = bench_env_int("TG_BENCH_THREADS", 1, 1, 64);
    int only = bench_env_int("TG_BENCH_ONLY", 0, 0, 1024);
    int no_bf16 = bench_env_int("TG_BENCH_NO_BF16", 0, 0, 1);
    const int batches[] = {1, 32};
    const char *precisions[] = {"32.32", "bf16.bf16"};
    for (int b = 0; b < 2; b++)
        for (int q = 0; q < 2 - no_bf16; q++)
            if (!only || only == batches[b])
                run_case(batches[b], threads, precisions[q], reps);
    return 0;
}
