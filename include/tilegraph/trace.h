/* tilegraph/trace.h - host trace instrumentation (the System Analyser's data).
 *
 * The host side of a run - compile passes, each host step, data loading,
 * waits on queues, all-reduce - is recorded as a timeline of events on named
 * channels, and written as Chrome trace-event JSON that Perfetto
 * (ui.perfetto.dev) and chrome://tracing open (docs/tracing.md).
 *
 *     static tg_trace_channel *ch;              // channels live for the process
 *     ch = tg_trace_channel_get("data");
 *     TG_TRACE_SCOPE(ch, "load batch") {         // a timed region, nested freely
 *         ...
 *         tg_trace_value(ch, "queue depth", depth);
 *     }
 *     tg_trace_flush();                          // -> <directory>/tilegraph-<pid>.trace.json
 *
 * Switching it on without touching the program:
 *     TILEGRAPH_TRACE='{"enable":"true","directory":"./trace","channels":["engine","data"]}'
 * read by tg_trace_configure_env() (the engine calls it when it creates a
 * session). From C: tg_trace_configure(json) or tg_trace_enable("engine,data").
 *
 * Events. A region has a start and an end on one thread and nests inside the
 * regions open on that thread. An instant is a point in time. A value is one
 * point of a numeric series (loss, throughput). A heatmap sample is a value
 * whose distribution is counted in fixed bins per time slice. Regions and
 * instants carry an optional link id (for example the engine's step id) that
 * ties a host step to the device steps it caused in the same timeline.
 *
 * Cost. Every recording call below is an inline check of one global flag
 * (a relaxed atomic load and a predictable branch) while no channel is
 * enabled; bench/bench_trace.c measures it. When a channel is on, an event is
 * appended to the calling thread's own buffer: no lock, no system call beyond
 * reading the monotonic clock, an allocation every few thousand events.
 *
 * Names. Region, instant, value and heatmap names are kept as pointers and
 * read when the trace is written, so they must stay valid until then: string
 * literals, or strings returned by tg_trace_intern (which live for the
 * process).
 *
 * Threads. Recording calls, tg_trace_channel_get, tg_trace_intern,
 * tg_trace_thread_name and the readers (tg_trace_visit, tg_trace_write, ...)
 * may be called from any thread at any time. tg_trace_clear and
 * tg_trace_shutdown free the buffers: call them only while no other thread
 * records (for example after the engine's threads have been joined).
 */
#ifndef TILEGRAPH_TRACE_H
#define TILEGRAPH_TRACE_H

#include "tilegraph/export.h"

#include "tilegraph/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- channels ------------------------------------------------------------------ */

typedef struct tg_trace_channel tg_trace_channel;

/* Longest channel name, in bytes. */
#define TG_TRACE_CHANNEL_NAME_MAX 31
/* Most channels a process can have. */
#define TG_TRACE_MAX_CHANNELS 64

/* The channel named `name`, created on first use. Names are 1 to 31 of
 * [A-Za-z0-9_.-]. The pointer is valid for the whole process (channels are
 * never freed), so callers may keep it in a static. Returns NULL with a
 * message for a bad name or when TG_TRACE_MAX_CHANNELS exist; recording on a
 * NULL channel does nothing. Whether a new channel records follows the
 * current configuration. The library's own channels are "compile", "engine",
 * "data" and "comms" (docs/tracing.md). */
TG_API tg_trace_channel *tg_trace_channel_get(const char *name);
TG_API const char *tg_trace_channel_name(const tg_trace_channel *ch);
/* Whether events on `ch` are being recorded now (false for NULL). */
TG_API bool tg_trace_channel_enabled(const tg_trace_channel *ch);

/* ---- configuration --------------------------------------------------------------- */

/* Apply a JSON configuration object (it replaces the previous one; absent
 * keys take their defaults):
 *   "enable"             "true" / "false" or a JSON boolean (default false)
 *   "directory"          where tg_trace_flush writes (default ".")
 *   "channels"           array of channel names to record; absent or ["*"]:
 *                        every channel
 *   "maxEventsPerThread" events kept per thread; later ones are counted as
 *                        dropped (default 1048576, about 40 MiB)
 *   "heatmapIntervalMs"  length of a heatmap time slice (default 100)
 * An unknown key, a malformed value or malformed JSON is TG_ERR_CONFIG with
 * a message naming `source` (NULL: "trace configuration"), the position and
 * the key, and listing the valid keys; nothing changes then. Enabling does
 * not discard events already recorded. */
TG_API tg_status tg_trace_configure(const char *json, const char *source);
/* tg_trace_configure with the TILEGRAPH_TRACE environment variable; TG_OK and
 * no change when it is unset or empty, or when the same text was already
 * applied (so calling it for every session is cheap). */
