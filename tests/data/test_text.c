/* tests/data/test_text.c - text data sets: windows and their next-token
 * targets, the held-out tail, byte and char vocabularies, the loader's
 * token steps (sync and async alike, split over instances) and BERT's
 * masking, and the errors for files that cannot make a data set; both
 * splits of a file from one read of it, with a peak of memory a few times
 * the file, and a file of NUL bytes refused at once (issue 46, rows 14
 * and 17). */
#include "core/alloc.h"
#include "core/error.h"
#include "data/loader.h"
#include "tg_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const GPL3 = "/usr/share/common-licenses/GPL-3";

static tg_text_config cfg_of(tg_text_tokens t, int seq)
{
    return (tg_text_config){t, seq, 0};
}

/* 1000 bytes "0123456789" repeated: every target is its input + 1 mod 10. */
static void test_windows_and_targets(void)
{
    char text[1000];
    for (int i = 0; i < 1000; i++)
        text[i] = (char)('0' + i % 10);
    tg_text_config c = cfg_of(TG_TOKENS_BYTE, 7);
    tg_dataset *tr = NULL, *te = NULL;
    TG_CHECK_OK(
        tg_dataset_text_from_memory(text, sizeof text, "digits", &c, TG_SPLIT_TRAIN, 0, &tr));
    TG_CHECK_OK(
        tg_dataset_text_from_memory(text, sizeof text, "digits", &c, TG_SPLIT_TEST, 0, &te));
    if (!tr || !te)
        return;
    tg_dataset_info a = tg_dataset_describe(tr), b = tg_dataset_describe(te);
    /* 900 training tokens make (900 - 1) / 7 = 128 windows, 100 test tokens 14 */
    TG_CHECK(a.text && a.samples == 128 && a.seq_len == 7 && a.width == 7 && a.classes == 256);
    TG_CHECK(b.text && b.samples == 14 && strcmp(b.name, "digits/test") == 0);
    const int32_t *tok;
    TG_CHECK(tg_dataset_tokens(te, &tok) == 14 * 7 + 1);
    TG_CHECK(tok[0] == '0' + 900 % 10); /* the test split is the file's tail */
    tg_loader_config lc = tg_loader_defaults(tr, 16);
    lc.seed = 5;
    tg_loader *l = NULL;
    TG_CHECK_OK(tg_loader_create(tr, &lc, &l));
    int32_t ids[16 * 7], labels[16 * 7];
    int64_t n = 0, windows = 0;
    while (tg_loader_next_tokens(l, ids, labels, &n) == TG_OK && n > 0) {
        for (int64_t i = 0; i < n * 7; i++)
            TG_CHECK(labels[i] == '0' + (ids[i] - '0' + 1) % 10);
        windows += n;
    }
    TG_CHECK(windows == 128); /* 8 full steps of 16 */
    float img[7];
    TG_CHECK(tg_loader_next(l, img, labels, &n) != TG_OK); /* tokens, not images */
    TG_CHECK(strstr(tg_error_message(), "tg_loader_next_tokens") != NULL);
    int32_t one[7], one_labels[7];
    TG_CHECK_OK(tg_loader_sample(l, 3, one, one_labels));
    TG_CHECK(one[0] == '0' + 21 % 10 && one_labels[6] == '0' + 28 % 10);
    tg_loader_destroy(l);
    tg_dataset_destroy(tr);
    tg_dataset_destroy(te);
}

