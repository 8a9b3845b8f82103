/* bench/bench_step_overhead.c - what a host step costs beside its work when
 * the engine keeps its device threads for the session's life (parked
 * between steps) against the former way, a thread started and joined per
 * device per step (tg_engine_set_per_step_threads), measured in the same run.
 *
 * mnist-pipeline, pipelined over its four stages' devices, deviceIterations
 * 1 and the fewest micro-batches a four-stage pipeline takes (4): one update
 * per host step, so the former way started a thread per device per update
 * (per four micro-batches). A small batch keeps the step short, so the
 * start-up shows. The two sessions run in alternating rounds (so a
 * change in the machine's load hits both), each step's wall time is kept,
 * and the medians are reported. One JSON line.
 *
 * Environment: TG_BENCH_STEPS (host steps per round, default 200),
 * TG_BENCH_ROUNDS (default 5).
 */
#include "bench_util.h"
#include "tilegraph/models.h"
#include "tilegraph/session.h"

#include "core/error.h"
#include "runtime/session_state.h"

#include <stdio.h>
#include <stdlib.h>

enum { BATCH = 8 };

typedef struct {
    tg_model_graph mg;
    tg_session *s;
    double *times; /* seconds per host step, every round */
    int n_times;
} side;

static void open_side(side *x, bool per_step, int capacity)
{
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    tg_options *o = tg_options_create();
    const char *kv[] = {"executionStrategy",
                        "pipelined",
                        "deviceIterations",
                        "1",
                        "Training.gradientAccumulation",
                        "4",
                        "threadsPerDevice",
                        "1",
                        NULL};
    for (int i = 0; kv[i]; i += 2)
        tg_options_set(o, kv[i], kv[i + 1]);
    if (tg_model_graph_create(tg_model_find("mnist-pipeline"), BATCH, &opt, &x->mg) != TG_OK ||
        tg_session_create(x->mg.graph, o, &x->s) != TG_OK) {
        fprintf(stderr, "bench_step_overhead: %s\n", tg_error_message());
        exit(1);
    }
    tg_options_destroy(o);
    tg_engine_set_per_step_threads(x->s, per_step);
    bench_write_random_batch(x->s, x->mg.images, x->mg.labels, 10);
    x->times = tg_malloc((size_t)capacity * sizeof *x->times);
    x->n_times = 0;
    if (!x->times || tg_session_run(x->s) != TG_OK) { /* warm-up */
        fprintf(stderr, "bench_step_overhead: %s\n", tg_error_message());
        exit(1);
    }
}

static void round_of(side *x, int steps)
{
    for (int k = 0; k < steps; k++) {
        double t0 = bench_now();
        if (tg_session_run(x->s) != TG_OK) {
            fprintf(stderr, "bench_step_overhead: %s\n", tg_error_message());
            exit(1);
        }
        x->times[x->n_times++] = bench_now() - t0;
    }
}

static void close_side(side *x)
{
    tg_session_destroy(x->s);
    tg_model_graph_destroy(&x->mg);
    tg_free(x->times);
}

int main(int argc, char **argv)
{
    int usage =
        bench_usage(argc, argv, 0,
                    "usage: bench_step_overhead\nHost step time with parked device threads "
                    "against a thread per device per step, alternating rounds in one run. "
                    "One JSON line.\nenvironment: TG_BENCH_STEPS (200), TG_BENCH_ROUNDS (5)\n");
    if (usage >= 0)
        return usage;
    const char *e = getenv("TG_BENCH_STEPS"), *r = getenv("TG_BENCH_ROUNDS");
    int steps = e ? atoi(e) : 200, rounds = r ? atoi(r) : 5;
    if (steps < 1 || rounds < 1) {
        fprintf(stderr, "bench_step_overhead: TG_BENCH_STEPS and TG_BENCH_ROUNDS must be >= 1\n");
        return 1;
    }
    side parked, per_step;
    open_side(&parked, false, steps * rounds);
    open_side(&per_step, true, steps * rounds);
    for (int k = 0; k < rounds; k++) {
        round_of(&per_step, steps);
        round_of(&parked, steps);
    }
    const tg_program *p = tg_session_program(parked.s);
    double before = bench_median(per_step.times, per_step.n_times);
    double after = bench_median(parked.times, parked.n_times);
    printf("{\"bench\":\"step_overhead\",\"model\":\"mnist-pipeline\",\"batch\":%d,"
           "\"devices\":%d,\"replicas\":%d,\"device_iterations\":%d,\"micro_batches\":%d,"
           "\"steps\":%d,\"per_step_threads_us\":%.1f,\"parked_threads_us\":%.1f,"
           "\"saved_us_per_step\":%.1f,\"speedup\":%.3f}\n",
           BATCH, p->n_devices, p->replicas, p->iterations, p->micro_batches, steps * rounds,
           before * 1e6, after * 1e6, (before - after) * 1e6, before / after);
    close_side(&parked);
    close_side(&per_step);
    return 0;
}
