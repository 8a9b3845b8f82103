/* tests/backend/cpu/test_vmath.c - the vectorised exp and GELU (backend/cpu/vmath.c)
 * against double precision over a dense sweep and at the special values
 * (NaN, +-inf, the underflow and overflow edges), at every SIMD level this
 * CPU has, with lengths that leave a scalar tail.
 * TG_TEST_LABELS: isa */
#include "tg_test.h"

#include "backend/cpu/simd.h"
#include "backend/cpu/vmath.h"

#include <math.h>
#include <stdlib.h>

#define N 4003 /* not a multiple of 8: the tail runs too */

static double phi(double x)
{
    return 0.5 * erfc(-x / sqrt(2.0));
}

/* |got - want| <= rel * |want| + abs */
static void near(const char *what, double x, double got, double want, double rel, double abs)
{
    if (isnan(want) ? !isnan(got) : !(fabs(got - want) <= rel * fabs(want) + abs))
        tg_test_fail(__FILE__, __LINE__, "%s(%.9g) = %.9g, want %.9g (%s)", what, x, got, want,
                     tg_simd_level_name(tg_simd_level_get()));
}

static void check_level(void)
{
    static float x[N], y[N], dy[N];
    for (int i = 0; i < N; i++) {
        x[i] = -100.0f + 190.0f * (float)i / (N - 1); /* [-100, 90] */
        dy[i] = 1.0f + (float)(i % 7) * 0.25f;
    }
    double want_sum = 0;
    for (int i = 0; i < N; i++)
        want_sum += exp((double)(x[i] - 3.0f));
    double sum = tg_vexp_sum(x, y, N, 3.0f);
    for (int i = 0; i < N; i++) {
        double w = exp((double)(x[i] - 3.0f));
        if (x[i] - 3.0f < -87.3f)
            near("exp", x[i], y[i], 0.0, 0, 1e-37); /* below the edge: 0 */
        else if (isinf((float)w))
            TG_CHECK(isinf(y[i]) && y[i] > 0);
        else
            near("exp", x[i], y[i], w, 3e-7, 0);
    }
    if (isfinite(want_sum) && !(fabs(sum - want_sum) <= 1e-6 * want_sum))
        tg_test_fail(__FILE__, __LINE__, "exp sum %.9g, want %.9g", sum, want_sum);
    /* GELU over [-20, 20]: relative accuracy in both tails, up to what the
     * rounding of x / sqrt(2) in float allows there (d erfc(z) / erfc(z)
     * is about 2 z dz, dz = z 2^-24) */
    for (int i = 0; i < N; i++)
        x[i] = -20.0f + 40.0f * (float)i / (N - 1);
    tg_vgelu(x, y, N);
    for (int i = 0; i < N; i++) {
        double g = x[i] * phi(x[i]);
        near("gelu", x[i], y[i], g, 1e-6 + 2e-7 * x[i] * x[i], 1e-37);
    }
    tg_vgelu_bwd(dy, x, y, N);
    for (int i = 0; i < N; i++) {
        double v = x[i],
               d = dy[i] * (phi(v) + v * exp(-0.5 * v * v) / sqrt(2 * 3.14159265358979323846));
        /* near gelu' = 0 (x about -0.75) the sum cancels: an absolute term */
        near("gelu_bwd", x[i], y[i], d, 1e-6 + 2e-7 * v * v, 3e-7);
    }
    /* the tanh form against double, written without cancelling (1 + tanh(u)
     * = 2 / (1 + e^(-2u))), up to the rounding of 2u in float */
    tg_vgelu_tanh(x, y, N);
    for (int i = 0; i < N; i++) {
        double v = x[i], u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
        near("gelu_tanh", x[i], y[i], v / (1 + exp(-2 * u)), 2e-6 + 2e-7 * fabs(2 * u), 1e-37);
    }
    tg_vgelu_tanh_bwd(dy, x, y, N);
    for (int i = 0; i < N; i++) {
        double v = x[i], u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
        double e = exp(-2 * u), s = 1 / (1 + e);
        double du = 0.7978845608028654 * (1 + 3 * 0.044715 * v * v);
        near("gelu_tanh_bwd", x[i], y[i], dy[i] * (s + v * s * (e * s) * 2 * du),
             2e-6 + 2e-7 * fabs(2 * u), 1e-6);
    }
    /* special values */
    float sp[9] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 88.7f, 88.8f, -87.2f, -87.4f}, out[9];
    tg_vexp_sum(sp, out, 9, 0.0f);
    TG_CHECK(isnan(out[0]));
    TG_CHECK(isinf(out[1]) && out[1] > 0);
    TG_CHECK(out[2] == 0.0f && out[3] == 1.0f && out[4] == 1.0f);
    near("exp", sp[5], out[5], exp((double)sp[5]), 3e-7, 0); /* below FLT_MAX */
    TG_CHECK(isinf(out[6]));
    near("exp", sp[7], out[7], exp((double)sp[7]), 1e-6, 0);
    TG_CHECK(out[8] >= 0.0f && out[8] < 1.2e-38f); /* 0, or expf's denormal */
    tg_vgelu(sp, out, 9);
    TG_CHECK(isnan(out[0]));
    TG_CHECK(isinf(out[1]) && out[1] > 0);
    TG_CHECK(out[3] == 0.0f);
    near("gelu", sp[5], out[5], sp[5], 1e-7, 0);
    near("gelu", -87.2, out[7], 0.0, 0, 1e-30);
    float ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    tg_vgelu_bwd(ones, sp, out, 9);
    TG_CHECK(isnan(out[0]));
    near("gelu_bwd", 0.0, out[3], 0.5, 1e-7, 0);
    near("gelu_bwd", sp[5], out[5], 1.0, 1e-7, 0);
}

