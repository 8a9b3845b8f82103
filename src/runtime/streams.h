/* runtime/streams.h - host streams of a run (streams.c), called by the
 * engine's device loop (engine.c). */
#ifndef TG_RUNTIME_STREAMS_H
#define TG_RUNTIME_STREAMS_H

#include "ops/op.h"
#include "runtime/session_state.h"

/* Copy micro-batch j of iteration it from the host into slot g of the
 * input buffers of (replica, device); returns the bytes. Any thread. */
int64_t tg_streams_copy_in(tg_session *s, int replica, int device, int64_t it, int64_t j,
                           int64_t g);
/* Micro-batch j of iteration it from the host into the device (slot g),
 * copied by the device itself (no prefetch), recorded as its stream time. */
void tg_streams_inputs(device_ctx *c, int64_t it, int64_t j, int64_t g);
/* Micro-batch j's outputs (slot g) to the host; false (the run aborted)
 * when a checked scalar output is NaN or infinite. */
bool tg_streams_outputs(device_ctx *c, int64_t it, int64_t j, int64_t g);
/* The streamed copies of step st of phase ph (compile/streaming.c): in
 * from host memory before it runs (in), or the ones it wrote back out after
 * (!in); recorded as stream events of the phase. Returns the bytes moved. */
int64_t tg_streams_step(device_ctx *c, tg_phase ph, const tg_step *st, bool in, int64_t it,
                        int64_t g);
/* The copy part of it, for (replica, device): no accumulation, nothing
 * recorded. Any thread (the device's I/O thread, runtime/stream_io.c). */
int64_t tg_streams_copy(tg_session *s, int replica, int device, tg_phase ph, const tg_step *st,
                        bool in, int64_t g);
/* Step st's additions of micro-batch g's gradients into offloaded
 * accumulators (after it runs), on the device's thread; the bytes moved. */
int64_t tg_streams_accumulate(device_ctx *c, tg_phase ph, const tg_step *st, int64_t g);
/* Step st's gathers of sharded weights into their whole copies (before it
 * runs; runtime/rts.c), on the device's thread, recorded; the bytes. */
int64_t tg_streams_gather(device_ctx *c, tg_phase ph, const tg_step *st, int64_t it, int64_t g);

#endif
