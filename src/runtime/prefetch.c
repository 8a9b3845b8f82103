/* runtime/prefetch.c - host streams filled ahead of the devices (seed 002
 * §4.4.1, PopART's defaultPrefetchBufferingDepth).
 *
 * With depth D > 1 every device's host-stream input buffers have D - 1
 * slots more than the micro-batches it holds in flight (compile/memplan.c),
 * and host-stream threads copy each device's next micro-batches into them
 * while it computes. Per (replica, device) three counters, reset every
 * host step, all in the order of the device's forward passes: `claimed`,
 * the micro-batches someone took on to copy in; `filled`, those the thread
 * copied in; and `freed`, the micro-batches the device is done with (after
 * the backward pass; after the forward pass in inference). A device whose
 * next micro-batch is not claimed yet (the thread fell behind, or is off
 * the CPU on a busy machine) claims and copies it itself, as without
 * prefetch, instead of waiting for the thread: a device waits only for a
 * copy already under way, so prefetch costs no more than no prefetch. The
 * schedules run every device's passes in micro-batch order (compile/
 * pipeline.h), so micro-batch g's slot (g mod slots) is free once `freed`
 * reaches g + 1 - slots; and since slots >= the stash depth, the slot the
 * device needs next is always free: the filler never waits for a device
 * that waits for it. Waits use the exchange's counters and wake-ups
 * (exchange.c), so an aborted step ends the filling too.
 *
 * Threads (streamCallbacks.multiThreadMode): the k-th (replica, device)
 * that streams inputs is filled by thread k mod n; they live as long as the
 * session and park between host steps.
 */
#include "runtime/prefetch.h"

#include "core/alloc.h"
#include "core/error.h"
#include "runtime/exchange.h"
#include "runtime/streams.h"
#include "runtime/run_control.h"
#include "tilegraph/trace.h"

#include <stdio.h>
#include <string.h>

typedef struct fill_thread {
    tg_session *s;
    int index;
    tg_spin spin;
    pthread_t id;
} fill_thread;

typedef struct tg_prefetch {
    int n_threads;
    fill_thread *threads;
    int64_t *claimed, *filled, *freed; /* [replica * n_devices + device] (atomic) */
    int *owner;       /* the same: the thread that fills it, -1 when it streams nothing */
    int **forward_mb; /* per device: the micro-batch of each forward pass in order */
    int *n_forward;   /* per device: forward passes per iteration */
    pthread_cond_t wake, done;
    int64_t gen; /* host steps handed over (under the session's lock) */
    int running; /* threads still filling this step (under the lock) */
    bool stop;
} tg_prefetch;

bool tg_prefetch_on(const tg_session *s)
{
    return s->program->config.streams.prefetch_depth > 1;
}

static tg_trace_channel *engine_channel(void)
{
    static tg_trace_channel *ch;
    return tg_exchange_cached_channel(&ch, "engine");
}

static bool aborted(const tg_session *s)
{
    return tg_run_aborted(s->run);
}

/* ---- filling ------------------------------------------------------------------------- */

static bool streams_inputs(const tg_session *s, int i)
{
    return s->program->devices[i % s->program->n_devices].n_inputs > 0;
}

static bool owns(const fill_thread *t, int i)
{
    return t->s->prefetch->owner[i] == t->index;
}

static int64_t forwards_per_step(const tg_session *s, int i)
{
    return (int64_t)s->program->iterations * s->prefetch->n_forward[i % s->program->n_devices];
}

/* Micro-batch g (in the slot numbering) of stream i's q-th forward pass,
 * with its iteration and micro-batch. */
static int64_t slot_of(const tg_session *s, int i, int64_t q, int64_t *it, int64_t *j)
{
    const tg_prefetch *pf = s->prefetch;
    int d = i % s->program->n_devices;
    *it = q / pf->n_forward[d];
    *j = pf->forward_mb[d][q % pf->n_forward[d]];
    return *it * s->program->micro_batches + *j;
}

/* Whether micro-batch q of stream i is one of this host step's and its
 * slot is free. */
