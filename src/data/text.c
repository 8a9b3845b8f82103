/* data/text.c - a text file as a data set of token windows, for language
 * models.
 *
 * Tokens are the file's bytes (vocabulary 256: any file, no decoding) or its
 * Unicode code points (UTF-8 decoded strictly; the vocabulary is the sorted
 * set of code points the whole file uses, so the training and test splits
 * and a checkpoint agree on it whatever the split point). The token stream
 * is cut once: the head is the training split and the last test_fraction
 * the test split, so the test text is text the model never saw. Each split
 * is then read as back-to-back windows of seq_len tokens; a window's
 * targets are the same positions one token on, which is why a split of T
 * tokens holds (T - 1) / seq_len windows and needs at least seq_len + 1.
 * An epoch is thus one pass over the split's text.
 */
#include "data/dataset.h"

#include "tilegraph/files.h"

#include "core/alloc.h"
#include "core/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_CODE_POINT 0x10FFFF
/* Files larger than this are refused: every token is held as an int32. */
#define MAX_TEXT_BYTES ((int64_t)1 << 31)

tg_status tg_text_tokens_parse(const char *name, tg_text_tokens *out)
{
    if (name && strcmp(name, "byte") == 0)
        *out = TG_TOKENS_BYTE;
    else if (name && strcmp(name, "char") == 0)
        *out = TG_TOKENS_CHAR;
    else
        return tg_error(TG_ERR_INVALID_ARG, "text tokens '%s': expected byte or char",
                        name ? name : "(null)");
    return TG_OK;
}

const char *tg_text_tokens_name(tg_text_tokens t)
{
    return t == TG_TOKENS_CHAR ? "char" : t == TG_TOKENS_BYTE ? "byte" : "?";
}

/* One UTF-8 sequence at s[0..left) into *cp; its length, or 0 when it is
 * not well-formed (overlong forms, surrogates and values past U+10FFFF are
 * refused, as the standard requires). */
