/* onnx/onnx_tensor.c - decoding ONNX TensorProto values into host arrays.
 *
 * A tensor's values sit in raw_data (little-endian bytes), in one of the
 * typed repeated fields, or in an external file; each path checks that the
 * element count the dims declare is exactly what the data holds, because a
 * corrupt file must fail here rather than read past a buffer later.
 */
#include "onnx/onnx_internal.h"

#include "core/alloc.h"
#include "core/atomic_file.h"
#include "core/error.h"

#include <stdio.h>
#include <string.h>

#include "tilegraph/dtype.h"

size_t tg_onnx_elem_size(int t)
{
    switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
        return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
        return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
        return 2;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
        return 1;
    default:
        return 0;
    }
}

const char *tg_onnx_elem_name(int t)
{
    static const char *names[] = {"undefined",  "float",   "uint8",  "int8",   "uint16",
                                  "int16",      "int32",   "int64",  "string", "bool",
                                  "float16",    "double",  "uint32", "uint64", "complex64",
                                  "complex128", "bfloat16"};
    return t >= 0 && t < (int)(sizeof names / sizeof names[0]) ? names[t] : "unknown";
}

static bool is_float_type(int t)
{
    return t == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
           t == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
           t == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 ||
           t == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
}

/* One element of little-endian raw bytes. */
static void raw_element(int t, const uint8_t *p, float *f, int64_t *i)
{
    switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
        memcpy(f, p, 4);
        return;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: {
        double d;
        memcpy(&d, p, 8);
        *f = (float)d;
        return;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
        *f = tg_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
        return;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
        *f = tg_bf16_to_f32((uint16_t)(p[0] | p[1] << 8));
        return;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
        memcpy(i, p, 8);
        return;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: {
        int32_t v;
        memcpy(&v, p, 4);
        *i = v;
        return;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: {
        int16_t v;
        memcpy(&v, p, 2);
        *i = v;
        return;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
        *i = (int8_t)p[0];
        return;
    default:
        *i = p[0];
        return; /* uint8, bool */
    }
}

/* The element count the dims declare, refusing negative dims and overflow. */
static tg_status declared_count(const Onnx__TensorProto *t, const char *what, tg_onnx_data *out)
{
    if (t->n_dims > TG_MAX_DIMS)
        return tg_error(TG_ERR_UNSUPPORTED, "%s: %zu dimensions (at most %d)", what, t->n_dims,
                        TG_MAX_DIMS);
    int64_t n = 1;
    out->ndim = (int)t->n_dims;
    for (size_t d = 0; d < TG_MAX_DIMS; d++)
        out->dim[d] = 1;
    for (size_t d = 0; d < t->n_dims; d++) {
        if (t->dims[d] < 0 || (t->dims[d] > 0 && n > INT64_MAX / 8 / t->dims[d]))
            return tg_error(TG_ERR_FORMAT, "%s: dimension %zu is %lld", what, d,
                            (long long)t->dims[d]);
        out->dim[d] = t->dims[d];
        n *= t->dims[d];
    }
    out->n = n;
    return TG_OK;
}

/* The typed field's element count must equal the declared one; checked
 * before anything is allocated for the declared size. */
static tg_status check_typed_count(const Onnx__TensorProto *t, const char *what,
                                   const tg_onnx_data *d)
{
    size_t have;
    switch (d->elem_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
        have = t->n_float_data;
        break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
        have = t->n_double_data;
        break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
        have = t->n_int64_data;
        break;
    default:
        have = t->n_int32_data;
        break; /* int32 and narrower, float16, bool */
    }
    if ((int64_t)have != d->n)
        return tg_error(TG_ERR_FORMAT, "%s: declares %lld elements (dims) but holds %zu", what,
                        (long long)d->n, have);
    return TG_OK;
}

static void decode_typed(const Onnx__TensorProto *t, tg_onnx_data *d)
{
    int e = d->elem_type;
    for (int64_t k = 0; k < d->n; k++) {
        switch (e) {
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
            d->f[k] = t->float_data[k];
            break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
            d->f[k] = (float)t->double_data[k];
            break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
            d->i[k] = t->int64_data[k];
            break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
            d->f[k] = tg_f16_to_f32((uint16_t)t->int32_data[k]);
            break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
            d->f[k] = tg_bf16_to_f32((uint16_t)t->int32_data[k]);
            break;
        default:
            d->i[k] = t->int32_data[k];
            break;
        }
    }
}

tg_status tg_onnx_data_decode(const Onnx__TensorProto *t, const uint8_t *ext, size_t ext_size,
                              const char *what, tg_onnx_data *d)
{
    memset(d, 0, sizeof *d);
    d->elem_type = t->data_type;
    size_t es = tg_onnx_elem_size(t->data_type);
    if (!es)
        return tg_error(TG_ERR_DTYPE,
                        "%s: element type %s is not supported (float, double, "
                        "float16, bfloat16 and integer types are)",
                        what, tg_onnx_elem_name(t->data_type));
    TG_TRY(declared_count(t, what, d));
    bool external =
        t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (external && !ext && d->n > 0)
        return tg_error(TG_ERR_FORMAT, "%s: external data was not read", what);
    const uint8_t *raw = external ? ext : t->has_raw_data ? t->raw_data.data : NULL;
    size_t raw_size = external ? ext_size : t->raw_data.len;
    if (raw && raw_size != (size_t)d->n * es)
        return tg_error(TG_ERR_FORMAT,
                        "%s: dims %s %lld %s elements (%lld bytes) but the data "
                        "holds %zu bytes",
                        what, "declare", (long long)d->n, tg_onnx_elem_name(t->data_type),
                        (long long)(d->n * (int64_t)es), raw_size);
    if (!raw)
        TG_TRY(check_typed_count(t, what, d));
    size_t n = (size_t)(d->n ? d->n : 1);
    if (is_float_type(d->elem_type))
        d->f = tg_malloc(n * sizeof(float));
    else
        d->i = tg_malloc(n * sizeof(int64_t));
    if (!d->f && !d->i)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory for %lld elements", what, (long long)d->n);
    if (!raw) {
        decode_typed(t, d);
        return TG_OK;
    }
    for (int64_t k = 0; k < d->n; k++)
        raw_element(d->elem_type, raw + (size_t)k * es, d->f ? d->f + k : NULL,
                    d->i ? d->i + k : NULL);
    return TG_OK;
}

void tg_onnx_data_free(tg_onnx_data *d)
{
    tg_free(d->f);
    tg_free(d->i);
    d->f = NULL;
    d->i = NULL;
}

tg_status tg_onnx_data_read_file(const char *path, tg_onnx_data *out)
{
    memset(out, 0, sizeof *out);
    /* a FIFO or a directory is refused before anything can block */
    FILE *f = NULL;
    TG_TRY(tg_fopen_regular(path, &f));
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = size > 0 ? tg_malloc((size_t)size) : NULL;
    bool ok = buf && fread(buf, 1, (size_t)size, f) == (size_t)size;
    fclose(f);
    if (!ok) {
        tg_free(buf);
        return tg_error(TG_ERR_IO, "cannot read '%s'", path);
    }
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, (size_t)size, buf);
    tg_free(buf);
    if (!t)
        return tg_error(TG_ERR_FORMAT, "'%s' is not a serialised ONNX TensorProto", path);
    tg_status s = tg_onnx_data_decode(t, NULL, 0, path, out);
    onnx__tensor_proto__free_unpacked(t, NULL);
    return s;
}
