/* runtime/record.c - the session's part for profiling and tracing: the
 * execution profile being written (profile/profile.h), the devices'
 * recorders of a recorded host step (device_ctx.rec), the device steps
 * kept for the host trace's export, and the clock origin and link ids they
 * share. Every part of the runtime records its events here
 * (tg_engine_record), so this file calls none of them; what the engine
 * adds to the profile after a step is runtime/engine_record.c. */
#include "runtime/record.h"

#include "core/alloc.h"
#include "core/error.h"
#include "profile/profile.h"
#include "tilegraph/trace.h"

#include <stdio.h>
#include <string.h>

#define now_s tg_engine_now

/* Trace tracks per (replica, device): its own; its gradient buckets to the
 * other instances (they overlap its compute); its I/O thread's copies to
 * and from streaming memory (runtime/stream_io.c). */
#define TG_TRACE_LANES 3

struct tg_recording {
    double t_origin;            /* the session's clock origin: events are relative to it */
    uint64_t link_base;         /* link ids of this session's host steps start after it */
    struct tg_profile *profile; /* NULL when off, or after it failed */
    tg_status profile_status;   /* the first failure writing the profile */
    char profile_error[512];    /* its message */
    bool profile_reported;      /* tg_recording_finish returned it */
    bool trace_devices;         /* host tracing is on: keep device steps for the export */
    /* [lane * n + replica * n_devices + device][...] for TG_TRACE_LANES lanes:
     * the devices' steps, their gradient buckets and their I/O threads'
     * copies (the last two overlap the steps, so they get tracks of their own) */
    struct tg_trace_device_step **trace_steps;
    size_t *trace_n, *trace_cap;
    tg_profile_recorder *recorders; /* [replica * n_devices + device], when recording */
    int64_t runs_to_record;
    int n, n_devices, replica_offset; /* (replica, device) pairs; the job's first replica */
    bool training;
};

tg_recording *tg_recording_create(void)
{
    tg_recording *r = tg_calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->t_origin = tg_engine_now();
    static uint64_t sessions; /* link ids of host steps are unique across sessions */
    r->link_base = __atomic_add_fetch(&sessions, 1, __ATOMIC_RELAXED) << 32;
    return r;
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

tg_status tg_recording_start(tg_recording *s, const tg_program *p, const tg_graph *g,
                             int replica_offset)
{
    const tg_config *c = &p->config;
    s->n = p->replicas * p->n_devices;
    s->n_devices = p->n_devices;
    s->training = p->training;
    s->replica_offset = replica_offset;
    bool graph = c->report.graph, execution = c->report.execution;
    /* host tracing on the engine channel also wants the devices' steps */
    s->trace_devices = tg_trace_channel_enabled(tg_trace_channel_get("engine"));
    if (!graph && !execution && !s->trace_devices)
        return TG_OK;
    if (graph || execution)
        TG_TRY(tg_profile_open(c->report.directory, p, execution, &s->profile));
    if (!execution && !s->trace_devices)
        return TG_OK;
    s->runs_to_record = c->report.run_count;
    int n = s->n;
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
        r->op_ns = tg_calloc((size_t)g->n_nodes + 1, sizeof(int64_t));
        r->op_calls = tg_calloc((size_t)g->n_nodes + 1, sizeof(int64_t));
        if (!r->events || !r->op_ns || !r->op_calls)
            return tg_error(TG_ERR_NOMEM, "session: out of memory for the execution profile");
    }
    return TG_OK;
}

/* Record an event that ran from t0 to now (seconds); no-op when not recording. */
void tg_engine_record_span(device_ctx *c, tg_event_kind kind, tg_phase ph, int64_t it, int64_t j,
                           int peer, double t0, double t1, int64_t bytes, double flops)
{
    tg_profile_recorder *r = c->rec;
    if (!r || r->n_events >= r->cap_events)
        return;
    double origin = c->s->recording->t_origin;
    r->events[r->n_events++] = (tg_profile_event){(int16_t)kind,
                                                  (int16_t)ph,
                                                  (int32_t)j,
                                                  (int32_t)it,
                                                  peer,
                                                  (int64_t)((t0 - origin) * 1e9),
                                                  (int64_t)((t1 - origin) * 1e9),
                                                  bytes,
                                                  flops};
}

