/* bench/bench_instances.c - instances over MPI against replicas in one
 * process (docs/distributed.md), as one JSON line:
 *   host-bound input (synthetic CIFAR-shaped data, --resize and --flip on the
 *   host): 2 instances x 1 replica against 1 instance x 2 replicas, in
 *   samples/s of the last epoch; and on mnist-pipeline the cost of the
 *   cross-instance all-reduce as a share of a host step, estimated as the
 *   step time of 2 instances x 1 replica over that of 1 instance x 1
 *   replica (same per-replica work, one thread per device each), minus one,
 *   and measured: the MPI exchange's share of each instance's host step from
 *   the pair's profiles (`analyse DIR instances`, 64 recorded host steps);
 *   the smallest over the instances, since the exchange includes waiting for
 *   the slower instance.
 * It runs `tilegraph train --json` (and `tilegraph run`), so it needs the
 * built command and mpirun. Timings on a loaded machine are not claims.
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

/* The smallest "of the step" of `tilegraph analyse DIR instances --json`:
 * the exchange with the other instances as a share of a host step. */
static double exchange_share(const char *t, const char *dir)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s analyse %s instances --json", t, dir);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    pclose(f);
    double least = -1;
    const char *key = "\"of the step\":";
    for (const char *k = strstr(text, key); k; k = strstr(k + 1, key)) {
        double v = strtod(k + strlen(key), NULL);
        least = least < 0 || v < least ? v : least;
    }
    return least;
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
    char cmd[2048];
    const char *host =
        "--model resnet18 --dataset synthetic --train-limit 64 --test-limit 8 --batch-size 4 "
        "--resize 64x64 --flip 0.5 --epochs 1 --threads-per-device 1 --json";
    snprintf(cmd, sizeof cmd, "%s train %s --replicas 2 2>/dev/null", t, host);
    double one_x2 = samples_per_s(cmd);
    snprintf(cmd, sizeof cmd,
             "%s run --instances 2 --replicas 2 -- train %s "
             "2>/dev/null",
             t, host);
    double two_x1 = samples_per_s(cmd);
    const char *mp = "--model mnist-pipeline --train-limit 2048 --test-limit 16 --batch-size 16 "
                     "--epochs 1 --threads-per-device 1 --json";
    snprintf(cmd, sizeof cmd, "%s train %s --replicas 1 2>/dev/null", t, mp);
    double single = samples_per_s(cmd);
    char dir[] = "/tmp/tg_bench_instances.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("bench_instances: mkdtemp");
        return 1;
    }
    setenv("TILEGRAPH_ENGINE_OPTIONS", "{\"autoReport.executionProfileProgramRunCount\":\"64\"}",
           1);
    snprintf(cmd, sizeof cmd,
             "%s run --instances 2 --replicas 2 -- train %s --profile-dir %s "
             "2>/dev/null",
             t, mp, dir);
    double pair = samples_per_s(cmd);
    double share = exchange_share(t, dir);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_instances: could not remove %s\n", dir);
    if (one_x2 <= 0 || two_x1 <= 0 || single <= 0 || pair <= 0)
        return 1;
    /* a step of the pair carries twice the samples of the single's step */
    double step_single = 1.0 / single, step_pair = 2.0 / pair;
    printf("{\"bench\":\"instances\",\"host_bound\":{\"model\":\"resnet18\",\"input\":"
           "\"synthetic 3x32x32 -> resize 64x64, flip 0.5\",\"one_instance_x2_replicas_sps\":%.1f,"
           "\"two_instances_x1_replica_sps\":%.1f,\"speedup\":%.3f},"
           "\"allreduce\":{\"model\":\"mnist-pipeline\",\"one_instance_x1_sps\":%.1f,"
           "\"two_instances_x1_sps\":%.1f,\"cross_instance_cost_pct_of_host_step\":%.2f,"
           "\"mpi_exchange_pct_of_host_step\":%.2f},"
           "\"note\":\"timings of a loaded machine are not claims\"}\n",
           one_x2, two_x1, two_x1 / one_x2, single, pair, 100.0 * (step_pair / step_single - 1.0),
           100.0 * share);
    return 0;
}
