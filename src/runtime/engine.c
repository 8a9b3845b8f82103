/* runtime/engine.c - a compiled program on its devices: the engine (the
 * host step, the device loop and its steps). Creating a session and moving
 * data in and out of it is runtime/session.c.
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
 * devices of a replica meet once more (update_runs): to agree whether a
 * gradient overflowed and, with max_grad_norm, on the gradients' global norm.
 */
#include "runtime/session_state.h"
#include "runtime/monitor.h"
#include "compile/layout.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/pool.h"
#include "core/convert.h"
#include "core/rng.h"
#include "graph/init.h"
#include "ops/op.h"
#include "graph/optim_params.h"
#include "profile/profile.h"
#include "runtime/allreduce.h"
#include "runtime/buckets.h"
#include "runtime/exchange.h"
#include "runtime/prefetch.h"
#include "runtime/stream_io.h"
#include "runtime/streams.h"
#include "runtime/verify.h"
#include "runtime/staging.h"
#include "tilegraph/trace.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

double tg_engine_now(void)
{
    return tg_clock_seconds();
}

#define now_s tg_engine_now

/* Record an event that ran from t0 to now (seconds); no-op when not recording. */
void tg_engine_record_span(device_ctx *c, tg_event_kind kind, tg_phase ph, int64_t it, int64_t j,
                           int peer, double t0, double t1, int64_t bytes, double flops)
{
    tg_profile_recorder *r = c->rec;
    if (!r || r->n_events >= r->cap_events)
        return;
    double origin = c->s->t_origin;
    r->events[r->n_events++] = (tg_profile_event){(int16_t)kind,
                                                  (int16_t)ph,
                                                  (int32_t)j,
                                                  (int32_t)it,
                                                  peer,
                                                  (int64_t)((t0 - origin) * 1e9),
                                                  (int64_t)((t1 - origin) * 1e9),
                                                  bytes,
                                                  flops};
}

void tg_engine_record(device_ctx *c, tg_event_kind kind, tg_phase ph, int64_t it, int64_t j,
                      int peer, double t0, int64_t bytes, double flops)
{
    if (c->rec)
        tg_engine_record_span(c, kind, ph, it, j, peer, t0, now_s(), bytes, flops);
}

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

/* ---- phases ---------------------------------------------------------------------- */

/* Replicated tensor sharding: this replica updates only its share of the
 * weight. The kernel gets a view of the node with every input one shard
 * long (built in *node and in[]), the weight and gradient pointers moved to
 * the shard's start; the state buffers hold just the shard. Element-wise
 * updates make the result bit-identical to updating the whole tensor. */
static const tg_tensor *shard_view(device_ctx *c, const tg_step *st, const tg_tensor *t,
                                   tg_kernel_args *a, tg_update_opts *so, tg_tensor *node,
                                   tg_tensor *in)
{
    const tg_program *p = c->s->program;
    int64_t begin, end;
    tg_shard_range(tg_numel(t->in[0]), c->s->replica_offset + c->replica, tg_program_shards(p),
                   &begin, &end);
    *node = *t;
    for (int k = 0; k < t->n_in; k++) {
        in[k] = *t->in[k];
        in[k].shape = tg_shape1(end - begin);
        node->in[k] = &in[k];
        if (!p->buffers[st->in[k]].sharded)
            a->in[k] = (unsigned char *)a->in[k] +
                       (size_t)begin * tg_dtype_size(p->buffers[st->in[k]].dtype);
    }
    a->node = node;
    so->first = begin;
    return node;
}

/* The storage types of a step that reads them itself (tg_step_reads_native). */
static void native_types(const tg_program *p, const tg_step *st, tg_kernel_args *a)
{
    const tg_tensor *t = p->graph->nodes[st->node];
    for (int k = 0; k < t->n_in; k++)
        a->in_type[k] = st->in[k] >= 0 ? p->buffers[st->in[k]].dtype : TG_F32;
    a->out_type = st->out >= 0 ? p->buffers[st->out].dtype : TG_F32;
}

