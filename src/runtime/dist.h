/* runtime/dist.h - what the engine and the session use of the MPI job
 * (dist.c): one communicator per device of a session, so that the device
 * threads' collectives never cross, and a check that every instance built
 * the same program. */
#ifndef TG_RUNTIME_DIST_H
#define TG_RUNTIME_DIST_H

#include "tilegraph/dist.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg_dist_group tg_dist_group;

/* Which algorithm the MPI library runs the gradients' all-gather with
 * (varying: MPI_Iallgatherv, the buckets'; else MPI_Iallgather), as a
 * sentence for the profile (dist.c says how it is chosen). */
const char *tg_dist_allgather_algorithm(bool varying);
/* Instances of the job on this host (1 outside a job): they share its cores. */
int tg_dist_host_instances(void);
/* Bytes at the end of each instance's pack in a gradient exchange: when
 * the instance sent its last gradients (allreduce.c), so that a waiting
 * instance can tell waiting for a slower one from the transfer. */
#define TG_DIST_STAMP_BYTES sizeof(double)
/* A time of this instance's clock (tg_clock_seconds) on instance 0's, so
 * that instances compare when things happened (exactly on one host; across
 * hosts to within the start barrier's skew). */
double tg_dist_job_time(double local);

/* A communicator per device (MPI_Comm_dup: every instance creates its
 * sessions in the same order). NULL *out outside a job. */
tg_status tg_dist_group_create(int n_devices, tg_dist_group **out);
void tg_dist_group_destroy(tg_dist_group *g);

/* Every instance's `bytes` from `send` into recv ([instance][bytes]), over
 * device `device`'s communicator. Waits by polling so that a run aborted on
 * this instance (*abort set) stops waiting: returns false then, and the
 * caller's failure ends the job (tg_dist_abort). */
bool tg_dist_group_allgather(tg_dist_group *g, int device, const void *send, void *recv,
                             size_t bytes, const bool *abort);

/* Parts of one exchange in flight at once (gradient buckets, allreduce.c):
 * room for `n_parts` non-blocking gathers on device `device`'s
 * communicator. Each part is `bytes` at `offset` of every instance's
 * `pack`-byte block: instance i's into recv + i * pack + offset, so that the
 * parts together fill recv as one tg_dist_group_allgather of the whole pack
 * would. This instance's part is sent from its own block of recv (written
 * there before the start; no send buffer, no copy). Every instance starts the parts in the same
 * order (MPI's rule for collectives on one communicator); all calls of one device come from its
 * thread. */
tg_status tg_dist_group_reserve(tg_dist_group *g, int device, int n_parts);
void tg_dist_group_start(tg_dist_group *g, int device, int part, void *recv, size_t offset,
                         size_t bytes, size_t pack);
/* Whether the part has arrived; a test also moves the transfers of the
 * parts still in flight along (MPI progresses only inside its calls). */
bool tg_dist_group_test(tg_dist_group *g, int device, int part);
/* Wait for the part as tg_dist_group_allgather waits: false if the run was
 * aborted on this instance. */
bool tg_dist_group_wait(tg_dist_group *g, int device, int part, const bool *abort);

/* Compare n named hashes over the instances: fails (TG_ERR_CONFIG) naming
 * the first that differs and the instances that disagree, then `advice`. */
tg_status tg_dist_agree(const char *const *names, const uint64_t *hashes, int n,
                        const char *advice);

/* Every instance's `bytes` from send into recv ([instance][bytes]), over
 * the job's communicator: from the session's thread, between host steps. */
tg_status tg_dist_allgather(const void *send, void *recv, size_t bytes);

/* Instance 0's bytes to every instance. On instance 0, *data and *len are
 * what it sends (*data NULL: it has nothing to send, say its compile
 * failed); on the others they become a copy (the caller's, tg_free) or NULL
 * and 0. Waits with sleeps, leaving the host's cores to the instance that
 * works. A no-op outside a job. */
tg_status tg_dist_broadcast(void **data, size_t *len);

/* Count a training run of a session in the job (before its gradient
 * exchange in group g): the instances' waits compare these counts
 * (dist_watch.c). */
void tg_dist_note_run(tg_dist_group *g);
/* Why this instance's waits were given up (another instance waits where
 * this one never gets, or has left), or `otherwise` if they were not. */
const char *tg_dist_stuck_reason(const char *otherwise);

/* FNV-1a over bytes, continuing from h (start with TG_DIST_HASH_INIT). */
#define TG_DIST_HASH_INIT 1469598103934665603ull
uint64_t tg_dist_hash(uint64_t h, const void *data, size_t bytes);

#endif
