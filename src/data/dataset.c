/* data/dataset.c - dataset kinds, MNIST and Fashion-MNIST from their IDX
 * files; CIFAR-10 (data/cifar.c), synthetic data (data/synthetic.c) and
 * the shapes segmentation set (data/shapes.c) are dispatched from
 * tg_dataset_load. */
#include "data/dataset.h"

#include "core/alloc.h"
#include "core/error.h"
#include "data/idx.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const fashion_classes[10] = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                                "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                                "Bag",         "Ankle boot"};
static const char *const digit_classes[10] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};

static const struct {
    const char *name, *env, *dir;
    float mean, std;
} kinds[TG_DATASET_KIND_COUNT] = {
    [TG_DATASET_FASHION_MNIST] = {"fashion-mnist", "TG_FASHION_MNIST_DIR",
                                  "/usr/share/datasets/fashion-mnist", 0.2860f, 0.3530f},
    [TG_DATASET_MNIST] = {"mnist", "TG_MNIST_DIR", "/usr/share/datasets/mnist", 0.1307f, 0.3081f},
    [TG_DATASET_CIFAR10] = {"cifar10", "TG_CIFAR10_DIR", "/usr/share/datasets/cifar10", 0.4734f,
                            0.2516f},
    [TG_DATASET_SYNTHETIC] = {"synthetic", "", "", 0.5f, 0.5f},
    [TG_DATASET_TEXT] = {"text", "", "", 0.0f, 1.0f},
    [TG_DATASET_SHAPES] = {"shapes", "", "", 0.5f, 0.5f},
};

int tg_dataset_kind_parse(const char *name)
{
    if (!name)
        return -1;
    if (strcmp(name, "fashion-mnist") == 0 || strcmp(name, "fashion") == 0)
        return TG_DATASET_FASHION_MNIST;
    if (strcmp(name, "mnist") == 0)
        return TG_DATASET_MNIST;
    if (strcmp(name, "cifar10") == 0 || strcmp(name, "cifar-10") == 0)
        return TG_DATASET_CIFAR10;
    if (strcmp(name, "synthetic") == 0)
        return TG_DATASET_SYNTHETIC;
    if (strcmp(name, "text") == 0)
        return TG_DATASET_TEXT;
    if (strcmp(name, "shapes") == 0)
        return TG_DATASET_SHAPES;
    return -1;
}

const char *tg_dataset_kind_name(tg_dataset_kind kind)
{
    return (unsigned)kind < TG_DATASET_KIND_COUNT ? kinds[kind].name : "?";
}

const char *tg_dataset_default_dir(tg_dataset_kind kind)
{
    if ((unsigned)kind >= TG_DATASET_KIND_COUNT)
        return NULL;
    if (kind == TG_DATASET_SYNTHETIC || kind == TG_DATASET_TEXT || kind == TG_DATASET_SHAPES)
        return NULL; /* generated, or a file named by the caller */
    const char *env = getenv(kinds[kind].env);
    return env && *env ? env : kinds[kind].dir;
}

/* Class names for the generic constructor: up to 100 classes named by number. */
static char numbered_names[100][4];
static const char *numbered_ptrs[100];
static pthread_once_t numbered_once = PTHREAD_ONCE_INIT;

static void number_classes(void)
{
    for (int i = 0; i < 100; i++) {
        snprintf(numbered_names[i], sizeof numbered_names[i], "%d", i);
        numbered_ptrs[i] = numbered_names[i];
    }
}

static const char *const *numbered_classes(int n)
{
    if (n > 100)
        return NULL;
    pthread_once(&numbered_once, number_classes); /* written once, then only read */
    return numbered_ptrs;
}

