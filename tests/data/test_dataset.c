/* tests/data/test_dataset.c - MNIST-layout directories: made here, and the
 * real Fashion-MNIST when Debian's package is installed; the public face
 * (tilegraph/data.h) over a made directory. */
#include "core/alloc.h"
#include "data/dataset.h"
#include "tg_test.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char dir[256];

static void write_gz(const char *name, const unsigned char *head, size_t hn,
                     const unsigned char *body, size_t bn)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    gzFile gz = gzopen(p, "wb");
    TG_CHECK(gz != NULL);
    gzwrite(gz, head, (unsigned)hn);
    gzwrite(gz, body, (unsigned)bn);
    gzclose(gz);
}

/* A 12-sample MNIST-layout split of 3x4 images; labels i % 10, or a bad one. */
static void make_split(const char *prefix, int bad_label)
{
    unsigned char ih[16] = {0, 0, 8, 3, 0, 0, 0, 12, 0, 0, 0, 3, 0, 0, 0, 4};
    unsigned char lh[8] = {0, 0, 8, 1, 0, 0, 0, 12};
    unsigned char px[12 * 12], lab[12];
    for (int i = 0; i < 144; i++)
        px[i] = (unsigned char)i;
    for (int i = 0; i < 12; i++)
        lab[i] = (unsigned char)(i % 10);
    if (bad_label)
        lab[5] = 10;
    char n[64];
    snprintf(n, sizeof n, "%s-images-idx3-ubyte.gz", prefix);
    write_gz(n, ih, 16, px, sizeof px);
    snprintf(n, sizeof n, "%s-labels-idx1-ubyte.gz", prefix);
    write_gz(n, lh, 8, lab, sizeof lab);
}

static void test_made_directory(void)
{
    make_split("train", 0);
    make_split("t10k", 1);
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_load(TG_DATASET_MNIST, dir, TG_SPLIT_TRAIN, 0, &ds));
    TG_CHECK(ds && ds->n == 12 && ds->c == 1 && ds->h == 3 && ds->w == 4 && ds->num_classes == 10);
    if (ds) {
        TG_CHECK(ds->images[143] == 143 && ds->labels[11] == 1);
        TG_CHECK(strcmp(ds->name, "mnist/train") == 0);
        TG_CHECK(strcmp(tg_dataset_class_name(ds, 7), "7") == 0);
        TG_CHECK(fabs(ds->mean - 0.1307) < 1e-7 && fabs(ds->std - 0.3081) < 1e-7);
    }
    tg_dataset_destroy(ds);
    TG_CHECK_OK(tg_dataset_load(TG_DATASET_FASHION_MNIST, dir, TG_SPLIT_TRAIN, 5, &ds));
    TG_CHECK(ds && ds->n == 5 && strcmp(tg_dataset_class_name(ds, 0), "T-shirt/top") == 0);
    TG_CHECK(ds && strcmp(tg_dataset_class_name(ds, 10), "?") == 0);
    tg_dataset_destroy(ds);
    /* A label outside 0..9 is named with its file and item. */
    tg_status st = tg_dataset_load(TG_DATASET_MNIST, dir, TG_SPLIT_TEST, 0, &ds);
    TG_CHECK(st == TG_ERR_FORMAT && ds == NULL);
    TG_CHECK(strstr(tg_error_message(), "t10k-labels-idx1-ubyte.gz: label 10 of item 5"));
    /* A missing directory names the file it looked for. */
    st = tg_dataset_load(TG_DATASET_MNIST, "/nonexistent/dir", TG_SPLIT_TRAIN, 0, &ds);
    TG_CHECK(st == TG_ERR_NOT_FOUND);
    TG_CHECK(
        strstr(tg_error_message(), "/nonexistent/dir/train-images-idx3-ubyte.gz: cannot open"));
}

/* Un-gzipped IDX files (what gunzip leaves) are found as the .gz ones are;
 * where both exist the .gz is read. */
static void test_raw_idx_files(void)
{
    char raw[256];
    snprintf(raw, sizeof raw, "%s/raw", dir);
    TG_CHECK(mkdir(raw, 0755) == 0);
    unsigned char ih[16] = {0, 0, 8, 3, 0, 0, 0, 6, 0, 0, 0, 2, 0, 0, 0, 2};
    unsigned char lh[8] = {0, 0, 8, 1, 0, 0, 0, 6};
    unsigned char px[24], lab[6] = {3, 1, 4, 1, 5, 9};
    for (int i = 0; i < 24; i++)
        px[i] = (unsigned char)(200 + i);
    char p[512];
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", raw);
    FILE *f = fopen(p, "wb");
    TG_CHECK(f != NULL);
    if (f) {
        fwrite(ih, 1, 16, f);
        fwrite(px, 1, 24, f);
        fclose(f);
    }
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte", raw);
    f = fopen(p, "wb");
    TG_CHECK(f != NULL);
    if (f) {
        fwrite(lh, 1, 8, f);
        fwrite(lab, 1, 6, f);
        fclose(f);
    }
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_load(TG_DATASET_FASHION_MNIST, raw, TG_SPLIT_TRAIN, 0, &ds));
    TG_CHECK(ds && ds->n == 6 && ds->h == 2 && ds->w == 2 && ds->labels[5] == 9 &&
             ds->images[23] == 223);
    tg_dataset_destroy(ds);
    /* the test split is missing in both forms: the message says both were tried */
    tg_status st = tg_dataset_load(TG_DATASET_FASHION_MNIST, raw, TG_SPLIT_TEST, 0, &ds);
    TG_CHECK(st == TG_ERR_NOT_FOUND && ds == NULL);
    TG_CHECK(strstr(tg_error_message(), "gzipped as .gz or not"));
}

