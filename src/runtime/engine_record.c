/* runtime/engine_record.c - what a recorded host step leaves behind: the
 * device events (tg_engine_record), their copy into the host trace's
 * tracks, the profile's counters and histograms. Split from
 * runtime/engine.c, whose tg_session_run calls these after the step.
 */
#include "runtime/session_state.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/convert.h"
#include "profile/profile.h"
#include "runtime/allreduce.h"
#include "runtime/scaling.h"
#include "tilegraph/trace.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define now_s tg_engine_now

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
void tg_engine_keep_device_steps(tg_session *s, uint64_t link)
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
void tg_engine_drop_profile(tg_session *s)
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
tg_status tg_engine_record_own_counters(tg_session *s)
{
    int64_t step = s->runs - 1;
    TG_TRY(tg_profile_counter(s->profile, step, "host step time (ns)", s->last_run_seconds * 1e9));
    if (s->program->training)
        TG_TRY(tg_profile_counter(s->profile, step, "loss scale",
                                  (double)tg_scaling_loss_scale(s->scaling)));
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
tg_status tg_engine_record_histograms(tg_session *s, int64_t run)
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
