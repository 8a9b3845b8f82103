/* compile/executable_check.c - a loaded executable agrees with its graph
 * and options (issue 46, row 8).
 *
 * executable_file.c checks that every index it reads lies in range; that is
 * not enough, because a file whose checksums were recomputed after an edit
 * can point a step at a buffer that exists but holds another value (an
 * update that trains another weight), at no buffer where the graph has a
 * value (a kernel reading NULL), or give a buffer fewer bytes than its value
 * (a kernel reading past it), or sizes no compile could make (a host copy of
 * 18 EB). The engine follows all of these without looking, so here each is
 * checked against what the graph says it must be: every buffer holds whole
 * values of the node it names, every step reads and writes buffers holding
 * its own node's operands on its own device, every transfer, accumulator and
 * host stream moves one value between buffers of that value, and every size
 * is the sum of the parts it is made of. The first disagreement is an error
 * naming where it is; the cache then compiles again.
 */
#include "compile/program.h"

#include "core/alloc.h"
#include "core/error.h"
#include "ops/op.h"

#include <stdio.h>
#include <string.h>

static const char *const phase_names[TG_PHASE_COUNT] = {"forward", "backward", "update"};

/* The node whose storage t's value is in: aliases share in[0]'s. */
static const tg_tensor *root_of(const tg_tensor *t)
{
    for (int hops = 0; t && (t->flags & TG_NODE_ALIAS) && t->n_in > 0 && hops < 1 << 20; hops++)
        t = t->in[0];
    return t;
}

static const char *node_name(const tg_program *p, int node)
{
    return p->graph->nodes[node]->name ? p->graph->nodes[node]->name : "?";
}

/* Bytes a buffer must have: its node's whole value in its type, or one shard of it. */
static size_t whole_bytes(const tg_program *p, const tg_buffer *b)
{
    return (size_t)tg_numel(p->graph->nodes[b->node]) * tg_dtype_size(b->dtype);
}

/* Or, for a 4-D value whose channels are no whole blocks, the padded
 * blocked size (compile/layout.h; which of the two the layout pass, run
 * again at load, checks: tg_layout_size_buffers). */
static size_t padded_bytes(const tg_program *p, const tg_buffer *b)
{
    tg_shape s = p->graph->nodes[b->node]->shape;
    if (s.ndim != 4 || s.dim[1] % TG_CHANNEL_BLOCK == 0)
        return 0;
    s.dim[1] = tg_channel_blocks(s.dim[1]) * TG_CHANNEL_BLOCK;
    return (size_t)tg_shape_numel(s) * tg_dtype_size(b->dtype);
}

/* The buffer of a node fused into a convolution (compile/fuse.c): it
 * holds nothing, the convolution's buffer holds the node's value. */
static bool emptied_by_fusion(const tg_program *p, const tg_buffer *b)
{
    return p->fused_into && p->fused_into[b->node] >= 0 && b->region == TG_REGION_NONE &&
           !b->offloaded && b->bytes == 0 && b->stride == 0 && b->copy_of < 0;
}

static tg_status check_buffer_sizes(const tg_program *p)
{
    for (int i = 0; i < p->n_buffers; i++) {
        const tg_buffer *b = &p->buffers[i];
        if (emptied_by_fusion(p, b))
            continue;
        size_t want = b->sharded ? tg_sharding_shard_bytes(p, i) : whole_bytes(p, b);
        if ((b->bytes != want && (b->sharded || b->bytes != padded_bytes(p, b))) ||
            b->stride < b->bytes || b->stride > tg_align(b->bytes))
            return tg_error(TG_ERR_FORMAT,
                            "buffer %d of '%s' has %zu bytes a slot %zu apart; its value needs "
                            "%zu",
                            i, node_name(p, b->node), b->bytes, b->stride, want);
        /* kernels read floats and vectors: the plan places everything at
         * TG_ALIGN, and a file that does not would have them misaligned */
        if (b->region != TG_REGION_NONE && !b->offloaded &&
            (b->offset % TG_ALIGN != 0 || (b->slots > 1 && b->stride % TG_ALIGN != 0)))
            return tg_error(TG_ERR_FORMAT,
                            "buffer %d of '%s' lies at offset %zu (slots %zu apart), not at a "
                            "multiple of %d bytes",
                            i, node_name(p, b->node), b->offset, b->stride, TG_ALIGN);
        if (b->copy_of >= 0 && p->buffers[b->copy_of].node != b->node)
            return tg_error(TG_ERR_FORMAT, "buffer %d is a copy of '%s' but holds '%s'", i,
                            node_name(p, p->buffers[b->copy_of].node), node_name(p, b->node));
    }
    return TG_OK;
}

