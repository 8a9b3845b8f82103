/* runtime/streams.h - the session's part for host streams (streams.c):
 * the host's copies of every input and output of a run, and the copies
 * between them and the devices, called by the engine's device loop
 * (engine_passes.c), the prefetch threads and the I/O threads. */
#ifndef TG_RUNTIME_STREAMS_H
#define TG_RUNTIME_STREAMS_H

#include "ops/op.h"
#include "runtime/session_state.h"

typedef struct tg_host_streams tg_host_streams;

/* The host streams of program p (g: its graph): for every input and
 * output node, `count` micro-batches (all replicas and iterations of a run,
 * tg_session_stream_count). */
tg_status tg_host_streams_create(const tg_program *p, const tg_graph *g, int64_t count,
                                 tg_host_streams **out);
void tg_host_streams_free(tg_host_streams *h);
/* Node `node`'s host stream in or out, in [iteration][replica][micro-batch]
 * order; NULL when the node has none. */
unsigned char *tg_host_streams_in(const tg_host_streams *h, int node);
unsigned char *tg_host_streams_out(const tg_host_streams *h, int node);

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
