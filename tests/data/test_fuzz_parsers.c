/* tests/data/test_fuzz_parsers.c - deterministic fuzzing of every parser
 * under the ordinary test run (and so under ASan/UBSan in sanitizer builds).
 *
 * Each parser gets a seed corpus of valid inputs built here, then a few
 * thousand mutations of it drawn from a fixed seed: bit flips, interesting
 * bytes, truncations, inserted and deleted bytes, copied chunks, and length
 * or size fields set to huge values. (The CIFAR-10 reader has no header:
 * its mutants test the size and label checks.) Every input must either be rejected with
 * a message or accepted as a self-consistent result; none may crash, and
 * none may leak (the allocator's live-byte count is compared after each).
 * The libFuzzer targets in fuzz/ do the same open-endedly.
 */
#include "core/alloc.h"
#include "core/arena.h"
#include "core/json.h"
#include "core/rng.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "data/safetensors.h"
#include "tg_test.h"

#include <string.h>

#define MUTATIONS 3000
#define FUZZ_MAX_INPUT 8192

typedef struct corpus {
    unsigned char *item[16];
    size_t len[16];
    int n;
} corpus;

static void corpus_add(corpus *c, const void *data, size_t len)
{
    if (c->n >= 16 || len > FUZZ_MAX_INPUT)
        return;
    c->item[c->n] = tg_malloc(len ? len : 1);
    memcpy(c->item[c->n], data, len);
    c->len[c->n++] = len;
}

static void corpus_free(corpus *c)
{
    for (int i = 0; i < c->n; i++)
        tg_free(c->item[i]);
    c->n = 0;
}

/* ---- mutations ---------------------------------------------------------------- */

typedef enum { FIELDS_NONE, FIELDS_IDX, FIELDS_SAFETENSORS } field_kind;

static const unsigned char interesting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, '"',  '\\', '{', '}',
                                            '[',  ']',  ',',  ':',  '-',  '0',  '9',  'e', 'u',
                                            ' ',  0xC3, 0xED, 0xF4, 0x1f, 0x8b, 0x08, 0x03};
static const char *const big_numbers[] = {"18446744073709551616",
                                          "9223372036854775807",
                                          "4294967296",
                                          "99999999999999999999999",
                                          "-1",
                                          "1e400",
                                          "0.5",
                                          "100000000"};

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* Apply one random mutation to buf (len bytes, capacity FUZZ_MAX_INPUT). */
static size_t mutate(tg_rng *r, unsigned char *buf, size_t len, field_kind fields)
{
    size_t pos = len ? (size_t)tg_rng_below(r, len) : 0;
    switch (tg_rng_below(r, 9)) {
    case 0: /* flip a bit */
        if (len)
            buf[pos] ^= (unsigned char)(1u << tg_rng_below(r, 8));
        return len;
    case 1: /* an interesting byte */
        if (len)
            buf[pos] = interesting[tg_rng_below(r, sizeof interesting)];
        return len;
    case 2: /* truncate */
        return len ? (size_t)tg_rng_below(r, len) : 0;
    case 3: { /* insert 1..8 random bytes */
        size_t k = 1 + (size_t)tg_rng_below(r, 8);
        if (len + k > FUZZ_MAX_INPUT)
            return len;
        memmove(buf + pos + k, buf + pos, len - pos);
        for (size_t i = 0; i < k; i++)
            buf[pos + i] = (unsigned char)tg_rng_next(r);
        return len + k;
    }
    case 4: { /* delete a range */
        if (!len)
            return 0;
        size_t k = 1 + (size_t)tg_rng_below(r, len - pos < 16 ? len - pos : 16);
        memmove(buf + pos, buf + pos + k, len - pos - k);
        return len - k;
    }
    case 5: { /* copy a chunk over another place */
        if (len < 2)
            return len;
        size_t from = (size_t)tg_rng_below(r, len), k = 1 + (size_t)tg_rng_below(r, 16);
        if (from + k > len)
            k = len - from;
        if (pos + k > len)
            k = len - pos;
        memmove(buf + pos, buf + from, k);
        return len;
    }
    case 6: { /* replace a digit run by a big or odd number */
        size_t i = pos;
        while (i < len && !(buf[i] >= '0' && buf[i] <= '9'))
            i++;
        if (i >= len)
            return len;
        size_t j = i;
        while (j < len && buf[j] >= '0' && buf[j] <= '9')
            j++;
        const char *num = big_numbers[tg_rng_below(r, sizeof big_numbers / sizeof big_numbers[0])];
        size_t k = strlen(num);
        if (len - (j - i) + k > FUZZ_MAX_INPUT)
            return len;
        memmove(buf + i + k, buf + j, len - j);
        memcpy(buf + i, num, k);
        return len - (j - i) + k;
    }
    default: { /* a length or size field set to a huge or off-by-one value */
        if (fields == FIELDS_IDX && len >= 8) {
            static const uint32_t vals[] = {0xFFFFFFFFu, 0x7FFFFFFFu, 0x80000000u, 0,
                                            1,           60001,       0x10000};
            size_t field = 4 + 4 * (size_t)tg_rng_below(r, (len >= 16 ? 12 : len - 4) / 4);
            put_be32(buf + field, vals[tg_rng_below(r, sizeof vals / sizeof vals[0])]);
        } else if (fields == FIELDS_SAFETENSORS && len >= 8) {
            uint64_t v, old = 0;
            for (int i = 7; i >= 0; i--)
                old = old << 8 | buf[i];
            switch (tg_rng_below(r, 5)) {
            case 0:
                v = (uint64_t)1 << 63;
                break;
            case 1:
                v = UINT64_MAX;
                break;
            case 2:
                v = old + 1;
                break;
            case 3:
                v = old - 1;
                break;
            default:
                v = len - 8 + 1;
                break;
            }
            for (int i = 0; i < 8; i++)
                buf[i] = (unsigned char)(v >> (8 * i));
        } else if (len) {
            buf[pos] = (unsigned char)tg_rng_next(r);
        }
        return len;
    }
    }
}