/* Whether buffer b sums a weight's gradient: an accumulator (region
 * NONE when offloaded) or the streamed copy of one. */
static bool is_accumulator(const tg_program *p, int b)
{
    int home = p->buffers[b].copy_of >= 0 ? p->buffers[b].copy_of : b;
    for (int d = 0; d < p->n_devices; d++)
        for (int k = 0; k < p->devices[d].n_accumulators; k++)
            if (p->devices[d].accumulators[k].acc_buffer == home)
                return true;
    return false;
}

/* home[i]: -1, or a buffer (not a copy) of i's storage. */
static tg_status check_homes(const tg_program *p)
{
    for (int i = 0; i < p->graph->n_nodes; i++) {
        int h = p->home[i];
        if (h < 0)
            continue;
        const tg_buffer *b = &p->buffers[h];
        int want = tg_fuse_value_node(p, root_of(p->graph->nodes[i])->id);
        if (b->node != want || b->copy_of >= 0 || b->region == TG_REGION_ACCUMULATOR ||
            is_accumulator(p, h))
            return tg_error(TG_ERR_FORMAT, "'%s' is kept in buffer %d, which holds '%s'%s%s%s",
                            node_name(p, i), h, node_name(p, b->node),
                            b->node != want ? " (it should hold '" : "",
                            b->node != want ? node_name(p, want) : "",
                            b->node != want ? "')" : " as a copy or an accumulator");
    }
    return TG_OK;
}

/* A step's operand k (or its output, k < 0): a buffer of that value on
 * device d, or none where the value has no storage. The update of an
 * accumulated weight reads the gradient from its accumulator instead. */
static bool operand_ok(const tg_program *p, int d, const tg_tensor *t, int k, int b)
{
    const tg_tensor *v = root_of(k < 0 ? t : t->in[k]);
    if (b < 0)
        return p->home[v->id] < 0;
    const tg_buffer *buf = &p->buffers[b];
    if (buf->device != d)
        return false;
    if (buf->node == tg_fuse_value_node(p, v->id))
        return !is_accumulator(p, b);
    return k == t->n_in - 1 && (t->flags & TG_NODE_OPTIMIZER) && is_accumulator(p, b) &&
           buf->node == root_of(t->in[0])->id;
}

static tg_status check_steps(const tg_program *p, int d)
{
    const tg_device_program *dp = &p->devices[d];
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
        for (int s = 0; s < dp->n_steps[ph]; s++) {
            const tg_step *st = &dp->steps[ph][s];
            const tg_tensor *t = p->graph->nodes[st->node];
            if (st->scratch_bytes > 0 && st->scratch_offset % TG_ALIGN != 0)
                return tg_error(TG_ERR_FORMAT,
                                "step %d of device %d's %s pass ('%s'): its scratch lies at "
                                "offset %zu, not at a multiple of %d bytes",
                                s, d, phase_names[ph], node_name(p, st->node), st->scratch_offset,
                                TG_ALIGN);
            for (int k = -1; k < t->n_in; k++) {
                int b = k < 0 ? st->out : st->in[k];
                if (operand_ok(p, d, t, k, b))
                    continue;
                char what[32] = "output";
                if (k >= 0)
                    snprintf(what, sizeof what, "input %d", k);
                return tg_error(TG_ERR_FORMAT,
                                "step %d of device %d's %s pass ('%s'): its %s is buffer %d (%s), "
                                "which is not '%s' on that device",
                                s, d, phase_names[ph], node_name(p, st->node), what, b,
                                b < 0 ? "none" : node_name(p, p->buffers[b].node),
                                root_of(k < 0 ? t : t->in[k])->name);
            }
        }
    return TG_OK;
}

