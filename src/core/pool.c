/* core/pool.c - parallel-for thread pool: parts claimed from one atomic
 * word, waits that spin within a budget and then sleep on condvars.
 *
 * Protocol. `job` packs (generation << 32 | parts not yet claimed). The
 * caller writes fn, ctx, n and parts, zeroes `done`, then stores `job`
 * (release). Anyone (workers and the caller) claims a part by decrementing
 * the low half with a CAS (acquire), so what it then reads of fn/ctx/n is
 * the job it claimed from; the caller rewrites them only after `done`
 * reached `parts`, i.e. after every claimed part finished. A worker reads
 * `parts` into a local before its increment of `done`, for the same reason.
 *
 * Sleeping. A worker about to sleep bumps `sleepers` and re-checks `job`
 * under the mutex; the caller stores `job` and then reads `sleepers`
 * (both sequentially consistent), so either the worker sees the job or the
 * caller sees the sleeper and broadcasts under the mutex: no lost wake-up.
 * The caller's own sleep on `done` mirrors this with `caller_sleeping`.
 */
#include "core/pool.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/wait.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

typedef struct {
    struct tg_pool *pool;
    int index;
    tg_spin spin; /* this worker's wait for work */
} worker_arg;

struct tg_pool {
    int n_threads;
    pthread_t *threads;
    worker_arg *args; /* owned by the pool, so a starting worker frees nothing */
    pthread_mutex_t mutex;
    pthread_cond_t wake, finished;
    _Atomic uint64_t job;
    atomic_int done;
    atomic_int sleepers;
    atomic_int caller_sleeping;
    atomic_int stop;
    atomic_int resting;  /* tg_pool_rest: waiting workers sleep at once */
    tg_spin caller_spin; /* the caller's wait for parts claimed by workers */
    unsigned generation;
    tg_pool_fn fn;
    void *ctx;
    int64_t n;
    int parts;
};

static uint32_t unclaimed(uint64_t job)
{
    return (uint32_t)(job & 0xffffffffu);
}

/* The next part of the current job, or -1 when all are claimed. */
static int claim(tg_pool *p)
{
    uint64_t v = atomic_load_explicit(&p->job, memory_order_acquire);
    while (unclaimed(v))
        if (atomic_compare_exchange_weak_explicit(&p->job, &v, v - 1, memory_order_acq_rel,
                                                  memory_order_acquire))
            return p->parts - (int)unclaimed(v);
    return -1;
}

static void run_part(tg_pool *p, int part)
{
    int parts = p->parts;
    int64_t begin = p->n * part / parts, end = p->n * (part + 1) / parts;
    if (begin < end)
        p->fn(p->ctx, begin, end, part);
    if (atomic_fetch_add(&p->done, 1) + 1 == parts && atomic_load(&p->caller_sleeping)) {
        pthread_mutex_lock(&p->mutex);
        pthread_cond_signal(&p->finished);
        pthread_mutex_unlock(&p->mutex);
    }
}

/* Sequentially consistent loads in both predicates: with the seq_cst
 * updates of `sleepers` and `caller_sleeping` they make the Dekker pairs
 * described at the top of the file. */
static bool work_or_stop(void *arg)
{
    tg_pool *p = arg;
    return unclaimed(atomic_load(&p->job)) || atomic_load(&p->stop);
}

/* The spin's predicate: also ends the spin when the pool rests. */
static bool work_stop_or_rest(void *arg)
{
    tg_pool *p = arg;
    return work_or_stop(p) || atomic_load_explicit(&p->resting, memory_order_relaxed);
}

static void wait_for_work(tg_pool *p, tg_spin *spin)
{
    if (tg_spin_wait(spin, work_stop_or_rest, p) && work_or_stop(p))
        return;
    pthread_mutex_lock(&p->mutex);
    atomic_fetch_add(&p->sleepers, 1);
    while (!work_or_stop(p))
        pthread_cond_wait(&p->wake, &p->mutex);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->mutex);
}

