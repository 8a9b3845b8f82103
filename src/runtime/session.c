/* runtime/session.c - creating and destroying a session (compile, allocate every arena
 * once, initialise weights identically on every replica) and moving data
 * between the host and the devices. Running it is runtime/engine.c. */
#include "runtime/session_state.h"
#include "runtime/dist.h"
#include "runtime/session_dist.h"
#include "compile/layout.h"

#include "core/alloc.h"
#include "core/convert.h"
#include "core/cpus.h"
#include "core/error.h"
#include "core/json.h"
#include "graph/init.h"
#include "ops/blas.h"
#include "ops/dnnl_util.h"
#include "ops/op.h"
#include "graph/optim_params.h"
#include "profile/profile.h"
#include "runtime/monitor.h"
#include "runtime/prefetch.h"
#include "runtime/rts.h"
#include "runtime/stream_io.h"
#include "runtime/verify.h"
#include "tilegraph/trace.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <stdio.h>
#include <string.h>

static int n_arenas(const tg_session *s)
{
    return s->program->replicas * s->program->n_devices;
}

static unsigned char *replica_data(const tg_session *s, int r, const tg_tensor *t);

static tg_dtype stored_as(const tg_session *s, const tg_tensor *t)
{
    return s->program->storage[t->id];
}

static const tg_buffer *home_buffer(const tg_session *s, const tg_tensor *t)
{
    int b = s->program->home[t->id];
    return b >= 0 ? &s->program->buffers[b] : NULL;
}

static size_t stored_bytes(const tg_session *s, const tg_tensor *t)
{
    return (size_t)tg_numel(t) * tg_dtype_size(stored_as(s, t));
}

/* A persistent value as stored (all of it) into dst, gathered from the
 * replicas' shards under replicated tensor sharding, else replica 0's. */
static tg_status gather_value(const tg_session *s, const tg_tensor *t, unsigned char *dst)
{
    const tg_buffer *b = home_buffer(s, t);
    if (!b->sharded) {
        memcpy(dst, replica_data(s, 0, t), stored_bytes(s, t));
        return TG_OK;
    }
    if (b->region == TG_REGION_PARAM) { /* a sharded weight: the others' shards are here */
        tg_rts_whole(s, s->program->home[t->id], dst);
        return TG_OK;
    }
    if (s->dist) /* the other instances' shards: gathered by tg_dist_sync */
        return tg_session_dist_state(s, t, dst);
    size_t es = tg_dtype_size(b->dtype);
    for (int r = 0; r < s->program->replicas; r++) {
        int64_t begin, end;
        tg_shard_range(tg_numel(t), r, s->program->replicas, &begin, &end);
        memcpy(dst + (size_t)begin * es, replica_data(s, r, t), (size_t)(end - begin) * es);
    }
    return TG_OK;
}

/* The reverse: every replica gets the value, or its shard of it. */
static void scatter_value(const tg_session *s, const tg_tensor *t, const unsigned char *src)
{
    const tg_buffer *b = home_buffer(s, t);
    size_t es = tg_dtype_size(b->dtype);
    for (int r = 0; r < s->program->replicas; r++) {
        int64_t begin = 0, end = tg_numel(t);
        if (b->sharded) /* this instance's replicas hold shards replica_offset + r */
            tg_shard_range(tg_numel(t), s->replica_offset + r, tg_program_shards(s->program),
                           &begin, &end);
        memcpy(replica_data(s, r, t), src + (size_t)begin * es, (size_t)(end - begin) * es);
    }
    if (b->sharded && b->region == TG_REGION_PARAM) /* and the other instances' shards */
        tg_rts_host_written(s, s->program->home[t->id], src);
}

/* Write a persistent value given in t's own type: converted to its storage
 * type and copied to every replica (or shard). */
static tg_status write_value(tg_session *s, const tg_tensor *t, const void *data)
{
    const tg_buffer *b = home_buffer(s, t);
    if (!b->sharded) {
        for (int r = 0; r < s->program->replicas; r++)
            tg_convert(data, t->dtype, replica_data(s, r, t), stored_as(s, t), (size_t)tg_numel(t));
        return TG_OK;
    }
    unsigned char *tmp = tg_malloc(stored_bytes(s, t) + 1);
    if (!tmp)
        return tg_error(TG_ERR_NOMEM, "session: out of memory writing '%s'", t->name);
    tg_convert(data, t->dtype, tmp, stored_as(s, t), (size_t)tg_numel(t));
    scatter_value(s, t, tmp);
    tg_free(tmp);
    return TG_OK;
}

/* Read a persistent value into data, in t's own type. */
static tg_status read_value(const tg_session *s, const tg_tensor *t, void *data)
{
    const tg_buffer *b = home_buffer(s, t);
    if (!b->sharded) {
        tg_convert(replica_data(s, 0, t), stored_as(s, t), data, t->dtype, (size_t)tg_numel(t));
        return TG_OK;
    }
    unsigned char *tmp = tg_malloc(stored_bytes(s, t) + 1);
    if (!tmp)
        return tg_error(TG_ERR_NOMEM, "session: out of memory reading '%s'", t->name);
    tg_status st = gather_value(s, t, tmp);
    if (st == TG_OK)
        tg_convert(tmp, stored_as(s, t), data, t->dtype, (size_t)tg_numel(t));
    tg_free(tmp);
    return st;
}