static int utf8_decode(const uint8_t *s, size_t left, int32_t *cp)
{
    uint8_t b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    int len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    if (!len || b > 0xF4 || (size_t)len > left)
        return 0;
    int32_t v = b & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    static const int32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < least[len] || v > MAX_CODE_POINT || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

static int compare_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static tg_status check_config(const tg_text_config *cfg, const char *name, tg_split split,
                              int64_t max_samples)
{
    if (!cfg || (cfg->tokens != TG_TOKENS_BYTE && cfg->tokens != TG_TOKENS_CHAR))
        return tg_error(TG_ERR_INVALID_ARG, "%s: tokens must be byte or char", name);
    if (cfg->seq_len < 1 || cfg->seq_len > (1 << 20))
        return tg_error(TG_ERR_INVALID_ARG, "%s: sequence length %d is not in 1..%d", name,
                        cfg->seq_len, 1 << 20);
    if (!(cfg->test_fraction >= 0.0 && cfg->test_fraction < 1.0))
        return tg_error(TG_ERR_INVALID_ARG, "%s: test fraction %g is not in [0, 1)", name,
                        cfg->test_fraction);
    if (split != TG_SPLIT_TRAIN && split != TG_SPLIT_TEST)
        return tg_error(TG_ERR_INVALID_ARG, "%s: unknown split %d (train or test)", name,
                        (int)split);
    if (max_samples < 0)
        return tg_error(TG_ERR_INVALID_ARG, "%s: max_samples %lld is negative", name,
                        (long long)max_samples);
    return TG_OK;
}

/* What one pass over the text finds, before any token is stored (issue 46,
 * row 17: the whole stream as int32 tokens, then a copy of each split, took
 * nine bytes of memory per byte of text, twice): the token count and the
 * sorted vocabulary (char tokens; NULL for bytes). */
typedef struct text_scan {
    int64_t n;
    int32_t *vocab; /* owned */
    int v;
} text_scan;

/* A text of one token repeated (a file of NUL bytes, a sparse file's
 * hole) teaches nothing and is no text: refused at once, naming it. */
static tg_status one_token(const char *name, int64_t n, int32_t token, tg_text_tokens kind)
{
    if (token == 0)
        return tg_error(TG_ERR_FORMAT,
                        "%s: all %lld bytes are NUL (0x00): not text (an unwritten or zeroed "
                        "file?); a language model needs text",
                        name, (long long)n);
    return tg_error(TG_ERR_FORMAT,
                    "%s: all %lld %s tokens are the same (%s %d): a language model needs text "
                    "with at least two different tokens",
                    name, (long long)n, tg_text_tokens_name(kind),
                    kind == TG_TOKENS_BYTE ? "byte" : "code point", (int)token);
}

static tg_status scan_text(const uint8_t *s, size_t len, const char *name, tg_text_tokens kind,
                           text_scan *out)
{
    memset(out, 0, sizeof *out);
    uint8_t *seen = tg_calloc(MAX_CODE_POINT / 8 + 1, 1);
    if (!seen)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory for the vocabulary", name);
    int count = 0;
    int32_t last = 0;
    for (size_t i = 0; i < len;) {
        int32_t cp = s[i];
        int k = kind == TG_TOKENS_BYTE ? 1 : utf8_decode(s + i, len - i, &cp);
        if (!k) {
            tg_free(seen);
            return tg_error(TG_ERR_FORMAT,
                            "%s: not UTF-8 text: byte 0x%02x at offset %zu does not start a valid "
                            "sequence (--tokens byte reads any file)",
                            name, s[i], i);
        }
        if (!(seen[cp >> 3] & (1u << (cp & 7)))) {
            seen[cp >> 3] |= (uint8_t)(1u << (cp & 7));
            count++;
            last = cp;
        }
        i += (size_t)k;
        out->n++;
    }
    if (count == 1) {
        tg_free(seen);
        return one_token(name, out->n, last, kind);
    }
    out->v = kind == TG_TOKENS_BYTE ? 256 : count;
    if (kind == TG_TOKENS_CHAR) { /* the code points seen, ascending */
        out->vocab = tg_malloc((size_t)(count ? count : 1) * sizeof *out->vocab);
        int k = 0;
        for (int32_t cp = 0; out->vocab && cp <= MAX_CODE_POINT; cp++)
            if (seen[cp >> 3] & (1u << (cp & 7)))
                out->vocab[k++] = cp;
    }
    tg_free(seen);
    if (kind == TG_TOKENS_CHAR && !out->vocab)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory for the vocabulary", name);
    return TG_OK;
}

/* Tokens [first, first + count) of the text into dst: its bytes, or each
 * code point's index in the vocabulary. The text was scanned: it decodes. */
static void tokens_of(const uint8_t *s, size_t len, const text_scan *sc, int64_t first,
                      int64_t count, int32_t *dst)
{
    if (!sc->vocab) {
        for (int64_t i = 0; i < count; i++)
            dst[i] = s[first + i];
        return;
    }
    int64_t t = 0;
    for (size_t i = 0; i < len && t < first + count; t++) {
        int32_t cp = 0;
        i += (size_t)utf8_decode(s + i, len - i, &cp);
        if (t < first)
            continue;
        const int32_t *hit = bsearch(&cp, sc->vocab, (size_t)sc->v, sizeof *sc->vocab, compare_i32);
        dst[t - first] = (int32_t)(hit - sc->vocab); /* every code point is in vocab */
    }
}

/* Where the test tail starts, in tokens. */
static int64_t split_point(int64_t n, double test_fraction)
{
    return n - (int64_t)((double)n * (test_fraction > 0 ? test_fraction : 0.1));
}

/* One split of a scanned text as a data set: its windows' tokens only. */
static tg_status make_split(const uint8_t *s, size_t len, const char *name,
                            const tg_text_config *cfg, const text_scan *sc, tg_split split,
                            int64_t max_samples, tg_dataset **out)
{
    int64_t n = sc->n, cut = split_point(n, cfg->test_fraction);
    int64_t first = split == TG_SPLIT_TRAIN ? 0 : cut,
            count = split == TG_SPLIT_TRAIN ? cut : n - cut;
    const int S = cfg->seq_len;
    if (count < (int64_t)S + 1 || n - cut < (int64_t)S + 1 || cut < (int64_t)S + 1) {
        double frac = cfg->test_fraction > 0 ? cfg->test_fraction : 0.1;
        return tg_error(TG_ERR_FORMAT,
                        "%s: %lld %s tokens make a training split of %lld and a test split of "
                        "%lld (the last %g%%), but each needs at least seq-len + 1 = %d: give a "
                        "text of at least %lld tokens or a smaller --seq-len",
                        name, (long long)n, tg_text_tokens_name(cfg->tokens), (long long)cut,
                        (long long)(n - cut), frac * 100, S + 1,
                        (long long)((double)(S + 1) / frac) + S + 2);
    }
    int64_t windows = (count - 1) / S;
    if (max_samples > 0 && max_samples < windows)
        windows = max_samples;
    int64_t keep = windows * S + 1;
    tg_dataset *ds = tg_calloc(1, sizeof *ds);
    int32_t *tokens = tg_malloc((size_t)keep * sizeof *tokens);
    int32_t *vocab = sc->vocab ? tg_malloc((size_t)sc->v * sizeof *vocab) : NULL;
    if (!ds || !tokens || (sc->vocab && !vocab)) {
        tg_free(ds);
        tg_free(tokens);
        tg_free(vocab);
        return tg_error(TG_ERR_NOMEM, "%s: out of memory for %lld tokens", name, (long long)keep);
    }
    tokens_of(s, len, sc, first, keep, tokens);
    if (vocab)
        memcpy(vocab, sc->vocab, (size_t)sc->v * sizeof *vocab);
    const char *base = strrchr(name, '/');
    snprintf(ds->name, sizeof ds->name, "%s/%s", base ? base + 1 : name,
             split == TG_SPLIT_TRAIN ? "train" : "test");
    ds->n = windows;
    ds->c = ds->h = 1;
    ds->w = S;
    ds->num_classes = sc->v;
    ds->mean = 0.0f; /* unused: tokens are not normalised */
    ds->std = 1.0f;
    ds->tokens = tokens;
    ds->n_tokens = keep;
    ds->seq_len = S;
    ds->token_kind = cfg->tokens;
    ds->code_points = vocab;
    *out = ds;
    return TG_OK;
}

/* Both splits of one text, from one scan (either out may be NULL: not wanted). */
static tg_status splits_from_memory(const void *text, size_t len, const char *name,
                                    const tg_text_config *cfg, int64_t train_max, int64_t test_max,
                                    tg_dataset **train, tg_dataset **test)
{
    if (len == 0)
        return tg_error(TG_ERR_FORMAT, "%s: the file is empty: a language model needs text", name);
    if ((int64_t)len >= MAX_TEXT_BYTES)
        return tg_error(TG_ERR_UNSUPPORTED, "%s: %zu bytes; text files up to 2 GiB are read", name,
                        len);
    text_scan sc;
    TG_TRY(scan_text(text, len, name, cfg->tokens, &sc));
    tg_status st = TG_OK;
    if (train)
        st = make_split(text, len, name, cfg, &sc, TG_SPLIT_TRAIN, train_max, train);
    if (st == TG_OK && test &&
        (st = make_split(text, len, name, cfg, &sc, TG_SPLIT_TEST, test_max, test)) != TG_OK &&
        train) {
        tg_dataset_destroy(*train);
        *train = NULL;
    }
    tg_free(sc.vocab);
    return st;
}

tg_status tg_dataset_text_from_memory(const void *text, size_t len, const char *name,
                                      const tg_text_config *cfg, tg_split split,
                                      int64_t max_samples, tg_dataset **out)
{
    *out = NULL;
    if (!name)
        name = "text";
    TG_TRY(check_config(cfg, name, split, max_samples));
    return splits_from_memory(text, len, name, cfg, max_samples, max_samples,
                              split == TG_SPLIT_TRAIN ? out : NULL,
                              split == TG_SPLIT_TEST ? out : NULL);
}

/* The file's bytes (*buf, owned), read once: sized by fstat, so a file
 * is not copied through doubling buffers. */
static tg_status read_text_file(const char *path, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    FILE *f;
    tg_status st = tg_fopen_regular(path, &f);
    if (st != TG_OK)
        return tg_error_prefix(st, "text data set");
    struct stat sb;
    size_t cap = fstat(fileno(f), &sb) == 0 && sb.st_size > 0 ? (size_t)sb.st_size + 1 : 1 << 16;
    uint8_t *b = NULL;
    size_t n = 0;
    for (;;) {
        if (n == cap || !b) {
            size_t ncap = b ? cap * 2 : cap;
            uint8_t *nb = (int64_t)ncap <= MAX_TEXT_BYTES + 1 ? tg_realloc(b, ncap) : NULL;
            if (!nb) {
                tg_free(b);
                fclose(f);
                return tg_error((int64_t)ncap > MAX_TEXT_BYTES ? TG_ERR_UNSUPPORTED : TG_ERR_NOMEM,
                                "%s: too large to read (text files up to 2 GiB are read)", path);
            }
            b = nb;
            cap = ncap;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int failed = ferror(f);
    int err = errno;
    fclose(f);
    if (failed) {
        tg_free(b);
        return tg_error(TG_ERR_IO, "%s: read failed: %s", path, strerror(err));
    }
    *buf = b;
    *len = n;
    return TG_OK;
}

static tg_status open_text(const char *path, const tg_text_config *cfg, int64_t train_max,
                           int64_t test_max, tg_dataset **train, tg_dataset **test)
{
    if (!path || !*path)
        return tg_error(TG_ERR_INVALID_ARG, "text data set: no file given (text:FILE, for example "
                                            "text:/usr/share/common-licenses/GPL-3)");
    uint8_t *buf = NULL;
    size_t len = 0;
    TG_TRY(read_text_file(path, &buf, &len));
    tg_status st = splits_from_memory(buf, len, path, cfg, train_max, test_max, train, test);
    tg_free(buf);
    return st;
}

tg_status tg_dataset_open_text(const char *path, const tg_text_config *cfg, tg_split split,
                               int64_t max_samples, tg_dataset **out)
{
    *out = NULL;
    TG_TRY(check_config(cfg, path ? path : "text", split, max_samples));
    return open_text(path, cfg, max_samples, max_samples, split == TG_SPLIT_TRAIN ? out : NULL,
                     split == TG_SPLIT_TEST ? out : NULL);
}

tg_status tg_dataset_open_text_splits(const char *path, const tg_text_config *cfg,
                                      int64_t train_max, int64_t test_max, tg_dataset **train,
                                      tg_dataset **test)
{
    *train = *test = NULL;
    const char *name = path ? path : "text";
    TG_TRY(check_config(cfg, name, TG_SPLIT_TRAIN, train_max));
    TG_TRY(check_config(cfg, name, TG_SPLIT_TEST, test_max));
    return open_text(path, cfg, train_max, test_max, train, test);
}

int tg_dataset_vocab(const tg_dataset *ds, tg_text_tokens *kind, const int32_t **code_points)
{
    if (!ds || !ds->tokens)
        return -1;
    if (kind)
        *kind = ds->token_kind;
    if (code_points)
        *code_points = ds->code_points;
    return ds->num_classes;
}

int64_t tg_dataset_tokens(const tg_dataset *ds, const int32_t **tokens)
{
    if (tokens)
        *tokens = ds ? ds->tokens : NULL;
    return ds && ds->tokens ? ds->n_tokens : 0;
}

int tg_dataset_token_utf8(const tg_dataset *ds, int32_t token, char *buf)
{
    buf[0] = '\0';
    if (!ds || !ds->tokens || token < 0 || token >= ds->num_classes)
        return 0;
    if (!ds->code_points) {
        buf[0] = (char)token;
        buf[1] = '\0';
        return 1;
    }
    uint32_t c = (uint32_t)ds->code_points[token];
    int n = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    static const uint8_t lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
    for (int i = n - 1; i > 0; i--, c >>= 6)
        buf[i] = (char)(0x80 | (c & 0x3F));
    buf[0] = (char)(lead[n] | c);
    buf[n] = '\0';
    return n;
}
