/* runtime/exchange.c - what devices and replicas exchange during a run:
 * inter-device copies (transfers) with their flow control, and the
 * barriers the all-reduce and the update decisions meet at.
 *
 * A transfer's receive buffer has one slot per micro-batch in flight on the
 * receiver; the sender waits until the slot of micro-batch g is free and
 * the receiver waits until micro-batch g has arrived. Every wait wakes on
 * the run's abort flag (tg_exchange_fail), so a failing step never hangs,
 * and spins only within an adaptive budget before sleeping (core/wait.h),
 * so a device whose peer is off the CPU does not burn its time slice.
 */
#include "runtime/exchange.h"
#include "runtime/run_control.h"

#include "core/alloc.h"
#include "core/error.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* ---- the part ------------------------------------------------------------------------- */

/* The run's counters and barriers. The lock, the `changed` condition and
 * the abort flag they wait under stay the session's: the prefetch threads
 * (runtime/prefetch.c) sleep under them too. */
struct tg_exchange_state {
    int64_t *produced, *consumed;         /* [replica * n_transfers + transfer] */
    int64_t *barrier_count, *barrier_gen; /* per device: its replicas meet */
    int64_t *group_count, *group_gen;     /* per replica: its devices meet */
    tg_spin spin;                         /* how long the waits of exchange.c spin */
    /* the same for the transfer waits of each (replica, device): a stage
     * that waits long for a slower one (its budget shrinks, it sleeps) must
     * not take the spin from the slower stage's short waits, where a sleep
     * and wake-up is most of the hand-off (issue 45) */
    tg_spin *transfer_spin;
    int n_transfers, replicas, n_devices;
};

tg_status tg_exchange_create(const tg_program *p, int spin_ceiling, tg_exchange_state **out)
{
    tg_exchange_state *x = tg_calloc(1, sizeof *x);
    if (!x)
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    *out = x;
    int n = p->replicas * p->n_devices;
    x->n_transfers = p->n_transfers;
    x->replicas = p->replicas;
    x->n_devices = p->n_devices;
    x->produced = tg_calloc((size_t)(p->n_transfers * p->replicas) + 1, sizeof(int64_t));
    x->consumed = tg_calloc((size_t)(p->n_transfers * p->replicas) + 1, sizeof(int64_t));
    x->barrier_count = tg_calloc((size_t)p->n_devices, sizeof(int64_t));
    x->barrier_gen = tg_calloc((size_t)p->n_devices, sizeof(int64_t));
    x->group_count = tg_calloc((size_t)p->replicas, sizeof(int64_t));
    x->group_gen = tg_calloc((size_t)p->replicas, sizeof(int64_t));
    x->transfer_spin = tg_calloc((size_t)n, sizeof *x->transfer_spin);
    if (!x->produced || !x->consumed || !x->barrier_count || !x->barrier_gen || !x->group_count ||
        !x->group_gen || !x->transfer_spin)
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    tg_spin_init(&x->spin, spin_ceiling);
    for (int i = 0; i < n; i++)
        tg_spin_init(&x->transfer_spin[i], spin_ceiling);
    return TG_OK;
}

void tg_exchange_free(tg_exchange_state *x)
{
    if (!x)
        return;
    tg_free(x->produced);
    tg_free(x->consumed);
    tg_free(x->barrier_count);
    tg_free(x->barrier_gen);
    tg_free(x->group_count);
    tg_free(x->group_gen);
    tg_free(x->transfer_spin);
    tg_free(x);
}

void tg_exchange_begin_run(tg_exchange_state *x)
{
    memset(x->produced, 0, sizeof(int64_t) * (size_t)(x->n_transfers * x->replicas + 1));
    memset(x->consumed, 0, sizeof(int64_t) * (size_t)(x->n_transfers * x->replicas + 1));
    /* an aborted step may have left devices counted in at a barrier */
    memset(x->barrier_count, 0, sizeof(int64_t) * (size_t)x->n_devices);
    memset(x->group_count, 0, sizeof(int64_t) * (size_t)x->replicas);
}

tg_spin *tg_exchange_spin(tg_exchange_state *x)
{
    return &x->spin;
}

/* ---- synchronisation ------------------------------------------------------------------- */

void tg_exchange_fail(tg_session *s, tg_status st, const char *msg)
{
    tg_run_fail(s->run, st, msg);
}

/* A channel looked up once; device threads may race to the first lookup,
 * which is harmless (the same pointer) but must be atomic. */
tg_trace_channel *tg_exchange_cached_channel(tg_trace_channel **cache, const char *name)
{
    tg_trace_channel *ch = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (!ch) {
        ch = tg_trace_channel_get(name);
        __atomic_store_n(cache, ch, __ATOMIC_RELEASE);
    }
    return ch;
}

