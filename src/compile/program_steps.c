/* compile/program_steps.c - a program's steps, buffers and transfers: the
 * kernel plan of each node, a step per node in its phase on its device,
 * every value's home buffer, the copies between devices, the gradient
 * accumulators. Split from compile/program.c, whose compile() calls these
 * in order.
 */
#include "backend/backend.h"
#include "compile/program.h"
#include "compile/program_internal.h"
#include "compile/layout.h"

#include "compile/placement.h"
#include "core/alloc.h"
#include "core/error.h"
#include "ops/op.h"
#include "target/target.h"

#include <stdio.h>
#include <string.h>

static tg_phase phase_of(const tg_tensor *t)
{
    if (t->flags & TG_NODE_OPTIMIZER)
        return TG_PHASE_UPDATE;
    return (t->flags & TG_NODE_BACKWARD) ? TG_PHASE_BACKWARD : TG_PHASE_FORWARD;
}

size_t tg_program_node_bytes(const tg_program *p, const tg_tensor *t)
{
    return (size_t)tg_numel(t) * tg_dtype_size(p->storage[t->id]);
}

int tg_program_add_buffer(tg_program *p, int node, int device, tg_region region, tg_dtype dtype)
{
    size_t bytes = (size_t)tg_numel(p->graph->nodes[node]) * tg_dtype_size(dtype);
    if (p->n_buffers == p->cap_buffers) {
        int cap = p->cap_buffers ? 2 * p->cap_buffers : 256;
        tg_buffer *b = tg_realloc(p->buffers, (size_t)cap * sizeof *b);
        if (!b)
            return -1;
        p->buffers = b;
        p->cap_buffers = cap;
    }
    p->buffers[p->n_buffers] = (tg_buffer){.node = node,
                                           .device = device,
                                           .dtype = dtype,
                                           .region = region,
                                           .bytes = bytes,
                                           .slots = 1,
                                           .stride = bytes,
                                           .first = -1,
                                           .last = -1,
                                           .copy_of = -1};
    return p->n_buffers++;
}

static tg_region leaf_region(const tg_graph *g, const tg_tensor *t)
{
    switch (t->role) {
    case TG_ROLE_PARAM:
        return TG_REGION_PARAM;
    case TG_ROLE_STATE:
        /* batch norm's running statistics are state too, but no optimizer's:
         * counted as optimizer state they stayed on chip under "offload the
         * optimizer state" and were shown as what it left behind */
        return tg_program_is_optimizer_state(g, t) ? TG_REGION_STATE : TG_REGION_RUNNING;
    case TG_ROLE_CONSTANT:
        return TG_REGION_CONSTANT;
    default:
        return TG_REGION_INPUT;
    }
}

int tg_program_buffer_on(const tg_program *p, int id, int device)
{
    int home = p->home[id];
    if (home < 0 || p->buffers[home].device == device)
        return home;
    for (int k = 0; k < p->n_transfers; k++)
        if (p->transfers[k].src_buffer == home && p->transfers[k].dst_device == device)
            return p->transfers[k].dst_buffer;
    return -1;
}

/* ---- steps, buffers, transfers ------------------------------------------------------- */

void tg_program_plan_opts(const tg_program *p, const tg_tensor *t, tg_plan_opts *po)
{
    bool bf16 = p->precision.model == TG_BF16 || p->precision.input == TG_BF16;
    /* planned for the most threads the run may use (n_threads is chosen
     * later, from the load); the run sizes its team to its device's pool */
    *po = (tg_plan_opts){.n_threads = p->plan_threads,
                         .compute = bf16 ? TG_BF16 : TG_F32,
                         .inference = !p->training,
                         .memory_limited = p->config.memory.per_device > 0};
    for (int k = 0; p->storage && k < t->n_in; k++)
        po->in_storage[k] = p->storage[t->in[k]->id];
    po->out_storage = p->storage ? p->storage[t->id] : TG_F32;
}

/* The options t's plan hook is called with: the program's storage, what
 * its fused chain computes (a convolution's norm, activation and residual
 * add; a product's bias, GELU and residual) and which operands are
 * blocked. *fused: a convolution's chain; *mm_fused: a product's; *blocked:
 * an operand or the output is blocked. */
