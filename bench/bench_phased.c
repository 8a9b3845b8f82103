/* bench/bench_phased.c - what alternating the phases over two devices
 * (phasedExecutionType ParallelIPU) buys against running them on two
 * devices in order (SingleIPU, --devices 2), docs/memory-locations.md:
 * ResNet-18 (3x32x32, AdamW) in four phases split at its layers, with
 * weights and optimizer state in streaming memory copied on each device's
 * I/O thread ahead of their steps (TensorLocations.ioSchedule preload),
 * and the same phases on one device for reference; alternated in one run
 * so the machine's drift hits every case alike. One JSON line per case:
 * the host step time's range and median over the repetitions (each
 * repetition's time is the median of its steps).
 *
 * Environment: TG_BENCH_REPS (default 3), TG_BENCH_STEPS (timed host steps,
 * default 4), TG_BENCH_BATCH (default 16), TG_BENCH_THREADS (per device,
 * default 1), TG_BENCH_OFFLOAD (1: weights and optimizer state, the
 * default; 2: everything; 0: nothing).
 */
#include "bench_util.h"
#include "tilegraph/models.h"
#include "tilegraph/options.h"
#include "tilegraph/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPS 16
#define MAX_STEPS 64

/* label, devices, phasedExecutionType */
static const char *const cases[][3] = {
    {"SingleIPU, one device", "1", "SingleIPU"},
    {"SingleIPU, two devices in order", "2", "SingleIPU"},
    {"ParallelIPU, two devices alternating", "2", "ParallelIPU"},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

static void die(const char *what)
{
    fprintf(stderr, "bench_phased: %s: %s\n", what, tg_error_message());
    exit(1);
}

static void set(tg_options *o, const char *key, const char *value)
{
    if (tg_options_set(o, key, value) != TG_OK)
        die(key);
}

static const char *offload_kinds(int offload)
{
    return offload == 2   ? "weight,activation,accumulator,optimizer"
           : offload == 1 ? "weight,optimizer"
                          : "";
}

/* The median host step time (seconds) of `steps` steps after two untimed ones. */
static double step_time(int c, int batch, int threads, int steps, int offload)
{
    const tg_model_spec *m = tg_model_find("resnet18");
    tg_model_input in = tg_model_default_input(m);
    tg_optimizer opt = tg_optimizer_adamw(1e-3f);
    tg_model_graph mg;
    if (!m || tg_model_graph_create_ex(m, batch, &opt, &in, &mg) != TG_OK)
        die("resnet18");
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", threads);
    set(o, "executionStrategy", "phased");
    set(o, "split", "layer2.0,layer3.0,layer4.0");
    set(o, "devices", cases[c][1]);
    set(o, "phasedExecutionType", cases[c][2]);
    set(o, "TensorLocations.ioSchedule", "preload");
    char buf[96], key[96];
    snprintf(buf, sizeof buf, "%s", offload_kinds(offload));
    for (char *save = NULL, *k = strtok_r(buf, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
        snprintf(key, sizeof key, "TensorLocations.%s.onChip", k);
        set(o, key, "false");
    }
    tg_session *s = NULL;
    if (tg_session_create(mg.graph, o, &s) != TG_OK)
        die("session");
    double t[MAX_STEPS];
    if (bench_timed_steps(s, mg.images, mg.labels, 10, steps, t) < 0)
        die("run");
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    tg_options_destroy(o);
    return bench_median(t, steps);
}

int main(int argc, char **argv)
{
    int usage = bench_usage(
        argc, argv, 0,
        "usage: bench_phased (no arguments; TG_BENCH_REPS, TG_BENCH_STEPS, TG_BENCH_BATCH, "
        "TG_BENCH_THREADS, TG_BENCH_OFFLOAD)\n"
        "ResNet-18 in four phases: on one device, on two in order (SingleIPU) and alternating "
        "over two (ParallelIPU), weights in streaming memory, preloaded; alternated; one JSON "
        "line per case.\n");
    if (usage >= 0)
        return usage;
    bench_passive_omp(argv); /* as the command runs oneDNN's threads */
    int reps = bench_env_int("TG_BENCH_REPS", 3, 1, MAX_REPS);
    int steps = bench_env_int("TG_BENCH_STEPS", 4, 1, MAX_STEPS);
    int batch = bench_env_int("TG_BENCH_BATCH", 16, 1, 4096);
    int threads = bench_env_int("TG_BENCH_THREADS", 1, 1, 64);
    int offload = bench_env_int("TG_BENCH_OFFLOAD", 1, 0, 2);
    double t[N_CASES][MAX_REPS];
    for (int k = 0; k < reps; k++) /* A, B, C, A, B, C, ... */
        for (int c = 0; c < N_CASES; c++)
            t[c][k] = step_time(c, batch, threads, steps, offload);
    double in_order = bench_median(t[1], reps);
    for (int c = 0; c < N_CASES; c++) {
        double med = bench_median(t[c], reps);
        printf("{\"bench\":\"phased\",\"model\":\"resnet18\",\"input\":\"3x32x32\",\"batch\":%d,"
               "\"threads\":%d,\"reps\":%d,\"steps\":%d,\"offload\":\"%s\","
               "\"io_schedule\":\"preload\",\"case\":\"%s\",",
               batch, threads, reps, steps, offload_kinds(offload), cases[c][0]);
        bench_print_range("step_s", t[c], reps);
        printf(",\"step_s_median\":%.3f,\"over_two_devices_in_order\":%.3f,"
               "\"load_average\":%.2f}\n",
               med, in_order > 0 ? med / in_order : 0.0, bench_load_average());
        fflush(stdout);
    }
    return 0;
}
