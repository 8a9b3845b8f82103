/* backend/cpu/norm_kernels.c - the cpu backend's plain (NCHW) kernels for
 * the normalisation ops (ops/norm.c is what they are): element-wise rows and
 * per-group and per-channel sums widened to double in blocks, over the
 * device's pool; layer norm's forward ops read bf16-stored operands in place
 * a row at a time. Batch norm of a 4-D x runs blocked in norm_blocked.c,
 * which the table's wrapper calls first. */
#include "backend/backend.h"
#include "ops/broadcast.h"
#include "ops/norm.h"

#include "core/bf16.h"
#include "core/clones.h"
#include "core/error.h"

#include <math.h>
#include <string.h>

/* 16-float vectors pass between static functions of this file only, so
 * the note that their calling convention differs with AVX-512 is moot. */
#pragma GCC diagnostic ignored "-Wpsabi"

/* The fast kernels: ranges of "rows" (a*Caff rows of b elements, or for
 * layer norm G rows of inner elements), one thread per range. */
typedef struct norm_job {
    const tg_tensor *node;
    tg_norm_view v;
    const float *in[4];
    float *out;
    float eps;
} norm_job;

/* Per-group mean and rstd from stats (float kernels). */
static inline void mean_rstd(const float *stats, int64_t G, int64_t g, float eps, float *mean,
                             float *rstd)
{
    *mean = stats[g];
    *rstd = 1.0f / sqrtf(stats[G + g] + eps);
}

/* Rows: for layer norm a row is one group (inner elements, gamma along it);
 * otherwise a row is (o, c): b elements sharing group and gamma[c]. */
static bool is_layer(const tg_tensor *node)
{
    return tg_norm_mode(node) == TG_NORM_LAYER;
}

static int64_t n_rows(const tg_tensor *node, const tg_norm_view *v)
{
    return is_layer(node) ? v->G : v->a * v->Caff;
}

static void elementwise_rows(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const norm_job *j = ctx;
    const tg_norm_view *v = &j->v;
    const tg_tensor *node = j->node;
    bool layer = is_layer(node);
    int64_t len = layer ? v->inner : v->b;
    bool has_g = tg_norm_has_gamma(node) != 0, has_b = tg_norm_has_beta(node) != 0;
    for (int64_t r = begin; r < end; r++) {
        int64_t base = r * len;
        int64_t grp = layer ? r : tg_norm_group_of(v, base), c = layer ? 0 : r % v->Caff;
        float *o = j->out + base;
        switch (node->op) {
        case TG_OP_NORM_APPLY: {
            const float *x = j->in[0] + base, *st = j->in[1];
            const float *gam = has_g ? j->in[2] : NULL, *bet = has_b ? j->in[2 + has_g] : NULL;
            float mean, rstd;
            mean_rstd(st, v->G, grp, j->eps, &mean, &rstd);
            if (layer) {
                for (int64_t i = 0; i < len; i++) {
                    float y = (x[i] - mean) * rstd;
                    o[i] = y * (gam ? gam[i] : 1.0f) + (bet ? bet[i] : 0.0f);
                }
            } else {
                float s = rstd * (gam ? gam[c] : 1.0f), sh = (bet ? bet[c] : 0.0f) - mean * s;
                for (int64_t i = 0; i < len; i++)
                    o[i] = x[i] * s + sh;
            }
            break;
        }
        case TG_OP_NORM_APPLY_BWD_X: {
            const float *dy = j->in[0] + base, *st = j->in[1], *gam = has_g ? j->in[2] : NULL;
            float mean, rstd;
            mean_rstd(st, v->G, grp, j->eps, &mean, &rstd);
            if (layer)
                for (int64_t i = 0; i < len; i++)
                    o[i] = dy[i] * rstd * (gam ? gam[i] : 1.0f);
            else {
                float s = rstd * (gam ? gam[c] : 1.0f);
                for (int64_t i = 0; i < len; i++)
                    o[i] = dy[i] * s;
            }
            break;
        }
        case TG_OP_NORM_STATS_BWD: { /* dx = dmean / n + dvar * 2 (x - mean) / n */
            const float *ds = j->in[0], *x = j->in[1] + base, *st = j->in[2];
            float inv_n = 1.0f / (float)v->count, mean = st[grp];
            /* 2 / n first: 2 * d(var) alone overflows when d(var) is past half
             * of float's range (batch norm over 2 values, whose variance is
             * about eps: ResNet-101 at 16 x 16), while the product is finite */
            float a0 = ds[grp] * inv_n, a1 = ds[v->G + grp] * (2.0f * inv_n);
            for (int64_t i = 0; i < len; i++)
                o[i] = a0 + a1 * (x[i] - mean);
            break;
        }
        default:
            TG_UNREACHABLE_OP(node->op);
        }
    }
}

