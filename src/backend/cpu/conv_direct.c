/* backend/cpu/conv_direct.c - direct SIMD convolution kernels for stride 1 and
 * groups 1 (any padding and dilation), the fast path for small and medium
 * layers (up to about 64 channels of 3x3 or 5x5: see tg_conv_method_for),
 * where im2col + GEMM gives OpenBLAS thin, awkward matrices (the first layer
 * of a small CNN has 1 input channel) or spends as long on im2col as on the
 * GEMM.
 *
 * Each image is copied into a zero-padded "wide" buffer of Hp x Wp (plus one
 * vector of zero slack), and outputs are computed at positions q = oy*Wp + ox
 * for q in [0, Q), Q = (OH-1)*Wp + OW, VL at a time. Every tap is then one
 * unaligned vector load at q + off(c, r, s): no im2col, no gathers. The
 * positions with ox >= OW are computed and dropped (forward) or given zero
 * gradient (backward), which costs (Wp - OW) / Wp of the work.
 *
 *   forward:         y[co][q]  = sum_{c,r,s} w[co][c][r][s] * xp[q + off]
 *   backward data:   dxp[q + off] += w * dyw[co][q]   (the adjoint, scattered
 *                    per tap from register sums over co)
 *   backward weight: dw[co][c][r][s] = sum_{n,q} dyw[co][q] * xp[q + off],
 *                    register-blocked over (co, tap) with VL partial sums
 *                    kept per weight element until the end.
 *
 * The inner loops live in conv_direct_impl.h, compiled for AVX-512, for
 * AVX2+FMA and for the SSE2 baseline; the level is chosen at run time.
 * Threads take contiguous ranges of images, each with its own slice of
 * scratch; weight-gradient partial sums are added at the end.
 */
#include "ops/conv.h"
#include "backend/cpu/simd.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TG_HAVE_X86 1
#endif

typedef struct dplan {
    tg_conv_geom g;
    int vl;
    int64_t Hp, Wp, HpWp, Q, Qc, Qp, CRS;
    size_t xp_f; /* floats of one padded image (all channels) + slack */
    size_t yw_f; /* floats of one wide output / gradient [K][Qp] */
    size_t shared_f, slice_f;
    int64_t nbw; /* images prepared at once by the weight gradient */
} dplan;

static int level_vl(tg_simd_level l)
{
    return l == TG_SIMD_AVX512 ? 16 : l == TG_SIMD_AVX2 ? 8 : 4;
}

static dplan make_plan(tg_op which, const tg_conv_geom *g, int T)
{
    dplan d;
    d.g = *g;
    d.vl = level_vl(tg_simd_level_get());
    d.Hp = g->H + 2 * g->ph;
    d.Wp = g->W + 2 * g->pw;
    d.HpWp = d.Hp * d.Wp;
    d.Q = (g->OH - 1) * d.Wp + g->OW;
    d.Qc = (d.Q + d.vl - 1) / d.vl;
    d.Qp = d.Qc * d.vl;
    d.CRS = g->C * g->R * g->S;
    d.xp_f = (size_t)(g->C * d.HpWp + d.vl);
    d.xp_f = (d.xp_f + 15) & ~(size_t)15;
    d.yw_f = (size_t)(g->K * d.Qp);
    d.nbw = 1;
    switch (which) {
    case TG_OP_CONV2D:
        d.shared_f = (size_t)(d.CRS * g->K);
        d.slice_f = d.xp_f + d.yw_f;
        break;
    case TG_OP_CONV2D_BWD_DATA:
        d.shared_f = (size_t)(d.CRS * g->K);
        d.slice_f = d.xp_f + d.yw_f;
        break;
    case TG_OP_CONV2D_BWD_WEIGHT: {
        /* images prepared at once: every register block streams over all of
         * them before its partial sums go back to memory, so more images
         * mean less partial-sum traffic; a block touches only a few rows of
         * each image, which stay in L1 however many images there are, and
         * the whole group stays in L2 (<= 256 KiB) */
        size_t per = d.xp_f + d.yw_f;
        int64_t per_thread = (g->N + T - 1) / T;
        d.nbw = (int64_t)((256 * 1024 / sizeof(float)) / per);
        if (d.nbw > 16)
            d.nbw = 16;
        if (d.nbw < 1)
            d.nbw = 1;
        if (d.nbw > per_thread)
            d.nbw = per_thread;
        d.shared_f = 0;
        d.slice_f = (size_t)d.nbw * per + (size_t)(g->K * d.CRS * d.vl);
        break;
    }
    default:
        TG_UNREACHABLE_OP(which);
    }
    return d;
}