/* Steps [begin, end) of phase ph for micro-batch g (slot g). */
static void run_range(device_ctx *c, tg_phase ph, int64_t it, int64_t g, int begin, int end)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_device_program *dp = &p->devices[c->device];
    unsigned char *arena = s->arena[c->replica * p->n_devices + c->device];
    tg_pool *pool = s->pools[c->replica * p->n_devices + c->device];
    /* offloaded tensors' copies: on the I/O thread a step ahead, or here */
    tg_stream_pass io = {.phase = ph, .begin = begin, .end = end, .it = it, .g = g};
    bool preload = tg_stream_io_on(c);
    if (preload)
        tg_stream_io_begin(c, &io);
    for (int k = begin; k < end; k++) {
        const tg_step *st = &dp->steps[ph][k];
        const tg_tensor *t = p->graph->nodes[st->node];
        tg_kernel_args a = {
            .node = t,
            .out = st->out >= 0 ? tg_engine_slot_ptr(s, c->replica, st->out, g) : NULL,
            .scratch = st->scratch_bytes ? arena + st->scratch_offset : NULL,
            .scratch_bytes = st->scratch_bytes,
            .pool = pool,
            /* an inference program makes no updates: its random ops
             * (ops/random.c) draw afresh each host step instead */
            .step = p->training ? s->step + it : s->runs * p->iterations + it,
            .seed = s->seed,
            /* the job's replica index: an instance's replicas draw what
             * the same replicas draw in one process */
            .stream = (uint64_t)(s->replica_offset + c->replica) * 0x100000000ull + (uint64_t)g,
            .plan = p->plans[t->id].state,
            .blocked = p->layout && (p->layout[t->id] & TG_LAYOUT_OP_BLOCKED),
        };
        for (int i = 0; i < t->n_in; i++)
            a.in[i] = st->in[i] >= 0 ? tg_engine_slot_ptr(s, c->replica, st->in[i], g) : NULL;
        if (!st->staged && tg_step_reads_native(p, st))
            native_types(p, st, &a);
        if (preload)
            tg_stream_io_before(c, &io, k);
        else
            tg_streams_step(c, ph, st, true, it, g);
        float scale = ph == TG_PHASE_UPDATE ? c->grad_scale : c->loss_scale;
        tg_update_opts so = {1.0f / scale, p->precision.stochastic_rounding, 0, 0};
        if (so.stochastic && ph == TG_PHASE_UPDATE)
            so.round_key = tg_hash64(
                s->seed ^ tg_hash64((uint64_t)(s->step + it) * 0x10000u + (uint64_t)t->id));
        tg_tensor shard_node, shard_in[TG_MAX_INPUTS];
        if (ph == TG_PHASE_UPDATE && tg_allreduce_is_sharded_update(p, st, t))
            t = shard_view(c, st, t, &a, &so, &shard_node, shard_in);
        void *stored_out = a.out; /* staging points a.out at its f32 copy */
        if (c->rec) {
            double t0 = now_s();
            tg_stage_run(p, st, &a, &so);
            c->rec->op_ns[t->id] += (int64_t)((now_s() - t0) * 1e9);
            c->rec->op_calls[t->id]++;
        } else {
            tg_stage_run(p, st, &a, &so);
        }
        if (g == 0 && c->replica == 0 && tg_verify_capturing(s->verify))
            tg_verify_capture(s->verify, p, st, stored_out);
        if (preload)
            tg_stream_io_after(c, &io, k);
        else
            tg_streams_step(c, ph, st, false, it, g);
        if (c->buckets_done < c->buckets_sent) /* gradient buckets in flight */
            tg_buckets_progress(c, it);
    }
    if (preload)
        tg_stream_io_end(c, &io);
}

static void run_steps(device_ctx *c, tg_phase ph, int64_t it, int64_t g)
{
    run_range(c, ph, it, g, 0, c->s->program->devices[c->device].n_steps[ph]);
}

static bool forward(device_ctx *c, int64_t it, int64_t j)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_device_program *dp = &p->devices[c->device];
    int64_t g = it * p->micro_batches + j;
    if (!tg_exchange_receive(c, TG_PHASE_FORWARD, g))
        return false;
    double t0 = now_s();
    if (!tg_prefetch_on(s))
        tg_streams_inputs(c, it, j, g);
    else if (!tg_prefetch_take(c, it, j))
        return false;
    double t1 = now_s();
    run_steps(c, TG_PHASE_FORWARD, it, g);
    tg_engine_record(c, TG_EVENT_PHASE, TG_PHASE_FORWARD, it, j, -1, t1, 0,
                     dp->flops[TG_PHASE_FORWARD]);
    c->busy += now_s() - t0;
    if (p->training && ++c->in_flight > c->max_in_flight)
        c->max_in_flight = c->in_flight;
    if (!tg_streams_outputs(c, it, j, g))
        return false;
    if (!p->training)
        tg_prefetch_release(c);
    tg_exchange_release(c, TG_PHASE_FORWARD, g);
    return tg_exchange_send(c, TG_PHASE_FORWARD, g);
}

