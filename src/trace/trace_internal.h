/* trace/trace_internal.h - what the trace recorder (trace.c) shares with its
 * configuration (trace_config.c), aggregation (trace_aggregate.c) and export
 * (chrome_trace.c). Not public. */
#ifndef TG_TRACE_TRACE_INTERNAL_H
#define TG_TRACE_TRACE_INTERNAL_H

#include "tilegraph/trace.h"

#include <stdatomic.h>

struct tg_trace_channel {
    char name[TG_TRACE_CHANNEL_NAME_MAX + 1]; /* immutable once the channel exists */
    int id;                                   /* index in the channel table */
    atomic_int enabled;
};

/* The settings a configuration resolves to. Plain data, copied by value. */
typedef struct tg_trace_settings {
    bool enable;
    bool all_channels; /* record every channel (no "channels" list, or "*") */
    int n_channels;
    char channels[TG_TRACE_MAX_CHANNELS][TG_TRACE_CHANNEL_NAME_MAX + 1];
    char directory[1024];
    int64_t max_events; /* per thread */
    int64_t heatmap_interval_ns;
} tg_trace_settings;

void tg_trace_settings_default(tg_trace_settings *s);
/* The settings in force, and replacing them: every channel's enabled flag and
 * the global flag are recomputed; the time origin is set the first time
 * anything is enabled. Both thread-safe. */
void tg_trace_settings_get(tg_trace_settings *out);
void tg_trace_settings_apply(const tg_trace_settings *s);
/* Whether tracing was enabled since the last clear (so there is something to
 * flush). */
bool tg_trace_was_enabled(void);

/* How many channels the settings in force name (enabled, not "*") that
 * neither the library has (compile, engine, data, comms) nor anyone
 * registered with tg_trace_channel_get: nothing can have been recorded on
 * them. When any, buf (cap bytes) holds a sentence naming them and every
 * channel there is. Thread-safe. */
int tg_trace_unknown_channels(char *buf, size_t cap);

/* 1 if `name` is a valid channel name (1..31 of [A-Za-z0-9_.-]). */
int tg_trace_channel_name_valid(const char *name, size_t len);
/* Name of channel `id` (immutable once created), or "?" */
const char *tg_trace_channel_name_of(int id);

#define TG_TRACE_MAX_EDGES 64
/* Copy the bin edges in force for heatmap (channel, name) into `edges`
 * (room for TG_TRACE_MAX_EDGES) and return how many. */
int tg_trace_heatmap_edges(const char *channel, const char *name, double *edges);

/* ---- an MPI job's instances (chrome_trace.c; runtime/dist.c calls them) ---- */
/* This process is instance `instance` of a job: its clock plus
 * clock_offset_ns is instance 0's, on which the job's time zero is
 * origin_ns. Exports then give pids, flow ids and times that do not collide
 * with the other instances' and line up with them. */
void tg_trace_set_job(int instance, int64_t clock_offset_ns, int64_t origin_ns);
/* The Chrome trace files this process exported, in order. */
int tg_trace_exported_count(void);
const char *tg_trace_exported_path(int k);
/* One file at `path` (written atomically) holding the events of the n
 * documents (each as tg_trace_export_chrome writes it; NULL or another
 * layout: skipped), instances as processes. */
tg_status tg_trace_merge_chrome(const char *path, const char *const *docs, const size_t *lens,
                                int n);

/* Forget the last environment text applied (called by tg_trace_shutdown). */
void tg_trace_config_forget_env(void);

#endif
