/* data/loader.h - batches of normalised samples, shuffled per epoch, loaded
 * on the calling thread (sync) or ahead of it by worker threads (async). The
 * configuration and the calls a program needs are public (tilegraph/data.h);
 * this header adds what the library and the tests use beside them.
 *
 * One host step consumes `samples_per_step` samples: micro-batch size x
 * gradient accumulation x device iterations x replicas. The loader fills
 * caller-provided buffers with images as f32 [count, c, oh, ow], normalised
 * as (x / 255 - mean) / std (one mean and std, or one per channel), and
 * labels as i32 [count] (a segmentation set's masks: [count, oh, ow], each
 * flipped with its image and resized by the nearest pixel); or, with
 * output_u8, the raw u8 pixels (after the augmentations) for normalisation
 * on the device. It allocates only when
 * created (the sample order, lookup tables, resize tables, the prefetch ring
 * and worker scratch), never per step.
 *
 * Augmentations, per sample, in this order: random horizontal flip with
 * probability flip_prob, then a bilinear resize to out_h x out_w (half-pixel
 * centres, as torchvision's Resize when enlarging; the result rounded to u8,
 * as resizing a PIL image does), then normalisation. Whether a sample is
 * flipped is a hash of (seed, epoch, dataset index), so it is the same in
 * both modes, with any number of workers, and on a resumed run.
 *
 * Modes: TG_LOADER_SYNC loads each step inside tg_loader_next. TG_LOADER_ASYNC
 * starts num_workers threads that fill a ring of prefetch_depth host steps
 * (default 3, the depth the Graphcore guide recommends) ahead of the
 * consumer; tg_loader_next copies out the next ready step, and
 * tg_loader_borrow / tg_loader_release hand it out without a copy. Both modes
 * give byte-identical steps in the same order. The ring stays within the
 * current epoch: tg_loader_start_epoch discards what was prefetched (waiting
 * for busy workers) and the new epoch's first step is loaded afresh.
 * tg_loader_stats reports how long the consumer waited for data, which shows
 * when the host cannot keep up.
 *
 * Shuffling: each epoch's order is a Fisher-Yates permutation drawn from a
 * tg_rng seeded from (seed, epoch) alone, so epoch e has the same order
 * whatever happened before it, and a run resumed at epoch e sees the data in
 * the same order as an uninterrupted one.
 *
 * A loader is used by one thread at a time (its workers are its own); the
 * dataset it reads must outlive it and is never modified.
 */
#ifndef TG_DATA_LOADER_H
#define TG_DATA_LOADER_H

#include "data/dataset.h"

#include "tilegraph/data.h"

#include <stdbool.h>
#include <stdint.h>

/* The default prefetch depth of the async mode. */
#define TG_LOADER_DEFAULT_PREFETCH 3
/* Limits on the async configuration (anything larger is a mistake). */
#define TG_LOADER_MAX_WORKERS 64
#define TG_LOADER_MAX_PREFETCH 64

/* One host step as held by the loader (tg_loader_borrow). */
typedef struct tg_loader_batch {
    const float *images;      /* [count, c, oh, ow], or NULL with output_u8 */
    const uint8_t *images_u8; /* [count, c, oh, ow] with output_u8, else NULL */
    const int32_t *tokens;    /* text: [count, seq_len], else NULL */
    const int32_t *labels;    /* [count], text [count, seq_len] */
    int64_t count;            /* samples; 0 once the epoch is exhausted */
    int64_t step;             /* the step's index within its epoch */
} tg_loader_batch;

typedef struct tg_loader_stats {
    int64_t steps, samples;  /* handed out since creation */
    int64_t waited_steps;    /* steps that were not ready when asked for */
    double wait_seconds;     /* consumer time blocked on data (sync: all loading) */
    double max_wait_seconds; /* the longest single wait */
    double load_seconds;     /* loading work, summed over the threads doing it */
} tg_loader_stats;

const char *tg_loader_mode_name(tg_loader_mode mode);

/* Elements per output sample: c * oh * ow (floats, or bytes with output_u8). */
int64_t tg_loader_sample_size(const tg_loader *l);
/* The output sample shape [c, oh, ow]. */
void tg_loader_sample_shape(const tg_loader *l, int *c, int *h, int *w);

int64_t tg_loader_epoch(const tg_loader *l);

/* Zero-copy: the next step in the loader's own buffer (b->count 0 once the
 * epoch is exhausted). It stays valid, and the ring slot stays out of use,
 * until tg_loader_release; one step may be borrowed at a time (tg_loader_next
 * fails while one is). Starting an epoch or destroying the loader
 * invalidates a borrowed step. */
tg_status tg_loader_borrow(tg_loader *l, tg_loader_batch *b);
void tg_loader_release(tg_loader *l, tg_loader_batch *b);

/* Counters since creation. Read by the consumer thread. */
tg_loader_stats tg_loader_get_stats(const tg_loader *l);

/* The current epoch's sample order: n dataset indices, a permutation. */
const int64_t *tg_loader_order(const tg_loader *l);

#endif
