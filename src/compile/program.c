/* compile/program.c - compile a graph into per-device programs:
 * schedule -> placement -> phases and steps -> buffers and transfers ->
 * memory plan per device. The driver (compile) and the options it reads;
 * the steps, buffers and transfers are compile/program_steps.c, the
 * staging plans compile/program_staging.c. */
#include "backend/backend.h"
#include "compile/program.h"
#include "compile/program_internal.h"
#include "compile/phases_auto.h"
#include "compile/layout.h"

#include "compile/placement.h"
#include "core/alloc.h"
#include "core/error.h"
#include "core/units.h"
#include "tilegraph/trace.h"
#include "ops/op.h"
#include "target/tiled.h"

#include <stdio.h>
#include <string.h>

static bool runs_as_step(const tg_tensor *t)
{
    return t->n_in > 0 && !(t->flags & TG_NODE_ALIAS);
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
    if (p->config.debug.allow_out_of_memory)
        return TG_OK; /* compile anyway; the profile and reports show the overflow */
    return tg_program_capacity_check(p);
}

tg_status tg_program_capacity_check(const tg_program *p)
{
    int64_t cap = p->config.memory.per_device;
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
 * the devices then share cores, and waits between them cost time slices.
 * The default (0) shares the cores this process may use, not the free ones:
 * kernels sum in an order that depends on their thread count, so a default
 * that followed the load would change a run's last bits with the machine's
 * load (docs/numerics.md). The load is still sampled, for the waits' spin
 * (runtime/session.c) and the report; -1 asks for the free cores. */
void tg_program_choose_threads(tg_program *p)
{
    int asked = p->config.threads.per_device;
    int parties = p->n_devices * p->replicas;
    p->threads_auto = asked <= 0;
    p->threads_free = asked < 0;
    if (p->threads_auto) {
        p->cpu = tg_cpu_load_recent(TG_CPU_WINDOW_MS);
        p->n_threads = tg_threads_default(p->threads_free ? p->cpu.free : p->cpu.allowed, parties);
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
        tg_program_count_samples(p);
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
        s = tg_program_keep_phases(p, &pl);
    bool shard = c->memory.location[TG_TENSOR_OPTIMIZER].sharded;
    bool shard_weights = c->memory.location[TG_TENSOR_WEIGHT].sharded;
    if (s == TG_OK && (shard || shard_weights) && tg_program_shards(p) > 1)
        s = tg_program_check_shardable(g, shard ? "optimizer" : "weight");
    if (s == TG_OK)
        s = tg_program_make_homes(p, order, n_order, shard);
    const tg_target_ops *tgt = tg_target_of_config(c);
    tg_target_desc target; /* the host's, or the tiles' from targetDescription */
    if (s == TG_OK)
        s = tg_target_from_config(c, &target);
    if (s == TG_OK)
        read_scratch_cap(p, tgt, &target);
    p->plan_kernels = tgt && tgt->plan_kernels;
    if (s == TG_OK)
        s = tg_layout_assign(p);
    if (s == TG_OK)
        s = tg_layout_size_buffers(p, false);
    if (s == TG_OK)
        s = tg_fuse_inference(p, needed);
    for (int k = 0; s == TG_OK && k < n_order; k++)
        if (runs_as_step(g->nodes[order[k]]) && !(p->fused_into && p->fused_into[order[k]] >= 0))
            s = tg_program_add_step(p, g->nodes[order[k]]);
    if (s == TG_OK)
        s = tg_program_make_transfers_and_links(p);
    if (s == TG_OK)
        tg_fuse_link(p);
    if (s == TG_OK && p->training && c->recompute.pipeline)
        s = tg_recompute(p);
    if (s == TG_OK && p->accumulate)
        s = tg_program_make_accumulators(p);
    if (s == TG_OK)
        s = tg_parallel_phases_order(p);
    if (s == TG_OK)
        s = tg_split_backward(p);
    if (s == TG_OK)
        find_outputs(p);
    if (s == TG_OK)
        s = tg_sharding_plan(p);
    if (s == TG_OK)
        s = tg_streaming_plan(p);
    if (s == TG_OK)
        s = tg_program_check_weight_copies(p);
    if (s == TG_OK)
        s = tg_parallel_phases_exchange(p);
    if (s == TG_OK)
        tg_program_plan_staging(p);
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

/* --stages auto found no pipelined split that fits: say which phased plan
 * would (phases auto's search), without switching strategy, which PopTorch
 * never does on its own (docs/memory-locations.md, "Automatic phases"). */
static void suggest_phased(const tg_graph *g, const tg_config *c, tg_status *s)
{
    char first[2048], flags[768];
    snprintf(first, sizeof first, "%s", tg_error_message());
    if (tg_phases_auto_suggest(g, c, flags, sizeof flags))
        *s = tg_error(TG_ERR_CAPACITY,
                      "%s. Phased, the model fits: %s (what --phases auto chooses)", first, flags);
    else
        *s = tg_error(TG_ERR_CAPACITY, "%s", first);
}

tg_status tg_program_compile_config(const tg_graph *g, const tg_config *c, tg_program **out)
{
    *out = NULL;
    if (!g)
        return tg_error(TG_ERR_INVALID_ARG, "compile: no graph");
    if (g->status != TG_OK)
        return tg_error(g->status, "compile: the graph has an error: %s", g->error);
    /* option "target" meets the registry here, before anything is planned for it */
    TG_TRY(tg_target_check(c->target.name));
    tg_program *p = tg_calloc(1, sizeof *p);
    if (!p)
        return tg_error(TG_ERR_NOMEM, "compile: out of memory");
    p->graph = g;
    if (tg_phases_auto_wanted(c)) {
        tg_free(p);
        return tg_phases_auto_compile(g, c, out);
    }
    tg_status s = tg_config_copy(c, &p->config);
    if (s == TG_OK)
        s = compile(p);
    if (s == TG_ERR_CAPACITY)
        auto_stages_retry(g, &p, &s);
    if (s == TG_ERR_CAPACITY && c->pipeline.auto_stages)
        suggest_phased(g, c, &s);
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
    tg_free(p->fused_into);
    tg_free(p->fused_tail);
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