/* Char tokens: the sorted distinct code points, multi-byte ones included. */
static void test_char_vocab(void)
{
    const char *text = "h\xc3\xa9llo w\xc3\xb6rld \xe2\x82\xac\xf0\x9f\x98\x80 hello world "
                       "h\xc3\xa9llo w\xc3\xb6rld again and again";
    tg_text_config c = cfg_of(TG_TOKENS_CHAR, 4);
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_text_from_memory(text, strlen(text), "t", &c, TG_SPLIT_TRAIN, 0, &ds));
    if (!ds)
        return;
    tg_text_tokens kind;
    const int32_t *cps;
    int v = tg_dataset_vocab(ds, &kind, &cps);
    TG_CHECK(kind == TG_TOKENS_CHAR && cps);
    /* ' ', a d e g h i l n o r w, é ö € 😀 */
    TG_CHECK(v == 16);
    for (int i = 1; i < v; i++)
        TG_CHECK(cps[i] > cps[i - 1]);
    TG_CHECK(cps[0] == ' ' && cps[v - 1] == 0x1F600 && cps[v - 2] == 0x20AC);
    const int32_t *tok;
    tg_dataset_tokens(ds, &tok);
    char buf[5];
    TG_CHECK(tg_dataset_token_utf8(ds, tok[1], buf) == 2 && strcmp(buf, "\xc3\xa9") == 0);
    TG_CHECK(tg_dataset_token_utf8(ds, v - 1, buf) == 4 && strcmp(buf, "\xf0\x9f\x98\x80") == 0);
    TG_CHECK(tg_dataset_token_utf8(ds, v, buf) == 0);
    tg_dataset_destroy(ds);
    /* the test split shares the whole file's vocabulary */
    TG_CHECK_OK(tg_dataset_text_from_memory(text, strlen(text), "t", &c, TG_SPLIT_TEST, 0, &ds));
    if (ds)
        TG_CHECK(tg_dataset_vocab(ds, NULL, NULL) == 16);
    tg_dataset_destroy(ds);
}

static void expect_error(const char *text, size_t len, tg_text_tokens t, int seq, const char *want)
{
    tg_text_config c = cfg_of(t, seq);
    tg_dataset *ds = NULL;
    tg_status st = tg_dataset_text_from_memory(text, len, "f.txt", &c, TG_SPLIT_TRAIN, 0, &ds);
    TG_CHECK(st != TG_OK && ds == NULL);
    if (!strstr(tg_error_message(), want))
        tg_test_fail(__FILE__, __LINE__, "want '%s' in: %s", want, tg_error_message());
}

static void test_errors(void)
{
    tg_text_tokens t = TG_TOKENS_CHAR;
    TG_CHECK(tg_text_tokens_parse("byte", &t) == TG_OK && t == TG_TOKENS_BYTE);
    TG_CHECK(tg_text_tokens_parse("word", &t) == TG_ERR_INVALID_ARG && t == TG_TOKENS_BYTE);
    TG_CHECK(strstr(tg_error_message(), "text tokens 'word': expected byte or char") != NULL);
    expect_error("", 0, TG_TOKENS_BYTE, 4, "empty");
    expect_error("abc\xff"
                 "defghijklmnopqrstuvwxyz",
                 27, TG_TOKENS_CHAR, 2, "offset 3");
    expect_error("\xc0\xaf"
                 "abcdefghijklmnopqrstuvwxyz",
                 28, TG_TOKENS_CHAR, 2, "not UTF-8");
    expect_error("\xed\xa0\x80"
                 "abcdefghijklmnopqrstuvwxyz",
                 29, TG_TOKENS_CHAR, 2, "not UTF-8");
    expect_error("short text", 10, TG_TOKENS_BYTE, 64, "seq-len + 1 = 65");
    /* bytes take any file, even one that is not UTF-8 */
    tg_text_config c = cfg_of(TG_TOKENS_BYTE, 2);
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_text_from_memory("abc\xff"
                                            "defghijklmnopqrstuvwxyz0123456789",
                                            37, "b", &c, TG_SPLIT_TRAIN, 0, &ds));
    tg_dataset_destroy(ds);
    c.seq_len = 0;
    TG_CHECK(tg_dataset_text_from_memory("abc", 3, "b", &c, TG_SPLIT_TRAIN, 0, &ds) != TG_OK);
    c.seq_len = 4;
    TG_CHECK(tg_dataset_open_text("/nonexistent/corpus.txt", &c, TG_SPLIT_TRAIN, 0, &ds) ==
             TG_ERR_NOT_FOUND);
    TG_CHECK(strstr(tg_error_message(), "/nonexistent/corpus.txt") != NULL);
    TG_CHECK(tg_dataset_open_text("/tmp", &c, TG_SPLIT_TRAIN, 0, &ds) != TG_OK);
    TG_CHECK(ds == NULL);
    /* the loader refuses image settings on text */
    c.seq_len = 2;
    TG_CHECK_OK(tg_dataset_text_from_memory("abcdefghijklmnopqrstuvwxyz0123456789", 36, "b", &c,
                                            TG_SPLIT_TRAIN, 0, &ds));
    if (ds) {
        tg_loader_config lc = tg_loader_defaults(ds, 2);
        lc.flip_prob = 0.5f;
        tg_loader *l = NULL;
        TG_CHECK(tg_loader_create(ds, &lc, &l) == TG_ERR_CONFIG);
        TG_CHECK(strstr(tg_error_message(), "flips apply to images") != NULL);
    }
    tg_dataset_destroy(ds);
}

