/* runtime/engine.c - a compiled program on its devices: the engine's host
 * step (tg_session_run), addressing and the device threads. A device's
 * passes are runtime/engine_passes.c, the update's checks (overflow, loss
 * scaling, clipping) runtime/engine_update.c, the recorded run's profile
 * and trace runtime/engine_record.c. Creating a session is
 * runtime/session.c, moving data in and out of it runtime/session_io.c.
 *
 * The session owns the program, one arena per (replica, device) exactly as
 * planned, one thread pool per (replica, device), and the host-side stream
 * buffers. A run is one host step: every replica runs every device's
 * schedule for deviceIterations weight updates (or inference batches),
 * each device on a thread of its own that lives as long as the session
 * (parked between host steps, see "device threads" below). Devices meet
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
 * devices of a replica meet once more (tg_engine_update_runs): to agree whether a
 * gradient overflowed and, with max_grad_norm, on the gradients' global norm.
 */
#include "runtime/session_state.h"
#include "runtime/monitor.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/error.h"
#include "profile/profile.h"
#include "runtime/dist.h"
#include "runtime/exchange.h"
#include "runtime/prefetch.h"
#include "runtime/stream_io.h"
#include "runtime/verify.h"
#include "tilegraph/trace.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

double tg_engine_now(void)
{
    return tg_clock_seconds();
}

#define now_s tg_engine_now

/* ---- addressing ------------------------------------------------------------------- */

unsigned char *tg_engine_slot_ptr(const tg_session *s, int replica, int buffer, int64_t g)
{
    const tg_buffer *b = &s->program->buffers[buffer];
    if (b->offloaded) /* its host copy (compile/streaming.c) */
        return s->host_state[buffer * s->program->replicas + replica] +
               (size_t)(g % b->slots) * b->stride;
    unsigned char *arena = s->arena[replica * s->program->n_devices + b->device];
    return arena + b->offset + (size_t)(g % b->slots) * b->stride;
}

int64_t tg_session_stream_count(const tg_session *s)
{
    const tg_program *p = s->program;
    return (int64_t)p->iterations * p->replicas * p->micro_batches;
}

static tg_trace_channel *engine_channel(void)
{
    static tg_trace_channel *ch;
    return tg_exchange_cached_channel(&ch, "engine");
}

/* The host trace's name for the thread that runs device `index`. */
static void name_device_thread(const tg_session *s, int index)
{
    char name[48];
    snprintf(name, sizeof name, "replica %d device %d", index / s->program->n_devices,
             index % s->program->n_devices);
    tg_trace_thread_name(tg_trace_intern(name));
}

/* ---- device threads ------------------------------------------------------------- */

/* A thread per (replica, device) lives as long as the session: started by
 * the first run that needs it, parked between host steps, stopped by
 * tg_session_destroy. Starting and joining threads at every host step cost
 * a thread start per device per step (with deviceIterations 1 that is per
 * update), and a fresh thread starts with cold caches and an empty trace
 * buffer. Handing over a step: the caller writes the devices' contexts,
 * then, under `lock`, sets threads_running and bumps run_gen (release) and
 * wakes park_wake; a thread that sees the new generation (acquire) runs its
 * device, and the last to finish wakes park_done. Both waits spin within an
 * adaptive budget first (core/wait.h): back-to-back steps hand over without
 * a sleep, while a host that loads data between steps soon finds the
 * threads asleep and spinning nothing. An aborted step (tg_exchange_fail)
 * still ends in every thread, so the threads are always parked between
 * runs, and destroy only has to wake and join them. */

typedef struct {
    tg_session *s;
    int64_t seen; /* the last step this thread ran */
} park;

static bool step_or_stop(void *arg)
{
    const park *k = arg;
    return __atomic_load_n(&k->s->run_gen, __ATOMIC_ACQUIRE) != k->seen ||
           __atomic_load_n(&k->s->threads_stop, __ATOMIC_ACQUIRE);
}

static bool step_done(void *arg)
{
    const tg_session *s = arg;
    return __atomic_load_n(&s->threads_running, __ATOMIC_ACQUIRE) == 0;
}

