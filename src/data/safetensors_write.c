/* data/safetensors_write.c - safetensors writer, atomic on disk.
 *
 * Inputs are checked completely before any file is touched. The file is
 * then written through tg_atomic_file (core/atomic_file.h): a reader of
 * `path` sees either the old file or the complete new one, never a torn
 * write - even if the process dies or the disk fills mid-write.
 */
#include "data/safetensors.h"

#include "core/alloc.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct plan {
    size_t *order;    /* tensors in file order */
    uint64_t *nbytes; /* per input tensor */
    char *header;     /* JSON padded with spaces to a multiple of 8 */
    size_t hlen;
    uint64_t data_len;
} plan;

static void plan_free(plan *p)
{
    tg_free(p->order);
    tg_free(p->nbytes);
    tg_free(p->header);
    memset(p, 0, sizeof *p);
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* 1 if some string in strs[0..n) (stride `stride` bytes apart, as fields of
 * structs) repeats; sets *dup to it. -1 when out of memory. */
static int has_duplicate(const char *const *first, size_t stride, size_t n, const char **dup)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    const char **slots = tg_calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    int found = 0;
    for (size_t i = 0; i < n && !found; i++) {
        const char *s = *(const char *const *)((const char *)first + i * stride);
        size_t h = (size_t)hash_str(s) & (cap - 1);
        while (slots[h] && !found) {
            if (strcmp(slots[h], s) == 0) {
                found = 1;
                *dup = s;
            }
            h = (h + 1) & (cap - 1);
        }
        slots[h] = s;
    }
    tg_free(slots);
    return found;
}

static tg_status check_text(const char *file, const char *what, const char *s)
{
    if (!s)
        return tg_error(TG_ERR_INVALID_ARG, "%s: %s is NULL", file, what);
    if (!tg_json_utf8_valid(s, strlen(s)))
        return tg_error(TG_ERR_INVALID_ARG, "%s: %s '%s' is not valid UTF-8", file, what, s);
    return TG_OK;
}

