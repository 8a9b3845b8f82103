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
/* Under distributed.gradientWireType bfloat16, an f32 accumulator (buffer
 * buf) travels to the other instances as bf16: its bytes in an instance's
 * pack, and its values rounded into the pack at dst (a copy otherwise). */
size_t tg_allreduce_wire_bytes(const tg_session *s, int buf);
void tg_allreduce_to_wire(const tg_session *s, int buf, unsigned char *dst,
                          const unsigned char *src);
/* This instance's stamp at `at` (TG_DIST_STAMP_BYTES, the end of its pack):
 * the local time its gradients were final, on the job's clock. */
void tg_allreduce_stamp(unsigned char *at, double local);
/* After an exchange that started (after the backward) at local time t0 and
 * ended now: the part of it spent before the slowest other instance had
 * stamped its pack (instance i's stamp at recv + i * stride + at), into
 * c->exchange. */
void tg_allreduce_note_wait(device_ctx *c, const unsigned char *recv, size_t stride, size_t at,
                            double t0);
/* The accumulators' mean over the replicas, identical on every replica;
 * false if the run was aborted. */
bool tg_allreduce_run(device_ctx *c, int64_t it);

#endif
