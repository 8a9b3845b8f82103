/* core/pool.h - a fixed group of threads that runs parallel loops.
 *
 * A pool of T threads is T-1 workers plus the caller: tg_pool_for splits
 * [0, n) into T contiguous ranges, runs range 0 on the calling thread and the
 * others on the workers, and returns when all are done. Workers spin briefly
 * before sleeping, because an engine step dispatches many short loops and a
 * sleep/wake per loop would cost more than the loop. One caller at a time.
 */
#ifndef TG_CORE_POOL_H
#define TG_CORE_POOL_H

#include <stdint.h>

typedef struct tg_pool tg_pool;

/* fn(ctx, begin, end, thread_index) with thread_index in [0, T). */
typedef void (*tg_pool_fn)(void *ctx, int64_t begin, int64_t end, int thread_index);

/* NULL if threads cannot be started (the message says why). */
tg_pool *tg_pool_create(int n_threads);
void tg_pool_destroy(tg_pool *p);
int tg_pool_threads(const tg_pool *p);

/* Run fn over [0, n). With a NULL pool, runs everything on the caller. */
void tg_pool_for(tg_pool *p, int64_t n, tg_pool_fn fn, void *ctx);

/* Number of logical CPUs this process may run on. */
int tg_cpu_count(void);

#endif
