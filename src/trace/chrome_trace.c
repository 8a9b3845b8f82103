/* trace/chrome_trace.c - the host trace (and, through a hook, the devices'
 * execution trace) as Chrome trace-event JSON, which Perfetto and
 * chrome://tracing open.
 *
 * Layout of the file:
 *   {"traceEvents":[ ... ], "displayTimeUnit":"ns", "otherData":{...}}
 * with ts and dur in microseconds since tg_trace_origin_ns(), and
 *   pid 1            the host; tid 1 + N for the N-th thread that recorded;
 *   pid 2 + R        replica R; tid 1 + D for its device D.
 * Host regions are "B"/"E" pairs (they nest by construction; a region still
 * open is closed at the time of the export and marked "open" in its args),
 * instants "i", series "C" counters, heatmaps one "C" counter per slice with
 * one argument per bin (back to zero at the end of a slice with no
 * successor). Device steps are complete events "X". A host region or instant
 * with a link id starts a flow ("s") that ends ("f", bound to the enclosing
 * slice) on the first step with that link of each device track. "M"
 * metadata names every process and thread.
 *
 * The JSON writer's buffer is drained to the file every megabyte, so a large
 * trace is never held twice in memory; the file goes through tg_atomic_file
 * (written beside its final name, fsynced and renamed), so readers never see
 * half a trace.
 */
#include "trace/trace_internal.h"

#include "core/alloc.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef TG_VERSION
#define TG_VERSION "unknown"
#endif

enum { HOST_PID = 1, DRAIN_BYTES = 1 << 20, MAX_OPEN = 66, JOB_PID_STRIDE = 1000 };

/* In an MPI job (runtime/dist.c sets it when the process joins): this
 * instance's index, its clock's offset to instance 0's and the job's time
 * zero on that clock, so that every instance writes pids, flow ids and
 * times that do not collide and line up, and the files splice into one
 * (tg_trace_merge_chrome). Process-wide, as the trace itself is. */
static struct {
    bool set;
    int instance;
    int64_t offset_ns, origin_ns;
} job;

/* The files this process exported, in order (the job's merge pairs the
 * k-th of every instance). Sessions on several threads may export at once,
 * so the list is read and appended under its lock; an entry once written is
 * never changed, so a path handed out stays valid. */
enum { MAX_EXPORTS = 8 };
static pthread_mutex_t exported_lock = PTHREAD_MUTEX_INITIALIZER;
static char exported[MAX_EXPORTS][1024];
static int n_exported;

void tg_trace_set_job(int instance, int64_t clock_offset_ns, int64_t origin_ns)
{
    job.set = true;
    job.instance = instance;
    job.offset_ns = clock_offset_ns;
    job.origin_ns = origin_ns;
}

int tg_trace_exported_count(void)
{
    pthread_mutex_lock(&exported_lock);
    int n = n_exported;
    pthread_mutex_unlock(&exported_lock);
    return n;
}

const char *tg_trace_exported_path(int k)
{
    pthread_mutex_lock(&exported_lock);
    const char *path = k >= 0 && k < n_exported ? exported[k] : NULL;
    pthread_mutex_unlock(&exported_lock);
    return path;
}

static void remember_export(const char *path)
{
    pthread_mutex_lock(&exported_lock);
    bool known = false;
    for (int k = 0; k < n_exported && !known; k++)
        known = !strcmp(exported[k], path);
    if (!known && n_exported < MAX_EXPORTS && strlen(path) < sizeof exported[0])
        snprintf(exported[n_exported++], sizeof exported[0], "%s", path);
    pthread_mutex_unlock(&exported_lock);
}

static int job_pid(int pid)
{
    return job.set ? pid + JOB_PID_STRIDE * (job.instance + 1) : pid;
}

typedef struct open_region {
    const char *name, *channel;
    int64_t start_ns, end_ns;
    int depth;
} open_region;

typedef struct host_link {
    uint64_t link;
    int64_t ts;
    int tid;
} host_link;

typedef struct exporter {
    tg_json_writer w;
    FILE *f;
    int io_errno;     /* first write error */
    tg_status status; /* first error other than the writer's */
    int64_t origin, now;
    /* the host thread being written */
    int tid;
    open_region stack[MAX_OPEN];
    int depth;
    int64_t last_ts;
    /* linked host events, for flows */
    host_link *links;
    size_t n_links, cap_links;
    /* heatmaps: the previous slice, whose return to zero is still due */
    bool pending;
    const char *hm_channel, *hm_name;
    int64_t hm_end;
    int hm_edges;
    double edges[TG_TRACE_MAX_EDGES];
} exporter;

