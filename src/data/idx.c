/* data/idx.c - IDX reader over a byte source (file via zlib, or memory).
 *
 * One parser runs over a small "source" interface that yields decompressed
 * bytes: a file opened with zlib's gzdopen (which reads gzip and raw files
 * alike), raw memory, or gzip memory through inflate. The parser reads the
 * header, validates it, then reads exactly the promised payload and probes
 * for trailing bytes. When the source knows its size (raw data) truncation is
 * detected before allocating; otherwise the buffer grows geometrically with
 * what really arrives, so a header promising 16 GiB in a 100-byte file costs
 * at most a megabyte.
 */
#include "data/idx.h"

#include "core/alloc.h"
#include "core/atomic_file.h"
#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define FIRST_CHUNK ((size_t)1 << 20)

typedef struct source {
    const char *name;
    /* memory */
    const unsigned char *mem;
    size_t mem_len, mem_pos;
    int mem_gzip;
    z_stream zs;
    int zs_live, zs_done;
    int gz_cut; /* compressed stream ended early */
    /* file */
    gzFile gz;
    int64_t known_remaining;          /* bytes left when the size is known (raw), else -1 */
    int64_t compressed, max_inflated; /* gzip file: its size and 1032 times it; else -1 */
} source;

/* ---- reading from a source ---------------------------------------------------- */

static tg_status inflate_some(source *s, unsigned char *dst, size_t n, size_t *got)
{
    *got = 0;
    while (*got < n && !s->zs_done) {
        s->zs.next_out = dst + *got;
        size_t want = n - *got;
        s->zs.avail_out = want > (1u << 30) ? (1u << 30) : (uInt)want;
        if (s->zs.avail_in == 0) {
            size_t left = s->mem_len - s->mem_pos;
            if (left == 0) { /* the data ends inside the compressed stream */
                s->zs_done = 1;
                s->gz_cut = 1;
                break;
            }
            s->zs.next_in = (Bytef *)(s->mem + s->mem_pos);
            s->zs.avail_in = left > (1u << 30) ? (1u << 30) : (uInt)left;
            s->mem_pos += s->zs.avail_in;
        }
        uInt before = s->zs.avail_out, before_in = s->zs.avail_in;
        int rc = inflate(&s->zs, Z_NO_FLUSH);
        *got += before - s->zs.avail_out;
        if (rc == Z_BUF_ERROR && before == s->zs.avail_out && before_in == s->zs.avail_in &&
            s->zs.avail_in != 0) {
            s->zs_done = 1; /* no progress possible: treat as the end */
            s->gz_cut = 1;
            break;
        }
        if (rc == Z_STREAM_END) {
            /* Another gzip member may follow (as gzread allows); anything
             * else after the stream is ignored, as gzread does. */
            size_t rest = s->zs.avail_in + (s->mem_len - s->mem_pos);
            const unsigned char *next = s->zs.next_in;
            if (rest >= 2 && s->zs.avail_in >= 2 && next[0] == 0x1f && next[1] == 0x8b) {
                if (inflateReset(&s->zs) != Z_OK)
                    return tg_error(TG_ERR_FORMAT, "%s: corrupt gzip data", s->name);
                continue;
            }
            s->zs_done = 1;
        } else if (rc == Z_BUF_ERROR) {
            if (s->zs.avail_in == 0 && s->mem_pos == s->mem_len) {
                s->zs_done = 1;
                s->gz_cut = 1;
            }
        } else if (rc == Z_MEM_ERROR) {
            return tg_error(TG_ERR_NOMEM, "%s: out of memory while decompressing", s->name);
        } else if (rc != Z_OK) {
            return tg_error(TG_ERR_FORMAT, "%s: corrupt gzip data: %s", s->name,
                            s->zs.msg ? s->zs.msg : "inflate failed");
        }
    }
    return TG_OK;
}

/* zlib prefixes its message with the name given to gzdopen, "<fd:3>: ",
 * which means nothing to a user: the file's own name is in our message. */
static const char *gz_reason(const char *msg)
{
    if (msg && strncmp(msg, "<fd:", 4) == 0) {
        const char *colon = strstr(msg, ": ");
        if (colon)
            return colon + 2;
    }
    return msg ? msg : "unknown error";
}

