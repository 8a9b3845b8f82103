/* bench/bench_rts.c - what replicated tensor sharding of the weights costs a
 * training step (issue 31 item 2): ResNet-18 over 2 replicas with every
 * weight whole on each replica, against each replica keeping half of every
 * weight and its optimizer state (TensorLocations.weight.replicatedTensor-
 * Sharding, minElementsForReplicatedTensorSharding 0), alternated in the
 * same run. Sharded, every forward and backward pass first gathers each
 * weight whole from both replicas' shards (a copy of the weights per pass),
 * the all-reduce sums each replica's half of the gradients only, and each
 * replica updates half of every weight; the memory per replica comes from
 * the two programs' plans.
 *
 * Environment: TG_BENCH_REPS (default 3), TG_BENCH_STEPS (timed host steps,
 * default 4), TG_BENCH_BATCH (per replica, default 8), TG_BENCH_THREADS
 * (per replica, default 1), TG_BENCH_ACCUMULATION (default 2).
 */
#include "bench_util.h"
#include "compile/program.h"
#include "runtime/session_internal.h"
#include "tilegraph/models.h"
#include "tilegraph/options.h"
#include "tilegraph/session.h"

#include <stdio.h>
#include <stdlib.h>

#define MAX_REPS 16

static void die(const char *what)
{
    fprintf(stderr, "bench_rts: %s: %s\n", what, tg_error_message());
    exit(1);
}

typedef struct {
    int batch, threads, accumulation, steps;
} bench_shape;

typedef struct {
    double step_ms;
    size_t weight_bytes, state_bytes, arena_bytes; /* per replica, from the plan */
} result;

static result run(const bench_shape *b, bool shard)
{
    const tg_model_spec *m = tg_model_find("resnet18");
    tg_model_input in = tg_model_default_input(m);
    tg_optimizer opt = tg_optimizer_adamw(1e-3f);
    tg_model_graph mg;
    if (!m || tg_model_graph_create_ex(m, b->batch, &opt, &in, &mg) != TG_OK)
        die("resnet18");
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", b->threads);
    tg_options_set_int(o, "replicationFactor", 2);
    tg_options_set_int(o, "Training.gradientAccumulation", b->accumulation);
    if (shard) {
        tg_options_set(o, "TensorLocations.weight.replicatedTensorSharding", "true");
        tg_options_set(o, "TensorLocations.weight.minElementsForReplicatedTensorSharding", "0");
    }
    tg_session *s = NULL;
    if (tg_session_create(mg.graph, o, &s) != TG_OK)
        die("session");
    double secs = bench_timed_steps(s, mg.images, mg.labels, 10, b->steps, NULL);
    if (secs < 0)
        die("run");
    const tg_program *p = tg_session_program(s);
    result r = {1e3 * secs / b->steps, p->devices[0].region_bytes[TG_REGION_PARAM],
                p->devices[0].region_bytes[TG_REGION_STATE], p->arena_bytes};
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    tg_options_destroy(o);
    return r;
}

int main(int argc, char **argv)
{
    int usage = bench_usage(
        argc, argv, 0,
        "usage: bench_rts (no arguments; TG_BENCH_REPS, TG_BENCH_STEPS, TG_BENCH_BATCH, "
        "TG_BENCH_THREADS, TG_BENCH_ACCUMULATION)\n"
        "ResNet-18 training over 2 replicas with whole weights against weights sharded over the "
        "replicas (replicated tensor sharding), alternated; one JSON line.\n");
    if (usage >= 0)
        return usage;
    bench_passive_omp(argv);
    int reps = bench_env_int("TG_BENCH_REPS", 3, 1, MAX_REPS);
    bench_shape b = {bench_env_int("TG_BENCH_BATCH", 8, 1, 4096),
                     bench_env_int("TG_BENCH_THREADS", 1, 1, 64),
                     bench_env_int("TG_BENCH_ACCUMULATION", 2, 1, 1024),
                     bench_env_int("TG_BENCH_STEPS", 4, 1, 100000)};
    double ms[2][MAX_REPS];
    result last[2];
    for (int k = 0; k < reps; k++) /* A, B, A, B, ...: the machine's drift hits both */
        for (int c = 0; c < 2; c++) {
            last[c] = run(&b, c == 1);
            ms[c][k] = last[c].step_ms;
        }
    double plain = bench_median(ms[0], reps), sharded = bench_median(ms[1], reps);
    double best[2] = {ms[0][0],
                      ms[1][0]}; /* the least disturbed step of each, on a shared machine */
    for (int c = 0; c < 2; c++)
        for (int k = 1; k < reps; k++)
            best[c] = ms[c][k] < best[c] ? ms[c][k] : best[c];
    printf("{\"bench\":\"rts\",\"model\":\"resnet18\",\"input\":\"3x32x32\",\"replicas\":2,"
           "\"batch\":%d,\"accumulation\":%d,\"threads\":%d,\"reps\":%d,",
           b.batch, b.accumulation, b.threads, reps);
    bench_print_range("sharded_step_ms", ms[1], reps);
    printf(",");
    bench_print_range("unsharded_step_ms", ms[0], reps);
    printf(",\"ratio_of_medians\":%.3f,\"overhead_pct\":%.1f,\"ratio_of_minimums\":%.3f,"
           "\"weight_bytes_per_replica\":[%zu,%zu],\"optimizer_bytes_per_replica\":[%zu,%zu],"
           "\"device_bytes_per_replica\":[%zu,%zu],\"load_average\":%.2f}\n",
           plain > 0 ? sharded / plain : 0.0, plain > 0 ? 100.0 * (sharded / plain - 1.0) : 0.0,
           best[0] > 0 ? best[1] / best[0] : 0.0, last[1].weight_bytes, last[0].weight_bytes,
           last[1].state_bytes, last[0].state_bytes, last[1].arena_bytes, last[0].arena_bytes,
           bench_load_average());
    return 0;
}
