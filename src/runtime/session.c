/* runtime/session.c - creating and destroying a session (compile, allocate every arena
 * once, initialise weights identically on every replica). Moving data
 * between the host and the devices is runtime/session_io.c; running it is
 * runtime/engine.c. */
#include "runtime/session_state.h"
#include "runtime/session_dist.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/json.h"
#include "ops/blas.h"
#include "profile/profile.h"
#include "runtime/monitor.h"
#include "runtime/prefetch.h"
#include "runtime/rts.h"
#include "runtime/scaling.h"
#include "runtime/stream_io.h"
#include "runtime/verify.h"
#include "tilegraph/trace.h"

#include <stdatomic.h>
#include <stdlib.h>

#include <stdio.h>
#include <string.h>

static int n_arenas(const tg_session *s)
{
    return s->program->replicas * s->program->n_devices;
}

/* Loss scaling, overflow checks and clipping (runtime/scaling.h), and the
 * barrier over each replica's devices that agrees on them. */
static tg_status setup_precision(tg_session *s)
{
    const tg_program *p = s->program;
    TG_TRY(tg_scaling_create(p, s->graph, &s->scaling));
    s->group_count = tg_calloc((size_t)p->replicas, sizeof(int64_t));
    s->group_gen = tg_calloc((size_t)p->replicas, sizeof(int64_t));
    if (!s->group_count || !s->group_gen)
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

/* debug.allowOutOfMemory compiles a plan over capacity; running it is
 * allowed but never silent (what it would need is in the message). */
static void warn_over_capacity(const tg_program *p)
{
    if (!p->config.debug.allow_out_of_memory)
        return;
    if (tg_program_capacity_check(p) == TG_OK)
        return;
    char why[1024];
    snprintf(why, sizeof why, "%s", tg_error_message());
    char *hint = strstr(why, ". Set debug.allowOutOfMemory"); /* it is set */
    if (hint)
        *hint = '\0';
    fprintf(stderr,
            "tilegraph: warning: debug.allowOutOfMemory: running a plan that does not fit (a "
            "real device would refuse it): %s\n",
            why);
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
    s->transfer_spin = tg_calloc((size_t)n, sizeof *s->transfer_spin);
    if (!s->transfer_spin || !s->arena || !s->pools || !s->threads || !s->ctx || !s->last_busy ||
        !s->last_streams || !s->max_in_flight || !s->host_in || !s->host_out || !s->produced ||
        !s->consumed || !s->barrier_count || !s->barrier_gen)
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    tg_spin_init(&s->exchange_spin, spin_ceiling(p));
    for (int i = 0; i < n; i++)
        tg_spin_init(&s->transfer_spin[i], spin_ceiling(p));
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
    tg_cache_result cache = TG_CACHE_OFF;
    if (st == TG_OK) {
        TG_TRACE_SCOPE(tg_trace_channel_get("compile"), "compile")
        st = tg_session_dist_compile(g, &cfg, &s->program, &cache);
    }
    s->cache = (int)cache;
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
            warn_over_capacity(s->program);
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
        st = tg_session_fill_leaves(s);
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
    tg_free(s->transfer_spin);
    tg_scaling_free(s->scaling);
    tg_free(s->group_count);
    tg_free(s->group_gen);
    tg_program_destroy(s->program);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->changed);
    tg_free(s);
}
