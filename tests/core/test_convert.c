/* tests/core/test_convert.c - storage conversions: every pair of float types
 * round-trips what the narrower type holds, stochastic rounding picks one of
 * the two neighbours with the right odds (so it is unbiased) and is
 * reproducible from its key, and the non-finite scan finds the first NaN or
 * infinity in each type; every type into doubles exactly (the half types
 * past the f32 chunk they go through) and doubles back into f32, i32 and
 * u8, a half type refused.
 * TG_TEST_LABELS: isa */
#include "tg_test.h"

#include "core/convert.h"
#include "core/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_pairs(void)
{
    const float v[] = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 1e-7f, 3.14159f, -1e5f, INFINITY};
    enum { N = sizeof v / sizeof v[0] };
    const tg_dtype types[] = {TG_F32, TG_F16, TG_BF16};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            unsigned char x[N * 4], y[N * 4];
            float back[N], direct[N];
            tg_convert(v, TG_F32, x, types[a], N);   /* what type a holds */
            tg_convert(x, types[a], y, types[b], N); /* a -> b */
            tg_convert(y, types[b], back, TG_F32, N);
            tg_convert(x, types[a], direct, TG_F32, N); /* a's values, exactly */
            unsigned char z[N * 4];
            tg_convert(direct, TG_F32, z, types[b], N); /* rounded once from f32 */
            float expect[N];
            tg_convert(z, types[b], expect, TG_F32, N);
            for (int i = 0; i < N; i++)
                TG_CHECK(memcmp(&back[i], &expect[i], 4) == 0 ||
                         (isnan(back[i]) && isnan(expect[i])));
        }
}

/* The two neighbours of x in type t (by magnitude), as f32. */
static void neighbours(float x, tg_dtype t, float *lo, float *hi)
{
    uint16_t h;
    tg_convert(&x, TG_F32, &h, t, 1);
    float n;
    tg_convert(&h, t, &n, TG_F32, 1);
    uint16_t other = fabsf(n) > fabsf(x) ? (uint16_t)(h - 1) : (uint16_t)(h + 1);
    float m;
    tg_convert(&other, t, &m, TG_F32, 1);
    *lo = fabsf(n) < fabsf(m) ? n : m;
    *hi = fabsf(n) < fabsf(m) ? m : n;
}

static void test_stochastic_is_unbiased(void)
{
    const float xs[] = {1.0f + 1.0f / 3000.0f, -0.1f, 1234.567f, 3e-6f, -6.1e-5f, 1e-7f};
    const tg_dtype types[] = {TG_F16, TG_BF16};
    enum { N = 40000 };
    static float src[N], out[N];
    static uint16_t h[N];
    for (int t = 0; t < 2; t++)
        for (size_t k = 0; k < sizeof xs / sizeof xs[0]; k++) {
            float x = xs[k], lo, hi;
            neighbours(x, types[t], &lo, &hi);
            for (int i = 0; i < N; i++)
                src[i] = x;
            tg_convert_stochastic(src, h, types[t], N, 42 + (uint64_t)k, 0);
            tg_convert(h, types[t], out, TG_F32, N);
            double mean = 0;
            int others = 0;
            for (int i = 0; i < N; i++) {
                mean += out[i];
                others += out[i] != lo && out[i] != hi;
            }
            mean /= N;
            TG_CHECK(others == 0);
            /* the mean is x within 4 standard errors of the two-point draw */
            double p = (fabs((double)x) - fabs((double)lo)) / (fabs((double)hi) - fabs((double)lo));
            double se = fabs((double)hi - (double)lo) * sqrt(p * (1 - p) / N);
            TG_CHECK(fabs(mean - (double)x) <= 4 * se + 1e-12);
            /* the same key and element index give the same bits */
            static uint16_t again[N];
            tg_convert_stochastic(src, again, types[t], N, 42 + (uint64_t)k, 0);
            TG_CHECK(memcmp(h, again, sizeof h) == 0);
            /* an offset start rounds element i as the whole array's element first + i */
            tg_convert_stochastic(src + 100, again, types[t], 10, 42 + (uint64_t)k, 100);
            TG_CHECK(memcmp(h + 100, again, 10 * sizeof(uint16_t)) == 0);
        }
    /* representable values and non-finite ones are kept exactly */
    float exact[3] = {0.5f, INFINITY, NAN};
    uint16_t e[3];
    tg_convert_stochastic(exact, e, TG_F16, 3, 1, 0);
    TG_CHECK(tg_f16_to_f32(e[0]) == 0.5f && isinf(tg_f16_to_f32(e[1])) &&
             isnan(tg_f16_to_f32(e[2])));
}