/* Read up to n bytes; *got < n only at the end of the data. */
static tg_status source_read(source *s, void *dst, size_t n, size_t *got)
{
    *got = 0;
    if (s->gz) {
        while (*got < n) {
            size_t want = n - *got;
            unsigned chunk = want > (1u << 30) ? (1u << 30) : (unsigned)want;
            int r = gzread(s->gz, (unsigned char *)dst + *got, chunk);
            if (r < 0) {
                int code;
                const char *msg = gzerror(s->gz, &code);
                if (code == Z_MEM_ERROR)
                    return tg_error(TG_ERR_NOMEM, "%s: out of memory while decompressing", s->name);
                if (code == Z_ERRNO)
                    return tg_error(TG_ERR_IO, "%s: read error: %s", s->name, strerror(errno));
                return tg_error(TG_ERR_FORMAT, "%s: corrupt gzip data: %s", s->name,
                                gz_reason(msg));
            }
            if (r == 0) {
                int code;
                gzerror(s->gz, &code);
                if (code == Z_BUF_ERROR) /* "unexpected end of file" */
                    s->gz_cut = 1;
                break;
            }
            *got += (size_t)r;
        }
        return TG_OK;
    }
    if (s->mem_gzip)
        return inflate_some(s, dst, n, got);
    size_t left = s->mem_len - s->mem_pos;
    *got = n < left ? n : left;
    memcpy(dst, s->mem + s->mem_pos, *got);
    s->mem_pos += *got;
    return TG_OK;
}

/* ---- the parser ----------------------------------------------------------------- */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static const char *cut_note(const source *s)
{
    return s->gz_cut ? " (the compressed stream is cut short)" : "";
}

