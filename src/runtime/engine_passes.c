/* runtime/engine_passes.c - one host step of one device (the engine's
 * device loop): its schedule's forward, backward and weight-gradient passes
 * over the program's steps, the gradients into the accumulators, then the
 * all-reduce and the update. Split from runtime/engine.c, which hands the
 * step to the device threads (tg_engine_device_main).
 */
#include "backend/backend.h"
#include "runtime/session_state.h"
#include "compile/layout.h"

#include "core/pool.h"
#include "core/rng.h"
#include "ops/op.h"
#include "profile/profile.h"
#include "runtime/allreduce.h"
#include "runtime/buckets.h"
#include "runtime/exchange.h"
#include "runtime/prefetch.h"
#include "runtime/rts.h"
#include "runtime/scaling.h"
#include "runtime/stream_io.h"
#include "runtime/streams.h"
#include "runtime/verify.h"
#include "runtime/staging.h"
#include "tilegraph/trace.h"

#include <stdio.h>

#define now_s tg_engine_now

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

/* A tied op on padded blocked operands (compile/layout.h tg_layout_padded)
 * seen with their channels padded, so that its kernel and its staging walk
 * the whole padded memory; NULL when none is padded. */
static const tg_tensor *padded_view(const tg_program *p, const tg_tensor *t, tg_kernel_args *a,
                                    tg_tensor *node, tg_tensor *in)
{
    bool padded = tg_layout_padded(p, t);
    for (int k = 0; k < t->n_in; k++)
        padded |= tg_layout_padded(p, t->in[k]);
    if (!padded)
        return NULL;
    *node = *t;
    node->shape = tg_layout_stored_shape(p, t);
    for (int k = 0; k < t->n_in && k < TG_MAX_INPUTS; k++) {
        in[k] = *t->in[k];
        in[k].shape = tg_layout_stored_shape(p, t->in[k]);
        node->in[k] = &in[k];
    }
    a->node = node;
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

/* The FLOPs of device c's steps [from, to) of phase ph, for the profile:
 * in a split schedule B and W each record their own, in a ParallelIPU pass
 * each phase. 0 when the run is not recorded (the sum is not free). */
static double pass_flops(const device_ctx *c, tg_phase ph, int from, int to)
{
    const tg_program *p = c->s->program;
    const tg_device_program *dp = &p->devices[c->device];
    if (!c->rec)
        return 0;
    if (from == 0 && to == dp->n_steps[ph])
        return dp->flops[ph];
    double flops = 0;
    for (int k = from; k < to; k++) {
        const tg_tensor *t = p->graph->nodes[dp->steps[ph][k].node];
        const tg_op_def *def = tg_op_get(t->op);
        if (def && def->flops)
            flops += def->flops(t);
    }
    return flops;
}

/* The pass event of phase ph's steps [from, to), begun at t0; or, when a
 * ParallelIPU phase boundary came since (phase_boundary), of the steps
 * from it on. */
static void record_pass(device_ctx *c, tg_phase ph, int64_t it, int64_t j, double t0, int from,
                        int to)
{
    if (c->seg_begin > from) {
        from = c->seg_begin;
        t0 = c->seg_t0;
    }
    tg_engine_record(c, TG_EVENT_PHASE, ph, it, j, -1, t0, 0, pass_flops(c, ph, from, to));
}

/* ParallelIPU (compile/parallel_phases.c): before step k a phase of this
 * device ends and its next one begins. The steps since the last boundary
 * are a pass event of their own; then what the phase made goes to the
 * other device and what the next one reads is waited for (an offloaded
 * value sent is read from its host copy: its store first). The I/O
 * thread goes on loading the next phase's copies meanwhile, which is the
 * point of alternating. The time here is not busy time. */
static bool phase_boundary(device_ctx *c, tg_phase ph, int64_t it, int64_t g, int k,
                           tg_stream_pass *io, bool preload)
{
    double t0 = now_s();
    int64_t j = g % c->s->program->micro_batches;
    if (k > c->seg_begin)
        tg_engine_record_span(c, TG_EVENT_PHASE, ph, it, j, -1, c->seg_t0, t0, 0,
                              pass_flops(c, ph, c->seg_begin, k));
    if (preload && tg_exchange_sends_offloaded(c, ph, k))
        tg_stream_io_stores_done(c, io);
    bool ok = tg_exchange_at_step(c, ph, g, k);
    c->seg_t0 = now_s();
    c->seg_begin = k;
    c->busy -= c->seg_t0 - t0;
    return ok;
}

/* The op's check of its operands (its kernel's tg_kernel_def.check: indices, labels) before
 * its kernel runs: true when they are valid, else false with the run's
 * error message in msg. The kernel runs anyway (it reads no memory for a
 * bad value); the run stops after the step. */
static bool operands_valid(const device_ctx *c, const tg_kernel_args *a, int64_t it, int64_t g,
                           char *msg, size_t cap)
{
    char why[320];
    if (tg_op_check_operands(a, why, sizeof why))
        return true;
    snprintf(msg, cap, "step %lld, micro-batch %lld, replica %d: '%s' (%s): %s",
             (long long)(c->s->step + it), (long long)(g % c->s->program->micro_batches),
             c->replica, a->node->name, tg_op_name(a->node->op), why);
    return false;
}

/* Steps [begin, end) of phase ph for micro-batch g (slot g); false when
 * the run was aborted at a ParallelIPU phase boundary or an op found its
 * operands invalid. */
static bool run_range(device_ctx *c, tg_phase ph, int64_t it, int64_t g, int begin, int end)
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
    bool ok = true;
    char bad[512];
    for (int k = begin; k < end; k++) {
        const tg_step *st = &dp->steps[ph][k];
        const tg_tensor *t = p->graph->nodes[st->node];
        if (st->exchange_before && !(ok = phase_boundary(c, ph, it, g, k, &io, preload)))
            break;
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
            .weights_version = p->training ? 0 : s->weights_version,
            .blocked = p->layout && (p->layout[t->id] & TG_LAYOUT_OP_BLOCKED),
        };
        for (int i = 0; i < t->n_in; i++)
            a.in[i] = st->in[i] >= 0 ? tg_engine_slot_ptr(s, c->replica, st->in[i], g) : NULL;
        for (int i = TG_FUSE_IN_STATS; st->fused && i < TG_FUSE_IN_END; i++)
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
        if (ph == TG_PHASE_UPDATE && tg_rts_is_sharded_update(p, st, t))
            t = shard_view(c, st, t, &a, &so, &shard_node, shard_in);
        else if (a.blocked && padded_view(p, t, &a, &shard_node, shard_in))
            t = &shard_node;
        bool valid = operands_valid(c, &a, it, g, bad, sizeof bad);
        void *stored_out = a.out; /* staging points a.out at its f32 copy */
        if (c->rec) {
            double t0 = now_s();
            tg_stage_run(p, st, &a, &so);
            c->rec->op_ns[t->id] += (int64_t)((now_s() - t0) * 1e9);
            c->rec->op_calls[t->id]++;
        } else {
            tg_stage_run(p, st, &a, &so);
        }
        if (tg_verify_test_fault_node == t->id)
            tg_verify_test_fault(p, st, stored_out, g % p->micro_batches);
        if (c->replica == 0 && tg_verify_capturing(s->verify))
            tg_verify_capture(s->verify, p, st, stored_out, g);
        if (preload)
            tg_stream_io_after(c, &io, k);
        else
            tg_streams_step(c, ph, st, false, it, g);
        if (c->buckets_done < c->buckets_sent) /* gradient buckets in flight */
            tg_buckets_progress(c, it);
        if (!valid) { /* after the step's copies, so that the streams stay paired */
            tg_exchange_fail(s, TG_ERR_INVALID_ARG, bad);
            ok = false;
            break;
        }
    }
    if (preload)
        tg_stream_io_end(c, &io);
    return ok;
}

