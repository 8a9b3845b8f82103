/* runtime/stream_io.c - the copies of offloaded tensors (compile/
 * streaming.c) on an I/O thread per (replica, device), a step ahead of the
 * device: TensorLocations.ioSchedule preload (docs/memory-locations.md).
 *
 * Within a pass the device queues the loads of the steps up to
 * preloadSteps (N) ahead before running step k, waits for step k's loads,
 * runs it, and queues its stores; the I/O thread runs the queue in order.
 * The compiler keeps each copy's bytes live over the N steps before its
 * first use and the step after its last (streaming.c, widen_for_preload),
 * so a copy in flight never shares bytes with what the running step reads
 * or writes. Before step k runs, the device
 * waits for step k's loads and for step k - 2's stores, whose copies the
 * plan may reuse from step k on (the queue runs in order, so waiting for
 * the later of the two covers both). A pass waits for all its copies
 * before it ends: the all-reduce, the update and the next pass read the
 * host copies.
 *
 * The I/O thread only copies; the device's thread records the copies as
 * profile events (with their own times) when it has waited for them, so
 * the recorder keeps one writer. Accumulations into offloaded accumulators
 * stay on the device's thread: they are arithmetic, and read a gradient
 * whose bytes are free right after.
 */
#include "runtime/stream_io.h"

#include "core/alloc.h"
#include "core/error.h"
#include "runtime/streams.h"

#include <pthread.h>
#include <string.h>

/* Copies in flight: the loads of up to TG_STREAM_AHEAD_MAX steps ahead and
 * the stores of two steps (a full queue makes the device wait, in order). */
#define IO_QUEUE 16

typedef struct io_job {
    tg_phase phase;
    const tg_step *step;
    bool in;
    int64_t it, g;
    double t0, t1; /* set by the I/O thread */
    int64_t bytes;
} io_job;

typedef struct tg_stream_io {
    tg_session *s;
    int replica, device;
    bool started;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake, done_cond;
    bool stop;             /* under lock */
    int64_t posted, done;  /* under lock */
    int64_t recorded;      /* the device's thread only */
    io_job jobs[IO_QUEUE]; /* job t in jobs[t % IO_QUEUE] */
} tg_stream_io;

static bool device_streams(const tg_program *p, int d)
{
    const tg_device_program *dp = &p->devices[d];
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
        if (dp->n_streams[ph] > 0)
            return true;
    return false;
}

bool tg_stream_io_on(const device_ctx *c)
{
    const tg_session *s = c->s;
    return s->stream_io && s->stream_io[c->replica * s->program->n_devices + c->device].started;
}

static void *io_main(void *arg)
{
    tg_stream_io *io = arg;
    int64_t next = 0;
    pthread_mutex_lock(&io->lock);
    for (;;) {
        while (!io->stop && next >= io->posted)
            pthread_cond_wait(&io->wake, &io->lock);
        if (next >= io->posted)
            break; /* stopping, and nothing queued */
        io_job job = io->jobs[next % IO_QUEUE];
        pthread_mutex_unlock(&io->lock);
        double t0 = tg_engine_now();
        int64_t bytes =
            tg_streams_copy(io->s, io->replica, io->device, job.phase, job.step, job.in, job.g);
        double t1 = tg_engine_now();
        pthread_mutex_lock(&io->lock);
        io_job *done = &io->jobs[next % IO_QUEUE];
        done->t0 = t0;
        done->t1 = t1;
        done->bytes = bytes;
        io->done = ++next;
        pthread_cond_broadcast(&io->done_cond);
    }
    pthread_mutex_unlock(&io->lock);
    return NULL;
}

