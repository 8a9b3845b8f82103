/* data/loader.h - batches of normalised samples, shuffled per epoch.
 *
 * One host step consumes `samples_per_step` samples: micro-batch size x
 * gradient accumulation x device iterations x replicas. The loader fills
 * caller-provided buffers with images as f32 [count, c, h, w], normalised as
 * (x / 255 - mean) / std (one mean and std, or one per channel), and labels
 * as i32 [count]. It allocates only when created (the sample order; the
 * 256-entry lookup tables live in the loader), never per step.
 *
 * Shuffling: each epoch's order is a Fisher-Yates permutation drawn from a
 * tg_rng seeded from (seed, epoch) alone, so epoch e has the same order
 * whatever happened before it, and a run resumed at epoch e sees the data in
 * the same order as an uninterrupted one.
 *
 * A loader is used by one thread at a time; the dataset it reads must outlive
 * it and is never modified.
 */
#ifndef TG_DATA_LOADER_H
#define TG_DATA_LOADER_H

#include "data/dataset.h"

#include <stdbool.h>
#include <stdint.h>

/* Channels a per-channel normalisation can cover. */
#define TG_LOADER_MAX_CHANNELS 4

typedef struct tg_loader_config {
    int64_t samples_per_step; /* > 0 */
    uint64_t seed;
    bool shuffle;   /* false: dataset order every epoch */
    bool drop_last; /* true: an incomplete final step is skipped */
    float mean, std; /* normalisation; std must be > 0 */
    /* Per-channel normalisation (CIFAR's and ImageNet's statistics): when
     * channel_stats is the dataset's channel count, channel c is normalised
     * with channel_mean[c] and channel_std[c] instead of mean and std. 0 (the
     * default) uses mean and std for every channel. */
    int channel_stats;
    float channel_mean[TG_LOADER_MAX_CHANNELS], channel_std[TG_LOADER_MAX_CHANNELS];
} tg_loader_config;

typedef struct tg_loader tg_loader;

/* Shuffled, drop-last, the dataset's own mean and std, seed 0. */
tg_loader_config tg_loader_defaults(const tg_dataset *ds, int64_t samples_per_step);

/* Fails (TG_ERR_CONFIG) on a bad configuration (a std not positive and
 * finite, per-channel statistics for another channel count), or when
 * drop_last leaves no step at all because the dataset is smaller than one
 * step. The loader starts at epoch 0. */
tg_status tg_loader_create(const tg_dataset *ds, const tg_loader_config *cfg, tg_loader **out);
void tg_loader_destroy(tg_loader *l);

/* Steps in one epoch (counting a final partial step unless drop_last). */
int64_t tg_loader_steps_per_epoch(const tg_loader *l);
/* Floats per sample: c * h * w. */
int64_t tg_loader_sample_size(const tg_loader *l);

/* Make `epoch` current (its order drawn afresh) and rewind to its start. */
void tg_loader_start_epoch(tg_loader *l, int64_t epoch);
int64_t tg_loader_epoch(const tg_loader *l);

/* Fill the next step of the current epoch into images (room for
 * samples_per_step * sample_size floats) and labels (samples_per_step ints);
 * *count is the number of samples written, 0 once the epoch is exhausted. */
tg_status tg_loader_next(tg_loader *l, float *images, int32_t *labels, int64_t *count);

/* The current epoch's sample order: n dataset indices, a permutation. */
const int64_t *tg_loader_order(const tg_loader *l);

#endif
