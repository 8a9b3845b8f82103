/* bench/bench_pipeline.c - multi-device execution on this machine.
 *
 * 1. Per pipeline schedule, for mnist-pipeline (its stages are unequal: the
 *    convolutions dominate) and for a balanced 4-block MLP, in 2 stages
 *    (B1,B2|B3,B4) on 2 devices of one thread each, gradient accumulation
 *    m = 16: each device's
 *    measured busy fraction (seconds computing / wall seconds) beside the
 *    fill-drain theory m / (m + N - 1) and the schedule's own unit-time
 *    simulation, and samples/s.
 * 2. Zero bubble: the balanced MLP on 2 devices (B1,B2|B3,B4) with m = 2,
 *    4 and 16 (few micro-batches are where the bubble is real) and on 4
 *    (B1|B2|B3|B4), m = 16: 1f1b, zb-h1 and zb-h2 measured in turn three
 *    times (so a slower or faster patch of the machine falls on all of
 *    them), samples/s ranges and means, each schedule's unit-clock step
 *    and its bubble fraction as the cost model's simulator predicts it
 *    (tilegraph/predict.h), and the load average before and after.
 * 3. Data parallelism: samples/s of 2 replicas against 1 replica (one
 *    device, one thread each; 10 device iterations per host step),
 *    measured in the same run.
 * 4. Host streams filled ahead: the tutorial pipeline (`make demo`'s
 *    pipelined run: mnist-pipeline on 4 devices, batch 40, accumulation 10,
 *    10 device iterations) with defaultPrefetchBufferingDepth 1 and 3 in
 *    turn, three rounds: the host-stream waits of the device that waits
 *    longest as a share of the host step (ranges), and samples/s.
 * One JSON line per case. TG_BENCH_STEPS sets host steps per measurement;
 * TG_BENCH_ONLY=zero_bubble runs part 2 alone, TG_BENCH_ONLY=prefetch case 4.
 */
#include "bench_util.h"
#include "tilegraph/models.h"
#include "tilegraph/nn.h"
#include "tilegraph/predict.h"
#include "tilegraph/session.h"

#include "compile/pipeline.h"
#include "compile/simulate.h"
#include "core/alloc.h"
#include "core/error.h"
#include "core/rng.h"
#include "runtime/session_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Four equal blocks (Linear 512->512, ReLU), so stages are balanced and the
 * busy fractions show the schedule itself. */
static tg_status balanced_mlp(int batch, const tg_optimizer *opt, tg_model_graph *mg)
{
    tg_graph *g = tg_graph_create();
    mg->graph = g;
    mg->images = tg_input(g, "x", TG_F32, tg_shape2(batch, 512));
    mg->labels = tg_input(g, "labels", TG_I32, tg_shape1(batch));
    tg_tensor *h = mg->images;
    for (int b = 0; b < 4; b++) {
        char name[8];
        snprintf(name, sizeof name, "B%d", b + 1);
        tg_block_begin(g, name);
        h = tg_relu(g, tg_nn_linear(g, h, name, 512, 512, true));
    }
    mg->output = tg_nn_linear(g, h, "head", 512, 10, true);
    mg->loss = tg_cross_entropy(g, mg->output, mg->labels);
    tg_block_end(g);
    tg_tensor_mark_output(mg->output);
    tg_tensor_mark_output(mg->loss);
    TG_TRY(tg_graph_backward(g, mg->loss));
    return tg_graph_add_optimizer(g, opt);
}

typedef struct {
    double samples_per_s;
    double busy[8];
    int devices;
    double stream_share; /* the longest host-stream wait of each step over its wall time */
} result;

static tg_options *bench_options(const char *const *kv)
{
    tg_options *o = tg_options_create();
    tg_options_set(o, "threadsPerDevice", "1");
    for (int i = 0; kv[i]; i += 2)
        if (tg_options_set(o, kv[i], kv[i + 1]) != TG_OK) {
            fprintf(stderr, "bench_pipeline: %s\n", tg_error_message());
            exit(1);
        }
    return o;
}

