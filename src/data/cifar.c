/* data/cifar.c - reader for the CIFAR-10 binary format.
 *
 * A CIFAR-10 batch file is a sequence of 3073-byte records: one label byte
 * (0..9) then 3072 pixel bytes, the 32x32 red plane, then green, then blue
 * (channel-planar, row-major), which is already our [c, h, w] layout. The
 * train split is data_batch_1.bin .. data_batch_5.bin in that order, the test
 * split test_batch.bin. There is no header, so every check is on the size
 * (whole records, not empty) and on the labels; sizes are checked from
 * fstat before anything is allocated or read, so a bad file costs nothing.
 * Every message names the file at fault.
 */
#include "data/dataset.h"

#include "core/alloc.h"
#include "core/atomic_file.h"
#include "core/error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define CIFAR_PIXELS 3072
#define CIFAR_RECORD (1 + CIFAR_PIXELS)
#define CIFAR_TRAIN_FILES 5
#define CIFAR_MAX_FILE_RECORDS 1000000 /* 100 times the official files' 10000 */
#define READ_CHUNK_RECORDS 256         /* ~786 KB of records per fread */

static const char *const cifar_classes[10] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                              "dog",      "frog",       "horse", "ship", "truck"};

/* A dataset of n CIFAR-10 samples with the class names and statistics. */
static tg_status cifar_dataset(const char *name, int64_t n, tg_dataset **out)
{
    tg_status st = tg_dataset_create(name, n, 3, 32, 32, 10, out);
    if (st != TG_OK)
        return st;
    tg_dataset *ds = *out;
    ds->class_names = cifar_classes;
    /* The usual CIFAR-10 training-set statistics, per channel and overall. */
    static const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, std[3] = {0.2470f, 0.2435f, 0.2616f};
    ds->mean = 0.4734f;
    ds->std = 0.2516f;
    ds->channel_stats = 3;
    memcpy(ds->channel_mean, mean, sizeof mean);
    memcpy(ds->channel_std, std, sizeof std);
    return TG_OK;
}

/* Copy `count` records into ds from sample `first` on, checking labels;
 * `base` is the index of the first record within its file (for messages). */
static tg_status take_records(const uint8_t *rec, int64_t count, const char *name, int64_t base,
                              tg_dataset *ds, int64_t first)
{
    for (int64_t i = 0; i < count; i++) {
        const uint8_t *r = rec + i * CIFAR_RECORD;
        if (r[0] > 9)
            return tg_error(TG_ERR_FORMAT, "%s: record %lld has label %d, not a class (0..9)", name,
                            (long long)(base + i), r[0]);
        ds->labels[first + i] = r[0];
        memcpy(ds->images + (first + i) * CIFAR_PIXELS, r + 1, CIFAR_PIXELS);
    }
    return TG_OK;
}

static tg_status check_size(const char *name, uint64_t bytes)
{
    if (bytes == 0)
        return tg_error(TG_ERR_FORMAT, "%s: empty file (expected 3073-byte CIFAR-10 records)",
                        name);
    if (bytes % CIFAR_RECORD != 0)
        return tg_error(TG_ERR_FORMAT, "%s: %llu bytes is not a whole number of %d-byte records",
                        name, (unsigned long long)bytes, CIFAR_RECORD);
    /* The split is allocated from the files' sizes before it is read: a
     * huge (or sparse) file must not cost its size in memory for nothing.
     * CIFAR-10's batch files hold 10000 records each. */
    if (bytes / CIFAR_RECORD > CIFAR_MAX_FILE_RECORDS)
        return tg_error(TG_ERR_FORMAT,
                        "%s: %llu records, more than the %d a CIFAR-10 batch file can hold here "
                        "(the official ones hold 10000): not a CIFAR-10 batch file",
                        name, (unsigned long long)(bytes / CIFAR_RECORD), CIFAR_MAX_FILE_RECORDS);
    return TG_OK;
}

tg_status tg_cifar10_parse(const void *buf, size_t len, const char *name, int64_t max_samples,
                           tg_dataset **out)
{
    *out = NULL;
    if (!name)
        name = "cifar10";
    if (!buf && len)
        return tg_error(TG_ERR_INVALID_ARG, "%s: no data", name);
    tg_status st = check_size(name, len);
    if (st != TG_OK)
        return st;
    int64_t n = (int64_t)(len / CIFAR_RECORD);
    if (max_samples > 0 && max_samples < n)
        n = max_samples;
    tg_dataset *ds;
    if ((st = cifar_dataset(name, n, &ds)) != TG_OK)
        return st;
    if ((st = take_records(buf, n, name, 0, ds, 0)) != TG_OK) {
        tg_dataset_destroy(ds);
        return st;
    }
    *out = ds;
    return TG_OK;
}