/* Initial values are drawn in f32 (the same numbers whatever the storage). */
static tg_status fill_leaves(tg_session *s)
{
    const tg_program *p = s->program;
    const tg_graph *g = s->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->n_in > 0 || p->home[i] < 0 || t->role == TG_ROLE_INPUT || t->dtype != TG_F32)
            continue;
        if (stored_as(s, t) == TG_F32 && !home_buffer(s, t)->sharded) {
            for (int r = 0; r < p->replicas; r++)
                tg_init_fill_f32(t, s->seed, (float *)replica_data(s, r, t));
            continue;
        }
        float *tmp = tg_malloc((size_t)tg_numel(t) * sizeof(float) + 1);
        if (!tmp)
            return tg_error(TG_ERR_NOMEM, "session: out of memory initialising '%s'", t->name);
        tg_init_fill_f32(t, s->seed, tmp);
        tg_status st = write_value(s, t, tmp);
        tg_free(tmp);
        TG_TRY(st);
    }
    return TG_OK;
}

/* Loss scaling and overflow checks: the engine's per-run state. */
static tg_status setup_precision(tg_session *s)
{
    const tg_program *p = s->program;
    s->check_overflow = p->training && tg_precision_checks_overflow(&p->precision);
    s->loss_scale = p->precision.loss_scale;
    s->seed_buffer = -1;
    for (int i = 0; i < s->graph->n_nodes; i++)
        if ((s->graph->nodes[i]->flags & TG_NODE_LOSS_SEED) &&
            p->precision.loss_scaling != TG_LOSS_SCALING_NONE)
            s->seed_buffer = p->home[i];
    for (int i = 0; i < s->graph->n_nodes && p->training; i++)
        if (tg_is_weight_update(s->graph->nodes[i])) {
            /* one optimizer per graph: every update carries the same setting */
            float m = tg_optim_params_get(&s->graph->nodes[i]->p).max_grad_norm;
            s->max_grad_norm = m > 0 && isfinite(m) ? m : 0.0f;
            break;
        }
    if (s->max_grad_norm > 0) {
        s->grad_squares = tg_calloc((size_t)(2 * p->replicas * s->graph->n_nodes), sizeof(double));
        if (!s->grad_squares)
            return tg_error(TG_ERR_NOMEM, "session: out of memory");
    }
    s->overflow_mark = tg_calloc((size_t)p->replicas, sizeof(int64_t));
    s->group_count = tg_calloc((size_t)p->replicas, sizeof(int64_t));
    s->group_gen = tg_calloc((size_t)p->replicas, sizeof(int64_t));
    if (!s->overflow_mark || !s->group_count || !s->group_gen)
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    return TG_OK;
}

/* Said once per process on stderr, when a session is compiled: a training
 * script compiles several sessions (training, evaluation) of one shape. */
static void warn_threads_once(const tg_program *p)
{
    static atomic_int warned;
    if (p->threads_warning[0] && !atomic_exchange(&warned, 1))
        fprintf(stderr, "tilegraph: warning: %s\n", p->threads_warning);
}

/* How long waiting threads may spin: hardly at all when the run's threads
 * outnumber the free cores, since then the thread waited for is often the
 * one a spinner keeps off the CPU (core/wait.h). */
static int spin_ceiling(const tg_program *p)
{
    int64_t threads = (int64_t)p->n_threads * p->n_devices * p->replicas;
    return threads > p->cpu.free ? TG_SPIN_MIN : TG_SPIN_MAX;
}