static result measure(bool mlp, const char *const *kv, int steps)
{
    result res = {0};
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    tg_model_graph mg;
    tg_options *o = bench_options(kv);
    tg_session *s = NULL;
    tg_status st = mlp ? balanced_mlp(64, &opt, &mg)
                       : tg_model_graph_create(tg_model_find("mnist-pipeline"), 40, &opt, &mg);
    if (st != TG_OK || tg_session_create(mg.graph, o, &s) != TG_OK) {
        fprintf(stderr, "bench_pipeline: %s\n", tg_error_message());
        exit(1);
    }
    int64_t n = tg_session_samples_per_run(s, mg.images);
    bench_write_random_batch(s, mg.images, mg.labels, 10);
    tg_session_run(s); /* warm-up */
    const tg_program *p = tg_session_program(s);
    res.devices = p->n_devices;
    double wall = 0, busy[8] = {0}, waits = 0;
    double t0 = bench_now();
    for (int k = 0; k < steps; k++) {
        tg_session_run(s);
        wall += tg_session_last_run_seconds(s);
        double longest = 0;
        for (int d = 0; d < p->n_devices && d < 8; d++) {
            busy[d] += tg_session_busy_seconds(s, 0, d);
            double w = tg_session_stream_seconds(s, 0, d);
            longest = w > longest ? w : longest;
        }
        waits += longest;
    }
    res.stream_share = wall > 0 ? waits / wall : 0;
    res.samples_per_s = (double)(n * steps) / (bench_now() - t0);
    for (int d = 0; d < p->n_devices && d < 8; d++)
        res.busy[d] = busy[d] / wall;
    tg_session_destroy(s);
    tg_graph_destroy(mg.graph);
    tg_options_destroy(o);
    return res;
}

enum { ZB_SCHEDULES = 3, ZB_ROUNDS = 3 };
static const char *const zb_schedules[ZB_SCHEDULES] = {"1f1b", "zb-h1", "zb-h2"};

/* The cost model's bubble fraction and host step of each of zb_schedules
 * over `stages`. */
static void predicted(const char *const *kv, const char *stages, int n_dev, double *bubble,
                      double *step)
{
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    tg_model_graph mg;
    tg_options *o = bench_options(kv);
    tg_schedule_prediction pr[16];
    int n = 0;
    if (balanced_mlp(64, &opt, &mg) != TG_OK ||
        tg_predict_schedules(mg.graph, o, n_dev, stages, pr, 16, &n) != TG_OK) {
        fprintf(stderr, "bench_pipeline: %s\n", tg_error_message());
        exit(1);
    }
    for (int k = 0; k < ZB_SCHEDULES; k++)
        for (int i = 0; i < n; i++)
            if (strcmp(pr[i].name, zb_schedules[k]) == 0) {
                bubble[k] = pr[i].bubble;
                step[k] = pr[i].step_seconds;
            }
    tg_graph_destroy(mg.graph);
    tg_options_destroy(o);
}

static void print_range(const char *name, const double *v, bool last)
{
    double lo = v[0], hi = v[0];
    for (int r = 1; r < ZB_ROUNDS; r++) {
        lo = v[r] < lo ? v[r] : lo;
        hi = v[r] > hi ? v[r] : hi;
    }
    printf("\"%s\":[%.1f,%.1f]%s", name, lo, hi, last ? "" : ",");
}

/* The unit-clock step (F = B = W = one cycle) of each of zb_schedules. */
static void unit_steps(int n_dev, int m, int *units)
{
    for (int k = 0; k < ZB_SCHEDULES; k++) {
        tg_pipe_schedule sch;
        tg_stage_cost c[8];
        memset(c, 0, sizeof c);
        tg_sim_result r;
        units[k] = -1;
        tg_schedule_kind kind = (tg_schedule_kind)tg_schedule_parse(zb_schedules[k]);
        if (tg_pipe_schedule_build(kind, n_dev, m, true, &sch) != TG_OK)
            continue;
        for (int d = 0; d < n_dev && d < 8; d++)
            c[d].time[TG_SIM_FORWARD] = c[d].time[TG_SIM_BACKWARD] = c[d].time[TG_SIM_WEIGHT] = 1;
        if (tg_schedule_simulate_costs(&sch, c, &r) == TG_OK) {
            units[k] = (int)(r.step_time + 0.5);
            tg_sim_result_free(&r);
        }
        tg_pipe_schedule_free(&sch);
    }
}

