/* data/safetensors.c - the safetensors reader and its dtype table.
 *
 * Reading is two steps: the header is parsed and validated against the size
 * of the data section (validate_header), and only then are the data bytes
 * read or copied into one 64-byte aligned block that the tensors point into.
 * Every offset is checked with unsigned arithmetic that cannot overflow
 * before it is used, so a hostile file cannot make the reader touch memory
 * outside that block.
 */
#include "data/safetensors.h"

#include "core/alloc.h"
#include "core/atomic_file.h"
#include "core/arena.h"
#include "core/error.h"
#include "core/json.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct tg_safetensors {
    char *name;
    tg_arena *arena;       /* JSON tree, tensor table, hash */
    tg_st_tensor *tensors; /* sorted by data offset */
    uint64_t *begin;       /* data offset of tensors[i] */
    size_t count;
    size_t *slots; /* hash of names: index + 1, 0 = empty */
    size_t slot_mask;
    tg_st_meta *meta;
    size_t n_meta;
    void *data; /* the data section, owned */
    size_t data_len;
};

/* ---- dtypes ------------------------------------------------------------------- */

const char *tg_st_dtype_name(tg_st_dtype t)
{
    static const char *const names[] = {
#define TG_ST_NAME(code, name, size) name,
        TG_ST_DTYPE_LIST(TG_ST_NAME)
#undef TG_ST_NAME
    };
    return (unsigned)t < TG_ST_DTYPE_COUNT ? names[t] : "?";
}

size_t tg_st_dtype_size(tg_st_dtype t)
{
    static const size_t sizes[] = {
#define TG_ST_SIZE(code, name, size) size,
        TG_ST_DTYPE_LIST(TG_ST_SIZE)
#undef TG_ST_SIZE
    };
    return (unsigned)t < TG_ST_DTYPE_COUNT ? sizes[t] : 0;
}

int tg_st_dtype_parse(const char *name)
{
    if (!name)
        return -1;
    for (int t = 0; t < TG_ST_DTYPE_COUNT; t++)
        if (strcmp(name, tg_st_dtype_name((tg_st_dtype)t)) == 0)
            return t;
    return -1;
}

tg_st_dtype tg_st_dtype_from_tg(tg_dtype t)
{
    switch (t) {
    case TG_F16:
        return TG_ST_F16;
    case TG_BF16:
        return TG_ST_BF16;
    case TG_U8:
        return TG_ST_U8;
    case TG_I32:
        return TG_ST_I32;
    case TG_F32:
    default:
        return TG_ST_F32;
    }
}

int tg_st_dtype_to_tg(tg_st_dtype t)
{
    switch (t) {
    case TG_ST_F32:
        return TG_F32;
    case TG_ST_F16:
        return TG_F16;
    case TG_ST_BF16:
        return TG_BF16;
    case TG_ST_U8:
        return TG_U8;
    case TG_ST_I32:
        return TG_I32;
    default:
        return -1;
    }
}

/* Messages spell dtypes in lower case ("f32"), as the rest of tilegraph does. */
static const char *lower_name(tg_st_dtype t, char buf[16])
{
    const char *n = tg_st_dtype_name(t);
    size_t i = 0;
    for (; n[i] && i < 15; i++)
        buf[i] = (char)tolower((unsigned char)n[i]);
    buf[i] = '\0';
    return buf;
}

char *tg_st_shape_str(int ndim, const int64_t *shape, char *buf, size_t cap)
{
    size_t k = 0;
    if (cap == 0)
        return buf;
    buf[0] = '\0';
    k += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
    return buf;
}

/* ---- header validation ---------------------------------------------------------- */

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* A non-negative JSON integer, or -1. */
static int64_t non_negative_int(const tg_json *v)
{
    return v && v->type == TG_JSON_NUMBER && v->is_int && v->integer >= 0 ? v->integer : -1;
}

static tg_status parse_metadata(tg_safetensors *st, const tg_json *m)
{
    const char *file = st->name;
    if (m->type != TG_JSON_OBJECT)
        return tg_error(TG_ERR_FORMAT, "%s: __metadata__ must be an object of strings, found %s",
                        file, tg_json_type_name(m->type));
    st->meta = tg_arena_alloc(st->arena, (m->count ? m->count : 1) * sizeof *st->meta);
    if (!st->meta)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", file);
    for (size_t i = 0; i < m->count; i++) {
        const tg_json *v = m->items[i];
        if (v->type != TG_JSON_STRING)
            return tg_error(TG_ERR_FORMAT,
                            "%s: __metadata__ value for key '%s' must be a string, found %s", file,
                            m->keys[i], tg_json_type_name(v->type));
        if (strlen(m->keys[i]) != m->key_lens[i] || strlen(v->string) != v->len)
            return tg_error(TG_ERR_FORMAT,
                            "%s: __metadata__ key '%s' or its value contains a NUL character", file,
                            m->keys[i]);
        st->meta[i] = (tg_st_meta){m->keys[i], v->string};
    }
    st->n_meta = m->count;
    return TG_OK;
}