static tg_status allocate(tg_session *s, int threads)
{
    const tg_program *p = s->program;
    int n = n_arenas(s), nodes = s->graph->n_nodes;
    s->arena = tg_calloc((size_t)n, sizeof *s->arena);
    s->pools = tg_calloc((size_t)n, sizeof *s->pools);
    s->threads = tg_calloc((size_t)n, sizeof *s->threads);
    s->ctx = tg_calloc((size_t)n, sizeof *s->ctx);
    s->last_busy = tg_calloc((size_t)n, sizeof *s->last_busy);
    s->last_streams = tg_calloc((size_t)n, sizeof *s->last_streams);
    s->max_in_flight = tg_calloc((size_t)p->n_devices, sizeof *s->max_in_flight);
    s->host_in = tg_calloc((size_t)nodes + 1, sizeof *s->host_in);
    s->host_out = tg_calloc((size_t)nodes + 1, sizeof *s->host_out);
    s->produced = tg_calloc((size_t)(p->n_transfers * p->replicas) + 1, sizeof(int64_t));
    s->consumed = tg_calloc((size_t)(p->n_transfers * p->replicas) + 1, sizeof(int64_t));
    s->barrier_count = tg_calloc((size_t)p->n_devices, sizeof(int64_t));
    s->barrier_gen = tg_calloc((size_t)p->n_devices, sizeof(int64_t));
    if (!s->arena || !s->pools || !s->threads || !s->ctx || !s->last_busy || !s->last_streams ||
        !s->max_in_flight || !s->host_in || !s->host_out || !s->produced || !s->consumed ||
        !s->barrier_count || !s->barrier_gen)
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    tg_spin_init(&s->exchange_spin, spin_ceiling(p));
    for (int i = 0; i < n; i++) {
        size_t bytes = p->devices[i % p->n_devices].arena_bytes;
        s->arena[i] = tg_malloc_aligned(bytes ? bytes : 64);
        if (!s->arena[i])
            return tg_error(TG_ERR_NOMEM,
                            "session: out of memory: cannot allocate %zu bytes for device "
                            "%d of replica %d",
                            bytes, i % p->n_devices, i / p->n_devices);
        memset(s->arena[i], 0, bytes);
        if (!(s->pools[i] = tg_pool_create(threads))) {
            char why[256]; /* the pool's own reason: memory or a thread it could not start */
            snprintf(why, sizeof why, "%s", tg_error_message());
            return tg_error(TG_ERR_NOMEM, "session: device %d of replica %d: %s", i % p->n_devices,
                            i / p->n_devices, why);
        }
        tg_pool_set_spin_ceiling(s->pools[i], spin_ceiling(p));
    }
    s->host_state = tg_calloc((size_t)(p->n_buffers * p->replicas) + 1, sizeof *s->host_state);
    if (!s->host_state)
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    for (int b = 0; b < p->n_buffers; b++)
        for (int r = 0; p->buffers[b].offloaded && r < p->replicas; r++)
            if (!(s->host_state[b * p->replicas + r] =
                      tg_calloc((size_t)p->buffers[b].slots, p->buffers[b].stride)))
                return tg_error(TG_ERR_NOMEM,
                                "session: out of memory for the host copy of offloaded '%s'",
                                s->graph->nodes[p->buffers[b].node]->name);
    int64_t count = tg_session_stream_count(s);
    for (int d = 0; d < p->n_devices; d++) {
        const tg_device_program *dp = &p->devices[d];
        for (int k = 0; k < dp->n_inputs + dp->n_outputs; k++) {
            const tg_buffer *b =
                &p->buffers[k < dp->n_inputs ? dp->inputs[k] : dp->outputs[k - dp->n_inputs]];
            unsigned char **slot = k < dp->n_inputs ? &s->host_in[b->node] : &s->host_out[b->node];
            if (!(*slot = tg_calloc((size_t)count, b->bytes)))
                return tg_error(TG_ERR_NOMEM, "session: out of memory for the host stream of '%s'",
                                s->graph->nodes[b->node]->name);
        }
    }
    return TG_OK;
}

static int parse_output_mode(const char *m, bool training)
{
    if (!strcmp(m, "all"))
        return TG_OUTPUT_ALL;
    if (!strcmp(m, "sum"))
        return TG_OUTPUT_SUM;
    if (!strcmp(m, "final"))
        return TG_OUTPUT_FINAL;
    if (!strcmp(m, "everyN"))
        return TG_OUTPUT_EVERY_N;
    return training ? TG_OUTPUT_FINAL : TG_OUTPUT_ALL;
}

/* The engine options trace.* switch host tracing on like TILEGRAPH_TRACE. */
static tg_status configure_trace(const tg_config *c)
{
    if (!c->trace.enable)
        return TG_OK;
    tg_json_writer w;
    tg_json_writer_init(&w);
    tg_json_begin_object(&w);
    tg_json_key(&w, "enable");
    tg_json_string(&w, "true");
    tg_json_key(&w, "directory");
    tg_json_string(&w, c->trace.directory);
    tg_json_key(&w, "channels");
    tg_json_begin_array(&w);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", c->trace.channels);
    char *save = NULL;
    for (char *ch = strtok_r(buf, ",", &save); ch; ch = strtok_r(NULL, ",", &save))
        tg_json_string(&w, ch);
    tg_json_end_array(&w);
    tg_json_end_object(&w);
    char *json = NULL;
    size_t len = 0;
    tg_status s = tg_json_writer_finish(&w, &json, &len);
    if (s == TG_OK)
        s = tg_trace_configure(json, "engine options trace.*");
    tg_free(json);
    tg_json_writer_free(&w);
    return s;
}

/* The caller's options with the engine options of POPLAR_ENGINE_OPTIONS,
 * then TILEGRAPH_ENGINE_OPTIONS (JSON, the latter wins) applied on top. Only
 * engine options are taken (tg_options_set_engine_json): a training option
 * there is refused by name rather than half-applied. */
static tg_status effective_options(const tg_options *opts, tg_options **out)
{
    static atomic_int told_poplar;
    *out = opts ? tg_options_clone(opts) : tg_options_create();
    if (!*out)
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    const char *poplar = getenv("POPLAR_ENGINE_OPTIONS");
    if (poplar && *poplar) {
        if (atomic_exchange(&told_poplar, 1) == 0)
            fprintf(stderr, "tilegraph: reading engine options from POPLAR_ENGINE_OPTIONS too "
                            "(TILEGRAPH_ENGINE_OPTIONS wins where both set a key)\n");
        TG_TRY(tg_options_set_engine_json(*out, poplar, "POPLAR_ENGINE_OPTIONS"));
    }
    const char *env = getenv("TILEGRAPH_ENGINE_OPTIONS");
    if (env && *env)
        return tg_options_set_engine_json(*out, env, "TILEGRAPH_ENGINE_OPTIONS");
    return TG_OK;
}