size_t tg_conv_direct_scratch(tg_op which, const tg_conv_geom *g, int n_threads)
{
    int T = n_threads < 1 ? 1 : n_threads;
    dplan d = make_plan(which, g, T);
    return 64 + tg_conv_align(d.shared_f * sizeof(float)) +
           (size_t)T * tg_conv_align(d.slice_f * sizeof(float));
}

/* ---- per-image data movement ------------------------------------------------------------- */

/* The baseline's copy of a row's last n < VL floats. */
static inline void copy_tail(float *d, const float *s, int n)
{
    for (int i = 0; i < n; i++)
        d[i] = s[i];
}

/* ---- the inner loops, once per instruction set ---------------------------------------------- */

#ifdef TG_HAVE_X86
#define DTARGET __attribute__((target("avx512f,fma")))
#define VL 16
#define SFX _avx512
#define VT __m512
#define VZERO() _mm512_setzero_ps()
#define VSET1(f) _mm512_set1_ps(f)
#define VLOAD(p) _mm512_loadu_ps(p)
#define VSTORE(p, v) _mm512_storeu_ps((p), (v))
#define VADD(a, b) _mm512_add_ps((a), (b))
#define VFMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define VCOPY_TAIL(d, s, n)                                                                        \
    _mm512_mask_storeu_ps((d), (__mmask16)((1u << (n)) - 1u),                                      \
                          _mm512_maskz_loadu_ps((__mmask16)((1u << (n)) - 1u), (s)))
#define CB_MAX 12
#define CB_BWD 12
#define WB_CO 5
#define WB_T 5
#include "backend/cpu/conv_direct_impl.h"

#define DTARGET __attribute__((target("avx2,fma")))
#define VL 8
#define SFX _avx2
#define VT __m256
#define VZERO() _mm256_setzero_ps()
#define VSET1(f) _mm256_set1_ps(f)
#define VLOAD(p) _mm256_loadu_ps(p)
#define VSTORE(p, v) _mm256_storeu_ps((p), (v))
#define VADD(a, b) _mm256_add_ps((a), (b))
#define VFMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define VCOPY_TAIL(d, s, n) copy_tail((d), (s), (n))
#define CB_MAX 6
#define CB_BWD 6
#define WB_CO 3
#define WB_T 4
#include "backend/cpu/conv_direct_impl.h"
#endif

/* Baseline: 4 floats per "vector" in portable C that compilers map to SSE2. */
typedef struct v4 {
    float f[4];
} v4;
static inline v4 v4_set1(float a)
{
    return (v4){{a, a, a, a}};
}
static inline v4 v4_load(const float *p)
{
    v4 v;
    memcpy(v.f, p, sizeof v.f);
    return v;
}
static inline void v4_store(float *p, v4 v)
{
    memcpy(p, v.f, sizeof v.f);
}
static inline v4 v4_add(v4 a, v4 b)
{
    for (int i = 0; i < 4; i++)
        a.f[i] += b.f[i];
    return a;
}
static inline v4 v4_fma(v4 a, v4 b, v4 c)
{
    for (int i = 0; i < 4; i++)
        c.f[i] += a.f[i] * b.f[i];
    return c;
}
#define DTARGET
#define VL 4
#define SFX _base
#define VT v4
#define VZERO() v4_set1(0.0f)
#define VSET1(f) v4_set1(f)
#define VLOAD(p) v4_load(p)
#define VSTORE(p, v) v4_store((p), (v))
#define VADD(a, b) v4_add((a), (b))
#define VFMA(a, b, c) v4_fma((a), (b), (c))
#define VCOPY_TAIL(d, s, n) copy_tail((d), (s), (n))
#define CB_MAX 6
#define CB_BWD 6
#define WB_CO 3
#define WB_T 4
#include "backend/cpu/conv_direct_impl.h"