void tg_engine_record(device_ctx *c, tg_event_kind kind, tg_phase ph, int64_t it, int64_t j,
                      int peer, double t0, int64_t bytes, double flops)
{
    if (c->rec)
        tg_engine_record_span(c, kind, ph, it, j, peer, t0, now_s(), bytes, flops);
}

/* The trace track of an event of (replica, device) i of n: its own; for a
 * gradient bucket the device's bucket track; for a copy its I/O thread ran,
 * the device's streaming-memory track (TG_TRACE_LANES). */
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
static void keep_device_step(tg_recording *s, const tg_profile_event *e, int i, int64_t origin,
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
void tg_recording_keep_steps(tg_recording *s, uint64_t link)
{
    if (!s->trace_devices)
        return;
    int64_t origin = (int64_t)(s->t_origin * 1e9);
    int n = s->n;
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
void tg_recording_drop(tg_recording *s)
{
    s->profile_status = TG_ERR_IO;
    snprintf(s->profile_error, sizeof s->profile_error, "%s", tg_error_message());
    tg_profile_abort(s->profile);
    s->profile = NULL;
}

struct tg_profile *tg_recording_profile(const tg_recording *r)
{
    return r->profile;
}

bool tg_recording_wants(const tg_recording *r, int64_t run)
{
    return r->recorders && run < r->runs_to_record;
}

uint64_t tg_recording_link(const tg_recording *r, int64_t run)
{
    return r->link_base + (uint64_t)run + 1;
}

tg_profile_recorder *tg_recording_device(tg_recording *r, int i)
{
    r->recorders[i].n_events = 0;
    return &r->recorders[i];
}

void tg_recording_record_run(tg_recording *r, int64_t run)
{
    if (r->profile && tg_profile_record_run(r->profile, r->recorders, run) != TG_OK)
        tg_recording_drop(r);
}

tg_status tg_recording_finish(tg_recording *s)
{
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

/* The host trace with this session's device steps as tracks:
 * <trace directory>/tilegraph-<pid>-<training|inference>.trace.json. */
static tg_status export_trace(const tg_recording *s)
{
    int n = s->n, m = 0;
    tg_trace_device_track *tracks = tg_calloc((size_t)(TG_TRACE_LANES * n), sizeof *tracks);
    if (!tracks)
        return tg_error(TG_ERR_NOMEM, "trace export: out of memory");
    static const char *const lanes[TG_TRACE_LANES] = {NULL, "gradient buckets to instances",
                                                      "streaming memory (I/O thread)"};
    for (int i = 0; i < TG_TRACE_LANES * n; i++) {
        int d = i % s->n_devices, lane = i / n;
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
            s->replica_offset + (i % n) / s->n_devices,
            lane * s->n_devices + d,
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
             s->training ? "training" : "inference");
    tg_status st = tg_trace_flush(); /* creates the directory */
    if (st == TG_OK)
        st = tg_trace_export_chrome(path, tracks, (size_t)m);
    tg_free(tracks);
    return st;
}

void tg_recording_free(tg_recording *s)
{
    if (!s)
        return;
    /* cannot fail: a profile failure nobody asked about is printed */
    if (s->profile && tg_profile_close(s->profile, s->recorders) != TG_OK)
        fprintf(stderr, "tilegraph: %s\n", tg_error_message());
    else if (s->profile_status != TG_OK && !s->profile_reported)
        fprintf(stderr, "tilegraph: %s\n", s->profile_error);
    /* reported once, at the program's tg_trace_shutdown */
    if (s->trace_devices && s->trace_steps && export_trace(s) != TG_OK)
        tg_trace_note_failure(TG_ERR_IO);
    for (int i = 0; s->trace_steps && i < TG_TRACE_LANES * s->n; i++)
        tg_free(s->trace_steps[i]);
    tg_free(s->trace_steps);
    tg_free(s->trace_n);
    tg_free(s->trace_cap);
    for (int i = 0; s->recorders && i < s->n; i++) {
        tg_free(s->recorders[i].events);
        tg_free(s->recorders[i].op_ns);
        tg_free(s->recorders[i].op_calls);
    }
    tg_free(s->recorders);
    tg_free(s);
}
