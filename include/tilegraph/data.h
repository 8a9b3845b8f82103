/* tilegraph/data.h - image-classification and text data sets and the batch
 * loader that feeds a session's host steps.
 *
 * A data set is held in memory: images as u8 [n, c, h, w] and labels in
 * [0, classes). The kinds are MNIST and Fashion-MNIST (their four IDX files,
 * by default from Debian's dataset packages), CIFAR-10 (its binary batches)
 * and "synthetic" (CIFAR-shaped, generated, no files); docs/formats.md.
 * A text data set (tg_dataset_open_text) is any file cut into tokens (its
 * bytes, or the code points of UTF-8 text) and then into windows of
 * seq_len tokens: a sample is a window, its labels the next token at every
 * position (or, for a masked language model, the tokens the loader masked).
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
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_dataset tg_dataset;
typedef struct tg_loader tg_loader;

typedef enum tg_split { TG_SPLIT_TRAIN, TG_SPLIT_TEST } tg_split;

/* ---- data sets ---- */

/* Whether `name` is a data set kind: "fashion-mnist" (or "fashion"),
 * "mnist", "cifar10" (or "cifar-10"), "synthetic", "text", "shapes" (a
 * segmentation set: discs, squares and triangles on a noisy background,
 * 3x32x32, 4 classes with the background, 8000 training and 1000 test
 * images, generated; docs/data.md). */
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
 * the data set. A text data set has channels 1, height 1, width seq_len,
 * and classes is its vocabulary size. */
typedef struct tg_dataset_info {
    const char *name;
    int64_t samples;
    int channels, height, width;
    int classes;
    bool text;   /* token windows, not images */
    int seq_len; /* text: tokens per sample (width) */
    /* segmentation ("shapes"): every pixel is labelled, a class in
     * [0, classes) (tg_dataset_mask); a loader's labels are then
     * [height, width] per sample */
    bool segmentation;
} tg_dataset_info;

/* ---- text ---- */

/* How a text file becomes tokens: its bytes (vocabulary 256, any file), or
 * the distinct Unicode code points of UTF-8 text (the vocabulary is the
 * sorted list of the code points the whole file uses, so both splits and
 * a checkpoint share it). */
typedef enum tg_text_tokens { TG_TOKENS_BYTE, TG_TOKENS_CHAR } tg_text_tokens;

/* "byte" / "char" into *out; TG_ERR_INVALID_ARG otherwise. */
TG_API tg_status tg_text_tokens_parse(const char *name, tg_text_tokens *out);
TG_API const char *tg_text_tokens_name(tg_text_tokens t);

typedef struct tg_text_config {
    tg_text_tokens tokens;
    int seq_len;          /* tokens per sample, >= 1 */
    double test_fraction; /* the file's tail held out as the test split; 0: 0.1 */
} tg_text_config;

/* One split of the text file at `path`: the head (1 - test_fraction of the
 * tokens) is the training split, the tail the test split. Sample i is the
 * window tokens[i * seq_len, (i + 1) * seq_len) of its split, whose
 * next-token targets end one token further on, so a split of T tokens has
 * (T - 1) / seq_len samples. max_samples > 0 keeps the first max_samples
 * windows. Fails naming the file when it is missing, empty, not UTF-8 (char
 * tokens: the byte offset of the first bad sequence), or when a split holds
 * fewer than seq_len + 1 tokens (saying how long the file would have to be). */
TG_API tg_status tg_dataset_open_text(const char *path, const tg_text_config *cfg, tg_split split,
                                      int64_t max_samples, tg_dataset **out);
/* Both splits of the file, read once (a file replaced between two opens
 * would give splits, and a vocabulary, of two texts): what a training run
 * that also evaluates wants. On failure both are NULL. */
TG_API tg_status tg_dataset_open_text_splits(const char *path, const tg_text_config *cfg,
                                             int64_t train_max, int64_t test_max,
                                             tg_dataset **train, tg_dataset **test);
/* The same from memory (`name` in messages): for tests and programs that
 * have the text already. */
TG_API tg_status tg_dataset_text_from_memory(const void *text, size_t len, const char *name,
                                             const tg_text_config *cfg, tg_split split,
                                             int64_t max_samples, tg_dataset **out);