static void drain(exporter *x, bool all)
{
    tg_json_writer *w = &x->w;
    if (w->status != TG_OK || !w->buf || (!all && w->len < DRAIN_BYTES))
        return;
    if (!x->io_errno && w->len && fwrite(w->buf, 1, w->len, x->f) != w->len)
        x->io_errno = errno ? errno : EIO;
    w->len = 0; /* the writer appends at `len`; its open containers are tracked apart */
    w->buf[0] = '\0';
}

static double us(const exporter *x, int64_t t)
{
    if (job.set)
        return (double)(t + job.offset_ns - job.origin_ns) / 1000.0;
    return (double)(t - x->origin) / 1000.0;
}

/* Opens an event object with the fields every event has. */
static void event(exporter *x, const char *ph, const char *name, const char *cat, int64_t ts,
                  int pid, int tid)
{
    tg_json_writer *w = &x->w;
    drain(x, false);
    tg_json_begin_object(w);
    tg_json_key(w, "name");
    tg_json_string(w, name);
    if (cat) {
        tg_json_key(w, "cat");
        tg_json_string(w, cat);
    }
    tg_json_key(w, "ph");
    tg_json_string(w, ph);
    tg_json_key(w, "ts");
    tg_json_number(w, us(x, ts));
    tg_json_key(w, "pid");
    tg_json_int(w, job_pid(pid));
    tg_json_key(w, "tid");
    tg_json_int(w, tid);
}

static void metadata(exporter *x, const char *what, int pid, int tid, const char *name, int sort)
{
    tg_json_writer *w = &x->w;
    event(x, "M", what, NULL, x->origin, pid, tid);
    tg_json_key(w, "args");
    tg_json_begin_object(w);
    tg_json_key(w, "name");
    tg_json_string(w, name);
    tg_json_end_object(w);
    tg_json_end_object(w);
    event(x, "M", what[0] == 'p' ? "process_sort_index" : "thread_sort_index", NULL, x->origin, pid,
          tid);
    tg_json_key(w, "args");
    tg_json_begin_object(w);
    tg_json_key(w, "sort_index");
    tg_json_int(w, what[0] == 'p' && job.set ? sort + JOB_PID_STRIDE * job.instance : sort);
    tg_json_end_object(w);
    tg_json_end_object(w);
}

static void counter(exporter *x, const char *name, const char *cat, int64_t ts, int pid, int tid,
                    double v)
{
    tg_json_writer *w = &x->w;
    event(x, "C", name, cat, ts, pid, tid);
    tg_json_key(w, "args");
    tg_json_begin_object(w);
    tg_json_key(w, "value");
    tg_json_number(w, v);
    tg_json_end_object(w);
    tg_json_end_object(w);
}

/* ---- host events ---------------------------------------------------------------- */

static void end_region(exporter *x, int64_t ts)
{
    const open_region *r = &x->stack[--x->depth];
    event(x, "E", r->name, r->channel, ts, HOST_PID, x->tid);
    tg_json_end_object(&x->w);
    if (ts > x->last_ts)
        x->last_ts = ts;
}

/* Close the open regions at depth >= depth. A region whose end was not yet
 * seen ends where the event that displaces it starts (`bound`), or, when the
 * thread's events are done (bound < 0), at the latest time seen on the
 * thread or the export time. Ends never precede what they enclose. */
static void close_to(exporter *x, int depth, int64_t bound)
{
    while (x->depth > 0 && x->stack[x->depth - 1].depth >= depth) {
        const open_region *r = &x->stack[x->depth - 1];
        int64_t ts = r->end_ns;
        if (ts < 0)
            ts = bound >= 0 ? bound : (x->now > x->last_ts ? x->now : x->last_ts);
        if (ts < r->start_ns)
            ts = r->start_ns;
        end_region(x, ts);
    }
}

static void remember_link(exporter *x, uint64_t link, int64_t ts)
{
    if (!link)
        return;
    if (x->n_links == x->cap_links) {
        size_t cap = x->cap_links ? 2 * x->cap_links : 256;
        host_link *t = tg_realloc(x->links, cap * sizeof *t);
        if (!t) {
            if (x->status == TG_OK)
                x->status = tg_error(TG_ERR_NOMEM, "trace export: out of memory");
            return;
        }
        x->links = t;
        x->cap_links = cap;
    }
    x->links[x->n_links++] = (host_link){link, ts, x->tid};
}