/* Fill t (and *begin) from one header entry, checking it on its own. */
static tg_status parse_entry(const char *file, const char *name, const tg_json *e,
                             uint64_t data_len, tg_st_tensor *t, uint64_t *begin)
{
    char lb[16];
    if (e->type != TG_JSON_OBJECT)
        return tg_error(TG_ERR_FORMAT, "%s: tensor '%s': entry must be an object, found %s", file,
                        name, tg_json_type_name(e->type));
    for (size_t i = 0; i < e->count; i++) {
        const char *k = e->keys[i];
        if (strcmp(k, "dtype") != 0 && strcmp(k, "shape") != 0 && strcmp(k, "data_offsets") != 0)
            return tg_error(TG_ERR_FORMAT, "%s: tensor '%s': unknown field '%s'", file, name, k);
    }
    const tg_json *dt = tg_json_get(e, "dtype"), *sh = tg_json_get(e, "shape"),
                  *off = tg_json_get(e, "data_offsets");
    if (!dt || !sh || !off)
        return tg_error(TG_ERR_FORMAT, "%s: tensor '%s': missing field '%s'", file, name,
                        !dt   ? "dtype"
                        : !sh ? "shape"
                              : "data_offsets");
    if (dt->type != TG_JSON_STRING)
        return tg_error(TG_ERR_FORMAT, "%s: tensor '%s': dtype must be a string, found %s", file,
                        name, tg_json_type_name(dt->type));
    int dtype = tg_st_dtype_parse(dt->string);
    if (dtype < 0)
        return tg_error(TG_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%s'", file, name,
                        dt->string);
    if (sh->type != TG_JSON_ARRAY)
        return tg_error(TG_ERR_FORMAT, "%s: tensor '%s': shape must be an array, found %s", file,
                        name, tg_json_type_name(sh->type));
    if (sh->count > TG_ST_MAX_DIMS)
        return tg_error(TG_ERR_UNSUPPORTED,
                        "%s: tensor '%s': shape has %zu dimensions, at most %d are supported", file,
                        name, sh->count, TG_ST_MAX_DIMS);
    t->name = name;
    t->dtype = (tg_st_dtype)dtype;
    t->ndim = (int)sh->count;
    uint64_t numel = 1;
    int overflow = 0;
    for (size_t i = 0; i < sh->count; i++) {
        int64_t d = non_negative_int(sh->items[i]);
        if (d < 0)
            return tg_error(TG_ERR_FORMAT,
                            "%s: tensor '%s': shape[%zu] must be a non-negative integer", file,
                            name, i);
        t->shape[i] = d;
        if (d && numel > UINT64_MAX / (uint64_t)d)
            overflow = 1;
        else
            numel *= (uint64_t)d;
    }
    for (int i = t->ndim; i < TG_ST_MAX_DIMS; i++)
        t->shape[i] = 1;
    /* A zero dimension makes the tensor empty however large the others are. */
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] == 0)
            overflow = 0, numel = 0;
    size_t esize = tg_st_dtype_size(t->dtype);
    char sb[160];
    if (overflow || numel > UINT64_MAX / esize)
        return tg_error(TG_ERR_FORMAT, "%s: tensor '%s': shape %s %s is too large", file, name,
                        tg_st_shape_str(t->ndim, t->shape, sb, sizeof sb),
                        lower_name(t->dtype, lb));
    uint64_t need = numel * esize;
    if (off->type != TG_JSON_ARRAY || off->count != 2 || non_negative_int(off->items[0]) < 0 ||
        non_negative_int(off->items[1]) < 0)
        return tg_error(
            TG_ERR_FORMAT,
            "%s: tensor '%s': data_offsets must be [begin, end] with non-negative integers", file,
            name);
    uint64_t b = (uint64_t)off->items[0]->integer, e2 = (uint64_t)off->items[1]->integer;
    if (e2 < b)
        return tg_error(TG_ERR_FORMAT,
                        "%s: tensor '%s': data_offsets [%llu, %llu) end before they begin", file,
                        name, (unsigned long long)b, (unsigned long long)e2);
    if (e2 > data_len)
        return tg_error(
            TG_ERR_FORMAT,
            "%s: tensor '%s': data_offsets [%llu, %llu) run past the end of the %llu-byte "
            "data section",
            file, name, (unsigned long long)b, (unsigned long long)e2,
            (unsigned long long)data_len);
    if (e2 - b != need)
        return tg_error(
            TG_ERR_FORMAT,
            "%s: tensor '%s': data_offsets [%llu, %llu) span %llu bytes but shape %s %s "
            "needs %llu",
            file, name, (unsigned long long)b, (unsigned long long)e2, (unsigned long long)(e2 - b),
            tg_st_shape_str(t->ndim, t->shape, sb, sizeof sb), lower_name(t->dtype, lb),
            (unsigned long long)need);
    t->nbytes = (size_t)need;
    *begin = b;
    return TG_OK;
}