/* A text data set's tokens: the kind, the vocabulary size, and for char
 * tokens the code point of each token (*code_points, vocab entries; NULL for
 * byte tokens, where token t is byte t). -1 for an image data set. */
TG_API int tg_dataset_vocab(const tg_dataset *ds, tg_text_tokens *kind,
                            const int32_t **code_points);
/* The token stream of a text data set's split (*tokens, the count
 * returned); 0 and NULL for an image data set. */
TG_API int64_t tg_dataset_tokens(const tg_dataset *ds, const int32_t **tokens);
/* Token t as UTF-8 into buf (room for 5 bytes: up to 4 and a NUL); the
 * length written, 0 for a token out of range. A byte token is that byte
 * alone (which may be part of a multi-byte character). */
TG_API int tg_dataset_token_utf8(const tg_dataset *ds, int32_t token, char *buf);
TG_API tg_dataset_info tg_dataset_describe(const tg_dataset *ds);

/* Sample i's pixels, u8 [channels, height, width], or NULL when i is out of
 * range. */
TG_API const uint8_t *tg_dataset_image(const tg_dataset *ds, int64_t i);
/* Sample i's label, or -1 when i is out of range. (A segmentation set's
 * is the class of most of its shape pixels; its mask is the label.) */
TG_API int tg_dataset_label(const tg_dataset *ds, int64_t i);
/* A segmentation set's sample i: the class of every pixel, u8 [height,
 * width]; NULL when i is out of range or the set labels whole images. */
TG_API const uint8_t *tg_dataset_mask(const tg_dataset *ds, int64_t i);
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

    /* Text data sets: how labels are made. 0: the next token at every
     * position (a causal language model). > 0: a masked language model, as
     * BERT's pre-training: each position is chosen with probability
     * mask_prob; a chosen position's input becomes mask_token (80%), a
     * random token of the vocabulary (10%) or stays (10%), and its label is
     * the original token; every other label is TG_LOADER_IGNORE_LABEL. The
     * choices are a hash of (seed, epoch, sample, position), so they are
     * the same in both modes and on a resumed run. */
    float mask_prob;
    int32_t mask_token;

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

/* The label of a position a masked language model is not scored on (the
 * loss's ignore_index, PyTorch's default). */
#define TG_LOADER_IGNORE_LABEL (-100)

/* Shuffled, drop-last, the dataset's own mean and std (per channel when the
 * dataset has per-channel statistics, as CIFAR-10), seed 0, sync, no
 * augmentation; async settings 1 worker and depth 3 should mode be changed. */
TG_API tg_loader_config tg_loader_defaults(const tg_dataset *ds, int64_t samples_per_step);

/* "sync" / "async" into *out; TG_ERR_INVALID_ARG otherwise. */
TG_API tg_status tg_loader_mode_parse(const char *name, tg_loader_mode *out);

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
 * samples_per_step * c * oh * ow floats) and labels (samples_per_step ints;
 * a segmentation set's, samples_per_step * oh * ow: each sample's mask,
 * flipped with its image and resized by the nearest pixel);
 * *count is the number of samples written, 0 once the epoch is exhausted.
 * Fails with output_u8. With split_parts, "samples_per_step" here is this
 * part's share of a step. */
TG_API tg_status tg_loader_next(tg_loader *l, float *images, int32_t *labels, int64_t *count);
/* The same for output_u8 loaders (images: the same count in bytes). */
TG_API tg_status tg_loader_next_u8(tg_loader *l, uint8_t *images, int32_t *labels, int64_t *count);
/* The same for text data sets: token ids i32 [count, seq_len] and labels
 * i32 [count, seq_len] (room for samples_per_step * seq_len each). */
TG_API tg_status tg_loader_next_tokens(tg_loader *l, int32_t *ids, int32_t *labels, int64_t *count);

/* Sample `index` of the data set (in its own order) as the loader prepares
 * it for evaluation: resized and normalised as configured, never flipped;
 * floats [c, oh, ow], or bytes with output_u8; for text, i32 token ids
 * [seq_len] and seq_len labels (masked as for epoch 0); for a segmentation
 * set, oh * ow labels (its mask). label may be NULL. Fails
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
