/* core/convert.c - conversions between f32, f16 and bf16 storage. */
#include "core/convert.h"
#include "core/clones.h"

#include "core/bf16.h"
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

/* f16: find the two representable neighbours by magnitude and pick one. */
static uint16_t f16_stochastic(float x, float r)
{
    uint16_t h = tg_f32_to_f16(x);
    if (!isfinite(x) || (h & 0x7fffu) >= 0x7c00u)
        return h;
    float ax = fabsf(x);
    uint16_t sign = h & 0x8000u, mag = h & 0x7fffu;
    if (fabsf(tg_f16_to_f32(h)) > ax)
        mag--; /* nearest was above: the lower neighbour is one step down */
    float lo = fabsf(tg_f16_to_f32((uint16_t)(sign | mag)));
    float hi = fabsf(tg_f16_to_f32((uint16_t)(sign | (mag + 1))));
    if (lo == ax || !isfinite(hi))
        return (uint16_t)(sign | mag);
    return (uint16_t)(sign | (r * (hi - lo) < ax - lo ? mag + 1 : mag));
}

void tg_convert_stochastic(const float *src, void *dst, tg_dtype dd, size_t n, uint64_t key,
                           uint64_t first)
{
    uint16_t *d = dst;
    if (dd == TG_BF16) {
        /* bf16 keeps the top 16 bits: adding a uniform 16-bit value to the
         * bits below and truncating rounds up with probability equal to the
         * remainder (core/bf16.h) */
        uint32_t key32 = tg_round_key32(key);
        for (size_t i = 0; i < n; i++)
            d[i] = tg_bf16_narrow_stochastic(src[i], tg_round_bits(key32, (uint32_t)(first + i)));
    } else if (dd == TG_F16) {
        for (size_t i = 0; i < n; i++)
            d[i] = f16_stochastic(src[i], tg_hash_uniform(key, first + i));
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
