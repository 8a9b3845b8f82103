/* runtime/dist_watch.h - instances that wait for each other in different
 * collectives, found instead of waited for (dist_watch.c; issue 46, row 2).
 * Internal to dist.c: the functions take MPI's types. */
#ifndef TG_RUNTIME_DIST_WATCH_H
#define TG_RUNTIME_DIST_WATCH_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

/* What a wait waits for: the gradient exchange of the instance's n-th
 * training run, or its n-th collective over the whole job (a sum, a check,
 * a broadcast). An instance that has left waits for nothing. */
typedef enum { TG_WAIT_NONE, TG_WAIT_RUN, TG_WAIT_WORLD, TG_WAIT_LEFT } tg_wait_kind;

/* At the job's start (collective: duplicates the job's communicator). */
void tg_dist_watch_init(MPI_Comm world, int rank, int size);
/* At its end, before MPI_Finalize: tells the others this instance has left
 * and waits until each of them has left too (one that waits for this one
 * in a collective sees it and fails, which ends the job). */
void tg_dist_watch_end(void);

/* Count a training run (before its gradient exchange) / a collective over
 * the job (before starting it); the latter returns its number. */
void tg_dist_watch_note_run(void);
int64_t tg_dist_watch_note_world(void);
int64_t tg_dist_watch_runs(void);

/* Between tests of a wait that has lasted a while (this thread waits for
 * `kind` number `n`): tells the others once, reads what they told, and
 * whether some instance waits where this one never gets, or has left,
 * while this one waits where it never gets: then the reason is set and
 * true. `*told` starts false and is kept for tg_dist_watch_done. */
bool tg_dist_watch_stuck(tg_wait_kind kind, int64_t n, bool *told);
/* The wait ended: the others are told if they were told of it. */
void tg_dist_watch_done(tg_wait_kind kind, int64_t n, bool told);
/* The sentence naming the instances and where each waits; "" if none. */
const char *tg_dist_watch_reason(void);

#endif
