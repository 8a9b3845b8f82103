/* backend/cpu/conv_dw_bf16.c - the own depthwise convolution (one filter
 * per channel) of an inference program whose activations are bf16 (or, on
 * large maps at stride 1, f32) in nChw16c, on a CPU with AVX512_BF16.
 *
 * Why not oneDNN's: a depthwise convolution does 9 or 25 FMAs per element
 * it reads, so it is bound by memory and by the work per element, and bf16
 * storage should come near half the f32 time. oneDNN 2.6's jit_dw bf16
 * kernel gained almost nothing over its f32 one in mobilenet_v3_large
 * (batch 32, one thread: its 9 3x3 convolutions 16.1 -> 14.0 ms, its 6
 * 5x5 ones 7.1 -> 6.3; the 16-channel 3x3 at 112x112 got slower, 3.0 ->
 * 3.2): it widens each input vector at every tap that reads it.
 *
 * Here each input row is widened once into a ring of the R rows the
 * current output row reads, as f32 with the padding columns zero, so the
 * taps are plain FMAs from L1 with no bounds checks; 8 output pixels (16
 * channels each) accumulate in registers, from the bias, over the R x S
 * taps; the post-op (ReLU, hard swish, hard sigmoid) runs on the sums and
 * VCVTNEPS2BF16 stores them (f32 activations: copied into the ring, stored
 * as they are). The weights (batch norm folded in, as
 * compile/fuse.c asks) are kept in f32 per 16-channel block and tap in the
 * node's weight cache (backend/cpu/weight_cache.h), refilled only when the
 * host writes them. The padded lanes of the last block have zero weights
 * and bias and are written as zero.
 *
 * Threads: the planes (sample, channel block) and, where they are fewer
 * than 4 per thread (batch 1), bands of output rows, claimed over the
 * device's pool; each thread has its own ring in the node's scratch. */
#include "backend/cpu/conv_dw_bf16.h"
#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/weight_cache.h"

#include "core/alloc.h"
#include "core/bf16.h"
#include "core/check.h"
#include "core/pool.h"
#include "core/process.h"
#include "ops/conv.h"
#include "ops/norm.h"
#include "ops/unary.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Taps along one axis at most: the ring's tags live on the stack. */
#define DW_MAX_TAPS 16
/* Output pixels a tile accumulates in registers (8 sums and a weight). */
#define DW_TILE 8

typedef enum dw_act { DW_ACT_NONE, DW_ACT_RELU, DW_ACT_HARD_SWISH, DW_ACT_HARD_SIGMOID } dw_act;

struct tg_conv_dw {
    tg_conv_geom g;
    int64_t blocks;    /* 16-channel blocks */
    int64_t row_len;   /* pixels of a widened input row, padding columns included */
    int64_t band;      /* output rows a job computes */
    int64_t bands;     /* jobs per plane */
    int n_threads;     /* rings in scratch */
    size_t ring_bytes; /* one thread's */
    dw_act act;
    float act_a, act_b; /* hard sigmoid's a x + b */
    const tg_tensor *fold;
    tg_dtype w_type, b_type; /* the weights' and the bias's storage */
    bool bias;
    bool f32;               /* activations stored in f32, else bf16 */
    tg_weight_cache *cache; /* f32 weights [blocks][R*S][16], then the bias [blocks][16] */
    size_t bias_off;        /* bytes */
};

static dw_act act_of(const tg_tensor *act)
{
    if (!act)
        return DW_ACT_NONE;
    if (act->op == TG_OP_RELU)
        return DW_ACT_RELU;
    /* the Mul form is x * hard_sigmoid(x) with 1/6 and 1/2 (compile/fuse.c) */
    if (tg_is_hard_swish(act) || act->op == TG_OP_MUL)
        return DW_ACT_HARD_SWISH;
    return DW_ACT_HARD_SIGMOID;
}

static bool f32_or_bf16(tg_dtype t)
{
    return t == TG_F32 || t == TG_BF16;
}