void tg_program_node_plan_opts(const tg_program *p, const tg_tensor *t, tg_plan_opts *po,
                               bool *fused, bool *mm_fused, bool *blocked)
{
    tg_program_plan_opts(p, t, po);
    *fused = tg_fuse_chain(p, t, &po->fold_norm, &po->post_act);
    po->post_add = tg_fuse_conv_add(p, t);
    const tg_tensor *bias, *residual;
    *mm_fused = tg_fuse_matmul_opts(p, t, po, &bias, &residual);
    /* a fused product reads its bias and residual as they are stored */
    if (*mm_fused && p->storage) {
        po->in_storage[TG_FUSE_IN_STATS] = bias ? p->storage[bias->id] : TG_F32;
        po->in_storage[TG_FUSE_IN_STATS + 1] = residual ? p->storage[residual->id] : TG_F32;
    }
    *blocked = tg_layout_reads_blocked(p, t);
    po->out_blocked = *blocked;
    for (int k = 0; k < t->n_in; k++) {
        po->in_blocked[k] = tg_layout_reads_blocked(p, t->in[k]);
        *blocked |= p->layout && (p->layout[t->in[k]->id] & TG_LAYOUT_BLOCKED);
    }
}

/* Run the op's plan hook once per node (a node recomputed in the backward
 * phase shares its state). A planned kernel whose scratch exceeds the
 * proportion is dropped: the op's own kernels then run with their scratch. */
static tg_status plan_node(tg_program *p, const tg_tensor *t)
{
    tg_kernel_plan *kp = &p->plans[t->id];
    const tg_op_planner *def = tg_node_planner(t);
    if (!def || !p->plan_kernels || kp->state || kp->kernel[0])
        return TG_OK;
    tg_plan_opts po;
    bool fused, mm_fused, blocked;
    tg_program_node_plan_opts(p, t, &po, &fused, &mm_fused, &blocked);
    tg_status s = def->plan(t, &po, kp);
    if (s != TG_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", tg_error_message());
        return tg_error(s, "%s: %s", t->name, why);
    }
    /* a blocked operand keeps the planned kernel: no other one reads it;
     * nor does any other compute a fused norm, activation or chain */
    if (kp->state && kp->scratch > p->scratch_cap && !blocked && !fused && !mm_fused) {
        def->plan_free(kp->state);
        kp->state = NULL;
        snprintf(kp->kernel, sizeof kp->kernel, "own (planned scratch over the proportion)");
    }
    return TG_OK;
}

/* The scratch the project's own kernel of t is planned with. */
size_t tg_program_own_scratch(const tg_program *p, const tg_tensor *t)
{
    size_t bytes = tg_op_scratch(t, p->plan_threads);
    /* over the proportion: kernels fall back to one thread, which needs the least */
    if (bytes > p->scratch_cap && p->plan_threads > 1)
        bytes = tg_op_scratch(t, 1);
    return bytes;
}

/* From the options (tg_config_samples_per_step) and the micro-batch of the
 * graph's first host input; 0 for a graph without one. */
void tg_program_count_samples(tg_program *p)
{
    const tg_graph *g = p->graph;
    p->samples_per_step = 0;
    for (int i = 0; i < g->n_nodes && !p->samples_per_step; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->role == TG_ROLE_INPUT)
            p->samples_per_step =
                tg_config_samples_per_step(&p->config, t->shape.ndim ? t->shape.dim[0] : 1);
    }
}

/* A loaded executable holds no kernel plans (they are host objects: oneDNN
 * primitives): make them again, and check that each step's kernel scratch
 * is what this machine's kernels now need. oneDNN picks its kernels by the
 * CPU it runs on, so a file made on another machine (or with TG_KERNELS
 * set otherwise) can plan other scratch: such a file is stale. */
