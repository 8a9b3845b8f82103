/* tests/backend/cpu/test_norm_accuracy.c - batch norm's long reductions against
 * sums in double: the statistics (mean, variance) and the backward sums
 * (sum dy, sum dy (x - mean)) over N x H x W values a channel whose mean is
 * far from zero, in both layouts (NCHW, ops/norm.c; nChw16c,
 * backend/cpu/norm_blocked.c), must be within about one rounding of the result:
 * summing a whole H x W plane in float lanes was many ulps off here. The
 * blocked kernels reading bf16 operands give the same bits as reading
 * their values in f32. Layer norm's dgamma and dbeta, summed down many rows,
 * likewise.
 * TG_TEST_LABELS: isa */
#include "backend/backend.h"
#include "tg_test.h"

#include "backend/cpu/blocked.h"
#include "ops/op.h"
#include "tilegraph/dtype.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CB TG_CHANNEL_BLOCK

enum { N = 2, C = 32, H = 64, W = 64, HW = H * W, COUNT = N * HW, NX = N * C * HW };

static uint32_t lcg(uint32_t *r)
{
    *r = *r * 1664525u + 1013904223u;
    return *r >> 8;
}

/* uniform in [-1, 1) */
static double unit(uint32_t *r)
{
    return (double)lcg(r) / 8388608.0 - 1.0;
}

static float ulp(double v)
{
    float f = fabsf((float)v);
    return nextafterf(f, INFINITY) - f;
}

typedef struct bn_ops {
    tg_graph *g;
    tg_tensor *stats, *bwd_stats, *bwd_affine;
} bn_ops;

/* NORM_STATS(x), NORM_APPLY_BWD_STATS(dy, x, stats, gamma) and
 * NORM_APPLY_BWD_AFFINE(dy, x, stats) of batch norm on x [N, C, H, W]. */
static bn_ops build(void)
{
    bn_ops o = {tg_graph_create(), NULL, NULL, NULL};
    tg_graph_set_training(o.g, true);
    tg_tensor *x = tg_input(o.g, "x", TG_F32, tg_shape4(N, C, H, W));
    tg_tensor *dy = tg_input(o.g, "dy", TG_F32, tg_shape4(N, C, H, W));
    tg_tensor *gamma = tg_param(o.g, "gamma", tg_shape1(C), (tg_init){TG_INIT_CONSTANT, 1, 0});
    tg_tensor *y = tg_batch_norm(o.g, x, gamma, NULL, NULL, 1e-5f);
    TG_CHECK_OK(tg_graph_status(o.g));
    if (!y)
        return o;
    o.stats = y->in[1];
    o.bwd_stats = tg_node_create(o.g, TG_OP_NORM_APPLY_BWD_STATS, 4,
                                 (tg_tensor *[]){dy, x, o.stats, gamma}, &y->p);
    o.bwd_affine =
        tg_node_create(o.g, TG_OP_NORM_APPLY_BWD_AFFINE, 3, (tg_tensor *[]){dy, x, o.stats}, &y->p);
    TG_CHECK(o.bwd_stats && o.bwd_affine);
    return o;
}

static void to_blocked(const float *src, float *dst)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t k = 0; k < HW; k++)
                dst[((n * (C / CB) + c / CB) * HW + k) * CB + c % CB] = src[(n * C + c) * HW + k];
}

/* Runs t's kernel on two threads; big operands in NCHW or, blocked, in
 * nChw16c, each as f32 or (bf16[k]) as the bf16 of its values. */
static void run(const tg_tensor *t, const void *const *in, bool blocked, const bool *bf16,
                float *out, tg_pool *pool)
{
    tg_kernel_args a = {.node = t, .out = out, .pool = pool, .blocked = blocked};
    void *owned[TG_MAX_INPUTS] = {0};
    for (int k = 0; k < t->n_in; k++) {
        a.in[k] = (void *)in[k];
        if (t->in[k]->shape.ndim != 4)
            continue;
        float *b = malloc(NX * sizeof *b);
        if (blocked)
            to_blocked(in[k], b);
        else
            memcpy(b, in[k], NX * sizeof *b);
        a.in[k] = owned[k] = b;
        if (bf16 && bf16[k]) {
            uint16_t *h = malloc(NX * sizeof *h);
            tg_f32_to_bf16_array(b, h, NX);
            free(b);
            a.in[k] = owned[k] = h;
            a.in_type[k] = TG_BF16;
        }
    }
    tg_backend_cpu.kernel(t->op)->forward(&a);
    for (int k = 0; k < t->n_in; k++)
        free(owned[k]);
}

