/* backend/cpu/conv_gemm.c - convolution kernels by im2col + sgemm, for every
 * geometry (stride, padding, dilation, groups).
 *
 * Images are taken in chunks of nb so that each GEMM is wide enough for
 * OpenBLAS to run near its peak (a lone 8x8 output plane makes a GEMM of 64
 * columns, too thin); nb * OH * OW is aimed at GEMM_COLUMNS. Per group g:
 *   forward:       Y_g [Kg, nb*P]   = W_g [Kg, CgRS]   x cols [CgRS, nb*P]
 *   backward data: dcols [CgRS, nb*P] = W_g^T           x dY_g [Kg, nb*P]; col2im
 *   backward weight: dW_g [Kg, CgRS] += dY_g [Kg, nb*P] x cols^T
 * (P = OH*OW, CgRS = C/G * R * S). A 1x1 stride-1 unpadded conv needs no
 * im2col: the image itself is the column matrix.
 *
 * Threads: with at least as many images as threads, each thread takes a
 * contiguous range of images with its own slice of scratch and calls sgemm
 * single-threaded; the weight gradient's per-thread partial sums are added
 * at the end. With fewer images than threads, the caller walks the images
 * and splits each GEMM over the pool instead.
 */
#include "backend/cpu/blas.h"
#include "ops/conv.h"

#include <string.h>

#define GEMM_COLUMNS 512
#define GEMM_COLS_MAX_FLOATS (1 << 20)

typedef struct gemm_plan {
    tg_conv_geom g;
    int64_t P, Cg, Kg, CgRS;
    int64_t nb;                   /* images per chunk */
    int slices;                   /* scratch slices: T when threads take images, else 1 */
    bool pointwise;               /* 1x1, stride 1, no padding: no im2col */
    size_t cols_f, tmp_f, part_f; /* floats per slice */
} gemm_plan;

static gemm_plan make_plan(tg_op which, const tg_conv_geom *g, int T)
{
    gemm_plan p;
    p.g = *g;
    p.P = g->OH * g->OW;
    p.Cg = g->C / g->G;
    p.Kg = g->K / g->G;
    p.CgRS = p.Cg * g->R * g->S;
    p.slices = g->N >= T ? T : 1;
    p.pointwise = g->R == 1 && g->S == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
    int64_t per_slice = (g->N + p.slices - 1) / p.slices;
    p.nb = (GEMM_COLUMNS + p.P - 1) / p.P;
    if (p.nb > per_slice)
        p.nb = per_slice;
    if (p.nb * p.CgRS * p.P > GEMM_COLS_MAX_FLOATS) /* deep layers: keep im2col's buffer modest */
        p.nb = GEMM_COLS_MAX_FLOATS / (p.CgRS * p.P);
    if (p.nb < 1 || p.pointwise)
        p.nb = 1;
    p.cols_f = p.pointwise ? 0 : (size_t)(p.CgRS * p.nb * p.P);
    p.tmp_f = p.nb > 1 ? (size_t)(p.Kg * p.nb * p.P) : 0;
    /* weight-gradient partial sums; with one slice the output accumulates directly */
    p.part_f = which == TG_OP_CONV2D_BWD_WEIGHT && p.slices > 1 ? (size_t)(g->K * p.CgRS) : 0;
    return p;
}

static size_t slice_bytes(const gemm_plan *p)
{
    return tg_conv_align(p->cols_f * sizeof(float)) + tg_conv_align(p->tmp_f * sizeof(float)) +
           tg_conv_align(p->part_f * sizeof(float));
}

size_t tg_conv_gemm_scratch(tg_op which, const tg_conv_geom *g, int n_threads)
{
    gemm_plan p = make_plan(which, g, n_threads < 1 ? 1 : n_threads);
    return 64 + (size_t)p.slices * slice_bytes(&p);
}

/* ---- im2col / col2im ------------------------------------------------------------------ */

/* The valid output columns [lo, hi) of kernel column s: those reading inside x. */
static void valid_cols(const tg_conv_geom *g, int64_t s, int64_t *lo, int64_t *hi)
{
    int64_t off = s * g->dw - g->pw; /* ix = ox*sw + off */
    int64_t l = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
    int64_t h = g->W - off <= 0 ? 0 : (g->W - off + g->sw - 1) / g->sw;
    if (h > g->OW)
        h = g->OW;
    if (l > h)
        l = h;
    *lo = l;
    *hi = h;
}

