/* bench/bench_instances.c - instances over MPI against replicas in one
 * process (docs/distributed.md), as one JSON line:
 *   host-bound input: a model of about 1 MFLOP a sample
 *   (bench/host_bound_model.py, written with python3-onnx) trained on
 *   synthetic CIFAR-shaped images that the host resizes to 256x256 and
 *   flips: 2 instances x 1 replica against 1 instance x 2 replicas with
 *   the default (sync) loader and with the async loader's 2 workers, in
 *   samples/s, each alternated 3 times (ranges);
 *   on mnist-pipeline the cost of the cross-instance all-reduce as a share
 *   of a host step, with batch 16 (an exchange per 16 samples) and with the
 *   tutorial's batch 40 and accumulation 10 (an exchange per 400), each of
 *   4 arrangements alternated 3 times: 1 x 1 alone, two 1 x 1 processes at
 *   once (the control: the pair's contention for the cores and the memory,
 *   no exchange), and 2 instances x 1 replica with gradient buckets (the
 *   default) and without (distributed.gradientBucketBytes=0). The pair's
 *   cost two ways: how much longer its host step is than the control's
 *   (and than 1 x 1 alone's), and measured inside its run (train's epoch
 *   line, tools/train_exchange.h: MPI during the backward, the wait after
 *   it and, of that, waiting for the slower instance, the sum, the step's
 *   loss and stop sums). The last of 2 epochs, so that the control's two
 *   processes overlap. The load average before and after each case.
 *   No profiling: recording the steps would slow the pair alone.
 * It runs `tilegraph train --json` (and `tilegraph run`), so it needs the
 * built command, mpirun and python3-onnx. Timings on a loaded machine are
 * not claims.
 * usage: bench_instances [TILEGRAPH_BINARY] */
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TG_SOURCE_DIR
#define TG_SOURCE_DIR "."
#endif

typedef struct range {
    double lo, hi;
    int n; /* values seen: a range may be negative (a pair faster than the control) */
} range;

static void widen(range *r, double v)
{
    r->lo = !r->n || v < r->lo ? v : r->lo;
    r->hi = !r->n || v > r->hi ? v : r->hi;
    r->n++;
}

/* What one `tilegraph train --json` run (or a job's instance 0) printed in
 * its last epoch line: samples/s and, in an MPI job, its exchange's figures
 * (tools/train_exchange.h). */
enum { N_EXCHANGE = 8 };
static const char *const exchange_keys[N_EXCHANGE] = {
    "exchange_pct_of_host_step",   "exchange_without_imbalance_pct",
    "exchange_during_backward_ms", "exchange_after_backward_ms",
    "exchange_imbalance_ms",       "exchange_summing_ms",
    "exchange_step_totals_ms",     "host_step_ms"};

typedef struct train_run {
    double sps, exchange[N_EXCHANGE];
} train_run;

static double field(const char *line, const char *key)
{
    char k[96];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *at = strstr(line, k);
    return at ? strtod(at + strlen(k), NULL) : -1;
}

/* The last epoch line of `cmd`'s output (a train --json); sps < 0 on failure. */
static train_run run_train(const char *cmd)
{
    train_run r = {-1, {0}};
    FILE *f = popen(cmd, "r");
    if (!f)
        return r;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, "\"samples_per_s\":"))
            continue;
        r.sps = field(line, "samples_per_s");
        for (int k = 0; k < N_EXCHANGE; k++)
            r.exchange[k] = field(line, exchange_keys[k]);
    }
    if (pclose(f) != 0) {
        fprintf(stderr, "bench_instances: failed: %s\n", cmd);
        r.sps = -1;
    }
    return r;
}

