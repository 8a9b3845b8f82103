/* tilegraph/dtype.h - element types and conversions between them.
 *
 * f16 is IEEE 754 binary16, bf16 is the top half of an f32. Conversions round
 * to nearest even and keep infinities and NaN. f16 flushes nothing: subnormal
 * f16 values are produced and read exactly. f32 -> bf16 follows AVX-512
 * BF16's VCVTNEPS2BF16 bit for bit (and uses it where present): an f32
 * subnormal becomes a zero of its sign; bf16 -> f32 is exact.
 */
#ifndef TILEGRAPH_DTYPE_H
#define TILEGRAPH_DTYPE_H

#include "tilegraph/export.h"
#include "tilegraph/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TG_DTYPE_LIST(X)                                                                           \
    X(TG_F32, "f32", 4)                                                                            \
    X(TG_F16, "f16", 2)                                                                            \
    X(TG_BF16, "bf16", 2)                                                                          \
    X(TG_U8, "u8", 1)                                                                              \
    X(TG_I32, "i32", 4)

typedef enum tg_dtype {
#define TG_DTYPE_ENUM(code, name, size) code,
    TG_DTYPE_LIST(TG_DTYPE_ENUM)
#undef TG_DTYPE_ENUM
        TG_DTYPE_COUNT
} tg_dtype;

/* Bytes per element; 0 for a value out of range. */
TG_API size_t tg_dtype_size(tg_dtype t);
/* "f32", "f16", ...; "?" for a value out of range. */
TG_API const char *tg_dtype_name(tg_dtype t);
/* "f32", "float32", "fp16", "half", "bf16", "u8", "i32" and the like into
 * *out; TG_ERR_INVALID_ARG otherwise (*out unchanged). */
TG_API tg_status tg_dtype_parse(const char *name, tg_dtype *out);

TG_API uint16_t tg_f32_to_f16(float f);
TG_API float tg_f16_to_f32(uint16_t h);
TG_API uint16_t tg_f32_to_bf16(float f);
TG_API float tg_bf16_to_f32(uint16_t b);

/* Array forms; they use the CPU's conversion instructions when present. */
TG_API void tg_f32_to_f16_array(const float *src, uint16_t *dst, size_t n);
TG_API void tg_f16_to_f32_array(const uint16_t *src, float *dst, size_t n);
TG_API void tg_f32_to_bf16_array(const float *src, uint16_t *dst, size_t n);
TG_API void tg_bf16_to_f32_array(const uint16_t *src, float *dst, size_t n);

#ifdef __cplusplus
}
#endif
#endif