/* acc = g (first micro-batch j) or acc + g; on the last micro-batch of a
 * single replica also scaled to the mean (with replicas the all-reduce
 * does it). */
void tg_engine_accumulate(device_ctx *c, int acc_buffer, int grad_buffer, int64_t j, int64_t g)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_buffer *acc = &p->buffers[acc_buffer], *grad = &p->buffers[grad_buffer];
    float scale = 1.0f / (float)(p->micro_batches * s->global_replicas);
    bool last = j == p->micro_batches - 1 && s->global_replicas == 1;
    tg_accumulate_typed(tg_engine_slot_ptr(s, c->replica, acc_buffer, 0), acc->dtype,
                        tg_engine_slot_ptr(s, c->replica, grad_buffer, g), grad->dtype,
                        tg_numel(p->graph->nodes[acc->node]), j == 0, last ? scale : 1.0f);
}

/* Every accumulator not added into already after its gradient's last step
 * (tg_accumulator.early). */
static void accumulate(device_ctx *c, int64_t j, int64_t g)
{
    const tg_device_program *dp = &c->s->program->devices[c->device];
    for (int k = 0; k < dp->n_accumulators; k++)
        if (!dp->accumulators[k].early)
            tg_engine_accumulate(c, dp->accumulators[k].acc_buffer, dp->accumulators[k].grad_buffer,
                                 j, g);
}

/* Backward steps [from, to) of micro-batch j as `pass`. In the op that
 * finishes the update's accumulators under gradient buckets
 * (runtime/buckets.h), each bucket's gradients are accumulated and sent to
 * the other instances as soon as the bucket's last step has run, and the
 * rest of the backward computes meanwhile; returns true then (the
 * accumulation is done). The sum over the
 * instances is still taken in the all-reduce, so no bit changes. */
static bool run_backward(device_ctx *c, tg_pipe_pass pass, int64_t it, int64_t j, int64_t g,
                         int from, int to)
{
    const tg_bucket_plan *b = tg_buckets_finishing(c, pass, j);
    if (!b) {
        run_range(c, TG_PHASE_BACKWARD, it, g, from, to);
        return false;
    }
    int k = from;
    for (int i = 0; i < b->n_buckets; i++) {
        const tg_bucket *bk = &b->buckets[i];
        int until = bk->ready + 1 < to ? bk->ready + 1 : to;
        if (until > k) {
            run_range(c, TG_PHASE_BACKWARD, it, g, k, until);
            k = until;
        }
        tg_buckets_send(c, i, j, g);
    }
    run_range(c, TG_PHASE_BACKWARD, it, g, k, to);
    return true;
}

/* The end of a micro-batch's backward: its gradients into the
 * accumulators (unless the buckets added them already), its stash and
 * received slots free. */
static void backward_done(device_ctx *c, int64_t it, int64_t j, int64_t g, double t0,
                          bool accumulated)
{
    const tg_program *p = c->s->program;
    c->in_flight--;
    if (p->accumulate && !accumulated) {
        double t1 = now_s();
        accumulate(c, j, g);
        tg_engine_record(c, TG_EVENT_ACCUMULATE, TG_PHASE_BACKWARD, it, j, -1, t1, 0, 0);
    }
    c->busy += now_s() - t0;
    tg_prefetch_release(c);
    tg_exchange_release(c, TG_PHASE_BACKWARD, g);
}

/* The FLOPs of device c's backward steps [from, to), for the profile: in a
 * split schedule B and W each record their own. 0 when the run is not
 * recorded (the sum is not free). */
