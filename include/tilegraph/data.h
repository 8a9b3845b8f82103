/* tilegraph/data.h - image-classification data sets and the batch loader
 * that feeds a session's host steps.
 *
 * A data set is held in memory: images as u8 [n, c, h, w] and labels in
 * [0, classes). The kinds are MNIST and Fashion-MNIST (their four IDX files,
 * by default from Debian's dataset packages), CIFAR-10 (its binary batches)
 * and "synthetic" (CIFAR-shaped, generated, no files); docs/formats.md.
 *
 * A loader hands out one host step of samples at a time (tg_loader_next):
 * shuffled per epoch from its seed alone, optionally flipped and resized,
 * normalised as (x / 255 - mean) / std, or the raw bytes for a model that
 * normalises on the device. It loads on the calling thread ("sync") or ahead
 * of it on worker threads ("async"); both give byte-identical steps.
 *
 *     tg_dataset *ds;
 *     tg_dataset_open("fashion-mnist", NULL, TG_SPLIT_TRAIN, 0, &ds);
 *     tg_loader_config c = tg_loader_defaults(ds, samples_per_step);
 *     tg_loader *l;
 *     tg_loader_create(ds, &c, &l);
 *     for (int64_t n; tg_loader_next(l, images, labels, &n) == TG_OK && n > 0;)
 *         ... write images and labels to the session, run ...
 *     tg_loader_destroy(l);
 *     tg_dataset_destroy(ds);
 */
#ifndef TILEGRAPH_DATA_H
#define TILEGRAPH_DATA_H

#include "tilegraph/export.h"

#include "tilegraph/status.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_dataset tg_dataset;
typedef struct tg_loader tg_loader;

typedef enum tg_split { TG_SPLIT_TRAIN, TG_SPLIT_TEST } tg_split;

/* ---- data sets ---- */

/* Whether `name` is a data set kind: "fashion-mnist" (or "fashion"),
 * "mnist", "cifar10" (or "cifar-10"), "synthetic". */
TG_API bool tg_dataset_kind_known(const char *name);

/* Load one split of the data set of kind `kind` from `dir` (NULL: the kind's
 * default directory, $TG_FASHION_MNIST_DIR, $TG_MNIST_DIR or $TG_CIFAR10_DIR,
 * else /usr/share/datasets/<kind>; synthetic data needs none). max_samples >
 * 0 keeps only the first max_samples samples; 0 keeps all. Fails naming the
 * kind when it is unknown and the file at fault when one cannot be read;
 * *out is then NULL. The caller destroys the result. */
TG_API tg_status tg_dataset_open(const char *kind, const char *dir, tg_split split,
                                 int64_t max_samples, tg_dataset **out);
TG_API void tg_dataset_destroy(tg_dataset *ds);

/* What a data set holds. `name` ("fashion-mnist/train") lives as long as
 * the data set. */
typedef struct tg_dataset_info {
    const char *name;
    int64_t samples;
    int channels, height, width;
    int classes;
} tg_dataset_info;
TG_API tg_dataset_info tg_dataset_describe(const tg_dataset *ds);

/* Sample i's pixels, u8 [channels, height, width], or NULL when i is out of
 * range. */
TG_API const uint8_t *tg_dataset_image(const tg_dataset *ds, int64_t i);
/* Sample i's label, or -1 when i is out of range. */
TG_API int tg_dataset_label(const tg_dataset *ds, int64_t i);
/* The name of class `label` ("Ankle boot"), or "?" when out of range. */
TG_API const char *tg_dataset_class_name(const tg_dataset *ds, int label);

/* ---- the loader ---- */

/* Channels a per-channel normalisation can cover. */
#define TG_LOADER_MAX_CHANNELS 4

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
     * unused here; a model built for 8-bit input normalises on the device,
     * tg_normalize_u8): fill with tg_loader_next_u8. */
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

/* Shuffled, drop-last, the dataset's own mean and std (per channel when the
 * dataset has per-channel statistics, as CIFAR-10), seed 0, sync, no
 * augmentation; async settings 1 worker and depth 3 should mode be changed. */
TG_API tg_loader_config tg_loader_defaults(const tg_dataset *ds, int64_t samples_per_step);

/* "sync" / "async"; -1 if unknown. */
TG_API int tg_loader_mode_parse(const char *name);

/* Fails (TG_ERR_CONFIG) on a bad configuration (a std not positive and
 * finite, per-channel statistics for another channel count, a flip
 * probability outside [0, 1], half an output size, worker or prefetch counts
 * out of range), or when drop_last leaves no step at all because the dataset
 * is smaller than one step. The loader starts at epoch 0. The dataset must
 * outlive the loader. */
TG_API tg_status tg_loader_create(const tg_dataset *ds, const tg_loader_config *cfg,
                                  tg_loader **out);
TG_API void tg_loader_destroy(tg_loader *l);

/* Steps in one epoch (counting a final partial step unless drop_last). */
TG_API int64_t tg_loader_steps_per_epoch(const tg_loader *l);

/* Make `epoch` current (its order drawn afresh) and rewind to its start. */
TG_API void tg_loader_start_epoch(tg_loader *l, int64_t epoch);

/* Fill the next step of the current epoch into images (room for
 * samples_per_step * c * oh * ow floats) and labels (samples_per_step ints);
 * *count is the number of samples written, 0 once the epoch is exhausted.
 * Fails with output_u8. With split_parts, "samples_per_step" here is this
 * part's share of a step. */
TG_API tg_status tg_loader_next(tg_loader *l, float *images, int32_t *labels, int64_t *count);
/* The same for output_u8 loaders (images: the same count in bytes). */
TG_API tg_status tg_loader_next_u8(tg_loader *l, uint8_t *images, int32_t *labels, int64_t *count);

/* Sample `index` of the data set (in its own order) as the loader prepares
 * it for evaluation: resized and normalised as configured, never flipped;
 * floats [c, oh, ow], or bytes with output_u8. label may be NULL. Fails
 * (TG_ERR_CONFIG) naming the index when the data set has no such sample.
 * Reads only the loader's settings: safe beside its steps. */
TG_API tg_status tg_loader_sample(const tg_loader *l, int64_t index, void *image, int32_t *label);

/* Host steps ready ahead of the consumer (async; 0 in sync mode, which
 * loads on demand): the queue depth a profile records. */
TG_API int tg_loader_queue_depth(tg_loader *l);

#ifdef __cplusplus
}
#endif
#endif