static int on_thread(const tg_trace_thread_info *t, void *ctx)
{
    exporter *x = ctx;
    close_to(x, 0, -1);
    x->tid = 1 + t->index;
    x->last_ts = 0;
    metadata(x, "thread_name", HOST_PID, x->tid, t->name, t->index);
    return 0;
}

static int on_event(const tg_trace_event *e, void *ctx)
{
    exporter *x = ctx;
    tg_json_writer *w = &x->w;
    if (e->start_ns > x->last_ts)
        x->last_ts = e->start_ns;
    switch (e->kind) {
    case TG_TRACE_REGION:
        close_to(x, e->depth, e->start_ns);
        if (x->depth == MAX_OPEN) /* cannot happen: the recorder nests at most 64 deep */
            return 0;
        x->stack[x->depth++] = (open_region){e->name, e->channel, e->start_ns, e->end_ns, e->depth};
        event(x, "B", e->name, e->channel, e->start_ns, HOST_PID, x->tid);
        if (e->link || e->end_ns < 0) {
            tg_json_key(w, "args");
            tg_json_begin_object(w);
            if (e->link) {
                tg_json_key(w, "link");
                tg_json_uint(w, e->link);
            }
            if (e->end_ns < 0) {
                tg_json_key(w, "open");
                tg_json_bool(w, true);
            }
            tg_json_end_object(w);
        }
        tg_json_end_object(w);
        remember_link(x, e->link, e->start_ns);
        break;
    case TG_TRACE_INSTANT:
        event(x, "i", e->name, e->channel, e->start_ns, HOST_PID, x->tid);
        tg_json_key(w, "s");
        tg_json_string(w, "t");
        if (e->link) {
            tg_json_key(w, "args");
            tg_json_begin_object(w);
            tg_json_key(w, "link");
            tg_json_uint(w, e->link);
            tg_json_end_object(w);
        }
        tg_json_end_object(w);
        remember_link(x, e->link, e->start_ns);
        break;
    case TG_TRACE_VALUE:
        counter(x, e->name, e->channel, e->start_ns, HOST_PID, x->tid, e->value);
        break;
    default: /* heatmap samples are written per slice, below */
        break;
    }
    return 0;
}

/* ---- heatmaps ---------------------------------------------------------------------- */

static void bin_label(char *buf, size_t size, const double *edges, int n, int bin)
{
    if (bin == 0)
        snprintf(buf, size, "<%g", edges[0]);
    else if (bin == n)
        snprintf(buf, size, ">=%g", edges[n - 1]);
    else
        snprintf(buf, size, "[%g,%g)", edges[bin - 1], edges[bin]);
}

static void heatmap_counter(exporter *x, const char *channel, const char *name, int64_t ts,
                            const double *edges, int n, const uint64_t *counts)
{
    tg_json_writer *w = &x->w;
    event(x, "C", name, channel, ts, HOST_PID, 1);
    tg_json_key(w, "args");
    tg_json_begin_object(w);
    for (int b = 0; b <= n; b++) {
        char label[64];
        bin_label(label, sizeof label, edges, n, b);
        tg_json_key(w, label);
        tg_json_uint(w, counts ? counts[b] : 0);
    }
    tg_json_end_object(w);
    tg_json_end_object(w);
}

static void settle_heatmap(exporter *x)
{
    if (x->pending)
        heatmap_counter(x, x->hm_channel, x->hm_name, x->hm_end, x->edges, x->hm_edges, NULL);
    x->pending = false;
}

static int on_slice(const tg_trace_heatmap_slice *s, void *ctx)
{
    exporter *x = ctx;
    if (x->pending && (x->hm_channel != s->channel || strcmp(x->hm_name, s->name) != 0 ||
                       x->hm_end != s->start_ns))
        settle_heatmap(x);
    heatmap_counter(x, s->channel, s->name, s->start_ns, s->edges, s->n_edges, s->counts);
    x->pending = true;
    x->hm_channel = s->channel;
    x->hm_name = s->name;
    x->hm_end = s->end_ns;
    x->hm_edges = s->n_edges;
    memcpy(x->edges, s->edges, (size_t)s->n_edges * sizeof *s->edges);
    return 0;
}

/* ---- device tracks ----------------------------------------------------------------- */

