/* runtime/session_state.h - the session's state (struct tg_session and the
 * per-device context of a run), shared by the engine (engine*.c: running),
 * its set-up (session.c), host I/O (session_io.c) and checkpoints
 * (checkpoint.c). */
#ifndef TG_RUNTIME_SESSION_STATE_H
#define TG_RUNTIME_SESSION_STATE_H

#include "runtime/session_internal.h"
#include "tilegraph/dist.h"

#include "core/clock.h"
#include "core/pool.h"
#include "core/wait.h"
#include "profile/profile.h"

#include <pthread.h>

typedef struct tg_session tg_session;

typedef struct device_ctx {
    tg_session *s;
    int replica, device;
    double busy;   /* seconds spent computing in the last run */
    int in_flight; /* forwards whose backward has not run yet */
    int max_in_flight;
    tg_profile_recorder *rec; /* NULL unless this run is being recorded */
    /* loss scaling: every device keeps its own copy and takes the same
     * decisions from the same overflow flags, so no one waits to be told */
    float loss_scale;
    int64_t good_updates, skipped_updates;
    /* the scale the current update's gradients were made with: update_runs
     * may grow loss_scale before the update unscales them */
    float grad_scale;
    int64_t forwards; /* forward passes run in this host step */
    double streams;   /* seconds on host streams in: copying, or waiting for a prefetch */
    /* seconds the device waited for its I/O thread's copies (stream_io.c) */
    double stream_wait;
    /* ParallelIPU: the pass's current phase on this device began at step
     * seg_begin, at time seg_t0 (engine_passes.c, phase_boundary) */
    int seg_begin;
    double seg_t0;
    /* gradient buckets of the current update: started, and seen complete */
    int buckets_sent, buckets_done;
    tg_exchange_times exchange; /* this run's exchange with the other instances */
} device_ctx;

struct tg_session {
    tg_graph *graph;
    tg_program *program;
    unsigned char **arena; /* [replica * n_devices + device] */
    tg_pool **pools;       /* the same indexing */
    /* the host streams of a run (runtime/streams.h) */
    struct tg_host_streams *streams;
    /* offloaded buffers' host copies: [buffer * replicas + replica] (NULL otherwise) */
    unsigned char **host_state;
    uint64_t seed;
    int64_t step;
    /* Taken afresh (core/process.h) at every host write of a persistent
     * value: the kernels of an inference program keep their reordered
     * weights while it stays (tg_kernel_args.weights_version). */
    uint64_t weights_version;
    bool check_nan;
    int cache;       /* tg_cache_result: what the executable cache did at create */
    int output_mode; /* tg_output_mode */
    int output_period;
    /* one run's lock, condition and abort flag (runtime/run_control.h) */
    struct tg_run_control *run;
    /* the run's transfer counters and barriers (runtime/exchange.h) */
    struct tg_exchange_state *exchange;
    device_ctx *ctx;
    /* the threads that run the devices' host steps (runtime/device_threads.h) */
    struct tg_device_threads *device_threads;
    double last_run_seconds;
    double *last_busy;    /* [replica * n_devices + device] */
    double *last_streams; /* the same: each device_ctx's `streams` of the last run */
    /* host streams filled ahead (runtime/prefetch.c), or NULL: depth 1, or
     * not started yet */
    struct tg_prefetch *prefetch;
    /* the I/O threads of offloaded tensors' copies, per (replica, device)
     * (runtime/stream_io.c), or NULL: on demand, or not started yet */
    struct tg_stream_io *stream_io;
    int *max_in_flight; /* the most micro-batches any run had stashed, per device */
    /* loss scaling, overflow checks and clipping (runtime/scaling.h) */
    struct tg_scaling *scaling;
    /* profiling and host tracing (runtime/record.h) */
    struct tg_recording *recording;
    struct tg_monitor *monitor; /* this session's registry record, or NULL */
    int64_t runs;
    /* the MPI job (runtime/dist.h): this instance runs replicas
     * [replica_offset, replica_offset + program->replicas) of
     * global_replicas */
    int global_replicas, replica_offset;
    /* the exchange with the job's other instances (runtime/collectives.h) */
    struct tg_collectives *coll;
    struct tg_verify *verify; /* a verified run (runtime/verify.h), or NULL */
};

/* Seconds on the monotonic clock (core/clock.h). */
static inline double tg_engine_now(void)
{
    return tg_clock_seconds();
}
/* Micro-batch j's gradient (slot g) into an accumulator (runtime/arena.c). */
void tg_engine_accumulate(device_ctx *c, int acc_buffer, int grad_buffer, int64_t j, int64_t g);
/* Record an event of device c that ran from t0 to now (seconds); no-op
 * when the run is not recorded (runtime/record.c). */
void tg_engine_record(device_ctx *c, tg_event_kind kind, tg_phase ph, int64_t it, int64_t j,
                      int peer, double t0, int64_t bytes, double flops);
/* The same for an event that ran from t0 to t1 on another thread on the
 * device's behalf (its I/O thread); recorded by the device's own thread. */
void tg_engine_record_span(device_ctx *c, tg_event_kind kind, tg_phase ph, int64_t it, int64_t j,
                           int peer, double t0, double t1, int64_t bytes, double flops);
/* Join the session's device threads (none started: nothing to do). Called
 * by tg_session_destroy, between runs: the threads are parked then. */
void tg_engine_stop_threads(tg_session *s);
/* Start a thread per (replica, device) for each host step and join it at
 * the step's end, as the engine did before its threads lived as long as
 * the session: kept so that bench_step_overhead can measure both ways in
 * one run. Stops the session's parked threads when turned on. */
void tg_engine_set_per_step_threads(tg_session *s, bool on);
/* Slot of micro-batch g of a program buffer in a replica's arena (runtime/arena.c). */
unsigned char *tg_engine_slot_ptr(const tg_session *s, int replica, int buffer, int64_t g);
/* One host step of device c: deviceIterations times its schedule, the
 * all-reduce and the update; returns early when the step is aborted
 * (runtime/engine_passes.c). */
void tg_engine_device_main(device_ctx *c);
/* After a recorded host step (runtime/engine_record.c): the session's own
 * counters, and the weights' and gradients' histograms, in the profile. */
tg_status tg_engine_record_own_counters(tg_session *s);
tg_status tg_engine_record_histograms(tg_session *s, int64_t run);

typedef enum tg_output_mode {
    TG_OUTPUT_ALL,
    TG_OUTPUT_SUM,
    TG_OUTPUT_FINAL,
    TG_OUTPUT_EVERY_N,
} tg_output_mode;

/* Micro-batches of all replicas and iterations in one run (runtime/arena.c). */
int64_t tg_session_stream_count(const tg_session *s);
/* Every leaf's initial value, drawn in f32 and written to every replica in
 * its storage type (runtime/session_io.c; tg_session_create calls it). */
tg_status tg_session_fill_leaves(tg_session *s);

#endif
