/* bench/bench_offload.c - what streaming memory costs a training step
 * (issue 31): ResNet-18 with its tensors on the device against the same
 * model with weights and optimizer state, then everything, in host
 * streaming memory (TensorLocations.<kind>.onChip = false), alternated in
 * the same run, each with its copies on the device's own thread when their
 * step comes (TensorLocations.ioSchedule onDemand, the default) and on its
 * I/O thread ahead of their steps (preload, TensorLocations.preloadSteps
 * 4). The target is under 20% with prefetch.
 *
 * Environment: TG_BENCH_REPS (default 3), TG_BENCH_STEPS (timed host steps,
 * default 6), TG_BENCH_BATCH (default 16), TG_BENCH_THREADS (default 1).
 */
#include "bench_util.h"
#include "tilegraph/models.h"
#include "tilegraph/options.h"
#include "tilegraph/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPS 16

/* label, kinds off chip, TensorLocations.ioSchedule */
static const char *const kinds[][3] = {
    {"on chip", "", "preload"},
    {"weights,optimizer", "weight,optimizer", "preload"},
    {"weights,optimizer", "weight,optimizer", "onDemand"},
    {"all", "weight,activation,accumulator,optimizer", "preload"},
    {"all", "weight,activation,accumulator,optimizer", "onDemand"},
};
enum { N_CASES = sizeof kinds / sizeof kinds[0] };

static void die(const char *what)
{
    fprintf(stderr, "bench_offload: %s: %s\n", what, tg_error_message());
    exit(1);
}

/* Each kind in the comma-separated list off chip. */
static void set_locations(tg_options *o, const char *list)
{
    char buf[128], key[96];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *k = strtok_r(buf, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
        snprintf(key, sizeof key, "TensorLocations.%s.onChip", k);
        if (tg_options_set(o, key, "false") != TG_OK)
            die(key);
    }
}

/* Samples per second of `steps` host steps after two untimed ones. */
static double rate(const char *locations, const char *io, int batch, int threads, int steps)
{
    const tg_model_spec *m = tg_model_find("resnet18");
    tg_model_input in = tg_model_default_input(m);
    tg_optimizer opt = tg_optimizer_adamw(1e-3f);
    tg_model_graph mg;
    if (!m || tg_model_graph_create_ex(m, batch, &opt, &in, &mg) != TG_OK)
        die("resnet18");
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", threads);
    set_locations(o, locations);
    if (tg_options_set(o, "TensorLocations.ioSchedule", io) != TG_OK)
        die(io);
    tg_session *s = NULL;
    if (tg_session_create(mg.graph, o, &s) != TG_OK)
        die("session");
    double t0 = 0;
    for (int k = 0; k < steps + 2; k++) {
        if (k == 2)
            t0 = bench_now();
        bench_write_random_batch(s, mg.images, mg.labels, 10);
        if (tg_session_run(s) != TG_OK)
            die("run");
    }
    double r = (double)steps * batch / (bench_now() - t0);
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    tg_options_destroy(o);
    return r;
}

int main(int argc, char **argv)
{
    int usage = bench_usage(
        argc, argv, 0,
        "usage: bench_offload (no arguments; TG_BENCH_REPS, TG_BENCH_STEPS, TG_BENCH_BATCH, "
        "TG_BENCH_THREADS)\n"
        "ResNet-18 training with tensors on the device against the same with them in host "
        "streaming memory, alternated; one JSON line per location.\n");
    if (usage >= 0)
        return usage;
    bench_passive_omp(argv); /* as the command runs oneDNN's threads */
    int reps = bench_env_int("TG_BENCH_REPS", 3, 1, MAX_REPS);
    int steps = bench_env_int("TG_BENCH_STEPS", 6, 1, 100000);
    int batch = bench_env_int("TG_BENCH_BATCH", 16, 1, 4096);
    int threads = bench_env_int("TG_BENCH_THREADS", 1, 1, 64);
    double r[N_CASES][MAX_REPS];
    for (int k = 0; k < reps; k++) /* A, B, C, A, B, C, ...: the machine's drift hits all */
        for (int c = 0; c < N_CASES; c++)
            r[c][k] = rate(kinds[c][1], kinds[c][2], batch, threads, steps);
    double on = 0;
    for (int c = 0; c < N_CASES; c++) {
        double med = bench_median(r[c], reps);
        if (c == 0) {
            on = med;
            continue;
        }
        printf("{\"bench\":\"offload\",\"model\":\"resnet18\",\"input\":\"3x32x32\",\"batch\":%d,"
               "\"threads\":%d,\"reps\":%d,\"offload\":\"%s\",\"io_schedule\":\"%s\",",
               batch, threads, reps, kinds[c][0], kinds[c][2]);
        bench_print_range("samples_per_s", r[c], reps);
        printf(",\"reference\":\"on chip\",");
        bench_print_range("reference_samples_per_s", r[0], reps);
        printf(",\"ratio_of_medians\":%.3f,\"overhead_pct\":%.1f,\"target_overhead_pct\":20,"
               "\"load_average\":%.2f}\n",
               on > 0 ? med / on : 0.0, on > 0 && med > 0 ? 100.0 * (on / med - 1.0) : 0.0,
               bench_load_average());
        fflush(stdout);
    }
    return 0;
}
