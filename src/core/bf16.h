/* core/bf16.h - bf16 <-> f32 of one value and of a run, inline.
 *
 * Inline so that a kernel compiled once per instruction set (core/clones.h)
 * converts in its own vector registers: a call per piece into the library's
 * tg_bf16_to_f32_array cost the blocked batch norm a third of its time.
 * Branch-free on the bits, so the compiler vectorises the loops; rounding
 * is to nearest even and a NaN stays a quiet NaN, as tg_f32_to_bf16.
 * (AVX-512 BF16's VCVTNEPS2BF16 would flush subnormals, which these do not.)
 */
#ifndef TG_CORE_BF16_H
#define TG_CORE_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline float tg_bf16_widen(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t tg_bf16_narrow(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
    uint32_t quiet = x | 0x00400000u; /* a NaN keeps its payload's top and stays quiet */
    return (uint16_t)(((x & 0x7fffffffu) > 0x7f800000u ? quiet : rounded) >> 16);
}

/* 16 values at a time in vector registers (GCC and Clang vector
 * extensions): the loops above vectorise with 256-bit vectors and a long
 * chain of 16-bit shuffles; these compile to one VPMOVZXWD (VPMOVDW) per 16
 * values in a per-instruction-set copy (core/clones.h). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
/* the vectors pass between inline functions only: the ABI note is moot */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef float tg_f32x16 __attribute__((vector_size(64)));
typedef uint32_t tg_u32x16 __attribute__((vector_size(64)));
typedef uint16_t tg_u16x16 __attribute__((vector_size(32)));

static inline tg_f32x16 tg_bf16x16_widen(const uint16_t *p)
{
    tg_u16x16 h;
    memcpy(&h, p, sizeof h);
    tg_u32x16 u = __builtin_convertvector(h, tg_u32x16) << 16;
    tg_f32x16 f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline void tg_bf16x16_narrow(uint16_t *p, tg_f32x16 f)
{
    tg_u32x16 x;
    memcpy(&x, &f, sizeof x);
    tg_u32x16 rounded = x + 0x7fffu + ((x >> 16) & 1u);
    tg_u32x16 quiet = x | 0x00400000u;
    tg_u32x16 nan = (tg_u32x16)((x & 0x7fffffffu) > 0x7f800000u); /* all ones where NaN */
    tg_u32x16 pick = (quiet & nan) | (rounded & ~nan);
    tg_u16x16 h = __builtin_convertvector(pick >> 16, tg_u16x16);
    memcpy(p, &h, sizeof h);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

static inline void tg_bf16_widen_run(const uint16_t *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = tg_bf16_widen(src[i]);
}

static inline void tg_bf16_narrow_run(const float *src, uint16_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = tg_bf16_narrow(src[i]);
}

#endif
