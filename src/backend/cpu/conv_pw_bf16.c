/* backend/cpu/conv_pw_bf16.c - an inference program's 1x1 convolution
 * (stride 1, ungrouped) with few input channels, its activations stored in
 * bf16 in nChw16c, computed with AVX-512 BF16's VDPBF16PS.
 *
 * Why its own: with few input channels (16..64; up to 256 taken, see
 * PW_DEFAULT_MAX_C) a 1x1 convolution does few multiply-adds per value it
 * reads or writes, so bf16 should bring it near twice its f32 speed: half
 * the bytes, and half the instructions (VDPBF16PS does two products a
 * lane). oneDNN's jit_bf16_1x1 kernel loses instead (mobilenet_v3_large at
 * batch 32, one thread, under load: the [64 out, 16 in] convolution at
 * 112x112 took 4.20 ms in f32 and 6.81 in bf16, the [72, 24] ones at 56x56
 * 2.40 -> 2.69): its blocking is made for many input channels.
 *
 * In nChw16c a 1x1 convolution of one image is a small matrix product,
 * y[ob][p][16] = bias + sum_c x[c/16][p][c%16] w[c][16 ob..]. The weights
 * are packed once per weights version (backend/cpu/weight_cache.h), a
 * fused batch norm folded in (compile/fuse.c folds them only in f32
 * programs today; an ONNX file exported in eval mode has them in the bias
 * already), as pairs of input channels per output lane, [ob][c/2][16][2]
 * bf16, with the folded bias after them in f32; input channels past the
 * tensor's own (the padding of 24, 40: its lanes hold finite values,
 * compile/layout.h) and output channels past its own get zero weights and
 * bias, and the output's padded lanes are written as zeros (0 x NaN would
 * be NaN there). A tile of T pixels x OB output blocks (6x4, 8x3, 12x2,
 * 12x1: the accumulators and the OB weight vectors fill the 32 registers;
 * the compiled loop spills none) keeps its sums in f32; each pair of input channels of
 * a pixel is broadcast as one 32-bit value and VDPBF16PS adds its two
 * products to each output lane. Then, as oneDNN's post-ops do: the
 * residual added (read as the output is stored), the activation (ReLU,
 * hard swish, hard sigmoid, with the reference's formulas: ReLU passes a
 * NaN, hard sigmoid's clamps take a NaN to the bound, ops/activation.c),
 * rounded to bf16 with VCVTNEPS2BF16 (nearest even, as every bf16 store of
 * the project).
 *
 * Work: parts of an image's pixels (all output blocks each, so a part's
 * input is read from the cache for every block), claimed over the device's
 * pool; small batches are cut finer so that two threads share one image.
 * Streaming the output past the caches (non-temporal stores) measured no
 * faster on mobilenet_v3_large's large early maps.
 * Chosen only where the CPU has AVX-512 BF16 and TILEGRAPH_ISA allows it
 * (core/bf16.h tg_bf16_hw), with TG_KERNELS unset (dnnl keeps oneDNN). */
#include "backend/cpu/conv_pw_bf16.h"

#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/weight_cache.h"
#include "core/alloc.h"
#include "core/bf16.h"
#include "core/process.h"
#include "ops/conv.h"
#include "ops/norm.h"
#include "ops/unary.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wpsabi"

enum { PW_NONE, PW_RELU, PW_HSWISH, PW_HSIGMOID };

/* Up to 128 input channels, 256 on maps of 100 pixels and more: measured
 * per convolution against oneDNN's bf16 1x1 in mobilenet_v3_large at batch
 * 32, one thread (profiles, two runs each, under load, ms per run). Up to
 * 64 it wins by 1.4-4x (above); 72 -> 24 at 56x56 2.6 -> 2.0, 120 -> 40 at
 * 28x28 0.8 -> 0.65, 112 -> 672 at 14x14 2.3 -> 2.15, 200 -> 80 and 240 ->
 * 80 at 14x14 even; it loses on 160 -> 960 at 7x7 (1.05-1.13 against
 * 1.11-1.24) and squeeze-excite's 168 -> 672 and 240 -> 960 on 1x1 maps
 * (0.09 against 0.12, 0.14 against 0.21), where a part of 49 pixels (or of
 * the batch's 32 images) reads hundreds of KiB of weights; beyond 256 it
 * loses more. */
#define PW_DEFAULT_MAX_C 128
#define PW_WIDE_MAP 100
#define PW_MAX_MAX_C 1024
static int max_channels = PW_DEFAULT_MAX_C;