/* Sums over one run of contiguous elements, blocked: each block of
 * SUM_BLOCK elements is summed in 8 x 4 float lanes (GCC and clang vector
 * types, SSE2 on any x86-64), 4 values a lane, the lanes pairwise, and the
 * block's partial sum is added in double, as are the runs. The error then
 * stays that of a few float roundings whatever the run's length (a run is
 * a whole H x W plane, 12544 values at 112 x 112), where one float
 * accumulator per lane over the run grows with its length: with a large
 * mean (inputs offset from zero) that shifted the mean, and so every
 * normalised value, by many ulps. Short blocks matter too: deviations from
 * a large mean are multiples of the mean's ulp, their squares are exact,
 * and adding them to a float partial rounds one way more often than the
 * other, a bias that grows with the block (on the data of
 * tests/backend/cpu/test_norm_accuracy.c about 0.2 ulps of the variance at 4
 * values a lane, 1 ulp at 16). Plain loops here stay scalar: the compiler
 * will not reassociate a float sum by itself. */
typedef float v4f __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));

/* elements per float partial sum: 4 a lane of 8 accumulators x 4 lanes */
enum { SUM_BLOCK = 128 };

static inline v4f load4(const float *p)
{
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline int64_t block_end(int64_t i, int64_t n, int64_t block)
{
    return n - i > block ? i + block : n;
}

/* s[0..2) += a block's 8 accumulators added pairwise, widened to double
 * (two 2-double vectors: a 4-double one is no SSE2 register). */
static inline void add_widened(v2d *s, v4f a, v4f b, v4f c, v4f d, v4f e, v4f f, v4f g, v4f h)
{
    v4f t = ((a + b) + (c + d)) + ((e + f) + (g + h));
    s[0] += (v2d){t[0], t[1]};
    s[1] += (v2d){t[2], t[3]};
}

static inline double hsum4d(const v2d *s)
{
    return (s[0][0] + s[0][1]) + (s[1][0] + s[1][1]);
}

/* x, or with sq its squared deviation from m (4 elements) */
static inline __attribute__((always_inline)) v4f term(const float *p, bool sq, v4f m)
{
    v4f v = load4(p), d = v - m;
    return sq ? d * d : v;
}

/* The sum of x[0..n), or with sq of (x - mean)^2: per block 32 elements a
 * step into the 8 accumulators (then 16 into the first 4); what the blocks
 * leave (fewer than 16) in double. */
static inline __attribute__((always_inline)) double blocked_sum(const float *x, int64_t n, bool sq,
                                                                float mean)
{
    v4f m = {mean, mean, mean, mean};
    v2d s[2] = {{0}};
    int64_t i = 0;
    while (i + 16 <= n) {
        v4f a = {0}, b = a, c = a, d = a, e = a, f = a, g = a, h = a;
        int64_t end = block_end(i, n, SUM_BLOCK);
        for (; i + 32 <= end; i += 32) {
            const float *p = x + i;
            a += term(p, sq, m), b += term(p + 4, sq, m), c += term(p + 8, sq, m);
            d += term(p + 12, sq, m), e += term(p + 16, sq, m), f += term(p + 20, sq, m);
            g += term(p + 24, sq, m), h += term(p + 28, sq, m);
        }
        if (i + 16 <= end) {
            const float *p = x + i;
            a += term(p, sq, m), b += term(p + 4, sq, m), c += term(p + 8, sq, m);
            d += term(p + 12, sq, m);
            i += 16;
        }
        add_widened(s, a, b, c, d, e, f, g, h);
    }
    double r = hsum4d(s);
    for (; i < n; i++)
        r += sq ? (double)(x[i] - mean) * (x[i] - mean) : (double)x[i];
    return r;
}

static double run_sum(const float *x, int64_t n)
{
    return blocked_sum(x, n, false, 0.0f);
}

static double run_sq_dev(const float *x, int64_t n, float mean)
{
    return blocked_sum(x, n, true, mean);
}

/* *s1 += sum g dy, *s2 += sum g dy (x - mean), with g[i] (or 1 if g is
 * NULL); blocks of SUM_BLOCK / 2 elements in 4 + 4 accumulators, 4 values
 * a lane, as above. */
static void run_dy_sums(const float *dy, const float *x, const float *g, int64_t n, float mean,
                        double *s1, double *s2)
{
    v4f m = {mean, mean, mean, mean}, z = {0};
    v2d sa[2] = {{0}}, sb[2] = {{0}};
    int64_t i = 0;
    while (i + 16 <= n) {
        v4f a0 = {0}, a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        for (int64_t e = block_end(i, n, SUM_BLOCK / 2); i + 16 <= e; i += 16) {
            v4f d0 = load4(dy + i), d1 = load4(dy + i + 4);
            v4f d2 = load4(dy + i + 8), d3 = load4(dy + i + 12);
            if (g) {
                d0 *= load4(g + i), d1 *= load4(g + i + 4);
                d2 *= load4(g + i + 8), d3 *= load4(g + i + 12);
            }
            a0 += d0, a1 += d1, a2 += d2, a3 += d3;
            b0 += d0 * (load4(x + i) - m), b1 += d1 * (load4(x + i + 4) - m);
            b2 += d2 * (load4(x + i + 8) - m), b3 += d3 * (load4(x + i + 12) - m);
        }
        add_widened(sa, a0, a1, a2, a3, z, z, z, z);
        add_widened(sb, b0, b1, b2, b3, z, z, z, z);
    }
    double a = hsum4d(sa), b = hsum4d(sb);
    for (; i < n; i++) {
        float d = dy[i] * (g ? g[i] : 1.0f);
        a += d;
        b += (double)d * (x[i] - mean);
    }
    *s1 += a;
    *s2 += b;
}

/* Reductions per group: NORM_STATS and NORM_APPLY_BWD_STATS. Each thread
 * owns a range of groups and walks the group's runs: outer x inner, and for
 * batch and group norm each inner part splits further into runs of b
 * elements sharing one gamma. */
static void group_reduce(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const norm_job *j = ctx;
    const tg_norm_view *v = &j->v;
    const tg_tensor *node = j->node;
    int64_t G = v->G;
    bool layer = is_layer(node), has_g = tg_norm_has_gamma(node) != 0;
    for (int64_t grp = begin; grp < end; grp++) {
        if (node->op == TG_OP_NORM_STATS) {
            /* two passes: the mean, then squared deviations from it
             * rounded to float, corrected by the rounding's square:
             * sum (x - m')^2 / n = var + (m - m')^2 (never E[x^2] - E[x]^2,
             * which cancels when the mean is large against the spread) */
            double s = 0, ss = 0;
            for (int64_t o = 0; o < v->outer; o++)
                s += run_sum(j->in[0] + (o * G + grp) * v->inner, v->inner);
            double mean = s / (double)v->count;
            float mean_f = (float)mean;
            for (int64_t o = 0; o < v->outer; o++)
                ss += run_sq_dev(j->in[0] + (o * G + grp) * v->inner, v->inner, mean_f);
            double shift = mean - (double)mean_f;
            j->out[grp] = mean_f;
            double var = ss / (double)v->count - shift * shift;
            j->out[G + grp] = (float)(var < 0 ? 0 : var); /* NaN stays NaN */
            continue;
        }
        /* BWD_STATS: dmean = -rstd sum(dy g), dvar = -rstd^3 / 2 sum(dy g (x - mean)) */
        const float *st = j->in[2], *gam = has_g ? j->in[3] : NULL;
        float mean, rstd;
        mean_rstd(st, G, grp, j->eps, &mean, &rstd);
        double s1 = 0, s2 = 0;
        for (int64_t o = 0; o < v->outer; o++) {
            int64_t base = (o * G + grp) * v->inner;
            const float *dy = j->in[0] + base, *x = j->in[1] + base;
            if (layer || !gam) {
                run_dy_sums(dy, x, layer ? gam : NULL, v->inner, mean, &s1, &s2);
                continue;
            }
            for (int64_t i = 0; i < v->inner; i += v->b) { /* one channel per run */
                double r1 = 0, r2 = 0;
                run_dy_sums(dy + i, x + i, NULL, v->b, mean, &r1, &r2);
                float gi = gam[((base + i) / v->b) % v->Caff];
                s1 += gi * r1;
                s2 += gi * r2;
            }
        }
        j->out[grp] = (float)(-rstd * s1);
        j->out[G + grp] = (float)(-0.5 * (double)rstd * rstd * rstd * s2);
    }
}

/* NORM_APPLY_BWD_AFFINE: dgamma[c] = sum dy * xhat, dbeta[c] = sum dy, each
 * thread owning a range of affine indices c. */
static void affine_reduce(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const norm_job *j = ctx;
    const tg_norm_view *v = &j->v;
    const float *dy = j->in[0], *x = j->in[1], *st = j->in[2];
    int64_t Caff = v->Caff;
    if (!is_layer(j->node)) { /* batch and group norm: runs of b elements per (a, c) */
        for (int64_t c = begin; c < end; c++) {
            double sg = 0, sb = 0;
            for (int64_t a = 0; a < v->a; a++) {
                int64_t base = (a * Caff + c) * v->b;
                float mean, rstd;
                mean_rstd(st, v->G, tg_norm_group_of(v, base), j->eps, &mean, &rstd);
                double rb = 0, rg = 0;
                run_dy_sums(dy + base, x + base, NULL, v->b, mean, &rb, &rg);
                sg += rg * rstd;
                sb += rb;
            }
            j->out[c] = (float)sg;
            j->out[Caff + c] = (float)sb;
        }
        return;
    }
    /* layer norm: rows of Caff contiguous elements, one group per row; the
     * sums down the rows (batch x sequence of them) in double, for a tile
     * of columns at a time so that the rows are still read along */
    enum { COLS = 128 };
    for (int64_t c0 = begin; c0 < end; c0 += COLS) {
        int64_t nc = end - c0 < COLS ? end - c0 : COLS;
        double sg[COLS] = {0}, sb[COLS] = {0};
        for (int64_t a = 0; a < v->a; a++) {
            float mean, rstd;
            mean_rstd(st, v->G, a, j->eps, &mean, &rstd);
            const float *dyr = dy + a * Caff + c0, *xr = x + a * Caff + c0;
            for (int64_t c = 0; c < nc; c++) {
                sg[c] += dyr[c] * (xr[c] - mean) * rstd;
                sb[c] += dyr[c];
            }
        }
        for (int64_t c = 0; c < nc; c++) {
            j->out[c0 + c] = (float)sg[c];
            j->out[Caff + c0 + c] = (float)sb[c];
        }
    }
}

/* ---- layer norm on bf16 storage, a row at a time ---------------------------------------- */

typedef struct layer_bf16_job {
    const tg_kernel_args *a;
    tg_norm_view v;
    float eps;
    const float *gam, *bet; /* widened once (NORM_APPLY; 1 and 0 where absent) */
} layer_bf16_job;

/* n values of operand v stored as `type` from element `at`, into f32 `to`
 * (the operand itself where it is f32). */
static const float *widened(const void *v, tg_dtype type, int64_t at, int64_t n, float *to)
{
    if (type != TG_BF16)
        return (const float *)v + at;
    tg_bf16_widen_run((const uint16_t *)v + at, to, (size_t)n);
    return to;
}

static void store(void *out, tg_dtype type, int64_t at, float value)
{
    if (type == TG_BF16)
        ((uint16_t *)out)[at] = tg_bf16_narrow(value);
    else
        ((float *)out)[at] = value;
}

/* The row's n values of operand v (stored as `type`) into f32 `to`, 16 at
 * a time by cv where bf16; the operand itself where it is f32. */
TG_VEC_INLINE const float *widened_row(const void *v, tg_dtype type, int64_t at, int64_t n,
                                       float *to, tg_bf16x16_ops cv)
{
    if (type != TG_BF16)
        return (const float *)v + at;
    const uint16_t *h = (const uint16_t *)v + at;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        tg_f32x16 f = cv.widen(h + i);
        memcpy(to + i, &f, sizeof f);
    }
    for (; i < n; i++)
        to[i] = tg_bf16_widen(h[i]);
    return to;
}

