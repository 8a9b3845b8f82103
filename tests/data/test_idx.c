/* tests/data/test_idx.c - the IDX reader on files it makes (raw and gzip),
 * on every kind of bad file, and on the real Fashion-MNIST files if present.
 * TG_TEST_LABELS: quick */
#include "core/alloc.h"
#include "data/idx.h"
#include "tg_test.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char tmpdir[256];

static char *tmp_path(const char *name)
{
    return tg_test_path(tmpdir, name);
}

/* An IDX image [n, rows, cols] or label [n] file image in memory; pixel i is
 * (i * 7 + 3) & 255, label i is i % 10. Returns the byte count. */
static size_t make_idx(unsigned char *buf, int ndim, uint32_t n, uint32_t rows, uint32_t cols)
{
    uint32_t dims[3] = {n, rows, cols};
    buf[0] = buf[1] = 0;
    buf[2] = 0x08;
    buf[3] = (unsigned char)ndim;
    size_t k = 4;
    for (int i = 0; i < ndim; i++) {
        buf[k++] = (unsigned char)(dims[i] >> 24);
        buf[k++] = (unsigned char)(dims[i] >> 16);
        buf[k++] = (unsigned char)(dims[i] >> 8);
        buf[k++] = (unsigned char)dims[i];
    }
    size_t items = ndim == 3 ? (size_t)n * rows * cols : n;
    for (size_t i = 0; i < items; i++)
        buf[k + i] = ndim == 3 ? (unsigned char)((i * 7 + 3) & 255) : (unsigned char)(i % 10);
    return k + items;
}

static void write_file(const char *path, const void *data, size_t len, int gzip)
{
    if (gzip) {
        gzFile gz = gzopen(path, "wb");
        TG_CHECK(gz != NULL);
        if (len)
            TG_CHECK(gzwrite(gz, data, (unsigned)len) == (int)len);
        gzclose(gz);
    } else {
        FILE *f = fopen(path, "wb");
        TG_CHECK(f != NULL);
        if (len)
            TG_CHECK(fwrite(data, 1, len, f) == len);
        fclose(f);
    }
}

static unsigned char img[64 * 1024], lab[1024], gz[80 * 1024];

/* Loading must fail with `status` and a message holding `msg` and the name. */
static void expect_fail(tg_status got, tg_status want, const char *msg, const char *name, int line)
{
    if (got != want)
        tg_test_fail(__FILE__, line, "status %s, expected %s (%s)", tg_status_name(got),
                     tg_status_name(want), tg_error_message());
    else if (!strstr(tg_error_message(), msg) || (name && !strstr(tg_error_message(), name)))
        tg_test_fail(__FILE__, line, "message '%s' lacks '%s' or '%s'", tg_error_message(), msg,
                     name ? name : "");
}
#define EXPECT_FAIL(got, want, msg, name) expect_fail(got, want, msg, name, __LINE__)

static void check_images(const tg_idx *a, int n, int rows, int cols)
{
    TG_CHECK(a->ndim == 3 && a->dim[0] == n && a->dim[1] == rows && a->dim[2] == cols);
    TG_CHECK(a->bytes == (size_t)n * rows * cols && a->data != NULL);
    int bad = 0;
    for (size_t i = 0; i < a->bytes && a->data; i++)
        bad += a->data[i] != (unsigned char)((i * 7 + 3) & 255);
    TG_CHECK(bad == 0);
}