static bool holds(const tg_program *p, int b, int node, int device)
{
    return p->buffers[b].node == node && p->buffers[b].device == device;
}

static tg_status check_moves(const tg_program *p, int d)
{
    const tg_device_program *dp = &p->devices[d];
    for (int k = 0; k < dp->n_accumulators; k++) {
        const tg_accumulator *a = &dp->accumulators[k];
        const tg_tensor *w = p->graph->nodes[a->param];
        const tg_buffer *acc = &p->buffers[a->acc_buffer];
        if (!w->grad || !holds(p, a->acc_buffer, a->param, d) || acc->copy_of >= 0 ||
            (acc->region != TG_REGION_ACCUMULATOR && !acc->offloaded) ||
            !holds(p, a->grad_buffer, root_of(w->grad)->id, d))
            return tg_error(TG_ERR_FORMAT,
                            "device %d's accumulator %d does not add the gradient of '%s' into a "
                            "buffer of its own",
                            d, k, w->name);
    }
    for (int k = 0; k < dp->n_inputs; k++) {
        const tg_buffer *b = &p->buffers[dp->inputs[k]];
        if (b->device != d || b->region != TG_REGION_INPUT ||
            p->graph->nodes[b->node]->op != TG_OP_INPUT || p->home[b->node] != dp->inputs[k])
            return tg_error(TG_ERR_FORMAT, "device %d's host input %d streams into '%s'", d, k,
                            node_name(p, b->node));
    }
    /* and every input kept on this device is streamed, once */
    int kept = 0, twice = 0;
    for (int i = 0; i < p->graph->n_nodes; i++)
        kept += p->graph->nodes[i]->op == TG_OP_INPUT && p->home[i] >= 0 &&
                p->buffers[p->home[i]].device == d;
    for (int k = 0; k < dp->n_inputs; k++)
        for (int j = 0; j < k; j++)
            twice += dp->inputs[j] == dp->inputs[k];
    if (kept != dp->n_inputs || twice)
        return tg_error(TG_ERR_FORMAT,
                        "device %d streams %d host inputs (%d of them again), but keeps %d", d,
                        dp->n_inputs, twice, kept);
    /* the outputs: the buffers (once each) of the graph's outputs kept here,
     * as find_outputs (program.c) lists them */
    int outs = 0;
    for (int i = 0; i < p->graph->n_nodes; i++) {
        const tg_tensor *t = p->graph->nodes[i];
        int h = p->home[i];
        bool first = true;
        for (int j = 0; j < i && first && h >= 0; j++)
            first = !(p->graph->nodes[j]->flags & TG_NODE_OUTPUT) ||
                    p->graph->nodes[j]->n_in == 0 || p->home[j] != h;
        outs += (t->flags & TG_NODE_OUTPUT) && t->n_in > 0 && h >= 0 && first &&
                p->buffers[h].device == d;
    }
    twice = 0;
    for (int k = 0; k < dp->n_outputs; k++) {
        const tg_buffer *b = &p->buffers[dp->outputs[k]];
        if (b->device != d || p->home[b->node] != dp->outputs[k])
            return tg_error(TG_ERR_FORMAT, "device %d's host output %d streams '%s' from a copy", d,
                            k, node_name(p, b->node));
        for (int j = 0; j < k; j++)
            twice += dp->outputs[j] == dp->outputs[k];
    }
    if (outs != dp->n_outputs || twice)
        return tg_error(TG_ERR_FORMAT,
                        "device %d streams %d host outputs (%d of them again), but the graph has "
                        "%d there",
                        d, dp->n_outputs, twice, outs);
    return TG_OK;
}

static tg_status check_transfers(const tg_program *p)
{
    for (int i = 0; i < p->n_transfers; i++) {
        const tg_transfer *t = &p->transfers[i];
        int v = p->buffers[t->src_buffer].node;
        if (!holds(p, t->src_buffer, v, t->src_device) ||
            !holds(p, t->dst_buffer, v, t->dst_device))
            return tg_error(TG_ERR_FORMAT,
                            "transfer %d ('%s', device %d to %d) moves between buffers of "
                            "different values or devices",
                            i, node_name(p, t->node), t->src_device, t->dst_device);
    }
    return TG_OK;
}

