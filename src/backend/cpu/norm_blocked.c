/* backend/cpu/norm_blocked.c - batch norm's ops on blocked activations (backend/cpu/blocked.h).
 *
 * x [N, C, H, W] is stored [N][C/16][H*W][16]: a row (n, cb) is H*W
 * vectors of 16 channels. Element-wise ops walk rows with one scale and
 * shift vector per channel block; reductions give each thread a range of
 * channel blocks and sum each row per lane in blocks of 8 pixels in float,
 * the blocks in double, as the NCHW kernels (ops/norm.c) sum blocks of a
 * run in float and the blocks in double. The formulas are those of
 * norm.c's header.
 */
#include "core/bf16.h"
#include "core/clones.h"
#include "backend/cpu/blocked.h"
#include "ops/norm.h"
#include "ops/broadcast.h"
#include "tilegraph/dtype.h"

#include <math.h>
#include <string.h>

#define B TG_CHANNEL_BLOCK
/* 16-float vectors pass between static functions of this file only, so
 * the note that their calling convention differs with AVX-512 is moot. */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float vb __attribute__((vector_size(B * sizeof(float))));

TG_VEC_INLINE vb load(const float *p)
{
    vb v;
    memcpy(&v, p, sizeof v);
    return v;
}

TG_VEC_INLINE void store(float *p, vb v)
{
    memcpy(p, &v, sizeof v);
}

TG_VEC_INLINE vb splat(float x)
{
    vb v;
    for (int i = 0; i < B; i++)
        v[i] = x;
    return v;
}

typedef struct norm_blocked {
    const tg_tensor *node;
    const void *in[4];
    void *out;
    bool in_bf16[4], out_bf16;
    int64_t N, C, CB, HW; /* CB = C / B blocks */
    float eps;
    bool has_g, has_b;
} norm_blocked;

/* Pixel k of row r (= n * CB + cb) of 4-D input i as 16 floats. Operands
 * stored in bf16 are read and written in place, 16 values at a time
 * converted in registers, so the engine need not stage them
 * (tg_kernel_args.in_type). cv: core/bf16.h's generic conversions or the
 * AVX-512 BF16 instructions' (the same bits), constants the compiler calls
 * directly once everything below is inlined (TG_BF16_POOL_FNS). */
TG_VEC_INLINE vb pixel(const norm_blocked *j, int i, int64_t r, int64_t k, tg_bf16x16_ops cv)
{
    int64_t at = (r * j->HW + k) * B;
    return j->in_bf16[i] ? cv.widen((const uint16_t *)j->in[i] + at)
                         : load((const float *)j->in[i] + at);
}

TG_VEC_INLINE void put_pixel(const norm_blocked *j, int64_t r, int64_t k, vb v, tg_bf16x16_ops cv)
{
    int64_t at = (r * j->HW + k) * B;
    if (j->out_bf16)
        cv.narrow((uint16_t *)j->out + at, v);
    else
        store((float *)j->out + at, v);
}

/* The small f32 operands: statistics, gamma, beta. */
static const float *vec(const norm_blocked *j, int k)
{
    return (const float *)j->in[k];
}

/* Per-lane mean and 1/sqrt(var + eps) of block cb from stats [2, C]. */
TG_VEC_INLINE void mean_rstd(const norm_blocked *j, const float *stats, int64_t cb, vb *mean,
                             vb *rstd)
{
    for (int i = 0; i < B; i++) {
        int64_t c = cb * B + i;
        (*mean)[i] = stats[c];
        (*rstd)[i] = 1.0f / sqrtf(stats[j->C + c] + j->eps);
    }
}

TG_VEC_INLINE vb gamma_of(const float *gamma, int64_t cb)
{
    return gamma ? load(gamma + cb * B) : splat(1.0f);
}

