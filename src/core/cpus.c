/* core/cpus.c - the cores this process may use, how busy they are, and the
 * default thread count (see cpus.h for the rule). Linux-specific parts fall
 * back to "all online CPUs, none busy" elsewhere. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include "core/cpus.h"

#include "core/clock.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int tg_cpu_count(void)
{
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int tg_cpu_free(int allowed, double busy)
{
    if (allowed < 1)
        allowed = 1;
    if (!(busy > 0)) /* also NaN */
        busy = 0;
    int taken = (int)floor(busy + 0.75);
    int free_cores = allowed - taken;
    return free_cores < 1 ? 1 : free_cores;
}

int tg_threads_default(int free_cores, int parties)
{
    if (parties < 1)
        parties = 1;
    int t = free_cores / parties;
    return t < 1 ? 1 : t;
}

#ifdef __linux__
/* Busy, niced and total jiffies of every CPU in `set`, summed; false on
 * error. Busy excludes niced time (user time of processes with nice > 0),
 * which the caller adds. */
static bool read_stat(const cpu_set_t *set, unsigned long long *busy, unsigned long long *niced,
                      unsigned long long *total)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return false;
    char line[512];
    *busy = *niced = *total = 0;
    bool any = false;
    while (fgets(line, sizeof line, f)) {
        int cpu;
        unsigned long long v[8] = {0};
        if (strncmp(line, "cpu", 3) != 0 || line[3] < '0' || line[3] > '9')
            continue;
        if (sscanf(line + 3, "%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) < 5)
            continue;
        if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, set))
            continue;
        /* user nice system idle iowait irq softirq steal: idle and iowait are free time */
        unsigned long long all = 0;
        for (int k = 0; k < 8; k++)
            all += v[k];
        *total += all;
        *busy += all - v[1] - v[3] - v[4];
        *niced += v[1];
        any = true;
    }
    fclose(f);
    return any;
}
#endif

tg_cpu_load tg_cpu_load_sample(int window_ms)
{
    tg_cpu_load l = {tg_cpu_count(), 0, 0, false, 0};
#ifdef __linux__
    cpu_set_t set;
    unsigned long long b0, n0, t0, b1, n1, t1;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && read_stat(&set, &b0, &n0, &t0)) {
        struct timespec ts = {window_ms / 1000, (long)(window_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        if (read_stat(&set, &b1, &n1, &t1) && t1 > t0) {
            /* jiffies over all jiffies of the allowed CPUs, in cores */
            l.busy = (double)(b1 - b0) / (double)(t1 - t0) * l.allowed;
            l.niced = (double)(n1 - n0) / (double)(t1 - t0) * l.allowed;
            l.measured = true;
        }
    }
    /* A niced process's time counts as busy too. CFS's weights would give
     * an un-niced thread nearly the whole core (nice 19 gets 1.5% of it),
     * but not reliably the moment it wakes: mnist-pipeline at batch 16
     * beside one niced busy loop (bench_load, 2 cores) trained at 11,656-
     * 27,659 samples/s on 2 threads over two runs, at 16,262-17,628 on 1;
     * the threads wait for each other at every op, so one held back
     * holds back both. One thread is the choice that never loses. */
    l.busy += l.niced;
#endif
    l.free = tg_cpu_free(l.allowed, l.busy);
    return l;
}

tg_cpu_load tg_cpu_load_recent(int window_ms)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static tg_cpu_load last;
    static double taken = -1;
    pthread_mutex_lock(&lock);
    if (taken < 0 || tg_clock_seconds() - taken > 1.0) {
        last = tg_cpu_load_sample(window_ms);
        taken = tg_clock_seconds();
    }
    tg_cpu_load l = last;
    pthread_mutex_unlock(&lock);
    return l;
}