static bool run_steps(device_ctx *c, tg_phase ph, int64_t it, int64_t g)
{
    return run_range(c, ph, it, g, 0, c->s->program->devices[c->device].n_steps[ph]);
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
    c->seg_begin = 0;
    c->seg_t0 = t1;
    if (!run_steps(c, TG_PHASE_FORWARD, it, g))
        return false;
    record_pass(c, TG_PHASE_FORWARD, it, j, t1, 0, dp->n_steps[TG_PHASE_FORWARD]);
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
    c->seg_begin = 0;
    c->seg_t0 = t0;
    bool accumulated = run_backward(c, TG_PASS_BACKWARD, it, j, g, 0, end);
    if (tg_exchange_aborted(s)) /* at a ParallelIPU phase boundary */
        return false;
    record_pass(c, TG_PHASE_BACKWARD, it, j, t0, 0, end);
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
    tg_engine_record(
        c, TG_EVENT_PHASE, TG_PHASE_BACKWARD, it, j, -1, t0, 0,
        pass_flops(c, TG_PHASE_BACKWARD, dp->input_grad_steps, dp->n_steps[TG_PHASE_BACKWARD]));
    backward_done(c, it, j, g, t0, accumulated);
    return true;
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
void tg_engine_device_main(device_ctx *c)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_pipe_schedule *sch = &p->schedule;
    for (int64_t it = 0; it < p->iterations; it++) {
        tg_scaling_write_seed(c);
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
        if (!tg_scaling_update_runs(c, it, &ok)) {
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