/* The reductions sum each lane in float over blocks of PIX_BLOCK pixels
 * (two accumulators, even and odd pixels, for the adds' latency: 4 values
 * each) and add the blocks' sums in double, so the error stays that of a
 * few float roundings however large H x W is; one float accumulator per
 * lane over a whole row (3136 pixels at 56 x 56) shifted a large-mean
 * channel's mean, and so every normalised value, by many ulps (why the
 * blocks are short: ops/norm.c, above run_sum). The order of the
 * operations is fixed here, not left to the instruction set, so every copy
 * (core/clones.h) and the bf16 readers give the same bits. */
enum { PIX_BLOCK = 8 };

typedef double vd __attribute__((vector_size(B * sizeof(double))));

TG_VEC_INLINE vd widen_sum(vb a, vb b)
{
    return __builtin_convertvector(a + b, vd);
}

/* The sum of x (sq: of (x - mean)^2) over row r, per lane. */
TG_VEC_INLINE vd row_sum(const norm_blocked *j, int64_t r, bool sq, vb mean, tg_bf16x16_ops cv)
{
    vd s = {0};
    for (int64_t k = 0; k < j->HW;) {
        int64_t e = j->HW - k > PIX_BLOCK ? k + PIX_BLOCK : j->HW;
        vb a = splat(0.0f), b = splat(0.0f);
        for (; k + 2 <= e; k += 2) {
            vb x0 = pixel(j, 0, r, k, cv), x1 = pixel(j, 0, r, k + 1, cv);
            vb d0 = x0 - mean, d1 = x1 - mean;
            a += sq ? d0 * d0 : x0;
            b += sq ? d1 * d1 : x1;
        }
        if (k < e) {
            vb x0 = pixel(j, 0, r, k, cv), d0 = x0 - mean;
            a += sq ? d0 * d0 : x0;
            k++;
        }
        s += widen_sum(a, b);
    }
    return s;
}

TG_VEC_INLINE void stats_block(const norm_blocked *j, int64_t cb, tg_bf16x16_ops cv)
{
    vd s = {0}, ss = {0};
    double count = (double)(j->N * j->HW);
    vb zero = splat(0.0f), mean;
    for (int64_t n = 0; n < j->N; n++)
        s += row_sum(j, n * j->CB + cb, false, zero, cv);
    for (int i = 0; i < B; i++)
        mean[i] = (float)(s[i] / count);
    for (int64_t n = 0; n < j->N; n++)
        ss += row_sum(j, n * j->CB + cb, true, mean, cv);
    float *out = j->out;
    for (int i = 0; i < B; i++) { /* about the rounded mean: see ops/norm.c */
        double shift = s[i] / count - (double)mean[i];
        out[cb * B + i] = mean[i];
        double var = ss[i] / count - shift * shift;
        out[j->C + cb * B + i] = (float)(var < 0 ? 0 : var);
    }
}

/* s1 = sum dy, s2 = sum dy (x - mean) per lane over block cb (dy in[0], x
 * in[1]), blocked as row_sum */
TG_VEC_INLINE void dy_sums(const norm_blocked *j, vb mean, int64_t cb, vd *s1, vd *s2,
                           tg_bf16x16_ops cv)
{
    for (int64_t n = 0; n < j->N; n++) {
        int64_t r = n * j->CB + cb;
        for (int64_t k = 0; k < j->HW;) {
            int64_t e = j->HW - k > PIX_BLOCK ? k + PIX_BLOCK : j->HW;
            vb a0 = splat(0.0f), a1 = a0, b0 = a0, b1 = a0;
            for (; k + 2 <= e; k += 2) {
                vb v0 = pixel(j, 0, r, k, cv), v1 = pixel(j, 0, r, k + 1, cv);
                a0 += v0, a1 += v1;
                b0 += v0 * (pixel(j, 1, r, k, cv) - mean);
                b1 += v1 * (pixel(j, 1, r, k + 1, cv) - mean);
            }
            if (k < e) {
                vb v0 = pixel(j, 0, r, k, cv);
                a0 += v0;
                b0 += v0 * (pixel(j, 1, r, k, cv) - mean);
                k++;
            }
            *s1 += widen_sum(a0, a1);
            *s2 += widen_sum(b0, b1);
        }
    }
}

