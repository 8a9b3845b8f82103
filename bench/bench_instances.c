/* bench/bench_instances.c - instances over MPI against replicas in one
 * process (docs/distributed.md), as one JSON line:
 *   host-bound input: a model of about 1 MFLOP a sample
 *   (bench/host_bound_model.py, written with python3-onnx) trained on
 *   synthetic CIFAR-shaped images that the host resizes to 256x256 and
 *   flips: 2 instances x 1 replica against 1 instance x 2 replicas with
 *   the default (sync) loader and with the async loader's 2 workers, in
 *   samples/s, each alternated 3 times (ranges);
 *   on mnist-pipeline the cost of the cross-instance all-reduce as a share
 *   of a host step: how much longer the host step of 2 instances x 1 replica
 *   is than that of 1 instance x 1 replica (same per-replica work, one
 *   thread each, on its own core), with batch 16 (an exchange per 16
 *   samples) and with the tutorial's batch 40 and accumulation 10 (an
 *   exchange per 400), each alternated 3 times; the pair both with gradient
 *   buckets (the exchange overlapping the backward, the default) and
 *   without (distributed.gradientBucketBytes=0: all after the backward).
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

/* samples/s of the last epoch line of `tilegraph train --json`; <0 on failure. */
static double samples_per_s(const char *cmd)
{
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    char line[4096];
    double sps = -1;
    while (fgets(line, sizeof line, f)) {
        const char *k = strstr(line, "\"samples_per_s\":");
        if (k)
            sps = strtod(k + strlen("\"samples_per_s\":"), NULL);
    }
    int rc = pclose(f);
    if (rc != 0) {
        fprintf(stderr, "bench_instances: failed (status %d): %s\n", rc, cmd);
        return -1;
    }
    return sps;
}

typedef struct range {
    double lo, hi;
} range;

static void widen(range *r, double v)
{
    r->lo = r->lo <= 0 || v < r->lo ? v : r->lo;
    r->hi = v > r->hi ? v : r->hi;
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
            double v = samples_per_s(cmd);
            if (v <= 0)
                return 1;
            widen(&out[k], v);
        }
    return 0;
}

/* One case of the all-reduce's cost: samples/s of 1 x 1, of the pair with
 * gradient buckets and without, and the pair's cost in each way. */
typedef struct cost_case {
    range single, pair, pair_unbucketed, cost, cost_unbucketed;
} cost_case;

/* The pair's host step against the single's: a step of the pair carries
 * twice the samples of the single's step. */
static double step_cost_pct(double one, double two)
{
    return 100.0 * ((2.0 / two) / (1.0 / one) - 1.0);
}

/* mnist-pipeline, 1 x 1 against 2 instances x 1 (same per-replica work, one
 * thread each) with and without gradient buckets, alternated 3 times;
 * `extra` sets batch and accumulation. The cross-instance cost is how much
 * longer the pair's host step is. */
static int allreduce_cost(const char *t, const char *extra, cost_case *c)
{
    char cmd[2048], args[1024];
    snprintf(args, sizeof args,
             "--model mnist-pipeline --train-limit 8192 --test-limit 16 --epochs 1 "
             "--threads-per-device 1 --json %s",
             extra);
    memset(c, 0, sizeof *c);
    for (int rep = 0; rep < 3; rep++) {
        snprintf(cmd, sizeof cmd, "%s train %s --replicas 1 2>/dev/null", t, args);
        double one = samples_per_s(cmd);
        snprintf(cmd, sizeof cmd, "%s run --instances 2 --replicas 2 -- train %s 2>/dev/null", t,
                 args);
        double two = samples_per_s(cmd);
        snprintf(cmd, sizeof cmd,
                 "%s run --instances 2 --replicas 2 -- train %s "
                 "--engine-option distributed.gradientBucketBytes=0 2>/dev/null",
                 t, args);
        double whole = samples_per_s(cmd);
        if (one <= 0 || two <= 0 || whole <= 0)
            return 1;
        widen(&c->single, one);
        widen(&c->pair, two);
        widen(&c->pair_unbucketed, whole);
        widen(&c->cost, step_cost_pct(one, two));
        widen(&c->cost_unbucketed, step_cost_pct(one, whole));
    }
    return 0;
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
    int failed = host_bound(t, dir, hb) || allreduce_cost(t, "--batch-size 16", &cc[0]) ||
                 allreduce_cost(t, "--batch-size 40 --gradient-accumulation 10", &cc[1]);
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
    static const char *const cases[2] = {"batch 16", "batch 40, accumulation 10"};
    printf("\"allreduce\":[");
    for (int k = 0; k < 2; k++)
        printf("%s{\"model\":\"mnist-pipeline\",\"case\":\"%s\",\"one_instance_x1_sps\":[%.1f,"
               "%.1f],\"two_instances_x1_sps\":[%.1f,%.1f],"
               "\"cross_instance_cost_pct_of_host_step\":[%.2f,%.2f],"
               "\"without_buckets\":{\"two_instances_x1_sps\":[%.1f,%.1f],"
               "\"cross_instance_cost_pct_of_host_step\":[%.2f,%.2f]}}",
               k ? "," : "", cases[k], cc[k].single.lo, cc[k].single.hi, cc[k].pair.lo,
               cc[k].pair.hi, cc[k].cost.lo, cc[k].cost.hi, cc[k].pair_unbucketed.lo,
               cc[k].pair_unbucketed.hi, cc[k].cost_unbucketed.lo, cc[k].cost_unbucketed.hi);
    printf("],\"note\":\"ranges over 3 alternated runs; timings of a loaded machine are not "
           "claims\"}\n");
    return 0;
}