/* 1f1b, zb-h1 and zb-h2 in turn, ZB_ROUNDS times, with m micro-batches per
 * update: one JSON line. */
static void zero_bubble(const char *stages, int n_dev, int m, int steps)
{
    char acc[16];
    snprintf(acc, sizeof acc, "%d", m);
    const char *kv[] = {"executionStrategy",
                        "pipelined",
                        "stages",
                        stages,
                        "pipelineSchedule",
                        "1f1b",
                        "Training.gradientAccumulation",
                        acc,
                        NULL};
    double rate[ZB_SCHEDULES][ZB_ROUNDS], bubble[ZB_SCHEDULES] = {0}, step[ZB_SCHEDULES] = {0};
    double load_start = bench_load_average();
    for (int r = 0; r < ZB_ROUNDS; r++)
        for (int k = 0; k < ZB_SCHEDULES; k++) {
            kv[5] = zb_schedules[k];
            rate[k][r] = measure(true, kv, steps).samples_per_s;
        }
    predicted(kv, stages, n_dev, bubble, step);
    int units[ZB_SCHEDULES];
    unit_steps(n_dev, m, units);
    double mean[ZB_SCHEDULES] = {0};
    for (int k = 0; k < ZB_SCHEDULES; k++)
        for (int r = 0; r < ZB_ROUNDS; r++)
            mean[k] += rate[k][r] / ZB_ROUNDS;
    printf("{\"bench\":\"zero_bubble\",\"model\":\"balanced-mlp\",\"stages\":\"%s\","
           "\"devices\":%d,\"micro_batches\":%d,\"rounds\":%d,\"samples_per_s\":{",
           stages, n_dev, m, ZB_ROUNDS);
    for (int k = 0; k < ZB_SCHEDULES; k++)
        print_range(zb_schedules[k], rate[k], k == ZB_SCHEDULES - 1);
    printf("},\"mean_samples_per_s\":{\"1f1b\":%.1f,\"zb-h1\":%.1f,\"zb-h2\":%.1f},"
           "\"unit_steps\":{\"1f1b\":%d,\"zb-h1\":%d,\"zb-h2\":%d},"
           "\"predicted_bubble\":{\"1f1b\":%.3f,\"zb-h1\":%.3f,\"zb-h2\":%.3f},"
           "\"predicted_speedup\":{\"zb-h1\":%.3f,\"zb-h2\":%.3f},"
           "\"zb_h1_speedup\":%.3f,\"zb_h2_speedup\":%.3f,\"target\":1.10,"
           "\"load_average\":[%.2f,%.2f]}\n",
           mean[0], mean[1], mean[2], units[0], units[1], units[2], bubble[0], bubble[1], bubble[2],
           step[0] / step[1], step[0] / step[2], mean[1] / mean[0], mean[2] / mean[0], load_start,
           bench_load_average());
    fflush(stdout);
}

static void print_share_range(const char *name, const double *v, bool last)
{
    double lo = v[0], hi = v[0];
    for (int r = 1; r < ZB_ROUNDS; r++) {
        lo = v[r] < lo ? v[r] : lo;
        hi = v[r] > hi ? v[r] : hi;
    }
    printf("\"%s\":[%.3f,%.3f]%s", name, 100 * lo, 100 * hi, last ? "" : ",");
}

