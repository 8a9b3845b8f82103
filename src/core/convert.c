/* core/convert.c - conversions between f32, f16 and bf16 storage. */
#include "core/convert.h"
#include "core/clones.h"

#include "core/bf16.h"
#include "core/check.h"
#include "core/rng.h"

#include <math.h>
#include <string.h>

bool tg_dtype_is_float(tg_dtype t)
{
    return t == TG_F32 || t == TG_F16 || t == TG_BF16;
}

/* Through an f32 buffer on the stack for half-to-half conversions. */
#define CONVERT_CHUNK 1024

void tg_convert(const void *src, tg_dtype sd, void *dst, tg_dtype dd, size_t n)
{
    if (sd == dd) {
        memmove(dst, src, n * tg_dtype_size(sd));
        return;
    }
    if (sd == TG_F32) {
        if (dd == TG_F16)
            tg_f32_to_f16_array(src, dst, n);
        else
            tg_f32_to_bf16_array(src, dst, n);
        return;
    }
    if (dd == TG_F32) {
        if (sd == TG_F16)
            tg_f16_to_f32_array(src, dst, n);
        else
            tg_bf16_to_f32_array(src, dst, n);
        return;
    }
    float tmp[CONVERT_CHUNK];
    for (size_t i = 0; i < n; i += CONVERT_CHUNK) {
        size_t k = n - i < CONVERT_CHUNK ? n - i : CONVERT_CHUNK;
        tg_convert((const uint16_t *)src + i, sd, tmp, TG_F32, k);
        tg_convert(tmp, TG_F32, (uint16_t *)dst + i, dd, k);
    }
}

void tg_convert_to_double(const void *src, tg_dtype dt, double *dst, size_t n)
{
    switch (dt) {
    case TG_F32:
        for (size_t i = 0; i < n; i++)
            dst[i] = ((const float *)src)[i];
        return;
    case TG_I32:
        for (size_t i = 0; i < n; i++)
            dst[i] = ((const int32_t *)src)[i];
        return;
    case TG_U8:
        for (size_t i = 0; i < n; i++)
            dst[i] = ((const uint8_t *)src)[i];
        return;
    case TG_F16:
    case TG_BF16: {
        float tmp[CONVERT_CHUNK];
        for (size_t i = 0; i < n; i += CONVERT_CHUNK) {
            size_t k = n - i < CONVERT_CHUNK ? n - i : CONVERT_CHUNK;
            tg_convert((const uint16_t *)src + i, dt, tmp, TG_F32, k);
            for (size_t j = 0; j < k; j++)
                dst[i + j] = tmp[j];
        }
        return;
    }
    case TG_DTYPE_COUNT:
        break;
    }
    TG_UNREACHABLE("dtype", dt);
}

void tg_convert_from_double(const double *src, void *dst, tg_dtype dt, size_t n)
{
    switch (dt) {
    case TG_F32:
        for (size_t i = 0; i < n; i++)
            ((float *)dst)[i] = (float)src[i];
        return;
    case TG_I32:
        for (size_t i = 0; i < n; i++)
            ((int32_t *)dst)[i] = (int32_t)src[i];
        return;
    case TG_U8:
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = (uint8_t)src[i];
        return;
    case TG_F16:
    case TG_BF16:
    case TG_DTYPE_COUNT:
        break;
    }
    TG_UNREACHABLE("dtype of a buffer written from doubles", dt);
}

/* a where cond (0 or 1), else b: masks, because GCC 12 leaves a loop with
 * chained ?: on integers unvectorised ("control flow in loop") */
static inline uint32_t pick(uint32_t cond, uint32_t a, uint32_t b)
{
    uint32_t m = 0u - cond;
    return (a & m) | (b & ~m);
}

/* f16 stochastic rounding of x with the random bits r, branch-free so that
 * the loop below vectorises (the neighbour search through two conversions
 * it replaces cost 13 ns an element, 44% of a ResNet-50 16.16 step):
 * - f16 normals keep 10 of f32's 23 fraction bits: adding 13 random bits
 *   to the magnitude and truncating rounds up with probability equal to
 *   the dropped fraction, carries into the exponent included;
 * - f16 subnormals (|x| < 2^-14) are k * 2^-24: k = floor(|x| * 2^24), and
 *   one more with probability the exact remainder against 24 random bits;
 * - above 65504 it rounds to nearest (65504 below 65520, else infinity),
 *   as it always did: only a value that rounds to infinity becomes one;
 * - NaN stays a quiet NaN with its sign, infinity stays infinity. */