/* dir/file, or dir/cifar-10-batches-bin/file when only that exists (the
 * layout the official archive unpacks to). */
static void batch_path(const char *dir, const char *file, char *path, size_t cap)
{
    struct stat sb;
    snprintf(path, cap, "%s/%s", dir, file);
    if (stat(path, &sb) == 0)
        return;
    char alt[1024];
    snprintf(alt, sizeof alt, "%s/cifar-10-batches-bin/%s", dir, file);
    if (stat(alt, &sb) == 0)
        snprintf(path, cap, "%s", alt);
}

tg_status tg_cifar10_load(const char *dir, tg_split split, int64_t max_samples, tg_dataset **out)
{
    *out = NULL;
    if (!dir)
        dir = tg_dataset_default_dir(TG_DATASET_CIFAR10);
    int files = split == TG_SPLIT_TRAIN ? CIFAR_TRAIN_FILES : 1;
    char paths[CIFAR_TRAIN_FILES][1024];
    int64_t records[CIFAR_TRAIN_FILES] = {0}, total = 0;
    /* Check every file's existence and size first: a bad fifth file is
     * reported before a minute of reading the other four. */
    for (int f = 0; f < files; f++) {
        char file[32];
        if (split == TG_SPLIT_TRAIN)
            snprintf(file, sizeof file, "data_batch_%d.bin", f + 1);
        else
            snprintf(file, sizeof file, "test_batch.bin");
        batch_path(dir, file, paths[f], sizeof paths[f]);
        struct stat sb;
        if (stat(paths[f], &sb) != 0)
            return tg_error(errno == ENOENT ? TG_ERR_NOT_FOUND : TG_ERR_IO,
                            "cifar10 dataset: %s: cannot open: %s", paths[f], strerror(errno));
        if (!S_ISREG(sb.st_mode))
            return tg_error(TG_ERR_IO, "cifar10 dataset: %s: not a regular file", paths[f]);
        tg_status st = check_size(paths[f], (uint64_t)sb.st_size);
        if (st != TG_OK)
            return tg_error_prefix(st, "cifar10 dataset");
        records[f] = (int64_t)sb.st_size / CIFAR_RECORD;
        total += records[f];
    }
    if (max_samples > 0 && max_samples < total)
        total = max_samples;
    tg_dataset *ds;
    tg_status st = cifar_dataset("cifar10", total, &ds);
    if (st != TG_OK) /* name the files whose sizes asked for it */
        return tg_error_prefix(st, "%s (%d file%s from %s: %lld records by their sizes)",
                               split == TG_SPLIT_TRAIN ? "training split" : "test split", files,
                               files == 1 ? "" : "s", paths[0], (long long)total);
    snprintf(ds->name, sizeof ds->name, "cifar10/%s", split == TG_SPLIT_TRAIN ? "train" : "test");
    uint8_t *chunk = tg_malloc((size_t)READ_CHUNK_RECORDS * CIFAR_RECORD);
    if (!chunk) {
        tg_dataset_destroy(ds);
        return tg_error(TG_ERR_NOMEM, "cifar10 dataset: out of memory for the read buffer");
    }
    int64_t filled = 0;
    for (int f = 0; f < files && filled < total && st == TG_OK; f++) {
        FILE *fp;
        if ((st = tg_fopen_regular(paths[f], &fp)) != TG_OK) {
            tg_error_prefix(st, "cifar10 dataset");
            break;
        }
        int64_t want = records[f] < total - filled ? records[f] : total - filled;
        for (int64_t done = 0; done < want && st == TG_OK;) {
            int64_t k = want - done < READ_CHUNK_RECORDS ? want - done : READ_CHUNK_RECORDS;
            size_t got = fread(chunk, CIFAR_RECORD, (size_t)k, fp);
            if ((int64_t)got != k) /* the file shrank since stat, or a read error */
                st = tg_error(TG_ERR_IO, "cifar10 dataset: %s: read failed at record %lld%s%s",
                              paths[f], (long long)(done + (int64_t)got),
                              ferror(fp) ? ": " : " (file shorter than when checked)",
                              ferror(fp) ? strerror(errno) : "");
            else
                st = take_records(chunk, k, paths[f], done, ds, filled + done);
            done += k;
        }
        fclose(fp);
        filled += want;
    }
    tg_free(chunk);
    if (st != TG_OK) {
        tg_dataset_destroy(ds);
        return st == TG_ERR_FORMAT ? tg_error_prefix(st, "cifar10 dataset") : st;
    }
    *out = ds;
    return TG_OK;
}
