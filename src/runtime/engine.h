/* runtime/engine.h - the session's insides, shared by the engine
 * (session.c: running) and its set-up and host I/O (session_io.c). */
#ifndef TG_RUNTIME_ENGINE_H
#define TG_RUNTIME_ENGINE_H

#include "runtime/session_internal.h"

#include "core/pool.h"

#include <pthread.h>

typedef struct tg_session tg_session;

typedef struct device_ctx {
    tg_session *s;
    int replica, device;
    double busy;     /* seconds spent computing in the last run */
    int in_flight;   /* forwards whose backward has not run yet */
    int max_in_flight;
} device_ctx;

struct tg_session {
    tg_graph *graph;
    tg_program *program;
    unsigned char **arena; /* [replica * n_devices + device] */
    tg_pool **pools;       /* the same indexing */
    /* host streams, per node id: all micro-batches of one run, in
     * [iteration][replica][micro-batch] order (NULL for other nodes) */
    unsigned char **host_in, **host_out;
    uint64_t seed;
    int64_t step;
    bool check_nan;
    int output_mode; /* tg_output_mode */
    int output_period;
    /* synchronisation for one run */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int64_t *produced, *consumed; /* [replica * n_transfers + transfer] */
    int64_t *barrier_count, *barrier_gen; /* per device */
    bool abort;
    tg_status fail_status;
    char fail_message[512];
    pthread_t *threads;
    device_ctx *ctx;
    double last_run_seconds;
    double *last_busy; /* [replica * n_devices + device] */
    int *max_in_flight; /* the most micro-batches any run had stashed, per device */
};

typedef enum tg_output_mode {
    TG_OUTPUT_ALL,
    TG_OUTPUT_SUM,
    TG_OUTPUT_FINAL,
    TG_OUTPUT_EVERY_N,
} tg_output_mode;

/* Micro-batches of all replicas and iterations in one run. */
int64_t tg_session_stream_count(const tg_session *s);

#endif
