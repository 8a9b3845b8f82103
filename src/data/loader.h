/* data/loader.h - batches of normalised samples, shuffled per epoch, loaded
 * on the calling thread (sync) or ahead of it by worker threads (async).
 *
 * One host step consumes `samples_per_step` samples: micro-batch size x
 * gradient accumulation x device iterations x replicas. The loader fills
 * caller-provided buffers with images as f32 [count, c, oh, ow], normalised
 * as (x / 255 - mean) / std (one mean and std, or one per channel), and
 * labels as i32 [count]; or, with output_u8, the raw u8 pixels (after the
 * augmentations) for normalisation on the device. It allocates only when
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

#include <stdbool.h>
#include <stdint.h>

/* Channels a per-channel normalisation can cover. */
#define TG_LOADER_MAX_CHANNELS 4
/* The default prefetch depth of the async mode. */
#define TG_LOADER_DEFAULT_PREFETCH 3
/* Limits on the async configuration (anything larger is a mistake). */
#define TG_LOADER_MAX_WORKERS 64
#define TG_LOADER_MAX_PREFETCH 64

typedef enum tg_loader_mode { TG_LOADER_SYNC, TG_LOADER_ASYNC } tg_loader_mode;

typedef struct tg_loader_config {
    int64_t samples_per_step; /* > 0 */
    uint64_t seed;
    bool shuffle;    /* false: dataset order every epoch */
    bool drop_last;  /* true: an incomplete final step is skipped */
    float mean, std; /* normalisation; std must be > 0 */
    /* Per-channel normalisation (CIFAR's and ImageNet's statistics): when
     * channel_stats is the dataset's channel count, channel c is normalised
     * with channel_mean[c] and channel_std[c] instead of mean and std. 0 (the
     * default) uses mean and std for every channel. */
    int channel_stats;
    float channel_mean[TG_LOADER_MAX_CHANNELS], channel_std[TG_LOADER_MAX_CHANNELS];

    tg_loader_mode mode; /* sync (default) or async */
    int num_workers;     /* async: worker threads; 0 means 1 */
    int prefetch_depth;  /* async: host steps in the ring; 0 means 3 */

    float flip_prob;  /* random horizontal flip probability in [0, 1]; 0: none */
    int out_h, out_w; /* resize to this (bilinear); 0, 0: the dataset's size */

    /* 8-bit output: images are the raw u8 pixels [count, c, oh, ow] after
     * flip and resize, not normalised (the normalisation statistics are then
     * unused here): fill with tg_loader_next_u8 or borrow images_u8. The
     * device-side normalisation that consumes them is to be added in the
     * engine separately; this loader only produces the bytes. */
    bool output_u8;

    /* One instance's part of each step (an MPI job, docs/distributed.md): a
     * step of samples_per_step is cut into chunks of split_chunk samples
     * and this loader hands out chunks split_index, split_index +
     * split_parts, ... of it, so each step holds samples_per_step /
     * split_parts samples. Chunk = one instance's replicas of one device
     * iteration; the parts of all instances together are exactly the step.
     * split_parts 0 or 1: the whole step. */
    int split_parts, split_index;
    int64_t split_chunk;
} tg_loader_config;

/* One host step as held by the loader (tg_loader_borrow). */
typedef struct tg_loader_batch {
    const float *images;      /* [count, c, oh, ow], or NULL with output_u8 */
    const uint8_t *images_u8; /* [count, c, oh, ow] with output_u8, else NULL */
    const int32_t *labels;    /* [count] */
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

typedef struct tg_loader tg_loader;

/* Shuffled, drop-last, the dataset's own mean and std (per channel when the
 * dataset has per-channel statistics, as CIFAR-10), seed 0, sync, no
 * augmentation; async settings 1 worker and depth 3 should mode be changed. */
tg_loader_config tg_loader_defaults(const tg_dataset *ds, int64_t samples_per_step);

/* "sync" / "async"; -1 if unknown. */
int tg_loader_mode_parse(const char *name);
const char *tg_loader_mode_name(tg_loader_mode mode);

/* Fails (TG_ERR_CONFIG) on a bad configuration (a std not positive and
 * finite, per-channel statistics for another channel count, a flip
 * probability outside [0, 1], half an output size, worker or prefetch counts
 * out of range), or when
 * drop_last leaves no step at all because the dataset is smaller than one
 * step. The loader starts at epoch 0. */
tg_status tg_loader_create(const tg_dataset *ds, const tg_loader_config *cfg, tg_loader **out);
void tg_loader_destroy(tg_loader *l);

/* Steps in one epoch (counting a final partial step unless drop_last). */
int64_t tg_loader_steps_per_epoch(const tg_loader *l);
/* Elements per output sample: c * oh * ow (floats, or bytes with output_u8). */
int64_t tg_loader_sample_size(const tg_loader *l);
/* The output sample shape [c, oh, ow]. */
void tg_loader_sample_shape(const tg_loader *l, int *c, int *h, int *w);

/* Make `epoch` current (its order drawn afresh) and rewind to its start. */
void tg_loader_start_epoch(tg_loader *l, int64_t epoch);
int64_t tg_loader_epoch(const tg_loader *l);

/* Fill the next step of the current epoch into images (room for
 * samples_per_step * sample_size floats) and labels (samples_per_step ints);
 * *count is the number of samples written, 0 once the epoch is exhausted.
 * Fails if a borrowed step has not been released, or with output_u8. With
 * split_parts, "samples_per_step" here is this part's share of a step. */
tg_status tg_loader_next(tg_loader *l, float *images, int32_t *labels, int64_t *count);
/* The same for output_u8 loaders (images: samples_per_step * sample_size bytes). */
tg_status tg_loader_next_u8(tg_loader *l, uint8_t *images, int32_t *labels, int64_t *count);

/* Zero-copy: the next step in the loader's own buffer (b->count 0 once the
 * epoch is exhausted). It stays valid, and the ring slot stays out of use,
 * until tg_loader_release; one step may be borrowed at a time. Starting an
 * epoch or destroying the loader invalidates a borrowed step. */
tg_status tg_loader_borrow(tg_loader *l, tg_loader_batch *b);
void tg_loader_release(tg_loader *l, tg_loader_batch *b);

/* Counters since creation. Read by the consumer thread. */
tg_loader_stats tg_loader_get_stats(const tg_loader *l);

/* Host steps ready in the ring ahead of the consumer (async; 0 in sync
 * mode, which loads on demand): the queue depth a profile records. */
int tg_loader_queue_depth(tg_loader *l);

/* The current epoch's sample order: n dataset indices, a permutation. */
const int64_t *tg_loader_order(const tg_loader *l);

#endif