/* The largest error of got[] against want[] in ulps of want. */
static double max_ulps(const float *got, const double *want, int n, int *at)
{
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / ulp(want[i]);
        if (e > worst)
            worst = e, *at = i;
    }
    return worst;
}

static void expect_within(const char *what, const char *layout, const float *got,
                          const double *want, int n, double tol)
{
    int at = 0;
    double e = max_ulps(got, want, n, &at);
    if (e > tol)
        tg_test_fail(__FILE__, __LINE__,
                     "%s (%s) [%d]: %.9g, in double %.9g: %.2f ulps (at most %g)", what, layout, at,
                     got[at], want[at], e, tol);
}

/* For sums that cancel to far below their terms (sum dy (x - mean)), ulps
 * of the result say little: the error against the rounding noise of the
 * float products themselves, 2^-24 sqrt(sum t^2) (floor[], scaled as the
 * result), which the kernels cannot avoid; one float accumulator a lane
 * over a plane was 10 to 36 times that here (layer norm's column down the
 * rows 72), the blocked sums about 2. */
static void expect_near_floor(const char *what, const char *layout, const float *got,
                              const double *want, const double *floor, int n, double tol)
{
    for (int i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / floor[i];
        if (e > tol) {
            tg_test_fail(__FILE__, __LINE__,
                         "%s (%s) [%d]: %.9g, in double %.9g: %.2f times the products' rounding "
                         "(at most %g)",
                         what, layout, i, got[i], want[i], e, tol);
            return;
        }
    }
}

/* x: channel c has mean 100 (c + 1) and spread 1, so its values are far
 * from its mean's scale; dy: mean 1 + c / 8, spread 0.25, so sum dy is a
 * long sum of like-signed values. */
static void fill(float *x, float *dy)
{
    uint32_t r = 7;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t k = 0; k < HW; k++) {
                int64_t i = (n * C + c) * HW + k;
                x[i] = (float)(100.0 * (double)(c + 1) + unit(&r));
                dy[i] = (float)(1.0 + (double)c / 8 + 0.25 * unit(&r));
            }
}

static void test_batch_norm_sums(void)
{
    bn_ops o = build();
    if (!o.bwd_affine) {
        tg_graph_destroy(o.g);
        return;
    }
    float *x = malloc(NX * sizeof *x), *dy = malloc(NX * sizeof *dy);
    fill(x, dy);
    /* in double: the statistics, and the sums the backward ops take from
     * the statistics rounded to f32 (as the kernels are given them) */
    double mean[C], var[C], s1[C], s2[C], want_bs[2 * C], want_af[2 * C];
    double floor_dvar[C], floor_dgamma[C];
    float stats[2 * C], gamma[C];
    for (int c = 0; c < C; c++) {
        double s = 0, ss = 0;
        for (int n = 0; n < N; n++)
            for (int k = 0; k < HW; k++)
                s += x[(n * C + c) * HW + k];
        mean[c] = s / COUNT;
        for (int n = 0; n < N; n++)
            for (int k = 0; k < HW; k++) {
                double d = x[(n * C + c) * HW + k] - mean[c];
                ss += d * d;
            }
        var[c] = ss / COUNT;
        stats[c] = (float)mean[c], stats[C + c] = (float)var[c];
        gamma[c] = 0.5f + (float)c / 16;
        s1[c] = s2[c] = 0;
        double sq = 0;
        for (int n = 0; n < N; n++)
            for (int k = 0; k < HW; k++) {
                int64_t i = (n * C + c) * HW + k;
                s1[c] += dy[i];
                /* x - mean is exact in f32 here (Sterbenz), the product not */
                float t = dy[i] * (x[i] - stats[c]);
                s2[c] += t;
                sq += (double)t * t;
            }
        double r = 1.0f / sqrtf(stats[C + c] + 1e-5f); /* the kernels' f32 rstd */
        want_bs[c] = -r * gamma[c] * s1[c];
        want_bs[C + c] = -0.5 * r * r * r * gamma[c] * s2[c];
        want_af[c] = s2[c] * r;
        want_af[C + c] = s1[c];
        floor_dvar[c] = 0.5 * r * r * r * gamma[c] * ldexp(sqrt(sq), -24);
        floor_dgamma[c] = r * ldexp(sqrt(sq), -24);
    }
    tg_pool *pool = tg_pool_create(2);
    float got[2 * C], got_bf16[2 * C], got_f32[2 * C];
    for (int blocked = 0; blocked <= 1; blocked++) {
        const char *layout = blocked ? "nChw16c" : "NCHW";
        run(o.stats, (const void *[]){x}, blocked, NULL, got, pool);
        expect_within("mean", layout, got, mean, C, 1.0);
        expect_within("variance", layout, got + C, var, C, 1.0);
        run(o.bwd_stats, (const void *[]){dy, x, stats, gamma}, blocked, NULL, got, pool);
        expect_within("dmean", layout, got, want_bs, C, 1.0);
        expect_near_floor("dvar", layout, got + C, want_bs + C, floor_dvar, C, 3.0);
        run(o.bwd_affine, (const void *[]){dy, x, stats}, blocked, NULL, got, pool);
        expect_near_floor("dgamma", layout, got, want_af, floor_dgamma, C, 3.0);
        expect_within("dbeta", layout, got + C, want_af + C, C, 1.0);
    }
    /* bf16 operands: the same bits as their values read in f32 */
    float *xh = malloc(NX * sizeof *xh), *dyh = malloc(NX * sizeof *dyh);
    uint16_t *h = malloc(NX * sizeof *h);
    tg_f32_to_bf16_array(x, h, NX);
    tg_bf16_to_f32_array(h, xh, NX);
    tg_f32_to_bf16_array(dy, h, NX);
    tg_bf16_to_f32_array(h, dyh, NX);
    const tg_tensor *ts[] = {o.stats, o.bwd_stats, o.bwd_affine};
    const void *ins[][4] = {{xh}, {dyh, xh, stats, gamma}, {dyh, xh, stats}};
    for (int k = 0; k < 3; k++) {
        run(ts[k], ins[k], true, NULL, got_f32, pool);
        run(ts[k], ins[k], true, (const bool[]){true, true, false, false}, got_bf16, pool);
        if (memcmp(got_f32, got_bf16, sizeof got_f32) != 0)
            tg_test_fail(__FILE__, __LINE__, "%s: bf16 operands give other bits than f32",
                         tg_op_name(ts[k]->op));
    }
    free(h);
    free(xh);
    free(dyh);
    tg_pool_destroy(pool);
    free(x);
    free(dy);
    tg_graph_destroy(o.g);
}