static tg_status check_tracks(const tg_trace_device_track *tracks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const tg_trace_device_track *t = &tracks[i];
        if (t->replica < 0 || t->device < 0)
            return tg_error(TG_ERR_INVALID_ARG,
                            "trace export: device track %zu has replica %d, device %d", i,
                            t->replica, t->device);
        if ((t->n_steps && !t->steps) || (t->n_values && !t->values))
            return tg_error(TG_ERR_INVALID_ARG,
                            "trace export: replica %d device %d: counts without arrays", t->replica,
                            t->device);
        for (size_t k = 0; k < i; k++)
            if (tracks[k].replica == t->replica && tracks[k].device == t->device)
                return tg_error(TG_ERR_INVALID_ARG,
                                "trace export: two tracks for replica %d device %d", t->replica,
                                t->device);
        for (size_t s = 0; s < t->n_steps; s++)
            if (t->steps[s].end_ns < t->steps[s].start_ns)
                return tg_error(TG_ERR_INVALID_ARG,
                                "trace export: replica %d device %d: step %zu '%s' ends before "
                                "it starts",
                                t->replica, t->device, s,
                                t->steps[s].name ? t->steps[s].name : "(null)");
    }
    return TG_OK;
}

/* qsort context through a file-level pointer is not thread-safe, so steps are
 * sorted as (key, index) pairs that carry what the comparison needs. */
typedef struct step_key {
    uint64_t link; /* 0 when sorting by time */
    int64_t start, neg_len;
    size_t index;
} step_key;

static int step_key_cmp(const void *a, const void *b)
{
    const step_key *x = a, *y = b;
    if (x->link != y->link)
        return x->link < y->link ? -1 : 1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->neg_len != y->neg_len) /* the longer first, so an enclosing step precedes */
        return x->neg_len < y->neg_len ? -1 : 1;
    return x->index < y->index ? -1 : (x->index > y->index);
}

static int host_link_cmp(const void *a, const void *b)
{
    const host_link *x = a, *y = b;
    if (x->link != y->link)
        return x->link < y->link ? -1 : 1;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->tid < y->tid ? -1 : (x->tid > y->tid);
}

static const host_link *find_host_link(const exporter *x, uint64_t link)
{
    size_t lo = 0, hi = x->n_links;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (x->links[mid].link < link)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < x->n_links && x->links[lo].link == link ? &x->links[lo] : NULL;
}

static void flow(exporter *x, const char *ph, uint64_t id, int64_t ts, int pid, int tid)
{
    tg_json_writer *w = &x->w;
    event(x, ph, "step link", "link", ts, pid, tid);
    tg_json_key(w, "id");
    tg_json_uint(w, job.set ? id + ((uint64_t)job.instance << 48) : id);
    if (ph[0] == 'f') {
        tg_json_key(w, "bp");
        tg_json_string(w, "e");
    }
    tg_json_end_object(w);
}

static void write_track(exporter *x, const tg_trace_device_track *t, step_key *keys,
                        uint64_t *flow_id)
{
    tg_json_writer *w = &x->w;
    int pid = 2 + t->replica, tid = 1 + t->device;
    char label[64];
    snprintf(label, sizeof label, "device %d", t->device);
    metadata(x, "thread_name", pid, tid, t->name ? t->name : label, t->device);

    for (size_t s = 0; s < t->n_steps; s++)
        keys[s] =
            (step_key){0, t->steps[s].start_ns, -(t->steps[s].end_ns - t->steps[s].start_ns), s};
    if (t->n_steps)
        qsort(keys, t->n_steps, sizeof *keys, step_key_cmp);
    for (size_t k = 0; k < t->n_steps; k++) {
        const tg_trace_device_step *s = &t->steps[keys[k].index];
        event(x, "X", s->name ? s->name : "(null)", "device", s->start_ns, pid, tid);
        tg_json_key(w, "dur");
        tg_json_number(w, (double)(s->end_ns - s->start_ns) / 1000.0);
        tg_json_key(w, "args");
        tg_json_begin_object(w);
        tg_json_key(w, "phase");
        tg_json_string(w, tg_trace_phase_name(s->phase));
        if (s->micro_batch >= 0) {
            tg_json_key(w, "micro_batch");
            tg_json_int(w, s->micro_batch);
        }
        if (s->link) {
            tg_json_key(w, "link");
            tg_json_uint(w, s->link);
        }
        tg_json_end_object(w);
        tg_json_end_object(w);
    }
    for (size_t v = 0; v < t->n_values; v++)
        counter(x, t->values[v].name ? t->values[v].name : "(null)", "device", t->values[v].time_ns,
                pid, tid, t->values[v].value);

    /* One flow per link: from its host event to the first step with it. */
    size_t n = 0;
    for (size_t s = 0; s < t->n_steps; s++)
        if (t->steps[s].link)
            keys[n++] = (step_key){t->steps[s].link, t->steps[s].start_ns, 0, s};
    if (n)
        qsort(keys, n, sizeof *keys, step_key_cmp);
    for (size_t k = 0; k < n; k++) {
        if (k && keys[k].link == keys[k - 1].link)
            continue;
        const host_link *h = find_host_link(x, keys[k].link);
        if (!h)
            continue;
        uint64_t id = ++*flow_id;
        flow(x, "s", id, h->ts, HOST_PID, h->tid);
        flow(x, "f", id, keys[k].start, pid, tid);
    }
}