/* The most stream events one pass of device d records: a load and a
 * gather before a step, a store after it (runtime/streams.c). */
static int streamed_events(const tg_program *p, int d)
{
    int n = 0;
    for (int ph = TG_PHASE_FORWARD; ph <= TG_PHASE_BACKWARD; ph++)
        for (int k = 0; k < p->devices[d].n_steps[ph]; k++) {
            const tg_step *st = &p->devices[d].steps[ph][k];
            /* loads and gathers; stores and accumulations; and under
             * ioSchedule preload up to three waits for the I/O thread */
            n += (st->n_stream_in > 0 ? 2 : 0) + (st->n_stream_out > 0 ? 2 : 0) +
                 (st->n_stream_in + st->n_stream_out > 0 ? 3 : 0);
        }
    return n;
}

static tg_status start_profiling(tg_session *s)
{
    const tg_config *c = &s->program->config;
    bool graph = c->report.graph, execution = c->report.execution;
    /* host tracing on the engine channel also wants the devices' steps */
    s->trace_devices = tg_trace_channel_enabled(tg_trace_channel_get("engine"));
    if (!graph && !execution && !s->trace_devices)
        return TG_OK;
    const tg_program *p = s->program;
    if (graph || execution) {
        TG_TRY(tg_profile_open(c->report.directory, p, execution, &s->profile));
        TG_TRY(tg_session_dist_profile_meta(s));
    }
    if (!execution && !s->trace_devices)
        return TG_OK;
    s->runs_to_record = c->report.run_count;
    int n = n_arenas(s);
    s->recorders = tg_calloc((size_t)n, sizeof *s->recorders);
    if (!s->recorders)
        return tg_error(TG_ERR_NOMEM, "session: out of memory for the execution profile");
    s->trace_steps = tg_calloc((size_t)(TG_TRACE_LANES * n), sizeof *s->trace_steps);
    s->trace_n = tg_calloc((size_t)(TG_TRACE_LANES * n), sizeof *s->trace_n);
    s->trace_cap = tg_calloc((size_t)(TG_TRACE_LANES * n), sizeof *s->trace_cap);
    if (!s->trace_steps || !s->trace_n || !s->trace_cap)
        return tg_error(TG_ERR_NOMEM, "session: out of memory for the execution trace");
    for (int i = 0; i < n; i++) {
        tg_profile_recorder *r = &s->recorders[i];
        int d = i % p->n_devices;
        /* per pass: the phase, host streams in and out, accumulation, for
         * each transfer a wait to receive, a wait for a free slot and the
         * copy, and around its steps the loads, gathers and stores of
         * streamed copies; per update: offloaded state in and out around
         * each update step, and in an MPI job at most a gradient bucket per
         * accumulator */
        int updates = p->devices[d].n_steps[TG_PHASE_UPDATE];
        int buckets = p->devices[d].n_accumulators;
        r->cap_events = (p->schedule.n_ops[d] * (4 + 3 * p->n_transfers + streamed_events(p, d)) +
                         7 * updates + buckets + 4) *
                            p->iterations +
                        16;
        r->events = tg_calloc((size_t)r->cap_events, sizeof *r->events);
        r->op_ns = tg_calloc((size_t)s->graph->n_nodes + 1, sizeof(int64_t));
        r->op_calls = tg_calloc((size_t)s->graph->n_nodes + 1, sizeof(int64_t));
        if (!r->events || !r->op_ns || !r->op_calls)
            return tg_error(TG_ERR_NOMEM, "session: out of memory for the execution profile");
    }
    return TG_OK;
}

