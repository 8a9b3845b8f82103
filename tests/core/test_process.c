/* tests/core/test_process.c - the process-wide kernel overrides: their
 * defaults, that each value set is the value read back (the oneDNN mode and
 * its forced flag travel together), and that a thread setting them while
 * others read is no data race (the ThreadSanitizer run) and never shows a
 * value that was not set.
 * TG_TEST_LABELS: threads */
#include "tg_test.h"

#include "core/process.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

static void test_defaults(void)
{
    int forced = -1;
    TG_CHECK(tg_process_conv_method() == 0);
    TG_CHECK(tg_process_simd_cap() == INT_MAX);
    TG_CHECK(tg_process_dnnl_mode(&forced) == 0 && forced == 0);
}

static void test_round_trip(void)
{
    int forced = -1;
    tg_process_set_conv_method(2);
    TG_CHECK(tg_process_conv_method() == 2);
    tg_process_set_simd_cap(1);
    TG_CHECK(tg_process_simd_cap() == 1);
    tg_process_set_dnnl_mode(2, 1);
    TG_CHECK(tg_process_dnnl_mode(&forced) == 2 && forced == 1);
    tg_process_set_dnnl_mode(1, 0);
    TG_CHECK(tg_process_dnnl_mode(&forced) == 1 && forced == 0);
    tg_process_set_conv_method(0);
    tg_process_set_simd_cap(INT_MAX);
    tg_process_set_dnnl_mode(0, 0);
}

static atomic_int stop;
static atomic_int bad_reads;

static void *reader(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        int forced, mode = tg_process_dnnl_mode(&forced);
        int cap = tg_process_simd_cap();
        /* the writer sets (mode 2, forced) or (mode 0, not forced) only */
        if ((mode == 2) != (forced == 1) || (cap != 1 && cap != INT_MAX))
            atomic_fetch_add(&bad_reads, 1);
    }
    return NULL;
}

static void test_set_while_read(void)
{
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        TG_CHECK(pthread_create(&t[i], NULL, reader, NULL) == 0);
    for (int i = 0; i < 20000; i++) {
        tg_process_set_dnnl_mode(i % 2 ? 2 : 0, i % 2);
        tg_process_set_simd_cap(i % 2 ? 1 : INT_MAX);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    TG_CHECK(atomic_load(&bad_reads) == 0);
    tg_process_set_dnnl_mode(0, 0);
    tg_process_set_simd_cap(INT_MAX);
}

int main(void)
{
    TG_RUN(test_defaults);
    TG_RUN(test_round_trip);
    TG_RUN(test_set_while_read);
    return tg_test_finish();
}