static void *worker_main(void *arg_)
{
    worker_arg *arg = arg_;
    tg_pool *p = arg->pool;
    for (;;) {
        wait_for_work(p, &arg->spin);
        if (atomic_load(&p->stop))
            return NULL;
        int part;
        while ((part = claim(p)) >= 0)
            run_part(p, part);
    }
}

tg_pool *tg_pool_create(int n_threads)
{
    if (n_threads < 1)
        n_threads = 1;
    tg_pool *p = tg_calloc(1, sizeof *p);
    if (!p) {
        tg_error(TG_ERR_NOMEM, "thread pool: out of memory");
        return NULL;
    }
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mutex, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->finished, NULL);
    tg_spin_init(&p->caller_spin, TG_SPIN_MAX);
    if (n_threads == 1)
        return p;
    p->threads = tg_calloc((size_t)n_threads, sizeof *p->threads);
    p->args = tg_calloc((size_t)n_threads, sizeof *p->args);
    if (!p->threads || !p->args)
        goto fail;
    for (int t = 1; t < n_threads; t++) {
        p->args[t].pool = p;
        p->args[t].index = t;
        tg_spin_init(&p->args[t].spin, TG_SPIN_MAX);
        if (pthread_create(&p->threads[t], NULL, worker_main, &p->args[t]) != 0) {
            p->n_threads = t; /* only threads 1..t-1 exist */
            tg_pool_destroy(p);
            tg_error(TG_ERR_NOMEM, "thread pool: cannot start thread %d of %d", t, n_threads);
            return NULL;
        }
    }
    return p;
fail:
    p->n_threads = 1; /* no worker was started: none to join */
    tg_pool_destroy(p);
    tg_error(TG_ERR_NOMEM, "thread pool: out of memory");
    return NULL;
}

void tg_pool_destroy(tg_pool *p)
{
    if (!p)
        return;
    if (p->threads) {
        pthread_mutex_lock(&p->mutex);
        atomic_store(&p->stop, 1);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mutex);
        for (int t = 1; t < p->n_threads; t++)
            pthread_join(p->threads[t], NULL);
        tg_free(p->threads);
    }
    tg_free(p->args);
    pthread_mutex_destroy(&p->mutex);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->finished);
    tg_free(p);
}

int tg_pool_threads(const tg_pool *p)
{
    return p ? p->n_threads : 1;
}

void tg_pool_set_spin_ceiling(tg_pool *p, int ceiling)
{
    if (!p)
        return;
    tg_spin_set_ceiling(&p->caller_spin, ceiling);
    for (int t = 1; p->args && t < p->n_threads; t++)
        tg_spin_set_ceiling(&p->args[t].spin, ceiling);
}

void tg_pool_rest(tg_pool *p)
{
    if (p && p->n_threads > 1)
        atomic_store_explicit(&p->resting, 1, memory_order_relaxed);
}

static bool all_done(void *arg)
{
    tg_pool *p = arg;
    return atomic_load(&p->done) == p->parts;
}

/* Wait for the parts workers claimed and are still running. */
static void wait_done(tg_pool *p)
{
    if (tg_spin_wait(&p->caller_spin, all_done, p))
        return;
    pthread_mutex_lock(&p->mutex);
    atomic_store(&p->caller_sleeping, 1);
    while (!all_done(p))
        pthread_cond_wait(&p->finished, &p->mutex);
    atomic_store(&p->caller_sleeping, 0);
    pthread_mutex_unlock(&p->mutex);
}

void tg_pool_for(tg_pool *p, int64_t n, tg_pool_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (!p || p->n_threads == 1 || n == 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->parts = p->n_threads;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    p->generation++;
    atomic_store_explicit(&p->resting, 0, memory_order_relaxed);
    atomic_store(&p->job, (uint64_t)p->generation << 32 | (uint32_t)p->parts);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mutex);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mutex);
    }
    int part;
    while ((part = claim(p)) >= 0)
        run_part(p, part);
    wait_done(p);
}
