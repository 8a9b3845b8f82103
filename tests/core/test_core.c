/* tests/core/test_core.c - the allocator (counting, fault injection), arenas,
 * the thread pool, random numbers, status names and the option table.
 * TG_TEST_LABELS: threads quick */
#include "tg_test.h"

#include "core/alloc.h"
#include "core/arena.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/pool.h"
#include "core/rng.h"
#include "tilegraph/options.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static void test_allocator_counts_and_fails_on_request(void)
{
    int64_t before = tg_alloc_live_bytes();
    void *a = tg_malloc(1000), *b = tg_calloc(10, 100);
    TG_CHECK(a && b && ((uintptr_t)a % 64) == 0);
    TG_CHECK(tg_alloc_live_bytes() - before == 2000);
    a = tg_realloc(a, 3000);
    TG_CHECK(tg_alloc_live_bytes() - before == 4000);
    tg_free(a);
    tg_free(b);
    TG_CHECK(tg_alloc_live_bytes() == before);
    tg_alloc_fail_after(2);
    void *ok = tg_malloc(8), *fails = tg_malloc(8), *again = tg_malloc(8);
    TG_CHECK(ok && !fails && again);
    tg_free(ok);
    tg_free(again);
    TG_CHECK(tg_calloc(SIZE_MAX / 2, 4) == NULL); /* overflow, not a tiny block */
}

/* The huge-page hint reaches the kernel: a block advised, then touched, is
 * backed by huge pages (AnonHugePages of its mapping in /proc/self/smaps).
 * Only where transparent huge pages are in "madvise" mode, where nothing
 * else would back it so (Debian's default); elsewhere there is nothing to
 * tell apart. */
static long huge_kb_at(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    bool inside = false;
    long kb = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi; /* a mapping's first line: "lo-hi perms ..." */
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (inside && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
            break;
    }
    fclose(f);
    return kb;
}

static void test_huge_pages_advised(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char mode[128] = "";
    if (f) {
        if (!fgets(mode, sizeof mode, f))
            mode[0] = 0;
        fclose(f);
    }
    if (!strstr(mode, "[madvise]"))
        return; /* "always" backs everything, "never" nothing */
    size_t bytes = (size_t)16 << 20;
    char *p = tg_malloc_aligned(bytes);
    TG_CHECK(p != NULL);
    if (!p)
        return;
    tg_advise_huge_pages(p, bytes);
    memset(p, 1, bytes);
    long kb = huge_kb_at(p + bytes / 2);
    TG_CHECK(kb >= 2048);
    tg_advise_huge_pages(p + 1, 100); /* no whole huge page inside: nothing asked */
    tg_free(p);
}

static void test_arena(void)
{
    tg_arena *a = tg_arena_create(128);
    char *s = tg_arena_strdup(a, "layer1/conv");
    char *p = tg_arena_printf(a, "%s/%d", s, 7);
    void *big = tg_arena_alloc(a, 10000); /* bigger than a block */
    TG_CHECK(strcmp(p, "layer1/conv/7") == 0 && big && ((uintptr_t)big % 16) == 0);
    TG_CHECK(((char *)big)[9999] == 0);
    TG_CHECK(tg_arena_used(a) >= 10000);
    tg_arena_destroy(a);
}

typedef struct {
    atomic_long sum;
    atomic_int seen[8];
} pool_ctx;

static void add_range(void *ctx_, int64_t begin, int64_t end, int t)
{
    pool_ctx *c = ctx_;
    long s = 0;
    for (int64_t i = begin; i < end; i++)
        s += (long)i;
    atomic_fetch_add(&c->sum, s);
    atomic_fetch_add(&c->seen[t], 1);
}

static void test_pool_covers_every_index_once(void)
{
    for (int threads = 1; threads <= 4; threads++) {
        tg_pool *p = tg_pool_create(threads);
        TG_CHECK(tg_pool_threads(p) == threads);
        for (int rep = 0; rep < 200; rep++) {
            pool_ctx c = {0};
            int64_t n = 1 + rep * 37;
            tg_pool_for(p, n, add_range, &c);
            TG_CHECK(atomic_load(&c.sum) == (long)(n * (n - 1) / 2));
        }
        pool_ctx c = {0};
        tg_pool_for(p, 1000, add_range, &c);
        for (int t = 0; t < threads; t++)
            TG_CHECK(atomic_load(&c.seen[t]) == 1);
        tg_pool_destroy(p);
    }
    pool_ctx c = {0};
    tg_pool_for(NULL, 10, add_range, &c);
    TG_CHECK(atomic_load(&c.sum) == 45);
}

static void test_rng(void)
{
    tg_rng a, b;
    tg_rng_seed(&a, 42);
    tg_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++)
        TG_CHECK(tg_rng_next(&a) == tg_rng_next(&b)); /* same seed, same stream */
    double mean = 0, var = 0;
    for (int i = 0; i < 100000; i++) {
        double u = tg_rng_uniform(&a);
        TG_CHECK(u >= 0 && u < 1);
        mean += u;
        double z = tg_rng_normal(&b);
        var += z * z;
    }
    TG_CHECK_NEAR(mean / 100000, 0.5, 0.01);
    TG_CHECK_NEAR(var / 100000, 1.0, 0.03);
    int counts[3] = {0};
    for (int i = 0; i < 30000; i++)
        counts[tg_rng_below(&a, 3)]++;
    for (int k = 0; k < 3; k++)
        TG_CHECK(counts[k] > 9500 && counts[k] < 10500);
    TG_CHECK(tg_hash_uniform(1, 2) == tg_hash_uniform(1, 2));
    TG_CHECK(tg_hash_uniform(1, 2) != tg_hash_uniform(1, 3));
}