tg_trace_channel *tg_exchange_comms_channel(void)
{
    static tg_trace_channel *ch;
    return tg_exchange_cached_channel(&ch, "comms");
}

/* Every wait below: spin within the session's budget, yield, then sleep on
 * `changed` (core/wait.h). Counters and generations are written under the
 * lock but atomically, so the spinning phase may read them without it. */
static bool aborted(const tg_session *s)
{
    return tg_run_aborted(s->run);
}

typedef struct {
    tg_session *s;
    const int64_t *counter;
    int64_t target;
} reach;

static bool reached(void *arg)
{
    const reach *r = arg;
    return __atomic_load_n(r->counter, __ATOMIC_ACQUIRE) >= r->target || aborted(r->s);
}

/* Wait until *counter >= target, spinning within `spin`'s budget. */
static bool wait_with(tg_session *s, tg_spin *spin, const int64_t *counter, int64_t target,
                      const char *what)
{
    reach r = {s, counter, target};
    if (reached(&r))
        return !aborted(s);
    tg_trace_begin(tg_exchange_comms_channel(), what);
    if (!tg_spin_wait(spin, reached, &r)) {
        tg_run_lock(s->run);
        while (!reached(&r))
            tg_run_wait(s->run, NULL);
        tg_run_unlock(s->run);
    }
    tg_trace_end(tg_exchange_comms_channel());
    return !aborted(s);
}

bool tg_exchange_wait_for(tg_session *s, const int64_t *counter, int64_t target, const char *what)
{
    return wait_with(s, &s->exchange->spin, counter, target, what);
}

/* Device c's own spin budget for its transfer waits. */
static tg_spin *transfer_spin(const device_ctx *c)
{
    return &c->s->exchange->transfer_spin[c->replica * c->s->program->n_devices + c->device];
}

void tg_exchange_publish(tg_session *s, int64_t *counter, int64_t value)
{
    tg_run_lock(s->run);
    __atomic_store_n(counter, value, __ATOMIC_RELEASE);
    tg_run_broadcast(s->run);
    tg_run_unlock(s->run);
}

typedef struct {
    tg_session *s;
    const int64_t *gen_p;
    int64_t gen;
} passed;

static bool moved_on(void *arg)
{
    const passed *b = arg;
    return __atomic_load_n(b->gen_p, __ATOMIC_ACQUIRE) != b->gen || aborted(b->s);
}

/* Wait until `parties` threads have arrived at the barrier (count, gen);
 * false if the run was aborted. The last to arrive bumps the generation. */
static bool barrier(tg_session *s, int64_t *count, int64_t *gen_p, int parties)
{
    tg_run_lock(s->run);
    passed b = {s, gen_p, __atomic_load_n(gen_p, __ATOMIC_ACQUIRE)};
    if (++*count == parties) {
        *count = 0;
        __atomic_store_n(gen_p, b.gen + 1, __ATOMIC_RELEASE);
        tg_run_broadcast(s->run);
        tg_run_unlock(s->run);
        return !aborted(s);
    }
    tg_run_unlock(s->run);
    /* Replicas usually arrive within microseconds of each other, so a short
     * spin saves a wake-up; one that is off the CPU is slept through. */
    if (!tg_spin_wait(&s->exchange->spin, moved_on, &b)) {
        tg_run_lock(s->run);
        while (!moved_on(&b))
            tg_run_wait(s->run, NULL);
        tg_run_unlock(s->run);
    }
    return !aborted(s);
}

/* The same device of every replica (the all-reduce). */
bool tg_exchange_replica_barrier(tg_session *s, int device)
{
    return barrier(s, &s->exchange->barrier_count[device], &s->exchange->barrier_gen[device],
                   s->program->replicas);
}

/* Every device of one replica (agreeing on a skipped update). */
bool tg_exchange_device_barrier(tg_session *s, int replica)
{
    return barrier(s, &s->exchange->group_count[replica], &s->exchange->group_gen[replica],
                   s->program->n_devices);
}

static int64_t *produced(tg_session *s, int r, int t)
{
    return &s->exchange->produced[r * s->program->n_transfers + t];
}
static int64_t *consumed(tg_session *s, int r, int t)
{
    return &s->exchange->consumed[r * s->program->n_transfers + t];
}

/* Wait until transfer t's micro-batch g has arrived on device c. */
static bool receive_one(device_ctx *c, int t, tg_phase ph, int64_t g)
{
    const tg_program *p = c->s->program;
    double t0 = tg_engine_now();
    if (!wait_with(c->s, transfer_spin(c), produced(c->s, c->replica, t), g + 1, "wait for device"))
        return false;
    int64_t m = p->micro_batches;
    tg_engine_record(c, TG_EVENT_WAIT, ph, g / m, g % m, p->transfers[t].src_device, t0, 0, 0);
    return true;
}

