/* runtime/rts.h - replicated tensor sharding of weights at run time
 * (rts.c; the plan is compile/sharding.c). */
#ifndef TG_RUNTIME_RTS_H
#define TG_RUNTIME_RTS_H

#include "runtime/session_state.h"

/* Under an MPI job with sharded weights: the host copy of the other
 * instances' shards of each sharded weight (s->coll->rts_remote, runtime/collectives_state.h).
 * TG_OK and nothing allocated otherwise. */
tg_status tg_rts_setup(tg_session *s);
void tg_rts_free(tg_session *s);
/* A gather op (TG_STREAM_GATHER) of device c for slot g: every shard of
 * the weight into the pass's whole copy; returns the bytes copied from
 * other replicas' and instances' shards. */
int64_t tg_rts_gather(device_ctx *c, const tg_stream_op *op, int64_t g);
/* Sharded weight buffer b whole (as stored) into dst: this instance's
 * replicas' shards and the other instances' as last exchanged. */
void tg_rts_whole(const tg_session *s, int b, unsigned char *dst);
/* The host wrote sharded weight buffer b (whole value `whole`, as stored)
 * into this instance's shards: keep the other instances' parts too. */
void tg_rts_host_written(const tg_session *s, int b, const unsigned char *whole);
/* After the updates of iteration `it`, run by local replica 0 of device c
 * between two replica barriers under an MPI job: send this instance's
 * block of every sharded weight of the device to the others and keep
 * theirs; false if the exchange was abandoned (the run aborts). */
bool tg_rts_exchange(device_ctx *c, int64_t it);
/* Whether update step st rewrites a sharded weight (its home holds a shard). */
bool tg_rts_updates_shard(const tg_program *p, const tg_step *st);

/* An update whose optimizer state (or weight) is sharded over the replicas:
 * it updates one shard (engine.c shard_view). */
bool tg_rts_is_sharded_update(const tg_program *p, const tg_step *st, const tg_tensor *t);
/* Replicated tensor sharding across instances: instance i's replicas hold
 * shards i*R/N .. (i+1)*R/N-1 of each sharded tensor of n elements, the
 * contiguous elements [*begin, *end); a block is at most _cap bytes. */
void tg_rts_block(const tg_session *s, int64_t n, int instance, int64_t *begin, int64_t *end);
size_t tg_rts_block_cap(const tg_session *s, int64_t n, size_t elem_bytes);

#endif