/* Case 4: prefetch depth 1 and 3 in turn on the tutorial pipeline. */
static void prefetch(int steps)
{
    const char *kv[] = {"executionStrategy",
                        "pipelined",
                        "Training.gradientAccumulation",
                        "10",
                        "deviceIterations",
                        "10",
                        "defaultPrefetchBufferingDepth",
                        "1",
                        NULL};
    static const char *const depths[2] = {"1", "3"};
    double share[2][ZB_ROUNDS], rate[2][ZB_ROUNDS];
    for (int r = 0; r < ZB_ROUNDS; r++)
        for (int k = 0; k < 2; k++) {
            kv[7] = depths[k];
            result res = measure(false, kv, steps);
            share[k][r] = res.stream_share;
            rate[k][r] = res.samples_per_s;
        }
    printf("{\"bench\":\"prefetch\",\"model\":\"mnist-pipeline\",\"devices\":4,"
           "\"batch\":40,\"micro_batches\":10,\"device_iterations\":10,\"rounds\":%d,"
           "\"host_stream_waits_pct_of_step\":{",
           ZB_ROUNDS);
    print_share_range("depth_1", share[0], false);
    print_share_range("depth_3", share[1], true);
    printf("},\"samples_per_s\":{");
    print_range("depth_1", rate[0], false);
    print_range("depth_3", rate[1], true);
    printf("},\"target_pct\":1.0}\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int usage = bench_usage(argc, argv, 0,
                            "usage: bench_pipeline\nPipeline schedules on 2 devices: per-device "
                            "busy time, bubble and throughput against one device, in the same run. "
                            "One JSON line per case.\nenvironment: TG_BENCH_STEPS, "
                            "TG_BENCH_ONLY=zero_bubble|prefetch\n");
    if (usage >= 0)
        return usage;
    const char *env = getenv("TG_BENCH_STEPS"), *only = getenv("TG_BENCH_ONLY");
    int steps = env ? atoi(env) : 20;
    bool zb_only = only && strcmp(only, "zero_bubble") == 0;
    if (only && !strcmp(only, "prefetch")) {
        prefetch(steps);
        return 0;
    }
    static const char *schedules[] = {"grouped", "interleaved", "gpipe", "1f1b", "zb-h1", "zb-h2"};
    const int m = 16, n_dev = 2;
    for (int model = 0; model < (zb_only ? 0 : 2); model++)
        for (int k = 0; k < 6; k++) {
            const char *kv[] = {"executionStrategy",
                                "pipelined",
                                "stages",
                                "B1,B2|B3,B4",
                                "pipelineSchedule",
                                schedules[k],
                                "Training.gradientAccumulation",
                                "16",
                                NULL};
            result r = measure(model == 1, kv, steps);
            tg_pipe_schedule sch;
            double sim[8] = {0};
            tg_pipe_schedule_build((tg_schedule_kind)tg_schedule_parse(schedules[k]), n_dev, m,
                                   true, &sch);
            tg_pipe_schedule_simulate(&sch, sim);
            printf("{\"bench\":\"pipeline\",\"model\":\"%s\",\"schedule\":\"%s\","
                   "\"devices\":%d,\"micro_batches\":%d,\"busy\":[%.3f,%.3f],\"theory\":%.3f,"
                   "\"simulated\":[%.3f,%.3f],\"stash_depth\":[%d,%d],\"samples_per_s\":%.1f}\n",
                   model ? "balanced-mlp" : "mnist-pipeline", schedules[k], n_dev, m, r.busy[0],
                   r.busy[1], (double)m / (m + n_dev - 1), sim[0], sim[1], sch.stash_depth[0],
                   sch.stash_depth[1], r.samples_per_s);
            tg_pipe_schedule_free(&sch);
            fflush(stdout);
        }
    /* few micro-batches are where the bubble is real: 2 devices, m = 2
     * and 4 (unit clock 9 against 8, 15 against 14), and m = 16 */
    static const int zb_m[] = {2, 4, 16};
    for (int k = 0; k < 3; k++)
        zero_bubble("B1,B2|B3,B4", 2, zb_m[k], steps);
    zero_bubble("B1|B2|B3|B4", 4, 16, steps);
    if (zb_only)
        return 0;
    /* device iterations as a user would set them: the host hands over ten
     * updates' data at a time */
    const char *one[] = {"replicationFactor", "1", "deviceIterations", "10", NULL};
    const char *two[] = {"replicationFactor", "2", "deviceIterations", "10", NULL};
    result r1 = measure(false, one, steps), r2 = measure(false, two, steps);
    printf("{\"bench\":\"replicas\",\"replicas_1_samples_per_s\":%.1f,"
           "\"replicas_2_samples_per_s\":%.1f,\"speedup\":%.3f,\"target\":1.8}\n",
           r1.samples_per_s, r2.samples_per_s, r2.samples_per_s / r1.samples_per_s);
    prefetch(steps);
    return 0;
}
