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

/* The file's code points into cps (room for len), their count; -1 and the
 * message (naming the byte offset) when the text is not UTF-8. */
static int64_t decode_all(const uint8_t *s, size_t len, const char *name, int32_t *cps)
{
    int64_t n = 0;
    for (size_t i = 0; i < len;) {
        int k = utf8_decode(s + i, len - i, &cps[n]);
        if (!k) {
            tg_error(TG_ERR_FORMAT,
                     "%s: not UTF-8 text: byte 0x%02x at offset %zu does not start a valid "
                     "sequence (--tokens byte reads any file)",
                     name, s[i], i);
            return -1;
        }
        i += (size_t)k;
        n++;
    }
    return n;
}

static int compare_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The sorted distinct code points of cps[0..n) into *vocab (owned by the
 * caller); their count, or -1 when out of memory. A bitmap of the code
 * space finds them in one pass; sorting the few found orders them. */
static int distinct_code_points(const int32_t *cps, int64_t n, int32_t **vocab)
{
    uint8_t *seen = tg_calloc(MAX_CODE_POINT / 8 + 1, 1);
    int32_t *found = tg_malloc((size_t)(n ? n : 1) * sizeof *found);
    int count = 0;
    if (seen && found)
        for (int64_t i = 0; i < n; i++)
            if (!(seen[cps[i] >> 3] & (1u << (cps[i] & 7)))) {
                seen[cps[i] >> 3] |= (uint8_t)(1u << (cps[i] & 7));
                found[count++] = cps[i];
            }
    tg_free(seen);
    *vocab = seen && found ? tg_realloc(found, (size_t)(count ? count : 1) * sizeof *found) : NULL;
    if (!*vocab) {
        tg_free(found);
        return -1;
    }
    qsort(*vocab, (size_t)count, sizeof **vocab, compare_i32);
    return count;
}

/* Code points to token ids, in place: each one's index in vocab. */
static void code_points_to_tokens(int32_t *cps, int64_t n, const int32_t *vocab, int v)
{
    for (int64_t i = 0; i < n; i++) {
        const int32_t *hit = bsearch(&cps[i], vocab, (size_t)v, sizeof *vocab, compare_i32);
        cps[i] = (int32_t)(hit - vocab); /* every code point is in vocab */
    }
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

/* The token stream of the whole text (*tokens, owned; the count) and for
 * char tokens the vocabulary. */
static tg_status tokenize(const uint8_t *s, size_t len, const char *name, tg_text_tokens kind,
                          int32_t **tokens, int64_t *n, int32_t **vocab, int *v)
{
    *tokens = tg_malloc((len ? len : 1) * sizeof **tokens);
    if (!*tokens)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory for %zu tokens", name, len);
    *vocab = NULL;
    if (kind == TG_TOKENS_BYTE) {
        for (size_t i = 0; i < len; i++)
            (*tokens)[i] = s[i];
        *n = (int64_t)len;
        *v = 256;
        return TG_OK;
    }
    *n = decode_all(s, len, name, *tokens);
    tg_status st = *n < 0 ? TG_ERR_FORMAT /* the message is set */ : TG_OK;
    if (st == TG_OK && (*v = distinct_code_points(*tokens, *n, vocab)) < 0)
        st = tg_error(TG_ERR_NOMEM, "%s: out of memory for the vocabulary", name);
    if (st != TG_OK) {
        tg_free(*tokens);
        *tokens = NULL;
        return st;
    }
    code_points_to_tokens(*tokens, *n, *vocab, *v);
    return TG_OK;
}

/* Where the test tail starts, in tokens. */
static int64_t split_point(int64_t n, double test_fraction)
{
    return n - (int64_t)((double)n * (test_fraction > 0 ? test_fraction : 0.1));
}

tg_status tg_dataset_text_from_memory(const void *text, size_t len, const char *name,
                                      const tg_text_config *cfg, tg_split split,
                                      int64_t max_samples, tg_dataset **out)
{
    *out = NULL;
    if (!name)
        name = "text";
    TG_TRY(check_config(cfg, name, split, max_samples));
    if (len == 0)
        return tg_error(TG_ERR_FORMAT, "%s: the file is empty: a language model needs text", name);
    if ((int64_t)len >= MAX_TEXT_BYTES)
        return tg_error(TG_ERR_UNSUPPORTED, "%s: %zu bytes; text files up to 2 GiB are read", name,
                        len);
    int32_t *all = NULL, *vocab = NULL;
    int64_t n = 0;
    int v = 0;
    TG_TRY(tokenize(text, len, name, cfg->tokens, &all, &n, &vocab, &v));
    int64_t cut = split_point(n, cfg->test_fraction);
    int64_t first = split == TG_SPLIT_TRAIN ? 0 : cut,
            count = split == TG_SPLIT_TRAIN ? cut : n - cut;
    const int S = cfg->seq_len;
    if (count < (int64_t)S + 1 || n - cut < (int64_t)S + 1 || cut < (int64_t)S + 1) {
        double frac = cfg->test_fraction > 0 ? cfg->test_fraction : 0.1;
        tg_free(all);
        tg_free(vocab);
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
    if (!ds || !tokens) {
        tg_free(ds);
        tg_free(tokens);
        tg_free(all);
        tg_free(vocab);
        return tg_error(TG_ERR_NOMEM, "%s: out of memory for %lld tokens", name, (long long)keep);
    }
    memcpy(tokens, all + first, (size_t)keep * sizeof *tokens);
    tg_free(all);
    const char *base = strrchr(name, '/');
    snprintf(ds->name, sizeof ds->name, "%s/%s", base ? base + 1 : name,
             split == TG_SPLIT_TRAIN ? "train" : "test");
    ds->n = windows;
    ds->c = ds->h = 1;
    ds->w = S;
    ds->num_classes = v;
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

tg_status tg_dataset_open_text(const char *path, const tg_text_config *cfg, tg_split split,
                               int64_t max_samples, tg_dataset **out)
{
    *out = NULL;
    if (!path || !*path)
        return tg_error(TG_ERR_INVALID_ARG, "text data set: no file given (text:FILE, for example "
                                            "text:/usr/share/common-licenses/GPL-3)");
    TG_TRY(check_config(cfg, path, split, max_samples));
    FILE *f;
    tg_status st = tg_fopen_regular(path, &f);
    if (st != TG_OK)
        return tg_error_prefix(st, "text data set");
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 1 << 16;
            uint8_t *nb = (int64_t)ncap <= MAX_TEXT_BYTES ? tg_realloc(buf, ncap) : NULL;
            if (!nb) {
                tg_free(buf);
                fclose(f);
                return tg_error((int64_t)ncap > MAX_TEXT_BYTES ? TG_ERR_UNSUPPORTED : TG_ERR_NOMEM,
                                "%s: too large to read (text files up to 2 GiB are read)", path);
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    int failed = ferror(f);
    int err = errno;
    fclose(f);
    if (failed) {
        tg_free(buf);
        return tg_error(TG_ERR_IO, "%s: read failed: %s", path, strerror(err));
    }
    st = tg_dataset_text_from_memory(buf, len, path, cfg, split, max_samples, out);
    tg_free(buf);
    return st;
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