/* The most memory device d's activations and scratch can take: all of
 * them side by side (the plan shares memory by liveness, so takes less). */
static size_t activation_bound(const tg_program *p, int d)
{
    const tg_device_program *dp = &p->devices[d];
    size_t n = 0;
    for (int b = 0; b < p->n_buffers; b++)
        if (p->buffers[b].device == d && p->buffers[b].region == TG_REGION_ACTIVATION)
            n += tg_align(p->buffers[b].bytes);
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
        for (int s = 0; s < dp->n_steps[ph]; s++)
            n += tg_align(dp->steps[ph][s].scratch_bytes);
    return n;
}

/* Every size is the sum of its parts: none can ask for memory no buffer needs. */
static tg_status check_sizes(const tg_program *p)
{
    size_t total = 0;
    for (int d = 0; d < p->n_devices; d++) {
        const tg_device_program *dp = &p->devices[d];
        size_t regions = 0, offloaded = 0, in_region[TG_REGION_COUNT] = {0};
        for (int r = 0; r < TG_REGION_COUNT; r++)
            regions += dp->region_bytes[r];
        for (int b = 0; b < p->n_buffers; b++) {
            const tg_buffer *buf = &p->buffers[b];
            if (buf->device == d && buf->offloaded)
                offloaded += buf->stride * (size_t)buf->slots;
            else if (buf->device == d)
                in_region[buf->region] += buf->stride * (size_t)buf->slots;
        }
        bool fixed_ok = true; /* the regions before the activations hold their buffers */
        for (int r = TG_REGION_PARAM; r < TG_REGION_ACTIVATION; r++)
            fixed_ok &= dp->region_bytes[r] == in_region[r];
        if (dp->region_bytes[TG_REGION_NONE] != 0 || !fixed_ok || regions != dp->arena_bytes ||
            dp->region_bytes[TG_REGION_ACTIVATION] > tg_align(activation_bound(p, d)) ||
            offloaded != dp->offloaded_bytes || dp->scratch_peak > dp->arena_bytes)
            return tg_error(TG_ERR_FORMAT,
                            "device %d's sizes do not add up (memory %zu bytes, its regions "
                            "%zu, activations %zu of at most %zu; host memory %zu, its buffers "
                            "%zu)",
                            d, dp->arena_bytes, regions, dp->region_bytes[TG_REGION_ACTIVATION],
                            activation_bound(p, d), dp->offloaded_bytes, offloaded);
        total += dp->arena_bytes;
    }
    if (total != p->arena_bytes)
        return tg_error(TG_ERR_FORMAT, "its memory (%zu bytes) is not its devices' (%zu)",
                        p->arena_bytes, total);
    return TG_OK;
}

/* The run's shape is the options': the key hashed them, the file must agree. */
static tg_status check_shape(const tg_program *p)
{
    const tg_config *c = &p->config;
    int m = c->pipeline.accumulation, iters = c->pipeline.device_iterations;
    int want_mb = p->training ? m : iters, want_it = p->training ? iters : 1;
    if (p->replicas != c->pipeline.replicas || p->micro_batches != want_mb ||
        p->iterations != want_it)
        return tg_error(TG_ERR_FORMAT,
                        "it runs %d replicas x %d micro-batches x %d iterations; the options "
                        "say %d x %d x %d",
                        p->replicas, p->micro_batches, p->iterations, c->pipeline.replicas, want_mb,
                        want_it);
    return TG_OK;
}

/* The precision and every node's storage type are the options': a type
 * changed in the file would have kernels read a buffer as another type. */