/* o[i] = ((x[i] - mean) * rstd) * gam[i] + bet[i], 16 at a time and the
 * tail: the same operations in the same order on every element (no
 * contraction in ISO C), so the bits of the scalar loop. */
TG_VEC_INLINE void apply_row(const float *x, const float *gam, const float *bet, float mean,
                             float rstd, float *o, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        tg_f32x16 xv, g, b;
        memcpy(&xv, x + i, sizeof xv), memcpy(&g, gam + i, sizeof g), memcpy(&b, bet + i, sizeof b);
        tg_f32x16 v = (xv - mean) * rstd;
        v = v * g + b;
        memcpy(o + i, &v, sizeof v);
    }
    for (; i < n; i++) {
        float v = (x[i] - mean) * rstd;
        o[i] = v * gam[i] + bet[i];
    }
}

/* Rows [begin, end) of a layer norm's NORM_STATS or NORM_APPLY whose
 * operands may be stored in bf16 (tg_kernel_args.in_type, out_type): each
 * row widened into the thread's stack, computed as the f32 kernels do
 * (the same bits as staging the whole tensor through f32), the result
 * rounded once as staging would; the conversions and the apply 16 at a
 * time (-O2 leaves the scalar loops unvectorised: the bf16 apply took 3x
 * the f32 one in MiniLM's profile). */