TG_API tg_status tg_trace_configure_env(void);
/* Record on the named channels from now on, in addition to those already
 * enabled: "engine,data"; "*" means every channel. Other settings stay. */
TG_API tg_status tg_trace_enable(const char *channels);
/* Stop recording on every channel; recorded events are kept. */
TG_API void tg_trace_disable(void);

/* ---- recording --------------------------------------------------------------------- */

/* Internal: nonzero while any channel is enabled. Read only through the
 * inline functions below. */
extern TG_API int tg_trace_on_;
/* Internal: the out-of-line halves of the recording calls below. */
TG_API void tg_trace_rec_begin(tg_trace_channel *ch, const char *name, uint64_t link);
TG_API void tg_trace_rec_end(tg_trace_channel *ch);
TG_API void tg_trace_rec_instant(tg_trace_channel *ch, const char *name, uint64_t link);
TG_API void tg_trace_rec_value(tg_trace_channel *ch, const char *name, double value);
TG_API void tg_trace_rec_heatmap(tg_trace_channel *ch, const char *name, double value);
/* Whether any channel is enabled (TG_TRACE_ON_ without the builtin). */
TG_API bool tg_trace_is_on(void);

#if defined(__GNUC__) || defined(__clang__)
#define TG_TRACE_ON_() __builtin_expect(__atomic_load_n(&tg_trace_on_, __ATOMIC_RELAXED) != 0, 0)
#else
#define TG_TRACE_ON_() tg_trace_is_on()
#endif

/* Open a region on the calling thread. */
static inline void tg_trace_begin(tg_trace_channel *ch, const char *name)
{
    if (TG_TRACE_ON_())
        tg_trace_rec_begin(ch, name, 0);
}
/* Open a region linked to `link` (nonzero; for example the step id whose
 * device steps this host step causes). */
static inline void tg_trace_begin_link(tg_trace_channel *ch, const char *name, uint64_t link)
{
    if (TG_TRACE_ON_())
        tg_trace_rec_begin(ch, name, link);
}
/* Close the innermost open region of the calling thread, which must be on
 * `ch`. An end with no matching begin (nothing open on this thread, or the
 * innermost region is on another channel) changes nothing else: it is
 * counted (tg_trace_stats.unmatched_ends) and recorded as an instant named
 * "unmatched end". An end on a disabled channel whose begin was not recorded
 * is silently ignored. */
static inline void tg_trace_end(tg_trace_channel *ch)
{
    if (TG_TRACE_ON_())
        tg_trace_rec_end(ch);
}
static inline void tg_trace_instant(tg_trace_channel *ch, const char *name)
{
    if (TG_TRACE_ON_())
        tg_trace_rec_instant(ch, name, 0);
}
static inline void tg_trace_instant_link(tg_trace_channel *ch, const char *name, uint64_t link)
{
    if (TG_TRACE_ON_())
        tg_trace_rec_instant(ch, name, link);
}
/* One point of the series `name` (NaN and infinities are kept as they are
 * and written as null). */
static inline void tg_trace_value(tg_trace_channel *ch, const char *name, double value)
{
    if (TG_TRACE_ON_())
        tg_trace_rec_value(ch, name, value);
}
/* One sample of the heatmap `name`: counted in its bin
 * (tg_trace_heatmap_bins) within its time slice. NaN samples are ignored. */
static inline void tg_trace_heatmap(tg_trace_channel *ch, const char *name, double value)
{
    if (TG_TRACE_ON_())
        tg_trace_rec_heatmap(ch, name, value);
}

#define TG_TRACE_CAT2_(a, b) a##b
#define TG_TRACE_CAT_(a, b) TG_TRACE_CAT2_(a, b)
/* A region around the statement or block that follows:
 *     TG_TRACE_SCOPE(ch, "compile") { ... }
 * `ch` is evaluated twice (pass a variable). Leaving the block by break,
 * return or goto skips the end: use tg_trace_begin/end there instead. */
#define TG_TRACE_SCOPE(ch, name)                                                                   \
    for (int TG_TRACE_CAT_(tg_trace_scope_, __LINE__) = (tg_trace_begin((ch), (name)), 1);         \
         TG_TRACE_CAT_(tg_trace_scope_, __LINE__);                                                 \
         TG_TRACE_CAT_(tg_trace_scope_, __LINE__) = 0, tg_trace_end(ch))
#define TG_TRACE_SCOPE_LINK(ch, name, link)                                                        \
    for (int TG_TRACE_CAT_(tg_trace_scope_, __LINE__) =                                            \
             (tg_trace_begin_link((ch), (name), (link)), 1);                                       \
         TG_TRACE_CAT_(tg_trace_scope_, __LINE__);                                                 \
         TG_TRACE_CAT_(tg_trace_scope_, __LINE__) = 0, tg_trace_end(ch))

