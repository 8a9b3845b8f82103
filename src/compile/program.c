/* compile/program.c - compile a graph into per-device programs:
 * schedule -> placement -> phases and steps -> buffers and transfers ->
 * memory plan per device. */
#include "compile/program.h"
#include "compile/layout.h"
#include "core/process.h"

#include "compile/placement.h"
#include "core/alloc.h"
#include "core/error.h"
#include "core/pool.h"
#include "core/units.h"
#include "tilegraph/trace.h"
#include "ops/op.h"
#include "graph/optim_params.h"
#include "target/tiled.h"

#include <stdio.h>
#include <string.h>

const char *tg_region_name(tg_region r)
{
    static const char *const names[] = {
#define TG_REGION_NAME(e, name) name,
        TG_REGION_LIST(TG_REGION_NAME)
#undef TG_REGION_NAME
    };
    return (unsigned)r < TG_REGION_COUNT ? names[r] : "?";
}

static tg_phase phase_of(const tg_tensor *t)
{
    if (t->flags & TG_NODE_OPTIMIZER)
        return TG_PHASE_UPDATE;
    return (t->flags & TG_NODE_BACKWARD) ? TG_PHASE_BACKWARD : TG_PHASE_FORWARD;
}

static bool runs_as_step(const tg_tensor *t)
{
    return t->n_in > 0 && !(t->flags & TG_NODE_ALIAS);
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

static tg_region leaf_region(const tg_tensor *t)
{
    switch (t->role) {
    case TG_ROLE_PARAM:
        return TG_REGION_PARAM;
    case TG_ROLE_STATE:
        return TG_REGION_STATE;
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

/* ---- reading the options --------------------------------------------------------- */

static tg_status read_shape_options(tg_program *p, int n_stages)
{
    const tg_config *c = &p->config;
    const char *strategy = c->pipeline.strategy;
    int m = c->pipeline.accumulation;
    int iters = c->pipeline.device_iterations;
    p->replicas = c->pipeline.replicas;
    tg_schedule_kind kind = TG_SCHEDULE_SHARDED;
    /* a schedule orders a pipeline's stages: anything but the default for
     * another strategy would be ignored, so it is an error */
    if (strcmp(strategy, "pipelined") != 0 && strcmp(c->pipeline.schedule, "grouped") != 0)
        return tg_error(TG_ERR_CONFIG,
                        "pipelineSchedule %s (--schedule) orders the stages of a pipeline and "
                        "cannot apply with executionStrategy %s%s: drop --schedule, or split the "
                        "model with --strategy pipelined and --stages or --split",
                        c->pipeline.schedule, strategy,
                        strcmp(strategy, "single") ? "" : " (the whole model on one device)");
    if (strcmp(strategy, "pipelined") == 0) {
        kind = (tg_schedule_kind)tg_schedule_parse(c->pipeline.schedule);
        if (p->training && m < n_stages)
            return tg_error(TG_ERR_CONFIG,
                            "pipelined training over %d stages needs Training.gradientAccumulation "
                            "of at least %d (it is %d): the pipeline must hold one micro-batch "
                            "per stage",
                            n_stages, n_stages, m);
    }
    if (!p->training && m > 1)
        return tg_error(TG_ERR_CONFIG,
                        "Training.gradientAccumulation is %d, but an inference "
                        "program has no gradients: set it to 1",
                        m);
    /* inference pipelines its device iterations as micro-batches */
    p->micro_batches = p->training ? m : iters;
    p->iterations = p->training ? iters : 1;
    /* under an MPI job the instances' replicas are reduced together, so one
     * local replica still accumulates for the all-reduce */
    int64_t instances = c->distributed.instances;
    /* accumulators in streaming memory are kept even for one micro-batch:
     * adding each gradient there as soon as it is final frees its bytes */
    p->accumulate = p->training && (m * p->replicas * (instances > 1 ? instances : 1) > 1 ||
                                    c->memory.location[TG_TENSOR_ACCUMULATOR].off_chip);
    return tg_pipe_schedule_build(kind, p->n_devices, p->micro_batches, p->training, &p->schedule);
}

/* ---- steps, buffers, transfers ------------------------------------------------------- */

/* Run the op's plan hook once per node (a node recomputed in the backward
 * phase shares its state). A planned kernel whose scratch exceeds the
 * proportion is dropped: the op's own kernels then run with their scratch. */
static tg_status plan_node(tg_program *p, const tg_tensor *t)
{
    tg_kernel_plan *kp = &p->plans[t->id];
    const tg_op_planner *def = tg_op_planner_get(t->op);
    if (!def || !p->plan_kernels || kp->state || kp->kernel[0])
        return TG_OK;
    bool bf16 = p->precision.model == TG_BF16 || p->precision.input == TG_BF16;
    /* planned for the most threads the run may use (n_threads is chosen
     * later, from the load); the run sizes its team to its device's pool */
    tg_plan_opts po = {.n_threads = p->plan_threads, .compute = bf16 ? TG_BF16 : TG_F32};
    for (int k = 0; p->storage && k < t->n_in; k++)
        po.in_storage[k] = p->storage[t->in[k]->id];
    po.out_storage = p->storage ? p->storage[t->id] : TG_F32;
    bool blocked = tg_layout_reads_blocked(p, t);
    po.out_blocked = blocked;
    for (int k = 0; k < t->n_in; k++) {
        po.in_blocked[k] = tg_layout_reads_blocked(p, t->in[k]);
        blocked |= p->layout && (p->layout[t->in[k]->id] & TG_LAYOUT_BLOCKED);
    }
    tg_status s = def->plan(t, &po, kp);
    if (s != TG_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", tg_error_message());
        return tg_error(s, "%s: %s", t->name, why);
    }
    /* a blocked operand keeps the planned kernel: no other one reads it */
    if (kp->state && kp->scratch > p->scratch_cap && !blocked) {
        def->plan_free(kp->state);
        kp->state = NULL;
        snprintf(kp->kernel, sizeof kp->kernel, "own (planned scratch over the proportion)");
    }
    return TG_OK;
}

/* The scratch the project's own kernel of t is planned with. */
static size_t own_scratch(const tg_program *p, const tg_op_def *def, const tg_tensor *t)
{
    size_t bytes = def->scratch ? def->scratch(t, p->plan_threads) : 0;
    /* over the proportion: kernels fall back to one thread, which needs the least */
    if (bytes > p->scratch_cap && p->plan_threads > 1)
        bytes = def->scratch(t, 1);
    return bytes;
}

/* A loaded executable holds no kernel plans (they are host objects: oneDNN
 * primitives): make them again, and check that each step's kernel scratch
 * is what this machine's kernels now need. oneDNN picks its kernels by the
 * CPU it runs on, so a file made on another machine (or with TG_KERNELS
 * set otherwise) can plan other scratch: such a file is stale. */
/* From the counts read from the options and the graph's first host input. */
static void count_samples(tg_program *p)
{
    const tg_graph *g = p->graph;
    p->samples_per_step = 0;
    for (int i = 0; i < g->n_nodes && !p->samples_per_step; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->role == TG_ROLE_INPUT)
            p->samples_per_step = (int64_t)p->iterations * p->replicas * p->micro_batches *
                                  (t->shape.ndim ? t->shape.dim[0] : 1);
    }
}

tg_status tg_program_plan_loaded(tg_program *p)
{
    count_samples(p);
    int n_nodes = p->graph->n_nodes;
    p->plan_kernels = p->tile_plan == NULL;
    if (!p->plans && !(p->plans = tg_calloc((size_t)n_nodes + 1, sizeof *p->plans)))
        return tg_error(TG_ERR_NOMEM, "executable: out of memory");
    TG_TRY(tg_layout_assign(p));
    for (int d = 0; d < p->n_devices; d++)
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
            for (int k = 0; k < p->devices[d].n_steps[ph]; k++) {
                const tg_step *st = &p->devices[d].steps[ph][k];
                if (st->node < 0 || st->node >= n_nodes)
                    continue;
                const tg_tensor *t = p->graph->nodes[st->node];
                TG_TRY(plan_node(p, t));
                const tg_kernel_plan *kp = &p->plans[st->node];
                const tg_op_def *def = tg_op_get(t->op);
                size_t want = kp->state ? kp->scratch : own_scratch(p, def, t);
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

static tg_status add_step(tg_program *p, const tg_tensor *t)
{
    tg_device_program *dp = &p->devices[p->device_of[t->id]];
    tg_phase ph = phase_of(t);
    const tg_op_def *def = tg_op_get(t->op);
    if (!def || !def->forward)
        return tg_error(TG_ERR_UNSUPPORTED, "%s: op '%s' has no kernel", t->name,
                        tg_op_name(t->op));
    tg_step *st = &dp->steps[ph][dp->n_steps[ph]++];
    memset(st, 0, sizeof *st);
    st->node = t->id;
    st->out = -1;
    TG_TRY(plan_node(p, t));
    if (p->plans[t->id].state) {
        st->scratch_bytes = p->plans[t->id].scratch;
    } else {
        st->scratch_bytes = own_scratch(p, def, t);
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
static tg_status check_shardable(const tg_graph *g, const char *kind)
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
static tg_status keep_phases(tg_program *p, const tg_placement *pl)
{
    int n = p->graph->n_nodes;
    if (!(p->phase_of = tg_malloc(((size_t)n + 1) * sizeof *p->phase_of)))
        return tg_error(TG_ERR_NOMEM, "compile: out of memory");
    memcpy(p->phase_of, pl->stage_of, (size_t)n * sizeof *p->phase_of);
    p->n_phases = pl->n_phases;
    return TG_OK;
}

static tg_status make_homes(tg_program *p, const int *order, int n_order, bool shard_optimizer)
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
        tg_region r = t->n_in == 0 ? leaf_region(t) : TG_REGION_ACTIVATION;
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
            p->home[i] = tg_program_add_buffer(p, i, 0, leaf_region(t), p->storage[i]);
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
    if (!tr) {
        if (value->n_in == 0)
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
        *tr = (tg_transfer){
            value->id, p->buffers[home].device, device, phase_of(value), home, dst, false, false};
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
    if (use == TG_PHASE_FORWARD && tr->phase == TG_PHASE_BACKWARD)
        return tg_error(TG_ERR_CONFIG,
                        "'%s' is read in the forward pass on device %d but computed "
                        "in the backward pass on device %d",
                        value->name, device, tr->src_device);
    return TG_OK;
}

static tg_status make_transfers_and_links(tg_program *p)
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
static tg_status make_accumulators(tg_program *p)
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

/* Whether operand v, stored in buffer b, is one a kernel reading bf16 can
 * take: an f32 value stored in f32 or bf16. */
static bool native_operand(const tg_program *p, const tg_tensor *v, int b)
{
    tg_dtype dt = b >= 0 ? p->buffers[b].dtype : v->dtype;
    return v->dtype == TG_F32 && (dt == TG_F32 || dt == TG_BF16);
}

size_t tg_step_native_scratch(const tg_tensor *t)
{
    if (tg_op_update_reads_bf16(t))
        return 0;
    size_t bytes = t->shape.ndim == 4 ? 0 : tg_align((size_t)tg_numel(t) * sizeof(float));
    for (int k = 0; k < t->n_in; k++)
        if (t->in[k]->shape.ndim != 4)
            bytes += tg_align((size_t)tg_numel(t->in[k]) * sizeof(float));
    return bytes;
}

/* ReLU, its gradient and add read bf16 only with every operand in it. */
static bool all_bf16(const tg_program *p, const tg_step *st, const tg_tensor *t)
{
    bool all = st->out >= 0 && p->buffers[st->out].dtype == TG_BF16;
    for (int k = 0; k < t->n_in; k++)
        all &= st->in[k] >= 0 && p->buffers[st->in[k]].dtype == TG_BF16;
    return all;
}

/* A weight update reads bf16 itself when it has an operand in bf16 (in
 * f32 with loss scaling it stays staged: only its gradient is copied). */
static bool some_bf16(const tg_program *p, const tg_step *st, const tg_tensor *t)
{
    bool some = false;
    for (int k = 0; k < t->n_in; k++)
        some |= st->in[k] >= 0 && p->buffers[st->in[k]].dtype == TG_BF16;
    return some;
}

bool tg_step_reads_native(const tg_program *p, const tg_step *st)
{
    const tg_tensor *t = p->graph->nodes[st->node];
    bool blocked = p->layout && (p->layout[t->id] & TG_LAYOUT_OP_BLOCKED);
    if (tg_process_whole_staging() || !tg_op_reads_bf16(t, blocked) ||
        !native_operand(p, t, st->out))
        return false;
    if (tg_elementwise_bf16_supported(t))
        return all_bf16(p, st, t);
    if (tg_op_update_reads_bf16(t) && !some_bf16(p, st, t))
        return false;
    for (int k = 0; k < t->n_in; k++)
        if (!native_operand(p, t->in[k], st->in[k]))
            return false;
    return true;
}

bool tg_step_stages_input(const tg_program *p, const tg_step *st, int k)
{
    const tg_tensor *t = p->graph->nodes[st->node];
    int b = st->in[k];
    if (b < 0)
        return false;
    if ((p->plans && p->plans[st->node].native_storage) || tg_step_reads_native(p, st))
        return false;
    return p->buffers[b].dtype != t->in[k]->dtype ||
           (k == t->n_in - 1 && tg_step_unscales_gradient(p, st));
}

bool tg_step_unscales_gradient(const tg_program *p, const tg_step *st)
{
    const tg_tensor *t = p->graph->nodes[st->node];
    int b = st->in[t->n_in - 1];
    if (!tg_is_weight_update(t) || b < 0)
        return false;
    return p->buffers[b].dtype != t->in[t->n_in - 1]->dtype ||
           p->precision.loss_scaling != TG_LOSS_SCALING_NONE;
}

bool tg_step_stages_output(const tg_program *p, const tg_step *st)
{
    if ((p->plans && p->plans[st->node].native_storage) || tg_step_reads_native(p, st))
        return false;
    return st->out >= 0 && p->buffers[st->out].dtype != p->graph->nodes[st->node]->dtype;
}

bool tg_step_stages_in_chunks(const tg_tensor *t)
{
    if (tg_process_whole_staging())
        return false;
    if (tg_is_weight_update(t))
        return tg_op_update_is_elementwise(t) && t->n_in <= TG_ELEMENTWISE_MAX_INPUTS + 1;
    return tg_op_is_elementwise(t) && t->n_mutated == 0;
}

/* Add one step's f32 staging to its scratch (none for chunks: they live on
 * the stack of the thread converting them). */
static void stage_step(const tg_program *p, tg_step *st)
{
    const tg_tensor *t = p->graph->nodes[st->node];
    if (tg_step_reads_native(p, st)) {
        st->staged = false;
        st->scratch_bytes = tg_align(st->kernel_scratch) + tg_step_native_scratch(t);
        return;
    }
    if (tg_step_stages_in_chunks(t)) {
        bool in = false;
        for (int k = 0; k < t->n_in; k++)
            in |= tg_step_stages_input(p, st, k);
        st->staged = in || tg_step_stages_output(p, st);
        return;
    }
    size_t extra = 0;
    for (int k = 0; k < t->n_in; k++)
        if (tg_step_stages_input(p, st, k))
            extra += tg_align((size_t)tg_numel(t->in[k]) * sizeof(float));
    if (tg_step_stages_output(p, st))
        extra += tg_align((size_t)tg_numel(t) * sizeof(float));
    st->staged = extra > 0;
    if (st->staged)
        st->scratch_bytes = tg_align(st->kernel_scratch) + extra;
}

/* A kernel planned for its operands' storage types finds them in buffers
 * of those types; where a buffer holds another (none is known to), the node
 * falls back to the own kernels, staged through f32 as every other op. */
static bool native_storage_holds(const tg_program *p, const tg_step *st)
{
    const tg_tensor *t = p->graph->nodes[st->node];
    bool same = st->out < 0 || p->buffers[st->out].dtype == p->storage[t->id];
    for (int k = 0; k < t->n_in; k++)
        same &= st->in[k] < 0 || p->buffers[st->in[k]].dtype == p->storage[t->in[k]->id];
    return same;
}

static void drop_native_plan(tg_program *p, const tg_tensor *t)
{
    tg_kernel_plan *kp = &p->plans[t->id];
    tg_op_planner_get(t->op)->plan_free(kp->state);
    kp->state = NULL;
    kp->native_storage = false;
    snprintf(kp->kernel, sizeof kp->kernel, "own (operands not in their planned types)");
}

/* Each step's f32 staging in its scratch, before the memory plan: first the
 * native-storage plans checked over every step of their node (a recomputed
 * node has two), then the staging of what is not native. */
static void plan_staging(tg_program *p)
{
    for (int pass = 0; pass < 2; pass++)
        for (int d = 0; d < p->n_devices; d++)
            for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
                for (int s = 0; s < p->devices[d].n_steps[ph]; s++) {
                    tg_step *st = &p->devices[d].steps[ph][s];
                    const tg_tensor *t = p->graph->nodes[st->node];
                    tg_kernel_plan *kp = &p->plans[t->id];
                    if (pass == 0 && kp->native_storage && !native_storage_holds(p, st))
                        drop_native_plan(p, t);
                    if (pass == 0)
                        continue;
                    if (!kp->state && strncmp(kp->kernel, "own (operands", 13) == 0)
                        st->kernel_scratch = st->scratch_bytes =
                            own_scratch(p, tg_op_get(t->op), t);
                    stage_step(p, st);
                }
}

static void find_outputs(tg_program *p)
{
    const tg_graph *g = p->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        int home = p->home[i];
        if (!(t->flags & TG_NODE_OUTPUT) || home < 0 || t->n_in == 0)
            continue;
        tg_device_program *dp = &p->devices[p->buffers[home].device];
        bool seen = false;
        for (int k = 0; k < dp->n_outputs; k++)
            seen |= dp->outputs[k] == home;
        if (!seen)
            dp->outputs[dp->n_outputs++] = home;
    }
}

static tg_status allocate_lists(tg_program *p, int n_order)
{
    const tg_graph *g = p->graph;
    p->devices = tg_calloc((size_t)p->n_devices, sizeof *p->devices);
    p->device_of = tg_malloc(((size_t)g->n_nodes + 1) * sizeof(int));
    p->home = tg_malloc(((size_t)g->n_nodes + 1) * sizeof(int));
    p->storage = tg_malloc(((size_t)g->n_nodes + 1) * sizeof(tg_dtype));
    p->plans = tg_calloc((size_t)g->n_nodes + 1, sizeof *p->plans);
    if (!p->devices || !p->device_of || !p->home || !p->storage || !p->plans)
        return tg_error(TG_ERR_NOMEM, "compile: out of memory");
    for (int i = 0; i < g->n_nodes; i++)
        p->device_of[i] = p->home[i] = -1;
    for (int d = 0; d < p->n_devices; d++) {
        tg_device_program *dp = &p->devices[d];
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
            if (!(dp->steps[ph] = tg_calloc((size_t)n_order + 1, sizeof(tg_step))))
                return tg_error(TG_ERR_NOMEM, "compile: out of memory");
        dp->inputs = tg_calloc((size_t)g->n_nodes + 1, sizeof(int));
        dp->outputs = tg_calloc((size_t)g->n_nodes + 1, sizeof(int));
        dp->accumulators = tg_calloc((size_t)n_order + 1, sizeof(tg_accumulator));
        if (!dp->inputs || !dp->outputs || !dp->accumulators)
            return tg_error(TG_ERR_NOMEM, "compile: out of memory");
        dp->stash_depth = p->schedule.stash_depth ? p->schedule.stash_depth[d] : 1;
    }
    return TG_OK;
}

/* "needs X but has Y; largest: ...; largest buffers: ..." for device d. */
static tg_status out_of_memory(const tg_program *p, int d, int64_t cap)
{
    const tg_device_program *dp = &p->devices[d];
    char msg[2048], a[32], b[32];
    size_t used = (size_t)snprintf(
        msg, sizeof msg, "device %d needs %s but has %s (memoryPerDevice)", d,
        tg_bytes_str((double)dp->arena_bytes, a, sizeof a), tg_bytes_str((double)cap, b, sizeof b));
    /* the three largest categories */
    bool shown[TG_REGION_COUNT] = {0};
    for (int k = 0; k < 3 && used < sizeof msg; k++) {
        int best = -1;
        for (int r = TG_REGION_PARAM; r < TG_REGION_COUNT; r++)
            if (!shown[r] && dp->region_bytes[r] &&
                (best < 0 || dp->region_bytes[r] > dp->region_bytes[best]))
                best = r;
        if (best < 0)
            break;
        shown[best] = true;
        used += (size_t)snprintf(msg + used, sizeof msg - used, "%s %s %s",
                                 k ? "," : "; largest:", tg_region_name((tg_region)best),
                                 tg_bytes_str((double)dp->region_bytes[best], a, sizeof a));
    }
    /* the three largest buffers */
    int top[3] = {-1, -1, -1};
    for (int i = 0; i < p->n_buffers; i++) {
        const tg_buffer *buf = &p->buffers[i];
        if (buf->device != d)
            continue;
        size_t sz = buf->stride * (size_t)buf->slots;
        for (int k = 0; k < 3; k++) {
            const tg_buffer *t = top[k] >= 0 ? &p->buffers[top[k]] : NULL;
            if (!t || sz > t->stride * (size_t)t->slots) {
                for (int j = 2; j > k; j--)
                    top[j] = top[j - 1];
                top[k] = i;
                break;
            }
        }
    }
    for (int k = 0; k < 3 && top[k] >= 0 && used < sizeof msg; k++) {
        const tg_buffer *buf = &p->buffers[top[k]];
        used += (size_t)snprintf(msg + used, sizeof msg - used, "%s '%s' (%s) %s x %d",
                                 k ? "," : "; largest buffers:", p->graph->nodes[buf->node]->name,
                                 tg_region_name(buf->region),
                                 tg_bytes_str((double)buf->bytes, a, sizeof a), buf->slots);
    }
    return tg_error(TG_ERR_CAPACITY,
                    "%s. Set debug.allowOutOfMemory to compile it anyway and look "
                    "at the plan",
                    msg);
}

static tg_status check_capacity(const tg_program *p)
{
    int64_t cap = p->config.memory.per_device;
    if (p->config.debug.allow_out_of_memory)
        return TG_OK; /* compile anyway; the profile and reports show the overflow */
    const tg_target_ops *t = tg_target_of_config(&p->config);
    if (t && t->check)
        TG_TRY(t->check(p)); /* per tile on tiled targets */
    for (int d = 0; cap > 0 && d < p->n_devices; d++)
        if ((int64_t)p->devices[d].arena_bytes > cap)
            return out_of_memory(p, d, cap);
    return TG_OK;
}

static void read_scratch_cap(tg_program *p, const tg_target_ops *t, const tg_target_desc *target)
{
    int64_t cap = p->config.memory.per_device;
    if (cap <= 0)
        cap = t->device_memory(target);
    double share = p->config.memory.available_proportion;
    p->scratch_cap = cap > 0 ? (size_t)(share * (double)cap) : SIZE_MAX;
}

/* How long the default thread rule watches the machine: five scheduler
 * ticks at 100 Hz, short beside a compile, long enough to see a busy loop. */
#define TG_CPU_WINDOW_MS 50

/* The threads kernel scratch is planned for: the user's count, or every
 * core this process may use, so that a plan does not depend on the load at
 * compile time (the run uses n_threads <= this; kernels planned for more
 * threads than they get use a part of their scratch). */
static int plan_threads(const tg_config *c)
{
    int asked = c->threads.per_device;
    return asked > 0 ? asked : tg_cpu_count();
}

/* Under an MPI job the instances on this host share its cores: N instances
 * of R/N replicas get the threads one process of R replicas gets (scratch is
 * planned for the usable cores, so fewer is safe). The warning above was
 * about this process alone, and stays so. */
static void share_with_host_instances(tg_program *p, int parties)
{
    int instances = p->config.threads.host_instances;
    if (!p->threads_auto || instances <= 1)
        return;
    int t = tg_threads_default(p->cpu.allowed, parties * instances);
    if (t < p->n_threads)
        p->n_threads = t;
}

/* The warning names only what can still help: fewer threads per device when
 * the default would give fewer, else fewer devices or replicas (with one
 * thread each there are still more threads than cores). The option by its
 * key and how to set it from Python (Options().set) and from train (its
 * flag): from Python there are no flags. */
static void threads_warning(tg_program *p, int parties)
{
    int fit = tg_threads_default(p->cpu.allowed, parties);
    char advice[200]; /* no double quotes: plan.c writes it into JSON as it is */
    if (fit < p->n_threads)
        snprintf(advice, sizeof advice,
                 "use fewer devices or replicas, or %d thread%s per device (threadsPerDevice: "
                 "opts.set('threadsPerDevice', %d) in Python, --threads %d in tilegraph train)%s",
                 fit, fit == 1 ? "" : "s", fit, fit, p->threads_auto ? "" : ", or leave it at 0");
    else
        snprintf(advice, sizeof advice,
                 "every device already has %d thread%s: only fewer devices or replicas can help "
                 "(at most %d for %d core%s)",
                 p->n_threads, p->n_threads == 1 ? "" : "s", p->cpu.allowed, p->cpu.allowed,
                 p->cpu.allowed == 1 ? "" : "s");
    snprintf(p->threads_warning, sizeof p->threads_warning,
             "%d device%s x %d replica%s x %d thread%s = %d threads, but this process may "
             "use %d core%s: threads will wait for each other's time slices; %s",
             p->n_devices, p->n_devices == 1 ? "" : "s", p->replicas, p->replicas == 1 ? "" : "s",
             p->n_threads, p->n_threads == 1 ? "" : "s", parties * p->n_threads, p->cpu.allowed,
             p->cpu.allowed == 1 ? "" : "s", advice);
}

/* Threads per device: the user's, or the default rule's (core/cpus.h) over
 * every device of every replica. Warn when they exceed the usable cores:
 * the devices then share cores, and waits between them cost time slices. */
void tg_program_choose_threads(tg_program *p)
{
    int asked = p->config.threads.per_device;
    int parties = p->n_devices * p->replicas;
    p->threads_auto = asked <= 0;
    if (p->threads_auto) {
        p->cpu = tg_cpu_load_recent(TG_CPU_WINDOW_MS);
        p->n_threads = tg_threads_default(p->cpu.free, parties);
    } else {
        int allowed = tg_cpu_count();
        p->cpu = (tg_cpu_load){allowed, 0, 0, false, allowed};
        p->n_threads = asked;
    }
    p->threads_warning[0] = '\0';
    if ((int64_t)parties * p->n_threads > p->cpu.allowed)
        threads_warning(p, parties);
    share_with_host_instances(p, parties);
}

static tg_status compile(tg_program *p)
{
    const tg_config *c = &p->config;
    const tg_graph *g = p->graph;
    int *order = NULL, n_order = 0;
    bool *needed = NULL;
    tg_placement pl = {0};
    tg_trace_channel *ch = tg_trace_channel_get("compile");
    tg_trace_begin(ch, "schedule");
    tg_status s = tg_schedule(g, &order, &n_order);
    tg_trace_end(ch);
    if (s == TG_OK && !(needed = tg_calloc((size_t)g->n_nodes + 1, sizeof(bool))))
        s = tg_error(TG_ERR_NOMEM, "compile: out of memory");
    for (int k = 0; s == TG_OK && k < n_order; k++) {
        needed[order[k]] = true;
        p->training |= (g->nodes[order[k]]->flags & (TG_NODE_BACKWARD | TG_NODE_OPTIMIZER)) != 0;
    }
    tg_trace_begin(ch, "placement");
    if (s == TG_OK)
        s = tg_place(g, c, needed, &pl);
    tg_trace_end(ch);
    if (s == TG_OK) {
        p->n_devices = pl.n_devices;
        snprintf(p->auto_stages, sizeof p->auto_stages, "%s", pl.auto_spec);
        s = read_shape_options(p, pl.n_stages);
    }
    if (s == TG_OK)
        count_samples(p);
    if (s == TG_OK)
        p->plan_threads = plan_threads(c);
    if (s == TG_OK)
        s = allocate_lists(p, n_order);
    if (s == TG_OK)
        s = tg_precision_read(c, &p->precision);
    if (s == TG_OK)
        tg_precision_assign(g, &p->precision, p->storage);
    for (int i = 0; s == TG_OK && i < g->n_nodes; i++)
        if (needed[i])
            p->device_of[i] = pl.device_of_stage[pl.stage_of[i]];
    if (s == TG_OK && pl.n_phases > 0)
        s = keep_phases(p, &pl);
    bool shard = c->memory.location[TG_TENSOR_OPTIMIZER].sharded;
    bool shard_weights = c->memory.location[TG_TENSOR_WEIGHT].sharded;
    if (s == TG_OK && (shard || shard_weights) && tg_program_shards(p) > 1)
        s = check_shardable(g, shard ? "optimizer" : "weight");
    if (s == TG_OK)
        s = make_homes(p, order, n_order, shard);
    const tg_target_ops *tgt = tg_target_of_config(c);
    tg_target_desc target; /* the host's, or the tiles' from targetDescription */
    if (s == TG_OK)
        s = tg_target_from_config(c, &target);
    if (s == TG_OK)
        read_scratch_cap(p, tgt, &target);
    p->plan_kernels = tgt && tgt->plan_kernels;
    if (s == TG_OK)
        s = tg_layout_assign(p);
    for (int k = 0; s == TG_OK && k < n_order; k++)
        if (runs_as_step(g->nodes[order[k]]))
            s = add_step(p, g->nodes[order[k]]);
    if (s == TG_OK)
        s = make_transfers_and_links(p);
    if (s == TG_OK && p->training && c->recompute.pipeline)
        s = tg_recompute(p);
    if (s == TG_OK && p->accumulate)
        s = make_accumulators(p);
    if (s == TG_OK)
        s = tg_split_backward(p);
    if (s == TG_OK)
        find_outputs(p);
    if (s == TG_OK)
        s = tg_sharding_plan(p);
    if (s == TG_OK)
        s = tg_streaming_plan(p);
    if (s == TG_OK)
        plan_staging(p);
    tg_trace_begin(ch, "memory plan");
    for (int d = 0; s == TG_OK && d < p->n_devices; d++)
        s = tg_memplan_device(p, d);
    tg_trace_end(ch);
    if (s == TG_OK && tgt->plan) {
        tg_trace_begin(ch, "tile plan");
        s = tgt->plan(p, &target);
        tg_trace_end(ch);
    }
    if (s == TG_OK)
        s = check_capacity(p);
    if (s == TG_OK)
        tg_program_choose_threads(p);
    if (s == TG_OK) {
        double per_run = 0;
        for (int d = 0; d < p->n_devices; d++) {
            const tg_device_program *dp = &p->devices[d];
            p->arena_bytes += dp->arena_bytes;
            per_run +=
                (dp->flops[TG_PHASE_FORWARD] + dp->flops[TG_PHASE_BACKWARD]) * p->micro_batches +
                dp->flops[TG_PHASE_UPDATE];
        }
        p->flops = per_run * p->iterations * p->replicas;
    }
    tg_placement_free(&pl);
    tg_free(order);
    tg_free(needed);
    return s;
}

/* Automatic stages choose by a memory estimate; the plan is exact. When the
 * chosen split does not fit the plan, leave a larger margin and search
 * again (a few times: each retry removes the splits that came closest). */
static void auto_stages_retry(const tg_graph *g, tg_program **p, tg_status *s)
{
    if (!*p || !(*p)->config.pipeline.auto_stages || (*p)->config.memory.per_device <= 0)
        return;
    /* A split chosen is recorded (auto_stages) before the plan is made: none
     * means the search itself found nothing (its TG_ERR_CAPACITY), and a
     * larger margin would find less. */
    if (!(*p)->auto_stages[0])
        return;
    char first[1024]; /* the plan's own message says what did not fit */
    snprintf(first, sizeof first, "%s", tg_error_message());
    tg_config again;
    if (tg_config_copy(&(*p)->config, &again) != TG_OK)
        return;
    double margin = again.pipeline.memory_margin;
    int threads = (*p)->n_threads;
    for (int k = 0; *s == TG_ERR_CAPACITY && k < 2 && margin + 0.1 <= 0.9; k++) {
        char text[32];
        margin += 0.1;
        snprintf(text, sizeof text, "%.2f", margin);
        if (tg_config_set(&again, "autoStages.memoryMargin", text) != TG_OK)
            break;
        tg_program_destroy(*p);
        if (!(*p = tg_calloc(1, sizeof **p)) || tg_config_copy(&again, &(*p)->config) != TG_OK) {
            *s = tg_error(TG_ERR_NOMEM, "compile: out of memory");
            break;
        }
        (*p)->graph = g;
        (*p)->n_threads = threads;
        *s = compile(*p);
    }
    if (*s == TG_ERR_CAPACITY)
        *s = tg_error(TG_ERR_CAPACITY,
                      "%s (automatic stages searched again leaving %.0f%% of memoryPerDevice "
                      "free, and no split fitted)",
                      first, margin * 100);
    tg_config_free(&again);
}

tg_status tg_program_compile_config(const tg_graph *g, const tg_config *c, tg_program **out)
{
    *out = NULL;
    if (!g)
        return tg_error(TG_ERR_INVALID_ARG, "compile: no graph");
    if (g->status != TG_OK)
        return tg_error(g->status, "compile: the graph has an error: %s", g->error);
    tg_program *p = tg_calloc(1, sizeof *p);
    if (!p)
        return tg_error(TG_ERR_NOMEM, "compile: out of memory");
    p->graph = g;
    tg_status s = tg_config_copy(c, &p->config);
    if (s == TG_OK)
        s = compile(p);
    if (s == TG_ERR_CAPACITY)
        auto_stages_retry(g, &p, &s);
    if (s != TG_OK) {
        tg_program_destroy(p);
        return s;
    }
    *out = p;
    return TG_OK;
}

tg_status tg_program_compile(const tg_graph *g, const tg_options *o, tg_program **out)
{
    tg_config c;
    *out = NULL;
    TG_TRY(tg_config_read(o, &c));
    tg_status s = tg_program_compile_config(g, &c, out);
    tg_config_free(&c);
    return s;
}

void tg_program_destroy(tg_program *p)
{
    if (!p)
        return;
    for (int d = 0; p->devices && d < p->n_devices; d++) {
        tg_device_program *dp = &p->devices[d];
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
            tg_free(dp->steps[ph]);
        tg_free(dp->inputs);
        tg_free(dp->outputs);
        tg_free(dp->accumulators);
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
            tg_free(dp->streams[ph]);
    }
    tg_free(p->devices);
    tg_pipe_schedule_free(&p->schedule);
    tg_free(p->device_of);
    tg_free(p->phase_of);
    tg_free(p->home);
    tg_free(p->storage);
    tg_free(p->layout);
    for (int i = 0; p->plans && i < p->graph->n_nodes; i++)
        if (p->plans[i].state)
            tg_op_planner_get(p->graph->nodes[i]->op)->plan_free(p->plans[i].state);
    tg_free(p->plans);
    tg_free(p->buffers);
    tg_free(p->transfers);
    tg_tile_plan_destroy(p->tile_plan);
    tg_config_free(&p->config);
    tg_free(p);
}