tg_status tg_stream_io_start(tg_session *s)
{
    const tg_program *p = s->program;
    if (s->stream_io || !p->config.memory.preload)
        return TG_OK;
    int n = p->replicas * p->n_devices;
    bool any = false;
    for (int d = 0; d < p->n_devices; d++)
        any |= device_streams(p, d);
    if (!any)
        return TG_OK;
    if (!(s->stream_io = tg_calloc((size_t)n, sizeof *s->stream_io)))
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    for (int i = 0; i < n; i++) {
        tg_stream_io *io = &s->stream_io[i];
        *io = (tg_stream_io){.s = s, .replica = i / p->n_devices, .device = i % p->n_devices};
        if (!device_streams(p, io->device))
            continue;
        pthread_mutex_init(&io->lock, NULL);
        pthread_cond_init(&io->wake, NULL);
        pthread_cond_init(&io->done_cond, NULL);
        if (pthread_create(&io->thread, NULL, io_main, io) != 0) {
            pthread_cond_destroy(&io->wake);
            pthread_cond_destroy(&io->done_cond);
            pthread_mutex_destroy(&io->lock);
            tg_stream_io_stop(s);
            return tg_error(TG_ERR_INTERNAL,
                            "session: cannot start the I/O thread of device %d, replica %d",
                            io->device, io->replica);
        }
        io->started = true;
    }
    return TG_OK;
}

void tg_stream_io_stop(tg_session *s)
{
    if (!s->stream_io)
        return;
    int n = s->program->replicas * s->program->n_devices;
    for (int i = 0; i < n; i++) {
        tg_stream_io *io = &s->stream_io[i];
        if (!io->started)
            continue;
        pthread_mutex_lock(&io->lock);
        io->stop = true;
        pthread_cond_signal(&io->wake);
        pthread_mutex_unlock(&io->lock);
        pthread_join(io->thread, NULL);
        pthread_cond_destroy(&io->wake);
        pthread_cond_destroy(&io->done_cond);
        pthread_mutex_destroy(&io->lock);
    }
    tg_free(s->stream_io);
    s->stream_io = NULL;
}

static tg_stream_io *io_of(const device_ctx *c)
{
    return &c->s->stream_io[c->replica * c->s->program->n_devices + c->device];
}

/* Record the copies done up to `ticket` as the device's events. */
static void record_done(device_ctx *c, tg_stream_io *io, int64_t ticket)
{
    const tg_program *p = c->s->program;
    for (; io->recorded < ticket; io->recorded++) {
        const io_job *job = &io->jobs[io->recorded % IO_QUEUE];
        if (job->bytes == 0)
            continue;
        int64_t j = job->phase == TG_PHASE_UPDATE ? -1 : job->g % p->micro_batches;
        tg_engine_record_span(c, job->in ? TG_EVENT_STREAMING_LOAD : TG_EVENT_STREAMING_STORE,
                              job->phase, job->it, j, TG_EVENT_PEER_IO_THREAD, job->t0, job->t1,
                              job->bytes, 0);
    }
}

/* Wait until the copies up to `ticket` are done, and record them. */
static void wait_for(device_ctx *c, tg_stream_io *io, int64_t ticket)
{
    if (ticket <= io->recorded)
        return;
    double t0 = tg_engine_now();
    bool waited = false;
    pthread_mutex_lock(&io->lock);
    while (io->done < ticket) {
        waited = true;
        pthread_cond_wait(&io->done_cond, &io->lock);
    }
    pthread_mutex_unlock(&io->lock);
    if (waited) {
        c->stream_wait += tg_engine_now() - t0;
        const io_job *job = &io->jobs[(ticket - 1) % IO_QUEUE];
        int64_t j = job->phase == TG_PHASE_UPDATE ? -1 : job->g % c->s->program->micro_batches;
        tg_engine_record(c, TG_EVENT_STREAMING_WAIT, job->phase, job->it, j, -1, t0, 0, 0);
    }
    record_done(c, io, ticket);
}

/* Queue step k's loads (in) or stores; returns its ticket, 0 when the step
 * has no copies that way. */