static bool slot_free(const tg_session *s, int i, int64_t q)
{
    int64_t it, j;
    if (q >= forwards_per_step(s, i))
        return false;
    int64_t g = slot_of(s, i, q, &it, &j);
    const tg_device_program *dp = &s->program->devices[i % s->program->n_devices];
    int slots = s->program->buffers[dp->inputs[0]].slots;
    return __atomic_load_n(&s->prefetch->freed[i], __ATOMIC_ACQUIRE) >= g + 1 - slots;
}

/* Stream i's next micro-batch is not claimed yet and its slot is free. */
static bool fillable(const tg_session *s, int i)
{
    return slot_free(s, i, __atomic_load_n(&s->prefetch->claimed[i], __ATOMIC_ACQUIRE));
}

static bool any_fillable(void *arg)
{
    const fill_thread *t = arg;
    const tg_session *s = t->s;
    int n = s->program->replicas * s->program->n_devices;
    for (int i = 0; i < n; i++)
        if (owns(t, i) && fillable(s, i))
            return true;
    return aborted(s);
}

/* Claim stream i's next micro-batch when its slot is free, copy it in and
 * tell its device. False when there was nothing to do: the slot is taken,
 * or the device claimed the micro-batch first (it copies it itself). */
static bool fill_one(tg_session *s, int i)
{
    tg_prefetch *pf = s->prefetch;
    int64_t q = __atomic_load_n(&pf->claimed[i], __ATOMIC_ACQUIRE), it, j;
    if (!slot_free(s, i, q) || !__atomic_compare_exchange_n(&pf->claimed[i], &q, q + 1, false,
                                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return false;
    int64_t g = slot_of(s, i, q, &it, &j);
    tg_trace_begin(engine_channel(), "host stream fill");
    tg_streams_copy_in(s, i / s->program->n_devices, i % s->program->n_devices, it, j, g);
    tg_trace_end(engine_channel());
    tg_exchange_publish(s, &pf->filled[i], q + 1);
    return true;
}

/* Whether thread t has filled everything of this host step. */
static bool all_filled(const fill_thread *t)
{
    const tg_session *s = t->s;
    int n = s->program->replicas * s->program->n_devices;
    for (int i = 0; i < n; i++)
        if (owns(t, i) &&
            __atomic_load_n(&s->prefetch->claimed[i], __ATOMIC_ACQUIRE) < forwards_per_step(s, i))
            return false;
    return true;
}

/* One host step of thread t: a micro-batch of each of its streams in turn,
 * sleeping when every slot is taken, until all are filled or the step is
 * aborted. */
static void fill_step(fill_thread *t)
{
    tg_session *s = t->s;
    int n = s->program->replicas * s->program->n_devices;
    while (!all_filled(t) && !aborted(s)) {
        bool progress = false;
        for (int i = 0; i < n; i++)
            progress |= owns(t, i) && fill_one(s, i);
        if (progress || tg_spin_wait(&t->spin, any_fillable, t))
            continue;
        tg_run_lock(s->run);
        while (!any_fillable(t) && !all_filled(t))
            tg_run_wait(s->run, NULL);
        tg_run_unlock(s->run);
    }
}

static void *fill_main(void *arg)
{
    fill_thread *t = arg;
    tg_session *s = t->s;
    tg_prefetch *pf = s->prefetch;
    char name[32];
    snprintf(name, sizeof name, "host streams %d", t->index);
    tg_trace_thread_name(tg_trace_intern(name));
    int64_t seen = 0;
    for (;;) {
        tg_run_lock(s->run);
        while (pf->gen == seen && !pf->stop)
            tg_run_wait(s->run, &pf->wake);
        bool stop = pf->stop;
        seen = pf->gen;
        tg_run_unlock(s->run);
        if (stop)
            return NULL;
        fill_step(t);
        tg_run_lock(s->run);
        if (--pf->running == 0)
            pthread_cond_signal(&pf->done);
        tg_run_unlock(s->run);
    }
}

/* ---- set-up -------------------------------------------------------------------------- */

/* Per device, the micro-batch of each forward pass of its schedule. */
static tg_status forward_order(tg_session *s, tg_prefetch *pf)
{
    const tg_program *p = s->program;
    pf->forward_mb = tg_calloc((size_t)p->n_devices, sizeof *pf->forward_mb);
    pf->n_forward = tg_calloc((size_t)p->n_devices, sizeof *pf->n_forward);
    if (!pf->forward_mb || !pf->n_forward)
        return tg_error(TG_ERR_NOMEM, "session: out of memory for the host-stream prefetch");
    for (int d = 0; d < p->n_devices; d++) {
        const tg_pipe_schedule *sch = &p->schedule;
        pf->forward_mb[d] = tg_calloc((size_t)sch->n_ops[d] + 1, sizeof(int));
        if (!pf->forward_mb[d])
            return tg_error(TG_ERR_NOMEM, "session: out of memory for the host-stream prefetch");
        for (int k = 0; k < sch->n_ops[d]; k++)
            if (sch->ops[d][k].pass == TG_PASS_FORWARD)
                pf->forward_mb[d][pf->n_forward[d]++] = sch->ops[d][k].micro_batch;
    }
    return TG_OK;
}

/* Threads asked for (0: one per stream), at most one per stream; each
 * stream's owner in turn. */
static tg_status assign_threads(const tg_session *s, tg_prefetch *pf)
{
    int n = s->program->replicas * s->program->n_devices, streams = 0;
    pf->owner = tg_calloc((size_t)n, sizeof *pf->owner);
    if (!pf->owner)
        return tg_error(TG_ERR_NOMEM, "session: out of memory for the host-stream prefetch");
    for (int i = 0; i < n; i++)
        streams += streams_inputs(s, i);
    int asked = s->program->config.streams.threads;
    pf->n_threads = asked <= 0 || asked > streams ? streams : asked;
    for (int i = 0, k = 0; i < n; i++)
        pf->owner[i] = streams_inputs(s, i) ? k++ % pf->n_threads : -1;
    return TG_OK;
}

static tg_status start_threads(tg_session *s, tg_prefetch *pf)
{
    pf->threads = tg_calloc((size_t)pf->n_threads + 1, sizeof *pf->threads);
    if (!pf->threads)
        return tg_error(TG_ERR_NOMEM, "session: out of memory for the host-stream threads");
    int ceiling =
        atomic_load_explicit(&tg_exchange_spin(s->exchange)->ceiling, memory_order_relaxed);
    for (int t = 0; t < pf->n_threads; t++) {
        fill_thread *ft = &pf->threads[t];
        *ft = (fill_thread){.s = s, .index = t};
        tg_spin_init(&ft->spin, ceiling);
        int err = pthread_create(&ft->id, NULL, fill_main, ft);
        if (err != 0) {
            pf->n_threads = t; /* tg_prefetch_stop joins the ones started */
            return tg_error(TG_ERR_NOMEM,
                            "session: cannot start host-stream thread %d (%s); lower "
                            "streamCallbacks.numWorkerThreads or defaultPrefetchBufferingDepth",
                            t, strerror(err));
        }
    }
    return TG_OK;
}

static tg_status create(tg_session *s)
{
    int n = s->program->replicas * s->program->n_devices;
    tg_prefetch *pf = tg_calloc(1, sizeof *pf);
    if (!pf)
        return tg_error(TG_ERR_NOMEM, "session: out of memory for the host-stream prefetch");
    s->prefetch = pf;
    pthread_cond_init(&pf->wake, NULL);
    pthread_cond_init(&pf->done, NULL);
    pf->claimed = tg_calloc((size_t)n, sizeof(int64_t));
    pf->filled = tg_calloc((size_t)n, sizeof(int64_t));
    pf->freed = tg_calloc((size_t)n, sizeof(int64_t));
    if (!pf->claimed || !pf->filled || !pf->freed)
        return tg_error(TG_ERR_NOMEM, "session: out of memory for the host-stream prefetch");
    TG_TRY(forward_order(s, pf));
    TG_TRY(assign_threads(s, pf));
    return start_threads(s, pf);
}

/* ---- the engine's calls ------------------------------------------------------------- */

tg_status tg_prefetch_begin(tg_session *s)
{
    if (!tg_prefetch_on(s))
        return TG_OK;
    if (!s->prefetch && create(s) != TG_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", tg_error_message());
        tg_prefetch_stop(s);
        return tg_error(TG_ERR_NOMEM, "%s", why);
    }
    tg_prefetch *pf = s->prefetch;
    int n = s->program->replicas * s->program->n_devices;
    tg_run_lock(s->run);
    memset(pf->claimed, 0, (size_t)n * sizeof(int64_t));
    memset(pf->filled, 0, (size_t)n * sizeof(int64_t));
    memset(pf->freed, 0, (size_t)n * sizeof(int64_t));
    pf->running = pf->n_threads;
    pf->gen++;
    pthread_cond_broadcast(&pf->wake);
    tg_run_unlock(s->run);
    return TG_OK;
}

void tg_prefetch_end(tg_session *s)
{
    tg_prefetch *pf = s->prefetch;
    if (!pf)
        return;
    tg_run_lock(s->run);
    while (pf->running > 0)
        tg_run_wait(s->run, &pf->done);
    tg_run_unlock(s->run);
}

bool tg_prefetch_take(device_ctx *c, int64_t it, int64_t j)
{
    tg_session *s = c->s;
    tg_prefetch *pf = s->prefetch;
    int i = c->replica * s->program->n_devices + c->device;
    const tg_device_program *dp = &s->program->devices[c->device];
    int64_t q = c->forwards++, expected = q, bytes = 0;
    if (dp->n_inputs == 0)
        return true;
    double t0 = tg_engine_now();
    /* not claimed by the host-stream thread yet: copy it here, not wait */
    if (__atomic_compare_exchange_n(&pf->claimed[i], &expected, q + 1, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        bytes =
            tg_streams_copy_in(s, c->replica, c->device, it, j, it * s->program->micro_batches + j);
    else if (!tg_exchange_wait_for(s, &pf->filled[i], q + 1, "wait for host stream"))
        return false;
    c->streams += tg_engine_now() - t0;
    if (bytes == 0) /* the thread's copy: the same bytes */
        for (int k = 0; k < dp->n_inputs; k++)
            bytes += (int64_t)s->program->buffers[dp->inputs[k]].bytes;
    tg_engine_record(c, TG_EVENT_STREAM_IN, TG_PHASE_FORWARD, it, j, -1, t0, bytes, 0);
    return true;
}

void tg_prefetch_release(device_ctx *c)
{
    tg_session *s = c->s;
    if (!s->prefetch || s->program->devices[c->device].n_inputs == 0)
        return;
    int64_t *freed = &s->prefetch->freed[c->replica * s->program->n_devices + c->device];
    tg_exchange_publish(s, freed, *freed + 1);
}

void tg_prefetch_stop(tg_session *s)
{
    tg_prefetch *pf = s->prefetch;
    if (!pf)
        return;
    tg_run_lock(s->run);
    pf->stop = true;
    pthread_cond_broadcast(&pf->wake);
    tg_run_unlock(s->run);
    for (int t = 0; pf->threads && t < pf->n_threads; t++)
        pthread_join(pf->threads[t].id, NULL);
    for (int d = 0; pf->forward_mb && d < s->program->n_devices; d++)
        tg_free(pf->forward_mb[d]);
    tg_free(pf->forward_mb);
    tg_free(pf->n_forward);
    tg_free(pf->owner);
    tg_free(pf->threads);
    tg_free(pf->claimed);
    tg_free(pf->filled);
    tg_free(pf->freed);
    pthread_cond_destroy(&pf->wake);
    pthread_cond_destroy(&pf->done);
    tg_free(pf);
    s->prefetch = NULL;
}
