/* tilegraph/dist.h - several instances of one training over MPI (PopDist's
 * role; docs/distributed.md).
 *
 * An instance is one process of a job started by mpirun (or `tilegraph run`,
 * which starts mpirun). Under mpirun -np N, a session created with
 * replicationFactor R runs R/N local replicas: instance i's local replica r
 * is the job's replica i*R/N + r, and the gradients of all R replicas are
 * reduced in replica order, so N instances train exactly as one process with
 * R replicas. Outside mpirun every call below describes a job of one
 * instance, and nothing changes.
 *
 *     tg_dist_init(&argc, &argv);     // MPI_Init only when under mpirun
 *     ... tg_session_create(g, opts, &s) with replicationFactor R ...
 *     if (tg_dist_instance() == 0) save the checkpoint;
 *     tg_dist_finalize();
 *
 * The instance state is the process's (MPI's own is): call these from the
 * thread that called tg_dist_init.
 */
#ifndef TILEGRAPH_DIST_H
#define TILEGRAPH_DIST_H

#include "tilegraph/export.h"

#include "tilegraph/session.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Join the job when this process was started by mpirun (its environment
 * says so: OMPI_COMM_WORLD_SIZE or PMI_SIZE); a no-op otherwise. Fails when
 * MPI cannot start or cannot give the thread support the engine needs. */
TG_API tg_status tg_dist_init(int *argc, char ***argv);
/* Leave the job (MPI_Finalize); a no-op when not joined. */
TG_API void tg_dist_finalize(void);
/* End every instance of the job now with this exit code (MPI_Abort): an
 * instance that failed calls it after printing why, so no other instance
 * waits for it. Outside a job it returns without doing anything. */
TG_API void tg_dist_abort(int code);

/* Whether this process is one instance of several. */
TG_API bool tg_dist_active(void);
/* This instance's index (0 .. count-1) and the number of instances; 0 and 1
 * outside a job. */
TG_API int tg_dist_instance(void);
TG_API int tg_dist_instances(void);

/* Element-wise sum of `n` counters over all instances, in place (the
 * evaluation's correct and scored counts). TG_OK without doing anything
 * outside a job. */
TG_API tg_status tg_dist_sum_i64(int64_t *values, int n);
/* The same for floating-point values (a host step's loss sums, and with
 * them whether any instance was asked to stop). */
TG_API tg_status tg_dist_sum_f64(double *values, int n);
/* The same sum without waiting for it (MPI_Iallreduce): `values` must stay
 * untouched until tg_dist_sum_f64_finish, which waits and leaves the sums
 * there. One at a time. A host step's sums then travel while the next host
 * step runs, which meets the other instances in its gradient exchange
 * anyway, instead of meeting them once more after each step. Both TG_OK
 * without doing anything outside a job. */
TG_API tg_status tg_dist_sum_f64_start(double *values, int n);
TG_API tg_status tg_dist_sum_f64_finish(void);

/* Whether every instance has the same n named values (what shapes a
 * training loop: epochs, step limits, the data set's size): all instances
 * call it; fails (TG_ERR_CONFIG) naming the first value that differs with
 * both instances' numbers, then `advice`. Instances whose loops differ
 * would otherwise wait on each other forever. TG_OK outside a job. */
TG_API tg_status tg_dist_agree_values(const char *const *names, const int64_t *values, int n,
                                      const char *advice);

/* The same for n named texts (option values, names of a model or a data
 * set): the message shows both instances' texts of the first that differs. */
TG_API tg_status tg_dist_agree_texts(const char *const *names, const char *const *texts, int n,
                                     const char *advice);

/* Whether every instance holds the same parameters (a checksum of them
 * compared over the instances): fails naming the instances that differ.
 * Batch norm's running statistics are each replica's own and not compared. */
TG_API tg_status tg_dist_check_weights(const tg_session *s);
/* Before one instance reads the whole training state (a checkpoint): every
 * instance calls this. It checks the weights as tg_dist_check_weights does
 * and, under replicated tensor sharding across instances, gathers the
 * optimizer state's shards so that tg_session_read and checkpoints see it
 * whole (until the next host step). */
TG_API tg_status tg_dist_sync(tg_session *s);

/* Replicas of the whole job (R), and the job's index of this instance's
 * first local replica (instance * R / N); tg_session_replicas gives the
 * local ones. */
TG_API int tg_session_global_replicas(const tg_session *s);
TG_API int tg_session_replica_offset(const tg_session *s);

/* Where one device's gradient exchange with the other instances went, in
 * seconds of that device's thread (of local replica 0, which runs the
 * exchange), added up since the session was created. A share of a host
 * step is the cost of the exchange itself, measured inside the run: the
 * same on a busy host as on an idle one, unlike a comparison of two runs. */
typedef struct tg_exchange_times {
    int64_t updates; /* updates whose gradients were exchanged */
    /* in MPI calls while the backward still ran: starting the gradient
     * buckets and testing them (a shared-memory transfer is copied there) */
    double during_backward;
    /* after the backward, until every instance's gradients had arrived:
     * packing them, the transfer the backward did not hide, and waiting for
     * the slower instances */
    double after_backward;
    /* the part of `after_backward` before the slowest other instance had
     * sent its last gradients: the instances' imbalance, not the transfer */
    double imbalance;
    /* adding up the instances' copies in replica order (the mean) */
    double summing;
} tg_exchange_times;
/* Device `device`'s exchange times; all 0 outside an MPI job, for an
 * inference session and for a device out of range. */
TG_API tg_exchange_times tg_session_exchange_times(const tg_session *s, int device);

#ifdef __cplusplus
}
#endif
#endif