/* Every f16 value stochastic rounding gives is one of the two f16 values
 * around x (the nearest and its other neighbour), over random bit patterns
 * of every f16 exponent, normals and subnormals, either sign; above 65504
 * it rounds to nearest, and NaN and infinity keep their kind and sign. */
static void test_f16_stochastic_sweep(void)
{
    enum { N = 60000 };
    static float src[N];
    static uint16_t h[N];
    tg_rng r;
    tg_rng_seed(&r, 7);
    for (int i = 0; i < N; i++) {
        uint32_t bits = (uint32_t)tg_rng_next(&r);
        /* exponents 2^-30 .. 2^15: deep subnormal to the top binade */
        uint32_t e = 97u + (uint32_t)(i % 46);
        bits = (bits & 0x807fffffu) | (e << 23);
        memcpy(&src[i], &bits, sizeof bits);
        if (fabsf(src[i]) > 65504.0f)
            src[i] = copysignf(65504.0f, src[i]);
    }
    tg_convert_stochastic(src, h, TG_F16, N, 3, 0);
    int wrong = 0;
    for (int i = 0; i < N; i++) {
        float lo, hi, got = tg_f16_to_f32(h[i]);
        neighbours(src[i], TG_F16, &lo, &hi);
        if (got != lo && got != hi && !(got == 0.0f && lo == 0.0f) && wrong++ < 5)
            tg_test_fail(__FILE__, __LINE__, "%a went to %a, not %a or %a", (double)src[i],
                         (double)got, (double)lo, (double)hi);
        if (signbit(got) != signbit(src[i]) && got != 0.0f && wrong++ < 5)
            tg_test_fail(__FILE__, __LINE__, "%a lost its sign: %a", (double)src[i], (double)got);
    }
    /* past the largest f16 the nearest value is taken, as without stochastic rounding */
    float edge[6] = {65504.0f, 65510.0f, -65519.0f, 65520.0f, 1e6f, -NAN};
    uint16_t e[6];
    for (uint64_t key = 0; key < 64; key++) {
        tg_convert_stochastic(edge, e, TG_F16, 6, key, 0);
        TG_CHECK(e[0] == 0x7bffu && e[1] == 0x7bffu && e[2] == 0xfbffu);
        TG_CHECK(e[3] == 0x7c00u && e[4] == 0x7c00u);
        TG_CHECK((e[5] & 0x7fffu) > 0x7c00u && (e[5] & 0x8000u));
    }
}