tg_status tg_program_plan_loaded(tg_program *p)
{
    tg_program_count_samples(p);
    int n_nodes = p->graph->n_nodes;
    const tg_target_ops *tgt = tg_target_of_config(&p->config); /* as compile() asks */
    p->plan_kernels = tgt && tgt->plan_kernels;
    if (!p->plans && !(p->plans = tg_calloc((size_t)n_nodes + 1, sizeof *p->plans)))
        return tg_error(TG_ERR_NOMEM, "executable: out of memory");
    TG_TRY(tg_layout_assign(p));
    TG_TRY(tg_fuse_check_loaded(p)); /* before plan_node folds a norm by it */
    TG_TRY(tg_layout_size_buffers(p, true));
    for (int d = 0; d < p->n_devices; d++)
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
            for (int k = 0; k < p->devices[d].n_steps[ph]; k++) {
                const tg_step *st = &p->devices[d].steps[ph][k];
                if (st->node < 0 || st->node >= n_nodes)
                    continue;
                const tg_tensor *t = p->graph->nodes[st->node];
                TG_TRY(plan_node(p, t));
                const tg_kernel_plan *kp = &p->plans[st->node];
                size_t want = kp->state ? kp->scratch : tg_program_own_scratch(p, t);
                if (want != st->kernel_scratch)
                    return tg_error(TG_ERR_FORMAT,
                                    "%s: its kernel (%s) needs %zu bytes of scratch here, the "
                                    "file planned %zu (made on another machine or with other "
                                    "kernels)",
                                    t->name, kp->kernel[0] ? kp->kernel : "own", want,
                                    st->kernel_scratch);
            }
    return TG_OK;
}

size_t tg_program_kept_bytes(const tg_program *p, int d)
{
    size_t n = 0;
    /* the caches serve the forward steps; a node runs there once */
    const tg_device_program *dp = &p->devices[d];
    for (int k = 0; p->plans && k < dp->n_steps[TG_PHASE_FORWARD]; k++)
        n += p->plans[dp->steps[TG_PHASE_FORWARD][k].node].kept_bytes;
    return n;
}

tg_status tg_program_add_step(tg_program *p, const tg_tensor *t)
{
    tg_device_program *dp = &p->devices[p->device_of[t->id]];
    tg_phase ph = phase_of(t);
    const tg_op_def *def = tg_op_get(t->op);
    if (!def || !tg_op_has_kernel(t->op))
        return tg_error(TG_ERR_UNSUPPORTED, "%s: op '%s' has no kernel", t->name,
                        tg_op_name(t->op));
    tg_step *st = &dp->steps[ph][dp->n_steps[ph]++];
    memset(st, 0, sizeof *st);
    st->node = t->id;
    st->out = -1;
    TG_TRY(plan_node(p, t));
    if (p->fused_tail && p->fused_tail[t->id] >= 0 && !p->plans[t->id].state)
        return tg_error(TG_ERR_INTERNAL,
                        "%s: fused with the ops after it, but not planned "
                        "with oneDNN (%s)",
                        t->name, p->plans[t->id].kernel);
    if (p->plans[t->id].state) {
        st->scratch_bytes = p->plans[t->id].scratch;
    } else {
        st->scratch_bytes = tg_program_own_scratch(p, t);
    }
    st->kernel_scratch = st->scratch_bytes;
    if (def->flops)
        dp->flops[ph] += def->flops(t);
    return TG_OK;
}

/* Optimizer state: a state leaf read only by optimizer updates. */
bool tg_program_is_optimizer_state(const tg_graph *g, const tg_tensor *t)
{
    if (t->op != TG_OP_STATE)
        return false;
    bool used = false;
    for (int i = t->id + 1; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++)
            if (g->nodes[i]->in[k] == t) {
                if (!(g->nodes[i]->flags & TG_NODE_OPTIMIZER))
                    return false;
                used = true;
            }
    return used;
}

/* Replicated tensor sharding has each replica update a slice of every
 * weight, which is exact for element-wise updates only. LAMB's trust ratio
 * needs ||r|| over the whole tensor and r comes from the sharded moments:
 * it would take a cross-replica reduction inside every LAMB update (one
 * barrier per weight) for little gain, so the combination is refused. */
tg_status tg_program_check_shardable(const tg_graph *g, const char *kind)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (tg_is_weight_update(t) && !tg_op_update_is_elementwise(t))
            return tg_error(TG_ERR_CONFIG,
                            "TensorLocations.%s.replicatedTensorSharding: the lamb "
                            "optimizer ('%s') needs each weight's whole norm and cannot be "
                            "sharded over replicas; turn sharding off or use adamw",
                            kind, t->name);
    }
    return TG_OK;
}