tg_status tg_session_create(tg_graph *g, const tg_options *user_opts, tg_session **out)
{
    *out = NULL;
    if (!g)
        return tg_error(TG_ERR_INVALID_ARG, "session: no graph");
    tg_session *s = tg_calloc(1, sizeof *s);
    if (!s)
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    /* OpenBLAS starts its own threads at load; pin it to one now, not at the
     * first GEMM, so they do not spin while the devices work */
    tg_blas_init();
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->changed, NULL);
    s->graph = g;
    s->t_origin = tg_engine_now();
    static uint64_t sessions; /* link ids of host steps are unique across sessions */
    s->link_base = __atomic_add_fetch(&sessions, 1, __ATOMIC_RELAXED) << 32;
    tg_options *opts = NULL;
    tg_config cfg = {0}; /* read once; the program keeps a copy, read after compiling */
    tg_status st = tg_trace_configure_env();
    if (st == TG_OK)
        st = effective_options(user_opts, &opts);
    if (st == TG_OK)
        st = tg_config_read(opts, &cfg);
    tg_options_destroy(opts);
    if (st == TG_OK)
        st = configure_trace(&cfg);
    if (st == TG_OK)
        st = tg_session_dist_options(s, &cfg);
    if (st != TG_OK) {
        tg_config_free(&cfg);
        tg_session_destroy(s);
        return st;
    }
    s->seed = cfg.seed;
    s->check_nan = cfg.debug.check_nan;
    if (st == TG_OK) {
        TG_TRACE_SCOPE(tg_trace_channel_get("compile"), "compile")
        st = tg_session_dist_compile(g, &cfg, &s->program);
    }
    tg_config_free(&cfg);
    if (st == TG_OK) {
        const tg_program *p = s->program;
        s->output_mode = parse_output_mode(p->config.output.mode, p->training);
        s->output_period = p->config.output.period;
        if (s->output_mode == TG_OUTPUT_EVERY_N && p->iterations % s->output_period)
            st = tg_error(TG_ERR_CONFIG,
                          "outputMode everyN: deviceIterations (%d) is not a "
                          "multiple of outputReturnPeriod (%d)",
                          p->iterations, s->output_period);
        if (st == TG_OK)
            warn_threads_once(s->program);
        if (st == TG_OK)
            st = allocate(s, s->program->n_threads);
        if (st == TG_OK)
            st = tg_rts_setup(s);
        if (st == TG_OK)
            st = setup_precision(s);
        if (st == TG_OK)
            st = start_profiling(s);
        if (st == TG_OK)
            st = tg_session_dist_setup(s);
        if (st == TG_OK)
            s->monitor = tg_monitor_start(p, p->samples_per_step);
    }
    if (st == TG_OK)
        st = fill_leaves(s);
    if (st == TG_OK && s->program->config.debug.verify) {
        tg_session_verify_set_factor(s, s->program->config.debug.verify_tolerance);
        st = tg_verify_arm(s, true);
    }
    if (st != TG_OK) {
        tg_session_destroy(s);
        return st;
    }
    *out = s;
    return TG_OK;
}

/* The host trace with this session's device steps as tracks:
 * <trace directory>/tilegraph-<pid>-<training|inference>.trace.json. */
static tg_status export_trace(const tg_session *s)
{
    const tg_program *p = s->program;
    int n = n_arenas(s), m = 0;
    tg_trace_device_track *tracks = tg_calloc((size_t)(TG_TRACE_LANES * n), sizeof *tracks);
    if (!tracks)
        return tg_error(TG_ERR_NOMEM, "trace export: out of memory");
    static const char *const lanes[TG_TRACE_LANES] = {NULL, "gradient buckets to instances",
                                                      "streaming memory (I/O thread)"};
    for (int i = 0; i < TG_TRACE_LANES * n; i++) {
        int d = i % p->n_devices, lane = i / n;
        const char *name = NULL;
        if (lane > 0 && !s->trace_n[i])
            continue; /* no gradient buckets, or no I/O thread, on this device */
        if (lane > 0) {
            char label[80];
            snprintf(label, sizeof label, "device %d: %s", d, lanes[lane]);
            name = tg_trace_intern(label);
        }
        tracks[m++] = (tg_trace_device_track){
            /* the job's replica index: an MPI job's instances' traces merge */
            s->replica_offset + (i % n) / p->n_devices,
            lane * p->n_devices + d,
            name,
            s->trace_steps[i],
            s->trace_n[i],
            NULL,
            0};
    }
    char path[1024];
    const char *base = tg_trace_output_path();
    size_t len = strlen(base);
    const char *suffix = ".trace.json";
    size_t keep = len > strlen(suffix) ? len - strlen(suffix) : len;
    snprintf(path, sizeof path, "%.*s-%s.trace.json", (int)keep, base,
             p->training ? "training" : "inference");
    tg_status st = tg_trace_flush(); /* creates the directory */
    if (st == TG_OK)
        st = tg_trace_export_chrome(path, tracks, (size_t)m);
    tg_free(tracks);
    return st;
}

tg_status tg_session_finish_profile(tg_session *s)
{
    if (!s)
        return TG_OK;
    if (s->profile_status != TG_OK) {
        s->profile_reported = true;
        return tg_error(s->profile_status, "%s", s->profile_error);
    }
    tg_status st = tg_profile_close(s->profile, s->recorders);
    s->profile = NULL;
    if (st != TG_OK) {
        s->profile_status = st;
        s->profile_reported = true;
        snprintf(s->profile_error, sizeof s->profile_error, "%s", tg_error_message());
    }
    return st;
}