tg_status tg_dataset_create(const char *name, int64_t n, int c, int h, int w, int num_classes,
                            tg_dataset **out)
{
    *out = NULL;
    if (!name)
        name = "dataset";
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || num_classes <= 0 || num_classes > 100)
        return tg_error(TG_ERR_INVALID_ARG,
                        "dataset '%s': invalid geometry n=%lld c=%d h=%d w=%d classes=%d", name,
                        (long long)n, c, h, w, num_classes);
    int64_t per = (int64_t)c * h * w;
    if (n > INT64_MAX / per || (uint64_t)(n * per) > SIZE_MAX / 2)
        return tg_error(TG_ERR_INVALID_ARG, "dataset '%s': too large", name);
    tg_dataset *ds = tg_calloc(1, sizeof *ds);
    if (!ds)
        return tg_error(TG_ERR_NOMEM, "dataset '%s': out of memory", name);
    ds->images = tg_calloc((size_t)(n * per), 1);
    ds->labels = tg_calloc((size_t)n, sizeof *ds->labels);
    if (!ds->images || !ds->labels) {
        tg_dataset_destroy(ds);
        return tg_error(TG_ERR_NOMEM, "dataset '%s': out of memory for %lld samples (%lld bytes)",
                        name, (long long)n, (long long)(n * per));
    }
    snprintf(ds->name, sizeof ds->name, "%s", name);
    ds->n = n;
    ds->c = c, ds->h = h, ds->w = w;
    ds->num_classes = num_classes;
    ds->class_names = numbered_classes(num_classes);
    ds->mean = 0.5f;
    ds->std = 0.5f;
    *out = ds;
    return TG_OK;
}

void tg_dataset_destroy(tg_dataset *ds)
{
    if (!ds)
        return;
    tg_free(ds->images);
    tg_free(ds->labels);
    tg_free(ds->masks);
    tg_free(ds->tokens);
    tg_free(ds->code_points);
    tg_free(ds);
}

bool tg_dataset_kind_known(const char *name)
{
    return tg_dataset_kind_parse(name) >= 0;
}

tg_status tg_dataset_open(const char *kind, const char *dir, tg_split split, int64_t max_samples,
                          tg_dataset **out)
{
    *out = NULL;
    int k = tg_dataset_kind_parse(kind);
    if (k < 0)
        return tg_error(TG_ERR_CONFIG,
                        "unknown data set kind '%s' (fashion-mnist, mnist, cifar10, synthetic, "
                        "shapes or text)",
                        kind ? kind : "(null)");
    if (split != TG_SPLIT_TRAIN && split != TG_SPLIT_TEST)
        return tg_error(TG_ERR_INVALID_ARG, "%s: unknown split %d (train or test)", kind,
                        (int)split);
    if (max_samples < 0)
        return tg_error(TG_ERR_INVALID_ARG, "%s: max_samples %lld is negative", kind,
                        (long long)max_samples);
    if (k == TG_DATASET_TEXT) /* the file is `dir`; byte tokens, 64 per sample */
        return tg_dataset_open_text(dir, &(tg_text_config){TG_TOKENS_BYTE, 64, 0}, split,
                                    max_samples, out);
    return tg_dataset_load((tg_dataset_kind)k, dir, split, max_samples, out);
}

tg_dataset_info tg_dataset_describe(const tg_dataset *ds)
{
    return (tg_dataset_info){ds->name,
                             ds->n,
                             ds->c,
                             ds->h,
                             ds->w,
                             ds->num_classes,
                             ds->tokens != NULL,
                             ds->seq_len,
                             ds->masks != NULL};
}

const uint8_t *tg_dataset_mask(const tg_dataset *ds, int64_t i)
{
    if (!ds || i < 0 || i >= ds->n || !ds->masks)
        return NULL;
    return ds->masks + i * (int64_t)ds->h * ds->w;
}

const uint8_t *tg_dataset_image(const tg_dataset *ds, int64_t i)
{
    if (!ds || i < 0 || i >= ds->n || !ds->images)
        return NULL;
    return ds->images + i * (int64_t)ds->c * ds->h * ds->w;
}

int tg_dataset_label(const tg_dataset *ds, int64_t i)
{
    return ds && ds->labels && i >= 0 && i < ds->n ? ds->labels[i] : -1;
}

const char *tg_dataset_class_name(const tg_dataset *ds, int label)
{
    if (!ds || label < 0 || label >= ds->num_classes || !ds->class_names)
        return "?";
    return ds->class_names[label];
}

/* DIR/PREFIX-WHAT-ubyte.gz as the data sets are distributed, or the file
 * without .gz when only that one exists (gunzipped by hand: the IDX reader
 * takes either content). */
static void idx_path(char *out, size_t cap, const char *dir, const char *prefix, const char *what)
{
    snprintf(out, cap, "%s/%s-%s-ubyte", dir, prefix, what);
    char gz[1040];
    snprintf(gz, sizeof gz, "%s.gz", out);
    if (access(gz, F_OK) == 0 || access(out, F_OK) != 0)
        snprintf(out, cap, "%s", gz);
}

