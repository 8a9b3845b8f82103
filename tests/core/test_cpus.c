/* tests/core/test_cpus.c - the default thread rule (pure functions of the
 * counts) and the machine probe's invariants. */
#include "tg_test.h"

#include "core/cpus.h"

#include <unistd.h>

static void test_free_cores(void)
{
    TG_CHECK(tg_cpu_free(2, 0.0) == 2);   /* idle */
    TG_CHECK(tg_cpu_free(2, 1.0) == 1);   /* one busy loop */
    TG_CHECK(tg_cpu_free(2, 0.3) == 1);   /* busy over a quarter of the time: taken */
    TG_CHECK(tg_cpu_free(2, 0.2) == 2);   /* noise is not a process */
    TG_CHECK(tg_cpu_free(2, 2.0) == 1);   /* all busy: still one */
    TG_CHECK(tg_cpu_free(8, 2.9) == 5);   /* 3 taken */
    TG_CHECK(tg_cpu_free(16, 40.0) == 1); /* busier than the machine */
    TG_CHECK(tg_cpu_free(0, 0.0) == 1);   /* nonsense in: one */
    TG_CHECK(tg_cpu_free(4, -1.0) == 4);  /* unknown load counts as none */
    TG_CHECK(tg_cpu_free(4, 0.0 / 0.0) == 4);
}

static void test_default_threads(void)
{
    TG_CHECK(tg_threads_default(2, 1) == 2); /* idle 2 cores, one device */
    TG_CHECK(tg_threads_default(1, 1) == 1); /* a hog on one of 2 cores */
    TG_CHECK(tg_threads_default(2, 2) == 1); /* two devices share two cores */
    TG_CHECK(tg_threads_default(2, 4) == 1); /* oversubscribed: one each, warned */
    TG_CHECK(tg_threads_default(16, 3) == 5);
    TG_CHECK(tg_threads_default(8, 0) == 8);
    /* never more threads than free cores while there are enough cores */
    for (int free_cores = 1; free_cores <= 64; free_cores++)
        for (int parties = 1; parties <= free_cores; parties++)
            TG_CHECK(tg_threads_default(free_cores, parties) * parties <= free_cores);
}

static void test_probe(void)
{
    int n = tg_cpu_count();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    TG_CHECK(n >= 1 && (online <= 0 || n <= online));
    tg_cpu_load l = tg_cpu_load_sample(20);
    TG_CHECK(l.allowed == n);
    TG_CHECK(l.busy >= 0 && l.busy <= l.allowed + 0.01);
    TG_CHECK(l.free == tg_cpu_free(l.allowed, l.busy));
    TG_CHECK(l.free >= 1 && l.free <= l.allowed);
#ifdef __linux__
    TG_CHECK(l.measured); /* /proc/stat is there on Linux */
#endif
    /* within a second the same sample comes back */
    tg_cpu_load a = tg_cpu_load_recent(20), b = tg_cpu_load_recent(20);
    TG_CHECK(a.allowed == b.allowed && a.busy == b.busy && a.free == b.free);
    TG_CHECK(a.free >= 1 && a.free <= a.allowed);
}

int main(void)
{
    TG_RUN(test_free_cores);
    TG_RUN(test_default_threads);
    TG_RUN(test_probe);
    return tg_test_finish();
}