/* Where the kernel applies: an inference program's forward depthwise
 * convolution with one filter per channel, no dilation, bf16 activations
 * in nChw16c, on a CPU (and TILEGRAPH_ISA) with AVX512_BF16, oneDNN's
 * choice not forced (TG_KERNELS=dnnl keeps oneDNN's jit_dw), and no fused
 * residual add (none follows a depthwise convolution in mobilenet); and
 * rows of at least one whole tile: on 7x7 maps (mobilenet_v3_large's last
 * 5x5 convolutions, 960 channels) oneDNN's kernel, which skips the taps
 * that read padding, took 0.57 ms a run at batch 32 against this one's
 * 0.84-0.89 (one thread, under load), where 14x14 and larger maps were as
 * fast or faster here. f32 activations only at stride 1 on maps 28 wide
 * and more: there oneDNN's f32 jit_dw took 2.95-3.01 ms against 2.28-2.38
 * on 16 channels at 112x112 and 3.43-4.36 against 1.80-1.83 on 72 at 56x56
 * (batch 32, one thread, under load); at stride 2 (a copy of every input
 * row for fewer taps each) it was as fast or 2-5% faster, and on 14x14
 * maps the runs spread too far to tell. */
static bool applies(const tg_tensor *node, const tg_conv_geom *g, const tg_plan_opts *o)
{
    bool depthwise = g->G > 1 && g->G == g->C && g->K == g->G;
    bool stats_f32 = true;
    for (int k = TG_FUSE_IN_STATS; o->fold_norm && k < TG_FUSE_IN_STATS + 3; k++)
        stats_f32 = stats_f32 && (k >= node->n_in || !node->in[k] || o->in_storage[k] == TG_F32);
    return TG_BF16_HW && tg_bf16_hw() && tg_dnnl_mode_get() == TG_DNNL_AUTO && o->inference &&
           node->op == TG_OP_CONV2D && depthwise && g->dh == 1 && g->dw == 1 &&
           g->R <= DW_MAX_TAPS && g->S <= DW_MAX_TAPS && g->OW >= DW_TILE &&
           f32_or_bf16(o->in_storage[0]) && o->out_storage == o->in_storage[0] &&
           (o->in_storage[0] == TG_BF16 || (g->sh == 1 && g->sw == 1 && g->OW >= 28)) &&
           o->in_blocked[0] && o->out_blocked && !o->post_add && f32_or_bf16(o->in_storage[1]) &&
           (node->n_in < 3 || f32_or_bf16(o->in_storage[2])) && stats_f32;
}

/* Bands of output rows: one per plane where the planes give every thread 4
 * jobs, else as many as make that many (at least 2 rows each). */
static void split_rows(tg_conv_dw *d, int n_threads)
{
    int64_t planes = d->g.N * d->blocks, want = 4 * (int64_t)n_threads;
    int64_t bands = n_threads > 1 && planes < want ? (want + planes - 1) / planes : 1;
    int64_t most = (d->g.OH + 1) / 2;
    bands = bands > most ? most : bands < 1 ? 1 : bands;
    d->band = (d->g.OH + bands - 1) / bands;
    d->bands = (d->g.OH + d->band - 1) / d->band;
}

static void name_kernel(const tg_conv_dw *d, tg_kernel_plan *plan)
{
    static const char *const acts[] = {"", ", ReLU post-op", ", hard swish post-op",
                                       ", hard sigmoid post-op"};
    char rows[40] = "";
    if (d->bands > 1)
        snprintf(rows, sizeof rows, ", rows in %lld bands", (long long)d->bands);
    snprintf(plan->kernel, sizeof plan->kernel, "own dw_%s:avx512_bf16 %lldx%lld, nChw16c%s%s%s",
             d->f32 ? "f32" : "bf16", (long long)d->g.R, (long long)d->g.S, rows,
             d->fold ? ", batch norm folded, weights kept" : ", weights kept", acts[d->act]);
}