static void test_kind_names(void)
{
    TG_CHECK(tg_dataset_kind_parse("fashion-mnist") == TG_DATASET_FASHION_MNIST);
    TG_CHECK(tg_dataset_kind_parse("mnist") == TG_DATASET_MNIST);
    TG_CHECK(tg_dataset_kind_parse("cifar") == -1);
    TG_CHECK(strcmp(tg_dataset_kind_name(TG_DATASET_MNIST), "mnist") == 0);
    tg_dataset *ds = NULL;
    TG_CHECK(tg_dataset_create("x", 0, 1, 1, 1, 2, &ds) == TG_ERR_INVALID_ARG && !ds);
}

/* tilegraph/data.h: a kind by name, the sizes, one sample's pixels and
 * label, with out-of-range indices refused rather than read past the end. */
static void test_public_api(void)
{
    make_split("train", 0);
    TG_CHECK(tg_dataset_kind_known("fashion") && tg_dataset_kind_known("cifar-10"));
    TG_CHECK(!tg_dataset_kind_known("cifar") && !tg_dataset_kind_known(NULL));
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_open("mnist", dir, TG_SPLIT_TRAIN, 0, &ds));
    if (!ds)
        return;
    tg_dataset_info in = tg_dataset_describe(ds);
    TG_CHECK(strcmp(in.name, "mnist/train") == 0 && in.samples == 12 && in.channels == 1 &&
             in.height == 3 && in.width == 4 && in.classes == 10);
    const uint8_t *px = tg_dataset_image(ds, 11);
    TG_CHECK(px && px[0] == 132 && px[11] == 143 && tg_dataset_label(ds, 11) == 1);
    TG_CHECK(!tg_dataset_image(ds, 12) && !tg_dataset_image(ds, -1));
    TG_CHECK(tg_dataset_label(ds, 12) == -1 && tg_dataset_label(ds, -1) == -1);
    tg_dataset_destroy(ds);
    /* An unknown kind is named, with the kinds there are. */
    tg_status st = tg_dataset_open("cifar", dir, TG_SPLIT_TRAIN, 0, &ds);
    TG_CHECK(st == TG_ERR_CONFIG && ds == NULL);
    TG_CHECK(strstr(tg_error_message(), "unknown data set kind 'cifar'"));
    TG_CHECK(
        strstr(tg_error_message(), "fashion-mnist, mnist, cifar10, synthetic, shapes or text"));
    st = tg_dataset_open("mnist", dir, TG_SPLIT_TRAIN, -1, &ds);
    TG_CHECK(st == TG_ERR_INVALID_ARG && ds == NULL && strstr(tg_error_message(), "max_samples"));
    /* Generated data needs no directory; max_samples keeps the first ones. */
    TG_CHECK_OK(tg_dataset_open("synthetic", NULL, TG_SPLIT_TEST, 7, &ds));
    in = tg_dataset_describe(ds);
    TG_CHECK(strcmp(in.name, "synthetic/test") == 0 && in.samples == 7 && in.channels == 3 &&
             in.height == 32 && in.width == 32 && in.classes == 10);
    tg_dataset_destroy(ds);
}

static void test_real_fashion_mnist(void)
{
    const char *fd = tg_test_fashion_dir();
    if (!fd) {
        printf("  (skipped: no Fashion-MNIST files)\n");
        return;
    }
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_load(TG_DATASET_FASHION_MNIST, fd, TG_SPLIT_TRAIN, 0, &ds));
    TG_CHECK(ds && ds->n == 60000 && ds->h == 28 && ds->w == 28);
    TG_CHECK(ds && ds->labels[0] == 9 &&
             strcmp(tg_dataset_class_name(ds, ds->labels[0]), "Ankle boot") == 0);
    if (ds) { /* every class is present, roughly 6000 each */
        int64_t counts[10] = {0};
        double sum = 0;
        for (int64_t i = 0; i < ds->n; i++)
            counts[ds->labels[i]]++;
        for (int64_t i = 0; i < ds->n * 784; i++)
            sum += ds->images[i];
        for (int k = 0; k < 10; k++)
            TG_CHECK(counts[k] == 6000);
        /* The tutorials' mean is the real mean of the training pixels. */
        TG_CHECK_NEAR(sum / 255.0 / (double)(ds->n * 784), 0.2860, 5e-4);
    }
    tg_dataset_destroy(ds);
    TG_CHECK_OK(tg_dataset_load(TG_DATASET_FASHION_MNIST, fd, TG_SPLIT_TEST, 0, &ds));
    TG_CHECK(ds && ds->n == 10000 && strcmp(ds->name, "fashion-mnist/test") == 0);
    tg_dataset_destroy(ds);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tg_test_dataset_XXXXXX");
    if (!TG_MKDTEMP(dir))
        return 1;
    int64_t live = tg_alloc_live_bytes();
    TG_RUN(test_made_directory);
    TG_RUN(test_raw_idx_files);
    TG_RUN(test_kind_names);
    TG_RUN(test_public_api);
    TG_RUN(test_real_fashion_mnist);
    tg_test_check_no_leak(live);
    tg_test_remove_dir(dir);
    return tg_test_finish();
}
