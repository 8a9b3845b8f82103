/* profile/profile.h - the profile of one compiled program: a SQLite
 * database (schema in docs/profile-format.md) holding what was planned (the
 * graph profile: target, memory plan, liveness, program tree, ops, tensors)
 * and what ran (the execution profile: the timed steps of the first runs).
 *
 * Written by the session when autoReport.* asks for it; read by the
 * analysers and by anyone with `sqlite3`.
 */
#ifndef TG_PROFILE_PROFILE_H
#define TG_PROFILE_PROFILE_H

#include "compile/program.h"
#include "tilegraph/options.h"

/* Changes only when an existing table or column changes meaning; added
 * tables (remedies, counters, histograms) keep it: older profiles lack
 * them and the views say so (docs/profile-format.md). */
#define TG_PROFILE_SCHEMA_VERSION 1

typedef struct tg_profile tg_profile;

/* What an executed step was, for the execution profile. */
#define TG_EVENT_LIST(X)                                                                           \
    X(PHASE, "execute") /* a phase's ops (forward, backward, update) */                            \
    X(STREAM_IN, "stream from host")                                                               \
    X(STREAM_OUT, "stream to host")                                                                \
    X(COPY, "copy to device")  /* a transfer, including waiting for a free slot */                 \
    X(WAIT, "wait for device") /* waiting for a transfer to arrive */                              \
    X(ACCUMULATE, "accumulate gradients")                                                          \
    X(ALL_REDUCE, "all-reduce")                                                                    \
    X(INSTANCES, "exchange with instances") /* MPI, within all-reduce; waits for the others too */ \
    X(STREAM_IO, "I/O tiles: stream from host") /* beside the compute: mk2 numIOTiles */           \
    /* a gradient bucket's exchange with the instances, from its start during the backward to      \
     * its arrival (runtime/buckets.c): overlaps the other events */                               \
    X(BUCKET, "gradient bucket to instances")                                                      \
    /* an offloaded tensor into its streamed copy, or back (compile/streaming.c); with peer        \
     * TG_EVENT_PEER_IO_THREAD run by the device's I/O thread beside its compute */                \
    X(STREAMING_LOAD, "load from streaming memory")                                                \
    X(STREAMING_STORE, "store to streaming memory")                                                \
    /* replicated tensor sharding of weights (runtime/rts.c): a weight's shards into its whole     \
     * copy for a pass, or after an update the shards' exchange with the other instances */        \
    X(GATHER, "all-gather")                                                                        \
    /* the all-reduce when it sums each replica's shard of the sharded weights' gradients */       \
    X(REDUCE_SCATTER, "reduce-scatter")                                                            \
    /* the device waiting for its I/O thread's copies (runtime/stream_io.c) */                     \
    X(STREAMING_WAIT, "wait for streaming memory")                                                 \
    /* a sender waiting for the receiver to free the slot of a micro-batch (back-pressure: the     \
     * next stage is behind), apart from WAIT, which waits for data to arrive */                   \
    X(SLOT_WAIT, "wait for free slot")

/* The peer of a streaming-memory copy its device's I/O thread ran. */
#define TG_EVENT_PEER_IO_THREAD (-2)

typedef enum tg_event_kind {
#define TG_EVENT_ENUM(e, name) TG_EVENT_##e,
    TG_EVENT_LIST(TG_EVENT_ENUM)
#undef TG_EVENT_ENUM
        TG_EVENT_COUNT
} tg_event_kind;

const char *tg_event_name(tg_event_kind k);

typedef struct tg_profile_event {
    int16_t kind, phase;
    int32_t micro_batch, iteration, peer; /* peer: the other device of a copy or wait */
    int64_t start_ns, end_ns;             /* since the session was created */
    int64_t bytes;
    double flops;
} tg_profile_event;

/* Per (replica, device) record of one run, filled by the engine and read
 * here: the profile's own type, so the profile never sees the session; allocated once when
 * execution profiling is on, so recording never allocates. */
typedef struct tg_profile_recorder {
    tg_profile_event *events;
    int n_events, cap_events;
    int64_t *op_ns, *op_calls; /* per node id, summed over recorded runs */
} tg_profile_recorder;

/* Start DIR/<training|inference>/profile.sqlite and write the graph profile
 * of `p` (with the options in p->config) into it. `execution` says whether runs will be recorded.
 * The file is written under a temporary name (core/atomic_file.h) and replaces an older profile
 * only when tg_profile_close succeeds. The directory is locked meanwhile: a second run on it fails
 * here with a message naming it. */
tg_status tg_profile_open(const char *dir, const tg_program *p, bool execution, tg_profile **out);
/* Append the events of the last run (run number `run`): `recorders` holds
 * one record per (replica, device), [replica * n_devices + device]. */
tg_status tg_profile_record_run(tg_profile *pf, const tg_profile_recorder *recorders, int64_t run);
/* Write the per-op totals (summed over `recorders`, as for
 * tg_profile_record_run; NULL when runs were not recorded), close the file and give it its final
 * name. On failure the temporary is removed and the previous profile kept. Frees pf. */
tg_status tg_profile_close(tg_profile *pf, const tg_profile_recorder *recorders);
/* Drop the profile being written (the previous one stays). Frees pf. */
void tg_profile_abort(tg_profile *pf);
/* Add or replace a `meta` row (the session's MPI instance, its host). */
tg_status tg_profile_set_meta(tg_profile *pf, const char *key, const char *value);
const char *tg_profile_path(const tg_profile *pf);
/* A counter's value at host step `step` (samples/s, loss, loss scale, loader
 * queue depth, memory in use: docs/profile-format.md), kept in memory and
 * written at close; at most TG_PROFILE_MAX_COUNTERS names. NaN is stored as
 * NULL. A NULL pf records nothing. */
enum { TG_PROFILE_MAX_COUNTERS = 32 };
tg_status tg_profile_counter(tg_profile *pf, int64_t step, const char *name, double value);
/* The histogram of one tensor's values at recorded run `run` (kind
 * "weight" or "gradient"): elements, min, max, mean, std, zeros and
 * non-finite values, and TG_PROFILE_HISTOGRAM_BINS equal bins from min to
 * max (a JSON array of counts; the non-finite values are in no bin). */
enum { TG_PROFILE_HISTOGRAM_BINS = 32 };
tg_status tg_profile_histogram(tg_profile *pf, int64_t run, const char *tensor, const char *kind,
                               const float *x, int64_t n);
/* A re-planned memory remedy (tilegraph/plan.h) for the graph profile;
 * `after` < 0: not computed, `outcome` says why. */
tg_status tg_profile_add_remedy(tg_profile *pf, const char *what, int64_t need, int64_t after,
                                int64_t capacity, const char *outcome);

#endif