typedef void (*fwd_fn)(const dplan *, const float *, const float *, const float *, float *);
typedef void (*bwd_data_fn)(const dplan *, const float *, const float *, float *);
typedef void (*bwd_weight_fn)(const dplan *, const float *, const float *, int64_t, float *);
typedef void (*copy_fn)(float *, int64_t, const float *, int64_t, int64_t, int64_t);

typedef struct dkernels {
    fwd_fn fwd;
    bwd_data_fn bwd_data;
    bwd_weight_fn bwd_weight;
    copy_fn copy;
} dkernels;

static dkernels pick_kernels(int vl)
{
#ifdef TG_HAVE_X86
    if (vl == 16)
        return (dkernels){fwd_image_avx512, bwd_data_image_avx512, bwd_weight_images_avx512,
                          copy_rows_avx512};
    if (vl == 8)
        return (dkernels){fwd_image_avx2, bwd_data_image_avx2, bwd_weight_images_avx2,
                          copy_rows_avx2};
#endif
    (void)vl;
    return (dkernels){fwd_image_base, bwd_data_image_base, bwd_weight_images_base, copy_rows_base};
}

/* ---- threads over images ------------------------------------------------------------------- */

typedef struct djob {
    dplan d;
    dkernels k;
    tg_op which;
    const float *in0, *in1, *bias;
    float *out;
    const float *shared; /* transposed weights */
    char *slices;
    size_t slice_bytes;
} djob;

/* The padding of xp, the gaps of a wide gradient and the slack after both
 * sit at the same places for every image, so each thread zeroes its buffers
 * once per call and then only copies the rows of each image in (the copies
 * are the per-ISA copy_rows: short rows, many of them).
 *
 * x image into the interior of a padded buffer whose margins are zero. */
static void pad_into(const djob *j, const float *x, float *xp)
{
    const dplan *d = &j->d;
    const tg_conv_geom *g = &d->g;
    for (int64_t c = 0; c < g->C; c++)
        j->k.copy(xp + c * d->HpWp + g->ph * d->Wp + g->pw, d->Wp, x + c * g->H * g->W, g->W, g->H,
                  g->W);
}

static void run_images(void *ctx, int64_t b, int64_t e, int t)
{
    const djob *j = ctx;
    const dplan *d = &j->d;
    const tg_conv_geom *g = &d->g;
    float *slice = (float *)(j->slices + (size_t)t * j->slice_bytes);
    int64_t CHW = g->C * g->H * g->W, KP = g->K * g->OH * g->OW, P = g->OH * g->OW;
    switch (j->which) {
    case TG_OP_CONV2D: {
        float *xp = slice, *yw = slice + d->xp_f;
        memset(xp, 0, d->xp_f * sizeof(float));
        for (int64_t n = b; n < e; n++) {
            pad_into(j, j->in0 + n * CHW, xp);
            j->k.fwd(d, xp, j->shared, j->bias, yw);
            for (int64_t k = 0; k < g->K; k++) /* the wide output's valid columns */
                j->k.copy(j->out + n * KP + k * P, g->OW, yw + k * d->Qp, d->Wp, g->OH, g->OW);
        }
        break;
    }
    case TG_OP_CONV2D_BWD_DATA: {
        float *dxp = slice, *dyw = slice + d->xp_f;
        memset(dyw, 0, d->yw_f * sizeof(float));
        for (int64_t n = b; n < e; n++) {
            for (int64_t k = 0; k < g->K; k++)
                j->k.copy(dyw + k * d->Qp, d->Wp, j->in0 + n * KP + k * P, g->OW, g->OH, g->OW);
            memset(dxp, 0, d->xp_f * sizeof(float));
            j->k.bwd_data(d, dyw, j->shared, dxp);
            for (int64_t c = 0; c < g->C; c++) /* the interior of the padded gradient */
                j->k.copy(j->out + n * CHW + c * g->H * g->W, g->W,
                          dxp + c * d->HpWp + g->ph * d->Wp + g->pw, d->Wp, g->H, g->W);
        }
        break;
    }
    case TG_OP_CONV2D_BWD_WEIGHT: {
        float *xps = slice, *dyws = slice + d->nbw * d->xp_f;
        float *accv = dyws + d->nbw * d->yw_f; /* zeroed by the caller */
        memset(slice, 0, (size_t)d->nbw * (d->xp_f + d->yw_f) * sizeof(float));
        for (int64_t n0 = b; n0 < e; n0 += d->nbw) {
            int64_t cnt = e - n0 < d->nbw ? e - n0 : d->nbw;
            for (int64_t i = 0; i < cnt; i++) {
                float *dyw = dyws + i * d->yw_f;
                for (int64_t k = 0; k < g->K; k++)
                    j->k.copy(dyw + k * d->Qp, d->Wp, j->in0 + (n0 + i) * KP + k * P, g->OW, g->OH,
                              g->OW);
                pad_into(j, j->in1 + (n0 + i) * CHW, xps + i * d->xp_f);
            }
            j->k.bwd_weight(d, xps, dyws, cnt, accv);
        }
        break;
    }
    default:
        TG_UNREACHABLE_OP(j->which);
    }
}

