/* bench/bench_util.h - what every benchmark needs: a monotonic clock, the
 * median of repeated measurements, and a host batch of random images and
 * labels written into a session's inputs. Header-only: each bench is one
 * executable (bench/CMakeLists.txt). */
#ifndef TG_BENCH_UTIL_H
#define TG_BENCH_UTIL_H

#include "tilegraph/session.h"

#include "core/alloc.h"
#include "core/rng.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static inline double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of n values; sorts v in place (v[0] and v[n-1] are then the
 * minimum and maximum). */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Write one host step of uniform random images and labels below `classes`
 * (seeded, so every run of a bench feeds the same data). */
static inline void bench_write_random_batch(tg_session *s, const tg_tensor *images,
                                            const tg_tensor *labels, int classes)
{
    int64_t n = tg_session_samples_per_run(s, images);
    int64_t pixels = tg_shape_numel(tg_tensor_shape(images)) / tg_tensor_shape(images).dim[0];
    float *img = tg_malloc((size_t)(n * pixels) * sizeof(float));
    int32_t *lab = tg_malloc((size_t)n * sizeof(int32_t));
    tg_rng r;
    tg_rng_seed(&r, 1);
    for (int64_t i = 0; i < n * pixels; i++)
        img[i] = (float)tg_rng_uniform(&r);
    for (int64_t i = 0; i < n; i++)
        lab[i] = (int32_t)tg_rng_below(&r, (uint64_t)classes);
    tg_session_write(s, images, img, (size_t)(n * pixels) * sizeof(float));
    tg_session_write(s, labels, lab, (size_t)n * sizeof(int32_t));
    tg_free(img);
    tg_free(lab);
}

/* Seconds of `steps` host steps of s after 2 untimed ones (the first
 * builds pools and caches), each on bench_write_random_batch's data, the
 * writes included; with per_step, each timed step's run alone too. -1 when
 * a run fails (tg_error_message says why). */
static inline double bench_timed_steps(tg_session *s, const tg_tensor *images,
                                       const tg_tensor *labels, int classes, int steps,
                                       double *per_step)
{
    double start = 0;
    for (int k = 0; k < steps + 2; k++) {
        if (k == 2)
            start = bench_now();
        bench_write_random_batch(s, images, labels, classes);
        double t0 = bench_now();
        if (tg_session_run(s) != TG_OK)
            return -1;
        if (k >= 2 && per_step)
            per_step[k - 2] = bench_now() - t0;
    }
    return bench_now() - start;
}

/* The process's CPU seconds so far (user and system, all threads). */
static inline double bench_cpu_seconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec +
           (double)u.ru_stime.tv_sec + 1e-6 * (double)u.ru_stime.tv_usec;
}

/* A rate measured both ways: per second of wall time and per second of
 * the process's CPU time. At one thread the second is the work itself,
 * which other processes on a shared machine disturb far less than the
 * first (they still share caches and memory bandwidth); at two threads it
 * also counts the threads' waiting, so only wall time compares there. */
typedef struct bench_rate {
    double wall, cpu;
} bench_rate;

/* Run a reference (PyTorch) benchmark command and read its JSON output:
 * the "samples_per_s" and "cpu_samples_per_s" it reports (-1 when the
 * command gave none) and its "system" (e.g. "pytorch 1.13.0") into version,
 * left as it is when absent. */
static inline bench_rate bench_reference_rates(const char *cmd, char *version, size_t cap)
{
    char line[1024];
    FILE *p = popen(cmd, "r");
    bench_rate r = {-1, -1};
    while (p && fgets(line, sizeof line, p)) {
        char *at = strstr(line, "\"samples_per_s\":"),
             *cpu = strstr(line, "\"cpu_samples_per_s\":");
        if (at)
            r.wall = atof(at + 16); /* atof skips the space after the colon */
        if (cpu)
            r.cpu = atof(cpu + 20);
        char *sys = strstr(line, "\"system\": \"");
        if (sys) {
            sys += 11;
            size_t len = strcspn(sys, "\"");
            snprintf(version, cap, "%.*s", (int)(len < cap ? len : cap - 1), sys);
        }
    }
    if (p)
        pclose(p);
    return r;
}

/* The same, its wall-time rate alone. */
static inline double bench_reference_rate(const char *cmd, char *version, size_t cap)
{
    return bench_reference_rates(cmd, version, cap).wall;
}

/* "key":[min,max] of n measurements, as the JSON lines give ranges. */
static inline void bench_print_range(const char *key, const double *v, int n)
{
    double lo = v[0], hi = v[0];
    for (int i = 1; i < n; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    printf("\"%s\":[%.3f,%.3f]", key, lo, hi);
}

/* Every benchmark answers --help (and -h) with what it measures and the
 * environment variables it reads, and refuses arguments it does not take,
 * rather than starting a long run. Returns -1 to go on, else the exit code.
 * `takes_args` is the number of positional arguments the bench accepts. */
/* The machine's 1-minute load average (-1 when unknown), printed beside
 * figures so a reader knows how busy the machine was. */
static inline double bench_load_average(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f && fscanf(f, "%lf", &l) != 1)
        l = -1;
    if (f)
        fclose(f);
    return l;
}

static inline int bench_usage(int argc, char **argv, int takes_args, const char *usage)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("%s", usage);
            return 0;
        }
    if (argc - 1 > takes_args || (argc > 1 && argv[1][0] == '-')) {
        fprintf(stderr, "%s: unexpected argument '%s'; see %s --help\n", argv[0],
                argv[takes_args + 1 < argc && argv[1][0] != '-' ? takes_args + 1 : 1], argv[0]);
        return 2;
    }
    return -1;
}

/* The integer in environment variable `name`, clamped to [lo, hi];
 * `fallback` when it is unset. */
static inline int bench_env_int(const char *name, int fallback, int lo, int hi)
{
    const char *v = getenv(name);
    int x = v ? atoi(v) : fallback;
    return x < lo ? lo : x > hi ? hi : x;
}

/* oneDNN's OpenMP threads sleep when idle, as under the tilegraph command
 * (tools/main.c). libgomp reads OMP_WAIT_POLICY only when it loads, so the
 * bench sets it and executes itself again; a policy already set is kept. */
static inline void bench_passive_omp(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || setenv("OMP_WAIT_POLICY", "passive", 1) != 0)
        return;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        execv(self, argv);
    }
}

#endif
