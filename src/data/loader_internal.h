/* data/loader_internal.h - the loader's state, shared by data/loader.c
 * (epochs, the worker pool, creation, the consumer) and data/loader_fill.c
 * (filling a step). Only those two files include it. */
#ifndef TG_DATA_LOADER_INTERNAL_H
#define TG_DATA_LOADER_INTERNAL_H

#include "data/loader.h"

#include "tilegraph/trace.h"

#include <pthread.h>
#include <stdint.h>

typedef struct slot {
    float *f;
    uint8_t *u;
    int32_t *t; /* text: token ids */
    int32_t *labels;
    int64_t count;
    int ready;
} slot;

typedef struct worker {
    struct tg_loader *l;
    uint8_t *scratch; /* one output sample (u8) for resizing */
} worker;

struct tg_loader {
    const tg_dataset *ds;
    tg_loader_config cfg;
    int oh, ow;
    int resize;
    int64_t in_per, out_per; /* elements per input / output sample */
    int text;                /* a text data set: token windows, labels per position */
    int64_t label_per;       /* labels per sample: 1, seq_len for text, oh * ow for masks */
    int64_t epoch;
    int64_t steps; /* per epoch */
    int64_t *order;
    float lut[TG_LOADER_MAX_CHANNELS][256];
    /* resize tables: source rows/columns and weights per output row/column */
    int *y0, *y1, *x0, *x1;
    float *wy, *wx;
    tg_trace_channel *trace;

    /* consumer side */
    int64_t next_step; /* the step the consumer takes next */
    int borrowed;
    uint8_t *sync_scratch;
    tg_loader_stats stats;

    /* the ring: 1 slot in sync mode (for borrowing), depth slots in async */
    slot *slots;
    int nslots;

    /* async */
    int nworkers, started;
    worker *workers;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, ready_cv, idle_cv;
    int64_t next_issue;
    int inflight, restarting, stop;
    double load_seconds_async; /* summed by workers under mu */
};

/* Samples of a step this loader hands out (its part of it). */
int64_t tg_loader_part_size(const tg_loader_config *cfg);
/* Fill step `step` of `epoch` (order already drawn); returns the sample
 * count. scratch: one output sample (u8) for resizing. */
int64_t tg_loader_fill_step(const tg_loader *l, int64_t epoch, int64_t step, float *f, uint8_t *u,
                            int32_t *t, int32_t *labels, uint8_t *scratch);

#endif
