/* tests/core/test_dtype.c - f16 and bf16 conversions: exact values, rounding
 * to nearest even, infinities, NaN, subnormals, and the vector paths agreeing
 * with the scalar ones on every f16 value.
 * TG_TEST_LABELS: quick isa */
#include "tg_test.h"

#include <stdlib.h>
#include <string.h>

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_table(void)
{
    TG_CHECK(tg_dtype_size(TG_F32) == 4 && tg_dtype_size(TG_BF16) == 2 &&
             tg_dtype_size(TG_U8) == 1);
    TG_CHECK(strcmp(tg_dtype_name(TG_I32), "i32") == 0);
    tg_dtype t = TG_U8;
    TG_CHECK(tg_dtype_parse("half", &t) == TG_OK && t == TG_F16);
    TG_CHECK(tg_dtype_parse("bfloat16", &t) == TG_OK && t == TG_BF16);
    TG_CHECK(tg_dtype_parse("f64", &t) == TG_ERR_INVALID_ARG && t == TG_BF16);
    TG_CHECK(strstr(tg_error_message(), "data type 'f64'") != NULL);
    TG_CHECK(tg_dtype_parse(NULL, &t) == TG_ERR_INVALID_ARG);
    TG_CHECK(tg_dtype_size((tg_dtype)99) == 0);
}

static void test_f16_values(void)
{
    TG_CHECK(tg_f32_to_f16(1.0f) == 0x3c00);
    TG_CHECK(tg_f32_to_f16(-2.0f) == 0xc000);
    TG_CHECK(tg_f32_to_f16(65504.0f) == 0x7bff); /* largest finite */
    TG_CHECK(tg_f32_to_f16(65520.0f) == 0x7c00); /* rounds to infinity */
    TG_CHECK(tg_f32_to_f16(65519.0f) == 0x7bff);
    TG_CHECK(tg_f32_to_f16(from_bits(0x7f800000)) == 0x7c00);
    TG_CHECK((tg_f32_to_f16(from_bits(0x7fc00000)) & 0x7c00) == 0x7c00 &&
             (tg_f32_to_f16(from_bits(0x7fc00000)) & 0x03ff) != 0); /* NaN stays NaN */
    TG_CHECK(tg_f32_to_f16(5.9604645e-8f) == 0x0001);               /* smallest subnormal */
    TG_CHECK(tg_f32_to_f16(2.9802322e-8f) == 0x0000); /* half of it: ties to even (0) */
    TG_CHECK(tg_f32_to_f16(8.940697e-8f) == 0x0002);  /* 1.5 subnormals: ties to even (2) */
    /* 1 + 2^-11 is halfway between 1 and 1 + 2^-10: rounds to even (1) */
    TG_CHECK(tg_f32_to_f16(1.0f + 0x1.0p-11f) == 0x3c00);
    TG_CHECK(tg_f32_to_f16(1.0f + 0x1.8p-11f) == 0x3c01);
    TG_CHECK(tg_f16_to_f32(0x3555) == 0.333251953125f);
    TG_CHECK(tg_f16_to_f32(0x0001) == 5.9604645e-8f);
    TG_CHECK(bits(tg_f16_to_f32(0x8000)) == 0x80000000u); /* -0 */
}