void tg_session_destroy(tg_session *s)
{
    if (!s)
        return;
    int n = s->program ? n_arenas(s) : 0;
    tg_engine_stop_threads(s); /* first: they read everything below */
    tg_verify_destroy(s->verify);
    tg_prefetch_stop(s);
    tg_stream_io_stop(s);
    tg_monitor_stop(s->monitor);
    tg_session_dist_free(s);
    /* destroy cannot fail: a profile failure nobody asked about is printed */
    if (s->profile && tg_profile_close(s->profile, s->recorders) != TG_OK)
        fprintf(stderr, "tilegraph: %s\n", tg_error_message());
    else if (s->profile_status != TG_OK && !s->profile_reported)
        fprintf(stderr, "tilegraph: %s\n", s->profile_error);
    /* reported once, at the program's tg_trace_shutdown */
    if (s->trace_devices && s->trace_steps && export_trace(s) != TG_OK)
        tg_trace_note_failure(TG_ERR_IO);
    for (int i = 0; s->trace_steps && i < TG_TRACE_LANES * n; i++)
        tg_free(s->trace_steps[i]);
    tg_free(s->trace_steps);
    tg_free(s->trace_n);
    tg_free(s->trace_cap);
    for (int i = 0; s->recorders && i < n; i++) {
        tg_free(s->recorders[i].events);
        tg_free(s->recorders[i].op_ns);
        tg_free(s->recorders[i].op_calls);
    }
    tg_free(s->recorders);
    for (int i = 0; i < n; i++) {
        if (s->pools)
            tg_pool_destroy(s->pools[i]);
        if (s->arena)
            tg_free(s->arena[i]);
    }
    /* each list on its own: a create that ran out of memory may have made one only */
    for (int i = 0; s->host_in && i < s->graph->n_nodes; i++)
        tg_free(s->host_in[i]);
    for (int i = 0; s->host_out && i < s->graph->n_nodes; i++)
        tg_free(s->host_out[i]);
    tg_free(s->host_in);
    tg_free(s->host_out);
    for (int i = 0; s->host_state && i < s->program->n_buffers * s->program->replicas; i++)
        tg_free(s->host_state[i]);
    tg_free(s->host_state);
    tg_rts_free(s);
    tg_free(s->arena);
    tg_free(s->pools);
    tg_free(s->threads);
    tg_free(s->ctx);
    tg_free(s->last_busy);
    tg_free(s->last_streams);
    tg_free(s->max_in_flight);
    tg_free(s->produced);
    tg_free(s->consumed);
    tg_free(s->barrier_count);
    tg_free(s->barrier_gen);
    tg_free(s->overflow_mark);
    tg_free(s->grad_squares);
    tg_free(s->group_count);
    tg_free(s->group_gen);
    tg_program_destroy(s->program);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->changed);
    tg_free(s);
}

/* ---- access -------------------------------------------------------------------------- */

static unsigned char *replica_data(const tg_session *s, int r, const tg_tensor *t)
{
    if (!s || !t || t->id >= s->graph->n_nodes || s->graph->nodes[t->id] != t)
        return NULL;
    int b = s->program->home[t->id];
    if (b < 0)
        return NULL;
    const tg_buffer *buf = &s->program->buffers[b];
    if (buf->offloaded)
        return s->host_state[b * s->program->replicas + r];
    return s->arena[r * s->program->n_devices + buf->device] + buf->offset;
}

void *tg_session_data(const tg_session *s, const tg_tensor *t)
{
    return replica_data(s, 0, t);
}
const tg_program *tg_session_program(const tg_session *s)
{
    return s->program;
}
const tg_graph *tg_session_graph(const tg_session *s)
{
    return s->graph;
}

static bool is_leaf_value(const tg_tensor *t)
{
    return t->op == TG_OP_PARAM || t->op == TG_OP_STATE || t->op == TG_OP_CONSTANT;
}

int64_t tg_session_output_count(const tg_session *s, const tg_tensor *t)
{
    const tg_program *p = s->program;
    if (!t || !s->host_out[t->id])
        return 1;
    switch (s->output_mode) {
    case TG_OUTPUT_SUM:
    case TG_OUTPUT_FINAL:
        return p->replicas;
    case TG_OUTPUT_EVERY_N:
        return tg_session_stream_count(s) / s->output_period;
    default:
        return tg_session_stream_count(s);
    }
}

tg_status tg_session_write(tg_session *s, const tg_tensor *t, const void *data, size_t bytes)
{
    if (!t || !replica_data(s, 0, t))
        return tg_error(TG_ERR_INVALID_ARG, "session: tensor '%s' is not stored by this program",
                        t ? t->name : "(null)");
    if (t->op == TG_OP_INPUT) {
        int64_t count = tg_session_stream_count(s);
        if (bytes != (size_t)count * tg_nbytes(t))
            return tg_error(TG_ERR_INVALID_ARG,
                            "session: input '%s' takes %lld micro-batch%s of %zu bytes per run "
                            "(iterations x replicas x accumulation), %zu bytes in all, not %zu",
                            t->name, (long long)count, count == 1 ? "" : "es", tg_nbytes(t),
                            (size_t)count * tg_nbytes(t), bytes);
        tg_convert(data, t->dtype, s->host_in[t->id], stored_as(s, t),
                   (size_t)(count * tg_numel(t)));
        return TG_OK;
    }
    if (!is_leaf_value(t))
        return tg_error(TG_ERR_INVALID_ARG,
                        "session: '%s' is computed; only inputs, weights and "
                        "state can be written",
                        t->name);
    if (bytes != tg_nbytes(t))
        return tg_error(TG_ERR_INVALID_ARG, "session: '%s' holds %zu bytes, not %zu", t->name,
                        tg_nbytes(t), bytes);
    return write_value(s, t, data);
}