tg_status tg_conv_dw_create(const tg_tensor *node, const tg_plan_opts *o, tg_kernel_plan *plan,
                            tg_conv_dw **out)
{
    *out = NULL;
    tg_conv_geom g = tg_conv_geom_of(node);
    if (!applies(node, &g, o))
        return TG_ERR_UNSUPPORTED;
    tg_conv_dw *d = tg_calloc(1, sizeof *d);
    if (!d)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory for the depthwise kernel", node->name);
    d->g = g;
    d->blocks = tg_channel_blocks(g.K);
    d->row_len = (g.OW - 1) * g.sw + g.S;
    d->n_threads = o->n_threads > 1 ? o->n_threads : 1;
    d->ring_bytes = tg_conv_align((size_t)(g.R * d->row_len) * TG_CHANNEL_BLOCK * sizeof(float));
    d->act = act_of(o->post_act);
    if (d->act == DW_ACT_HARD_SIGMOID)
        d->act_a = tg_act_a(o->post_act), d->act_b = tg_act_b(o->post_act);
    d->fold = o->fold_norm;
    d->f32 = o->in_storage[0] == TG_F32;
    d->w_type = o->in_storage[1];
    d->bias = node->n_in >= 3 && node->in[2];
    d->b_type = d->bias ? o->in_storage[2] : TG_F32;
    split_rows(d, d->n_threads);
    size_t lanes = (size_t)(d->blocks * TG_CHANNEL_BLOCK);
    d->bias_off = tg_conv_align(lanes * (size_t)(g.R * g.S) * sizeof(float));
    size_t kept = d->bias_off + lanes * sizeof(float);
    if (!(d->cache = tg_weight_cache_create(kept))) {
        tg_free(d);
        return tg_error(TG_ERR_NOMEM, "%s: out of memory for the weight cache", node->name);
    }
    plan->scratch = d->ring_bytes * (size_t)d->n_threads;
    plan->kept_bytes = tg_conv_align(kept);
    plan->native_storage = true;
    name_kernel(d, plan);
    *out = d;
    return TG_OK;
}

void tg_conv_dw_free(tg_conv_dw *d)
{
    if (!d)
        return;
    tg_weight_cache_destroy(d->cache);
    tg_free(d);
}

/* The weights per block and tap, 16 lanes each, and the bias, with the
 * batch norm folded in (in double, rounded once, as conv_dnnl_run.c folds
 * it): scale gamma / sqrt(var + eps) per channel, bias (b - mean) scale +
 * beta. The padded lanes stay zero. */
static void fill_weights(const tg_conv_dw *d, const tg_kernel_args *a, float *kept)
{
    int64_t K = d->g.K, taps = d->g.R * d->g.S;
    float *bias = (float *)((unsigned char *)kept + d->bias_off);
    memset(kept, 0, d->bias_off + (size_t)(d->blocks * TG_CHANNEL_BLOCK) * sizeof(float));
    const float *stats = d->fold ? a->in[TG_FUSE_IN_STATS] : NULL;
    const float *gamma = d->fold ? a->in[TG_FUSE_IN_STATS + 1] : NULL;
    const float *beta = d->fold ? a->in[TG_FUSE_IN_STATS + 2] : NULL;
    for (int64_t c = 0; c < K; c++) {
        double b = d->bias ? tg_f32_or_bf16_at(a->in[2], d->b_type, c) : 0.0;
        tg_norm_fold f = stats ? tg_norm_fold_channel(d->fold, stats, K, gamma, beta, c, b)
                               : (tg_norm_fold){1.0, b};
        int64_t cb = c / TG_CHANNEL_BLOCK, lane = c % TG_CHANNEL_BLOCK;
        for (int64_t t = 0; t < taps; t++)
            kept[(cb * taps + t) * TG_CHANNEL_BLOCK + lane] =
                (float)(tg_f32_or_bf16_at(a->in[1], d->w_type, c * taps + t) * f.scale);
        bias[c] = (float)f.shift;
    }
}

#if TG_BF16_HW
typedef struct dw_job {
    const tg_conv_dw *d;
    const unsigned char *x;
    unsigned char *y;
    const float *w;
    unsigned char *scratch;
} dw_job;

TG_VEC_INLINE TG_BF16_HW_TARGET __m512 widen16(const uint16_t *p)
{
    __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
}

/* Input row ih of a plane widened into dst: row_len pixels, the padding
 * columns (and any past the input) zero. */
TG_VEC_INLINE TG_BF16_HW_TARGET void widen_row(const tg_conv_dw *d, const unsigned char *plane,
                                               int64_t ih, float *dst, const bool f32)
{
    int64_t W = d->g.W, pw = d->g.pw, L = d->row_len;
    int64_t j0 = pw < L ? pw : L, j1 = pw + W < L ? pw + W : L;
    /* input column j - pw is ring column j */
    const float *src32 = (const float *)plane + ih * W * TG_CHANNEL_BLOCK;
    const uint16_t *src = (const uint16_t *)plane + ih * W * TG_CHANNEL_BLOCK;
    for (int64_t j = 0; j < j0; j++)
        _mm512_storeu_ps(dst + j * TG_CHANNEL_BLOCK, _mm512_setzero_ps());
    for (int64_t j = j0; j < j1; j++)
        _mm512_storeu_ps(dst + j * TG_CHANNEL_BLOCK,
                         f32 ? _mm512_loadu_ps(src32 + (j - pw) * TG_CHANNEL_BLOCK)
                             : widen16(src + (j - pw) * TG_CHANNEL_BLOCK));
    for (int64_t j = j1; j < L; j++)
        _mm512_storeu_ps(dst + j * TG_CHANNEL_BLOCK, _mm512_setzero_ps());
}

