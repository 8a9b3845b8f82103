/* runtime/allreduce.h - between replicas (allreduce.c), called by the
 * engine's device loop (engine.c). */
#ifndef TG_RUNTIME_ALLREDUCE_H
#define TG_RUNTIME_ALLREDUCE_H

#include "runtime/session_state.h"

/* Whether the all-reduce sums only this replica's shard of accumulator a
 * (its weight is sharded: a reduce-scatter), leaving the rest of the
 * replica's accumulator as it was; not when the overflow check or gradient
 * clipping reads whole gradients. */
bool tg_allreduce_scatters(const tg_session *s, const tg_accumulator *a);
/* After sharded updates of iteration `it`: give every replica this
 * replica's share of the weights whose optimizer state is sharded, and
 * under sharded weights wait until every replica has written its shards
 * (exchanging them with the other instances); false if the run was
 * aborted. */
bool tg_allreduce_gather_weights(device_ctx *c, int64_t it);
/* The accumulators' mean over the replicas, identical on every replica;
 * false if the run was aborted. */
bool tg_allreduce_run(device_ctx *c, int64_t it);

#endif