/* Bin edges of the heatmap `name` on `ch`: n_edges (1..64) finite, strictly
 * increasing values give n_edges + 1 bins: (-inf, e0), [e0, e1), ...,
 * [e_last, +inf). Without a call, the bins are 0, 1, 2, 4, ..., 1024.
 * Applies to samples already recorded too (bins are counted when read).
 * `name` is copied. Thread-safe. */
TG_API tg_status tg_trace_heatmap_bins(tg_trace_channel *ch, const char *name, const double *edges,
                                       int n_edges);

/* Name the calling thread in the trace ("loader", "replica 0 device 1");
 * at most 63 bytes are kept. Unnamed threads are "thread N". A thread that
 * takes the name of a thread that has exited continues that thread's track
 * (so device threads started afresh for each run keep one track per device);
 * call it before the thread records anything. Takes a lock; may be called
 * while tracing is off. */
TG_API void tg_trace_thread_name(const char *name);

/* A copy of `s` that lives for the process, the same pointer for equal
 * strings: for names computed at run time (op names). NULL when out of memory
 * or s is NULL. Takes a lock: intern once, not per event. */
TG_API const char *tg_trace_intern(const char *s);

/* The clock every event is stamped with: CLOCK_MONOTONIC, in ns. Device
 * tracks passed to the exporter use it too. */
TG_API int64_t tg_trace_clock_ns(void);
/* Time zero of the written trace: when tracing was first enabled since the
 * last tg_trace_clear (0 if never). */
TG_API int64_t tg_trace_origin_ns(void);

/* ---- reading the recorded events ----------------------------------------------- */

typedef enum tg_trace_kind {
    TG_TRACE_REGION,
    TG_TRACE_INSTANT,
    TG_TRACE_VALUE,
    TG_TRACE_SAMPLE, /* a heatmap sample */
    TG_TRACE_KIND_COUNT
} tg_trace_kind;

/* "region", "instant", "value", "sample". */
TG_API const char *tg_trace_kind_name(tg_trace_kind k);

typedef struct tg_trace_event {
    tg_trace_kind kind;
    int thread;          /* index of its thread, as in tg_trace_thread_info */
    const char *channel; /* channel name */
    const char *name;
    int64_t start_ns; /* tg_trace_clock_ns() time */
    int64_t end_ns;   /* REGION: its end, or -1 while still open; others: start_ns */
    int depth;        /* REGION: regions open around it on its thread (0: outermost) */
    uint64_t link;    /* REGION, INSTANT: link id, 0 for none */
    double value;     /* VALUE, SAMPLE */
} tg_trace_event;

typedef struct tg_trace_thread_info {
    int index;        /* 0, 1, ... in the order threads first recorded */
    const char *name; /* tg_trace_thread_name, or "thread N" */
    uint64_t events;  /* recorded (kept) events */
    uint64_t dropped; /* events lost to maxEventsPerThread or out of memory */
    uint64_t unmatched_ends;
} tg_trace_thread_info;

/* Return nonzero to stop the visit. */
typedef int (*tg_trace_thread_fn)(const tg_trace_thread_info *t, void *ctx);
typedef int (*tg_trace_event_fn)(const tg_trace_event *e, void *ctx);

/* For each thread that recorded: on_thread (if not NULL), then on_event (if
 * not NULL) for each of its events in the order they began (so a region
 * comes before the regions nested in it). Events recorded concurrently may or
 * may not be seen; a region still open is seen with end_ns -1. The pointers
 * in the structs are valid during the call. Callbacks may record events but
 * must not call tg_trace_clear or tg_trace_shutdown. */
TG_API tg_status tg_trace_visit(tg_trace_thread_fn on_thread, tg_trace_event_fn on_event,
                                void *ctx);

typedef struct tg_trace_stats {
    int threads;
    uint64_t events, dropped, unmatched_ends;
} tg_trace_stats;
TG_API tg_trace_stats tg_trace_get_stats(void);

/* Summary of the series `name` on channel `channel`, over every thread. A
 * series with no points gives TG_ERR_NOT_FOUND. NaN points are counted in
 * `count` but not in min/max/mean. */
typedef struct tg_trace_series_summary {
    uint64_t count;
    double min, max, mean, last; /* last: the latest point in time */
    int64_t first_ns, last_ns;
} tg_trace_series_summary;
TG_API tg_status tg_trace_series(const char *channel, const char *name,
                                 tg_trace_series_summary *out);