static double backward_flops(const device_ctx *c, int from, int to)
{
    const tg_program *p = c->s->program;
    const tg_device_program *dp = &p->devices[c->device];
    if (!c->rec)
        return 0;
    if (from == 0 && to == dp->n_steps[TG_PHASE_BACKWARD])
        return dp->flops[TG_PHASE_BACKWARD];
    double flops = 0;
    for (int k = from; k < to; k++) {
        const tg_tensor *t = p->graph->nodes[dp->steps[TG_PHASE_BACKWARD][k].node];
        const tg_op_def *def = tg_op_get(t->op);
        if (def && def->flops)
            flops += def->flops(t);
    }
    return flops;
}

/* The backward of micro-batch j: all of it, or in a split schedule the
 * input gradient (B) alone, whose result the previous stage waits for. */
static bool backward(device_ctx *c, int64_t it, int64_t j)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_device_program *dp = &p->devices[c->device];
    bool split = tg_pipe_schedule_splits(&p->schedule);
    int64_t g = it * p->micro_batches + j;
    if (!tg_exchange_receive(c, TG_PHASE_BACKWARD, g))
        return false;
    double t0 = now_s();
    int end = split ? dp->input_grad_steps : dp->n_steps[TG_PHASE_BACKWARD];
    bool accumulated = run_backward(c, TG_PASS_BACKWARD, it, j, g, 0, end);
    tg_engine_record(c, TG_EVENT_PHASE, TG_PHASE_BACKWARD, it, j, -1, t0, 0,
                     backward_flops(c, 0, end));
    if (split)
        c->busy += now_s() - t0;
    else
        backward_done(c, it, j, g, t0, accumulated);
    return tg_exchange_send(c, TG_PHASE_BACKWARD, g);
}

/* The weight gradient (W) of micro-batch j in a split schedule: its
 * inputs arrived for its B, which ran before it on this device. */
static bool weight(device_ctx *c, int64_t it, int64_t j)
{
    const tg_program *p = c->s->program;
    const tg_device_program *dp = &p->devices[c->device];
    int64_t g = it * p->micro_batches + j;
    double t0 = now_s();
    bool accumulated = run_backward(c, TG_PASS_WEIGHT, it, j, g, dp->input_grad_steps,
                                    dp->n_steps[TG_PHASE_BACKWARD]);
    /* an execute event of the backward phase, so the profile's busy time
     * counts it, with the FLOPs of W's steps */
    tg_engine_record(c, TG_EVENT_PHASE, TG_PHASE_BACKWARD, it, j, -1, t0, 0,
                     backward_flops(c, dp->input_grad_steps, dp->n_steps[TG_PHASE_BACKWARD]));
    backward_done(c, it, j, g, t0, accumulated);
    return true;
}

/* The parameter whose gradient (as the update will read it) holds a NaN or
 * an infinity on this device, or NULL. */
static const tg_tensor *overflowed_gradient(device_ctx *c)
{
    const tg_program *p = c->s->program;
    const tg_device_program *dp = &p->devices[c->device];
    for (int k = 0; k < dp->n_steps[TG_PHASE_UPDATE]; k++) {
        const tg_step *st = &dp->steps[TG_PHASE_UPDATE][k];
        const tg_tensor *u = p->graph->nodes[st->node];
        int b = st->in[u->n_in - 1];
        if (!tg_is_weight_update(u) || b < 0)
            continue;
        if (tg_first_nonfinite(tg_engine_slot_ptr(c->s, c->replica, b, 0), p->buffers[b].dtype,
                               (size_t)tg_numel(u->in[0])) >= 0)
            return u->in[0];
    }
    return NULL;
}

/* The gradient-clipping work over this device's updates: each update's sum
 * of squares (or its scaling) is done whole by one thread, so spreading the
 * updates over the device's threads changes no bit. */
typedef struct clip_job {
    device_ctx *c;
    double *sums; /* indexed by node id: post the sums here... */
    float factor; /* ...or scale the gradients by this */
} clip_job;

static void clip_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const clip_job *j = ctx;
    tg_session *s = j->c->s;
    const tg_program *p = s->program;
    const tg_device_program *dp = &p->devices[j->c->device];
    for (int64_t k = begin; k < end; k++) {
        const tg_step *st = &dp->steps[TG_PHASE_UPDATE][k];
        const tg_tensor *u = p->graph->nodes[st->node];
        int b = st->in[u->n_in - 1];
        if (!tg_is_weight_update(u) || b < 0)
            continue;
        void *grad = tg_engine_slot_ptr(s, j->c->replica, b, 0);
        if (j->sums)
            j->sums[st->node] = tg_sum_squares_typed(grad, p->buffers[b].dtype, tg_numel(u->in[0]));
        else
            tg_scale_typed(grad, p->buffers[b].dtype, tg_numel(u->in[0]), j->factor);
    }
}

