/* core/bf16.h - bf16 <-> f32 of one value and of a run, inline.
 *
 * Inline so that a kernel compiled once per instruction set (core/clones.h)
 * converts in its own vector registers: a call per piece into the library's
 * tg_bf16_to_f32_array cost the blocked batch norm a third of its time.
 *
 * f32 -> bf16 is AVX-512 BF16's VCVTNEPS2BF16, bit for bit, in software or
 * with that instruction where the CPU has it (tg_bf16_hw): rounding to
 * nearest even, a NaN kept a NaN with its quiet bit set, and an f32
 * subnormal flushed to a zero of its sign (the instruction treats
 * denormal inputs as zero; oneDNN's reorders into bf16 use it too). The
 * instruction converts 16 values in one step where the software form
 * takes a dozen vector operations: ReLU on bf16 ran 3.7x faster with it
 * (0.14 against 0.51 ms for 2M values, 1 thread). bf16 -> f32 is exact
 * (the bits shifted up), subnormals included.
 */
#ifndef TG_CORE_BF16_H
#define TG_CORE_BF16_H

#include "core/clones.h"
#include "core/isa.h"
#include "core/rng.h"
#include "tilegraph/dtype.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#include <immintrin.h>
#define TG_BF16_HW 1
/* A function compiled for AVX-512 BF16: call it only when tg_bf16_hw(). */
#define TG_BF16_HW_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#else
#define TG_BF16_HW 0
#define TG_BF16_HW_TARGET
#endif

/* Whether this CPU converts f32 -> bf16 in hardware (AVX-512 BF16) and
 * TILEGRAPH_ISA lets it (core/isa.h): a load of a value detected once. */
static inline bool tg_bf16_hw(void)
{
#if TG_BF16_HW
    return tg_isa_get() >= TG_ISA_AVX512_BF16;
#else
    return false;
#endif
}

/* generic, or hw (a function compiled with TG_BF16_HW_TARGET) where the
 * CPU has AVX-512 BF16; hw is not even named where it cannot exist. */
#if TG_BF16_HW
#define TG_BF16_PICK(generic, hw) (tg_bf16_hw() ? (hw) : (generic))
#else
#define TG_BF16_PICK(generic, hw) (generic)
#endif

static inline float tg_bf16_widen(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Element i of an operand stored in f32 or bf16, as f32, read one value at
 * a time (weights and biases packed once, statistics per row). */
static inline float tg_f32_or_bf16_at(const void *p, tg_dtype t, int64_t i)
{
    return t == TG_BF16 ? tg_bf16_widen(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static inline uint16_t tg_bf16_narrow(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
    uint32_t quiet = x | 0x00400000u; /* a NaN keeps its payload's top and stays quiet */
    uint32_t zero = x & 0x80000000u;  /* a subnormal (or zero) keeps its sign only */
    uint32_t pick = (x & 0x7fffffffu) > 0x7f800000u ? quiet
                    : (x & 0x7f800000u) == 0        ? zero
                                                    : rounded;
    return (uint16_t)(pick >> 16);
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

/* n values rounded stochastically, element i with tg_round_bits(key32,
 * first + i): tg_convert_stochastic's bf16 loop and the weight updates'
 * (ops/optim.c), the same loop so that the staged and the native update
 * round alike. */
static inline void tg_bf16_narrow_stochastic_run(const float *src, uint16_t *dst, size_t n,
                                                 uint32_t key32, uint64_t first)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = tg_bf16_narrow_stochastic(src[i], tg_round_bits(key32, (uint32_t)(first + i)));
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

/* 16 values at a time in vector registers (GCC and Clang vector
 * extensions): the loops above vectorise with 256-bit vectors and a long
 * chain of 16-bit shuffles; these compile to one VPMOVZXWD (VPMOVDW) per 16
 * values in a per-instruction-set copy (core/clones.h). TG_VEC_INLINE:
 * they pass vectors by value. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
/* the vectors pass between inline functions only: the ABI note is moot */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef float tg_f32x16 __attribute__((vector_size(64)));
typedef uint32_t tg_u32x16 __attribute__((vector_size(64)));
typedef uint16_t tg_u16x16 __attribute__((vector_size(32)));

TG_VEC_INLINE tg_f32x16 tg_bf16x16_widen(const uint16_t *p)
{
    tg_u16x16 h;
    memcpy(&h, p, sizeof h);
    tg_u32x16 u = __builtin_convertvector(h, tg_u32x16) << 16;
    tg_f32x16 f;
    memcpy(&f, &u, sizeof f);
    return f;
}

TG_VEC_INLINE void tg_bf16x16_narrow(uint16_t *p, tg_f32x16 f)
{
    tg_u32x16 x;
    memcpy(&x, &f, sizeof x);
    tg_u32x16 rounded = x + 0x7fffu + ((x >> 16) & 1u);
    tg_u32x16 quiet = x | 0x00400000u;
    tg_u32x16 zero = x & 0x80000000u;
    tg_u32x16 nan = (tg_u32x16)((x & 0x7fffffffu) > 0x7f800000u); /* all ones where NaN */
    tg_u32x16 sub = (tg_u32x16)((x & 0x7f800000u) == 0) & ~nan;   /* ... where subnormal */
    tg_u32x16 pick = (quiet & nan) | (zero & sub) | (rounded & ~(nan | sub));
    tg_u16x16 h = __builtin_convertvector(pick >> 16, tg_u16x16);
    memcpy(p, &h, sizeof h);
}

#if TG_BF16_HW
/* The same 16 widened by one VPMOVZXWD (GCC splits the generic form in
 * two halves): only in a TG_BF16_HW_TARGET function. */
TG_VEC_INLINE TG_BF16_HW_TARGET tg_f32x16 tg_bf16x16_widen_hw(const uint16_t *p)
{
    __m512i u = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)p)), 16);
    tg_f32x16 f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The same 16 with VCVTNEPS2BF16: only in a TG_BF16_HW_TARGET function. */
TG_VEC_INLINE TG_BF16_HW_TARGET void tg_bf16x16_narrow_hw(uint16_t *p, tg_f32x16 f)
{
    __m512 v;
    memcpy(&v, &f, sizeof v);
    __m256bh h = _mm512_cvtneps_pbh(v);
    memcpy(p, &h, sizeof h);
}

/* Runs of any length by the instructions, the tail as tg_bf16_*_run. */
TG_VEC_INLINE TG_BF16_HW_TARGET void tg_bf16_widen_run_hw(const uint16_t *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        tg_f32x16 v = tg_bf16x16_widen_hw(src + i);
        memcpy(dst + i, &v, sizeof v);
    }
    tg_bf16_widen_run(src + i, dst + i, n - i);
}

