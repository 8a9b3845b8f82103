/* runtime/run_control.h - the session's part for one run's coordination
 * (run_control.c): the lock its threads share, the condition they sleep on
 * and the abort flag with the first failure. Device threads, the exchange,
 * host-stream prefetch and the collectives wait through it; the engine
 * clears it when a run starts and reads the failure when it ends. */
#ifndef TG_RUNTIME_RUN_CONTROL_H
#define TG_RUNTIME_RUN_CONTROL_H

#include "core/error.h"

#include <pthread.h>
#include <stdbool.h>

typedef struct tg_run_control tg_run_control;

tg_status tg_run_control_create(tg_run_control **out);
void tg_run_control_free(tg_run_control *r);

/* A run's start: not aborted, no failure. */
void tg_run_begin(tg_run_control *r);
/* Abort the run with status st: every waiter wakes up. The first failure's
 * message is the one reported. */
void tg_run_fail(tg_run_control *r, tg_status st, const char *msg);
/* Whether the run was aborted; read atomically, without the lock. */
bool tg_run_aborted(const tg_run_control *r);
/* The flag itself, for waits that poll it outside the session (MPI's,
 * runtime/dist.h). */
const bool *tg_run_abort_flag(const tg_run_control *r);
/* After the run: TG_OK, or the first failure (set as the error message). */
tg_status tg_run_result(const tg_run_control *r);

/* The run's lock, and sleeping on a condition under it: cv, or the run's
 * own `changed` when NULL. Broadcast wakes every sleeper on `changed`
 * (the lock held). */
void tg_run_lock(tg_run_control *r);
void tg_run_unlock(tg_run_control *r);
void tg_run_wait(tg_run_control *r, pthread_cond_t *cv);
void tg_run_broadcast(tg_run_control *r);

#endif