int64_t tg_session_output_index(const tg_session *s, const tg_tensor *t, int64_t k)
{
    const tg_program *p = s->program;
    if (!t || !s->host_out[t->id] || k < 0 || k >= tg_session_output_count(s, t))
        return -1;
    switch (s->output_mode) {
    case TG_OUTPUT_ALL:
        return k;
    case TG_OUTPUT_FINAL:
        return p->training ? ((int64_t)(p->iterations - 1) * p->replicas + k) * p->micro_batches +
                                 p->micro_batches - 1
                           : (int64_t)(p->micro_batches - 1) * p->replicas + k;
    case TG_OUTPUT_EVERY_N: {
        int64_t per_iter =
            tg_session_stream_count(s) / (p->training ? p->iterations : p->micro_batches);
        int64_t iter = (k / per_iter + 1) * s->output_period - 1;
        return iter * per_iter + k % per_iter;
    }
    default:
        return -1;
    }
}

/* Copy the k-th returned value of output t (stored copy h) into dst, in the
 * tensor's own type. */
static void copy_out(const tg_session *s, const tg_tensor *t, unsigned char *dst, int64_t h)
{
    tg_convert(s->host_out[t->id] + (size_t)h * stored_bytes(s, t), stored_as(s, t), dst, t->dtype,
               (size_t)tg_numel(t));
}

static tg_status read_output(const tg_session *s, const tg_tensor *t, unsigned char *dst)
{
    const tg_program *p = s->program;
    size_t nb = tg_nbytes(t);
    int64_t count = tg_session_stream_count(s), n = tg_numel(t);
    switch (s->output_mode) {
    case TG_OUTPUT_ALL:
        for (int64_t h = 0; h < count; h++)
            copy_out(s, t, dst + (size_t)h * nb, h);
        return TG_OK;
    case TG_OUTPUT_FINAL:
        for (int r = 0; r < p->replicas; r++) {
            int64_t it = p->iterations - 1, j = p->micro_batches - 1;
            int64_t h =
                p->training ? (it * p->replicas + r) * p->micro_batches + j : j * p->replicas + r;
            copy_out(s, t, dst + (size_t)r * nb, h);
        }
        return TG_OK;
    case TG_OUTPUT_SUM: {
        memset(dst, 0, (size_t)p->replicas * nb);
        if (t->dtype != TG_F32)
            return TG_OK;
        float *v = tg_malloc((size_t)n * sizeof(float) + 1);
        if (!v)
            return tg_error(TG_ERR_NOMEM, "session: out of memory reading '%s'", t->name);
        for (int64_t h = 0; h < count; h++) {
            int r =
                p->training ? (int)((h / p->micro_batches) % p->replicas) : (int)(h % p->replicas);
            float *d = (float *)(dst + (size_t)r * nb);
            copy_out(s, t, (unsigned char *)v, h);
            for (int64_t i = 0; i < n; i++)
                d[i] += v[i];
        }
        tg_free(v);
        return TG_OK;
    }
    case TG_OUTPUT_EVERY_N: {
        int64_t per_iter = count / (p->training ? p->iterations : p->micro_batches), k = 0;
        for (int64_t h = 0; h < count; h++)
            if ((h / per_iter + 1) % s->output_period == 0)
                copy_out(s, t, dst + (size_t)(k++) * nb, h);
        return TG_OK;
    }
    }
    return TG_OK;
}

tg_status tg_session_read(tg_session *s, const tg_tensor *t, void *data, size_t bytes)
{
    if (!t || !replica_data(s, 0, t))
        return tg_error(TG_ERR_INVALID_ARG, "session: tensor '%s' is not stored by this program",
                        t ? t->name : "(null)");
    if (s->host_out[t->id]) {
        int64_t count = tg_session_output_count(s, t);
        if (bytes != (size_t)count * tg_nbytes(t))
            return tg_error(TG_ERR_INVALID_ARG,
                            "session: output '%s' returns %lld cop%s of %zu "
                            "bytes per run (outputMode), %zu bytes in all, not %zu",
                            t->name, (long long)count, count == 1 ? "y" : "ies", tg_nbytes(t),
                            (size_t)count * tg_nbytes(t), bytes);
        return read_output(s, t, data);
    }
    if (!is_leaf_value(t) && t->op != TG_OP_INPUT)
        return tg_error(TG_ERR_INVALID_ARG,
                        "session: '%s' is an intermediate value; mark it as an output to read it",
                        t->name);
    if (t->op == TG_OP_INPUT)
        return tg_error(TG_ERR_INVALID_ARG, "session: '%s' is an input; read it from the host",
                        t->name);
    if (bytes != tg_nbytes(t))
        return tg_error(TG_ERR_INVALID_ARG, "session: '%s' holds %zu bytes, not %zu", t->name,
                        tg_nbytes(t), bytes);
    return read_value(s, t, data);
}

int64_t tg_session_step(const tg_session *s)
{
    return s->step;
}
float tg_session_loss_scale(const tg_session *s)
{
    return s->loss_scale;
}
int64_t tg_session_skipped_updates(const tg_session *s)
{
    return s->skipped_updates;
}
tg_status tg_session_value_out(const tg_session *s, const tg_tensor *t, void *dst)
{
    if (!replica_data(s, 0, t))
        return tg_error(TG_ERR_INVALID_ARG, "session: '%s' is not stored", t ? t->name : "(null)");
    return gather_value(s, t, dst);
}

