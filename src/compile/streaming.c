/* compile/streaming.c - tensors kept off chip, in host "streaming memory"
 * (TensorLocations.<kind>.onChip = false; docs/memory-locations.md).
 *
 * An offloaded value's home buffer takes no device memory (region NONE): the
 * value lives in a host copy per replica (the session's host_state), which
 * everything outside the steps (checkpoints, accumulation, the all-reduce,
 * transfers) reads and writes where it is (tg_engine_slot_ptr). The steps
 * of each pass (forward; backward, or its input- and weight-gradient halves
 * in a split schedule; update) read it from a streamed copy: an activation
 * buffer of that pass, copied in from host memory before the pass's first
 * step that reads it and back out after its last step when the pass writes
 * it. The copy is live only between those steps, so the memory plan shares
 * its bytes with the rest of the pass: a weight costs device memory only
 * while the layers that use it run, which is what lets phases of a model
 * larger than the device run one after another.
 *
 * Which tensors: weights (PARAM), optimizer state, gradient accumulators,
 * and activations a micro-batch's backward pass reads from its forward pass
 * on the same device (what would otherwise be stashed), each with at least
 * minElementsForOffChip elements. Activations keep a host slot per
 * micro-batch in flight.
 *
 * A sharded home (compile/sharding.c) may be offloaded too: its host copy is
 * one shard. Forward and backward passes gather the whole weight from the
 * replicas' shards in streaming memory; the update streams the replica's
 * shard through a copy one shard long, marked sharded as its home is, so
 * the update's kernel reads it as a shard (runtime/engine.c).
 */
#include "compile/program.h"

#include "core/alloc.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

/* The steps of device d that run as one pass: [begin, end) of phase ph. */
typedef struct {
    tg_phase phase;
    int begin, end;
} pass_range;

static int passes_of(const tg_device_program *dp, pass_range out[4])
{
    int n = 0, nb = dp->n_steps[TG_PHASE_BACKWARD], cut = tg_backward_cut(dp);
    out[n++] = (pass_range){TG_PHASE_FORWARD, 0, dp->n_steps[TG_PHASE_FORWARD]};
    if (cut) {
        out[n++] = (pass_range){TG_PHASE_BACKWARD, 0, cut};
        out[n++] = (pass_range){TG_PHASE_BACKWARD, cut, nb};
    } else {
        out[n++] = (pass_range){TG_PHASE_BACKWARD, 0, nb};
    }
    out[n++] = (pass_range){TG_PHASE_UPDATE, 0, dp->n_steps[TG_PHASE_UPDATE]};
    return n;
}

/* Per buffer, what the steps of one device do with it. Values the host or
 * another device reads from an offloaded buffer itself (host outputs,
 * transfers) read its host copy, written back after the forward pass's
 * last step that uses it, before the pass ends: they need no mark. */
enum { WRITTEN_FORWARD = 1, READ_BACKWARD = 2 };

static void mark_uses(const tg_program *p, int d, unsigned char *use)
{
    const tg_device_program *dp = &p->devices[d];
    for (int ph = TG_PHASE_FORWARD; ph <= TG_PHASE_BACKWARD; ph++)
        for (int s = 0; s < dp->n_steps[ph]; s++) {
            const tg_step *st = &dp->steps[ph][s];
            const tg_tensor *t = p->graph->nodes[st->node];
            if (ph == TG_PHASE_FORWARD && st->out >= 0)
                use[st->out] |= WRITTEN_FORWARD;
            for (int k = 0; ph == TG_PHASE_BACKWARD && k < t->n_in; k++)
                if (st->in[k] >= 0)
                    use[st->in[k]] |= READ_BACKWARD;
        }
}

/* The kind of tensor buffer b holds, for its location; -1 for none that
 * may leave the device. */