/* tg_vmax is the scalar loop m = x > m ? x : m, NaN skipped, at every
 * length around the 8- and 32-wide steps and with the largest anywhere. */
static void check_max(void)
{
    static float x[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)((i * 37) % 101) - 50.0f;
    for (int n = 0; n <= 70; n++)
        for (int at = 0; at < n; at += 3) {
            float keep = x[at];
            x[at] = 1000.0f + (float)at;
            float want = -INFINITY;
            for (int i = 0; i < n; i++)
                want = x[i] > want ? x[i] : want;
            float got = tg_vmax(x, n, -INFINITY);
            if (got != want)
                tg_test_fail(__FILE__, __LINE__, "max of %d (largest at %d): %g, want %g (%s)", n,
                             at, got, want, tg_simd_level_name(tg_simd_level_get()));
            x[at] = keep;
        }
    float sp[40];
    for (int i = 0; i < 40; i++)
        sp[i] = i % 5 == 0 ? NAN : -(float)i;
    sp[33] = INFINITY;
    TG_CHECK(tg_vmax(sp, 40, -INFINITY) == INFINITY);
    sp[33] = -1e30f;
    TG_CHECK(tg_vmax(sp, 40, -INFINITY) == -1.0f); /* the NaNs skipped */
    for (int i = 0; i < 40; i++)
        sp[i] = NAN;
    TG_CHECK(tg_vmax(sp, 40, -INFINITY) == -INFINITY);
    TG_CHECK(tg_vmax(sp, 0, 2.0f) == 2.0f);
    /* tg_vscale: each element times the factor, the tail too */
    for (int n = 0; n <= 19; n++) {
        float y[19];
        for (int i = 0; i < n; i++)
            y[i] = (float)i - 3.5f;
        tg_vscale(y, n, 0.3f);
        for (int i = 0; i < n; i++)
            if (y[i] != ((float)i - 3.5f) * 0.3f)
                tg_test_fail(__FILE__, __LINE__, "scale of %d, element %d: %g", n, i, y[i]);
    }
}

static void test_every_level(void)
{
    tg_simd_level best = tg_simd_level_get();
    for (int l = TG_SIMD_BASE; l <= (int)best; l++) {
        tg_simd_cap((tg_simd_level)l);
        check_level();
        check_max();
    }
    tg_simd_cap(best);
    TG_CHECK(tg_simd_level_get() == best);
}

int main(void)
{
    TG_RUN(test_every_level);
    return tg_test_finish();
}