static tg_status parse(source *s, int want_ndim, int64_t max_items, tg_idx *out)
{
    const char *name = s->name;
    unsigned char head[16];
    size_t got;
    TG_TRY(source_read(s, head, 4, &got));
    if (got == 0)
        return tg_error(TG_ERR_FORMAT, "%s: empty file (expected an IDX header)%s", name,
                        cut_note(s));
    if (got < 4)
        return tg_error(TG_ERR_FORMAT, "%s: truncated header: %zu bytes, an IDX magic needs 4%s",
                        name, got, cut_note(s));
    uint32_t magic = be32(head);
    if (head[0] != 0 || head[1] != 0)
        return tg_error(TG_ERR_FORMAT,
                        "%s: not an IDX file: magic 0x%08X (expected 0x00000803 for images or "
                        "0x00000801 for labels)",
                        name, magic);
    if (head[2] != 0x08)
        return tg_error(TG_ERR_UNSUPPORTED,
                        "%s: IDX element type 0x%02X is not supported (only 0x08, unsigned byte)",
                        name, head[2]);
    int ndim = head[3];
    if (ndim != 1 && ndim != 3)
        return tg_error(
            TG_ERR_UNSUPPORTED,
            "%s: IDX file has %d dimensions; only 1 (labels) or 3 (images) are supported", name,
            ndim);
    if (want_ndim && ndim != want_ndim)
        return tg_error(TG_ERR_FORMAT,
                        "%s: expected %s (magic 0x%08X) but the file holds %s (magic 0x%08X)", name,
                        want_ndim == 3 ? "images" : "labels", 0x800u | (unsigned)want_ndim,
                        ndim == 3 ? "images" : "labels", magic);
    size_t dims_bytes = 4 * (size_t)ndim;
    TG_TRY(source_read(s, head + 4, dims_bytes, &got));
    if (got < dims_bytes)
        return tg_error(
            TG_ERR_FORMAT,
            "%s: truncated header: %zu of the %zu bytes of dimension sizes are present%s", name,
            got, dims_bytes, cut_note(s));
    static const char *const dim_names[3][3] = {
        {"label count"}, {0}, {"image count", "rows", "columns"}};
    uint64_t dim[3] = {1, 1, 1}, item_bytes = 1;
    for (int i = 0; i < ndim; i++) {
        dim[i] = be32(head + 4 + 4 * i);
        if (dim[i] == 0)
            return tg_error(TG_ERR_FORMAT, "%s: %s in the header is 0", name,
                            dim_names[ndim - 1][i]);
        if (i > 0)
            item_bytes *= dim[i]; /* two u32 factors: no overflow in 64 bits */
        /* Image sides become ints downstream: bound them well below INT_MAX. */
        if (i > 0 && dim[i] > TG_IDX_MAX_SIDE)
            return tg_error(TG_ERR_FORMAT,
                            "%s: %s in the header is %llu, over the limit of %d: not an image "
                            "file (or a damaged one)",
                            name, dim_names[ndim - 1][i], (unsigned long long)dim[i],
                            TG_IDX_MAX_SIDE);
    }
    if (dim[0] > TG_IDX_MAX_BYTES / item_bytes)
        return tg_error(TG_ERR_FORMAT,
                        "%s: header promises %llu x %llu bytes, more than the limit of %llu bytes",
                        name, (unsigned long long)dim[0], (unsigned long long)item_bytes,
                        (unsigned long long)TG_IDX_MAX_BYTES);
    uint64_t promised = dim[0] * item_bytes;
    const char *what = ndim == 3 ? "pixels" : "labels";
    uint64_t items = dim[0];
    if (max_items > 0 && (uint64_t)max_items < items)
        items = (uint64_t)max_items;
    uint64_t want = items * item_bytes;

    /* Deflate cannot expand more than 1032:1, so a compressed file too small
     * for the promise is truncated: say so before allocating or inflating. */
    if (s->max_inflated >= 0 && want > (uint64_t)s->max_inflated)
        return tg_error(TG_ERR_FORMAT,
                        "%s: truncated: header promises %llu bytes of %s, more than its %lld "
                        "compressed bytes can hold",
                        name, (unsigned long long)want, what, (long long)s->compressed);

    /* With a known size, reject a truncated file before allocating. */
    if (s->known_remaining >= 0) {
        s->known_remaining -= 4 + (int64_t)dims_bytes;
        if ((uint64_t)s->known_remaining < promised)
            return tg_error(TG_ERR_FORMAT,
                            "%s: truncated: header promises %llu bytes of %s, file has %lld", name,
                            (unsigned long long)promised, what, (long long)s->known_remaining);
        if (items == dim[0] && (uint64_t)s->known_remaining > promised)
            return tg_error(TG_ERR_FORMAT,
                            "%s: trailing data: %llu extra bytes after the %llu bytes of %s the "
                            "header promises",
                            name, (unsigned long long)((uint64_t)s->known_remaining - promised),
                            (unsigned long long)promised, what);
    }

    size_t cap = s->known_remaining >= 0 || want <= FIRST_CHUNK ? (size_t)want : FIRST_CHUNK;
    uint8_t *data = tg_malloc(cap ? cap : 1);
    if (!data)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory for %zu bytes of %s", name, cap, what);
    size_t have = 0;
    tg_status st = TG_OK;
    while (have < want) {
        if (have == cap) {
            size_t ncap = cap * 2 < want ? cap * 2 : (size_t)want;
            uint8_t *n = tg_realloc(data, ncap);
            if (!n) {
                st = tg_error(TG_ERR_NOMEM, "%s: out of memory for %zu bytes of %s", name, ncap,
                              what);
                break;
            }
            data = n;
            cap = ncap;
        }
        st = source_read(s, data + have, cap - have, &got);
        if (st != TG_OK)
            break;
        have += got;
        if (have < cap)
            break; /* end of data */
    }
    if (st == TG_OK && have < want)
        st = tg_error(TG_ERR_FORMAT,
                      "%s: truncated: header promises %llu bytes of %s, file has %zu%s", name,
                      (unsigned long long)promised, what, have, cut_note(s));
    if (st == TG_OK && items == dim[0] && s->known_remaining < 0) {
        /* Probe for trailing bytes; count up to 1 MiB of them. */
        unsigned char probe[4096];
        uint64_t extra = 0;
        do {
            st = source_read(s, probe, sizeof probe, &got);
            extra += got;
        } while (st == TG_OK && got == sizeof probe && extra < ((uint64_t)1 << 20));
        if (st == TG_OK && s->gz_cut)
            st = tg_error(TG_ERR_FORMAT,
                          "%s: truncated: the compressed stream ends before its end marker, so its "
                          "checksum cannot be verified",
                          name);
        else if (st == TG_OK && extra)
            st = tg_error(
                TG_ERR_FORMAT,
                "%s: trailing data: %s%llu extra bytes after the %llu bytes of %s the header "
                "promises",
                name, got == sizeof probe ? "at least " : "", (unsigned long long)extra,
                (unsigned long long)promised, what);
    }
    if (st != TG_OK) {
        tg_free(data);
        return st;
    }
    out->ndim = ndim;
    out->dim[0] = (int64_t)items;
    out->dim[1] = ndim == 3 ? (int64_t)dim[1] : 1;
    out->dim[2] = ndim == 3 ? (int64_t)dim[2] : 1;
    out->file_items = (int64_t)dim[0];
    out->data = data;
    out->bytes = (size_t)want;
    return TG_OK;
}

