/* runtime/stream_io.h - the copies of offloaded tensors on an I/O thread
 * per (replica, device), a step ahead of the device (stream_io.c). */
#ifndef TG_RUNTIME_STREAM_IO_H
#define TG_RUNTIME_STREAM_IO_H

#include "runtime/session_state.h"

/* Whether device c's streamed copies run on its I/O thread this run
 * (TensorLocations.ioSchedule preload, and the device has copies). */
bool tg_stream_io_on(const device_ctx *c);
/* Start the I/O threads the program's devices need (once per session);
 * tg_stream_io_stop joins them (session destroy). */
tg_status tg_stream_io_start(tg_session *s);
void tg_stream_io_stop(tg_session *s);

/* Steps [begin, end) of phase ph for micro-batch g, their copies on the I/O
 * thread: the pass calls tg_stream_io_before(k) before step k's kernel
 * (which queues the loads of the steps up to TensorLocations.preloadSteps
 * ahead and waits for step k's) and tg_stream_io_after(k) after it (which
 * queues its stores, and runs its accumulations itself); tg_stream_io_end
 * waits for the rest and records them. */
#define TG_STREAM_AHEAD_MAX 64
typedef struct tg_stream_pass {
    tg_phase phase;
    int begin, end;
    int64_t it, g;
    /* where the compiler's copies start afresh inside [begin, end): the
     * backward's weight-gradient steps (tg_backward_cut, by which
     * compile/streaming.c plans them as a pass of their own); 0 for none */
    int cut;
    int ahead;     /* TensorLocations.preloadSteps */
    int next_load; /* the first step whose loads are not queued yet */
    int64_t load_ticket[TG_STREAM_AHEAD_MAX + 1]; /* of step k's loads, in [k % (ahead + 1)] */
    int64_t store_ticket[2];                      /* of step k's stores, in [k % 2] */
    int64_t last_store;                           /* the latest stores' ticket */
} tg_stream_pass;
void tg_stream_io_begin(device_ctx *c, tg_stream_pass *pass);
void tg_stream_io_before(device_ctx *c, tg_stream_pass *pass, int k);
void tg_stream_io_after(device_ctx *c, tg_stream_pass *pass, int k);
void tg_stream_io_end(device_ctx *c, tg_stream_pass *pass);
/* Wait for the stores queued so far (and so for the loads queued before
 * them): a ParallelIPU pass that sends an offloaded value inside it
 * (runtime/exchange.c) reads its host copy. */
void tg_stream_io_stores_done(device_ctx *c, tg_stream_pass *pass);

#endif