static void test_first_nonfinite(void)
{
    float f[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    TG_CHECK(tg_first_nonfinite(f, TG_F32, 8) == -1);
    f[5] = NAN;
    f[6] = INFINITY;
    TG_CHECK(tg_first_nonfinite(f, TG_F32, 8) == 5);
    uint16_t h[8];
    tg_convert(f, TG_F32, h, TG_F16, 8);
    TG_CHECK(tg_first_nonfinite(h, TG_F16, 8) == 5);
    TG_CHECK(tg_first_nonfinite(h, TG_F16, 5) == -1);
    float big[2] = {1e5f, 1.0f}; /* finite in f32 and bf16, infinite in f16 */
    tg_convert(big, TG_F32, h, TG_F16, 2);
    TG_CHECK(tg_first_nonfinite(h, TG_F16, 2) == 0);
    tg_convert(big, TG_F32, h, TG_BF16, 2);
    TG_CHECK(tg_first_nonfinite(h, TG_BF16, 2) == -1);
    /* across the checked blocks: the first of two hits in later blocks */
    enum { LONG = 3 * 4096 + 77 };
    float *lf = calloc(LONG, sizeof *lf);
    uint16_t *lb = calloc(LONG, sizeof *lb);
    TG_CHECK(lf && lb);
    if (!lf || !lb)
        return;
    TG_CHECK(tg_first_nonfinite(lf, TG_F32, LONG) == -1);
    lf[LONG - 1] = INFINITY;
    lf[2 * 4096 + 5] = NAN;
    TG_CHECK(tg_first_nonfinite(lf, TG_F32, LONG) == 2 * 4096 + 5);
    TG_CHECK(tg_first_nonfinite(lf, TG_F32, 2 * 4096 + 5) == -1);
    tg_convert(lf, TG_F32, lb, TG_BF16, LONG);
    TG_CHECK(tg_first_nonfinite(lb, TG_BF16, LONG) == 2 * 4096 + 5);
    lb[4096] = 0x7f80u; /* +inf in bf16, at a block's start */
    TG_CHECK(tg_first_nonfinite(lb, TG_BF16, LONG) == 4096);
    free(lf);
    free(lb);
}

/* Every type's values as doubles, exactly: halves over more elements than
 * the f32 chunk they pass through (1024), in a pattern whose period (255)
 * 1024 does not divide, so a chunk read from the wrong place shows. */
static void test_to_double(void)
{
    enum { N = 2500 };
    float f[N];
    int32_t i[N];
    uint8_t u[N];
    uint16_t h[N];
    double d[N];
    for (int k = 0; k < N; k++) {
        f[k] = (float)(k % 255 - 127) * 0.5f; /* exact in f16 and bf16 */
        i[k] = (k - 1250) * 1000003;
        u[k] = (uint8_t)k;
    }
    tg_convert_to_double(f, TG_F32, d, N);
    for (int k = 0; k < N; k++)
        TG_CHECK(d[k] == (double)f[k]);
    tg_convert_to_double(i, TG_I32, d, N);
    for (int k = 0; k < N; k++)
        TG_CHECK(d[k] == (double)i[k]);
    tg_convert_to_double(u, TG_U8, d, N);
    for (int k = 0; k < N; k++)
        TG_CHECK(d[k] == (double)u[k]);
    const tg_dtype halves[] = {TG_F16, TG_BF16};
    for (int t = 0; t < 2; t++) {
        tg_convert(f, TG_F32, h, halves[t], N);
        tg_convert_to_double(h, halves[t], d, N);
        for (int k = 0; k < N; k++)
            TG_CHECK(d[k] == (double)f[k]);
    }
}

/* Doubles into f32 (nearest), i32 and u8 (C's truncation); into a half
 * type it aborts naming the type. */
static void from_double_f16(void *ctx)
{
    const double one = 1.0;
    uint16_t h;
    (void)ctx;
    tg_convert_from_double(&one, &h, TG_F16, 1);
}

static void test_from_double(void)
{
    const double v[] = {0.1, -2.75, 200.9, 1e-50};
    enum { N = sizeof v / sizeof v[0] };
    float f[N];
    int32_t i[N];
    uint8_t u[N];
    tg_convert_from_double(v, f, TG_F32, N);
    tg_convert_from_double(v, i, TG_I32, 3);
    tg_convert_from_double(v, u, TG_U8, 1);
    for (int k = 0; k < N; k++)
        TG_CHECK(f[k] == (float)v[k]);
    TG_CHECK(i[0] == 0 && i[1] == -2 && i[2] == 200);
    TG_CHECK(u[0] == 0);
    tg_convert_from_double(&v[2], u, TG_U8, 1);
    TG_CHECK(u[0] == 200);
    TG_CHECK_ABORTS(from_double_f16, NULL, "dtype of a buffer written from doubles");
}

int main(void)
{
    TG_RUN(test_pairs);
    TG_RUN(test_stochastic_is_unbiased);
    TG_RUN(test_f16_stochastic_sweep);
    TG_RUN(test_first_nonfinite);
    TG_RUN(test_to_double);
    TG_RUN(test_from_double);
    return tg_test_finish();
}