TG_VEC_INLINE void layer_bf16_loop(const layer_bf16_job *j, int64_t begin, int64_t end,
                                   tg_bf16x16_ops cv)
{
    const tg_kernel_args *a = j->a;
    int64_t len = j->v.inner, G = j->v.G;
    float row[TG_NORM_LAYER_ROW_MAX], y[TG_NORM_LAYER_ROW_MAX];
    for (int64_t r = begin; r < end; r++) {
        const float *x = widened_row(a->in[0], a->in_type[0], r * len, len, row, cv);
        if (a->node->op == TG_OP_NORM_STATS) {
            double mean = run_sum(x, len) / (double)len;
            float mean_f = (float)mean;
            double shift = mean - (double)mean_f;
            double var = run_sq_dev(x, len, mean_f) / (double)len - shift * shift;
            store(a->out, a->out_type, r, mean_f);
            store(a->out, a->out_type, G + r, (float)(var < 0 ? 0 : var));
            continue;
        }
        float st[2] = {tg_f32_or_bf16_at(a->in[1], a->in_type[1], r),
                       tg_f32_or_bf16_at(a->in[1], a->in_type[1], G + r)};
        float mean, rstd;
        mean_rstd(st, 1, 0, j->eps, &mean, &rstd);
        float *o = a->out_type == TG_BF16 ? y : (float *)a->out + r * len;
        apply_row(x, j->gam, j->bet, mean, rstd, o, len);
        if (a->out_type != TG_BF16)
            continue;
        tg_bf16_narrow_row(cv, (uint16_t *)a->out + r * len, y, len);
    }
}

