/* runtime/session.c - creating and destroying a session (compile, allocate every arena
 * once, initialise weights identically on every replica). Moving data
 * between the host and the devices is runtime/session_io.c; running it is
 * runtime/engine.c. */
#include "runtime/session_state.h"
#include "runtime/session_dist.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/json.h"
#include "backend/cpu/blas.h"
#include "profile/profile.h"
#include "runtime/device_threads.h"
#include "runtime/exchange.h"
#include "runtime/monitor.h"
#include "runtime/prefetch.h"
#include "runtime/record.h"
#include "runtime/rts.h"
#include "runtime/scaling.h"
#include "runtime/stream_io.h"
#include "runtime/streams.h"
#include "runtime/verify.h"
#include "runtime/run_control.h"
#include "runtime/collectives.h"
#include "tilegraph/trace.h"

#include <stdatomic.h>
#include <stdlib.h>

#include <stdio.h>
#include <string.h>

static int n_arenas(const tg_session *s)
{
    return s->program->replicas * s->program->n_devices;
}

/* Loss scaling, overflow checks and clipping (runtime/scaling.h). */
static tg_status setup_precision(tg_session *s)
{
    return tg_scaling_create(s->program, s->graph, &s->scaling);
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
    int n = n_arenas(s);
    s->arena = tg_calloc((size_t)n, sizeof *s->arena);
    s->pools = tg_calloc((size_t)n, sizeof *s->pools);
    s->ctx = tg_calloc((size_t)n, sizeof *s->ctx);
    s->last_busy = tg_calloc((size_t)n, sizeof *s->last_busy);
    s->last_streams = tg_calloc((size_t)n, sizeof *s->last_streams);
    s->max_in_flight = tg_calloc((size_t)p->n_devices, sizeof *s->max_in_flight);
    if (!s->arena || !s->pools || !s->ctx || !s->last_busy || !s->last_streams || !s->max_in_flight)
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    TG_TRY(tg_exchange_create(p, spin_ceiling(p), &s->exchange));
    TG_TRY(tg_device_threads_create(p->replicas, p->n_devices, tg_exchange_spin(s->exchange),
                                    &s->device_threads));
    for (int i = 0; i < n; i++) {
        size_t bytes = p->devices[i % p->n_devices].arena_bytes;
        s->arena[i] = tg_malloc_aligned(bytes ? bytes : 64);
        if (!s->arena[i])
            return tg_error(TG_ERR_NOMEM,
                            "session: out of memory: cannot allocate %zu bytes for device "
                            "%d of replica %d",
                            bytes, i % p->n_devices, i / p->n_devices);
        tg_advise_huge_pages(s->arena[i], bytes);
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
    return tg_host_streams_create(p, s->graph, tg_session_stream_count(s), &s->streams);
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

/* The profile and trace (runtime/record.h) this session's options ask for,
 * with this instance's place in an MPI job in the profile's record. */
static tg_status start_profiling(tg_session *s)
{
    TG_TRY(tg_recording_start(s->recording, s->program, s->graph, s->replica_offset));
    return tg_recording_profile(s->recording) ? tg_session_dist_profile_meta(s) : TG_OK;
}

tg_status tg_session_finish_profile(tg_session *s)
{
    return s ? tg_recording_finish(s->recording) : TG_OK;
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
    s->graph = g;
    if (tg_run_control_create(&s->run) != TG_OK || tg_collectives_create(&s->coll) != TG_OK ||
        !(s->recording = tg_recording_create())) {
        tg_session_destroy(s);
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    }
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

void tg_session_destroy(tg_session *s)
{
    if (!s)
        return;
    int n = s->program ? n_arenas(s) : 0;
    tg_device_threads_free(s->device_threads); /* first: they read everything below */
    tg_verify_destroy(s->verify);
    tg_prefetch_stop(s);
    tg_stream_io_stop(s);
    tg_monitor_stop(s->monitor);
    tg_session_dist_free(s);
    tg_recording_free(s->recording);
    for (int i = 0; i < n; i++) {
        if (s->pools)
            tg_pool_destroy(s->pools[i]);
        if (s->arena)
            tg_free(s->arena[i]);
    }
    /* each list on its own: a create that ran out of memory may have made one only */
    tg_host_streams_free(s->streams);
    for (int i = 0; s->host_state && i < s->program->n_buffers * s->program->replicas; i++)
        tg_free(s->host_state[i]);
    tg_free(s->host_state);
    tg_rts_free(s);
    tg_free(s->arena);
    tg_free(s->pools);
    tg_free(s->ctx);
    tg_free(s->last_busy);
    tg_free(s->last_streams);
    tg_free(s->max_in_flight);
    tg_exchange_free(s->exchange);
    tg_scaling_free(s->scaling);
    tg_program_destroy(s->program);
    tg_collectives_free(s->coll);
    tg_run_control_free(s->run);
    tg_free(s);
}