static int kind_of(const tg_program *p, int b, const unsigned char *use)
{
    const tg_buffer *buf = &p->buffers[b];
    const tg_tensor *t = p->graph->nodes[buf->node];
    switch (buf->region) {
    case TG_REGION_PARAM:
        return TG_TENSOR_WEIGHT;
    case TG_REGION_ACCUMULATOR:
        return TG_TENSOR_ACCUMULATOR;
    case TG_REGION_STATE:
        return tg_program_is_optimizer_state(p->graph, t) ? TG_TENSOR_OPTIMIZER : -1;
    case TG_REGION_ACTIVATION:
        return use[b] == (WRITTEN_FORWARD | READ_BACKWARD) ? TG_TENSOR_ACTIVATION : -1;
    default:
        return -1;
    }
}

/* Move the chosen buffers of device d off chip (of the first n_homes: the
 * streamed copies of earlier devices come after them). */
static void offload_buffers(tg_program *p, int d, int n_homes, unsigned char *use)
{
    tg_device_program *dp = &p->devices[d];
    mark_uses(p, d, use);
    for (int b = 0; b < n_homes; b++) {
        tg_buffer *buf = &p->buffers[b];
        int kind = buf->device == d ? kind_of(p, b, use) : -1;
        if (kind < 0)
            continue;
        const tg_tensor_location *loc = &p->config.memory.location[kind];
        if (!loc->off_chip || tg_numel(p->graph->nodes[buf->node]) < loc->min_off_chip)
            continue;
        buf->offloaded = true;
        buf->region = TG_REGION_NONE;
        buf->slots = kind == TG_TENSOR_ACTIVATION && dp->stash_depth > 1 ? dp->stash_depth : 1;
        buf->stride = tg_align(buf->bytes);
        dp->offloaded_bytes += buf->stride * (size_t)buf->slots;
    }
}

/* One streamed copy of a pass, while the pass's steps are read. */
typedef struct {
    int home, copy;
    int first, last; /* steps of the pass */
    bool read_first; /* the first step reads it: streamed in */
    bool written;    /* a step writes it: streamed out */
} pass_copy;

typedef struct {
    int step;
    bool after;
    tg_stream_op op;
} timed_op;

static int by_step(const void *a_, const void *b_)
{
    const timed_op *a = a_, *b = b_;
    if (a->step != b->step)
        return a->step - b->step;
    if (a->after != b->after)
        return a->after - b->after;
    if (a->op.kind != b->op.kind)
        return a->op.kind - b->op.kind;
    return a->op.copy - b->op.copy;
}

/* The copy of `home` in this pass (made on first use); NULL out of memory. */
static pass_copy *copy_for(tg_program *p, int d, int home, bool gathered, int *slot,
                           pass_copy *copies, int *n_copies, int step)
{
    if (slot[home] >= 0)
        return &copies[slot[home]];
    const tg_buffer *h = &p->buffers[home];
    int c = tg_program_add_buffer(p, h->node, d, TG_REGION_ACTIVATION, h->dtype);
    if (c < 0)
        return NULL;
    h = &p->buffers[home]; /* the buffers may have moved */
    p->buffers[c].copy_of = home;
    if (h->sharded && !gathered) { /* the update's copy of one shard */
        p->buffers[c].sharded = true;
        p->buffers[c].bytes = p->buffers[c].stride = h->bytes;
    }
    slot[home] = *n_copies;
    copies[*n_copies] = (pass_copy){home, c, step, step, false, false};
    return &copies[(*n_copies)++];
}

/* With TensorLocations.ioSchedule preload the I/O thread loads a copy while
 * the preloadSteps steps before its first use compute, and stores it while
 * the step after its last one does (runtime/stream_io.c): the copy holds its
 * bytes over those steps too, which the memory plan sees here (it only
 * widens these ranges). Not past the pass's ends: the pass's first loads
 * and its last stores run when it starts and ends. */
static void widen_for_preload(tg_program *p, int d, pass_range r, const pass_copy *c)
{
    tg_device_program *dp = &p->devices[d];
    tg_buffer *b = &p->buffers[c->copy];
    int from = c->first - p->config.memory.preload_steps;
    if (c->read_first && c->first > r.begin)
        tg_buffer_live_at(b, tg_program_timeline_at(dp, r.phase, from > r.begin ? from : r.begin));
    if (c->written && c->last + 1 < r.end)
        tg_buffer_live_at(b, tg_program_timeline_at(dp, r.phase, c->last + 1));
}