/* A phased program's phase per node, from its placement. */
tg_status tg_program_keep_phases(tg_program *p, const tg_placement *pl)
{
    int n = p->graph->n_nodes;
    if (!(p->phase_of = tg_malloc(((size_t)n + 1) * sizeof *p->phase_of)))
        return tg_error(TG_ERR_NOMEM, "compile: out of memory");
    memcpy(p->phase_of, pl->stage_of, (size_t)n * sizeof *p->phase_of);
    p->n_phases = pl->n_phases;
    return TG_OK;
}

tg_status tg_program_make_homes(tg_program *p, const int *order, int n_order, bool shard_optimizer)
{
    const tg_graph *g = p->graph;
    for (int k = 0; k < n_order; k++) {
        const tg_tensor *t = g->nodes[order[k]];
        if (t->flags & TG_NODE_ALIAS) {
            p->home[t->id] = p->home[t->in[0]->id];
            continue;
        }
        if (tg_nbytes(t) == 0)
            continue;
        tg_region r = t->n_in == 0 ? leaf_region(g, t) : TG_REGION_ACTIVATION;
        p->home[t->id] = tg_program_add_buffer(p, t->id, p->device_of[t->id], r, p->storage[t->id]);
        if (p->home[t->id] < 0)
            return tg_error(TG_ERR_NOMEM, "compile: out of memory");
        int shards = tg_program_shards(p);
        if (shard_optimizer && shards > 1 &&
            tg_numel(t) >= p->config.memory.location[TG_TENSOR_OPTIMIZER].min_sharded &&
            tg_program_is_optimizer_state(g, t)) {
            tg_buffer *b = &p->buffers[p->home[t->id]];
            int64_t n = tg_numel(t), shard = (n + shards - 1) / shards;
            b->sharded = true;
            b->bytes = b->stride = (size_t)shard * tg_dtype_size(b->dtype);
        }
        if (t->op == TG_OP_INPUT) {
            tg_device_program *dp = &p->devices[p->device_of[t->id]];
            dp->inputs[dp->n_inputs++] = p->home[t->id];
        }
    }
    /* Parameters and state nothing reads still belong to the model (and its
     * checkpoints): keep them, on the first device. */
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->n_in == 0 && p->home[i] < 0 && t->role != TG_ROLE_INPUT && tg_nbytes(t) > 0) {
            p->device_of[i] = 0;
            p->home[i] = tg_program_add_buffer(p, i, 0, leaf_region(g, t), p->storage[i]);
            if (p->home[i] < 0)
                return tg_error(TG_ERR_NOMEM, "compile: out of memory");
        }
    }
    return TG_OK;
}

static tg_status need_transfer(tg_program *p, const tg_tensor *reader, int k, int device,
                               tg_phase use)
{
    const tg_graph *g = p->graph;
    int home = p->home[reader->in[k]->id];
    if (home < 0 || p->buffers[home].device == device)
        return TG_OK;
    const tg_tensor *value = g->nodes[p->buffers[home].node];
    tg_transfer *tr = NULL;
    for (int i = 0; i < p->n_transfers && !tr; i++)
        if (p->transfers[i].src_buffer == home && p->transfers[i].dst_device == device)
            tr = &p->transfers[i];
    /* a weight read by a backward step on another device (an input
     * gradient handed back, compile/stages.h): copied there with the
     * backward's values each micro-batch; it changes only at the update */
    bool weight_copy = value->n_in == 0 && value->role == TG_ROLE_PARAM && use == TG_PHASE_BACKWARD;
    if (!tr) {
        if (value->n_in == 0 && !weight_copy)
            return tg_error(TG_ERR_CONFIG,
                            "'%s' is used on device %d and device %d; a weight or input shared by "
                            "two stages is not supported (put its users in one stage)",
                            value->name, p->buffers[home].device, device);
        if (p->n_transfers == p->cap_transfers) {
            int cap = p->cap_transfers ? 2 * p->cap_transfers : 32;
            tg_transfer *t = tg_realloc(p->transfers, (size_t)cap * sizeof *t);
            if (!t)
                return tg_error(TG_ERR_NOMEM, "compile: out of memory");
            p->transfers = t;
            p->cap_transfers = cap;
        }
        int dst =
            tg_program_add_buffer(p, value->id, device, TG_REGION_EXCHANGE, p->buffers[home].dtype);
        if (dst < 0)
            return tg_error(TG_ERR_NOMEM, "compile: out of memory");
        tr = &p->transfers[p->n_transfers++];
        *tr = (tg_transfer){.node = value->id,
                            .src_device = p->buffers[home].device,
                            .dst_device = device,
                            .phase = weight_copy ? TG_PHASE_BACKWARD : phase_of(value),
                            .src_buffer = home,
                            .dst_buffer = dst,
                            .send_at = -1,
                            .recv_at = {-1, -1}};
        if (tr->phase == TG_PHASE_UPDATE)
            return tg_error(TG_ERR_CONFIG,
                            "'%s' is computed by an update on device %d and read "
                            "on device %d",
                            value->name, tr->src_device, device);
    }
    if (use == TG_PHASE_FORWARD)
        tr->used_forward = true;
    else
        tr->used_backward = true;
    if (use == TG_PHASE_FORWARD && value->n_in == 0)
        return tg_error(TG_ERR_CONFIG,
                        "'%s' is used on device %d and device %d; a weight or input shared by "
                        "two stages is not supported (put its users in one stage)",
                        value->name, tr->src_device, device);
    if (use == TG_PHASE_FORWARD && tr->phase == TG_PHASE_BACKWARD)
        return tg_error(TG_ERR_CONFIG,
                        "'%s' is read in the forward pass on device %d but computed "
                        "in the backward pass on device %d",
                        value->name, device, tr->src_device);
    return TG_OK;
}