TG_VEC_INLINE TG_BF16_HW_TARGET void tg_bf16_narrow_run_hw(const float *src, uint16_t *dst,
                                                           size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        tg_f32x16 v;
        memcpy(&v, src + i, sizeof v);
        tg_bf16x16_narrow_hw(dst + i, v);
    }
    tg_bf16_narrow_run(src + i, dst + i, n - i);
}
#endif

/* The 16-wide conversions a kernel's loop is written against, passed as
 * constants into an always-inlined loop so that each copy (generic, or
 * TG_BF16_HW_TARGET) calls its own directly. */
typedef struct tg_bf16x16_ops {
    tg_f32x16 (*widen)(const uint16_t *);
    void (*narrow)(uint16_t *, tg_f32x16);
} tg_bf16x16_ops;

/* n floats of src narrowed into dst by cv, 16 at a time, the tail one by
 * one (a row a kernel computed in f32 and stores in bf16). */
TG_VEC_INLINE void tg_bf16_narrow_row(tg_bf16x16_ops cv, uint16_t *dst, const float *src, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        tg_f32x16 v;
        memcpy(&v, src + i, sizeof v);
        cv.narrow(dst + i, v);
    }
    for (; i < n; i++)
        dst[i] = tg_bf16_narrow(src[i]);
}

/* 16 floats at element `at` of an operand stored in bf16 (widened by cv)
 * or f32: the blocked kernels' one vector per pixel, whichever storage the
 * engine gave them (tg_kernel_args.in_type, out_type). */
TG_VEC_INLINE tg_f32x16 tg_x16_load(tg_bf16x16_ops cv, const void *src, bool bf16, int64_t at)
{
    if (bf16)
        return cv.widen((const uint16_t *)src + at);
    tg_f32x16 v;
    memcpy(&v, (const float *)src + at, sizeof v);
    return v;
}

TG_VEC_INLINE void tg_x16_store(tg_bf16x16_ops cv, void *dst, bool bf16, int64_t at, tg_f32x16 v)
{
    if (bf16)
        cv.narrow((uint16_t *)dst + at, v);
    else
        memcpy((float *)dst + at, &v, sizeof v);
}

#define TG_BF16X16_GENERIC ((tg_bf16x16_ops){tg_bf16x16_widen, tg_bf16x16_narrow})
#if TG_BF16_HW
#define TG_BF16X16_HW ((tg_bf16x16_ops){tg_bf16x16_widen_hw, tg_bf16x16_narrow_hw})
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* A kernel's pool functions (tg_pool_fn) `name` and, where the compiler
 * can target AVX-512 BF16, `name##_hw`: each runs loop(ctx, begin, end,
 * conversions), a TG_VEC_INLINE loop written against its conversions, with
 * `generic` in a copy per instruction set (TG_WIDE_KERNEL) or `hw` in one
 * for AVX-512 BF16, flattened so that every helper is inlined and calls
 * that copy's conversions directly. TG_BF16_POOL_FN(name) picks one at run
 * time. */
#define TG_BF16_POOL_GENERIC(name, loop, generic)                                                  \
    TG_WIDE_KERNEL static void name(void *ctx, int64_t begin, int64_t end, int thread)             \
    {                                                                                              \
        (void)thread;                                                                              \
        loop(ctx, begin, end, generic);                                                            \
    }
#if TG_BF16_HW
#define TG_BF16_POOL_FNS(name, loop, generic, hw)                                                  \
    TG_BF16_POOL_GENERIC(name, loop, generic)                                                      \
    TG_BF16_HW_TARGET __attribute__((flatten)) static void name##_hw(void *ctx, int64_t begin,     \
                                                                     int64_t end, int thread)      \
    {                                                                                              \
        (void)thread;                                                                              \
        loop(ctx, begin, end, hw);                                                                 \
    }
#else
#define TG_BF16_POOL_FNS(name, loop, generic, hw) TG_BF16_POOL_GENERIC(name, loop, generic)
#endif
#define TG_BF16_POOL_FN(name) TG_BF16_PICK(name, name##_hw)

#endif