/* A residual of this many bytes and more is prefetched a tile ahead: far
 * beyond the caches, 16 output blocks' rows of it at once were more than
 * the hardware prefetchers followed (ResNet-50's layer1 at batch 32, one
 * thread, 64 -> 256 at 56x56 with the add and ReLU fused: oneDNN 13.3-14.1
 * ms per run, own 15.0-16.7, prefetched 9.4-12.2; the model's bf16 run
 * 607-616 ms before this kernel, 582-614 with it, 564-574 prefetched;
 * under load). Smaller ones (mobilenet_v3_large's) are not: there it
 * measured no better. */
#define PW_PREFETCH_BYTES ((size_t)16 << 20)

void tg_conv_pw_set_max_channels(int c)
{
    max_channels = c <= 0 ? PW_DEFAULT_MAX_C : c > PW_MAX_MAX_C ? PW_MAX_MAX_C : c;
}

struct tg_conv_pw {
    int64_t K, C, P; /* output and input channels, pixels of one image */
    int64_t kb, cb;  /* their 16-channel blocks */
    int64_t N;       /* images */
    /* elements from one input block (output block) of a pixel to the
     * next, and from one pixel to the next; 1x1 maps (squeeze-excite's):
     * the batch's images are the pixels of one image, so that a tile
     * reads its weights once for several of them */
    int64_t x_cb, x_px, y_ob, y_px;
    tg_dtype w_type, b_type;
    bool bias, residual; /* a bias input (in[2]), a fused residual add */
    const tg_tensor *fold;
    int act;
    float act_a, act_b; /* hard sigmoid's */
    size_t w_bytes;     /* of the packed weights; the bias follows */
    size_t packed_bytes;
    tg_weight_cache *cache;
};

static int act_of(const tg_tensor *act)
{
    if (!act)
        return PW_NONE;
    if (act->op == TG_OP_RELU)
        return PW_RELU;
    if (tg_is_hard_swish(act) || act->op == TG_OP_MUL) /* x * hard_sigmoid(x), compile/fuse.c */
        return PW_HSWISH;
    return tg_is_hard_sigmoid(act) ? PW_HSIGMOID : -1;
}

static bool stored_f32_or_bf16(tg_dtype t)
{
    return t == TG_F32 || t == TG_BF16;
}

/* Whether the kernel computes node as the plan options describe it. */
static bool applies(const tg_tensor *node, const tg_plan_opts *o)
{
    if (!tg_bf16_hw() || !o->inference || node->op != TG_OP_CONV2D || o->compute != TG_BF16 ||
        tg_dnnl_mode_get() != TG_DNNL_AUTO)
        return false;
    tg_conv_geom g = tg_conv_geom_of(node);
    bool shape = g.G == 1 && g.R == 1 && g.S == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 &&
                 g.pw == 0 && g.OH == g.H && g.OW == g.W &&
                 tg_channel_blocks(g.C) * TG_CHANNEL_BLOCK <=
                     (g.H * g.W >= PW_WIDE_MAP ? 2 : 1) * max_channels;
    bool stored = o->in_blocked[0] && o->out_blocked && o->in_storage[0] == TG_BF16 &&
                  o->out_storage == TG_BF16 && stored_f32_or_bf16(o->in_storage[1]) &&
                  (node->n_in < 3 || stored_f32_or_bf16(o->in_storage[2]));
    return shape && stored && act_of(o->post_act) >= 0;
}