static inline uint16_t f16_stochastic(float x, uint32_t r)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    uint32_t sign = (bits >> 16) & 0x8000u, mag = bits & 0x7fffffffu;
    uint32_t t = (mag + (r & 0x1fffu)) & ~0x1fffu;
    uint32_t normal = (t >> 13) - (112u << 10); /* exponent bias 127 to 15 */
    uint32_t small = mag < 0x38800000u;         /* below 2^-14: an f16 subnormal */
    uint32_t small_bits = pick(small, mag, 0);  /* 0 otherwise: the int conversion stays in range */
    float below;
    memcpy(&below, &small_bits, sizeof below);
    float y = below * 16777216.0f; /* exact */
    int32_t k = (int32_t)y;
    float frac = y - (float)k;
    uint32_t sub = (uint32_t)k + (uint32_t)((float)(r >> 8) * (1.0f / 16777216.0f) < frac);
    uint32_t h = pick(small, sub, normal);
    h = pick(mag > 0x477fe000u, 0x7bffu, h);  /* above 65504: to nearest */
    h = pick(mag >= 0x477ff000u, 0x7c00u, h); /* 65520 and up, infinity */
    h = pick(mag > 0x7f800000u, 0x7e00u, h);
    return (uint16_t)(sign | h);
}

TG_WIDE_CLONES static void f16_stochastic_run(const float *src, uint16_t *d, size_t n,
                                              uint32_t key32, uint64_t first)
{
    for (size_t i = 0; i < n; i++)
        d[i] = f16_stochastic(src[i], tg_round_bits(key32, (uint32_t)(first + i)));
}

void tg_convert_stochastic(const float *src, void *dst, tg_dtype dd, size_t n, uint64_t key,
                           uint64_t first)
{
    uint16_t *d = dst;
    uint32_t key32 = tg_round_key32(key);
    if (dd == TG_BF16) {
        /* bf16 keeps the top 16 bits: adding a uniform 16-bit value to the
         * bits below and truncating rounds up with probability equal to the
         * remainder (core/bf16.h) */
        tg_bf16_narrow_stochastic_run(src, d, n, key32, first);
    } else if (dd == TG_F16) {
        f16_stochastic_run(src, d, n, key32, first);
    } else {
        tg_convert(src, TG_F32, dst, dd, n);
    }
}

/* Whether any of n elements has every exponent bit set: branch-free, so
 * the compiler vectorises it (a loop that stops at the first hit is not). */
TG_WIDE_CLONES static bool any_all_ones16(const uint16_t *h, size_t n, uint16_t mask)
{
    unsigned hit = 0;
    for (size_t i = 0; i < n; i++)
        hit |= (h[i] & mask) == mask;
    return hit != 0;
}

TG_WIDE_CLONES static bool any_all_ones32(const uint32_t *u, size_t n)
{
    unsigned hit = 0;
    for (size_t i = 0; i < n; i++)
        hit |= (u[i] & 0x7f800000u) == 0x7f800000u;
    return hit != 0;
}

/* Checked a block at a time, the first hit then found in its block: the
 * overflow check of dynamic loss scaling reads every gradient each step. */
#define NONFINITE_BLOCK 4096

int64_t tg_first_nonfinite(const void *src, tg_dtype t, size_t n)
{
    /* f16: exponent bits 0x7c00; bf16: 0x7f80 */
    uint16_t mask = t == TG_F16 ? 0x7c00u : 0x7f80u;
    for (size_t b = 0; b < n; b += NONFINITE_BLOCK) {
        size_t len = n - b < NONFINITE_BLOCK ? n - b : NONFINITE_BLOCK;
        bool hit = t == TG_F32 ? any_all_ones32((const uint32_t *)src + b, len)
                               : any_all_ones16((const uint16_t *)src + b, len, mask);
        if (!hit)
            continue;
        for (size_t i = b; i < b + len; i++) {
            bool bad = t == TG_F32 ? (((const uint32_t *)src)[i] & 0x7f800000u) == 0x7f800000u
                                   : (((const uint16_t *)src)[i] & mask) == mask;
            if (bad)
                return (int64_t)i;
        }
    }
    return -1;
}