/* The post-op on 16 sums, as the reference computes it: ReLU x < 0 ? 0 :
 * x (a NaN passes: MAXPS returns its second operand then); hard sigmoid
 * max(0, min(1, a x + b)) as fmax / fmin (a NaN gives 1: MINPS returns
 * its second operand, 1); hard swish x times that with 1/6 and 1/2. */
TG_VEC_INLINE TG_BF16_HW_TARGET __m512 post_op(const tg_conv_dw *d, __m512 v)
{
    __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    switch (d->act) {
    case DW_ACT_RELU:
        return _mm512_max_ps(zero, v);
    case DW_ACT_HARD_SWISH: {
        __m512 t = _mm512_fmadd_ps(v, _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f));
        return _mm512_mul_ps(v, _mm512_max_ps(_mm512_min_ps(t, one), zero));
    }
    case DW_ACT_HARD_SIGMOID: {
        __m512 t = _mm512_fmadd_ps(v, _mm512_set1_ps(d->act_a), _mm512_set1_ps(d->act_b));
        return _mm512_max_ps(_mm512_min_ps(t, one), zero);
    }
    case DW_ACT_NONE:
        return v;
    default:
        TG_UNREACHABLE("depthwise post-op", d->act);
    }
}

/* T output pixels from ow on: the sums from the bias over every live row's
 * taps, the post-op, the padded lanes (not in `lanes`) zero, narrowed. */
