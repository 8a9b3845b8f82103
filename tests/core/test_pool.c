/* tests/core/test_pool.c - the thread pool under more threads than cores:
 * every index covered once per loop, every part run once and never twice at
 * a time, parts are the same ranges whichever thread runs them, and the
 * pool stays correct with the spin budget at its floor (the setting for a
 * loaded machine). No timing is asserted.
 * TG_TEST_LABELS: threads */
#include "tg_test.h"

#include "core/pool.h"
#include "core/wait.h"

#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#define MAX_PARTS 16
#define MAX_N 4096

typedef struct {
    int64_t n;
    int parts;
    atomic_int hits[MAX_N];
    atomic_int running[MAX_PARTS]; /* 1 while a call for that part runs */
    atomic_int runs[MAX_PARTS];
    atomic_int overlaps;  /* a part entered while already running */
    atomic_int bad_range; /* a part got a range other than its own */
    int yield_every;      /* give the CPU away inside some parts */
} loop_ctx;

static void visit(void *ctx_, int64_t begin, int64_t end, int part)
{
    loop_ctx *c = ctx_;
    if (atomic_exchange(&c->running[part], 1))
        atomic_fetch_add(&c->overlaps, 1);
    if (begin != c->n * part / c->parts || end != c->n * (part + 1) / c->parts)
        atomic_fetch_add(&c->bad_range, 1);
    for (int64_t i = begin; i < end; i++)
        atomic_fetch_add_explicit(&c->hits[i], 1, memory_order_relaxed);
    if (c->yield_every && part % c->yield_every == 0)
        sched_yield(); /* a worker off the CPU while the others finish */
    atomic_fetch_add(&c->runs[part], 1);
    atomic_store(&c->running[part], 0);
}

/* `loops` parallel loops of varying length on `threads` threads; true if
 * every one covered each index exactly once and ran each part once. */
static bool loops_are_exact(tg_pool *p, int threads, int loops, int yield_every)
{
    static loop_ctx c;
    bool ok = true;
    for (int k = 0; k < loops && ok; k++) {
        memset(&c, 0, sizeof c);
        c.n = 2 + (k * 131) % (MAX_N - 1); /* n = 1 runs on the caller as part 0 */
        c.parts = threads;
        c.yield_every = yield_every;
        tg_pool_for(p, c.n, visit, &c);
        for (int64_t i = 0; i < c.n; i++)
            ok = ok && atomic_load(&c.hits[i]) == 1;
        for (int t = 0; t < threads; t++) /* empty parts (n < T) are not called */
            ok = ok && atomic_load(&c.runs[t]) == (c.n * (t + 1) / threads > c.n * t / threads);
        ok = ok && atomic_load(&c.overlaps) == 0 && atomic_load(&c.bad_range) == 0;
    }
    return ok;
}

static void test_eight_threads_many_loops(void)
{
    tg_pool *p = tg_pool_create(8);
    TG_CHECK(p && tg_pool_threads(p) == 8);
    TG_CHECK(loops_are_exact(p, 8, 3000, 0));
    TG_CHECK(loops_are_exact(p, 8, 300, 3)); /* some parts give their CPU away */
    tg_pool_destroy(p);
}

static void test_spin_floor_stays_correct(void)
{
    /* the loaded-machine setting: waits barely spin, so most of them sleep
     * on the condvars; a lost wake-up would hang this test */
    tg_pool *p = tg_pool_create(8);
    tg_pool_set_spin_ceiling(p, 0);
    TG_CHECK(loops_are_exact(p, 8, 2000, 2));
    tg_pool_set_spin_ceiling(p, TG_SPIN_MAX); /* and back, between loops */
    TG_CHECK(loops_are_exact(p, 8, 200, 0));
    tg_pool_destroy(p);
}

static void test_small_pools_and_no_pool(void)
{
    for (int threads = 1; threads <= 3; threads++) {
        tg_pool *p = tg_pool_create(threads);
        TG_CHECK(loops_are_exact(p, threads, 500, 0));
        tg_pool_destroy(p);
    }
    static loop_ctx c;
    memset(&c, 0, sizeof c);
    c.n = 10;
    c.parts = 1;
    tg_pool_for(NULL, c.n, visit, &c);
    TG_CHECK(atomic_load(&c.runs[0]) == 1 && atomic_load(&c.hits[9]) == 1);
    tg_pool_for(NULL, 0, visit, &c); /* nothing to do: fn not called */
    TG_CHECK(atomic_load(&c.runs[0]) == 1);
    tg_pool *p = tg_pool_create(4);
    memset(&c, 0, sizeof c);
    c.n = 1;
    c.parts = 1; /* one index: no point waking anyone */
    tg_pool_for(p, c.n, visit, &c);
    TG_CHECK(atomic_load(&c.runs[0]) == 1 && atomic_load(&c.bad_range) == 0);
    tg_pool_destroy(p);
}

static void test_create_and_destroy_repeatedly(void)
{
    /* workers may still be starting, spinning or asleep when destroyed */
    for (int k = 0; k < 50; k++) {
        tg_pool *p = tg_pool_create(1 + k % 8);
        if (k % 2)
            TG_CHECK(loops_are_exact(p, 1 + k % 8, 3, 0));
        tg_pool_destroy(p);
    }
}

int main(void)
{
    TG_RUN(test_eight_threads_many_loops);
    TG_RUN(test_spin_floor_stays_correct);
    TG_RUN(test_small_pools_and_no_pool);
    TG_RUN(test_create_and_destroy_repeatedly);
    return tg_test_finish();
}