/* Check every input and work out sizes and the file order. */
static tg_status make_plan(const char *file, const tg_st_tensor *t, size_t n,
                           const tg_st_meta *meta, size_t n_meta, plan *p)
{
    memset(p, 0, sizeof *p);
    if ((n && !t) || (n_meta && !meta))
        return tg_error(TG_ERR_INVALID_ARG, "%s: tensor or metadata list is NULL", file);
    for (size_t i = 0; i < n_meta; i++) {
        TG_TRY(check_text(file, "metadata key", meta[i].key));
        TG_TRY(check_text(file, "metadata value", meta[i].value));
    }
    p->nbytes = tg_malloc((n ? n : 1) * sizeof *p->nbytes);
    p->order = tg_malloc((n ? n : 1) * sizeof *p->order);
    if (!p->nbytes || !p->order) {
        plan_free(p);
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", file);
    }
    tg_status s = TG_OK;
    uint64_t total = 0;
    for (size_t i = 0; i < n && s == TG_OK; i++) {
        const tg_st_tensor *x = &t[i];
        if ((s = check_text(file, "tensor name", x->name)) != TG_OK)
            break;
        const char *name = x->name;
        char sb[160];
        if (strcmp(name, "__metadata__") == 0) {
            s = tg_error(TG_ERR_INVALID_ARG, "%s: '__metadata__' cannot name a tensor", file);
        } else if ((unsigned)x->dtype >= TG_ST_DTYPE_COUNT) {
            s = tg_error(TG_ERR_DTYPE, "%s: tensor '%s': invalid dtype %d", file, name,
                         (int)x->dtype);
        } else if (x->ndim < 0 || x->ndim > TG_ST_MAX_DIMS) {
            s = tg_error(TG_ERR_SHAPE, "%s: tensor '%s': %d dimensions (0..%d allowed)", file, name,
                         x->ndim, TG_ST_MAX_DIMS);
        } else {
            uint64_t bytes = tg_st_dtype_size(x->dtype);
            int zero = 0, over = 0;
            for (int d = 0; d < x->ndim; d++) {
                if (x->shape[d] < 0) {
                    s = tg_error(TG_ERR_SHAPE, "%s: tensor '%s': negative dimension in shape %s",
                                 file, name, tg_st_shape_str(x->ndim, x->shape, sb, sizeof sb));
                    break;
                }
                zero |= x->shape[d] == 0;
                if (x->shape[d] && bytes > UINT64_MAX / (uint64_t)x->shape[d])
                    over = 1;
                else
                    bytes *= (uint64_t)x->shape[d];
            }
            if (zero)
                bytes = 0, over = 0;
            if (s == TG_OK &&
                (over || bytes > (uint64_t)SIZE_MAX / 2 || total > UINT64_MAX / 4 - bytes))
                s = tg_error(TG_ERR_SHAPE, "%s: tensor '%s': shape %s is too large", file, name,
                             tg_st_shape_str(x->ndim, x->shape, sb, sizeof sb));
            if (s == TG_OK && bytes && !x->data)
                s = tg_error(TG_ERR_INVALID_ARG, "%s: tensor '%s' has no data", file, name);
            p->nbytes[i] = bytes;
            total += bytes;
        }
    }
    const char *dup = NULL;
    int d;
    if (s == TG_OK && n && (d = has_duplicate(&t[0].name, sizeof *t, n, &dup)) != 0)
        s = d < 0 ? tg_error(TG_ERR_NOMEM, "%s: out of memory", file)
                  : tg_error(TG_ERR_INVALID_ARG, "%s: two tensors are named '%s'", file, dup);
    if (s == TG_OK && n_meta && (d = has_duplicate(&meta[0].key, sizeof *meta, n_meta, &dup)) != 0)
        s = d < 0 ? tg_error(TG_ERR_NOMEM, "%s: out of memory", file)
                  : tg_error(TG_ERR_INVALID_ARG, "%s: metadata key '%s' appears twice", file, dup);
    if (s != TG_OK) {
        plan_free(p);
        return s;
    }
    /* Largest elements first keeps every offset a multiple of its element
     * size (sizes are powers of two); the given order is kept otherwise. */
    size_t k = 0;
    for (size_t esize = 8; esize >= 1; esize /= 2)
        for (size_t i = 0; i < n; i++)
            if (tg_st_dtype_size(t[i].dtype) == esize)
                p->order[k++] = i;
    p->data_len = total;
    return TG_OK;
}

static tg_status build_header(const char *file, const tg_st_tensor *t, size_t n,
                              const tg_st_meta *meta, size_t n_meta, plan *p)
{
    tg_json_writer w;
    tg_json_writer_init(&w);
    tg_json_begin_object(&w);
    if (n_meta) {
        tg_json_key(&w, "__metadata__");
        tg_json_begin_object(&w);
        for (size_t i = 0; i < n_meta; i++) {
            tg_json_key(&w, meta[i].key);
            tg_json_string(&w, meta[i].value);
        }
        tg_json_end_object(&w);
    }
    uint64_t at = 0;
    for (size_t k = 0; k < n; k++) {
        const tg_st_tensor *x = &t[p->order[k]];
        tg_json_key(&w, x->name);
        tg_json_begin_object(&w);
        tg_json_key(&w, "dtype");
        tg_json_string(&w, tg_st_dtype_name(x->dtype));
        tg_json_key(&w, "shape");
        tg_json_begin_array(&w);
        for (int d = 0; d < x->ndim; d++)
            tg_json_int(&w, x->shape[d]);
        tg_json_end_array(&w);
        tg_json_key(&w, "data_offsets");
        tg_json_begin_array(&w);
        tg_json_uint(&w, at);
        at += p->nbytes[p->order[k]];
        tg_json_uint(&w, at);
        tg_json_end_array(&w);
        tg_json_end_object(&w);
    }
    tg_json_end_object(&w);
    char *out = NULL;
    size_t len = 0;
    tg_status s = tg_json_writer_finish(&w, &out, &len);
    tg_json_writer_free(&w);
    if (s != TG_OK)
        return tg_error_prefix(s, "%s", file);
    /* Pad with spaces (JSON whitespace) so the data section starts 8-aligned. */
    size_t pad = (8 - len % 8) % 8;
    if (pad) {
        char *padded = tg_realloc(out, len + pad + 1);
        if (!padded) {
            tg_free(out);
            return tg_error(TG_ERR_NOMEM, "%s: out of memory", file);
        }
        memset(padded + len, ' ', pad);
        len += pad;
        padded[len] = '\0';
        out = padded;
    }
    if (len > TG_ST_MAX_HEADER) {
        tg_free(out);
        return tg_error(TG_ERR_INVALID_ARG, "%s: header of %zu bytes is over the %u-byte limit",
                        file, len, TG_ST_MAX_HEADER);
    }
    p->header = out;
    p->hlen = len;
    return TG_OK;
}