static tg_status check_types(const tg_program *p)
{
    tg_precision want;
    TG_TRY(tg_precision_read(&p->config, &want));
    const tg_precision *got = &p->precision;
    if (got->input != want.input || got->model != want.model || got->accum != want.accum ||
        got->first_moment != want.first_moment || got->second_moment != want.second_moment ||
        memcmp(&got->stochastic_rounding, &want.stochastic_rounding, 1) != 0 ||
        got->loss_scaling != want.loss_scaling ||
        memcmp(&got->loss_scale, &want.loss_scale, sizeof want.loss_scale) != 0 ||
        got->growth_interval != want.growth_interval)
        return tg_error(TG_ERR_FORMAT, "its precision is not the options'");
    int n = p->graph->n_nodes;
    tg_dtype *storage = tg_malloc(((size_t)n + 1) * sizeof *storage);
    if (!storage)
        return tg_error(TG_ERR_NOMEM, "out of memory");
    tg_precision_assign(p->graph, &want, storage);
    int bad = -1;
    for (int i = 0; i < n && bad < 0; i++)
        if (p->storage[i] != storage[i])
            bad = i;
    tg_free(storage);
    if (bad >= 0)
        return tg_error(TG_ERR_FORMAT, "'%s' is stored as another type than the options say",
                        node_name(p, bad));
    return TG_OK;
}

/* The pipeline schedule is the options': built again, it must be the
 * file's op for op (one dropped or moved would skip or reorder a
 * micro-batch's pass). */
static tg_status check_schedule(const tg_program *p)
{
    const tg_config *c = &p->config;
    tg_schedule_kind kind = strcmp(c->pipeline.strategy, "pipelined") == 0
                                ? (tg_schedule_kind)tg_schedule_parse(c->pipeline.schedule)
                                : TG_SCHEDULE_SHARDED;
    tg_pipe_schedule want;
    memset(&want, 0, sizeof want);
    TG_TRY(tg_pipe_schedule_build(kind, p->n_devices, p->micro_batches, p->training, &want));
    const tg_pipe_schedule *got = &p->schedule;
    bool same = got->kind == want.kind && got->micro_batches == want.micro_batches &&
                (got->ops != NULL) == (want.ops != NULL) &&
                (!want.ops || got->n_devices == want.n_devices);
    for (int d = 0; same && want.ops && d < want.n_devices; d++)
        same = got->n_ops[d] == want.n_ops[d] && got->stash_depth[d] == want.stash_depth[d] &&
               memcmp(got->ops[d], want.ops[d], (size_t)want.n_ops[d] * sizeof *want.ops[d]) == 0;
    tg_pipe_schedule_free(&want);
    if (!same)
        return tg_error(TG_ERR_FORMAT, "its pipeline schedule is not the one the options make");
    return TG_OK;
}

/* Every weight update of the graph is a step of one device's update pass,
 * once: a dropped or doubled one would leave a weight untrained or update
 * it twice. */
static tg_status check_updates(const tg_program *p)
{
    if (!p->training)
        return TG_OK;
    const tg_graph *g = p->graph;
    int *seen = tg_calloc((size_t)g->n_nodes + 1, sizeof *seen);
    if (!seen)
        return tg_error(TG_ERR_NOMEM, "out of memory");
    for (int d = 0; d < p->n_devices; d++)
        for (int s = 0; s < p->devices[d].n_steps[TG_PHASE_UPDATE]; s++)
            seen[p->devices[d].steps[TG_PHASE_UPDATE][s].node]++;
    int bad = -1;
    for (int i = 0; i < g->n_nodes && bad < 0; i++)
        if (tg_is_weight_update(g->nodes[i]) && seen[i] != 1)
            bad = i;
    int times = bad >= 0 ? seen[bad] : 0;
    tg_free(seen);
    if (bad >= 0)
        return tg_error(TG_ERR_FORMAT, "the update '%s' is a step %d times, not once",
                        node_name(p, bad), times);
    return TG_OK;
}

tg_status tg_executable_check(const tg_program *p)
{
    TG_TRY(check_schedule(p));
    TG_TRY(check_updates(p));
    TG_TRY(check_shape(p));
    TG_TRY(check_types(p));
    TG_TRY(check_buffer_sizes(p));
    TG_TRY(check_homes(p));
    TG_TRY(check_transfers(p));
    for (int d = 0; d < p->n_devices; d++) {
        TG_TRY(check_steps(p, d));
        TG_TRY(check_moves(p, d));
    }
    return check_sizes(p);
}