tg_status tg_dataset_load(tg_dataset_kind kind, const char *dir, tg_split split,
                          int64_t max_samples, tg_dataset **out)
{
    *out = NULL;
    if ((unsigned)kind >= TG_DATASET_KIND_COUNT)
        return tg_error(TG_ERR_INVALID_ARG, "unknown dataset kind %d", (int)kind);
    if (kind == TG_DATASET_TEXT)
        return tg_dataset_open("text", dir, split, max_samples, out);
    if (kind == TG_DATASET_SYNTHETIC) {
        /* CIFAR's shape and split sizes; the test split another seed. */
        int64_t n = split == TG_SPLIT_TRAIN ? 50000 : 10000;
        if (max_samples > 0 && max_samples < n)
            n = max_samples;
        tg_status st = tg_dataset_synthetic(n, 3, 32, 32, 10, split == TG_SPLIT_TRAIN ? 1 : 2, out);
        if (st == TG_OK)
            snprintf((*out)->name, sizeof(*out)->name, "synthetic/%s",
                     split == TG_SPLIT_TRAIN ? "train" : "test");
        return st;
    }
    if (kind == TG_DATASET_SHAPES) {
        /* 3x32x32, 8000 train / 1000 test: an epoch of a small U-Net is seconds */
        int64_t n = split == TG_SPLIT_TRAIN ? 8000 : 1000;
        if (max_samples > 0 && max_samples < n)
            n = max_samples;
        tg_status st = tg_dataset_shapes(n, 3, 32, 32, split == TG_SPLIT_TRAIN ? 1 : 2, out);
        if (st == TG_OK)
            snprintf((*out)->name, sizeof(*out)->name, "shapes/%s",
                     split == TG_SPLIT_TRAIN ? "train" : "test");
        return st;
    }
    if (!dir)
        dir = tg_dataset_default_dir(kind);
    if (kind == TG_DATASET_CIFAR10)
        return tg_cifar10_load(dir, split, max_samples, out);
    const char *prefix = split == TG_SPLIT_TRAIN ? "train" : "t10k";
    char ip[1024], lp[1024];
    idx_path(ip, sizeof ip, dir, prefix, "images-idx3");
    idx_path(lp, sizeof lp, dir, prefix, "labels-idx1");
    tg_idx img, lab;
    tg_status st = tg_idx_load_pair(ip, lp, max_samples, &img, &lab);
    if (st == TG_ERR_NOT_FOUND)
        return tg_error_prefix(st,
                               "%s dataset (looked for %s-{images-idx3,labels-idx1}-ubyte, "
                               "gzipped as .gz or not, in %s)",
                               kinds[kind].name, prefix, dir);
    if (st != TG_OK)
        return tg_error_prefix(st, "%s dataset", kinds[kind].name);
    for (int64_t i = 0; i < lab.dim[0]; i++) {
        if (lab.data[i] >= 10) {
            st = tg_error(TG_ERR_FORMAT, "%s: label %d of item %lld is not a class (0..9)", lp,
                          lab.data[i], (long long)i);
            tg_idx_free(&img);
            tg_idx_free(&lab);
            return st;
        }
    }
    tg_dataset *ds = tg_calloc(1, sizeof *ds);
    int32_t *labels = tg_malloc((size_t)lab.dim[0] * sizeof *labels);
    if (!ds || !labels) {
        tg_free(ds);
        tg_free(labels);
        tg_idx_free(&img);
        tg_idx_free(&lab);
        return tg_error(TG_ERR_NOMEM, "%s: out of memory for the labels", lp);
    }
    for (int64_t i = 0; i < lab.dim[0]; i++)
        labels[i] = lab.data[i];
    snprintf(ds->name, sizeof ds->name, "%s/%s", kinds[kind].name,
             split == TG_SPLIT_TRAIN ? "train" : "test");
    ds->n = img.dim[0];
    ds->c = 1;
    ds->h = (int)img.dim[1];
    ds->w = (int)img.dim[2];
    ds->images = img.data; /* [n, rows, cols] is [n, 1, rows, cols]: take it as is */
    ds->labels = labels;
    ds->num_classes = 10;
    ds->class_names = kind == TG_DATASET_FASHION_MNIST ? fashion_classes : digit_classes;
    ds->mean = kinds[kind].mean;
    ds->std = kinds[kind].std;
    tg_idx_free(&lab);
    *out = ds;
    return TG_OK;
}
