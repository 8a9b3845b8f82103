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

/* Stochastic rounding with the random bits r (their low 16 used): up with
 * probability the dropped fraction; infinities and NaN as tg_bf16_narrow.
 * tg_convert_stochastic's, inline for the weight updates (ops/optim.c). */
static inline uint16_t tg_bf16_narrow_stochastic(float f, uint32_t r)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t up = (uint16_t)((x + (r & 0xffffu)) >> 16);
    return (x & 0x7f800000u) == 0x7f800000u ? tg_bf16_narrow(f) : up;
}

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