/* This process's bytes read so far (/proc/self/io's rchar), or -1. */
static long long bytes_read(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    long long n = -1;
    if (f) {
        if (fscanf(f, "rchar: %lld", &n) != 1)
            n = -1;
        fclose(f);
    }
    return n;
}

static bool same_dataset(const tg_dataset *a, const tg_dataset *b)
{
    const int32_t *ta, *tb, *va, *vb;
    int64_t na = tg_dataset_tokens(a, &ta), nb = tg_dataset_tokens(b, &tb);
    int v = tg_dataset_vocab(a, NULL, &va);
    return na == nb && memcmp(ta, tb, (size_t)na * sizeof *ta) == 0 &&
           v == tg_dataset_vocab(b, NULL, &vb) && (!va) == (!vb) &&
           (!va || memcmp(va, vb, (size_t)v * sizeof *va) == 0);
}

/* Both splits from one read of the file (a file replaced between two reads
 * trained on one text and recorded the other's vocabulary): the same data
 * sets as opening each split, the file's bytes read once, and at most
 * about five bytes of memory per byte of text at the peak (its bytes and
 * the two splits' int32 tokens; the whole stream, then each split, took
 * nine per split). */
static void test_splits_from_one_read(void)
{
    char path[] = "/tmp/tg_text_XXXXXX";
    int fd = mkstemp(path);
    TG_CHECK(fd >= 0);
    if (fd < 0)
        return;
    size_t len = 4 << 20;
    char *text = malloc(len);
    for (size_t i = 0; text && i < len; i++) /* UTF-8: ASCII and a two-byte letter */
        text[i] = i % 97 == 95 ? '\xc3' : i % 97 == 96 ? '\xa9' : (char)('a' + (i * 7) % 26);
    TG_CHECK(text && write(fd, text, len) == (ssize_t)len);
    close(fd);
    free(text);
    const tg_text_tokens kinds[] = {TG_TOKENS_BYTE, TG_TOKENS_CHAR};
    for (int k = 0; k < 2; k++) {
        tg_text_config c = cfg_of(kinds[k], 64);
        tg_dataset *tr = NULL, *te = NULL, *tr1 = NULL, *te1 = NULL;
        int64_t live = tg_alloc_live_bytes();
        tg_alloc_reset_peak();
        long long before = bytes_read();
        TG_CHECK_OK(tg_dataset_open_text_splits(path, &c, 0, 0, &tr, &te));
        long long read = bytes_read() - before;
        int64_t peak = tg_alloc_peak_bytes() - live;
        printf("  %s tokens: %lld bytes read for a %zu-byte file, peak %.2f bytes a byte\n",
               tg_text_tokens_name(kinds[k]), read, len, (double)peak / (double)len);
        TG_CHECK(before < 0 || (read >= (long long)len && read < (long long)len * 3 / 2));
        TG_CHECK(peak < (int64_t)len * 11 / 2);
        TG_CHECK_OK(tg_dataset_open_text(path, &c, TG_SPLIT_TRAIN, 0, &tr1));
        TG_CHECK_OK(tg_dataset_open_text(path, &c, TG_SPLIT_TEST, 0, &te1));
        TG_CHECK(tr && te && tr1 && te1 && same_dataset(tr, tr1) && same_dataset(te, te1));
        tg_dataset_destroy(tr);
        tg_dataset_destroy(te);
        tg_dataset_destroy(tr1);
        tg_dataset_destroy(te1);
    }
    /* a limit applies to its split only; a failure leaves both NULL */
    tg_text_config c = cfg_of(TG_TOKENS_BYTE, 64);
    tg_dataset *tr = NULL, *te = NULL;
    TG_CHECK_OK(tg_dataset_open_text_splits(path, &c, 10, 3, &tr, &te));
    TG_CHECK(tr && te && tg_dataset_describe(tr).samples == 10 &&
             tg_dataset_describe(te).samples == 3);
    tg_dataset_destroy(tr);
    tg_dataset_destroy(te);
    c.seq_len = 1 << 20;
    TG_CHECK(tg_dataset_open_text_splits(path, &c, 0, 0, &tr, &te) == TG_ERR_FORMAT);
    TG_CHECK(tr == NULL && te == NULL);
    unlink(path);
}