tg_status tg_conv_pw_plan(const tg_tensor *node, const tg_plan_opts *o, tg_kernel_plan *plan,
                          tg_conv_pw **out)
{
    *out = NULL;
    if (!TG_BF16_HW || !applies(node, o))
        return TG_OK;
    tg_conv_geom g = tg_conv_geom_of(node);
    tg_conv_pw *pw = tg_calloc(1, sizeof *pw);
    if (!pw)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory planning its 1x1 kernel", node->name);
    pw->K = g.K, pw->C = g.C, pw->P = g.H * g.W, pw->N = g.N;
    pw->kb = tg_channel_blocks(g.K), pw->cb = tg_channel_blocks(g.C);
    pw->x_cb = pw->y_ob = pw->P * 16, pw->x_px = pw->y_px = 16;
    if (pw->P == 1) {
        pw->P = pw->N, pw->N = 1;
        pw->x_cb = pw->y_ob = 16, pw->x_px = pw->cb * 16, pw->y_px = pw->kb * 16;
    }
    pw->w_type = o->in_storage[1];
    pw->b_type = node->n_in == 3 ? o->in_storage[2] : TG_F32;
    pw->bias = node->n_in == 3;
    pw->residual = o->post_add != NULL;
    pw->fold = o->fold_norm;
    pw->act = act_of(o->post_act);
    if (pw->act == PW_HSIGMOID)
        pw->act_a = tg_act_a(o->post_act), pw->act_b = tg_act_b(o->post_act);
    pw->w_bytes = (size_t)(pw->kb * pw->cb) * 8 * 16 * sizeof(uint32_t);
    pw->packed_bytes = pw->w_bytes + (size_t)pw->kb * 16 * sizeof(float);
    /* packed into scratch where no cache keeps them (no weights version) */
    plan->scratch = pw->packed_bytes;
    plan->native_storage = true;
    if (tg_process_keep_weights()) {
        if (!(pw->cache = tg_weight_cache_create(pw->packed_bytes))) {
            tg_free(pw);
            return tg_error(TG_ERR_NOMEM, "%s: out of memory for its packed weights", node->name);
        }
        plan->kept_bytes = tg_conv_align(pw->packed_bytes);
    }
    static const char *acts[] = {"", ", ReLU", ", hard swish", ", hard sigmoid"};
    snprintf(plan->kernel, sizeof plan->kernel, "own 1x1 (bf16) (avx512_bf16 dot products%s%s%s)",
             pw->fold ? ", batch norm folded" : "", pw->residual ? ", residual add" : "",
             acts[pw->act]);
    *out = pw;
    return TG_OK;
}

void tg_conv_pw_free(tg_conv_pw *pw)
{
    if (!pw)
        return;
    tg_weight_cache_destroy(pw->cache);
    tg_free(pw);
}

/* Output channel k's folded scale and bias (the batch norm after the
 * convolution, compile/fuse.c; as conv_dnnl_run.c's fold_into, in double). */
static void fold_channel(const tg_conv_pw *pw, const tg_kernel_args *a, int64_t k, double *scale,
                         double *shift)
{
    double b = pw->bias ? tg_f32_or_bf16_at(a->in[2], pw->b_type, k) : 0.0;
    tg_norm_fold f = pw->fold ? tg_norm_fold_channel(pw->fold, a->in[TG_FUSE_IN_STATS], pw->K,
                                                     a->in[TG_FUSE_IN_STATS + 1],
                                                     a->in[TG_FUSE_IN_STATS + 2], k, b)
                              : (tg_norm_fold){1.0, b};
    *scale = f.scale;
    *shift = f.shift;
}

/* The weights as pairs of input channels per output lane, [ob][c/2][16]
 * 32-bit (the lower half the even channel, as VDPBF16PS pairs them), then
 * the bias in f32; zeros beyond the tensor's own channels. */
static void pack(const tg_conv_pw *pw, const tg_kernel_args *a, unsigned char *dst)
{
    uint32_t *w = (uint32_t *)dst;
    float *bias = (float *)(dst + pw->w_bytes);
    int64_t pairs = pw->cb * 8;
    for (int64_t k = 0; k < pw->kb * 16; k++) {
        double scale = 0.0, shift = 0.0;
        if (k < pw->K)
            fold_channel(pw, a, k, &scale, &shift);
        bias[k] = (float)shift;
        for (int64_t q = 0; q < pairs; q++) {
            uint32_t pair = 0;
            for (int h = 0; h < 2; h++) {
                int64_t c = 2 * q + h;
                float v =
                    k < pw->K && c < pw->C
                        ? (float)(tg_f32_or_bf16_at(a->in[1], pw->w_type, k * pw->C + c) * scale)
                        : 0.0f;
                pair |= (uint32_t)tg_bf16_narrow(v) << (16 * h);
            }
            w[((k / 16) * pairs + q) * 16 + k % 16] = pair;
        }
    }
}

/* One image's operands for the tiles. */
typedef struct pw_img {
    const uint16_t *x, *res;
    uint16_t *y;
    const uint32_t *w;
    const float *bias;
    int64_t x_cb, x_px, y_ob, y_px, cb, kb;
    uint16_t last_lanes; /* the last output block's own channels (the rest: padding) */
    bool prefetch;       /* the residual: pw_job's prefetch */
    int act;
    float act_a, act_b;
} pw_img;