/* One time slice of one heatmap: the samples of [start_ns, end_ns) (slices
 * are aligned to tg_trace_origin_ns and heatmapIntervalMs long) counted in
 * n_edges + 1 bins. Slices with no samples are not visited. */
typedef struct tg_trace_heatmap_slice {
    const char *channel, *name;
    int64_t start_ns, end_ns;
    const double *edges;
    int n_edges;
    const uint64_t *counts; /* n_edges + 1 */
} tg_trace_heatmap_slice;
typedef int (*tg_trace_slice_fn)(const tg_trace_heatmap_slice *s, void *ctx);
/* Every slice of every heatmap, grouped by heatmap (channel, then name) and
 * in time order within one. Stops when fn returns nonzero. */
TG_API tg_status tg_trace_heatmap_visit(tg_trace_slice_fn fn, void *ctx);

/* ---- writing ------------------------------------------------------------------------- */

/* The file tg_trace_flush writes: <directory>/tilegraph-<pid>.trace.json. */
TG_API const char *tg_trace_output_path(void);
/* The directory tg_trace_flush writes into while tracing is enabled (so a
 * program can check it is writable before a long run); NULL when it is not.
 * Valid until the next call on this thread. */
TG_API const char *tg_trace_directory(void);
/* Write every event recorded so far, as Chrome trace-event JSON, to `path`
 * (replaced atomically: written beside it, then renamed). Events stay
 * recorded, so a later write contains them again. */
TG_API tg_status tg_trace_write(const char *path);
/* tg_trace_write to tg_trace_output_path(), creating the directory. TG_OK
 * without writing when tracing was never enabled. */
TG_API tg_status tg_trace_flush(void);
/* Flush (when tracing was enabled), then disable, forget the configuration
 * and free every event (tg_trace_clear). Returns the flush's status. Call it
 * at the end of the program - the library never does - while no other
 * thread records. The `tilegraph` command calls it at exit. */
TG_API tg_status tg_trace_shutdown(void);
/* Free every recorded event and reset the time origin; the configuration
 * stays. Only while no other thread records. */
TG_API void tg_trace_clear(void);
/* Remember that a trace write made elsewhere (a session's device-track
 * export) failed with the current error message: the next tg_trace_shutdown
 * returns the first such failure if its own write succeeds, so the program
 * reports one failure once and can exit non-zero. Thread-safe. */
TG_API void tg_trace_note_failure(tg_status status);

/* ---- export with device tracks (the engine's execution trace) ------------- */

typedef enum tg_trace_phase {
    TG_TRACE_PHASE_OTHER, /* copies, all-reduce, syncs */
    TG_TRACE_PHASE_FORWARD,
    TG_TRACE_PHASE_BACKWARD,
    TG_TRACE_PHASE_UPDATE,
    TG_TRACE_PHASE_COUNT
} tg_trace_phase;
/* "other", "forward", "backward", "update". */
TG_API const char *tg_trace_phase_name(tg_trace_phase p);

/* One step a device executed. Times are tg_trace_clock_ns() (on a target
 * that counts cycles, convert to this clock first). */
typedef struct tg_trace_device_step {
    const char *name;
    int64_t start_ns, end_ns;
    int64_t micro_batch; /* -1: not tied to one micro-batch */
    tg_trace_phase phase;
    uint64_t link; /* the link id of the host step that caused it; 0: none */
} tg_trace_device_step;

/* One point of a per-device series (memory in use, queue occupancy). */
typedef struct tg_trace_device_value {
    const char *name;
    int64_t time_ns;
    double value;
} tg_trace_device_value;

/* Everything one (replica, device) did. In the file each replica is a
 * process ("replica R") and each of its devices a thread ("device D", or
 * `name`); steps are complete events ("X"), values counters ("C"). Each host
 * region or instant with a link id gets a flow arrow to the first step with
 * the same link on every track. Steps on one track must not overlap
 * partially (they may nest); they need not be sorted. */
typedef struct tg_trace_device_track {
    int replica, device;
    const char *name; /* NULL: "device D" */
    const tg_trace_device_step *steps;
    size_t n_steps;
    const tg_trace_device_value *values;
    size_t n_values;
} tg_trace_device_track;

/* tg_trace_write plus device tracks: the host process (pid 1, one thread per
 * recording thread) and, for each replica, a process (pid 2 + replica) with a
 * thread per device (tid 1 + device), in one file that Perfetto opens. The
 * tracks are only read. Fails with TG_ERR_INVALID_ARG (naming the track) for
 * a negative replica or device, a step that ends before it starts, or two
 * tracks for the same (replica, device). */
TG_API tg_status tg_trace_export_chrome(const char *path, const tg_trace_device_track *tracks,
                                        size_t n_tracks);

#ifdef __cplusplus
}
#endif
#endif
