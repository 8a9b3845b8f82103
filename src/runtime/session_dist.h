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
/* After allocating: every instance must have built the same program (fails
 * naming what differs); then the communicators and staging buffers of the
 * cross-instance all-reduce. */
tg_status tg_session_dist_setup(tg_session *s);
void tg_session_dist_free(tg_session *s);

#endif