static void clip_run(clip_job *j)
{
    const tg_program *p = j->c->s->program;
    int n = p->devices[j->c->device].n_steps[TG_PHASE_UPDATE];
    tg_pool *pool = j->c->s->pools[j->c->replica * p->n_devices + j->c->device];
    if (n > 1 && tg_pool_threads(pool) > 1)
        tg_pool_for(pool, n, clip_range, j);
    else if (n > 0)
        clip_range(j, 0, n, 0);
}

/* This replica's row of sums for update `it`. The rows alternate with the
 * update's parity: a device can be at most one update ahead of the others
 * (the barrier), so it never overwrites sums another still reads. */
static double *grad_squares_row(device_ctx *c, int64_t it)
{
    tg_session *s = c->s;
    size_t row = (size_t)((s->step + it) & 1) * (size_t)s->program->replicas + (size_t)c->replica;
    return s->grad_squares + row * (size_t)s->graph->n_nodes;
}

/* clip_grad_norm_ over every parameter of the model: the global norm from
 * all devices' sums (posted before the barrier), added in graph order
 * whatever the placement (so one device, a pipeline and replicas agree to
 * the bit), unscaled by the loss scale the gradients were made with; then
 * this device scales its own gradients. */
static void clip_gradients(device_ctx *c, int64_t it, float loss_scale)
{
    tg_session *s = c->s;
    const tg_graph *g = s->graph;
    const double *all = grad_squares_row(c, it);
    double total = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (tg_is_weight_update(g->nodes[i]))
            total += all[i];
    bool scaled = s->program->precision.loss_scaling != TG_LOSS_SCALING_NONE;
    double norm = sqrt(total) / (scaled ? (double)loss_scale : 1.0);
    clip_job j = {c, NULL, tg_grad_clip_factor(norm, s->max_grad_norm)};
    if (j.factor < 1.0f)
        clip_run(&j);
}

/* Dynamic loss scaling: halve after an overflow, double after
 * growth_interval good updates. */
static void adjust_loss_scale(device_ctx *c, bool overflow)
{
    const tg_precision *pr = &c->s->program->precision;
    bool dynamic = pr->loss_scaling == TG_LOSS_SCALING_DYNAMIC;
    if (overflow) {
        c->skipped_updates++;
        c->good_updates = 0;
        if (dynamic && c->loss_scale > 1.0f / 16384)
            c->loss_scale *= 0.5f;
    } else if (dynamic && ++c->good_updates >= pr->growth_interval) {
        c->good_updates = 0;
        if (c->loss_scale < 16777216.0f)
            c->loss_scale *= 2.0f;
    }
}

/* Whether update `it` runs. Every device of a replica checks its gradients
 * and they agree (a barrier) whether any overflowed; then each adjusts its
 * copy of the loss scale the same way. Without loss scaling an overflow is
 * an error naming the step and the parameter. With max_grad_norm the same
 * barrier carries each device's gradients' sums of squares, and every device
 * clips its gradients by the global norm before any update runs. Replicas
 * need no exchange: after the all-reduce their gradients are identical, and
 * so are their norms. Sets *ok false on failure. */
