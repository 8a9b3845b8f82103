/* data/safetensors.h - reading and writing safetensors files (checkpoints).
 *
 * Format: an 8-byte little-endian header length N, N bytes of JSON header,
 * then the data section. The header maps each tensor name to
 *   {"dtype": "F32", "shape": [10, 1, 5, 5], "data_offsets": [begin, end]}
 * with offsets relative to the data section, plus an optional
 * "__metadata__": {string: string} member.
 *
 * The reader trusts nothing: header length against the file size (and a
 * 100 MB cap, as the reference implementation has), strict JSON, known dtype
 * names, shapes (at most TG_ST_MAX_DIMS dims, no overflow), shape x dtype
 * size == offset span, offsets inside the data section, and - as the spec
 * requires - tensors that tile the data section exactly: no overlap, no hole,
 * no trailing bytes. Errors name the file and the tensor at fault:
 *   "model.safetensors: tensor 'layer1.conv.weight': data_offsets [0, 996)
 *    span 996 bytes but shape [10, 1, 5, 5] f32 needs 1000"
 *
 * The writer orders tensors by element size (largest first, otherwise as
 * given) and pads the header with spaces to a multiple of 8, so every
 * tensor's data is aligned to its element size in the file and in memory.
 * tg_safetensors_write is atomic: it writes "<path>.tmp.<pid>", syncs it,
 * renames it over `path` and syncs the directory; on any failure the temp
 * file is removed and an existing `path` is left untouched.
 *
 * A loaded tg_safetensors is immutable and may be read from several threads.
 */
#ifndef TG_DATA_SAFETENSORS_H
#define TG_DATA_SAFETENSORS_H

#include "tilegraph/dtype.h"
#include "tilegraph/status.h"

#include <stddef.h>
#include <stdint.h>

/* Element types of the safetensors spec (sub-byte types are not supported). */
#define TG_ST_DTYPE_LIST(X)                                                                        \
    X(TG_ST_BOOL, "BOOL", 1)                                                                       \
    X(TG_ST_U8, "U8", 1)                                                                           \
    X(TG_ST_I8, "I8", 1)                                                                           \
    X(TG_ST_F8_E5M2, "F8_E5M2", 1)                                                                 \
    X(TG_ST_F8_E4M3, "F8_E4M3", 1)                                                                 \
    X(TG_ST_I16, "I16", 2)                                                                         \
    X(TG_ST_U16, "U16", 2)                                                                         \
    X(TG_ST_F16, "F16", 2)                                                                         \
    X(TG_ST_BF16, "BF16", 2)                                                                       \
    X(TG_ST_I32, "I32", 4)                                                                         \
    X(TG_ST_U32, "U32", 4)                                                                         \
    X(TG_ST_F32, "F32", 4)                                                                         \
    X(TG_ST_F64, "F64", 8)                                                                         \
    X(TG_ST_I64, "I64", 8)                                                                         \
    X(TG_ST_U64, "U64", 8)

typedef enum tg_st_dtype {
#define TG_ST_DTYPE_ENUM(code, name, size) code,
    TG_ST_DTYPE_LIST(TG_ST_DTYPE_ENUM)
#undef TG_ST_DTYPE_ENUM
        TG_ST_DTYPE_COUNT
} tg_st_dtype;

#define TG_ST_MAX_DIMS 8
#define TG_ST_MAX_HEADER 100000000u

/* "F32"; "?" when out of range. */
const char *tg_st_dtype_name(tg_st_dtype t);
/* Bytes per element; 0 when out of range. */
size_t tg_st_dtype_size(tg_st_dtype t);
/* "F32" -> TG_ST_F32 (exact spelling, as in files); -1 if unknown. */
int tg_st_dtype_parse(const char *name);
/* The safetensors type of a tilegraph type (always exists). */
tg_st_dtype tg_st_dtype_from_tg(tg_dtype t);
/* The tilegraph type of a safetensors type, or -1 when tilegraph has none. */
int tg_st_dtype_to_tg(tg_st_dtype t);

/* "[10, 1, 5, 5]" into buf (truncated to cap); returns buf. */
char *tg_st_shape_str(int ndim, const int64_t *shape, char *buf, size_t cap);

/* One tensor. For the writer: name, dtype, ndim, shape[0..ndim) and data
 * (nbytes is ignored; it follows from shape and dtype). From the reader: all
 * fields, data pointing into the handle, aligned to the element size when the
 * file's offsets are (files this writer wrote always are). */
typedef struct tg_st_tensor {
    const char *name;
    tg_st_dtype dtype;
    int ndim;
    int64_t shape[TG_ST_MAX_DIMS];
    const void *data;
    size_t nbytes;
} tg_st_tensor;

typedef struct tg_st_meta {
    const char *key, *value;
} tg_st_meta;

/* ---- writing ---------------------------------------------------------------- */

/* Atomically write `n` tensors and `n_meta` metadata pairs to `path`. Names
 * and metadata must be non-empty-safe UTF-8 without NUL, tensor names unique
 * and not "__metadata__", metadata keys unique. */
tg_status tg_safetensors_write(const char *path, const tg_st_tensor *tensors, size_t n,
                               const tg_st_meta *meta, size_t n_meta);

/* The same file image in memory: *buf (tg_malloc'd, caller frees) of *len bytes. */
tg_status tg_safetensors_encode(const tg_st_tensor *tensors, size_t n, const tg_st_meta *meta,
                                size_t n_meta, void **buf, size_t *len);

/* ---- reading ---------------------------------------------------------------- */

typedef struct tg_safetensors tg_safetensors;

/* Load and validate a whole file. *out is NULL on failure. */
tg_status tg_safetensors_load(const char *path, tg_safetensors **out);
/* The same from `len` bytes in memory (copied); `name` is used in messages. */
tg_status tg_safetensors_parse(const void *buf, size_t len, const char *name, tg_safetensors **out);
void tg_safetensors_destroy(tg_safetensors *st);

/* The file name given when loading. */
const char *tg_safetensors_name(const tg_safetensors *st);
/* Tensors in data-section order. */
size_t tg_safetensors_count(const tg_safetensors *st);
const tg_st_tensor *tg_safetensors_tensor(const tg_safetensors *st, size_t i);
/* By name (hashed); NULL when absent. */
const tg_st_tensor *tg_safetensors_find(const tg_safetensors *st, const char *name);

/* Look up `name` and check it is `dtype` with shape shape[0..ndim): fails
 * with TG_ERR_NOT_FOUND, TG_ERR_DTYPE or TG_ERR_SHAPE naming the file and the
 * tensor. On success *data points at its bytes. */
tg_status tg_safetensors_get(const tg_safetensors *st, const char *name, tg_st_dtype dtype,
                             int ndim, const int64_t *shape, const void **data);

/* Metadata pairs in file order, and lookup by key (NULL when absent). */
size_t tg_safetensors_metadata_count(const tg_safetensors *st);
const tg_st_meta *tg_safetensors_metadata_at(const tg_safetensors *st, size_t i);
const char *tg_safetensors_metadata(const tg_safetensors *st, const char *key);

#endif