/* ---- entry points ----------------------------------------------------------------- */

void tg_idx_free(tg_idx *a)
{
    if (!a)
        return;
    tg_free(a->data);
    memset(a, 0, sizeof *a);
}

tg_status tg_idx_parse(const void *buf, size_t len, const char *name, int want_ndim,
                       int64_t max_items, tg_idx *out)
{
    memset(out, 0, sizeof *out);
    source s = {0};
    s.name = name ? name : "idx";
    s.mem = buf;
    s.mem_len = buf ? len : 0;
    s.known_remaining = -1;
    s.compressed = s.max_inflated = -1;
    if (s.mem_len >= 2 && s.mem[0] == 0x1f && s.mem[1] == 0x8b) {
        s.mem_gzip = 1;
        if (s.mem_len < ((size_t)1 << 40)) {
            s.compressed = (int64_t)s.mem_len;
            s.max_inflated = 1032 * (int64_t)s.mem_len + 4096;
        }
        if (inflateInit2(&s.zs, 16 + MAX_WBITS) != Z_OK)
            return tg_error(TG_ERR_NOMEM, "%s: cannot start decompression", s.name);
        s.zs_live = 1;
    } else {
        s.known_remaining = (int64_t)s.mem_len;
    }
    tg_status st = parse(&s, want_ndim, max_items, out);
    if (s.zs_live)
        inflateEnd(&s.zs);
    return st;
}

tg_status tg_idx_load(const char *path, int want_ndim, int64_t max_items, tg_idx *out)
{
    memset(out, 0, sizeof *out);
    if (!path)
        return tg_error(TG_ERR_INVALID_ARG, "no IDX file name given");
    int fd;
    TG_TRY(tg_open_regular(path, &fd)); /* a FIFO is refused, not waited on */
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return tg_error(TG_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    }
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        close(fd);
        return tg_error(TG_ERR_NOMEM, "%s: cannot start reading", path);
    }
    gzbuffer(gz, 1 << 17);
    source s = {0};
    s.name = path;
    s.gz = gz;
    s.known_remaining = -1;
    s.compressed = s.max_inflated = -1;
    /* gzdirect tells after the first read whether the file is raw; peeking
     * one byte is the documented way to make it decide. */
    int c = gzgetc(gz);
    if (c >= 0) {
        gzungetc(c, gz);
        if (gzdirect(gz)) {
            s.known_remaining = (int64_t)st.st_size;
        } else if (st.st_size < ((int64_t)1 << 40)) {
            s.compressed = (int64_t)st.st_size;
            s.max_inflated = 1032 * (int64_t)st.st_size + 4096;
        }
    }
    tg_status status = parse(&s, want_ndim, max_items, out);
    gzclose(gz);
    return status;
}

tg_status tg_idx_load_pair(const char *images_path, const char *labels_path, int64_t max_items,
                           tg_idx *images, tg_idx *labels)
{
    memset(labels, 0, sizeof *labels);
    TG_TRY(tg_idx_load(images_path, TG_IDX_IMAGES, max_items, images));
    tg_status st = tg_idx_load(labels_path, TG_IDX_LABELS, max_items, labels);
    if (st == TG_OK && images->file_items != labels->file_items)
        st = tg_error(TG_ERR_FORMAT, "%s holds %lld images but %s holds %lld labels", images_path,
                      (long long)images->file_items, labels_path, (long long)labels->file_items);
    if (st != TG_OK) {
        tg_idx_free(images);
        tg_idx_free(labels);
    }
    return st;
}
