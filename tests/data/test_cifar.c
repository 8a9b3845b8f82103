/* tests/data/test_cifar.c - the CIFAR-10 binary reader on small batch files
 * written here (CIFAR-10 itself is not installed), its errors, and the
 * synthetic dataset. */
#include "core/alloc.h"
#include "core/error.h"
#include "data/dataset.h"
#include "tg_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REC 3073

#define TG_CHECK_STR_CONTAINS(hay, needle)                                                         \
    do {                                                                                           \
        if (!strstr((hay), (needle)))                                                              \
            tg_test_fail(__FILE__, __LINE__, "'%s' does not contain '%s'", (hay), (needle));       \
    } while (0)

static char dir[256];

/* Record k of file f: label (f * 7 + k) % 10, pixel p = (f * 31 + k * 3 + p) & 255. */
static void fill_record(unsigned char *r, int f, int k)
{
    r[0] = (unsigned char)((f * 7 + k) % 10);
    for (int p = 0; p < 3072; p++)
        r[1 + p] = (unsigned char)((f * 31 + k * 3 + p) & 255);
}

static void write_file(const char *d, const char *name, const unsigned char *data, size_t n)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", d, name);
    FILE *fp = fopen(p, "wb");
    TG_CHECK(fp != NULL);
    if (!fp)
        return;
    if (n)
        fwrite(data, 1, n, fp);
    fclose(fp);
}

/* data_batch_1..5 with 2, 3, 4, 5, 6 records; test_batch with 3. */
static void write_batches(const char *d)
{
    static unsigned char buf[6 * REC];
    for (int f = 0; f < 5; f++) {
        for (int k = 0; k < f + 2; k++)
            fill_record(buf + k * REC, f, k);
        char name[32];
        snprintf(name, sizeof name, "data_batch_%d.bin", f + 1);
        write_file(d, name, buf, (size_t)(f + 2) * REC);
    }
    for (int k = 0; k < 3; k++)
        fill_record(buf + k * REC, 9, k);
    write_file(d, "test_batch.bin", buf, 3 * REC);
}

static void test_load(void)
{
    write_batches(dir);
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_load(TG_DATASET_CIFAR10, dir, TG_SPLIT_TRAIN, 0, &ds));
    if (!ds)
        return;
    TG_CHECK(ds->n == 2 + 3 + 4 + 5 + 6);
    TG_CHECK(ds->c == 3 && ds->h == 32 && ds->w == 32 && ds->num_classes == 10);
    TG_CHECK(strcmp(ds->name, "cifar10/train") == 0);
    /* Samples in file order, pixels channel-planar as stored. */
    int64_t i = 0;
    int bad = 0;
    for (int f = 0; f < 5; f++)
        for (int k = 0; k < f + 2; k++, i++) {
            unsigned char r[REC];
            fill_record(r, f, k);
            bad += ds->labels[i] != r[0];
            bad += memcmp(ds->images + i * 3072, r + 1, 3072) != 0;
        }
    TG_CHECK(bad == 0);
    TG_CHECK(strcmp(tg_dataset_class_name(ds, 0), "airplane") == 0);
    TG_CHECK(strcmp(tg_dataset_class_name(ds, 9), "truck") == 0);
    TG_CHECK(strcmp(tg_dataset_class_name(ds, 3), "cat") == 0);
    TG_CHECK(ds->channel_stats == 3);
    TG_CHECK_NEAR(ds->channel_mean[0], 0.4914, 1e-6);
    TG_CHECK_NEAR(ds->channel_std[2], 0.2616, 1e-6);
    tg_dataset_destroy(ds);

    /* max_samples across a file boundary: 2 + 3 + 1. */
    TG_CHECK_OK(tg_dataset_load(TG_DATASET_CIFAR10, dir, TG_SPLIT_TRAIN, 6, &ds));
    if (ds) {
        unsigned char r[REC];
        fill_record(r, 2, 0);
        TG_CHECK(ds->n == 6);
        TG_CHECK(ds->labels[5] == r[0] && memcmp(ds->images + 5 * 3072, r + 1, 3072) == 0);
        tg_dataset_destroy(ds);
    }
    TG_CHECK_OK(tg_dataset_load(TG_DATASET_CIFAR10, dir, TG_SPLIT_TEST, 0, &ds));
    if (ds) {
        unsigned char r[REC];
        fill_record(r, 9, 2);
        TG_CHECK(ds->n == 3 && strcmp(ds->name, "cifar10/test") == 0);
        TG_CHECK(ds->labels[2] == r[0] && memcmp(ds->images + 2 * 3072, r + 1, 3072) == 0);
        tg_dataset_destroy(ds);
    }
    /* The archive's layout: DIR/cifar-10-batches-bin/... */
    char sub[300];
    snprintf(sub, sizeof sub, "%s/nest", dir);
    mkdir(sub, 0700);
    char inner[320];
    snprintf(inner, sizeof inner, "%s/cifar-10-batches-bin", sub);
    mkdir(inner, 0700);
    write_batches(inner);
    TG_CHECK_OK(tg_dataset_load(TG_DATASET_CIFAR10, sub, TG_SPLIT_TEST, 0, &ds));
    TG_CHECK(ds && ds->n == 3);
    tg_dataset_destroy(ds);
}