/* Run `check` on every seed and on MUTATIONS mutants; returns accepted count. */
typedef int (*check_fn)(const unsigned char *buf, size_t len); /* 1 accepted, 0 rejected */

static int run_fuzz(const char *label, corpus *c, field_kind fields, check_fn check, uint64_t seed)
{
    static unsigned char buf[FUZZ_MAX_INPUT];
    tg_rng r;
    tg_rng_seed(&r, seed);
    int accepted = 0, leaks = 0;
    for (int i = 0; i < c->n; i++) {
        int64_t live = tg_alloc_live_bytes();
        if (!check(c->item[i], c->len[i]))
            tg_test_fail(__FILE__, __LINE__, "%s: seed %d rejected: %s", label, i,
                         tg_error_message());
        leaks += tg_alloc_live_bytes() != live;
    }
    for (int m = 0; m < MUTATIONS; m++) {
        int s = (int)tg_rng_below(&r, (uint64_t)c->n);
        size_t len = c->len[s];
        memcpy(buf, c->item[s], len);
        int rounds = 1 + (int)tg_rng_below(&r, 3);
        for (int k = 0; k < rounds; k++)
            len = mutate(&r, buf, len, fields);
        int64_t live = tg_alloc_live_bytes();
        accepted += check(buf, len);
        if (tg_alloc_live_bytes() != live && leaks++ == 0)
            tg_test_fail(__FILE__, __LINE__, "%s: mutant %d leaked %lld bytes", label, m,
                         (long long)(tg_alloc_live_bytes() - live));
    }
    printf("  %s: %d seeds, %d mutants, %d accepted, %d rejected\n", label, c->n, MUTATIONS,
           accepted, MUTATIONS - accepted);
    TG_CHECK(leaks == 0);
    /* The mutants must exercise both outcomes, or the test proves little. */
    TG_CHECK(accepted > 0 && accepted < MUTATIONS);
    return accepted;
}

/* A rejection must come with a message and no result. */
static int rejected_properly(int has_result)
{
    if (has_result || tg_error_message()[0] == '\0') {
        tg_test_fail(__FILE__, __LINE__, "rejection without message or with a result");
        return 0;
    }
    return 1;
}

/* ---- JSON --------------------------------------------------------------------- */

static int check_json(const unsigned char *buf, size_t len)
{
    tg_arena *a = tg_arena_create(0);
    tg_json *v = NULL;
    tg_json_limits lim = {32, 1 << 20};
    tg_error_clear();
    tg_status s = tg_json_parse_ex(a, (const char *)buf, len, "fuzz.json", lim, &v);
    int ok = s == TG_OK;
    if (!ok) {
        rejected_properly(v != NULL);
    } else {
        /* Round trip through the writer gives the same tree. */
        tg_json_writer w;
        tg_json_writer_init(&w);
        tg_json_value(&w, v);
        char *text = NULL;
        size_t n = 0;
        tg_json *again = NULL;
        if (tg_json_writer_finish(&w, &text, &n) != TG_OK ||
            tg_json_parse_ex(a, text, n, "again", lim, &again) != TG_OK || !tg_json_equal(v, again))
            tg_test_fail(__FILE__, __LINE__, "JSON round trip failed for %.*s", (int)len, buf);
        tg_free(text);
        tg_json_writer_free(&w);
    }
    tg_arena_destroy(a);
    return ok;
}