typedef struct order_item {
    uint64_t begin, end;
    size_t index;
} order_item;

static int cmp_order(const void *a, const void *b)
{
    const order_item *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return x->index < y->index ? -1 : (x->index > y->index);
}

/* Parse `header` (hlen bytes) and check it describes a data section of
 * data_len bytes exactly. Fills st's tables (data pointers are set later). */
static tg_status validate_header(tg_safetensors *st, const char *header, size_t hlen,
                                 uint64_t data_len)
{
    const char *file = st->name;
    if (hlen == 0 || header[0] != '{')
        return tg_error(TG_ERR_FORMAT, "%s: header does not start with '{'", file);
    char *source = tg_arena_printf(st->arena, "%s header", file);
    if (!source)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", file);
    tg_json *root = NULL;
    tg_json_limits lim = {64, TG_ST_MAX_HEADER};
    TG_TRY(tg_json_parse_ex(st->arena, header, hlen, source, lim, &root));
    if (root->type != TG_JSON_OBJECT)
        return tg_error(TG_ERR_FORMAT, "%s: header must be a JSON object", file);
    size_t n = root->count;
    st->tensors = tg_arena_alloc(st->arena, (n ? n : 1) * sizeof *st->tensors);
    st->begin = tg_arena_alloc(st->arena, (n ? n : 1) * sizeof *st->begin);
    tg_st_tensor *tmp = tg_malloc((n ? n : 1) * sizeof *tmp);
    order_item *ord = tg_malloc((n ? n : 1) * sizeof *ord);
    tg_status s = TG_OK;
    if (!st->tensors || !st->begin || !tmp || !ord) {
        s = tg_error(TG_ERR_NOMEM, "%s: out of memory for %zu header entries", file, n);
        goto done;
    }
    size_t count = 0;
    for (size_t i = 0; i < n && s == TG_OK; i++) {
        const char *key = root->keys[i];
        if (strcmp(key, "__metadata__") == 0) {
            s = parse_metadata(st, root->items[i]);
            continue;
        }
        if (strlen(key) != root->key_lens[i]) {
            s = tg_error(TG_ERR_FORMAT, "%s: a tensor name contains a NUL character", file);
            break;
        }
        uint64_t b = 0;
        s = parse_entry(file, key, root->items[i], data_len, &tmp[count], &b);
        if (s == TG_OK) {
            ord[count] = (order_item){b, b + tmp[count].nbytes, count};
            count++;
        }
    }
    if (s != TG_OK)
        goto done;
    /* The tensors must tile the data section: sorted by offset, each one
     * starts where the previous ends, the last ends at the section's end. */
    qsort(ord, count, sizeof *ord, cmp_order);
    uint64_t at = 0;
    for (size_t i = 0; i < count; i++) {
        const order_item *o = &ord[i];
        if (o->begin < at) {
            const order_item *p = &ord[i - 1];
            s = tg_error(
                TG_ERR_FORMAT, "%s: tensor '%s' [%llu, %llu) overlaps tensor '%s' [%llu, %llu)",
                file, tmp[o->index].name, (unsigned long long)o->begin, (unsigned long long)o->end,
                tmp[p->index].name, (unsigned long long)p->begin, (unsigned long long)p->end);
            goto done;
        }
        if (o->begin > at) {
            s = tg_error(TG_ERR_FORMAT,
                         "%s: bytes [%llu, %llu) of the data section belong to no tensor (before "
                         "tensor '%s')",
                         file, (unsigned long long)at, (unsigned long long)o->begin,
                         tmp[o->index].name);
            goto done;
        }
        at = o->end;
        st->tensors[i] = tmp[o->index];
        st->begin[i] = o->begin;
    }
    if (at != data_len) {
        s = tg_error(
            TG_ERR_FORMAT,
            "%s: the data section has %llu bytes but the tensors cover only %llu (trailing data)",
            file, (unsigned long long)data_len, (unsigned long long)at);
        goto done;
    }
    st->count = count;
    /* Name lookup table (names are unique: the JSON reader rejects duplicate keys). */
    size_t cap = 16;
    while (cap < 2 * count)
        cap *= 2;
    st->slots = tg_arena_alloc(st->arena, cap * sizeof *st->slots);
    if (!st->slots) {
        s = tg_error(TG_ERR_NOMEM, "%s: out of memory", file);
        goto done;
    }
    st->slot_mask = cap - 1;
    for (size_t i = 0; i < count; i++) {
        size_t h = (size_t)hash_name(st->tensors[i].name) & st->slot_mask;
        while (st->slots[h])
            h = (h + 1) & st->slot_mask;
        st->slots[h] = i + 1;
    }
done:
    tg_free(tmp);
    tg_free(ord);
    return s;
}