/* The host-bound case: each arrangement 3 times, alternated. */
static int host_bound(const char *t, const char *dir, range out[3])
{
    char model[512], cmd[2048];
    snprintf(model, sizeof model, "%s/host_bound.onnx", dir);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/bench/host_bound_model.py %s", TG_SOURCE_DIR,
             model);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_instances: cannot write the model (python3-onnx?): %s\n", cmd);
        return 1;
    }
    char args[1024];
    snprintf(args, sizeof args,
             "--model %s --dataset synthetic --resize 256x256 --flip 0.5 --train-limit 1024 "
             "--test-limit 8 --batch-size 8 --epochs 1 --threads-per-device 1 --json",
             model);
    static const char *const forms[3] = {
        "%s train %s --replicas 2 2>/dev/null",
        "%s train %s --replicas 2 --loader async --workers 2 2>/dev/null",
        "%s run --instances 2 --replicas 2 -- train %s 2>/dev/null"};
    memset(out, 0, 3 * sizeof *out);
    for (int rep = 0; rep < 3; rep++)
        for (int k = 0; k < 3; k++) {
            snprintf(cmd, sizeof cmd, forms[k], t, args);
            double v = run_train(cmd).sps;
            if (v <= 0)
                return 1;
            widen(&out[k], v);
        }
    return 0;
}

/* The control: two 1 x 1 processes at the same time (the pair's contention
 * without its exchange); the samples/s of each, from their own files. */
static int run_concurrent(const char *t, const char *args, const char *dir, double sps[2])
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "%s train %s --replicas 1 >%s/c0.json 2>/dev/null & "
             "%s train %s --replicas 1 >%s/c1.json 2>/dev/null; wait $!",
             t, args, dir, t, args, dir);
    if (system(cmd) != 0)
        return 1;
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "cat %s/c%d.json", dir, k);
        sps[k] = run_train(cmd).sps;
        if (sps[k] <= 0)
            return 1;
    }
    return 0;
}

/* One case: 1 x 1 alone, two 1 x 1 at once, and 2 instances x 1 replica
 * with gradient buckets and without. */
typedef struct cost_case {
    range single, concurrent, pair[2];
    range vs_single[2], vs_concurrent[2]; /* the pair's longer host step, % */
    range exchange[2][N_EXCHANGE];        /* measured inside the pair's run */
    double load[2];                       /* load average before and after */
} cost_case;

/* How much longer the pair's host step (2 samples per replica's 1) is than
 * a single process's of the same per-replica work. */
static double step_cost_pct(double one, double two)
{
    return 100.0 * ((2.0 / two) / (1.0 / one) - 1.0);
}

static void note_pair(cost_case *c, int k, const train_run *r, double one, double both)
{
    widen(&c->pair[k], r->sps);
    widen(&c->vs_single[k], step_cost_pct(one, r->sps));
    widen(&c->vs_concurrent[k], step_cost_pct(both, r->sps));
    for (int m = 0; m < N_EXCHANGE; m++)
        widen(&c->exchange[k][m], r->exchange[m]);
}

/* mnist-pipeline, one thread per process; `extra` sets batch and
 * accumulation. The four arrangements alternated 3 times. */
static int allreduce_cost(const char *t, const char *dir, const char *extra, cost_case *c)
{
    char cmd[4096], args[1024];
    snprintf(args, sizeof args,
             "--model mnist-pipeline --train-limit 8192 --test-limit 16 --epochs 2 "
             "--threads-per-device 1 --json %s",
             extra);
    static const char *const pair_opts[2] = {"",
                                             "--engine-option distributed.gradientBucketBytes=0"};
    memset(c, 0, sizeof *c);
    c->load[0] = bench_load_average();
    for (int rep = 0; rep < 3; rep++) {
        snprintf(cmd, sizeof cmd, "%s train %s --replicas 1 2>/dev/null", t, args);
        double one = run_train(cmd).sps, both[2];
        if (one <= 0 || run_concurrent(t, args, dir, both))
            return 1;
        widen(&c->single, one);
        widen(&c->concurrent, both[0]);
        widen(&c->concurrent, both[1]);
        for (int k = 0; k < 2; k++) {
            snprintf(cmd, sizeof cmd,
                     "%s run --instances 2 --replicas 2 -- train %s %s 2>/dev/null", t, args,
                     pair_opts[k]);
            train_run r = run_train(cmd);
            if (r.sps <= 0)
                return 1;
            note_pair(c, k, &r, one, (both[0] + both[1]) / 2);
        }
    }
    c->load[1] = bench_load_average();
    return 0;
}

