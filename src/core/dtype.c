/* core/dtype.c - element type table and f16/bf16 conversions.
 *
 * The scalar conversions are exact bit manipulations (round to nearest even).
 * The f16 array forms use F16C when the CPU has it, chosen at run time, so a
 * binary built here also runs on a CPU without it.
 */
#include "core/bf16.h"
#include "core/clones.h"
#include "core/error.h"
#include "tilegraph/dtype.h"

#include <stdatomic.h>
#include <string.h>

size_t tg_dtype_size(tg_dtype t)
{
    static const size_t sizes[] = {
#define TG_DTYPE_SIZE(code, name, size) size,
        TG_DTYPE_LIST(TG_DTYPE_SIZE)
#undef TG_DTYPE_SIZE
    };
    return (unsigned)t < TG_DTYPE_COUNT ? sizes[t] : 0;
}

const char *tg_dtype_name(tg_dtype t)
{
    static const char *const names[] = {
#define TG_DTYPE_NAME(code, name, size) name,
        TG_DTYPE_LIST(TG_DTYPE_NAME)
#undef TG_DTYPE_NAME
    };
    return (unsigned)t < TG_DTYPE_COUNT ? names[t] : "?";
}

tg_status tg_dtype_parse(const char *name, tg_dtype *out)
{
    static const struct {
        const char *name;
        tg_dtype t;
    } aliases[] = {
        {"f32", TG_F32},   {"float32", TG_F32},   {"fp32", TG_F32}, {"float", TG_F32},
        {"f16", TG_F16},   {"float16", TG_F16},   {"fp16", TG_F16}, {"half", TG_F16},
        {"bf16", TG_BF16}, {"bfloat16", TG_BF16}, {"u8", TG_U8},    {"uint8", TG_U8},
        {"i32", TG_I32},   {"int32", TG_I32},
    };
    for (size_t i = 0; name && i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i].name) == 0) {
            *out = aliases[i].t;
            return TG_OK;
        }
    return tg_error(TG_ERR_INVALID_ARG, "data type '%s': expected f32, f16, bf16, u8 or i32",
                    name ? name : "(null)");
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t tg_f32_to_bf16(float f)
{
    return tg_bf16_narrow(f);
}

float tg_bf16_to_f32(uint16_t b)
{
    return tg_bf16_widen(b);
}

uint16_t tg_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u) /* rounds to >= 65520: overflow to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (abs < 0x38800000u) {   /* below the smallest normal f16: subnormal or zero */
        if (abs < 0x33000000u) /* below half the smallest subnormal */
            return (uint16_t)sign;
        uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(abs >> 23); /* 14..24 */
        uint32_t half = 1u << (shift - 1);
        uint32_t rest = mant & ((1u << shift) - 1u);
        uint32_t h = mant >> shift;
        if (rest > half || (rest == half && (h & 1u)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((abs >> 13) - (112u << 10)); /* rebias exponent 127 -> 15 */
    uint32_t rest = abs & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

float tg_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) /* infinity, or NaN made quiet as the F16C instructions do */
        return bits_f32(sign | 0x7f800000u | (mant ? 0x00400000u : 0u) | (mant << 13));
    if (exp == 0) {
        if (mant == 0)
            return bits_f32(sign);
        float v = (float)mant * (1.0f / 16777216.0f); /* mant * 2^-24 */
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
__attribute__((target("f16c,avx"))) static void f32_to_f16_f16c(const float *src, uint16_t *dst,
                                                                size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(dst + i), h);
    }
    for (; i < n; i++)
        dst[i] = tg_f32_to_f16(src[i]);
}

__attribute__((target("f16c,avx"))) static void f16_to_f32_f16c(const uint16_t *src, float *dst,
                                                                size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++)
        dst[i] = tg_f16_to_f32(src[i]);
}

/* CPUID leaf 1, ECX bit 29 is F16C (clang's __builtin_cpu_supports does not
 * know the name, so ask the CPU directly). */
static int cpu_has_f16c(void)
{
    static atomic_int cached = -1; /* every thread that races here stores the same value */
    int known = atomic_load_explicit(&cached, memory_order_relaxed);
    if (known < 0) {
        unsigned a, b, c, d;
        known = __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) &&
                (c & (1u << 29)) != 0;
        atomic_store_explicit(&cached, known, memory_order_relaxed);
    }
    return known;
}
#else
static int cpu_has_f16c(void)
{
    return 0;
}
#define f32_to_f16_f16c(s, d, n) ((void)0)
#define f16_to_f32_f16c(s, d, n) ((void)0)
#endif

void tg_f32_to_f16_array(const float *src, uint16_t *dst, size_t n)
{
    if (cpu_has_f16c()) {
        f32_to_f16_f16c(src, dst, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        dst[i] = tg_f32_to_f16(src[i]);
}

void tg_f16_to_f32_array(const uint16_t *src, float *dst, size_t n)
{
    if (cpu_has_f16c()) {
        f16_to_f32_f16c(src, dst, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        dst[i] = tg_f16_to_f32(src[i]);
}

/* One copy per instruction set (core/clones.h) of core/bf16.h's loops;
 * with AVX-512 BF16, 16 at a time by the instruction. */
TG_WIDE_CLONES static void narrow_run(const float *src, uint16_t *dst, size_t n)
{
    tg_bf16_narrow_run(src, dst, n);
}

#if TG_BF16_HW
TG_BF16_HW_TARGET static void narrow_run_hw(const float *src, uint16_t *dst, size_t n)
{
    tg_bf16_narrow_run_hw(src, dst, n);
}
#endif

void tg_f32_to_bf16_array(const float *src, uint16_t *dst, size_t n)
{
    TG_BF16_PICK(narrow_run, narrow_run_hw)(src, dst, n);
}

TG_WIDE_CLONES void tg_bf16_to_f32_array(const uint16_t *src, float *dst, size_t n)
{
    tg_bf16_widen_run(src, dst, n);
}