/* ---- loading ---------------------------------------------------------------------- */

static tg_safetensors *handle_new(const char *name)
{
    tg_safetensors *st = tg_calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->name = tg_strdup(name);
    st->arena = tg_arena_create(0);
    if (!st->name || !st->arena) {
        tg_safetensors_destroy(st);
        return NULL;
    }
    return st;
}

void tg_safetensors_destroy(tg_safetensors *st)
{
    if (!st)
        return;
    tg_arena_destroy(st->arena);
    tg_free(st->data);
    tg_free(st->name);
    tg_free(st);
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Check the length prefix against the total size; returns the header length. */
static tg_status check_prefix(const char *file, const unsigned char prefix[8], uint64_t total,
                              size_t *hlen)
{
    uint64_t n = le64(prefix);
    if (n > TG_ST_MAX_HEADER)
        return tg_error(TG_ERR_FORMAT, "%s: header length %llu is more than the %u-byte limit",
                        file, (unsigned long long)n, TG_ST_MAX_HEADER);
    if (n > total - 8)
        return tg_error(TG_ERR_FORMAT,
                        "%s: header length %llu runs past the end of the file (%llu bytes)", file,
                        (unsigned long long)n, (unsigned long long)total);
    *hlen = (size_t)n;
    return TG_OK;
}

/* Point every tensor into the data block. */
static void attach_data(tg_safetensors *st)
{
    for (size_t i = 0; i < st->count; i++)
        st->tensors[i].data = (const unsigned char *)st->data + st->begin[i];
}

tg_status tg_safetensors_parse(const void *buf, size_t len, const char *name, tg_safetensors **out)
{
    *out = NULL;
    if (!name)
        name = "safetensors";
    if (!buf && len)
        return tg_error(TG_ERR_INVALID_ARG, "%s: no data", name);
    if (len < 8)
        return tg_error(TG_ERR_FORMAT, "%s: %zu bytes, too short for the 8-byte header length",
                        name, len);
    const unsigned char *b = buf;
    size_t hlen;
    TG_TRY(check_prefix(name, b, len, &hlen));
    tg_safetensors *st = handle_new(name);
    if (!st)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", name);
    size_t data_len = len - 8 - hlen;
    tg_status s = validate_header(st, (const char *)b + 8, hlen, data_len);
    if (s == TG_OK) {
        st->data = tg_malloc(data_len ? data_len : 1);
        if (!st->data)
            s = tg_error(TG_ERR_NOMEM, "%s: out of memory for %zu bytes of tensor data", name,
                         data_len);
    }
    if (s != TG_OK) {
        tg_safetensors_destroy(st);
        return s;
    }
    memcpy(st->data, b + 8 + hlen, data_len);
    st->data_len = data_len;
    attach_data(st);
    *out = st;
    return TG_OK;
}

/* Read exactly n bytes at the current position. */
static tg_status read_all(int fd, const char *file, void *dst, size_t n)
{
    unsigned char *p = dst;
    while (n) {
        ssize_t r = read(fd, p, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return tg_error(TG_ERR_IO, "%s: read error: %s", file, strerror(errno));
        if (r == 0)
            return tg_error(TG_ERR_IO, "%s: the file became shorter while being read", file);
        p += r;
        n -= (size_t)r;
    }
    return TG_OK;
}

tg_status tg_safetensors_load(const char *path, tg_safetensors **out)
{
    *out = NULL;
    if (!path)
        return tg_error(TG_ERR_INVALID_ARG, "no safetensors file name given");
    int fd;
    TG_TRY(tg_open_regular(path, &fd)); /* a FIFO is refused, not waited on */
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return tg_error(TG_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    }
    uint64_t total = (uint64_t)sb.st_size;
    tg_status s;
    tg_safetensors *st = NULL;
    char *header = NULL;
    unsigned char prefix[8];
    size_t hlen = 0;
    if (total < 8) {
        s = tg_error(TG_ERR_FORMAT, "%s: %llu bytes, too short for the 8-byte header length", path,
                     (unsigned long long)total);
        goto fail;
    }
    if ((s = read_all(fd, path, prefix, 8)) != TG_OK ||
        (s = check_prefix(path, prefix, total, &hlen)) != TG_OK)
        goto fail;
    if (total - 8 - hlen > SIZE_MAX / 2) {
        s = tg_error(TG_ERR_NOMEM, "%s: data section too large for this machine", path);
        goto fail;
    }
    st = handle_new(path);
    header = tg_malloc(hlen ? hlen : 1);
    if (!st || !header) {
        s = tg_error(TG_ERR_NOMEM, "%s: out of memory for the %zu-byte header", path, hlen);
        goto fail;
    }
    if ((s = read_all(fd, path, header, hlen)) != TG_OK)
        goto fail;
    size_t data_len = (size_t)(total - 8 - hlen);
    if ((s = validate_header(st, header, hlen, data_len)) != TG_OK)
        goto fail;
    st->data = tg_malloc(data_len ? data_len : 1);
    if (!st->data) {
        s = tg_error(TG_ERR_NOMEM, "%s: out of memory for %zu bytes of tensor data", path,
                     data_len);
        goto fail;
    }
    if ((s = read_all(fd, path, st->data, data_len)) != TG_OK)
        goto fail;
    st->data_len = data_len;
    attach_data(st);
    tg_free(header);
    close(fd);
    *out = st;
    return TG_OK;
fail:
    tg_free(header);
    tg_safetensors_destroy(st);
    close(fd);
    return s;
}

/* ---- lookups -------------------------------------------------------------------- */

const char *tg_safetensors_name(const tg_safetensors *st)
{
    return st->name;
}
size_t tg_safetensors_count(const tg_safetensors *st)
{
    return st->count;
}

const tg_st_tensor *tg_safetensors_tensor(const tg_safetensors *st, size_t i)
{
    return i < st->count ? &st->tensors[i] : NULL;
}

const tg_st_tensor *tg_safetensors_find(const tg_safetensors *st, const char *name)
{
    if (!st || !name || !st->slots)
        return NULL;
    size_t h = (size_t)hash_name(name) & st->slot_mask;
    while (st->slots[h]) {
        const tg_st_tensor *t = &st->tensors[st->slots[h] - 1];
        if (strcmp(t->name, name) == 0)
            return t;
        h = (h + 1) & st->slot_mask;
    }
    return NULL;
}

tg_status tg_safetensors_get(const tg_safetensors *st, const char *name, tg_st_dtype dtype,
                             int ndim, const int64_t *shape, const void **data)
{
    *data = NULL;
    const tg_st_tensor *t = tg_safetensors_find(st, name);
    char b1[16], b2[16];
    if (!t)
        return tg_error(TG_ERR_NOT_FOUND, "%s: no tensor '%s'", st->name, name ? name : "(null)");
    if (t->dtype != dtype)
        return tg_error(TG_ERR_DTYPE, "%s: tensor '%s' is %s, expected %s", st->name, name,
                        lower_name(t->dtype, b1), lower_name(dtype, b2));
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = t->shape[i] == shape[i];
    if (!same) {
        char s1[160], s2[160];
        return tg_error(TG_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected %s", st->name, name,
                        tg_st_shape_str(t->ndim, t->shape, s1, sizeof s1),
                        tg_st_shape_str(ndim < 0 ? 0 : ndim, shape, s2, sizeof s2));
    }
    *data = t->data;
    return TG_OK;
}

size_t tg_safetensors_metadata_count(const tg_safetensors *st)
{
    return st->n_meta;
}

const tg_st_meta *tg_safetensors_metadata_at(const tg_safetensors *st, size_t i)
{
    return i < st->n_meta ? &st->meta[i] : NULL;
}

const char *tg_safetensors_metadata(const tg_safetensors *st, const char *key)
{
    for (size_t i = 0; key && i < st->n_meta; i++)
        if (strcmp(st->meta[i].key, key) == 0)
            return st->meta[i].value;
    return NULL;
}