/* cols[(c*R + r)*S + s][i*P + oy*OW + ox] for the cnt images at x_grp (each
 * image's group channels start at x_grp + i*C*H*W). */
static void im2col(const gemm_plan *p, const float *x_grp, int64_t cnt, float *cols)
{
    const tg_conv_geom *g = &p->g;
    int64_t ld = cnt * p->P, HW = g->H * g->W;
    for (int64_t c = 0; c < p->Cg; c++)
        for (int64_t r = 0; r < g->R; r++)
            for (int64_t s = 0; s < g->S; s++) {
                int64_t lo, hi;
                valid_cols(g, s, &lo, &hi);
                int64_t ixo = s * g->dw - g->pw;
                float *row = cols + ((c * g->R + r) * g->S + s) * ld;
                for (int64_t i = 0; i < cnt; i++) {
                    const float *xc = x_grp + i * g->C * HW + c * HW;
                    float *dst = row + i * p->P;
                    for (int64_t oy = 0; oy < g->OH; oy++, dst += g->OW) {
                        int64_t iy = oy * g->sh - g->ph + r * g->dh;
                        if (iy < 0 || iy >= g->H || lo >= hi) {
                            memset(dst, 0, (size_t)g->OW * sizeof(float));
                            continue;
                        }
                        const float *src = xc + iy * g->W + ixo;
                        for (int64_t ox = 0; ox < lo; ox++)
                            dst[ox] = 0.0f;
                        if (g->sw == 1)
                            memcpy(dst + lo, src + lo, (size_t)(hi - lo) * sizeof(float));
                        else
                            for (int64_t ox = lo; ox < hi; ox++)
                                dst[ox] = src[ox * g->sw];
                        for (int64_t ox = hi; ox < g->OW; ox++)
                            dst[ox] = 0.0f;
                    }
                }
            }
}

/* The adjoint of im2col: add every column entry back into dx. */
static void col2im_add(const gemm_plan *p, const float *cols, int64_t cnt, float *dx_grp)
{
    const tg_conv_geom *g = &p->g;
    int64_t ld = cnt * p->P, HW = g->H * g->W;
    for (int64_t c = 0; c < p->Cg; c++)
        for (int64_t r = 0; r < g->R; r++)
            for (int64_t s = 0; s < g->S; s++) {
                int64_t lo, hi;
                valid_cols(g, s, &lo, &hi);
                if (lo >= hi)
                    continue;
                int64_t ixo = s * g->dw - g->pw;
                const float *row = cols + ((c * g->R + r) * g->S + s) * ld;
                for (int64_t i = 0; i < cnt; i++) {
                    float *xc = dx_grp + i * g->C * HW + c * HW;
                    const float *src = row + i * p->P;
                    for (int64_t oy = 0; oy < g->OH; oy++, src += g->OW) {
                        int64_t iy = oy * g->sh - g->ph + r * g->dh;
                        if (iy < 0 || iy >= g->H)
                            continue;
                        float *dst = xc + iy * g->W + ixo;
                        if (g->sw == 1)
                            for (int64_t ox = lo; ox < hi; ox++)
                                dst[ox] += src[ox];
                        else
                            for (int64_t ox = lo; ox < hi; ox++)
                                dst[ox * g->sw] += src[ox];
                    }
                }
            }
}

/* dyt[k][i*P + q] = dy[n0+i][grp*Kg + k][q]: the chunk's gradient as one matrix. */
static void gather_dy(const gemm_plan *p, const float *dy_grp, int64_t cnt, float *dyt)
{
    int64_t ld = cnt * p->P;
    for (int64_t k = 0; k < p->Kg; k++)
        for (int64_t i = 0; i < cnt; i++)
            memcpy(dyt + k * ld + i * p->P, dy_grp + (i * p->g.K + k) * p->P,
                   (size_t)p->P * sizeof(float));
}

/* ---- the three kernels over a range of images --------------------------------------------- */

typedef struct gemm_job {
    gemm_plan p;
    tg_op which;
    const float *in0, *in1, *bias;
    float *out;
    char *scratch;
    tg_pool *gemm_pool; /* split each GEMM over this pool (caller-only mode) */
} gemm_job;