static bool update_runs(device_ctx *c, int64_t it, bool *ok)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_precision *pr = &p->precision;
    *ok = true;
    c->grad_scale = c->loss_scale; /* before adjust_loss_scale may grow it */
    bool clip = s->max_grad_norm > 0;
    if (!s->check_overflow && !clip)
        return true;
    int64_t mark = s->step + it + 1;
    const tg_tensor *bad = s->check_overflow ? overflowed_gradient(c) : NULL;
    if (bad && pr->loss_scaling == TG_LOSS_SCALING_NONE && s->check_nan) {
        char msg[512];
        snprintf(msg, sizeof msg,
                 "step %lld, replica %d: the gradient of '%s' (stored as %s) "
                 "holds NaN or infinity; turn on loss scaling (lossScaling=dynamic), lower the "
                 "learning rate, or store the model in bf16",
                 (long long)(s->step + it), c->replica, bad->name, tg_dtype_name(pr->model));
        tg_exchange_fail(s, TG_ERR_NUMERIC, msg);
        *ok = false;
        return false;
    }
    if (bad)
        __atomic_store_n(&s->overflow_mark[c->replica], mark, __ATOMIC_RELEASE);
    if (clip) { /* this device's sums, for every device to read after the barrier */
        clip_job j = {c, grad_squares_row(c, it), 1.0f};
        clip_run(&j);
    }
    if (p->n_devices > 1 && !tg_exchange_device_barrier(s, c->replica)) {
        *ok = false;
        return false;
    }
    bool overflow = s->check_overflow &&
                    __atomic_load_n(&s->overflow_mark[c->replica], __ATOMIC_ACQUIRE) == mark;
    if (s->check_overflow)
        adjust_loss_scale(c, overflow);
    if (clip && !overflow)
        clip_gradients(c, it, c->grad_scale);
    return !overflow;
}

/* The loss gradient's seed is the loss scale. */
static void write_loss_scale(device_ctx *c)
{
    tg_session *s = c->s;
    int b = s->seed_buffer;
    if (b >= 0 && s->program->buffers[b].device == c->device)
        memcpy(tg_engine_slot_ptr(s, c->replica, b, 0), &c->loss_scale, sizeof(float));
}

/* The host trace's name for the thread that runs device `index`. */
static void name_device_thread(const tg_session *s, int index)
{
    char name[48];
    snprintf(name, sizeof name, "replica %d device %d", index / s->program->n_devices,
             index % s->program->n_devices);
    tg_trace_thread_name(tg_trace_intern(name));
}

/* The all-reduce's event: a reduce-scatter when it summed some sharded
 * weight's gradient by shards (runtime/allreduce.c). */
static tg_event_kind reduce_kind(const device_ctx *c)
{
    const tg_device_program *dp = &c->s->program->devices[c->device];
    for (int k = 0; k < dp->n_accumulators; k++)
        if (tg_allreduce_scatters(c->s, &dp->accumulators[k]))
            return TG_EVENT_REDUCE_SCATTER;
    return TG_EVENT_ALL_REDUCE;
}

/* One host step of one device: deviceIterations times its schedule, the
 * all-reduce and the update. Returns early when the step is aborted. */
static void device_main(device_ctx *c)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_pipe_schedule *sch = &p->schedule;
    for (int64_t it = 0; it < p->iterations; it++) {
        write_loss_scale(c);
        for (int k = 0; k < sch->n_ops[c->device]; k++) {
            tg_pipe_op op = sch->ops[c->device][k];
            bool ok = op.pass == TG_PASS_FORWARD    ? forward(c, it, op.micro_batch)
                      : op.pass == TG_PASS_BACKWARD ? backward(c, it, op.micro_batch)
                                                    : weight(c, it, op.micro_batch);
            if (!ok)
                return;
        }
        if (!p->training)
            continue;
        double t_ar = now_s();
        if (s->global_replicas > 1) {
            tg_trace_begin(tg_exchange_comms_channel(), "all-reduce");
            bool reduced = tg_allreduce_run(c, it);
            tg_trace_end(tg_exchange_comms_channel());
            if (!reduced)
                return;
            tg_engine_record(c, reduce_kind(c), TG_PHASE_UPDATE, it, -1, -1, t_ar, 0, 0);
        }
        bool ok = true;
        if (!update_runs(c, it, &ok)) {
            if (!ok)
                return;
            continue;
        }
        double t0 = now_s();
        run_steps(c, TG_PHASE_UPDATE, it, 0);
        tg_engine_record(c, TG_EVENT_PHASE, TG_PHASE_UPDATE, it, -1, -1, t0, 0,
                         p->devices[c->device].flops[TG_PHASE_UPDATE]);
        if (tg_program_shards(p) > 1 && !tg_allreduce_gather_weights(c, it))
            return;
        c->busy += now_s() - t0;
    }
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
        device_main(&s->ctx[t->index]);
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
    device_main(c);
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
        device_main(&s->ctx[0]);
    else if (s->per_step_threads)
        run_per_step(s, n);
    else
        return run_parked(s, n);
    return TG_OK;
}

