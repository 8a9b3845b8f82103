/* core/pool.h - a fixed group of threads that runs parallel loops.
 *
 * A pool of T threads is T-1 workers plus the caller: tg_pool_for splits
 * [0, n) into T contiguous parts and returns when all are done. Each part
 * runs exactly once, with its part index (0..T-1) passed to fn, so kernels
 * may keep per-part scratch and partial sums indexed by it (results do not
 * depend on which thread ran which part). Parts are claimed, not assigned:
 * the caller takes parts too, so when a worker is off the CPU (another
 * process wants the core) the caller runs that worker's part instead of
 * waiting a time slice for it. Waiting threads spin within an adaptive
 * budget, yield, then sleep (core/wait.h). One caller at a time.
 */
#ifndef TG_CORE_POOL_H
#define TG_CORE_POOL_H

#include "core/cpus.h"

#include <stdint.h>

typedef struct tg_pool tg_pool;

/* fn(ctx, begin, end, part) with part in [0, T); no two calls with the same
 * part run at once. */
typedef void (*tg_pool_fn)(void *ctx, int64_t begin, int64_t end, int part);

/* NULL if threads cannot be started (the message says why). */
tg_pool *tg_pool_create(int n_threads);
void tg_pool_destroy(tg_pool *p);
int tg_pool_threads(const tg_pool *p);

/* The most a waiting thread of this pool spins (pause iterations, clamped
 * to core/wait.h's range): TG_SPIN_MIN when the pool's threads outnumber the
 * free cores. Call between loops. */
void tg_pool_set_spin_ceiling(tg_pool *p, int ceiling);

/* The next work of this device runs on other threads (oneDNN's OpenMP
 * team): workers waiting for a loop stop spinning and sleep now, so they
 * leave the cores to that team; the next tg_pool_for wakes them. */
void tg_pool_rest(tg_pool *p);

/* Run fn over [0, n). With a NULL pool, runs everything on the caller. */
void tg_pool_for(tg_pool *p, int64_t n, tg_pool_fn fn, void *ctx);

#endif