tg_status tg_session_value_in(tg_session *s, const tg_tensor *t, const void *src)
{
    if (!replica_data(s, 0, t))
        return tg_error(TG_ERR_INVALID_ARG, "session: '%s' is not stored", t ? t->name : "(null)");
    scatter_value(s, t, src);
    return TG_OK;
}

tg_dtype tg_session_storage_dtype(const tg_session *s, const tg_tensor *t)
{
    return replica_data(s, 0, t) ? stored_as(s, t) : t->dtype;
}
void tg_session_set_step(tg_session *s, int64_t step)
{
    s->step = step;
}
const char *tg_session_kernels(const tg_session *s, char *buf, size_t cap)
{
    const tg_program *p = s->program;
    int planned = 0, dnnl = 0, bf16 = 0;
    for (int i = 0; i < p->graph->n_nodes; i++) {
        const tg_kernel_plan *kp = &p->plans[i];
        planned += kp->kernel[0] != 0;
        dnnl += kp->state != NULL;
        bf16 += kp->state != NULL && strstr(kp->kernel, "(bf16)") != NULL;
    }
    int blocked_tensors, blocked_ops;
    tg_layout_counts(p, &blocked_tensors, &blocked_ops);
    if (!planned)
        snprintf(buf, cap, "no op chooses between kernels");
    else
        snprintf(buf, cap,
                 "oneDNN (ISA %s) for %d of %d convolution and matrix-product ops%s%.0d%s",
                 tg_dnnl_isa_name(), dnnl, planned, bf16 ? ", " : "", bf16, bf16 ? " in bf16" : "");
    size_t used = strlen(buf);
    if (blocked_tensors && used < cap)
        snprintf(buf + used, cap - used, "; %d activations kept in nChw16c (%d other ops blocked)",
                 blocked_tensors, blocked_ops);
    return buf;
}

const char *tg_session_precision(const tg_session *s, char *buf, size_t cap)
{
    return tg_precision_describe(&s->program->precision, buf, cap);
}

int tg_session_threads(const tg_session *s)
{
    return s->program->n_threads;
}
int tg_session_devices(const tg_session *s)
{
    return s->program->n_devices;
}
int tg_session_replicas(const tg_session *s)
{
    return s->program->replicas;
}
const char *tg_session_auto_stages(const tg_session *s, const char **option)
{
    const tg_program *p = s->program;
    /* by the form, which a loaded executable keeps as well: stages separate
     * devices with '|', split lists the boundaries (compile/stages.c) */
    if (option)
        *option = p->auto_stages[0] && !strchr(p->auto_stages, '|') ? "split" : "stages";
    return p->auto_stages;
}
double tg_session_flops(const tg_session *s)
{
    return s->program->flops;
}

size_t tg_session_arena_bytes(const tg_session *s)
{
    return s->program->arena_bytes * (size_t)s->program->replicas;
}

int64_t tg_session_samples_per_step(const tg_session *s)
{
    return s->program->samples_per_step;
}

int64_t tg_session_samples_per_run(const tg_session *s, const tg_tensor *input)
{
    return tg_session_stream_count(s) * (input && input->shape.ndim ? input->shape.dim[0] : 1);
}

tg_status tg_session_copy_weights(tg_session *dst, const tg_session *src)
{
    const tg_graph *g = dst->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if ((t->op != TG_OP_PARAM && t->op != TG_OP_STATE) || !replica_data(dst, 0, t))
            continue;
        const tg_tensor *from = tg_graph_find(src->graph, t->name);
        if (!from || !replica_data(src, 0, from)) {
            if (t->op == TG_OP_STATE)
                continue; /* optimizer state the source does not have */
            return tg_error(TG_ERR_NOT_FOUND, "copy weights: '%s' is not in the source session",
                            t->name);
        }
        if (!tg_shape_equal(from->shape, t->shape) || from->dtype != t->dtype) {
            char a[64], b[64];
            return tg_error(TG_ERR_SHAPE, "copy weights: '%s' is %s in the source but %s here",
                            t->name, tg_shape_str(from->shape, a, sizeof a),
                            tg_shape_str(t->shape, b, sizeof b));
        }
        float *tmp = tg_malloc(tg_nbytes(t) + 1);
        tg_status st =
            tmp ? read_value(src, from, tmp)
                : tg_error(TG_ERR_NOMEM, "copy weights: out of memory for '%s'", t->name);
        if (st == TG_OK)
            st = write_value(dst, t, tmp);
        tg_free(tmp);
        TG_TRY(st);
    }
    return TG_OK;
}

void *tg_session_replica_data(const tg_session *s, int replica, const tg_tensor *t)
{
    return replica < s->program->replicas ? replica_data(s, replica, t) : NULL;
}

double tg_session_last_run_seconds(const tg_session *s)
{
    return s->last_run_seconds;
}

int tg_session_max_in_flight(const tg_session *s, int device)
{
    return s->max_in_flight[device];
}

double tg_session_busy_seconds(const tg_session *s, int replica, int device)
{
    return s->last_busy[replica * s->program->n_devices + device];
}

double tg_session_stream_seconds(const tg_session *s, int replica, int device)
{
    return s->last_streams[replica * s->program->n_devices + device];
}