static void test_valid_files(void)
{
    size_t ni = make_idx(img, 3, 50, 28, 28);
    size_t nl = make_idx(lab, 1, 50, 0, 0);
    for (int gzip = 0; gzip < 2; gzip++) {
        const char *ip = tmp_path(gzip ? "img.gz" : "img.raw");
        const char *lp = tmp_path(gzip ? "lab.gz" : "lab.raw");
        write_file(ip, img, ni, gzip);
        write_file(lp, lab, nl, gzip);
        tg_idx a, b;
        TG_CHECK_OK(tg_idx_load_pair(ip, lp, 0, &a, &b));
        check_images(&a, 50, 28, 28);
        TG_CHECK(b.ndim == 1 && b.dim[0] == 50 && b.bytes == 50 && b.data[13] == 3);
        tg_idx_free(&a);
        tg_idx_free(&b);
        TG_CHECK(a.data == NULL && a.bytes == 0);
        /* A subset: only the first 7 items. */
        TG_CHECK_OK(tg_idx_load_pair(ip, lp, 7, &a, &b));
        check_images(&a, 7, 28, 28);
        TG_CHECK(a.file_items == 50 && b.dim[0] == 7 && b.data[6] == 6);
        tg_idx_free(&a);
        tg_idx_free(&b);
        /* Either kind when want_ndim is 0. */
        TG_CHECK_OK(tg_idx_load(lp, 0, 0, &b));
        TG_CHECK(b.ndim == 1);
        tg_idx_free(&b);
    }
    /* From memory, raw and gzip. */
    tg_idx a;
    TG_CHECK_OK(tg_idx_parse(img, ni, "mem", TG_IDX_IMAGES, 0, &a));
    check_images(&a, 50, 28, 28);
    tg_idx_free(&a);
    size_t ng = tg_test_gzip(img, ni, gz, sizeof gz);
    TG_CHECK_OK(tg_idx_parse(gz, ng, "mem.gz", TG_IDX_IMAGES, 0, &a));
    check_images(&a, 50, 28, 28);
    tg_idx_free(&a);
}

static void test_bad_headers(void)
{
    size_t ni = make_idx(img, 3, 4, 5, 6);
    tg_idx a;
    unsigned char b[64];
    memcpy(b, img, 16);
    b[0] = 0x12;
    EXPECT_FAIL(tg_idx_parse(b, 16, "x.idx", 3, 0, &a), TG_ERR_FORMAT,
                "not an IDX file: magic 0x12000803", "x.idx");
    memcpy(b, img, 16);
    b[2] = 0x0D; /* f32 elements */
    EXPECT_FAIL(tg_idx_parse(b, 16, "x.idx", 3, 0, &a), TG_ERR_UNSUPPORTED, "element type 0x0D",
                "x.idx");
    memcpy(b, img, 16);
    b[3] = 2;
    EXPECT_FAIL(tg_idx_parse(b, 16, "x.idx", 0, 0, &a), TG_ERR_UNSUPPORTED, "has 2 dimensions",
                "x.idx");
    EXPECT_FAIL(tg_idx_parse(img, ni, "x.idx", TG_IDX_LABELS, 0, &a), TG_ERR_FORMAT,
                "expected labels (magic 0x00000801) but the file holds images (magic 0x00000803)",
                "x.idx");
    EXPECT_FAIL(tg_idx_parse(img, 0, "e.idx", 3, 0, &a), TG_ERR_FORMAT, "e.idx: empty file", NULL);
    EXPECT_FAIL(tg_idx_parse(img, 3, "s.idx", 3, 0, &a), TG_ERR_FORMAT, "truncated header: 3 bytes",
                "s.idx");
    EXPECT_FAIL(tg_idx_parse(img, 10, "s.idx", 3, 0, &a), TG_ERR_FORMAT,
                "truncated header: 6 of the 12 bytes", "s.idx");
    memcpy(b, img, 16);
    b[11] = 0; /* rows = 0 */
    EXPECT_FAIL(tg_idx_parse(b, 16, "z.idx", 3, 0, &a), TG_ERR_FORMAT, "rows in the header is 0",
                "z.idx");
    TG_CHECK(a.data == NULL && a.bytes == 0);
}

static void set_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