TG_BF16_POOL_FNS(layer_bf16_rows, layer_bf16_loop, TG_BF16X16_GENERIC, TG_BF16X16_HW)

static void fwd_layer_bf16(const tg_kernel_args *a)
{
    layer_bf16_job j = {.a = a, .v = tg_norm_view_of(a->node), .eps = tg_norm_eps(a->node)};
    float gam[TG_NORM_LAYER_ROW_MAX], bet[TG_NORM_LAYER_ROW_MAX];
    if (a->node->op == TG_OP_NORM_APPLY) {
        int k = 2, len = (int)j.v.inner;
        /* absent: 1 and 0, which the row multiplies and adds as the scalar
         * form's `gam ? gam[i] : 1.0f` did (the same bits, -0 + 0 too) */
        for (int i = 0; i < len; i++)
            gam[i] = 1.0f, bet[i] = 0.0f;
        j.gam = gam, j.bet = bet;
        if (tg_norm_has_gamma(a->node))
            j.gam = widened(a->in[k], a->in_type[k], 0, len, gam), k++;
        if (tg_norm_has_beta(a->node))
            j.bet = widened(a->in[k], a->in_type[k], 0, len, bet);
    }
    int64_t n = tg_numel(a->node->in[0]);
    tg_par_for(a->pool, j.v.G, a->node->op == TG_OP_NORM_STATS ? 2 * n : n,
               TG_BF16_POOL_FN(layer_bf16_rows), &j);
}

static bool any_bf16(const tg_kernel_args *a)
{
    bool any = a->out_type == TG_BF16;
    for (int k = 0; k < a->node->n_in; k++)
        any |= a->in_type[k] == TG_BF16;
    return any;
}

