/* core/cpus.h - how many cores this process may use and how many are free,
 * and the default thread count that follows from them.
 *
 * The rule (docs/multi-device.md, "Threads"): the cores this process may run
 * on (its affinity mask, so taskset and cgroup cpusets count), minus the
 * cores other processes kept busy over a short window (/proc/stat; niced
 * processes' time counts as busy: they do not yield a core fast enough),
 * shared out evenly over the devices of every replica, at least one each.
 */
#ifndef TG_CORE_CPUS_H
#define TG_CORE_CPUS_H

#include <stdbool.h>

/* Logical CPUs this process may run on (sched_getaffinity; the online CPUs
 * where that is unavailable); at least 1. */
int tg_cpu_count(void);

/* What the machine looks like now. */
typedef struct tg_cpu_load {
    int allowed;   /* tg_cpu_count() */
    double busy;   /* cores kept busy over the window, among the allowed; 0 if unknown */
    double niced;  /* cores kept busy by niced processes (included in busy) */
    bool measured; /* false: /proc/stat could not be read (busy is 0) */
    int free;      /* tg_cpu_free(allowed, busy) */
} tg_cpu_load;

/* Sample /proc/stat twice, window_ms apart (the calling thread sleeps). */
tg_cpu_load tg_cpu_load_sample(int window_ms);

/* The last sample if it is under a second old, else a new one: a process
 * compiling several programs in a row (training and evaluation sessions,
 * compile's insights) waits for the window once. Thread-safe. */
tg_cpu_load tg_cpu_load_recent(int window_ms);

/* Free cores given `allowed` and `busy` (in cores): a core counts as taken
 * when it is busy more than a quarter of the time, so one busy loop takes
 * its core and scheduler noise takes none; at least 1. Pure. */
int tg_cpu_free(int allowed, double busy);

/* The default threads per device: free cores over `parties` (devices x
 * replicas), at least 1. Pure. */
int tg_threads_default(int free_cores, int parties);

#endif