static void print_range(const char *key, range r)
{
    printf("\"%s\":[%.3f,%.3f]", key, r.lo, r.hi);
}

static void print_pair(const cost_case *c, int k)
{
    print_range("two_instances_x1_sps", c->pair[k]);
    printf(",");
    print_range("longer_step_than_1x1_pct", c->vs_single[k]);
    printf(",");
    print_range("longer_step_than_concurrent_1x1_pct", c->vs_concurrent[k]);
    printf(",\"in_run\":{");
    for (int m = 0; m < N_EXCHANGE; m++) {
        printf(m ? "," : "");
        print_range(exchange_keys[m], c->exchange[k][m]);
    }
    printf("}");
}

static void print_case(const char *name, const cost_case *c)
{
    printf("{\"model\":\"mnist-pipeline\",\"case\":\"%s\",\"load\":[%.2f,%.2f],", name, c->load[0],
           c->load[1]);
    print_range("one_instance_x1_sps", c->single);
    printf(",");
    print_range("two_concurrent_1x1_sps_each", c->concurrent);
    printf(",\"buckets\":{");
    print_pair(c, 0);
    printf("},\"without_buckets\":{");
    print_pair(c, 1);
    printf("}}");
}

int main(int argc, char **argv)
{
    int usage = bench_usage(
        argc, argv, 1,
        "usage: bench_instances [path to the tilegraph command]\nInstances over MPI against "
        "replicas in one process: host-bound input 2x1 against 1x2, and the cross-instance "
        "all-reduce share of a host step on mnist-pipeline. One JSON line.\n");
    if (usage >= 0)
        return usage;
    const char *t = argc > 1 ? argv[1] : TG_SOURCE_DIR "/build/tilegraph";
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    char dir[] = "/tmp/tg_bench_instances.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("bench_instances: mkdtemp");
        return 1;
    }
    range hb[3];
    cost_case cc[2];
    int failed = host_bound(t, dir, hb) || allreduce_cost(t, dir, "--batch-size 16", &cc[0]) ||
                 allreduce_cost(t, dir, "--batch-size 40 --gradient-accumulation 10", &cc[1]);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_instances: could not remove %s\n", dir);
    if (failed)
        return 1;
    printf("{\"bench\":\"instances\",\"host_bound\":{\"model\":\"host_bound_model.py (1 MFLOP)\","
           "\"input\":\"synthetic 3x32x32 -> resize 256x256, flip 0.5, batch 8\","
           "\"one_instance_x2_replicas_sps\":[%.1f,%.1f],"
           "\"one_instance_x2_replicas_async2_sps\":[%.1f,%.1f],"
           "\"two_instances_x1_replica_sps\":[%.1f,%.1f],\"speedup_vs_sync\":[%.3f,%.3f],"
           "\"speedup_vs_async2\":[%.3f,%.3f]},",
           hb[0].lo, hb[0].hi, hb[1].lo, hb[1].hi, hb[2].lo, hb[2].hi, hb[2].lo / hb[0].hi,
           hb[2].hi / hb[0].lo, hb[2].lo / hb[1].hi, hb[2].hi / hb[1].lo);
    printf("\"allreduce\":[");
    print_case("batch 16", &cc[0]);
    printf(",");
    print_case("batch 40, accumulation 10", &cc[1]);
    printf("],\"note\":\"ranges over 3 alternated runs (the last of 2 epochs); in_run: the "
           "pair's exchange measured inside it, ms per host step and %% of it, the mean of the "
           "instances; timings of a loaded machine are not claims\"}\n");
    return 0;
}