static int64_t post(device_ctx *c, const tg_stream_pass *pass, int k, bool in)
{
    const tg_step *st = &c->s->program->devices[c->device].steps[pass->phase][k];
    if ((in ? st->n_stream_in : st->n_stream_out) == 0)
        return 0;
    tg_stream_io *io = io_of(c);
    int64_t ticket = io->posted + 1;    /* only this thread posts */
    wait_for(c, io, ticket - IO_QUEUE); /* the slot's previous job is recorded */
    pthread_mutex_lock(&io->lock);
    io->jobs[io->posted % IO_QUEUE] = (io_job){pass->phase, st, in, pass->it, pass->g, 0, 0, 0};
    io->posted = ticket;
    pthread_cond_signal(&io->wake);
    pthread_mutex_unlock(&io->lock);
    return ticket;
}

/* Queue the loads of the steps from pass->next_load up to `until`, never
 * past the cut before the device reaches it. */
static void queue_loads(device_ctx *c, tg_stream_pass *pass, int k, int until)
{
    if (until >= pass->end)
        until = pass->end - 1;
    if (pass->cut && k < pass->cut && until >= pass->cut)
        until = pass->cut - 1;
    for (; pass->next_load <= until; pass->next_load++)
        pass->load_ticket[pass->next_load % (pass->ahead + 1)] =
            post(c, pass, pass->next_load, true);
}

void tg_stream_io_begin(device_ctx *c, tg_stream_pass *pass)
{
    const tg_program *p = c->s->program;
    const tg_device_program *dp = &p->devices[c->device];
    int cut = tg_backward_cut(dp); /* as the streaming plan cut the backward */
    pass->cut = pass->phase == TG_PHASE_BACKWARD && cut > pass->begin && cut < pass->end ? cut : 0;
    pass->ahead = p->config.memory.preload_steps;
    if (pass->ahead < 1 || pass->ahead > TG_STREAM_AHEAD_MAX)
        pass->ahead = 1;
    pass->next_load = pass->begin;
    pass->store_ticket[0] = pass->store_ticket[1] = 0;
    pass->last_store = 0;
    queue_loads(c, pass, pass->begin, pass->begin + pass->ahead);
}

void tg_stream_io_before(device_ctx *c, tg_stream_pass *pass, int k)
{
    /* the compiler kept no copy live across the cut: nothing is loaded
     * ahead over it, and the steps before it finish their copies first */
    if (k == pass->cut && k > pass->begin) {
        tg_stream_io_end(c, pass);
        pass->store_ticket[0] = pass->store_ticket[1] = 0;
    }
    queue_loads(c, pass, k, k + pass->ahead);
    int64_t loads = pass->load_ticket[k % (pass->ahead + 1)];
    int64_t two_back = pass->store_ticket[k % 2]; /* step k - 2's stores */
    wait_for(c, io_of(c), loads > two_back ? loads : two_back);
    tg_streams_gather(c, pass->phase, &c->s->program->devices[c->device].steps[pass->phase][k],
                      pass->it, pass->g);
}

void tg_stream_io_after(device_ctx *c, tg_stream_pass *pass, int k)
{
    const tg_step *st = &c->s->program->devices[c->device].steps[pass->phase][k];
    pass->store_ticket[k % 2] = 0;
    if (st->n_stream_out == 0)
        return;
    double t0 = tg_engine_now();
    int64_t added = tg_streams_accumulate(c, pass->phase, st, pass->g);
    if (added) {
        int64_t j = pass->phase == TG_PHASE_UPDATE ? -1 : pass->g % c->s->program->micro_batches;
        tg_engine_record(c, TG_EVENT_STREAMING_STORE, pass->phase, pass->it, j, -1, t0, added, 0);
    }
    pass->store_ticket[k % 2] = post(c, pass, k, false);
    if (pass->store_ticket[k % 2])
        pass->last_store = pass->store_ticket[k % 2];
}

void tg_stream_io_end(device_ctx *c, tg_stream_pass *pass)
{
    (void)pass;
    tg_stream_io *io = io_of(c);
    wait_for(c, io, io->posted);
}

void tg_stream_io_stores_done(device_ctx *c, tg_stream_pass *pass)
{
    wait_for(c, io_of(c), pass->last_store);
}