static void test_huge_dims(void)
{
    tg_idx a;
    unsigned char b[32];
    make_idx(b, 3, 1, 1, 1);
    set_be32(b + 4, 0xFFFFFFFFu);
    set_be32(b + 8, 0xFFFFFFFFu);
    set_be32(b + 12, 0xFFFFFFFFu);
    EXPECT_FAIL(tg_idx_parse(b, 16, "h.idx", 3, 0, &a), TG_ERR_FORMAT, "over the limit of 65536",
                "h.idx");
    /* W2: one image of 2^31 rows fits the byte limit, but its side would
     * wrap to a negative int downstream */
    set_be32(b + 4, 1);
    set_be32(b + 8, 0x80000000u);
    set_be32(b + 12, 1);
    EXPECT_FAIL(tg_idx_parse(b, 16, "h.idx", 3, 0, &a), TG_ERR_FORMAT,
                "rows in the header is 2147483648, over the limit", "h.idx");
    set_be32(b + 4, 100000);
    set_be32(b + 8, 1000);
    set_be32(b + 12, 1000);
    EXPECT_FAIL(tg_idx_parse(b, 16, "h.idx", 3, 0, &a), TG_ERR_FORMAT, "more than the limit",
                "h.idx");
    /* 3 GB promised by a tiny compressed file: fails as truncated, without
     * allocating anything like 3 GB. */
    set_be32(b + 4, 4000000);
    set_be32(b + 8, 28);
    set_be32(b + 12, 28);
    size_t ng = tg_test_gzip(b, 16, gz, sizeof gz);
    tg_alloc_reset_peak();
    int64_t base = tg_alloc_live_bytes();
    EXPECT_FAIL(tg_idx_parse(gz, ng, "h.gz", 3, 0, &a), TG_ERR_FORMAT,
                "h.gz: truncated: header promises 3136000000 bytes of pixels, more than its",
                "compressed bytes can hold");
    TG_CHECK(tg_alloc_peak_bytes() - base < (4 << 20));
    const char *p = tmp_path("huge.gz");
    write_file(p, b, 16, 1);
    tg_alloc_reset_peak();
    EXPECT_FAIL(tg_idx_load(p, 3, 0, &a), TG_ERR_FORMAT, "header promises 3136000000 bytes", p);
    TG_CHECK(tg_alloc_peak_bytes() - base < (4 << 20));
}

static void test_truncated_and_trailing(void)
{
    size_t ni = make_idx(img, 3, 10, 28, 28); /* 16 + 7840 bytes */
    tg_idx a;
    for (int gzip = 0; gzip < 2; gzip++) {
        const char *p = tmp_path(gzip ? "t.gz" : "t.raw");
        write_file(p, img, 16 + 1000, gzip);
        EXPECT_FAIL(tg_idx_load(p, 3, 0, &a), TG_ERR_FORMAT,
                    "truncated: header promises 7840 bytes of pixels, file has 1000", p);
        memcpy(img + ni, "junkjunk", 8);
        write_file(p, img, ni + 8, gzip);
        EXPECT_FAIL(tg_idx_load(p, 3, 0, &a), TG_ERR_FORMAT,
                    "trailing data: 8 extra bytes after the 7840 bytes of pixels", p);
        /* A subset does not need the rest of the file to be right. */
        TG_CHECK_OK(tg_idx_load(p, 3, 2, &a));
        TG_CHECK(a.dim[0] == 2);
        tg_idx_free(&a);
        write_file(p, img, 0, gzip);
        EXPECT_FAIL(tg_idx_load(p, 3, 0, &a), TG_ERR_FORMAT, "empty file", p);
    }
    /* A compressed stream cut in the middle. */
    size_t ng = tg_test_gzip(img, ni, gz, sizeof gz);
    EXPECT_FAIL(tg_idx_parse(gz, ng / 2, "cut.gz", 3, 0, &a), TG_ERR_FORMAT, "truncated", "cut.gz");
    TG_CHECK(strstr(tg_error_message(), "cut short"));
    const char *p = tmp_path("cut.gz");
    write_file(p, gz, ng / 2, 0);
    EXPECT_FAIL(tg_idx_load(p, 3, 0, &a), TG_ERR_FORMAT, "truncated", p);
    /* All the data, but the gzip trailer (CRC and length) cut off. */
    EXPECT_FAIL(tg_idx_parse(gz, ng - 4, "tail.gz", 3, 0, &a), TG_ERR_FORMAT,
                "before its end marker", "tail.gz");
    write_file(p, gz, ng - 4, 0);
    EXPECT_FAIL(tg_idx_load(p, 3, 0, &a), TG_ERR_FORMAT, "before its end marker", p);
    /* A wrong checksum. */
    gz[ng - 8] ^= 1;
    EXPECT_FAIL(tg_idx_parse(gz, ng, "crc.gz", 3, 0, &a), TG_ERR_FORMAT, "corrupt gzip data",
                "crc.gz");
    write_file(p, gz, ng, 0);
    EXPECT_FAIL(tg_idx_load(p, 3, 0, &a), TG_ERR_FORMAT, "corrupt gzip data", p);
    /* zlib's name for the descriptor means nothing to a user */
    TG_CHECK(!strstr(tg_error_message(), "<fd:"));
    gz[ng - 8] ^= 1;
    /* Corrupt compressed data. */
    memcpy(gz + 12, "\xff\xff\xff\xff\xff\xff", 6);
    tg_status st = tg_idx_parse(gz, ng, "bad.gz", 3, 0, &a);
    TG_CHECK(st == TG_ERR_FORMAT && strstr(tg_error_message(), "bad.gz"));
}