static void test_fuzz_json(void)
{
    static const char *const seeds[] = {
        "{\"deviceIterations\": 4, \"replicationFactor\": 2, \"Training\": "
        "{\"gradientAccumulation\": 8},"
        " \"outputMode\": \"sum\", \"lossScaling\": 128.5, \"enableExecutableCaching\": true, "
        "\"x\": null}",
        "[\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\", \"\\u00e9\\u20AC\\uD83D\\uDE00\", \"caf\xC3\xA9\", "
        "\"\"]",
        "[0, -0, 1.5e3, -0.125, 1E-2, 12345678901234567, -9223372036854775808, 1e308, 5e-324]",
        "{\"a\": [1, [2, [3, {\"b\": {\"c\": [true, false, null]}}]]], \"d\": {}, \"e\": []}",
        "{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_"
        "offsets\":[0,16]}}",
        "\"just a string\"",
        "  \n\t 42 \r\n",
    };
    corpus c = {0};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        corpus_add(&c, seeds[i], strlen(seeds[i]));
    run_fuzz("json", &c, FIELDS_NONE, check_json, 1);
    corpus_free(&c);
}

/* ---- IDX ------------------------------------------------------------------------ */

static int check_idx(const unsigned char *buf, size_t len)
{
    int accepted = 0;
    for (int pass = 0; pass < 2; pass++) {
        tg_idx a;
        tg_error_clear();
        tg_status s =
            tg_idx_parse(buf, len, "fuzz.idx", pass ? TG_IDX_IMAGES : 0, pass ? 2 : 0, &a);
        if (s != TG_OK) {
            rejected_properly(a.data != NULL);
            continue;
        }
        TG_CHECK(a.ndim == 1 || a.ndim == 3);
        TG_CHECK((size_t)(a.dim[0] * a.dim[1] * a.dim[2]) == a.bytes && a.dim[0] <= a.file_items);
        unsigned sum = 0;
        for (size_t i = 0; i < a.bytes; i++) /* every byte is really there (ASan) */
            sum += a.data[i];
        (void)sum;
        tg_idx_free(&a);
        accepted |= pass == 0;
    }
    return accepted;
}

static void test_fuzz_idx(void)
{
    unsigned char img[16 + 60], lab[8 + 3], gz[512];
    unsigned char hi[16] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5};
    unsigned char hl[8] = {0, 0, 8, 1, 0, 0, 0, 3};
    memcpy(img, hi, 16);
    for (int i = 0; i < 60; i++)
        img[16 + i] = (unsigned char)(i * 7 + 3);
    memcpy(lab, hl, 8);
    lab[8] = 9, lab[9] = 0, lab[10] = 3;
    corpus c = {0};
    corpus_add(&c, img, sizeof img);
    corpus_add(&c, lab, sizeof lab);
    corpus_add(&c, gz, tg_test_gzip(img, sizeof img, gz, sizeof gz));
    corpus_add(&c, gz, tg_test_gzip(lab, sizeof lab, gz, sizeof gz));
    run_fuzz("idx", &c, FIELDS_IDX, check_idx, 2);
    corpus_free(&c);
}

/* ---- safetensors ----------------------------------------------------------------- */

static int check_safetensors(const unsigned char *buf, size_t len)
{
    tg_safetensors *st = NULL;
    tg_error_clear();
    tg_status s = tg_safetensors_parse(buf, len, "fuzz.safetensors", &st);
    if (s != TG_OK) {
        rejected_properly(st != NULL);
        return 0;
    }
    /* Accepted: tensors tile the data, sizes match shapes, names resolve. */
    size_t covered = 0;
    for (size_t i = 0; i < tg_safetensors_count(st); i++) {
        const tg_st_tensor *t = tg_safetensors_tensor(st, i);
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++)
            numel *= (uint64_t)t->shape[d];
        TG_CHECK(numel * tg_st_dtype_size(t->dtype) == t->nbytes);
        TG_CHECK(tg_safetensors_find(st, t->name) == t);
        unsigned sum = 0;
        for (size_t k = 0; k < t->nbytes; k++)
            sum += ((const unsigned char *)t->data)[k];
        (void)sum;
        covered += t->nbytes;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | buf[i];
    TG_CHECK(covered == len - 8 - hlen);
    tg_safetensors_destroy(st);
    return 1;
}