static void write_devices(exporter *x, const tg_trace_device_track *tracks, size_t n_tracks)
{
    size_t most = 0;
    for (size_t i = 0; i < n_tracks; i++)
        most = tracks[i].n_steps > most ? tracks[i].n_steps : most;
    step_key *keys = most ? tg_malloc(most * sizeof *keys) : NULL;
    if (most && !keys) {
        x->status = tg_error(TG_ERR_NOMEM, "trace export: out of memory sorting %zu steps", most);
        return;
    }
    if (x->n_links)
        qsort(x->links, x->n_links, sizeof *x->links, host_link_cmp);
    /* Each replica once, as a process named before its threads. */
    for (size_t i = 0; i < n_tracks; i++) {
        bool first = true;
        for (size_t k = 0; k < i && first; k++)
            first = tracks[k].replica != tracks[i].replica;
        if (first) {
            char label[64];
            if (job.set) /* the session gives the job's replica index */
                snprintf(label, sizeof label, "instance %d: replica %d", job.instance,
                         tracks[i].replica);
            else
                snprintf(label, sizeof label, "replica %d", tracks[i].replica);
            metadata(x, "process_name", 2 + tracks[i].replica, 0, label, 1 + tracks[i].replica);
        }
    }
    uint64_t flow_id = 0;
    for (size_t i = 0; i < n_tracks; i++)
        write_track(x, &tracks[i], keys, &flow_id);
    tg_free(keys);
}

/* Time zero: when tracing started, or earlier if a device step did. */
static int64_t find_origin(const tg_trace_device_track *tracks, size_t n)
{
    int64_t o = tg_trace_origin_ns();
    for (size_t i = 0; i < n; i++) {
        for (size_t s = 0; s < tracks[i].n_steps; s++)
            if (o == 0 || tracks[i].steps[s].start_ns < o)
                o = tracks[i].steps[s].start_ns;
        for (size_t v = 0; v < tracks[i].n_values; v++)
            if (o == 0 || tracks[i].values[v].time_ns < o)
                o = tracks[i].values[v].time_ns;
    }
    return o;
}

/* ---- the file ---------------------------------------------------------------------- */

static tg_status write_document(exporter *x, const tg_trace_device_track *tracks, size_t n_tracks)
{
    tg_json_writer *w = &x->w;
    tg_trace_stats stats = tg_trace_get_stats();
    tg_json_begin_object(w);
    tg_json_key(w, "traceEvents");
    tg_json_begin_array(w);
    char host[64];
    if (job.set)
        snprintf(host, sizeof host, "instance %d: host (pid %ld)", job.instance, (long)getpid());
    else
        snprintf(host, sizeof host, "host (pid %ld)", (long)getpid());
    metadata(x, "process_name", HOST_PID, 0, host, 0);
    TG_TRY(tg_trace_visit(on_thread, on_event, x));
    close_to(x, 0, -1);
    TG_TRY(x->status);
    TG_TRY(tg_trace_heatmap_visit(on_slice, x));
    settle_heatmap(x);
    write_devices(x, tracks, n_tracks);
    TG_TRY(x->status);
    tg_json_end_array(w);
    tg_json_key(w, "displayTimeUnit");
    tg_json_string(w, "ns");
    tg_json_key(w, "otherData");
    tg_json_begin_object(w);
    tg_json_key(w, "producer");
    tg_json_string(w, "tilegraph " TG_VERSION);
    tg_json_key(w, "clock");
    tg_json_string(w, "CLOCK_MONOTONIC");
    tg_json_key(w, "origin_ns");
    tg_json_int(w, job.set ? job.origin_ns : x->origin);
    if (job.set) {
        tg_json_key(w, "instance");
        tg_json_int(w, job.instance);
        tg_json_key(w, "clock_offset_ns"); /* to instance 0's clock */
        tg_json_int(w, job.offset_ns);
    }
    tg_json_key(w, "host_events");
    tg_json_uint(w, stats.events);
    tg_json_key(w, "dropped_events");
    tg_json_uint(w, stats.dropped);
    tg_json_key(w, "unmatched_ends");
    tg_json_uint(w, stats.unmatched_ends);
    tg_json_end_object(w);
    tg_json_end_object(w);
    drain(x, true);
    return TG_OK;
}