/* The trace track of an event of (replica, device) i of n: its own; for a
 * gradient bucket the device's bucket track; for a copy its I/O thread ran,
 * the device's streaming-memory track (session.c, TRACE_LANES). */
static int track_of(const tg_profile_event *e, int i, int n)
{
    if (e->kind == TG_EVENT_BUCKET)
        return n + i;
    if ((e->kind == TG_EVENT_STREAMING_LOAD || e->kind == TG_EVENT_STREAMING_STORE) &&
        e->peer == TG_EVENT_PEER_IO_THREAD)
        return 2 * n + i;
    return i;
}

/* Event e as a step of track i. Buckets in flight together overlap each
 * other partially, which a track cannot show: a bucket's step starts when
 * it started or, if later, when the one before it arrived. */
static void keep_device_step(tg_session *s, const tg_profile_event *e, int i, int64_t origin,
                             uint64_t link)
{
    static const tg_trace_phase phases[] = {TG_TRACE_PHASE_FORWARD, TG_TRACE_PHASE_BACKWARD,
                                            TG_TRACE_PHASE_UPDATE};
    tg_trace_phase ph = e->kind == TG_EVENT_PHASE ? phases[e->phase] : TG_TRACE_PHASE_OTHER;
    int64_t start = origin + e->start_ns;
    size_t n = s->trace_n[i];
    if (e->kind == TG_EVENT_BUCKET && n && s->trace_steps[i][n - 1].end_ns > start)
        start = s->trace_steps[i][n - 1].end_ns;
    s->trace_steps[i][s->trace_n[i]++] = (tg_trace_device_step){
        tg_event_name((tg_event_kind)e->kind), start, origin + e->end_ns, e->micro_batch, ph, link};
}

/* Copy the recorded run's device events into the tracks the host-trace
 * export will carry (host-side work after the run, not in the step loop). */
static void keep_device_steps(tg_session *s, uint64_t link)
{
    const tg_program *p = s->program;
    int64_t origin = (int64_t)(s->t_origin * 1e9);
    int n = p->replicas * p->n_devices;
    for (int i = 0; i < n; i++) {
        const tg_profile_recorder *r = &s->recorders[i];
        for (int own = i; own < TG_TRACE_LANES * n; own += n) { /* each of the device's */
            size_t need = s->trace_n[own] + (size_t)r->n_events;
            if (need <= s->trace_cap[own])
                continue;
            tg_trace_device_step *st = tg_realloc(s->trace_steps[own], need * 2 * sizeof *st);
            if (!st)
                return; /* the export shows fewer steps, the run is unaffected */
            s->trace_steps[own] = st;
            s->trace_cap[own] = need * 2;
        }
        for (int k = 0; k < r->n_events; k++)
            keep_device_step(s, &r->events[k], track_of(&r->events[k], i, n), origin, link);
    }
}

/* A failure to write the profile (a full disk) must not stop training or
 * cost the weights: the profile is dropped (its temporary removed, the
 * previous profile kept) and the failure kept for tg_session_finish_profile,
 * which the command reports after saving its checkpoint. */
static void drop_profile(tg_session *s)
{
    s->profile_status = TG_ERR_IO;
    snprintf(s->profile_error, sizeof s->profile_error, "%s", tg_error_message());
    tg_profile_abort(s->profile);
    s->profile = NULL;
}

/* The process's resident memory (Linux /proc/self/statm); NaN elsewhere. */
static double resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, resident = 0;
    bool ok = f && fscanf(f, "%lld %lld", &size, &resident) == 2;
    if (f)
        fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return ok && page > 0 ? (double)resident * (double)page : NAN;
}

/* The counters the session knows of each host step (the caller adds its
 * own through tg_session_record_counter): one row each, cheap. */
static tg_status record_own_counters(tg_session *s)
{
    int64_t step = s->runs - 1;
    TG_TRY(tg_profile_counter(s->profile, step, "host step time (ns)", s->last_run_seconds * 1e9));
    if (s->program->training)
        TG_TRY(tg_profile_counter(s->profile, step, "loss scale", (double)s->loss_scale));
    TG_TRY(tg_profile_counter(s->profile, step, "device memory (bytes)",
                              (double)tg_session_arena_bytes(s)));
    return tg_profile_counter(s->profile, step, "host memory in use (bytes)", resident_bytes());
}