/* Rewrite one pass's steps to read streamed copies; its copies' ops into *ops. */
static tg_status stream_pass(tg_program *p, int d, pass_range r, int *slot, pass_copy *copies,
                             timed_op *ops, int *n_ops)
{
    tg_device_program *dp = &p->devices[d];
    int n_copies = 0;
    for (int s = r.begin; s < r.end; s++) {
        tg_step *st = &dp->steps[r.phase][s];
        const tg_tensor *t = p->graph->nodes[st->node];
        for (int k = -1; k < t->n_in; k++) {
            int *b = k < 0 ? &st->out : &st->in[k];
            bool gathered = *b >= 0 && tg_sharding_gathers(p, *b, r.phase);
            if (*b < 0 || !(p->buffers[*b].offloaded || gathered))
                continue;
            pass_copy *c = copy_for(p, d, *b, gathered, slot, copies, &n_copies, s);
            if (!c)
                return tg_error(TG_ERR_NOMEM, "compile: out of memory");
            bool writes = k < 0 || k < t->n_mutated;
            if (c->first == s && k >= 0)
                c->read_first = true;
            c->written |= writes;
            c->last = s;
            *b = c->copy;
        }
    }
    for (int i = 0; i < n_copies; i++) {
        const pass_copy *c = &copies[i];
        size_t bytes = p->buffers[c->home].bytes;
        if (tg_sharding_gathers(p, c->home, r.phase)) {
            /* a sharded weight's gather; from streaming memory when it is
             * offloaded, which counts this replica's shard (the others'
             * come from theirs) */
            ops[(*n_ops)++] = (timed_op){c->first, false, {c->copy, c->home, TG_STREAM_GATHER}};
            if (p->buffers[c->home].offloaded)
                dp->stream_in_bytes[r.phase] += bytes;
            slot[c->home] = -1;
            continue;
        }
        if (c->read_first) {
            ops[(*n_ops)++] = (timed_op){c->first, false, {c->copy, c->home, TG_STREAM_COPY}};
            dp->stream_in_bytes[r.phase] += bytes;
        }
        if (c->written) {
            ops[(*n_ops)++] = (timed_op){c->last, true, {c->copy, c->home, TG_STREAM_COPY}};
            dp->stream_out_bytes[r.phase] += bytes;
        }
        if (p->config.memory.preload)
            widen_for_preload(p, d, r, c);
        slot[c->home] = -1;
    }
    return TG_OK;
}

/* The phase's ops in step order, and each step's place among them. */
static tg_status index_ops(tg_device_program *dp, tg_phase ph, timed_op *ops, int n)
{
    qsort(ops, (size_t)n, sizeof *ops, by_step);
    if (n && !(dp->streams[ph] = tg_malloc((size_t)n * sizeof *dp->streams[ph])))
        return tg_error(TG_ERR_NOMEM, "compile: out of memory");
    dp->n_streams[ph] = n;
    for (int i = 0; i < n; i++)
        dp->streams[ph][i] = ops[i].op;
    for (int s = 0, i = 0; s < dp->n_steps[ph]; s++) {
        tg_step *st = &dp->steps[ph][s];
        st->stream_at = i;
        st->n_stream_in = st->n_stream_out = 0;
        for (; i < n && ops[i].step == s; i++)
            ops[i].after ? st->n_stream_out++ : st->n_stream_in++;
    }
    return TG_OK;
}

/* Adding a micro-batch's gradients into an offloaded accumulator reads and
 * writes host memory: count it with the backward's stream bytes. */
static void count_accumulation(const tg_program *p, tg_device_program *dp)
{
    for (int k = 0; k < dp->n_accumulators; k++) {
        const tg_buffer *acc = &p->buffers[dp->accumulators[k].acc_buffer];
        if (acc->offloaded) {
            dp->stream_in_bytes[TG_PHASE_BACKWARD] += acc->bytes;
            dp->stream_out_bytes[TG_PHASE_BACKWARD] += acc->bytes;
        }
    }
}