/* A file of NUL bytes (or of any one token) is no text: refused by the
 * scan, before a token is stored, naming what it is. */
static void test_one_token_refused(void)
{
    static char zeros[4096];
    expect_error(zeros, sizeof zeros, TG_TOKENS_BYTE, 4, "all 4096 bytes are NUL (0x00): not text");
    expect_error(zeros, sizeof zeros, TG_TOKENS_CHAR, 4, "all 4096 bytes are NUL");
    char as[300];
    memset(as, 'a', sizeof as);
    expect_error(as, sizeof as, TG_TOKENS_BYTE, 4, "all 300 byte tokens are the same (byte 97)");
    as[299] = 'b'; /* two tokens make a text */
    tg_text_config c = cfg_of(TG_TOKENS_BYTE, 4);
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_text_from_memory(as, sizeof as, "ab", &c, TG_SPLIT_TRAIN, 0, &ds));
    tg_dataset_destroy(ds);
}

/* Debian's GPL-3: char vocabulary, sync and async loaders give the same
 * steps, and two instances' parts make the whole step. */
static void test_corpus_loaders_agree(void)
{
    tg_text_config c = cfg_of(TG_TOKENS_CHAR, 32);
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_open_text(GPL3, &c, TG_SPLIT_TRAIN, 0, &ds));
    if (!ds)
        return;
    tg_dataset_info d = tg_dataset_describe(ds);
    TG_CHECK(d.samples > 900 && d.classes > 60 && d.classes < 100);
    /* by kind name, as the other data sets: byte tokens, 64 a window */
    tg_dataset *by_kind = NULL;
    TG_CHECK_OK(tg_dataset_open("text", GPL3, TG_SPLIT_TEST, 0, &by_kind));
    if (by_kind) {
        tg_dataset_info k = tg_dataset_describe(by_kind);
        TG_CHECK(k.text && k.seq_len == 64 && k.classes == 256 && k.samples == (3514 - 1) / 64);
    }
    tg_dataset_destroy(by_kind);
    enum { STEP = 8, S = 32 };
    tg_loader_config lc = tg_loader_defaults(ds, STEP);
    lc.seed = 9;
    tg_loader *sync = NULL, *async = NULL, *part[2] = {NULL, NULL};
    TG_CHECK_OK(tg_loader_create(ds, &lc, &sync));
    tg_loader_config la = lc;
    la.mode = TG_LOADER_ASYNC;
    la.num_workers = 2;
    TG_CHECK_OK(tg_loader_create(ds, &la, &async));
    for (int k = 0; k < 2; k++) {
        tg_loader_config lp = lc;
        lp.split_parts = 2, lp.split_index = k, lp.split_chunk = 2;
        TG_CHECK_OK(tg_loader_create(ds, &lp, &part[k]));
    }
    if (!sync || !async || !part[0] || !part[1])
        goto out;
    int32_t a[STEP * S], al[STEP * S], b[STEP * S], bl[STEP * S], p[2][STEP / 2 * S],
        pl[2][STEP / 2 * S];
    for (int epoch = 0; epoch < 2; epoch++) {
        tg_loader_start_epoch(sync, epoch);
        tg_loader_start_epoch(async, epoch);
        tg_loader_start_epoch(part[0], epoch);
        tg_loader_start_epoch(part[1], epoch);
        for (int step = 0; step < 5; step++) {
            int64_t n1, n2, q0, q1;
            TG_CHECK_OK(tg_loader_next_tokens(sync, a, al, &n1));
            TG_CHECK_OK(tg_loader_next_tokens(async, b, bl, &n2));
            TG_CHECK_OK(tg_loader_next_tokens(part[0], p[0], pl[0], &q0));
            TG_CHECK_OK(tg_loader_next_tokens(part[1], p[1], pl[1], &q1));
            TG_CHECK(n1 == STEP && n2 == STEP && q0 == STEP / 2 && q1 == STEP / 2);
            TG_CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(al, bl, sizeof al) == 0);
            /* chunks of 2 samples alternate between the parts */
            for (int s = 0; s < STEP; s++) {
                int k = (s / 2) % 2, at = (s / 4) * 2 + s % 2;
                TG_CHECK(memcmp(&a[s * S], &p[k][at * S], S * sizeof(int32_t)) == 0);
                TG_CHECK(memcmp(&al[s * S], &pl[k][at * S], S * sizeof(int32_t)) == 0);
            }
        }
    }