static void forward_range(const gemm_job *j, int64_t b, int64_t e, float *cols, float *tmp)
{
    const gemm_plan *p = &j->p;
    const tg_conv_geom *g = &p->g;
    const float *x = j->in0, *w = j->in1;
    float *y = j->out;
    int64_t CHW = g->C * g->H * g->W, KP = g->K * p->P;
    for (int64_t n0 = b; n0 < e; n0 += p->nb) {
        int64_t cnt = e - n0 < p->nb ? e - n0 : p->nb;
        for (int64_t grp = 0; grp < g->G; grp++) {
            const float *wg = w + grp * p->Kg * p->CgRS;
            const float *xg = x + n0 * CHW + grp * p->Cg * g->H * g->W;
            float *yg = y + n0 * KP + grp * p->Kg * p->P;
            if (p->pointwise) {
                tg_sgemm_pool(j->gemm_pool, false, false, (int)p->Kg, (int)p->P, (int)p->Cg, 1.0f,
                              wg, (int)p->CgRS, xg, (int)p->P, 0.0f, yg, (int)p->P);
                continue;
            }
            im2col(p, xg, cnt, cols);
            if (cnt == 1) {
                tg_sgemm_pool(j->gemm_pool, false, false, (int)p->Kg, (int)p->P, (int)p->CgRS, 1.0f,
                              wg, (int)p->CgRS, cols, (int)p->P, 0.0f, yg, (int)p->P);
                continue;
            }
            int ld = (int)(cnt * p->P);
            tg_sgemm_pool(j->gemm_pool, false, false, (int)p->Kg, ld, (int)p->CgRS, 1.0f, wg,
                          (int)p->CgRS, cols, ld, 0.0f, tmp, ld);
            for (int64_t k = 0; k < p->Kg; k++)
                for (int64_t i = 0; i < cnt; i++)
                    memcpy(yg + i * KP + k * p->P, tmp + k * ld + i * p->P,
                           (size_t)p->P * sizeof(float));
        }
        if (j->bias)
            for (int64_t i = 0; i < cnt; i++)
                for (int64_t k = 0; k < g->K; k++) {
                    float bk = j->bias[k], *yk = y + (n0 + i) * KP + k * p->P;
                    for (int64_t q = 0; q < p->P; q++)
                        yk[q] += bk;
                }
    }
}

static void bwd_data_range(const gemm_job *j, int64_t b, int64_t e, float *cols, float *tmp)
{
    const gemm_plan *p = &j->p;
    const tg_conv_geom *g = &p->g;
    const float *dy = j->in0, *w = j->in1;
    float *dx = j->out;
    int64_t CHW = g->C * g->H * g->W, KP = g->K * p->P;
    memset(dx + b * CHW, 0, (size_t)((e - b) * CHW) * sizeof(float));
    for (int64_t n0 = b; n0 < e; n0 += p->nb) {
        int64_t cnt = e - n0 < p->nb ? e - n0 : p->nb;
        for (int64_t grp = 0; grp < g->G; grp++) {
            const float *wg = w + grp * p->Kg * p->CgRS;
            const float *dyg = dy + n0 * KP + grp * p->Kg * p->P;
            float *dxg = dx + n0 * CHW + grp * p->Cg * g->H * g->W;
            if (p->pointwise) {
                tg_sgemm_pool(j->gemm_pool, true, false, (int)p->Cg, (int)p->P, (int)p->Kg, 1.0f,
                              wg, (int)p->CgRS, dyg, (int)p->P, 0.0f, dxg, (int)p->P);
                continue;
            }
            const float *B = dyg;
            int ld = (int)(cnt * p->P);
            if (cnt > 1) {
                gather_dy(p, dyg, cnt, tmp);
                B = tmp;
            }
            tg_sgemm_pool(j->gemm_pool, true, false, (int)p->CgRS, ld, (int)p->Kg, 1.0f, wg,
                          (int)p->CgRS, B, ld, 0.0f, cols, ld);
            col2im_add(p, cols, cnt, dxg);
        }
    }
}