/* Wait for everything this device receives for micro-batch g in phase ph
 * before the pass starts (not what a ParallelIPU pass waits for inside). */
bool tg_exchange_receive(device_ctx *c, tg_phase ph, int64_t g)
{
    const tg_program *p = c->s->program;
    for (int t = 0; t < p->n_transfers; t++) {
        const tg_transfer *tr = &p->transfers[t];
        bool used = ph == TG_PHASE_FORWARD ? tr->used_forward : tr->used_backward;
        if (tr->dst_device != c->device || !used || (ph != TG_PHASE_UPDATE && tr->recv_at[ph] >= 0))
            continue;
        if (!receive_one(c, t, ph, g))
            return false;
    }
    return true;
}

/* Free the receive slots whose last use on this device was phase ph. */
void tg_exchange_release(device_ctx *c, tg_phase ph, int64_t g)
{
    const tg_program *p = c->s->program;
    for (int t = 0; t < p->n_transfers; t++) {
        const tg_transfer *tr = &p->transfers[t];
        tg_phase last = tr->used_backward ? TG_PHASE_BACKWARD : TG_PHASE_FORWARD;
        if (tr->dst_device == c->device && last == ph)
            tg_exchange_publish(c->s, consumed(c->s, c->replica, t), g + 1);
    }
}

/* Copy transfer t's micro-batch g once the receiver's slot is free. */
static bool send_one(device_ctx *c, int t, tg_phase ph, int64_t g)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_transfer *tr = &p->transfers[t];
    int slots = p->buffers[tr->dst_buffer].slots;
    int64_t m = p->micro_batches;
    double t0 = tg_engine_now();
    if (!wait_with(s, transfer_spin(c), consumed(s, c->replica, t), g + 1 - slots,
                   "wait for free slot"))
        return false;
    double t1 = tg_engine_now();
    if (t1 - t0 > 1e-6) /* the receiver had no free slot: a wait, not copy time */
        tg_engine_record(c, TG_EVENT_SLOT_WAIT, ph, g / m, g % m, tr->dst_device, t0, 0, 0);
    memcpy(tg_engine_slot_ptr(s, c->replica, tr->dst_buffer, g),
           tg_engine_slot_ptr(s, c->replica, tr->src_buffer, g), p->buffers[tr->src_buffer].bytes);
    tg_exchange_publish(s, produced(s, c->replica, t), g + 1);
    tg_engine_record(c, TG_EVENT_COPY, ph, g / m, g % m, tr->dst_device, t1,
                     (int64_t)p->buffers[tr->src_buffer].bytes, 0);
    return true;
}

/* Copy what this device produced in phase ph to the devices that read it
 * (what a ParallelIPU pass sends inside it went already). */
bool tg_exchange_send(device_ctx *c, tg_phase ph, int64_t g)
{
    const tg_program *p = c->s->program;
    for (int t = 0; t < p->n_transfers; t++) {
        const tg_transfer *tr = &p->transfers[t];
        if (tr->src_device == c->device && tr->phase == ph && tr->send_at < 0 &&
            !send_one(c, t, ph, g))
            return false;
    }
    return true;
}

bool tg_exchange_sends_offloaded(const device_ctx *c, tg_phase ph, int k)
{
    const tg_program *p = c->s->program;
    for (int t = 0; t < p->n_transfers; t++) {
        const tg_transfer *tr = &p->transfers[t];
        if (tr->src_device == c->device && tr->phase == ph && tr->send_at == k &&
            p->buffers[tr->src_buffer].offloaded)
            return true;
    }
    return false;
}

/* Sends before receives: the other device may be waiting for what this
 * one sends before it makes what this one waits for. */
bool tg_exchange_at_step(device_ctx *c, tg_phase ph, int64_t g, int k)
{
    const tg_program *p = c->s->program;
    for (int t = 0; t < p->n_transfers; t++) {
        const tg_transfer *tr = &p->transfers[t];
        if (tr->src_device == c->device && tr->phase == ph && tr->send_at == k &&
            !send_one(c, t, ph, g))
            return false;
    }
    for (int t = 0; t < p->n_transfers; t++) {
        const tg_transfer *tr = &p->transfers[t];
        if (tr->dst_device == c->device && ph != TG_PHASE_UPDATE && tr->recv_at[ph] == k &&
            !receive_one(c, t, ph, g))
            return false;
    }
    return true;
}

bool tg_exchange_aborted(const tg_session *s)
{
    return aborted(s);
}
