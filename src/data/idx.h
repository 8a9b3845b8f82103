/* data/idx.h - reader for IDX files (the MNIST / Fashion-MNIST format).
 *
 * An IDX file is a 4-byte big-endian magic (0, 0, element type, dimension
 * count), one big-endian u32 per dimension, then the elements row-major. We
 * read the two kinds MNIST uses: unsigned-byte images [N, rows, cols]
 * (magic 0x00000803) and unsigned-byte labels [N] (magic 0x00000801), raw or
 * gzip-compressed (detected from the content, not the name).
 *
 * Everything in the file is checked before it is trusted: the magic and the
 * element type, the dimension count, zero or overflowing sizes, a payload
 * shorter than the header promises (truncated) or longer (trailing data).
 * Every error names the file and what is wrong, e.g.
 *   "train-images-idx3-ubyte.gz: truncated: header promises 47040000 bytes of
 *    pixels, file has 1000".
 * No input makes the reader crash or allocate much more than the file holds:
 * for compressed input the buffer grows with the data actually decompressed.
 *
 * Functions are thread-safe on distinct outputs.
 */
#ifndef TG_DATA_IDX_H
#define TG_DATA_IDX_H

#include "tilegraph/status.h"

#include <stddef.h>
#include <stdint.h>

#define TG_IDX_LABELS 1 /* want_ndim for a labels file */
#define TG_IDX_IMAGES 3 /* want_ndim for an images file */

/* Largest image side accepted: rows and columns become ints downstream. */
#define TG_IDX_MAX_SIDE 65536

/* Largest payload accepted (16 GiB): a header promising more is malformed. */
#define TG_IDX_MAX_BYTES ((uint64_t)1 << 34)

typedef struct tg_idx {
    int ndim;           /* 1 or 3 */
    int64_t dim[3];     /* dim[0] is the item count actually loaded */
    int64_t file_items; /* the item count the header declares */
    uint8_t *data;      /* dim[0] * dim[1] * dim[2] bytes, owned (tg_malloc) */
    size_t bytes;
} tg_idx;

/* Load `path`. want_ndim is TG_IDX_IMAGES, TG_IDX_LABELS or 0 (either).
 * max_items > 0 loads only the first max_items items (the rest of a
 * compressed file is then not read or checked); 0 loads all. On failure *out
 * is left empty ({0}) and the message names the file. */
tg_status tg_idx_load(const char *path, int want_ndim, int64_t max_items, tg_idx *out);

/* The same from `len` bytes in memory (raw or gzip); `name` is used in messages. */
tg_status tg_idx_parse(const void *buf, size_t len, const char *name, int want_ndim,
                       int64_t max_items, tg_idx *out);

/* Load an images file and its labels file and check they hold the same number
 * of items. Both outputs are empty on failure. */
tg_status tg_idx_load_pair(const char *images_path, const char *labels_path, int64_t max_items,
                           tg_idx *images, tg_idx *labels);

/* Free the data and reset *a to empty. Safe on an empty tg_idx. */
void tg_idx_free(tg_idx *a);

#endif
