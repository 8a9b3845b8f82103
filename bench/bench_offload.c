/* bench/bench_offload.c - what streaming memory costs a training step
 * (issue 31): a ResNet (ResNet-18 by default, TG_BENCH_MODEL=resnet50) with
 * its tensors on the device against the same model with weights and
 * optimizer state, then everything, in host streaming memory
 * (TensorLocations.<kind>.onChip = false), and everything off chip phased
 * at TG_BENCH_SPLIT (the three stage boundaries, four phases), alternated in
 * the same run, each with its copies on the device's own thread when their
 * step comes (TensorLocations.ioSchedule onDemand, the default) and on its
 * I/O thread ahead of their steps (preload, TensorLocations.preloadSteps
 * ahead: its default, 4, unless TG_BENCH_PRELOAD_STEPS). The target
 * is under 20% with prefetch.
 *
 * Environment: TG_BENCH_REPS (default 3), TG_BENCH_STEPS (timed host steps,
 * default 6), TG_BENCH_BATCH (default 16), TG_BENCH_THREADS (default 1),
 * TG_BENCH_MODEL (resnet18), TG_BENCH_SPLIT (layer2.0,layer3.0,layer4.0),
 * TG_BENCH_CASES (which of the cases below run, by index, e.g. "0,3,5,6";
 * default all; case 0, on chip, always runs: it is the reference).
 */
#include "bench_util.h"
#include "tilegraph/models.h"
#include "tilegraph/options.h"
#include "tilegraph/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPS 16

#define ALL "weight,activation,accumulator,optimizer"

static const struct {
    const char *label, *kinds, *io;
    bool phased;
} cases[] = {
    {"on chip", "", "onDemand", false},
    {"weights,optimizer", "weight,optimizer", "preload", false},
    {"weights,optimizer", "weight,optimizer", "onDemand", false},
    {"all", ALL, "preload", false},
    {"all", ALL, "onDemand", false},
    {"all, phased", ALL, "preload", true},
    {"all, phased", ALL, "onDemand", true},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

typedef struct {
    const char *model, *split;
    int batch, threads, steps, preload_steps;
} bench_setup;

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

/* Samples per second of `steps` host steps of case c after two untimed ones. */
static double rate(const bench_setup *b, int c)
{
    const tg_model_spec *m = tg_model_find(b->model);
    tg_model_input in = tg_model_default_input(m);
    tg_optimizer opt = tg_optimizer_adamw(1e-3f);
    tg_model_graph mg;
    if (!m || tg_model_graph_create_ex(m, b->batch, &opt, &in, &mg) != TG_OK)
        die(b->model);
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", b->threads);
    set_locations(o, cases[c].kinds);
    if (tg_options_set(o, "TensorLocations.ioSchedule", cases[c].io) != TG_OK)
        die(cases[c].io);
    if (b->preload_steps > 0)
        tg_options_set_int(o, "TensorLocations.preloadSteps", b->preload_steps);
    if (cases[c].phased && (tg_options_set(o, "split", b->split) != TG_OK ||
                            tg_options_set(o, "executionStrategy", "phased") != TG_OK))
        die(b->split);
    tg_session *s = NULL;
    if (tg_session_create(mg.graph, o, &s) != TG_OK)
        die("session");
    double secs = bench_timed_steps(s, mg.images, mg.labels, 10, b->steps, NULL);
    if (secs < 0)
        die("run");
    double r = (double)b->steps * b->batch / secs;
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    tg_options_destroy(o);
    return r;
}

/* The cases TG_BENCH_CASES names (all without it); case 0 always. */
static void chosen_cases(bool on[N_CASES])
{
    const char *e = getenv("TG_BENCH_CASES");
    for (int c = 0; c < N_CASES; c++)
        on[c] = !e || c == 0;
    for (const char *at = e; at && *at; at++)
        if (*at >= '0' && *at < '0' + N_CASES)
            on[*at - '0'] = true;
}

int main(int argc, char **argv)
{
    int usage = bench_usage(
        argc, argv, 0,
        "usage: bench_offload (no arguments; TG_BENCH_REPS, TG_BENCH_STEPS, TG_BENCH_BATCH, "
        "TG_BENCH_THREADS, TG_BENCH_MODEL, TG_BENCH_SPLIT, TG_BENCH_CASES, "
        "TG_BENCH_PRELOAD_STEPS)\n"
        "ResNet training with tensors on the device against the same with them in host "
        "streaming memory, and phased, alternated; one JSON line per location.\n");
    if (usage >= 0)
        return usage;
    bench_passive_omp(argv); /* as the command runs oneDNN's threads */
    bench_setup b = {.model = getenv("TG_BENCH_MODEL") ? getenv("TG_BENCH_MODEL") : "resnet18",
                     .split = getenv("TG_BENCH_SPLIT") ? getenv("TG_BENCH_SPLIT")
                                                       : "layer2.0,layer3.0,layer4.0",
                     .steps = bench_env_int("TG_BENCH_STEPS", 6, 1, 100000),
                     .batch = bench_env_int("TG_BENCH_BATCH", 16, 1, 4096),
                     .threads = bench_env_int("TG_BENCH_THREADS", 1, 1, 64),
                     .preload_steps = bench_env_int("TG_BENCH_PRELOAD_STEPS", 0, 0, 64)};
    int reps = bench_env_int("TG_BENCH_REPS", 3, 1, MAX_REPS);
    bool on_case[N_CASES];
    chosen_cases(on_case);
    double r[N_CASES][MAX_REPS];
    for (int k = 0; k < reps; k++) /* A, B, C, A, B, C, ...: the machine's drift hits all */
        for (int c = 0; c < N_CASES; c++)
            if (on_case[c])
                r[c][k] = rate(&b, c);
    /* each round's rate over the same round's on chip: the machine's drift
     * between rounds, which the ranges show, cancels (before the medians
     * sort r) */
    double paired[N_CASES][MAX_REPS];
    for (int c = 1; c < N_CASES; c++)
        for (int k = 0; on_case[c] && k < reps; k++)
            paired[c][k] = r[c][k] / r[0][k];
    double on = bench_median(r[0], reps);
    for (int c = 1; c < N_CASES; c++) {
        if (!on_case[c])
            continue;
        double med = bench_median(r[c], reps), pmed = bench_median(paired[c], reps);
        printf("{\"bench\":\"offload\",\"model\":\"%s\",\"input\":\"3x32x32\",\"batch\":%d,"
               "\"threads\":%d,\"reps\":%d,\"offload\":\"%s\",\"io_schedule\":\"%s\","
               "\"preload_steps\":%d,\"phased\":%s,",
               b.model, b.batch, b.threads, reps, cases[c].label, cases[c].io,
               b.preload_steps > 0 ? b.preload_steps : 4, cases[c].phased ? "true" : "false");
        bench_print_range("samples_per_s", r[c], reps);
        printf(",\"reference\":\"on chip\",");
        bench_print_range("reference_samples_per_s", r[0], reps);
        printf(",\"ratio_of_medians\":%.3f,\"overhead_pct\":%.1f,", on > 0 ? med / on : 0.0,
               on > 0 && med > 0 ? 100.0 * (on / med - 1.0) : 0.0);
        bench_print_range("paired_ratios", paired[c], reps);
        printf(",\"median_paired_ratio\":%.3f,\"paired_overhead_pct\":%.1f,"
               "\"target_overhead_pct\":20,\"load_average\":%.2f}\n",
               pmed, pmed > 0 ? 100.0 * (1.0 / pmed - 1.0) : 0.0, bench_load_average());
        fflush(stdout);
    }
    return 0;
}
