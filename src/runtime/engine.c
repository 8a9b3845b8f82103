/* runtime/engine.c - a compiled program on its devices: the engine's host
 * step (tg_session_run). The session's parts do the rest, each behind its
 * header (docs/architecture.md, "The runtime's parts"): the device threads
 * runtime/device_threads.c, a device's passes runtime/engine_passes.c, the
 * update's checks (overflow, loss scaling, clipping) runtime/scaling.c,
 * the recorded run's profile and trace runtime/record.c and
 * engine_record.c. Creating a session is runtime/session.c, moving data in
 * and out of it runtime/session_io.c.
 *
 * The session owns the program, one arena per (replica, device) exactly as
 * planned, one thread pool per (replica, device), and the host-side stream
 * buffers. A run is one host step: every replica runs every device's
 * schedule for deviceIterations weight updates (or inference batches),
 * each device on a thread of its own that lives as long as the session
 * (parked between host steps, runtime/device_threads.c). Devices meet
 * only where the program says: receive buffers filled by explicit copies
 * (transfers), the accumulators' all-reduce across replicas, and the host
 * streams. With one device and one replica everything runs on the calling
 * thread.
 *
 * Flow control (runtime/exchange.c): a transfer's receive buffer has one slot per micro-batch in
 * flight on the receiver; the sender waits until the slot of micro-batch g
 * is free (the receiver released micro-batch g - slots) and the receiver
 * waits until micro-batch g has arrived. The schedules guarantee progress
 * (compile/pipeline.h). Any failure sets an abort flag that wakes every
 * waiting thread, so a failing step never hangs. Before the updates, the
 * devices of a replica meet once more (tg_scaling_update_runs): to agree whether a
 * gradient overflowed and, with max_grad_norm, on the gradients' global norm.
 */
#include "runtime/session_state.h"
#include "runtime/monitor.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/error.h"
#include "profile/profile.h"
#include "runtime/device_threads.h"
#include "runtime/dist.h"
#include "runtime/exchange.h"
#include "runtime/prefetch.h"
#include "runtime/record.h"
#include "runtime/scaling.h"
#include "runtime/stream_io.h"
#include "runtime/verify.h"
#include "runtime/run_control.h"
#include "runtime/collectives.h"
#include "tilegraph/trace.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define now_s tg_engine_now

static tg_trace_channel *engine_channel(void)
{
    static tg_trace_channel *ch;
    return tg_exchange_cached_channel(&ch, "engine");
}

void tg_engine_stop_threads(tg_session *s)
{
    if (s)
        tg_device_threads_stop(s->device_threads);
}

void tg_engine_set_per_step_threads(tg_session *s, bool on)
{
    tg_device_threads_set_per_step(s->device_threads, on);
}

tg_status tg_session_run(tg_session *s)
{
    const tg_program *p = s->program;
    int n = p->replicas * p->n_devices;
    TG_TRY(tg_verify_begin(s));
    /* counted, so that instances running other step counts are told (dist.h) */
    if (tg_collectives_group(s->coll))
        tg_dist_note_run(tg_collectives_group(s->coll));
    tg_exchange_begin_run(s->exchange);
    tg_run_begin(s->run);
    double t0 = now_s();
    bool recording = tg_recording_wants(s->recording, s->runs);
    uint64_t link = tg_recording_link(s->recording, s->runs);
    tg_trace_begin_link(engine_channel(), "host step", link);
    for (int i = 0; i < n; i++) {
        s->ctx[i] = (device_ctx){.s = s,
                                 .replica = i / p->n_devices,
                                 .device = i % p->n_devices,
                                 .rec = recording ? tg_recording_device(s->recording, i) : NULL};
        tg_scaling_begin_device(s->scaling, &s->ctx[i]);
    }
    tg_status started = tg_prefetch_begin(s);
    if (started == TG_OK)
        started = tg_stream_io_start(s);
    if (started == TG_OK)
        started = tg_device_threads_run(s->device_threads, s->ctx, n);
    if (started != TG_OK) /* the host-stream threads stop filling */
        tg_exchange_fail(s, started, tg_error_message());
    tg_prefetch_end(s);
    s->last_run_seconds = now_s() - t0;
    tg_trace_end(engine_channel());
    if (started != TG_OK)
        return started;
    tg_collectives_add_times(s);
    for (int i = 0; i < n; i++) {
        s->last_busy[i] = s->ctx[i].busy;
        s->last_streams[i] = s->ctx[i].streams;
        int d = i % p->n_devices;
        if (s->ctx[i].max_in_flight > s->max_in_flight[d])
            s->max_in_flight[d] = s->ctx[i].max_in_flight;
    }
    if (p->training && !tg_run_aborted(s->run)) {
        s->step += p->iterations;
        tg_scaling_end_run(s->scaling, &s->ctx[0]);
    }
    TG_TRY(tg_run_result(s->run));
    s->runs++;
    tg_recording *rec = s->recording;
    if (tg_recording_profile(rec) && tg_engine_record_own_counters(s) != TG_OK)
        tg_recording_drop(rec);
    tg_monitor_step(s->monitor);
    if (recording)
        tg_recording_keep_steps(rec, link);
    if (recording)
        tg_recording_record_run(rec, s->runs - 1);
    if (recording && tg_recording_profile(rec) && p->training &&
        tg_engine_record_histograms(s, s->runs - 1) != TG_OK)
        tg_recording_drop(rec);
    return tg_verify_end(s);
}