static void test_status_and_messages(void)
{
    TG_CHECK(strcmp(tg_status_name(TG_ERR_SHAPE), "TG_ERR_SHAPE") == 0);
    TG_CHECK(strcmp(tg_status_name((tg_status)1234), "TG_UNKNOWN") == 0);
    TG_CHECK(tg_error(TG_ERR_IO, "cannot open '%s'", "x.bin") == TG_ERR_IO);
    TG_CHECK(strcmp(tg_error_message(), "cannot open 'x.bin'") == 0);
    tg_error_prefix(TG_ERR_IO, "loading %s", "model");
    TG_CHECK(strcmp(tg_error_message(), "loading model: cannot open 'x.bin'") == 0);
    tg_error_clear();
    TG_CHECK(tg_error_message()[0] == '\0');
}

/* The public tg_error_set records a caller's message the same way. */
static void test_error_set_for_callers(void)
{
    TG_CHECK(tg_error_set(TG_ERR_CONFIG, "'%s' is over %d MB", "o.json", 16) == TG_ERR_CONFIG);
    TG_CHECK(strcmp(tg_error_message(), "'o.json' is over 16 MB") == 0);
    TG_CHECK(tg_error_set(TG_ERR_NOMEM, NULL) == TG_ERR_NOMEM);
    TG_CHECK(strcmp(tg_error_message(), "out of memory") == 0);
    tg_error_clear();
}

/* The thread's CPU clock (what the cost model times one-thread kernels on)
 * does not count time off the CPU: 50 ms asleep add (next to) nothing,
 * while the monotonic clock counts them all; work does count. */
static void test_thread_clock_leaves_out_time_off_the_cpu(void)
{
    double c0 = tg_clock_thread_seconds(), w0 = tg_clock_seconds();
    nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    double asleep = tg_clock_thread_seconds() - c0, wall = tg_clock_seconds() - w0;
    TG_CHECK(wall >= 0.049);
    TG_CHECK(asleep < 0.02);
    volatile double x = 0;
    double c1 = tg_clock_thread_seconds();
    for (int i = 0; i < 20 * 1000 * 1000; i++)
        x += 1e-9 * i;
    TG_CHECK(tg_clock_thread_seconds() > c1);
}

static void test_options(void)
{
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "replicationFactor", "4"));
    TG_CHECK(tg_options_get_int(o, "replicationFactor") == 4);
    TG_CHECK(tg_options_get_int(o, "deviceIterations") == 1); /* default */
    TG_CHECK(tg_options_set(o, "replicationFactor", "four") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "'replicationFactor'") != NULL);
    TG_CHECK(tg_options_set(o, "replicationFactor", "0") == TG_ERR_CONFIG);
    TG_CHECK(tg_options_set(o, "replicasFactor", "2") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "did you mean 'replicationFactor'?") != NULL);
    TG_CHECK(strstr(tg_error_message(), "replicationFactor") != NULL);
    TG_CHECK(tg_options_set(o, "debug.checkNaN", "maybe") == TG_ERR_CONFIG);
    /* a float option: NaN and infinities are out of every range */
    TG_CHECK_OK(tg_options_set(o, "lossScalingFactor", "128"));
    TG_CHECK(tg_options_get_float(o, "lossScalingFactor") == 128.0);
    TG_CHECK(tg_options_set(o, "lossScalingFactor", "nan") == TG_ERR_CONFIG);
    TG_CHECK(tg_options_set(o, "lossScalingFactor", "inf") == TG_ERR_CONFIG);
    TG_CHECK(tg_options_set(o, "availableMemoryProportion", "1.5") == TG_ERR_CONFIG);
    TG_CHECK(tg_options_set(o, "precision", "16.8") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "32.32|16.32|16.16") != NULL);
    TG_CHECK_OK(tg_options_set_json(o,
                                    "{\"deviceIterations\": 10, \"outputMode\": \"all\", "
                                    "\"debug.checkNaN\": false}",
                                    "opts.json"));
    TG_CHECK(tg_options_get_int(o, "deviceIterations") == 10);
    TG_CHECK(tg_options_get_int(o, "debug.checkNaN") == 0);
    TG_CHECK(tg_options_set_json(o, "{\"deviceIterations\": [1]}", "opts.json") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "opts.json:1:") != NULL);
    TG_CHECK(tg_options_set_json(o, "[1, 2]", "opts.json") == TG_ERR_CONFIG);
    tg_options *c = tg_options_clone(o);
    TG_CHECK(tg_options_get_int(c, "replicationFactor") == 4);
    tg_options_destroy(c);
    tg_options_destroy(o);
    TG_CHECK(tg_options_get_int(NULL, "replicationFactor") == 1);
}

int main(void)
{
    TG_RUN(test_allocator_counts_and_fails_on_request);
    TG_RUN(test_huge_pages_advised);
    TG_RUN(test_arena);
    TG_RUN(test_pool_covers_every_index_once);
    TG_RUN(test_rng);
    TG_RUN(test_status_and_messages);
    TG_RUN(test_error_set_for_callers);
    TG_RUN(test_options);
    TG_RUN(test_thread_clock_leaves_out_time_off_the_cpu);
    return tg_test_finish();
}