tg_status tg_program_make_transfers_and_links(tg_program *p)
{
    const tg_graph *g = p->graph;
    for (int d = 0; d < p->n_devices; d++)
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
            for (int s = 0; s < p->devices[d].n_steps[ph]; s++) {
                tg_step *st = &p->devices[d].steps[ph][s];
                const tg_tensor *t = g->nodes[st->node];
                for (int k = 0; k < t->n_in; k++)
                    TG_TRY(need_transfer(p, t, k, d, (tg_phase)ph));
            }
    for (int d = 0; d < p->n_devices; d++)
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
            for (int s = 0; s < p->devices[d].n_steps[ph]; s++) {
                tg_step *st = &p->devices[d].steps[ph][s];
                const tg_tensor *t = g->nodes[st->node];
                st->out = p->home[t->id];
                for (int k = 0; k < t->n_in; k++)
                    st->in[k] = tg_program_buffer_on(p, t->in[k]->id, d);
            }
    return TG_OK;
}

/* Gradients summed over micro-batches (and averaged over replicas) before the
 * update: the update reads the accumulator instead of the gradient. */
tg_status tg_program_make_accumulators(tg_program *p)
{
    const tg_graph *g = p->graph;
    for (int d = 0; d < p->n_devices; d++) {
        tg_device_program *dp = &p->devices[d];
        for (int s = 0; s < dp->n_steps[TG_PHASE_UPDATE]; s++) {
            tg_step *st = &dp->steps[TG_PHASE_UPDATE][s];
            const tg_tensor *u = g->nodes[st->node];
            if (!(u->flags & TG_NODE_OPTIMIZER))
                continue;
            int k = u->n_in - 1, grad = st->in[k];
            if (grad < 0)
                continue;
            int acc = tg_program_add_buffer(p, u->in[0]->id, d, TG_REGION_ACCUMULATOR,
                                            p->precision.accum);
            if (acc < 0)
                return tg_error(TG_ERR_NOMEM, "compile: out of memory");
            dp->accumulators[dp->n_accumulators++] =
                (tg_accumulator){u->in[0]->id, grad, acc, false};
            st->in[k] = acc;
        }
    }
    return TG_OK;
}

tg_status tg_program_check_weight_copies(const tg_program *p)
{
    for (int k = 0; k < p->n_transfers; k++) {
        const tg_buffer *b = &p->buffers[p->transfers[k].src_buffer];
        if (p->graph->nodes[b->node]->n_in == 0 && (b->offloaded || b->sharded))
            return tg_error(TG_ERR_CONFIG,
                            "'%s' is copied from device %d to device %d for an input gradient "
                            "handed back (\"<\" in stages), and is %s; keep weights on chip "
                            "and whole, or drop the '<'",
                            p->graph->nodes[b->node]->name, b->device, p->transfers[k].dst_device,
                            b->offloaded ? "offloaded to streaming memory"
                                         : "sharded over replicas");
    }
    return TG_OK;
}