/* Spin, yield, then sleep on cv under the session's lock until ready(arg). */
static void wait_on(tg_session *s, tg_spin *spin, pthread_cond_t *cv, tg_ready_fn ready, void *arg)
{
    if (tg_spin_wait(spin, ready, arg))
        return;
    pthread_mutex_lock(&s->lock);
    while (!ready(arg))
        pthread_cond_wait(cv, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

static void *device_thread(void *arg)
{
    tg_device_thread *t = arg;
    tg_session *s = t->s;
    name_device_thread(s, t->index);
    park k = {s, 0};
    for (;;) {
        wait_on(s, &t->spin, &s->park_wake, step_or_stop, &k);
        if (__atomic_load_n(&s->threads_stop, __ATOMIC_ACQUIRE))
            return NULL;
        k.seen = __atomic_load_n(&s->run_gen, __ATOMIC_ACQUIRE);
        tg_engine_device_main(&s->ctx[t->index]);
        pthread_mutex_lock(&s->lock);
        if (__atomic_sub_fetch(&s->threads_running, 1, __ATOMIC_RELEASE) == 0)
            pthread_cond_signal(&s->park_done);
        pthread_mutex_unlock(&s->lock);
    }
}

/* Wake the first `started` threads to leave, join them and free them. */
static void join_threads(tg_session *s, int started)
{
    pthread_mutex_lock(&s->lock);
    __atomic_store_n(&s->threads_stop, true, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&s->park_wake);
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < started; i++)
        pthread_join(s->device_threads[i].id, NULL);
    tg_free(s->device_threads);
    s->device_threads = NULL;
    pthread_cond_destroy(&s->park_wake);
    pthread_cond_destroy(&s->park_done);
}

void tg_engine_stop_threads(tg_session *s)
{
    if (s && s->device_threads)
        join_threads(s, s->program->replicas * s->program->n_devices);
}

void tg_engine_set_per_step_threads(tg_session *s, bool on)
{
    if (on)
        tg_engine_stop_threads(s);
    s->per_step_threads = on;
}

/* Start the n device threads, parked until the first step is handed over.
 * They wait as long as the exchange's waits do (its ceiling is the free
 * cores' verdict, session.c). */
static tg_status start_threads(tg_session *s, int n)
{
    s->device_threads = tg_calloc((size_t)n, sizeof *s->device_threads);
    if (!s->device_threads)
        return tg_error(TG_ERR_NOMEM, "session: out of memory for %d device threads", n);
    pthread_cond_init(&s->park_wake, NULL);
    pthread_cond_init(&s->park_done, NULL);
    s->threads_stop = false;
    s->run_gen = 0;
    int ceiling = atomic_load_explicit(&s->exchange_spin.ceiling, memory_order_relaxed);
    tg_spin_init(&s->done_spin, ceiling);
    for (int i = 0; i < n; i++) {
        tg_device_thread *t = &s->device_threads[i];
        *t = (tg_device_thread){.s = s, .index = i};
        tg_spin_init(&t->spin, ceiling);
        int err = pthread_create(&t->id, NULL, device_thread, t);
        if (err != 0) {
            join_threads(s, i);
            return tg_error(TG_ERR_NOMEM,
                            "session: cannot start the thread of replica %d device %d (%s); "
                            "lower replicationFactor or the number of devices, or raise the "
                            "process's thread limit",
                            i / s->program->n_devices, i % s->program->n_devices, strerror(err));
        }
    }
    return TG_OK;
}

/* Hand the step to the parked threads and wait until every device ended it. */
static tg_status run_parked(tg_session *s, int n)
{
    if (!s->device_threads)
        TG_TRY(start_threads(s, n));
    pthread_mutex_lock(&s->lock);
    __atomic_store_n(&s->threads_running, n, __ATOMIC_RELAXED);
    __atomic_store_n(&s->run_gen, s->run_gen + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&s->park_wake);
    pthread_mutex_unlock(&s->lock);
    wait_on(s, &s->done_spin, &s->park_done, step_done, s);
    return TG_OK;
}

static void *per_step_thread(void *arg)
{
    device_ctx *c = arg;
    name_device_thread(c->s, c->replica * c->s->program->n_devices + c->device);
    tg_engine_device_main(c);
    return NULL;
}

/* The former way: a thread per device for this step only. */
static void run_per_step(tg_session *s, int n)
{
    int started = 0;
    for (; started < n; started++)
        if (pthread_create(&s->threads[started], NULL, per_step_thread, &s->ctx[started]) != 0) {
            tg_exchange_fail(s, TG_ERR_NOMEM, "cannot start a device thread");
            break;
        }
    for (int i = 0; i < started; i++)
        pthread_join(s->threads[i], NULL);
}

/* One host step on every device: on the caller's thread when there is one
 * device of one replica, else on the device threads. */
static tg_status run_devices(tg_session *s, int n)
{
    if (n == 1)
        tg_engine_device_main(&s->ctx[0]);
    else if (s->per_step_threads)
        run_per_step(s, n);
    else
        return run_parked(s, n);
    return TG_OK;
}

/* This run's exchange with the other instances added to the session's
 * (tg_session_exchange_times): local replica 0's, which runs it. */
static void add_exchange_times(tg_session *s)
{
    for (int d = 0; s->exchange_times && d < s->program->n_devices; d++) {
        const tg_exchange_times *x = &s->ctx[d].exchange;
        tg_exchange_times *to = &s->exchange_times[d];
        to->updates += x->updates;
        to->during_backward += x->during_backward;
        to->after_backward += x->after_backward;
        to->imbalance += x->imbalance;
        to->summing += x->summing;
    }
}

tg_status tg_session_run(tg_session *s)
{
    const tg_program *p = s->program;
    int n = p->replicas * p->n_devices;
    TG_TRY(tg_verify_begin(s));
    if (s->dist) /* counted, so that instances running other step counts are told (dist.h) */
        tg_dist_note_run(s->dist);
    memset(s->produced, 0, sizeof(int64_t) * (size_t)(p->n_transfers * p->replicas + 1));
    memset(s->consumed, 0, sizeof(int64_t) * (size_t)(p->n_transfers * p->replicas + 1));
    /* an aborted step may have left devices counted in at a barrier */
    memset(s->barrier_count, 0, sizeof(int64_t) * (size_t)p->n_devices);
    if (s->group_count)
        memset(s->group_count, 0, sizeof(int64_t) * (size_t)p->replicas);
    s->abort = false;
    s->fail_status = TG_OK;
    double t0 = now_s();
    bool recording = s->recorders && s->runs < s->runs_to_record;
    uint64_t link = s->link_base + (uint64_t)s->runs + 1;
    tg_trace_begin_link(engine_channel(), "host step", link);
    for (int i = 0; i < n; i++) {
        s->ctx[i] = (device_ctx){.s = s,
                                 .replica = i / p->n_devices,
                                 .device = i % p->n_devices,
                                 .rec = recording ? &s->recorders[i] : NULL,
                                 .loss_scale = s->loss_scale,
                                 .good_updates = s->good_updates,
                                 .grad_scale = s->loss_scale};
        if (recording)
            s->recorders[i].n_events = 0;
    }
    tg_status started = tg_prefetch_begin(s);
    if (started == TG_OK)
        started = tg_stream_io_start(s);
    if (started == TG_OK)
        started = run_devices(s, n);
    if (started != TG_OK) /* the host-stream threads stop filling */
        tg_exchange_fail(s, started, tg_error_message());
    tg_prefetch_end(s);
    s->last_run_seconds = now_s() - t0;
    tg_trace_end(engine_channel());
    if (started != TG_OK)
        return started;
    add_exchange_times(s);
    for (int i = 0; i < n; i++) {
        s->last_busy[i] = s->ctx[i].busy;
        s->last_streams[i] = s->ctx[i].streams;
        int d = i % p->n_devices;
        if (s->ctx[i].max_in_flight > s->max_in_flight[d])
            s->max_in_flight[d] = s->ctx[i].max_in_flight;
    }
    if (p->training && !s->abort) {
        s->step += p->iterations;
        s->loss_scale = s->ctx[0].loss_scale;
        s->good_updates = s->ctx[0].good_updates;
        s->skipped_updates += s->ctx[0].skipped_updates;
    }
    if (s->abort)
        return tg_error(s->fail_status, "%s", s->fail_message);
    s->runs++;
    if (s->profile && tg_engine_record_own_counters(s) != TG_OK)
        tg_engine_drop_profile(s);
    tg_monitor_step(s->monitor);
    if (recording && s->trace_devices)
        tg_engine_keep_device_steps(s, link);
    if (recording && s->profile &&
        tg_profile_record_run(s->profile, s->recorders, s->runs - 1) != TG_OK)
        tg_engine_drop_profile(s);
    if (recording && s->profile && p->training &&
        tg_engine_record_histograms(s, s->runs - 1) != TG_OK)
        tg_engine_drop_profile(s);
    return tg_verify_end(s);
}