/* NORM_APPLY_BWD_STATS (dy, x, stats, gamma?) and NORM_APPLY_BWD_AFFINE
 * (dy, x, stats): both from the sums of dy and dy (x - mean). */
TG_VEC_INLINE void bwd_sums_block(const norm_blocked *j, int64_t cb, tg_bf16x16_ops cv)
{
    vb mean, rstd;
    mean_rstd(j, vec(j, 2), cb, &mean, &rstd);
    vd s1 = {0}, s2 = {0};
    dy_sums(j, mean, cb, &s1, &s2, cv);
    bool stats = j->node->op == TG_OP_NORM_APPLY_BWD_STATS;
    vb g = gamma_of(stats && j->has_g ? vec(j, 3) : NULL, cb);
    float *out = j->out;
    for (int i = 0; i < B; i++) {
        int64_t c = cb * B + i;
        double r = rstd[i];
        if (stats) {
            out[c] = (float)(-r * g[i] * s1[i]);
            out[j->C + c] = (float)(-0.5 * r * r * r * g[i] * s2[i]);
        } else {
            out[c] = (float)(s2[i] * r);
            out[j->C + c] = (float)s1[i];
        }
    }
}

TG_VEC_INLINE void reduce_loop(const norm_blocked *j, int64_t begin, int64_t end, tg_bf16x16_ops cv)
{
    for (int64_t cb = begin; cb < end; cb++) {
        if (j->node->op == TG_OP_NORM_STATS)
            stats_block(j, cb, cv);
        else
            bwd_sums_block(j, cb, cv);
    }
}

TG_BF16_POOL_FNS(reduce_blocks, reduce_loop, TG_BF16X16_GENERIC, TG_BF16X16_HW)

/* The element-wise ops over row r = (n, cb), each lane with the NCHW
 * kernel's formula (ops/norm.c), so both layouts give the same bits:
 *   NORM_APPLY (x, stats, gamma?, beta?): x s + (beta - mean s)
 *   NORM_APPLY_BWD_X (dy, stats, gamma?): dy s
 *   NORM_STATS_BWD (dstats, x, stats): a0 + a1 (x - mean) */
TG_VEC_INLINE void elementwise_row(const norm_blocked *j, int64_t r, tg_bf16x16_ops cv)
{
    int64_t cb = r % j->CB;
    tg_op op = j->node->op;
    vb mean, rstd, s = splat(0.0f), sh = splat(0.0f), a0 = s, a1 = s;
    if (op == TG_OP_NORM_STATS_BWD) {
        const float *ds = vec(j, 0), *st = vec(j, 2);
        float inv_n = 1.0f / (float)(j->N * j->HW);
        for (int i = 0; i < B; i++) {
            int64_t c = cb * B + i;
            a0[i] = ds[c] * inv_n;
            a1[i] = ds[j->C + c] * (2.0f * inv_n); /* 2 / n first: norm.c */
            mean[i] = st[c];
        }
    } else {
        mean_rstd(j, vec(j, 1), cb, &mean, &rstd);
        s = rstd * gamma_of(j->has_g ? vec(j, 2) : NULL, cb);
        if (op == TG_OP_NORM_APPLY)
            sh = (j->has_b ? load(vec(j, 2 + j->has_g) + cb * B) : splat(0.0f)) - mean * s;
    }
    int src = op == TG_OP_NORM_STATS_BWD ? 1 : 0;
    for (int64_t k = 0; k < j->HW; k++) {
        vb v = pixel(j, src, r, k, cv);
        put_pixel(j, r, k,
                  op == TG_OP_NORM_APPLY         ? v * s + sh
                  : op == TG_OP_NORM_APPLY_BWD_X ? v * s
                                                 : a0 + a1 * (v - mean),
                  cv);
    }
}

