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
 * a broadcast). An instance that has left waits for nothing; one that has
 * closed a training model (TG_WAIT_CLOSED: detached, freed) never again
 * exchanges that model's gradients. */
typedef enum {
    TG_WAIT_NONE,
    TG_WAIT_RUN,
    TG_WAIT_WORLD,
    TG_WAIT_LEFT,
    TG_WAIT_CLOSED
} tg_wait_kind;

/* Which collective over the job a TG_WAIT_WORLD wait is, and the bytes each
 * instance gives it: instances at the same number in different collectives
 * (one gathers, another sums) or with other sizes never meet either. A
 * TG_WAIT_RUN wait is in the gradient exchange of one training model: its
 * number among the job's (`group`, from 1, in the order the instances
 * create them) and that model's run (`run`, from 1). */
typedef enum { TG_COLL_NONE, TG_COLL_SUM, TG_COLL_GATHER, TG_COLL_BROADCAST } tg_coll_op;
typedef struct tg_coll {
    tg_coll_op op;
    int64_t bytes;
    int64_t group, run;
} tg_coll;

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
 * `kind` number `n`, a collective `what` for TG_WAIT_WORLD): tells the
 * others once, reads what they told, and whether some instance waits where
 * this one never gets, or has left, while this one waits where it never
 * gets, or waits at the same number in another collective: then the reason
 * is set and true. `*told` starts false and is kept for tg_dist_watch_done. */
bool tg_dist_watch_stuck(tg_wait_kind kind, int64_t n, tg_coll what, bool *told);
/* The wait ended: the others are told if they were told of it. */
void tg_dist_watch_done(tg_wait_kind kind, int64_t n, bool told);
/* Training model `group` is closed after `group_runs` runs of it: the others are
 * told, and one that waits in its gradient exchange fails, naming this
 * instance, instead of waiting until this one ends. */
void tg_dist_watch_closed(int64_t group, int64_t group_runs);
/* The watch's own communicator (a duplicate of the job's), for the check
 * that instances call the same collective (dist.c); MPI_COMM_NULL outside
 * a job. */
MPI_Comm tg_dist_watch_comm(void);
/* "a gather of 24 bytes from each" into buf. */
const char *tg_dist_watch_coll_text(char *buf, size_t cap, tg_coll what);

/* The sentence naming the instances and where each waits; "" if none. */
const char *tg_dist_watch_reason(void);

#endif
