/* runtime/session_dist.h - a session as one instance of an MPI job
 * (session_dist.c), called by the session's set-up (session.c). */
#ifndef TG_RUNTIME_SESSION_DIST_H
#define TG_RUNTIME_SESSION_DIST_H

#include "runtime/session_state.h"

/* Before compiling: under a job of N instances, replicationFactor R becomes
 * this instance's R/N local replicas (fails naming R and N when N does not
 * divide R, and refuses what does not compose across instances), set in c
 * with the instances on this host, who share its cores. Sets the session's
 * global_replicas and replica_offset in every case. */
tg_status tg_session_dist_options(tg_session *s, tg_config *c);
/* Compile g (through the executable cache the config names). In a job, one
 * instance compiles and the others load its program: instance 0 compiles
 * (or loads it from the cache) and broadcasts the executable's bytes; an
 * instance whose graph or options differ compiles its own, and the check at
 * set-up refuses it naming the difference. */
tg_status tg_session_dist_compile(const tg_graph *g, const tg_config *c, tg_program **out,
                                  tg_cache_result *cache);
/* After allocating: every instance must have built the same program (fails
 * naming what differs); then the communicators and staging buffers of the
 * cross-instance all-reduce. */
tg_status tg_session_dist_setup(tg_session *s);
void tg_session_dist_free(tg_session *s);
/* The profile's record of this instance: instance, instances, host,
 * replica_offset and global_replicas (analyse shows a job's instances
 * together from them). */
tg_status tg_session_dist_profile_meta(tg_session *s);

/* Collective: every sharded value gathered whole over the instances, for
 * reading after this host step (tg_dist_sync). */
tg_status tg_session_dist_gather_state(tg_session *s);
#endif