typedef struct dsum_job {
    const djob *j;
    int slices;
} dsum_job;

/* dw[i] = the sum over threads and vector lanes of the partial sums of i. */
static void sum_weight(void *ctx, int64_t b, int64_t e, int t)
{
    (void)t;
    const dsum_job *s = ctx;
    const djob *j = s->j;
    int vl = j->d.vl;
    size_t acc_off = j->d.nbw * (j->d.xp_f + j->d.yw_f);
    for (int64_t i = b; i < e; i++) {
        float v = 0.0f;
        for (int k = 0; k < s->slices; k++) {
            const float *a =
                (const float *)(j->slices + (size_t)k * j->slice_bytes) + acc_off + i * vl;
            for (int l = 0; l < vl; l++)
                v += a[l];
        }
        j->out[i] = v;
    }
}

void tg_conv_direct_run(tg_op which, const tg_conv_geom *g, const tg_kernel_args *a)
{
    int T = tg_pool_threads(a->pool);
    tg_pool *pool = a->pool;
    if (tg_conv_direct_scratch(which, g, T) > a->scratch_bytes) { /* planned for fewer threads */
        T = 1;
        pool = NULL;
    }
    djob j;
    j.d = make_plan(which, g, T);
    j.k = pick_kernels(j.d.vl);
    j.which = which;
    j.in0 = a->in[0];
    j.in1 = a->in[1];
    j.bias = which == TG_OP_CONV2D && a->node->n_in == 3 ? a->in[2] : NULL;
    j.out = a->out;
    char *base = (char *)(((uintptr_t)a->scratch + 63) & ~(uintptr_t)63);
    float *shared = (float *)base;
    j.shared = shared;
    j.slices = base + tg_conv_align(j.d.shared_f * sizeof(float));
    j.slice_bytes = tg_conv_align(j.d.slice_f * sizeof(float));
    int64_t K = g->K, C = g->C, RS = g->R * g->S;
    const float *w = a->in[1];
    if (which == TG_OP_CONV2D) /* wt[(c, r, s)][k] */
        for (int64_t k = 0; k < K; k++)
            for (int64_t t = 0; t < C * RS; t++)
                shared[t * K + k] = w[k * C * RS + t];
    else if (which == TG_OP_CONV2D_BWD_DATA) /* wt2[(r, s)][k][c] */
        for (int64_t k = 0; k < K; k++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t rs = 0; rs < RS; rs++)
                    shared[(rs * K + k) * C + c] = w[(k * C + c) * RS + rs];
    if (which == TG_OP_CONV2D_BWD_WEIGHT) /* every slice's sums, also of threads left idle */
        for (int t = 0; t < T; t++)
            memset((float *)(j.slices + (size_t)t * j.slice_bytes) +
                       j.d.nbw * (j.d.xp_f + j.d.yw_f),
                   0, (size_t)(K * j.d.CRS * j.d.vl) * sizeof(float));
    tg_pool_for(pool, g->N, run_images, &j);
    if (which == TG_OP_CONV2D_BWD_WEIGHT) {
        dsum_job s = {&j, T};
        tg_pool_for(T > 1 && K * j.d.CRS > 4096 ? pool : NULL, K * j.d.CRS, sum_weight, &s);
    }
}
