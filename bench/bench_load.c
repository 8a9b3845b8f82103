/* bench/bench_load.c - training speed when the machine is shared.
 *
 * The same short training (mnist-pipeline, one device, micro-batch 16) with
 * the default threads, with threadsPerDevice 1 and with 2, on an idle
 * machine and then beside a forked busy loop: not niced, niced (19), and
 * intermittent (busy 10 ms out of every 30 ms, "another process runs now
 * and then"). Sessions are compiled under the load they run under, so the
 * default rule sees it. The variants alternate (A, B, C, A, B, C, ...) so
 * that drifting load hits all alike. Prints one JSON line: per load, each
 * variant's samples/s as min, median and max, the threads the default
 * chose, and the ratio of the default's median to one thread's (issue 12
 * asks >= 1 under a hog). TG_BENCH_STEPS: host steps per measurement
 * (default 150); TG_BENCH_REPS: alternations (default 3).
 *
 * The hog is killed on every way out: normal exit (atexit), SIGINT, SIGTERM,
 * SIGHUP, and if this process dies outright the hog gets SIGKILL from the
 * kernel (PR_SET_PDEATHSIG).
 */
#define _DEFAULT_SOURCE /* nice(2) */
#include "bench_util.h"
#include "tilegraph/models.h"
#include "tilegraph/session.h"

#include "core/alloc.h"
#include "core/cpus.h"
#include "core/error.h"
#include "core/rng.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_REPS 16

static volatile pid_t hog_pid;

static void hog_stop(void)
{
    pid_t pid = hog_pid;
    if (pid > 0) {
        hog_pid = 0;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

static void on_signal(int sig)
{
    pid_t pid = hog_pid;
    if (pid > 0)
        kill(pid, SIGKILL); /* async-signal-safe; the kernel reaps it with us */
    signal(sig, SIG_DFL);
    raise(sig);
}

/* The child: spin, or spin busy_ms out of every period_ms. Never returns. */
static void hog_main(pid_t parent, int niceness, int busy_ms, int period_ms)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* the parent died before the line above */
        _exit(0);
    if (niceness && nice(niceness) == -1)
        _exit(1);
    volatile unsigned long spin = 0;
    for (;;) {
        double t0 = bench_now();
        while (busy_ms <= 0 || bench_now() - t0 < busy_ms * 1e-3)
            spin++;
        struct timespec idle = {0, (long)(period_ms - busy_ms) * 1000000L};
        nanosleep(&idle, NULL);
    }
}

static bool hog_start(int niceness, int busy_ms, int period_ms)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0)
        hog_main(parent, niceness, busy_ms, period_ms);
    hog_pid = pid;
    return true;
}

typedef struct {
    double samples_per_s;
    int threads;
} run_result;

static run_result measure(const char *threads, int steps)
{
    run_result res = {0, 0};
    tg_optimizer opt = tg_optimizer_sgd(0.05f, 0.9f);
    tg_model_graph mg;
    tg_options *o = tg_options_create();
    tg_session *s = NULL;
    if (!o || tg_options_set(o, "threadsPerDevice", threads) != TG_OK ||
        tg_model_graph_create(tg_model_find("mnist-pipeline"), 16, &opt, &mg) != TG_OK ||
        tg_session_create(mg.graph, o, &s) != TG_OK) {
        fprintf(stderr, "bench_load: %s\n", tg_error_message());
        exit(1);
    }
    int64_t n = tg_session_samples_per_run(s, mg.images);
    bench_write_random_batch(s, mg.images, mg.labels, 10);
    tg_session_run(s); /* warm-up */
    double t0 = bench_now();
    for (int k = 0; k < steps; k++)
        if (tg_session_run(s) != TG_OK) {
            fprintf(stderr, "bench_load: %s\n", tg_error_message());
            exit(1);
        }
    res.samples_per_s = (double)(n * steps) / (bench_now() - t0);
    res.threads = tg_session_threads(s);
    tg_session_destroy(s);
    tg_graph_destroy(mg.graph);
    tg_options_destroy(o);
    return res;
}

/* {"min":..,"median":..,"max":..} of n values (sorted in place). */
static void print_range(const char *name, double *v, int n)
{
    double med = bench_median(v, n);
    printf("\"%s\":{\"min\":%.0f,\"median\":%.0f,\"max\":%.0f}", name, v[0], med, v[n - 1]);
}

typedef struct {
    const char *name;
    bool hog;
    int niceness, busy_ms, period_ms;
} load_case;

static void run_case(const load_case *lc, int steps, int reps, bool first)
{
    static const char *variants[] = {"0", "1", "2"};
    double sps[3][MAX_REPS];
    int tmin = 1 << 30, tmax = 0;
    if (lc->hog && !hog_start(lc->niceness, lc->busy_ms, lc->period_ms)) {
        fprintf(stderr, "bench_load: cannot fork the busy loop\n");
        exit(1);
    }
    if (lc->hog) { /* the default rule reuses a sample for a second (core/cpus.h) */
        struct timespec settle = {1, 100000000L};
        nanosleep(&settle, NULL);
    }
    for (int k = 0; k < reps; k++)
        for (int v = 0; v < 3; v++) {
            run_result r = measure(variants[v], steps);
            sps[v][k] = r.samples_per_s;
            if (v == 0) {
                tmin = r.threads < tmin ? r.threads : tmin;
                tmax = r.threads > tmax ? r.threads : tmax;
            }
        }
    hog_stop();
    double med_default = bench_median(sps[0], reps), med_one = bench_median(sps[1], reps);
    printf("%s{\"load\":\"%s\",\"default_threads\":[%d,%d],", first ? "" : ",", lc->name, tmin,
           tmax);
    print_range("default", sps[0], reps);
    printf(",");
    print_range("threads_1", sps[1], reps);
    printf(",");
    print_range("threads_2", sps[2], reps);
    printf(",\"default_over_1\":%.3f}", med_default / med_one);
}

int main(int argc, char **argv)
{
    int usage =
        bench_usage(argc, argv, 0,
                    "usage: bench_load\nTraining speed of mnist-pipeline with the default threads, "
                    "1 and 2 threads, idle and beside a busy loop (plain, niced, intermittent). "
                    "One JSON line.\nenvironment: TG_BENCH_STEPS, TG_BENCH_REPS\n");
    if (usage >= 0)
        return usage;
    const char *env = getenv("TG_BENCH_STEPS");
    int steps = env && atoi(env) > 0 ? atoi(env) : 150;
    env = getenv("TG_BENCH_REPS");
    int reps = env && atoi(env) > 0 ? atoi(env) : 3;
    reps = reps > MAX_REPS ? MAX_REPS : reps;
    atexit(hog_stop);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    static const load_case cases[] = {
        {"idle", false, 0, 0, 0},
        {"hog", true, 0, 0, 0},
        {"hog_niced", true, 19, 0, 0},
        {"hog_intermittent", true, 0, 10, 30},
    };
    printf("{\"bench\":\"load\",\"model\":\"mnist-pipeline\",\"batch\":16,\"steps\":%d,"
           "\"reps\":%d,\"cores\":%d,\"note\":\"samples/s; figures need a quiet machine\","
           "\"cases\":[",
           steps, reps, tg_cpu_count());
    fflush(stdout);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        run_case(&cases[c], steps, reps, c == 0);
        fflush(stdout);
    }
    printf("]}\n");
    return 0;
}