static void bwd_weight_range(const gemm_job *j, int64_t b, int64_t e, float *cols, float *tmp,
                             float *acc)
{
    const gemm_plan *p = &j->p;
    const tg_conv_geom *g = &p->g;
    const float *dy = j->in0, *x = j->in1;
    int64_t CHW = g->C * g->H * g->W, KP = g->K * p->P;
    memset(acc, 0, (size_t)(g->K * p->CgRS) * sizeof(float));
    for (int64_t n0 = b; n0 < e; n0 += p->nb) {
        int64_t cnt = e - n0 < p->nb ? e - n0 : p->nb;
        for (int64_t grp = 0; grp < g->G; grp++) {
            const float *dyg = dy + n0 * KP + grp * p->Kg * p->P;
            const float *xg = x + n0 * CHW + grp * p->Cg * g->H * g->W;
            float *accg = acc + grp * p->Kg * p->CgRS;
            if (p->pointwise) {
                tg_sgemm_pool(j->gemm_pool, false, true, (int)p->Kg, (int)p->Cg, (int)p->P, 1.0f,
                              dyg, (int)p->P, xg, (int)p->P, 1.0f, accg, (int)p->CgRS);
                continue;
            }
            im2col(p, xg, cnt, cols);
            const float *A = dyg;
            int ld = (int)(cnt * p->P);
            if (cnt > 1) {
                gather_dy(p, dyg, cnt, tmp);
                A = tmp;
            }
            tg_sgemm_pool(j->gemm_pool, false, true, (int)p->Kg, (int)p->CgRS, ld, 1.0f, A, ld,
                          cols, ld, 1.0f, accg, (int)p->CgRS);
        }
    }
}

static void run_range(void *ctx, int64_t b, int64_t e, int t)
{
    const gemm_job *j = ctx;
    char *slice = j->scratch + (size_t)t * slice_bytes(&j->p);
    float *cols = (float *)slice;
    float *tmp = (float *)(slice + tg_conv_align(j->p.cols_f * sizeof(float)));
    float *part = (float *)((char *)tmp + tg_conv_align(j->p.tmp_f * sizeof(float)));
    switch (j->which) {
    case TG_OP_CONV2D:
        forward_range(j, b, e, cols, tmp);
        break;
    case TG_OP_CONV2D_BWD_DATA:
        bwd_data_range(j, b, e, cols, tmp);
        break;
    case TG_OP_CONV2D_BWD_WEIGHT:
        bwd_weight_range(j, b, e, cols, tmp, j->p.part_f ? part : j->out);
        break;
    default:
        TG_UNREACHABLE_OP(j->which);
    }
}

typedef struct sum_job {
    float *out;
    char *scratch;
    size_t slice, part_offset;
    int slices;
} sum_job;

/* out = sum of every slice's partial weight gradient. */
static void sum_partials(void *ctx, int64_t b, int64_t e, int t)
{
    (void)t;
    const sum_job *s = ctx;
    for (int64_t i = b; i < e; i++) {
        float v = 0.0f;
        for (int k = 0; k < s->slices; k++)
            v += ((const float *)(s->scratch + (size_t)k * s->slice + s->part_offset))[i];
        s->out[i] = v;
    }
}

void tg_conv_gemm_run(tg_op which, const tg_conv_geom *g, const tg_kernel_args *a)
{
    tg_blas_init();
    int T = tg_pool_threads(a->pool);
    tg_pool *pool = a->pool;
    if (tg_conv_gemm_scratch(which, g, T) > a->scratch_bytes) { /* planned for fewer threads */
        T = 1;
        pool = NULL;
    }
    gemm_job j;
    j.p = make_plan(which, g, T);
    j.which = which;
    j.in0 = a->in[0];
    j.in1 = a->in[1];
    j.bias = which == TG_OP_CONV2D && a->node->n_in == 3 ? a->in[2] : NULL;
    j.out = a->out;
    j.scratch = (char *)(((uintptr_t)a->scratch + 63) & ~(uintptr_t)63);
    if (j.p.slices > 1) {
        j.gemm_pool = NULL;
        tg_pool_for(pool, g->N, run_range, &j);
    } else {
        j.gemm_pool = pool;
        run_range(&j, 0, g->N, 0);
    }
    if (j.p.part_f) {
        sum_job s = {a->out, j.scratch, slice_bytes(&j.p),
                     tg_conv_align(j.p.cols_f * sizeof(float)) +
                         tg_conv_align(j.p.tmp_f * sizeof(float)),
                     j.p.slices};
        tg_pool_for(pool, (int64_t)j.p.part_f, sum_partials, &s);
    }
}