/* Plain NCHW; the cpu backend runs blocked operands with
 * backend/cpu/norm_blocked.c before it calls this. */
static void fwd_norm(const tg_kernel_args *a)
{
    if (any_bf16(a)) {
        fwd_layer_bf16(a);
        return;
    }
    norm_job j = {
        .node = a->node, .v = tg_norm_view_of(a->node), .out = a->out, .eps = tg_norm_eps(a->node)};
    for (int k = 0; k < a->node->n_in && k < 4; k++)
        j.in[k] = a->in[k];
    int64_t n = tg_numel(tg_norm_shaped_input(a->node));
    switch (a->node->op) {
    case TG_OP_NORM_STATS:
    case TG_OP_NORM_APPLY_BWD_STATS:
        tg_par_for(a->pool, j.v.G, 2 * n, group_reduce, &j);
        break;
    case TG_OP_NORM_APPLY_BWD_AFFINE:
        tg_par_for(a->pool, j.v.Caff, 2 * n, affine_reduce, &j);
        break;
    case TG_OP_NORM_APPLY:
    case TG_OP_NORM_APPLY_BWD_X:
    case TG_OP_NORM_STATS_BWD:
        tg_par_for(a->pool, n_rows(a->node, &j.v), n, elementwise_rows, &j);
        break;
    default:
        TG_UNREACHABLE_OP(a->node->op);
    }
}

static void fwd_running(const tg_kernel_args *a)
{
    float *run = a->in[0];
    const float *st = a->in[1];
    int64_t C = a->node->in[0]->shape.dim[1];
    double m = tg_norm_momentum(a->node), n = (double)tg_norm_count(a->node);
    for (int64_t c = 0; c < C; c++) {
        run[c] = (float)((1 - m) * run[c] + m * st[c]);
        run[C + c] = (float)((1 - m) * run[C + c] + m * st[C + c] * n / (n - 1));
    }
}

/* Batch norm over a 4-D x (mode TG_NORM_BATCH) has blocked kernels
 * (backend/cpu/norm_blocked.c), which read and write bf16-stored operands as they
 * are; group and layer norm, and batch norm of other ranks, run NCHW, and
 * layer norm's forward ops read bf16 in place a row at a time
 * (layer_bf16_rows). */
static bool is_batch_norm_4d(const tg_tensor *node)
{
    const tg_tensor *x = node->op == TG_OP_NORM_STATS_BWD ? node->in[1] : node->in[0];
    return tg_norm_mode(node) == TG_NORM_BATCH && x->shape.ndim == 4;
}

static tg_op_layout norm_layout(const tg_tensor *node, int n_threads, bool inference)
{
    (void)n_threads, (void)inference;
    return is_batch_norm_4d(node) ? TG_LAYOUT_TIED : TG_LAYOUT_PLAIN;
}

static bool norm_reads_bf16(const tg_tensor *node, bool blocked)
{
    return (blocked && is_batch_norm_4d(node)) || (!blocked && tg_norm_reads_rows_bf16(node));
}

const tg_kernel_def tg_cpu_kernel_NORM_STATS = {
    .forward = fwd_norm, .layout = norm_layout, .reads_bf16 = norm_reads_bf16};
const tg_kernel_def tg_cpu_kernel_NORM_STATS_BWD = {
    .forward = fwd_norm, .layout = norm_layout, .reads_bf16 = norm_reads_bf16};
const tg_kernel_def tg_cpu_kernel_NORM_APPLY = {
    .forward = fwd_norm, .layout = norm_layout, .reads_bf16 = norm_reads_bf16};
const tg_kernel_def tg_cpu_kernel_NORM_APPLY_BWD_X = {
    .forward = fwd_norm, .layout = norm_layout, .reads_bf16 = norm_reads_bf16};
const tg_kernel_def tg_cpu_kernel_NORM_APPLY_BWD_STATS = {
    .forward = fwd_norm, .layout = norm_layout, .reads_bf16 = norm_reads_bf16};
const tg_kernel_def tg_cpu_kernel_NORM_APPLY_BWD_AFFINE = {
    .forward = fwd_norm, .layout = norm_layout, .reads_bf16 = norm_reads_bf16};
const tg_kernel_def tg_cpu_kernel_RUNNING_STATS_UPDATE = {.forward = fwd_running};