#if TG_BF16_HW

TG_BF16_HW_TARGET TG_VEC_INLINE __m512 widen16(const uint16_t *p)
{
    __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

/* The activation with the reference's formulas (ops/unary.c, activation.c):
 * MINPS gives its second operand for a NaN first one, as fmin(1, NaN) does. */
TG_BF16_HW_TARGET TG_VEC_INLINE __m512 activate(const pw_img *im, __m512 v)
{
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    switch (im->act) {
    case PW_RELU: /* x < 0 ? 0 : x */
        return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), zero);
    case PW_HSWISH: { /* x * max(0, min(1, x / 6 + 1/2)) */
        __m512 h = _mm512_add_ps(_mm512_div_ps(v, _mm512_set1_ps(6.0f)), _mm512_set1_ps(0.5f));
        return _mm512_mul_ps(v, _mm512_max_ps(_mm512_min_ps(h, one), zero));
    }
    case PW_HSIGMOID: { /* max(0, min(1, a x + b)) */
        __m512 h = _mm512_fmadd_ps(v, _mm512_set1_ps(im->act_a), _mm512_set1_ps(im->act_b));
        return _mm512_max_ps(_mm512_min_ps(h, one), zero);
    }
    case PW_NONE:
        return v;
    default:
        TG_UNREACHABLE("1x1 post-op", im->act);
    }
}

/* T pixels from p x OB output blocks from ob0: the sums in registers. */
TG_BF16_HW_TARGET TG_VEC_INLINE void tile(const pw_img *im, int64_t p, int64_t ob0, const int T,
                                          const int OB)
{
    __m512 acc[12][4];
    int64_t pairs = im->cb * 8;
#pragma GCC unroll 4
    for (int j = 0; j < OB; j++) {
        __m512 b = _mm512_loadu_ps(im->bias + (ob0 + j) * 16);
#pragma GCC unroll 12
        for (int t = 0; t < T; t++)
            acc[t][j] = b;
    }
    if (im->prefetch) /* the next tile's residual, while this one's sums run */
#pragma GCC unroll 4
        for (int j = 0; j < OB; j++)
#pragma GCC unroll 12
            for (int t = 0; t < T; t += 2)
                _mm_prefetch(
                    (const char *)(im->res + (ob0 + j) * im->y_ob + (p + T + t) * im->y_px),
                    _MM_HINT_T0);
    for (int64_t cb = 0; cb < im->cb; cb++) {
        const uint16_t *xb = im->x + cb * im->x_cb + p * im->x_px;
        const uint32_t *wb = im->w + (ob0 * pairs + cb * 8) * 16;
        for (int q = 0; q < 8; q++) {
            __m512i w[4];
#pragma GCC unroll 4
            for (int j = 0; j < OB; j++)
                w[j] = _mm512_loadu_si512(wb + (j * pairs + q) * 16);
#pragma GCC unroll 12
            for (int t = 0; t < T; t++) {
                int32_t pair;
                memcpy(&pair, xb + t * im->x_px + 2 * q, sizeof pair);
                __m512bh xv = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 4
                for (int j = 0; j < OB; j++)
                    acc[t][j] = _mm512_dpbf16_ps(acc[t][j], xv, (__m512bh)w[j]);
            }
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < OB; j++) {
#pragma GCC unroll 12
        for (int t = 0; t < T; t++) {
            int64_t off = (ob0 + j) * im->y_ob + (p + t) * im->y_px;
            __m512 v = acc[t][j];
            if (im->res)
                v = _mm512_add_ps(v, widen16(im->res + off));
            v = activate(im, v);
            if (ob0 + j == im->kb - 1) /* padding: zeros, finite whatever the input */
                v = _mm512_maskz_mov_ps(im->last_lanes, v);
            _mm256_storeu_si256((__m256i *)(im->y + off), (__m256i)_mm512_cvtneps_pbh(v));
        }
    }
}

/* Pixels [p0, p1) for OB blocks from ob0: whole tiles of T, then one by one. */
#define PW_TILES(OB, T)                                                                            \
    static TG_BF16_HW_TARGET void tiles_##OB(const pw_img *im, int64_t p0, int64_t p1,             \
                                             int64_t ob0)                                          \
    {                                                                                              \
        int64_t p = p0;                                                                            \
        for (; p + T <= p1; p += T)                                                                \
            tile(im, p, ob0, T, OB);                                                               \
        for (; p < p1; p++)                                                                        \
            tile(im, p, ob0, 1, OB);                                                               \
    }
