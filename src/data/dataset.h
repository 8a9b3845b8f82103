/* data/dataset.h - an image-classification dataset held in memory.
 *
 * A tg_dataset is images as u8 [n, c, h, w] (row-major, one contiguous
 * block), labels as i32 [n] in [0, num_classes), and the class names. The
 * loaders read MNIST and Fashion-MNIST from the four IDX files of their
 * usual layout (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
 * t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz), by default from
 * Debian's dataset package directory; CIFAR-10 from its binary batches
 * (data_batch_1.bin .. data_batch_5.bin, test_batch.bin, see data/cifar.c and
 * docs/formats.md); and "synthetic" data of any shape generated in memory. A
 * dataset is immutable once loaded and may be read from any number of threads.
 * A program outside the library sees it as the opaque handle of
 * tilegraph/data.h (tg_dataset_open, tg_dataset_describe, ...).
 */
#ifndef TG_DATA_DATASET_H
#define TG_DATA_DATASET_H

#include "tilegraph/data.h"
#include "tilegraph/status.h"

#include <stddef.h>
#include <stdint.h>

typedef enum tg_dataset_kind {
    TG_DATASET_FASHION_MNIST,
    TG_DATASET_MNIST,
    TG_DATASET_CIFAR10,   /* "cifar10": 3x32x32, 10 classes, binary batches */
    TG_DATASET_SYNTHETIC, /* "synthetic": CIFAR-shaped generated data, no files */
    TG_DATASET_TEXT,      /* "text": windows of a text file's tokens (data/text.c) */
    TG_DATASET_SHAPES,    /* "shapes": generated segmentation data (data/shapes.c) */
    TG_DATASET_KIND_COUNT
} tg_dataset_kind;

/* Channels per-channel statistics can cover (as the loader's). */
#define TG_DATASET_MAX_CHANNEL_STATS 4

/* The handle of tilegraph/data.h. */
struct tg_dataset {
    char name[64];   /* "fashion-mnist/train", for messages */
    int64_t n;       /* samples */
    int c, h, w;     /* channels, height, width */
    uint8_t *images; /* [n, c, h, w], owned */
    int32_t *labels; /* [n], each in [0, num_classes), owned */
    /* Segmentation (data/shapes.c): the class of every pixel, [n, h, w],
     * owned; NULL for a classification data set. labels[i] is then the
     * class covering most of sample i's pixels after the background's. */
    uint8_t *masks;
    int num_classes;
    const char *const *class_names; /* num_classes names; static strings */
    /* The normalisation the reference tutorials use for this data:
     * x -> (x / 255 - mean) / std. */
    float mean, std;
    /* Per-channel statistics when channel_stats == c (CIFAR-10's usual
     * mean/std per RGB channel); 0 when only mean and std apply. */
    int channel_stats;
    float channel_mean[TG_DATASET_MAX_CHANNEL_STATS], channel_std[TG_DATASET_MAX_CHANNEL_STATS];

    /* Text (data/text.c): images is NULL; sample i is the window
     * tokens[i * seq_len, (i + 1) * seq_len) and its next-token targets one
     * further on, so n_tokens >= n * seq_len + 1. c = h = 1, w = seq_len,
     * num_classes = the vocabulary size; char tokens index code_points. */
    int32_t *tokens; /* [n_tokens], each in [0, num_classes), owned */
    int64_t n_tokens;
    int seq_len;
    tg_text_tokens token_kind;
    int32_t *code_points; /* char tokens: [num_classes], ascending, owned; NULL for bytes */
};

/* "fashion-mnist" / "fashion", "mnist", "cifar10" / "cifar-10",
 * "synthetic", "text" and "shapes"; -1 if unknown. */
int tg_dataset_kind_parse(const char *name);
const char *tg_dataset_kind_name(tg_dataset_kind kind);

/* The directory read when none is given: $TG_FASHION_MNIST_DIR or
 * /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist);
 * $TG_MNIST_DIR or /usr/share/datasets/mnist. */
const char *tg_dataset_default_dir(tg_dataset_kind kind);

/* Load one split from `dir` (NULL: the default directory; CIFAR-10 reads
 * $TG_CIFAR10_DIR or /usr/share/datasets/cifar10, and also looks in a
 * `cifar-10-batches-bin` subdirectory, the archive's layout; synthetic
 * ignores dir and makes 50000 train / 10000 test samples of 3x32x32, the
 * test split from another seed but the same class patterns). max_samples > 0
 * keeps only the first max_samples samples (for tests); 0 keeps all. Every
 * label is checked to be a valid class. On failure *out is NULL and the
 * message names the file at fault. The caller destroys the result. */
tg_status tg_dataset_load(tg_dataset_kind kind, const char *dir, tg_split split,
                          int64_t max_samples, tg_dataset **out);

/* A zero-filled dataset of the given geometry for synthetic data and tests;
 * class names are "0", "1", ...; mean 0.5, std 0.5 until the caller sets them. */
tg_status tg_dataset_create(const char *name, int64_t n, int c, int h, int w, int num_classes,
                            tg_dataset **out);

/* Deterministic, learnable synthetic data: n samples of c x h x w, labels
 * drawn from `seed`, each image its class's pattern (fixed by the geometry
 * and class count alone, so two seeds give two samples of the same task) plus
 * uniform noise. Patterns are left-right symmetric, so random horizontal
 * flips keep the task the same. Named "synthetic"; mean/std 0.5. */
tg_status tg_dataset_synthetic(int64_t n, int c, int h, int w, int num_classes, uint64_t seed,
                               tg_dataset **out);

/* A segmentation data set: n samples of c x h x w, each a noisy
 * background with 1 to 3 discs, squares and triangles of random size,
 * position and class painted over it, and its mask, the class of every
 * pixel: 0 background, 1 disc, 2 square, 3 triangle (the class names).
 * Drawn from `seed` alone; every shape is left-right symmetric, so random
 * horizontal flips keep the task the same. c is 1 to 3; h and w at least
 * 8. Named "shapes"; mean/std 0.5. (data/shapes.c) */
#define TG_SHAPES_CLASSES 4
tg_status tg_dataset_shapes(int64_t n, int c, int h, int w, uint64_t seed, tg_dataset **out);

/* CIFAR-10 binary records (1 label byte + 3072 channel-planar pixel bytes)
 * from memory, as one file's contents; `name` is used in messages. Rejects
 * an empty buffer, a size not a multiple of 3073 bytes and a label over 9.
 * max_samples > 0 keeps the first max_samples records. (data/cifar.c) */
tg_status tg_cifar10_parse(const void *buf, size_t len, const char *name, int64_t max_samples,
                           tg_dataset **out);
/* One split from a directory of CIFAR-10 batches (tg_dataset_load calls this). */
tg_status tg_cifar10_load(const char *dir, tg_split split, int64_t max_samples, tg_dataset **out);

#endif