/* Offloaded accumulators are added into after the backward step that
 * last touches their gradient, so the gradient's bytes are free from then
 * on. Not under MPI instances, whose gradient buckets add the last
 * micro-batch themselves (runtime/buckets.c). */
static void accumulate_early(tg_program *p, tg_device_program *dp, timed_op *ops, int *n_ops)
{
    if (p->config.distributed.instances > 1)
        return;
    for (int k = 0; k < dp->n_accumulators; k++) {
        tg_accumulator *a = &dp->accumulators[k];
        if (!p->buffers[a->acc_buffer].offloaded)
            continue;
        int last = -1;
        for (int s = 0; s < dp->n_steps[TG_PHASE_BACKWARD]; s++) {
            const tg_step *st = &dp->steps[TG_PHASE_BACKWARD][s];
            bool uses = st->out == a->grad_buffer;
            for (int i = 0; i < p->graph->nodes[st->node]->n_in; i++)
                uses |= st->in[i] == a->grad_buffer;
            if (uses)
                last = s;
        }
        if (last < 0)
            continue;
        a->early = true;
        ops[(*n_ops)++] =
            (timed_op){last, true, {a->grad_buffer, a->acc_buffer, TG_STREAM_ACCUMULATE}};
    }
}

static tg_status stream_device(tg_program *p, int d, int *slot, pass_copy *copies, timed_op *ops)
{
    tg_device_program *dp = &p->devices[d];
    pass_range passes[4];
    int n_passes = passes_of(dp, passes);
    tg_status s = TG_OK;
    for (int ph = 0; ph < TG_PHASE_COUNT && s == TG_OK; ph++) {
        int n_ops = 0;
        for (int i = 0; i < n_passes && s == TG_OK; i++)
            if (passes[i].phase == (tg_phase)ph)
                s = stream_pass(p, d, passes[i], slot, copies, ops, &n_ops);
        if (ph == TG_PHASE_BACKWARD)
            accumulate_early(p, dp, ops, &n_ops);
        if (s == TG_OK)
            s = index_ops(dp, (tg_phase)ph, ops, n_ops);
    }
    count_accumulation(p, dp);
    return s;
}

static bool any_off_chip(const tg_config *c)
{
    for (int k = 0; k < TG_TENSOR_KINDS; k++)
        if (c->memory.location[k].off_chip)
            return true;
    return c->memory.location[TG_TENSOR_WEIGHT].sharded; /* gathered copies (sharding.c) */
}

tg_status tg_streaming_plan(tg_program *p)
{
    if (!any_off_chip(&p->config))
        return TG_OK;
    int n_homes = p->n_buffers;
    size_t most_ops = 0;
    for (int d = 0; d < p->n_devices; d++)
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
            most_ops += (size_t)p->devices[d].n_steps[ph] * (TG_MAX_INPUTS + 1) * 2 +
                        (size_t)p->devices[d].n_accumulators;
    unsigned char *use = tg_calloc((size_t)n_homes + 1, 1);
    int *slot = tg_malloc(((size_t)n_homes + 1) * sizeof *slot);
    pass_copy *copies = tg_malloc(((size_t)n_homes + 1) * sizeof *copies);
    timed_op *ops = tg_malloc((most_ops + 1) * sizeof *ops);
    tg_status s =
        use && slot && copies && ops ? TG_OK : tg_error(TG_ERR_NOMEM, "compile: out of memory");
    for (int b = 0; s == TG_OK && b < n_homes; b++)
        slot[b] = -1;
    for (int d = 0; s == TG_OK && d < p->n_devices; d++) {
        memset(use, 0, (size_t)n_homes);
        offload_buffers(p, d, n_homes, use);
        s = stream_device(p, d, slot, copies, ops);
    }
    tg_free(use);
    tg_free(slot);
    tg_free(copies);
    tg_free(ops);
    return s;
}