static void test_pair_mismatch_and_io(void)
{
    size_t ni = make_idx(img, 3, 20, 4, 4);
    size_t nl = make_idx(lab, 1, 19, 0, 0);
    const char *ip = tmp_path("pi.gz"), *lp = tmp_path("pl.gz");
    write_file(ip, img, ni, 1);
    write_file(lp, lab, nl, 1);
    tg_idx a, b;
    EXPECT_FAIL(tg_idx_load_pair(ip, lp, 0, &a, &b), TG_ERR_FORMAT, "holds 20 images but", lp);
    TG_CHECK(strstr(tg_error_message(), "holds 19 labels"));
    TG_CHECK(a.data == NULL && b.data == NULL);
    EXPECT_FAIL(tg_idx_load(tmp_path("missing.gz"), 3, 0, &a), TG_ERR_NOT_FOUND, "cannot open",
                "missing.gz");
    EXPECT_FAIL(tg_idx_load(tmpdir, 3, 0, &a), TG_ERR_IO, "not a regular file", tmpdir);
}

static void test_no_leaks_on_failure(void)
{
    size_t ni = make_idx(img, 3, 10, 8, 8);
    size_t ng = tg_test_gzip(img, ni, gz, sizeof gz);
    int64_t live = tg_alloc_live_bytes();
    tg_idx a;
    for (size_t cut = 0; cut < ng; cut += 7)
        if (tg_idx_parse(gz, cut, "c.gz", 3, 0, &a) == TG_OK)
            tg_idx_free(&a);
    for (size_t cut = 0; cut <= ni; cut += 5)
        if (tg_idx_parse(img, cut, "c.raw", 3, 0, &a) == TG_OK)
            tg_idx_free(&a);
    tg_alloc_fail_after(1);
    EXPECT_FAIL(tg_idx_parse(img, ni, "m.raw", 3, 0, &a), TG_ERR_NOMEM, "out of memory", "m.raw");
    tg_alloc_fail_after(0);
    TG_CHECK(tg_alloc_live_bytes() == live);
}

static void test_real_fashion_mnist(void)
{
    const char *dir = tg_test_fashion_dir();
    if (!dir) {
        printf("  (skipped: no Fashion-MNIST files)\n");
        return;
    }
    char ip[512], lp[512];
    tg_idx a, b;
    snprintf(ip, sizeof ip, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(lp, sizeof lp, "%s/train-labels-idx1-ubyte.gz", dir);
    TG_CHECK_OK(tg_idx_load_pair(ip, lp, 0, &a, &b));
    TG_CHECK(a.dim[0] == 60000 && a.dim[1] == 28 && a.dim[2] == 28 && b.dim[0] == 60000);
    TG_CHECK(b.data && b.data[0] == 9); /* the first training item is an ankle boot */
    tg_idx_free(&a);
    tg_idx_free(&b);
    snprintf(ip, sizeof ip, "%s/t10k-images-idx3-ubyte.gz", dir);
    snprintf(lp, sizeof lp, "%s/t10k-labels-idx1-ubyte.gz", dir);
    TG_CHECK_OK(tg_idx_load_pair(ip, lp, 0, &a, &b));
    TG_CHECK(a.dim[0] == 10000 && b.dim[0] == 10000);
    int maxlab = 0;
    for (int i = 0; i < 10000 && b.data; i++)
        maxlab = b.data[i] > maxlab ? b.data[i] : maxlab;
    TG_CHECK(maxlab == 9);
    tg_idx_free(&a);
    tg_idx_free(&b);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_test_idx_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_valid_files);
    TG_RUN(test_bad_headers);
    TG_RUN(test_huge_dims);
    TG_RUN(test_truncated_and_trailing);
    TG_RUN(test_pair_mismatch_and_io);
    TG_RUN(test_no_leaks_on_failure);
    TG_RUN(test_real_fashion_mnist);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