/* Layer norm over 64 features of 8192 rows: dgamma and dbeta sum down the
 * rows. */
static void test_layer_norm_affine(void)
{
    enum { ROWS = 8192, F = 64 };
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, true);
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(ROWS, F));
    tg_tensor *dy = tg_input(g, "dy", TG_F32, tg_shape2(ROWS, F));
    tg_tensor *y = tg_layer_norm(g, x, 1, NULL, NULL, 1e-5f);
    tg_tensor *aff = y ? tg_node_create(g, TG_OP_NORM_APPLY_BWD_AFFINE, 3,
                                        (tg_tensor *[]){dy, x, y->in[1]}, &y->p)
                       : NULL;
    TG_CHECK(aff != NULL);
    if (!aff) {
        tg_graph_destroy(g);
        return;
    }
    float *xv = malloc(ROWS * F * sizeof *xv), *dv = malloc(ROWS * F * sizeof *dv);
    float *stats = malloc(2 * ROWS * sizeof *stats), got[2 * F];
    uint32_t r = 11;
    for (int i = 0; i < ROWS * F; i++) {
        xv[i] = (float)unit(&r);
        dv[i] = (float)(1.0 + 0.25 * unit(&r));
    }
    double want[2 * F] = {0}, sq[F] = {0};
    for (int a = 0; a < ROWS; a++) {
        double s = 0, ss = 0;
        for (int c = 0; c < F; c++)
            s += xv[a * F + c];
        for (int c = 0; c < F; c++)
            ss += (xv[a * F + c] - s / F) * (xv[a * F + c] - s / F);
        stats[a] = (float)(s / F), stats[ROWS + a] = (float)(ss / F);
        float rstd = 1.0f / sqrtf(stats[ROWS + a] + 1e-5f);
        for (int c = 0; c < F; c++) {
            int i = a * F + c;
            float t = dv[i] * (xv[i] - stats[a]) * rstd; /* the kernel's f32 terms */
            want[c] += t;
            sq[c] += (double)t * t;
            want[F + c] += dv[i];
        }
    }
    tg_pool *pool = tg_pool_create(2);
    tg_kernel_args k = {.node = aff, .in = {dv, xv, stats}, .out = got, .pool = pool};
    tg_backend_cpu.kernel(TG_OP_NORM_APPLY_BWD_AFFINE)->forward(&k);
    for (int c = 0; c < F; c++)
        sq[c] = ldexp(sqrt(sq[c]), -24);
    expect_near_floor("layer norm dgamma", "rows", got, want, sq, F, 3.0);
    expect_within("layer norm dbeta", "rows", got + F, want + F, F, 1.0);
    tg_pool_destroy(pool);
    free(xv);
    free(dv);
    free(stats);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_batch_norm_sums);
    TG_RUN(test_layer_norm_affine);
    return tg_test_finish();
}