out:
    tg_loader_destroy(sync);
    tg_loader_destroy(async);
    tg_loader_destroy(part[0]);
    tg_loader_destroy(part[1]);
    tg_dataset_destroy(ds);
}

/* BERT's masking: about 15% of positions labelled, 80/10/10 of them
 * masked/random/kept, the rest ignored; deterministic per epoch. */
static void test_masking(void)
{
    tg_text_config c = cfg_of(TG_TOKENS_BYTE, 64);
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_open_text(GPL3, &c, TG_SPLIT_TRAIN, 0, &ds));
    if (!ds)
        return;
    const int32_t *tok;
    tg_dataset_tokens(ds, &tok);
    int64_t n = tg_dataset_describe(ds).samples;
    tg_loader_config lc = tg_loader_defaults(ds, n);
    lc.shuffle = false;
    lc.mask_prob = 0.15f;
    lc.mask_token = 256;
    tg_loader *l = NULL;
    TG_CHECK_OK(tg_loader_create(ds, &lc, &l));
    static int32_t x[600 * 64], y[600 * 64], x2[600 * 64];
    TG_CHECK(n <= 600);
    int64_t got = 0, chosen = 0, masked = 0, kept = 0, ignored = 0;
    if (l && n <= 600) {
        TG_CHECK_OK(tg_loader_next_tokens(l, x, y, &got));
        TG_CHECK(got == n);
        for (int64_t i = 0; i < n * 64; i++) {
            if (y[i] == TG_LOADER_IGNORE_LABEL) {
                ignored++;
                TG_CHECK(x[i] == tok[i]);
                continue;
            }
            chosen++;
            TG_CHECK(y[i] == tok[i]);
            masked += x[i] == 256;
            kept += x[i] == tok[i];
        }
        double total = (double)(n * 64);
        TG_CHECK(chosen / total > 0.14 && chosen / total < 0.16);
        TG_CHECK((double)masked / chosen > 0.77 && (double)masked / chosen < 0.83);
        /* kept: 10% unchanged plus the random draws that hit the same token */
        TG_CHECK((double)kept / chosen > 0.08 && (double)kept / chosen < 0.13);
        /* the same epoch masks the same way; the next one differently */
        tg_loader_start_epoch(l, 0);
        TG_CHECK_OK(tg_loader_next_tokens(l, x2, y, &got));
        TG_CHECK(memcmp(x, x2, sizeof(int32_t) * (size_t)(n * 64)) == 0);
        tg_loader_start_epoch(l, 1);
        TG_CHECK_OK(tg_loader_next_tokens(l, x2, y, &got));
        TG_CHECK(memcmp(x, x2, sizeof(int32_t) * (size_t)(n * 64)) != 0);
    }
    tg_loader_destroy(l);
    tg_dataset_destroy(ds);
}

int main(void)
{
    TG_RUN(test_windows_and_targets);
    TG_RUN(test_char_vocab);
    TG_RUN(test_errors);
    TG_RUN(test_splits_from_one_read);
    TG_RUN(test_one_token_refused);
    TG_RUN(test_corpus_loaders_agree);
    TG_RUN(test_masking);
    return tg_test_finish();
}