static void test_fuzz_safetensors(void)
{
    float w[8] = {0, 0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f}, b[2] = {0.1f, -0.1f};
    int64_t step = 12;
    uint16_t half[3] = {0x3c00, 0x4000, 0xc000};
    tg_st_tensor t[] = {
        {"layer1.conv.weight", TG_ST_F32, 4, {2, 1, 2, 2}, w, 0},
        {"layer1.conv.bias", TG_ST_F32, 1, {2}, b, 0},
        {"step", TG_ST_I64, 0, {0}, &step, 0},
        {"half", TG_ST_F16, 1, {3}, half, 0},
        {"mask", TG_ST_U8, 2, {0, 4}, NULL, 0},
    };
    tg_st_meta meta[] = {{"format", "pt"}, {"model", "fashion-basic"}};
    corpus c = {0};
    void *buf;
    size_t len;
    TG_CHECK_OK(tg_safetensors_encode(t, 5, meta, 2, &buf, &len));
    corpus_add(&c, buf, len);
    tg_free(buf);
    TG_CHECK_OK(tg_safetensors_encode(t, 2, NULL, 0, &buf, &len));
    corpus_add(&c, buf, len);
    tg_free(buf);
    TG_CHECK_OK(tg_safetensors_encode(NULL, 0, meta, 1, &buf, &len));
    corpus_add(&c, buf, len);
    tg_free(buf);
    run_fuzz("safetensors", &c, FIELDS_SAFETENSORS, check_safetensors, 3);
    corpus_free(&c);
}

/* ---- CIFAR-10 binary -------------------------------------------------------------- */

static int check_cifar(const unsigned char *buf, size_t len)
{
    int accepted = 0;
    for (int pass = 0; pass < 2; pass++) {
        tg_dataset *ds = NULL;
        tg_error_clear();
        tg_status s = tg_cifar10_parse(buf, len, "fuzz.bin", pass ? 1 : 0, &ds);
        if (s != TG_OK) {
            rejected_properly(ds != NULL);
            continue;
        }
        /* accepted: whole records, labels 0..9, the pixels as given */
        TG_CHECK(len % 3073 == 0 && ds->n == (pass ? 1 : (int64_t)(len / 3073)));
        int bad = 0;
        for (int64_t i = 0; i < ds->n; i++) {
            bad += ds->labels[i] != buf[i * 3073] || ds->labels[i] > 9;
            bad += memcmp(ds->images + i * 3072, buf + i * 3073 + 1, 3072) != 0;
        }
        TG_CHECK(bad == 0);
        tg_dataset_destroy(ds);
        accepted |= pass == 0;
    }
    return accepted;
}

static void test_fuzz_cifar(void)
{
    static unsigned char rec[2 * 3073];
    for (int k = 0; k < 2; k++) {
        rec[k * 3073] = (unsigned char)(k * 9); /* labels 0 and 9, the edges */
        for (int p = 0; p < 3072; p++)
            rec[k * 3073 + 1 + p] = (unsigned char)(k * 7 + p);
    }
    corpus c = {0};
    corpus_add(&c, rec, 3073);
    corpus_add(&c, rec, sizeof rec);
    run_fuzz("cifar10", &c, FIELDS_NONE, check_cifar, 4);
    corpus_free(&c);
}

/* ---- text ------------------------------------------------------------------------ */

/* Bytes always load (given seq_len + 1 tokens a split); as characters, what
 * loads has every token in its vocabulary, sorted code points, and windows
 * within the stream; what fails says why. */
static int check_text(const unsigned char *buf, size_t len)
{
    int accepted = 0;
    for (int t = 0; t < 2; t++) {
        tg_text_config c = {(tg_text_tokens)t, 2, 0};
        for (int split = 0; split < 2; split++) {
            tg_dataset *ds = NULL;
            tg_error_clear();
            tg_status s =
                tg_dataset_text_from_memory(buf, len, "fuzz.txt", &c, (tg_split)split, 0, &ds);
            if (s != TG_OK) {
                TG_CHECK(ds == NULL && tg_error_message()[0] != '\0');
                continue;
            }
            const int32_t *tok, *cps;
            int64_t n = tg_dataset_tokens(ds, &tok);
            int v = tg_dataset_vocab(ds, NULL, &cps);
            int bad = n != ds->n * 2 + 1 || v < 1;
            for (int64_t i = 0; i < n; i++)
                bad += tok[i] < 0 || tok[i] >= v;
            for (int i = 1; cps && i < v; i++)
                bad += cps[i] <= cps[i - 1] || cps[i] > 0x10FFFF;
            TG_CHECK(bad == 0);
            tg_dataset_destroy(ds);
            accepted = 1;
        }
    }
    return accepted;
}

static void test_fuzz_text(void)
{
    static const char *const seeds[] = {
        "hello, world: a text long enough for windows of two tokens",
        "h\xc3\xa9llo w\xc3\xb6rld \xe2\x82\xac \xf0\x9f\x98\x80 and more text to split",
    };
    corpus c = {0};
    for (int i = 0; i < 2; i++)
        corpus_add(&c, seeds[i], strlen(seeds[i]));
    run_fuzz("text", &c, FIELDS_NONE, check_text, 5);
    corpus_free(&c);
}

int main(void)
{
    TG_RUN(test_fuzz_json);
    TG_RUN(test_fuzz_idx);
    TG_RUN(test_fuzz_safetensors);
    TG_RUN(test_fuzz_cifar);
    TG_RUN(test_fuzz_text);
    return tg_test_finish();
}