/* Every f16 value converts to f32 and back unchanged (NaN stays NaN). */
static void test_f16_round_trip_and_vectors(void)
{
    static uint16_t h[65536], back[65536];
    static float f[65536], fv[65536];
    for (int i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    for (int i = 0; i < 65536; i++)
        f[i] = tg_f16_to_f32(h[i]);
    tg_f16_to_f32_array(h, fv, 65536);
    TG_CHECK(memcmp(f, fv, sizeof f) == 0);
    tg_f32_to_f16_array(f, back, 65536);
    int bad = 0;
    for (int i = 0; i < 65536; i++) {
        bool nan = (h[i] & 0x7c00) == 0x7c00 && (h[i] & 0x3ff);
        if (nan ? !((back[i] & 0x7c00) == 0x7c00 && (back[i] & 0x3ff)) : back[i] != h[i])
            bad++;
        if (!nan && tg_f32_to_f16(f[i]) != h[i])
            bad++;
    }
    TG_CHECK(bad == 0);
    /* scalar and vector paths agree on values between f16 values */
    float mid[4096];
    uint16_t a[4096], b[4096];
    for (int i = 0; i < 4096; i++)
        mid[i] = (float)i * 0.37f - 700.0f + 1e-3f * (float)(i % 7);
    tg_f32_to_f16_array(mid, a, 4096);
    for (int i = 0; i < 4096; i++)
        b[i] = tg_f32_to_f16(mid[i]);
    TG_CHECK(memcmp(a, b, sizeof a) == 0);
}

static void test_bf16(void)
{
    TG_CHECK(tg_f32_to_bf16(1.0f) == 0x3f80);
    TG_CHECK(tg_bf16_to_f32(0x3f80) == 1.0f);
    /* 1 + 2^-8 is halfway between two bf16 values: ties to even */
    TG_CHECK(tg_f32_to_bf16(1.0f + 0x1.0p-8f) == 0x3f80);
    TG_CHECK(tg_f32_to_bf16(1.0f + 0x1.8p-8f) == 0x3f81);
    TG_CHECK(tg_f32_to_bf16(from_bits(0x7f800000)) == 0x7f80);
    uint16_t nan = tg_f32_to_bf16(from_bits(0x7f800001));
    TG_CHECK((nan & 0x7f80) == 0x7f80 && (nan & 0x7f) != 0);
    float x[5] = {0.1f, -3.5f, 1e30f, -0.0f, 65504.0f}, y[5];
    uint16_t b[5];
    tg_f32_to_bf16_array(x, b, 5);
    tg_bf16_to_f32_array(b, y, 5);
    for (int i = 0; i < 5; i++)
        TG_CHECK(fabsf(y[i] - x[i]) <= fabsf(x[i]) * 0x1.0p-8f);
    /* f32 subnormals become a zero of their sign (VCVTNEPS2BF16's rule);
     * bf16 subnormals widen exactly */
    TG_CHECK(tg_f32_to_bf16(from_bits(0x00000001)) == 0x0000);
    TG_CHECK(tg_f32_to_bf16(from_bits(0x807fffff)) == 0x8000);
    TG_CHECK(tg_f32_to_bf16(from_bits(0x00800000)) == 0x0080); /* the smallest normal */
    TG_CHECK(tg_bf16_to_f32(0x0001) == from_bits(0x00010000));
}

/* The array conversion (16 at a time, by the instruction where the CPU has
 * AVX-512 BF16) gives the scalar's bits on a sweep of the f32 patterns:
 * every exponent with mantissas around the rounding boundaries, NaNs,
 * infinities and subnormals of both signs, at lengths around 16. */
static void test_bf16_array_matches_scalar(void)
{
    enum { N = 1 << 16 };
    float *x = malloc(N * sizeof *x);
    uint16_t *b = malloc(N * sizeof *b);
    TG_CHECK(x && b);
    if (!x || !b)
        return;
    static const uint32_t low[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff, 0x18000};
    for (uint32_t i = 0; i < N; i++) {
        uint32_t sign = (i & 1u) << 31, exp = (i >> 1) & 0xffu, pick = (i >> 9) % 7u;
        uint32_t mid = (i >> 12) << 17 & 0x007e0000u;
        x[i] = from_bits(sign | exp << 23 | ((mid | low[pick]) & 0x007fffffu));
    }
    for (size_t len = 1; len <= 40; len += 13) {
        tg_f32_to_bf16_array(x + 3, b, len);
        for (size_t i = 0; i < len; i++)
            TG_CHECK(b[i] == tg_f32_to_bf16(x[3 + i]));
    }
    tg_f32_to_bf16_array(x, b, N);
    size_t bad = 0;
    for (size_t i = 0; i < N; i++)
        if (b[i] != tg_f32_to_bf16(x[i]) && bad++ < 5) {
            uint32_t bits;
            memcpy(&bits, &x[i], sizeof bits);
            tg_test_fail(__FILE__, __LINE__, "f32 0x%08x: array 0x%04x, scalar 0x%04x",
                         (unsigned)bits, b[i], tg_f32_to_bf16(x[i]));
        }
    free(x);
    free(b);
}

int main(void)
{
    TG_RUN(test_table);
    TG_RUN(test_f16_values);
    TG_RUN(test_bf16_array_matches_scalar);
    TG_RUN(test_f16_round_trip_and_vectors);
    TG_RUN(test_bf16);
    return tg_test_finish();
}