static void expect_error(tg_split split, const char *want1, const char *want2)
{
    tg_dataset *ds = (tg_dataset *)1;
    int64_t live = tg_alloc_live_bytes();
    tg_status st = tg_dataset_load(TG_DATASET_CIFAR10, dir, split, 0, &ds);
    TG_CHECK(st != TG_OK);
    TG_CHECK(ds == NULL);
    TG_CHECK(tg_alloc_live_bytes() == live);
    TG_CHECK_STR_CONTAINS(tg_error_message(), want1);
    if (want2)
        TG_CHECK_STR_CONTAINS(tg_error_message(), want2);
}

static void test_errors(void)
{
    write_batches(dir);
    unsigned char buf[10 * REC];
    for (int k = 0; k < 10; k++)
        fill_record(buf + k * REC, 2, k);
    /* A size that is not whole records, in the third file. */
    write_file(dir, "data_batch_3.bin", buf, 10 * REC - 1);
    expect_error(TG_SPLIT_TRAIN,
                 "data_batch_3.bin: 30729 bytes is not a whole number of 3073-byte records", NULL);
    /* A label over 9, record 4 of the third file. */
    buf[4 * REC] = 10;
    write_file(dir, "data_batch_3.bin", buf, 10 * REC);
    expect_error(TG_SPLIT_TRAIN, "data_batch_3.bin: record 4 has label 10", NULL);
    /* A huge sparse file (12.9 GB of holes) is refused before anything is
     * allocated or read. */
    char big[512];
    snprintf(big, sizeof big, "%s/data_batch_3.bin", dir);
    FILE *bf = fopen(big, "wb");
    TG_CHECK(bf && ftruncate(fileno(bf), (off_t)4194304 * REC) == 0);
    if (bf)
        fclose(bf);
    expect_error(TG_SPLIT_TRAIN, "data_batch_3.bin: 4194304 records", "not a CIFAR-10 batch file");
    /* Empty. */
    write_file(dir, "data_batch_3.bin", buf, 0);
    expect_error(TG_SPLIT_TRAIN, "data_batch_3.bin: empty file", NULL);
    /* Missing. */
    char p[512];
    snprintf(p, sizeof p, "%s/data_batch_3.bin", dir);
    unlink(p);
    expect_error(TG_SPLIT_TRAIN, "data_batch_3.bin", "cannot open");
    snprintf(p, sizeof p, "%s/test_batch.bin", dir);
    unlink(p);
    expect_error(TG_SPLIT_TEST, "test_batch.bin", "cannot open");
    write_batches(dir);
}

static void test_parse_memory(void)
{
    unsigned char buf[4 * REC];
    for (int k = 0; k < 4; k++)
        fill_record(buf + k * REC, 1, k);
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_cifar10_parse(buf, sizeof buf, "mem.bin", 0, &ds));
    TG_CHECK(ds && ds->n == 4 && ds->labels[3] == buf[3 * REC]);
    tg_dataset_destroy(ds);
    TG_CHECK_OK(tg_cifar10_parse(buf, sizeof buf, "mem.bin", 2, &ds));
    TG_CHECK(ds && ds->n == 2);
    tg_dataset_destroy(ds);
    TG_CHECK(tg_cifar10_parse(buf, 0, "mem.bin", 0, &ds) == TG_ERR_FORMAT && !ds);
    TG_CHECK(tg_cifar10_parse(buf, REC + 1, "mem.bin", 0, &ds) == TG_ERR_FORMAT && !ds);
    TG_CHECK_STR_CONTAINS(tg_error_message(), "mem.bin: 3074 bytes is not a whole number");
}

