/* ops/norm_blocked.c - batch norm's ops on blocked activations (ops/blocked.h).
 *
 * x [N, C, H, W] is stored [N][C/16][H*W][16]: a row (n, cb) is H*W
 * vectors of 16 channels. Element-wise ops walk rows with one scale and
 * shift vector per channel block; reductions give each thread a range of
 * channel blocks and sum each row in float lanes, rows in double, as the
 * NCHW kernels (ops/norm.c) sum runs in float and runs in double. The
 * formulas are those of norm.c's header.
 */
#include "ops/blocked.h"
#include "ops/broadcast.h"

#include <math.h>
#include <string.h>

#define B TG_CHANNEL_BLOCK
/* 16-float vectors pass between static functions of this file only, so
 * the note that their calling convention differs with AVX-512 is moot. */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float vb __attribute__((vector_size(B * sizeof(float))));

static inline vb load(const float *p)
{
    vb v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store(float *p, vb v)
{
    memcpy(p, &v, sizeof v);
}

static inline vb splat(float x)
{
    vb v;
    for (int i = 0; i < B; i++)
        v[i] = x;
    return v;
}

typedef struct norm_blocked {
    const tg_tensor *node;
    const float *in[4];
    float *out;
    int64_t N, C, CB, HW; /* CB = C / B blocks */
    float eps;
    bool has_g, has_b;
} norm_blocked;

static const float *row(const float *base, const norm_blocked *j, int64_t n, int64_t cb)
{
    return base + (n * j->CB + cb) * j->HW * B;
}

/* Per-lane mean and 1/sqrt(var + eps) of block cb from stats [2, C]. */
static void mean_rstd(const norm_blocked *j, const float *stats, int64_t cb, vb *mean, vb *rstd)
{
    for (int i = 0; i < B; i++) {
        int64_t c = cb * B + i;
        (*mean)[i] = stats[c];
        (*rstd)[i] = 1.0f / sqrtf(stats[j->C + c] + j->eps);
    }
}

static vb gamma_of(const float *gamma, int64_t cb)
{
    return gamma ? load(gamma + cb * B) : splat(1.0f);
}

/* sum over a row of f(x) per lane, in float, added to acc in double */
static void add_lanes(double *acc, vb s)
{
    for (int i = 0; i < B; i++)
        acc[i] += (double)s[i];
}

static void stats_block(const norm_blocked *j, int64_t cb)
{
    double s[B] = {0}, ss[B] = {0}, count = (double)(j->N * j->HW);
    for (int64_t n = 0; n < j->N; n++) {
        const float *x = row(j->in[0], j, n, cb);
        vb a = splat(0.0f);
        for (int64_t k = 0; k < j->HW; k++)
            a += load(x + k * B);
        add_lanes(s, a);
    }
    vb mean;
    for (int i = 0; i < B; i++)
        mean[i] = (float)(s[i] / count);
    for (int64_t n = 0; n < j->N; n++) {
        const float *x = row(j->in[0], j, n, cb);
        vb a = splat(0.0f);
        for (int64_t k = 0; k < j->HW; k++) {
            vb d = load(x + k * B) - mean;
            a += d * d;
        }
        add_lanes(ss, a);
    }
    for (int i = 0; i < B; i++) {
        j->out[cb * B + i] = mean[i];
        j->out[j->C + cb * B + i] = (float)(ss[i] / count);
    }
}

/* s1 = sum dy, s2 = sum dy (x - mean) per lane over block cb */
static void dy_sums(const norm_blocked *j, const float *dy, const float *x, vb mean, int64_t cb,
                    double *s1, double *s2)
{
    for (int64_t n = 0; n < j->N; n++) {
        const float *d = row(dy, j, n, cb), *xr = row(x, j, n, cb);
        vb a = splat(0.0f), b = splat(0.0f);
        for (int64_t k = 0; k < j->HW; k++) {
            vb v = load(d + k * B);
            a += v;
            b += v * (load(xr + k * B) - mean);
        }
        add_lanes(s1, a);
        add_lanes(s2, b);
    }
}

/* NORM_APPLY_BWD_STATS (dy, x, stats, gamma?) and NORM_APPLY_BWD_AFFINE
 * (dy, x, stats): both from the sums of dy and dy (x - mean). */
static void bwd_sums_block(const norm_blocked *j, int64_t cb)
{
    vb mean, rstd;
    mean_rstd(j, j->in[2], cb, &mean, &rstd);
    double s1[B] = {0}, s2[B] = {0};
    dy_sums(j, j->in[0], j->in[1], mean, cb, s1, s2);
    bool stats = j->node->op == TG_OP_NORM_APPLY_BWD_STATS;
    vb g = gamma_of(stats && j->has_g ? j->in[3] : NULL, cb);
    for (int i = 0; i < B; i++) {
        int64_t c = cb * B + i;
        double r = rstd[i];
        if (stats) {
            j->out[c] = (float)(-r * g[i] * s1[i]);
            j->out[j->C + c] = (float)(-0.5 * r * r * r * g[i] * s2[i]);
        } else {
            j->out[c] = (float)(s2[i] * r);
            j->out[j->C + c] = (float)s1[i];
        }
    }
}

static void reduce_blocks(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const norm_blocked *j = ctx;
    for (int64_t cb = begin; cb < end; cb++) {
        if (j->node->op == TG_OP_NORM_STATS)
            stats_block(j, cb);
        else
            bwd_sums_block(j, cb);
    }
}

/* The element-wise ops over row r = (n, cb), each lane with the NCHW
 * kernel's formula (ops/norm.c), so both layouts give the same bits. */
static void elementwise_row(const norm_blocked *j, int64_t r)
{
    int64_t cb = r % j->CB, off = r * j->HW * B;
    float *y = j->out + off;
    vb mean, rstd;
    switch (j->node->op) {
    case TG_OP_NORM_APPLY: { /* (x, stats, gamma?, beta?): x s + (beta - mean s) */
        mean_rstd(j, j->in[1], cb, &mean, &rstd);
        vb s = rstd * gamma_of(j->has_g ? j->in[2] : NULL, cb);
        vb sh = (j->has_b ? load(j->in[2 + j->has_g] + cb * B) : splat(0.0f)) - mean * s;
        const float *x = j->in[0] + off;
        for (int64_t k = 0; k < j->HW; k++)
            store(y + k * B, load(x + k * B) * s + sh);
        break;
    }
    case TG_OP_NORM_APPLY_BWD_X: { /* (dy, stats, gamma?): dy s */
        mean_rstd(j, j->in[1], cb, &mean, &rstd);
        vb s = rstd * gamma_of(j->has_g ? j->in[2] : NULL, cb);
        const float *dy = j->in[0] + off;
        for (int64_t k = 0; k < j->HW; k++)
            store(y + k * B, load(dy + k * B) * s);
        break;
    }
    default: { /* NORM_STATS_BWD (dstats, x, stats): a0 + a1 (x - mean) */
        const float *ds = j->in[0], *x = j->in[1] + off;
        float inv_n = 1.0f / (float)(j->N * j->HW);
        vb a0, a1;
        for (int i = 0; i < B; i++) {
            int64_t c = cb * B + i;
            a0[i] = ds[c] * inv_n;
            a1[i] = 2.0f * ds[j->C + c] * inv_n;
            mean[i] = j->in[2][c];
        }
        for (int64_t k = 0; k < j->HW; k++)
            store(y + k * B, a0 + a1 * (load(x + k * B) - mean));
        break;
    }
    }
}

static void elementwise_rows(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    for (int64_t r = begin; r < end; r++)
        elementwise_row(ctx, r);
}

void tg_norm_blocked_run(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    const tg_tensor *x = node->op == TG_OP_NORM_STATS_BWD ? node->in[1] : node->in[0];
    norm_blocked j = {.node = node,
                      .out = a->out,
                      .N = x->shape.dim[0],
                      .C = x->shape.dim[1],
                      .CB = x->shape.dim[1] / B,
                      .HW = x->shape.dim[2] * x->shape.dim[3],
                      .eps = node->p.f[0],
                      .has_g = node->p.i[2] != 0,
                      .has_b = node->p.i[3] != 0};
    for (int k = 0; k < node->n_in && k < 4; k++)
        j.in[k] = a->in[k];
    int64_t n = tg_numel(x);
    switch (node->op) {
    case TG_OP_NORM_STATS:
    case TG_OP_NORM_APPLY_BWD_STATS:
    case TG_OP_NORM_APPLY_BWD_AFFINE:
        tg_par_for(a->pool, j.CB, 2 * n, reduce_blocks, &j);
        break;
    default:
        tg_par_for(a->pool, j.N * j.CB, n, elementwise_rows, &j);
        break;
    }
}
