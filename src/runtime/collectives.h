/* runtime/collectives.h - the session's part for the exchange with the
 * other instances of an MPI job (collectives.c): their communicators, the
 * all-reduce's staging packs, the gradient buckets, the gathered sharded
 * state and the wire format of a pack. Outside a job of several instances
 * it holds nothing. The part's own files (allreduce.c, buckets.c, rts.c,
 * session_dist.c) see its fields through runtime/collectives_state.h; the
 * rest of the runtime asks through the calls below. */
#ifndef TG_RUNTIME_COLLECTIVES_H
#define TG_RUNTIME_COLLECTIVES_H

#include "runtime/session_state.h"

typedef struct tg_collectives tg_collectives;

/* An empty part (no job yet): tg_session_dist_setup fills it. */
tg_status tg_collectives_create(tg_collectives **out);
/* The part itself; tg_session_dist_free and tg_rts_free free what they
 * put in it first. */
void tg_collectives_free(tg_collectives *c);

/* The communicators of the job, or NULL: no exchange with other instances
 * (one instance, or an inference session). */
struct tg_dist_group *tg_collectives_group(const tg_collectives *c);
/* After a completed run: its exchange with the other instances (local
 * replica 0's of each device) added to the session's totals. */
void tg_collectives_add_times(tg_session *s);
/* A sharded value whole, as tg_dist_sync gathered it at this host step (an
 * error naming it otherwise). */
tg_status tg_collectives_state(const tg_session *s, const tg_tensor *t, unsigned char *dst);

/* Whether buffer buf travels as bf16: an f32 one under
 * distributed.gradientWireType bfloat16. */
bool tg_collectives_wire_bf16(const tg_session *s, int buf);
/* Under distributed.gradientWireType bfloat16, an f32 accumulator (buffer
 * buf) travels to the other instances as bf16: its bytes in an instance's
 * pack, and its values rounded into the pack at dst (a copy otherwise). */
size_t tg_collectives_wire_bytes(const tg_session *s, int buf);
void tg_collectives_to_wire(const tg_session *s, int buf, unsigned char *dst,
                            const unsigned char *src);
/* This instance's stamp at `at` (TG_DIST_STAMP_BYTES, the end of its pack):
 * the local time its gradients were final, on the job's clock. */
void tg_collectives_stamp(unsigned char *at, double local);
/* After an exchange that started (after the backward) at local time t0 and
 * ended now: the part of it spent before the slowest other instance had
 * stamped its pack (instance i's stamp at recv + i * stride + at), into
 * c->exchange. */
void tg_collectives_note_wait(device_ctx *c, const unsigned char *recv, size_t stride, size_t at,
                              double t0);

#endif
