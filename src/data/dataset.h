/* data/dataset.h - an image-classification dataset held in memory.
 *
 * A tg_dataset is images as u8 [n, c, h, w] (row-major, one contiguous
 * block), labels as i32 [n] in [0, num_classes), and the class names. The
 * loaders read MNIST and Fashion-MNIST from the four IDX files of their
 * usual layout (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
 * t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz), by default from
 * Debian's dataset package directory. A dataset is immutable once loaded and
 * may be read from any number of threads.
 */
#ifndef TG_DATA_DATASET_H
#define TG_DATA_DATASET_H

#include "tilegraph/status.h"

#include <stdint.h>

typedef enum tg_dataset_kind {
    TG_DATASET_FASHION_MNIST,
    TG_DATASET_MNIST,
    TG_DATASET_KIND_COUNT
} tg_dataset_kind;

typedef enum tg_split { TG_SPLIT_TRAIN, TG_SPLIT_TEST } tg_split;

typedef struct tg_dataset {
    char name[64];   /* "fashion-mnist/train", for messages */
    int64_t n;       /* samples */
    int c, h, w;     /* channels, height, width */
    uint8_t *images; /* [n, c, h, w], owned */
    int32_t *labels; /* [n], each in [0, num_classes), owned */
    int num_classes;
    const char *const *class_names; /* num_classes names; static strings */
    /* The normalisation the reference tutorials use for this data:
     * x -> (x / 255 - mean) / std. */
    float mean, std;
} tg_dataset;

/* "fashion-mnist" / "fashion" and "mnist"; -1 if unknown. */
int tg_dataset_kind_parse(const char *name);
const char *tg_dataset_kind_name(tg_dataset_kind kind);

/* The directory read when none is given: $TG_FASHION_MNIST_DIR or
 * /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist);
 * $TG_MNIST_DIR or /usr/share/datasets/mnist. */
const char *tg_dataset_default_dir(tg_dataset_kind kind);

/* Load one split from `dir` (NULL: the default directory). max_samples > 0
 * keeps only the first max_samples samples (for tests); 0 keeps all. Every
 * label is checked to be a valid class. On failure *out is NULL and the
 * message names the file at fault. The caller destroys the result. */
tg_status tg_dataset_load(tg_dataset_kind kind, const char *dir, tg_split split,
                          int64_t max_samples, tg_dataset **out);

/* A zero-filled dataset of the given geometry for synthetic data and tests;
 * class names are "0", "1", ...; mean 0.5, std 0.5 until the caller sets them. */
tg_status tg_dataset_create(const char *name, int64_t n, int c, int h, int w, int num_classes,
                            tg_dataset **out);

void tg_dataset_destroy(tg_dataset *ds);

/* The name of class `label`, or "?" when out of range. */
const char *tg_dataset_class_name(const tg_dataset *ds, int label);

#endif