TG_VEC_INLINE TG_BF16_HW_TARGET void tile(const tg_conv_dw *d, const float *const *rows,
                                          const float *w, __m512 bias, __mmask16 lanes, void *out,
                                          int64_t ow, const int T, const bool f32)
{
    int64_t S = d->g.S, sw = d->g.sw;
    __m512 acc[DW_TILE];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++)
        acc[t] = bias;
    for (int64_t r = 0; r < d->g.R; r++) {
        if (!rows[r])
            continue;
        const float *p = rows[r] + ow * sw * TG_CHANNEL_BLOCK;
        const float *wr = w + r * S * TG_CHANNEL_BLOCK;
        for (int64_t s = 0; s < S; s++) {
            __m512 wv = _mm512_loadu_ps(wr + s * TG_CHANNEL_BLOCK);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++)
                acc[t] = _mm512_fmadd_ps(_mm512_loadu_ps(p + (t * sw + s) * TG_CHANNEL_BLOCK), wv,
                                         acc[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        __m512 v = _mm512_maskz_mov_ps(lanes, post_op(d, acc[t]));
        if (f32) {
            _mm512_storeu_ps((float *)out + (ow + t) * TG_CHANNEL_BLOCK, v);
        } else {
            __m256bh h = _mm512_cvtneps_pbh(v);
            memcpy((uint16_t *)out + (ow + t) * TG_CHANNEL_BLOCK, &h, sizeof h);
        }
    }
}

/* Output row oh of a plane from the widened rows it reads (NULL: padding). */
TG_VEC_INLINE TG_BF16_HW_TARGET void out_row(const tg_conv_dw *d, const float *const *rows,
                                             const float *w, __m512 bias, __mmask16 lanes,
                                             void *out, const bool f32)
{
    int64_t ow = 0, OW = d->g.OW;
    for (; ow + DW_TILE <= OW; ow += DW_TILE)
        tile(d, rows, w, bias, lanes, out, ow, DW_TILE, f32);
        /* the rest in one tile too: one pixel at a time chains its R x S FMAs
         * on one sum (a 7x7 map's 5x5 convolution ran at half oneDNN's speed) */
#define DW_REST(T)                                                                                 \
    case T:                                                                                        \
        tile(d, rows, w, bias, lanes, out, ow, T, f32);                                            \
        break;
    switch (OW - ow) {
        DW_REST(1)
        DW_REST(2)
        DW_REST(3)
        DW_REST(4)
        DW_REST(5)
        DW_REST(6)
        DW_REST(7)
    case 0:
        break;
    default:
        TG_UNREACHABLE("pixels left after whole tiles", OW - ow);
    }
#undef DW_REST
}

/* Rows [oh0, oh1) of plane (n, cb) with `ring` for the widened input rows:
 * row ih in slot ih mod R (the R rows an output row reads are R
 * consecutive ones, so they never share a slot). */
TG_VEC_INLINE TG_BF16_HW_TARGET void plane_rows(const dw_job *j, int64_t n, int64_t cb, int64_t oh0,
                                                int64_t oh1, float *ring, const bool f32)
{
    const tg_conv_dw *d = j->d;
    const tg_conv_geom *g = &d->g;
    int64_t plane = n * d->blocks + cb, taps = g->R * g->S, L = d->row_len;
    size_t es = f32 ? sizeof(float) : sizeof(uint16_t);
    const unsigned char *x = j->x + (size_t)(plane * g->H * g->W * TG_CHANNEL_BLOCK) * es;
    unsigned char *y = j->y + (size_t)(plane * g->OH * g->OW * TG_CHANNEL_BLOCK) * es;
    const float *w = j->w + cb * taps * TG_CHANNEL_BLOCK;
    const float *bias_at = (const float *)((const unsigned char *)j->w + d->bias_off);
    __m512 bias = _mm512_loadu_ps(bias_at + cb * TG_CHANNEL_BLOCK);
    int64_t live = g->K - cb * TG_CHANNEL_BLOCK;
    __mmask16 lanes = live >= TG_CHANNEL_BLOCK ? (__mmask16)0xffff : (__mmask16)((1u << live) - 1);
    int64_t tag[DW_MAX_TAPS];
    const float *rows[DW_MAX_TAPS];
    for (int64_t r = 0; r < g->R; r++)
        tag[r] = -1;
    for (int64_t oh = oh0; oh < oh1; oh++) {
        for (int64_t r = 0; r < g->R; r++) {
            int64_t ih = oh * g->sh - g->ph + r, slot = ih % g->R;
            rows[r] = NULL;
            if (ih < 0 || ih >= g->H)
                continue;
            float *at = ring + slot * L * TG_CHANNEL_BLOCK;
            if (tag[slot] != ih)
                widen_row(d, x, ih, at, f32);
            tag[slot] = ih;
            rows[r] = at;
        }
        out_row(d, rows, w, bias, lanes, y + (size_t)(oh * g->OW * TG_CHANNEL_BLOCK) * es, f32);
    }
}

TG_VEC_INLINE TG_BF16_HW_TARGET void dw_jobs(const dw_job *j, int64_t begin, int64_t end, int part,
                                             const bool f32)
{
    const tg_conv_dw *d = j->d;
    float *ring = (float *)(j->scratch + (size_t)part * d->ring_bytes);
    for (int64_t i = begin; i < end; i++) {
        int64_t band = i % d->bands, plane = i / d->bands;
        int64_t oh0 = band * d->band, oh1 = oh0 + d->band < d->g.OH ? oh0 + d->band : d->g.OH;
        plane_rows(j, plane / d->blocks, plane % d->blocks, oh0, oh1, ring, f32);
    }
}

/* One copy for each storage type, its loads and stores fixed. */
TG_BF16_HW_TARGET __attribute__((flatten)) static void dw_loop_bf16(void *ctx, int64_t begin,
                                                                    int64_t end, int part)
{
    dw_jobs(ctx, begin, end, part, false);
}

TG_BF16_HW_TARGET __attribute__((flatten)) static void dw_loop_f32(void *ctx, int64_t begin,
                                                                   int64_t end, int part)
{
    dw_jobs(ctx, begin, end, part, true);
}
#endif

void tg_conv_dw_run(const tg_conv_dw *d, const tg_kernel_args *a)
{
    uint64_t version = a->weights_version;
    if (!version) /* no version (a test's call): derive afresh */
        version = tg_process_next_weights_version();
    bool fill;
    float *kept = tg_weight_cache_get(d->cache, a->in[1], version, &fill);
    if (!kept)
        tg_dnnl_run_failed(dnnl_out_of_memory, "keeping a depthwise conv2d's weights");
    if (fill)
        fill_weights(d, a, kept);
#if TG_BF16_HW
    dw_job j = {d, a->in[0], a->out, kept, a->scratch};
    /* the rings are sized for the planned threads: a larger pool runs serially */
    tg_pool *pool = a->pool && tg_pool_threads(a->pool) <= d->n_threads ? a->pool : NULL;
    tg_pool_for(pool, d->g.N * d->blocks * d->bands, d->f32 ? dw_loop_f32 : dw_loop_bf16, &j);
#endif
}