tg_status tg_trace_export_chrome(const char *path, const tg_trace_device_track *tracks,
                                 size_t n_tracks)
{
    if (!path || !*path)
        return tg_error(TG_ERR_INVALID_ARG, "trace export: no file name");
    if (n_tracks && !tracks)
        return tg_error(TG_ERR_INVALID_ARG, "trace export: %zu tracks but no array", n_tracks);
    TG_TRY(check_tracks(tracks, n_tracks));

    exporter *x = tg_calloc(1, sizeof *x);
    if (!x)
        return tg_error(TG_ERR_NOMEM, "trace export '%s': out of memory", path);
    tg_atomic_file af;
    tg_status st = tg_atomic_file_open(path, &af);
    if (st != TG_OK) {
        tg_free(x);
        return tg_error_prefix(st, "trace export");
    }
    tg_json_writer_init(&x->w);
    x->f = af.f;
    x->origin = find_origin(tracks, n_tracks);
    x->now = tg_trace_clock_ns();

    st = write_document(x, tracks, n_tracks);
    if (st == TG_OK)
        st = tg_json_writer_finish(&x->w, NULL, NULL);
    if (st == TG_OK && x->io_errno)
        st = tg_error(TG_ERR_IO, "trace export: cannot write '%s': %s", af.tmp,
                      strerror(x->io_errno));
    if (st == TG_OK && (st = tg_atomic_file_commit(&af)) != TG_OK)
        tg_error_prefix(st, "trace export");
    else if (st != TG_OK)
        tg_atomic_file_abort(&af);
    else
        remember_export(path);
    tg_json_writer_free(&x->w);
    tg_free(x->links);
    tg_free(x);
    return st;
}

tg_status tg_trace_write(const char *path)
{
    return tg_trace_export_chrome(path, NULL, 0);
}

/* ---- one file for an MPI job ----------------------------------------------------- */

/* The text of a document's traceEvents array (between its brackets), or
 * false when the document is not laid out as write_document writes it. */
static bool events_of(const char *doc, size_t len, size_t *begin, size_t *end)
{
    static const char head[] = "{\"traceEvents\":[";
    static const char tail[] = "],\"displayTimeUnit\"";
    size_t hl = sizeof head - 1, tl = sizeof tail - 1;
    if (len < hl + tl || memcmp(doc, head, hl) != 0)
        return false;
    for (size_t at = len - tl + 1; at-- > hl;)
        if (!memcmp(doc + at, tail, tl)) {
            *begin = hl;
            *end = at;
            return true;
        }
    return false;
}

tg_status tg_trace_merge_chrome(const char *path, const char *const *docs, const size_t *lens,
                                int n)
{
    tg_atomic_file af;
    TG_TRY(tg_atomic_file_open(path, &af));
    fputs("{\"traceEvents\":[", af.f);
    bool first = true;
    int merged = 0;
    for (int k = 0; k < n; k++) {
        size_t b, e;
        if (!docs[k] || !events_of(docs[k], lens[k], &b, &e))
            continue; /* an instance that wrote no trace, or not ours */
        if (e > b) {
            if (!first)
                fputc(',', af.f);
            fwrite(docs[k] + b, 1, e - b, af.f);
            first = false;
        }
        merged++;
    }
    fprintf(af.f,
            "],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"tilegraph " TG_VERSION
            "\",\"clock\":\"CLOCK_MONOTONIC of instance 0\",\"instances\":%d,\"merged\":%d}}",
            n, merged);
    if (ferror(af.f)) {
        tg_atomic_file_abort(&af);
        return tg_error(TG_ERR_IO, "trace merge: cannot write '%s'", path);
    }
    tg_status st = tg_atomic_file_commit(&af);
    return st == TG_OK ? TG_OK : tg_error_prefix(st, "trace merge");
}