static void test_kinds(void)
{
    TG_CHECK(tg_dataset_kind_parse("cifar10") == TG_DATASET_CIFAR10);
    TG_CHECK(tg_dataset_kind_parse("cifar-10") == TG_DATASET_CIFAR10);
    TG_CHECK(tg_dataset_kind_parse("synthetic") == TG_DATASET_SYNTHETIC);
    TG_CHECK(strcmp(tg_dataset_kind_name(TG_DATASET_CIFAR10), "cifar10") == 0);
    TG_CHECK(strcmp(tg_dataset_kind_name(TG_DATASET_SYNTHETIC), "synthetic") == 0);
}

/* Synthetic data: deterministic, and learnable by a nearest-class-mean rule
 * fitted on one seed and tested on another. */
static void test_synthetic(void)
{
    tg_dataset *a, *b, *t;
    TG_CHECK_OK(tg_dataset_synthetic(400, 3, 8, 8, 5, 7, &a));
    TG_CHECK_OK(tg_dataset_synthetic(400, 3, 8, 8, 5, 7, &b));
    TG_CHECK_OK(tg_dataset_synthetic(200, 3, 8, 8, 5, 8, &t));
    TG_CHECK(strcmp(a->name, "synthetic") == 0);
    TG_CHECK(memcmp(a->images, b->images, 400 * 192) == 0);
    TG_CHECK(memcmp(a->labels, b->labels, 400 * sizeof *a->labels) == 0);
    TG_CHECK(memcmp(a->images, t->images, 200 * 192) != 0);
    int counts[5] = {0};
    static double mean[5][192];
    for (int i = 0; i < 400; i++) {
        TG_CHECK(a->labels[i] >= 0 && a->labels[i] < 5);
        counts[a->labels[i]]++;
        for (int p = 0; p < 192; p++)
            mean[a->labels[i]][p] += a->images[i * 192 + p];
    }
    for (int k = 0; k < 5; k++) {
        TG_CHECK(counts[k] > 40); /* every class present */
        for (int p = 0; p < 192; p++)
            mean[k][p] /= counts[k] ? counts[k] : 1;
    }
    int right = 0;
    for (int i = 0; i < 200; i++) {
        int best = -1;
        double bd = 1e300;
        for (int k = 0; k < 5; k++) {
            double d = 0;
            for (int p = 0; p < 192; p++) {
                double e = t->images[i * 192 + p] - mean[k][p];
                d += e * e;
            }
            if (d < bd)
                bd = d, best = k;
        }
        right += best == t->labels[i];
    }
    printf("  synthetic nearest-mean accuracy %d/200\n", right);
    TG_CHECK(right > 190);
    /* Left-right symmetric patterns: the class means are mirror images. */
    TG_CHECK_NEAR(mean[0][0], mean[0][7], 40.0);
    tg_dataset_destroy(a);
    tg_dataset_destroy(b);
    tg_dataset_destroy(t);

    tg_dataset *s;
    TG_CHECK_OK(tg_dataset_load(TG_DATASET_SYNTHETIC, NULL, TG_SPLIT_TEST, 100, &s));
    TG_CHECK(s && s->n == 100 && s->c == 3 && s->h == 32 && s->w == 32 && s->num_classes == 10);
    TG_CHECK(s && strcmp(s->name, "synthetic/test") == 0);
    tg_dataset_destroy(s);
    TG_CHECK(tg_dataset_synthetic(0, 3, 8, 8, 5, 1, &s) != TG_OK && s == NULL);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tg_cifar_XXXXXX");
    if (!TG_MKDTEMP(dir))
        return 1;
    TG_RUN(test_load);
    TG_RUN(test_errors);
    TG_RUN(test_parse_memory);
    TG_RUN(test_kinds);
    TG_RUN(test_synthetic);
    tg_test_remove_dir(dir);
    return tg_test_finish();
}