static void put_le64(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

tg_status tg_safetensors_encode(const tg_st_tensor *tensors, size_t n, const tg_st_meta *meta,
                                size_t n_meta, void **buf, size_t *len)
{
    const char *file = "safetensors";
    *buf = NULL;
    *len = 0;
    plan p;
    TG_TRY(make_plan(file, tensors, n, meta, n_meta, &p));
    tg_status s = build_header(file, tensors, n, meta, n_meta, &p);
    if (s == TG_OK && p.data_len > SIZE_MAX / 2 - p.hlen - 8)
        s = tg_error(TG_ERR_NOMEM, "%s: too large for memory", file);
    unsigned char *out = NULL;
    if (s == TG_OK && !(out = tg_malloc(8 + p.hlen + (size_t)p.data_len)))
        s = tg_error(TG_ERR_NOMEM, "%s: out of memory", file);
    if (s != TG_OK) {
        plan_free(&p);
        return s;
    }
    put_le64(out, p.hlen);
    memcpy(out + 8, p.header, p.hlen);
    size_t at = 8 + p.hlen;
    for (size_t k = 0; k < n; k++) {
        size_t i = p.order[k];
        if (p.nbytes[i])
            memcpy(out + at, tensors[i].data, (size_t)p.nbytes[i]);
        at += (size_t)p.nbytes[i];
    }
    *buf = out;
    *len = at;
    plan_free(&p);
    return TG_OK;
}

/* ---- the file ---------------------------------------------------------------------- */

/* A failed write (a full disk) names the file asked for and what is left
 * of it: the temporary is removed (by the caller's abort) and the previous
 * file, if there was one, is kept as it was. */
static tg_status put(tg_atomic_file *af, const void *src, size_t n)
{
    if (!n || fwrite(src, 1, n, af->f) == n)
        return TG_OK;
    int e = errno ? errno : EIO;
    bool kept = access(af->path, F_OK) == 0;
    return tg_error(
        TG_ERR_IO, "cannot write '%s': %s (writing its temporary '%s', now removed); %s", af->path,
        strerror(e), af->tmp,
        kept ? "the previous file there is kept, unchanged" : "no file was written there");
}

tg_status tg_safetensors_write(const char *path, const tg_st_tensor *tensors, size_t n,
                               const tg_st_meta *meta, size_t n_meta)
{
    if (!path || !*path)
        return tg_error(TG_ERR_INVALID_ARG, "no safetensors file name given");
    plan p;
    TG_TRY(make_plan(path, tensors, n, meta, n_meta, &p));
    tg_atomic_file af;
    tg_status s = tg_atomic_file_open(path, &af);
    if (s != TG_OK) {
        plan_free(&p);
        return s;
    }
    /* From here on every failure removes the temporary file. */
    s = build_header(path, tensors, n, meta, n_meta, &p);
    unsigned char prefix[8];
    put_le64(prefix, p.hlen);
    if (s == TG_OK)
        s = put(&af, prefix, 8);
    if (s == TG_OK)
        s = put(&af, p.header, p.hlen);
    for (size_t k = 0; k < n && s == TG_OK; k++) {
        size_t i = p.order[k];
        if (p.nbytes[i])
            s = put(&af, tensors[i].data, (size_t)p.nbytes[i]);
    }
    if (s == TG_OK)
        s = tg_atomic_file_commit(&af);
    else
        tg_atomic_file_abort(&af);
    plan_free(&p);
    return s;
}