TG_VEC_INLINE void elementwise_loop(const norm_blocked *j, int64_t begin, int64_t end,
                                    tg_bf16x16_ops cv)
{
    for (int64_t r = begin; r < end; r++)
        elementwise_row(j, r, cv);
}

TG_BF16_POOL_FNS(elementwise_rows, elementwise_loop, TG_BF16X16_GENERIC, TG_BF16X16_HW)

/* A small operand (statistics, gamma, beta) as f32: itself, or its bf16
 * values converted into the step's scratch (compile/program.h,
 * tg_step_native_scratch, plans one 64-byte aligned piece per such operand
 * in operand order, the output's first). */
static float *carve(unsigned char **area, int64_t n)
{
    float *f = (float *)(void *)*area;
    if (*area) /* NULL without scratch: then every operand is f32 */
        *area += ((size_t)n * sizeof(float) + 63) & ~(size_t)63;
    return f;
}

static const float *small_f32(const void *v, tg_dtype type, int64_t n, unsigned char **area)
{
    float *f = carve(area, n);
    if (type != TG_BF16)
        return v;
    tg_bf16_to_f32_array(v, f, (size_t)n);
    return f;
}

/* The copy for the operands: with bf16 among them on a CPU with AVX-512
 * BF16, the one converting by its instructions. */
static tg_pool_fn kernel_for(const norm_blocked *j, bool reduce)
{
    bool any = j->out_bf16;
    for (int k = 0; k < 4; k++)
        any |= j->in_bf16[k];
    if (!any)
        return reduce ? reduce_blocks : elementwise_rows;
    return reduce ? TG_BF16_POOL_FN(reduce_blocks) : TG_BF16_POOL_FN(elementwise_rows);
}

void tg_norm_blocked_run(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    const tg_tensor *x = node->op == TG_OP_NORM_STATS_BWD ? node->in[1] : node->in[0];
    norm_blocked j = {.node = node,
                      .out = a->out,
                      .out_bf16 = a->out_type == TG_BF16,
                      .N = x->shape.dim[0],
                      .C = x->shape.dim[1],
                      .CB = x->shape.dim[1] / B,
                      .HW = x->shape.dim[2] * x->shape.dim[3],
                      .eps = tg_norm_eps(node),
                      .has_g = tg_norm_has_gamma(node) != 0,
                      .has_b = tg_norm_has_beta(node) != 0};
    unsigned char *area = a->scratch; /* after no kernel scratch: the ops have none */
    bool small_out = node->shape.ndim != 4;
    float *out_f32 = small_out ? carve(&area, tg_numel(node)) : NULL;
    small_out &= j.out_bf16;
    if (small_out)
        j.out = out_f32;
    for (int k = 0; k < node->n_in && k < 4; k++) {
        j.in[k] = a->in[k];
        j.in_bf16[k] = a->in_type[k] == TG_BF16;
        if (node->in[k]->shape.ndim != 4)
            j.in[k] = small_f32(a->in[k], a->in_type[k], tg_numel(node->in[k]), &area);
    }
    int64_t n = tg_numel(x);
    switch (node->op) {
    case TG_OP_NORM_STATS:
    case TG_OP_NORM_APPLY_BWD_STATS:
    case TG_OP_NORM_APPLY_BWD_AFFINE:
        tg_par_for(a->pool, j.CB, 2 * n, kernel_for(&j, true), &j);
        break;
    case TG_OP_NORM_APPLY:
    case TG_OP_NORM_APPLY_BWD_X:
    case TG_OP_NORM_STATS_BWD:
        tg_par_for(a->pool, j.N * j.CB, n, kernel_for(&j, false), &j);
        break;
    default:
        TG_UNREACHABLE_OP(node->op);
    }

    if (small_out)
        tg_f32_to_bf16_array(j.out, a->out, (size_t)tg_numel(node));
}