PW_TILES(1, 12)
PW_TILES(2, 12)
PW_TILES(3, 8)
PW_TILES(4, 6)

/* Pixels [p0, p1) of one image, the output blocks in groups of at most 4. */
static TG_BF16_HW_TARGET void rows_hw(const pw_img *im, int64_t kb, int64_t p0, int64_t p1)
{
    int64_t groups = (kb + 3) / 4;
    for (int64_t gi = 0; gi < groups; gi++) {
        int64_t ob0 = kb * gi / groups, ob1 = kb * (gi + 1) / groups;
        switch (ob1 - ob0) {
        case 1:
            tiles_1(im, p0, p1, ob0);
            break;
        case 2:
            tiles_2(im, p0, p1, ob0);
            break;
        case 3:
            tiles_3(im, p0, p1, ob0);
            break;
        case 4:
            tiles_4(im, p0, p1, ob0);
            break;
        default:
            TG_UNREACHABLE("output blocks in a group", ob1 - ob0);
        }
    }
}
#endif

typedef struct pw_job {
    const tg_conv_pw *pw;
    const tg_kernel_args *a;
    const unsigned char *packed;
    int64_t chunk, chunks; /* pixels a part, parts an image */
    bool prefetch;
} pw_job;

static void pw_loop(void *ctx, int64_t begin, int64_t end, int part)
{
    const pw_job *j = ctx;
    const tg_conv_pw *pw = j->pw;
    (void)part;
    for (int64_t i = begin; i < end; i++) {
        int64_t n = i / j->chunks, p0 = i % j->chunks * j->chunk;
        int64_t p1 = p0 + j->chunk < pw->P ? p0 + j->chunk : pw->P;
        size_t x_off = (size_t)(n * pw->cb * pw->P * 16), y_off = (size_t)(n * pw->kb * pw->P * 16);
        const uint16_t *res = j->a->in[TG_FUSE_IN_RESIDUAL];
        pw_img im = {.x = (const uint16_t *)j->a->in[0] + x_off,
                     .res = pw->residual ? res + y_off : NULL,
                     .y = (uint16_t *)j->a->out + y_off,
                     .w = (const uint32_t *)j->packed,
                     .bias = (const float *)(j->packed + pw->w_bytes),
                     .x_cb = pw->x_cb,
                     .x_px = pw->x_px,
                     .y_ob = pw->y_ob,
                     .y_px = pw->y_px,
                     .cb = pw->cb,
                     .kb = pw->kb,
                     .last_lanes = (uint16_t)(0xffffu >> (pw->kb * 16 - pw->K)),
                     .act = pw->act,
                     .act_a = pw->act_a,
                     .act_b = pw->act_b,
                     .prefetch = j->prefetch};
#if TG_BF16_HW
        rows_hw(&im, pw->kb, p0, p1);
#else
        (void)im, (void)p1;
#endif
    }
}

/* 256 pixels a part (their input, up to 32 KiB at 64 channels, stays in
 * the cache while every output block reads it), cut finer where the batch
 * would give fewer than 4 parts a thread. */
static int64_t chunk_of(const tg_conv_pw *pw, int threads)
{
    int64_t chunk = 256, want = 4 * (int64_t)threads;
    int64_t parts = pw->N * ((pw->P + chunk - 1) / chunk);
    if (parts < want) {
        chunk = (pw->N * pw->P + want - 1) / want;
        chunk = chunk < 24 ? 24 : chunk;
    }
    return chunk;
}

void tg_conv_pw_run(const tg_conv_pw *pw, const tg_kernel_args *a)
{
    bool fill = true;
    unsigned char *packed =
        pw->cache ? tg_weight_cache_get(pw->cache, a->in[1], a->weights_version, &fill) : NULL;
    if (!packed) /* no weights version: packed afresh into scratch */
        packed = a->scratch, fill = true;
    if (fill)
        pack(pw, a, packed);
    int threads = a->pool ? tg_pool_threads(a->pool) : 1;
    pw_job j = {pw, a, packed, chunk_of(pw, threads), 0, false};
    j.chunks = (pw->P + j.chunk - 1) / j.chunk;
    j.prefetch = pw->residual && (size_t)(pw->N * pw->kb * pw->P) * 32 >= PW_PREFETCH_BYTES;
    tg_pool_for(a->pool, pw->N * j.chunks, pw_loop, &j);
}