/* `n` values of `dtype` at `src` as floats into the scratch `*buf` (grown). */
static const float *as_floats(const void *src, tg_dtype dtype, int64_t n, float **buf, int64_t *cap)
{
    if (n > *cap) {
        float *grown = tg_realloc(*buf, (size_t)n * sizeof(float));
        if (!grown)
            return NULL;
        *buf = grown;
        *cap = n;
    }
    tg_convert(src, dtype, *buf, TG_F32, (size_t)n);
    return *buf;
}

/* Histograms of every parameter (replica 0, gathered when sharded) and of
 * the gradient the last update used: the accumulator, which holds the mean
 * over micro-batches and replicas (loss-scaled when loss scaling is on).
 * Without accumulation there is no buffer that still holds the gradient
 * after the run, so those parameters have weights only. Recorded runs only
 * (autoReport.executionProfileProgramRunCount): a pass over the weights. */
static tg_status record_histograms(tg_session *s, int64_t run)
{
    const tg_program *p = s->program;
    const tg_graph *g = p->graph;
    float *buf = NULL;
    unsigned char *raw = NULL;
    int64_t cap = 0, raw_cap = 0;
    tg_status st = TG_OK;
    for (int i = 0; st == TG_OK && i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->n_in > 0 || !t->grad || p->home[i] < 0)
            continue;
        int64_t n = tg_numel(t);
        tg_dtype dt = tg_session_storage_dtype(s, t);
        int64_t bytes = n * (int64_t)tg_dtype_size(dt);
        if (bytes > raw_cap) {
            unsigned char *grown = tg_realloc(raw, (size_t)bytes);
            if (!grown) {
                st = tg_error(TG_ERR_NOMEM, "profile: out of memory for histograms");
                break;
            }
            raw = grown;
            raw_cap = bytes;
        }
        st = tg_session_value_out(s, t, raw);
        const float *x = st == TG_OK ? as_floats(raw, dt, n, &buf, &cap) : NULL;
        if (st == TG_OK && !x)
            st = tg_error(TG_ERR_NOMEM, "profile: out of memory for histograms");
        if (st == TG_OK)
            st = tg_profile_histogram(s->profile, run, t->name, "weight", x, n);
        const tg_device_program *dp = &p->devices[p->device_of[i] >= 0 ? p->device_of[i] : 0];
        for (int k = 0; st == TG_OK && k < dp->n_accumulators; k++) {
            const tg_accumulator *a = &dp->accumulators[k];
            if (a->param != i)
                continue;
            const tg_buffer *acc = &p->buffers[a->acc_buffer];
            /* never past the buffer (a sharded one holds a part) */
            int64_t m = tg_numel(g->nodes[acc->node]), begin = 0, end;
            int64_t fits = (int64_t)(acc->bytes / tg_dtype_size(acc->dtype));
            m = m < fits ? m : fits;
            if (tg_allreduce_scatters(s, a)) { /* replica 0's shard holds the mean */
                tg_shard_range(m, s->replica_offset, tg_program_shards(p), &begin, &end);
                m = end - begin;
            }
            x = as_floats(tg_engine_slot_ptr(s, 0, a->acc_buffer, 0) +
                              (size_t)begin * tg_dtype_size(acc->dtype),
                          acc->dtype, m, &buf, &cap);
            st = x ? tg_profile_histogram(s->profile, run, t->name, "gradient", x, m)
                   : tg_error(TG_ERR_NOMEM, "profile: out of memory for histograms");
        }
    }
    tg_free(buf);
    tg_free(raw);
    return st;
}

tg_status tg_session_record_counter(tg_session *s, const char *name, double value)
{
    if (!s || !s->profile || s->runs < 1)
        return TG_OK;
    /* a refused counter (too many names) is the caller's error; the profile stays */
    return tg_profile_counter(s->profile, s->runs - 1, name, value);
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
    if (s->profile && record_own_counters(s) != TG_OK)
        drop_profile(s);
    tg_monitor_step(s->monitor);
    if (recording && s->trace_devices)
        keep_device_steps(s, link);
    if (recording && s->profile &&
        tg_profile_record_run(s->profile, s->recorders, s->runs - 1) != TG_OK)
        drop_profile(s);
    if (recording && s->profile && p->training && record_histograms(s, s->runs - 1) != TG_OK)
        drop_profile(s);
    return tg_verify_end(s);
}
