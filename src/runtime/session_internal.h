/* runtime/session_internal.h - what the runtime's other files (checkpoints,
 * the session's state) and the tests see of a session beyond its public
 * header. tools/ and python/ use tilegraph/session.h only. */
#ifndef TG_RUNTIME_SESSION_INTERNAL_H
#define TG_RUNTIME_SESSION_INTERNAL_H

#include "tilegraph/session.h"

#include "compile/program.h"

/* The bytes of tensor t in the session's arena (replica 0's), or NULL if
 * not stored. Under replicated tensor sharding they are replica 0's shard
 * only: tg_session_value_out gives the value whole. */
void *tg_session_data(const tg_session *s, const tg_tensor *t);
const tg_program *tg_session_program(const tg_session *s);
const tg_graph *tg_session_graph(const tg_session *s);
/* A persistent value (weights, state) as stored, all of it: out of the
 * session (gathered from the replicas' shards under replicated tensor
 * sharding) and into it (to every replica, or its shard). dst/src hold
 * numel x the storage type's size (tg_session_storage_dtype). */
tg_status tg_session_value_out(const tg_session *s, const tg_tensor *t, void *dst);
tg_status tg_session_value_in(tg_session *s, const tg_tensor *t, const void *src);
/* The same for another replica (NULL past the last). */
void *tg_session_replica_data(const tg_session *s, int replica, const tg_tensor *t);
/* Wall time of the last run, and the seconds one device of one replica
 * spent computing in it (its busy fraction is the ratio). */
double tg_session_last_run_seconds(const tg_session *s);
double tg_session_busy_seconds(const tg_session *s, int replica, int device);
/* The seconds that device spent on host streams in during the last run:
 * copying them itself (defaultPrefetchBufferingDepth 1) or waiting for the
 * host-stream threads to fill them (above 1). */
double tg_session_stream_seconds(const tg_session *s, int replica, int device);
/* The most micro-batches device `device` ever held between a forward and its
 * backward (never more than the compiled stash depth). */
int tg_session_max_in_flight(const tg_session *s, int device);

#endif
