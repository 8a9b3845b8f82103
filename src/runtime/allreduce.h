/* runtime/allreduce.h - between replicas (allreduce.c), called by the
 * engine's device loop (engine.c). */
#ifndef TG_RUNTIME_ALLREDUCE_H
#define TG_RUNTIME_ALLREDUCE_H

#include "runtime/session_state.h"

/* An update whose optimizer state is sharded over the replicas. */
bool tg_allreduce_is_sharded_update(const tg_program *p, const tg_step *st, const tg_tensor *t);
/* After sharded updates of iteration `it`: give every replica this
 * replica's share of the weights; false if the run was aborted. */
bool tg_allreduce_gather_weights(device_ctx *c, int64_t it);
/* The accumulators' mean over the replicas, identical on every replica;
 * false if the run was aborted. */
bool tg_allreduce_run(device_ctx *c, int64_t it);

#endif
