/* core/pool.c - parallel-for thread pool (spin, then sleep on a condvar).
 *
 * Protocol: the caller publishes (fn, ctx, n), sets `pending` to the number of
 * workers and bumps `generation` under the mutex. A worker that sees a new
 * generation runs its range and decrements `pending`; the one that reaches
 * zero signals `done`. The mutex around the generation bump and around the
 * final signal is what rules out lost wake-ups for sleeping threads.
 */
#include "core/pool.h"

#include "core/alloc.h"
#include "core/error.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define TG_POOL_SPIN 20000

typedef struct {
    struct tg_pool *pool;
    int index;
} worker_arg;

struct tg_pool {
    int n_threads;
    pthread_t *threads;
    worker_arg *args; /* owned by the pool, so a starting worker frees nothing */
    pthread_mutex_t mutex;
    pthread_cond_t wake, done;
    atomic_uint generation;
    atomic_int pending;
    atomic_int stop;
    tg_pool_fn fn;
    void *ctx;
    int64_t n;
};

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void run_range(tg_pool *p, int t)
{
    int64_t begin = p->n * t / p->n_threads, end = p->n * (t + 1) / p->n_threads;
    if (begin < end)
        p->fn(p->ctx, begin, end, t);
}

static void *worker_main(void *arg_)
{
    const worker_arg *arg = arg_;
    tg_pool *p = arg->pool;
    int index = arg->index;
    unsigned seen = 0;
    for (;;) {
        for (int i = 0;
             i < TG_POOL_SPIN && atomic_load(&p->generation) == seen && !atomic_load(&p->stop); i++)
            cpu_relax();
        if (atomic_load(&p->generation) == seen && !atomic_load(&p->stop)) {
            pthread_mutex_lock(&p->mutex);
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->mutex);
            pthread_mutex_unlock(&p->mutex);
        }
        if (atomic_load(&p->stop))
            break;
        seen = atomic_load(&p->generation);
        run_range(p, index);
        if (atomic_fetch_sub(&p->pending, 1) == 1) {
            pthread_mutex_lock(&p->mutex);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mutex);
        }
    }
    return NULL;
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
    pthread_cond_init(&p->done, NULL);
    if (n_threads == 1)
        return p;
    p->threads = tg_calloc((size_t)n_threads, sizeof *p->threads);
    p->args = tg_calloc((size_t)n_threads, sizeof *p->args);
    if (!p->threads || !p->args)
        goto fail;
    for (int t = 1; t < n_threads; t++) {
        p->args[t] = (worker_arg){p, t};
        if (pthread_create(&p->threads[t], NULL, worker_main, &p->args[t]) != 0)
            goto fail_started;
        continue;
    fail_started:
        p->n_threads = t; /* only threads 1..t-1 exist */
        tg_pool_destroy(p);
        tg_error(TG_ERR_NOMEM, "thread pool: cannot start thread %d of %d", t, n_threads);
        return NULL;
    }
    return p;
fail:
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
    pthread_cond_destroy(&p->done);
    tg_free(p);
}

int tg_pool_threads(const tg_pool *p)
{
    return p ? p->n_threads : 1;
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
    atomic_store(&p->pending, p->n_threads - 1);
    pthread_mutex_lock(&p->mutex);
    atomic_fetch_add(&p->generation, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mutex);
    run_range(p, 0);
    for (int i = 0; i < TG_POOL_SPIN && atomic_load(&p->pending) > 0; i++)
        cpu_relax();
    if (atomic_load(&p->pending) > 0) {
        pthread_mutex_lock(&p->mutex);
        while (atomic_load(&p->pending) > 0)
            pthread_cond_wait(&p->done, &p->mutex);
        pthread_mutex_unlock(&p->mutex);
    }
}

int tg_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
