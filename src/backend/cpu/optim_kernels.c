/* backend/cpu/optim_kernels.c - the cpu backend's SGD_UPDATE and ADAM_UPDATE
 * kernels (ops/optim.c is what they are and says the arithmetic): plain
 * loops over contiguous memory, one per case, so the compiler vectorises
 * them, split over the device's threads when large; bf16-stored operands
 * read and written in place; LAMB's two passes over blocks. */
#include "backend/backend.h"
#include "ops/optim.h"

#include "core/bf16.h"
#include "core/clones.h"
#include "core/error.h"
#include "core/rng.h"

#include <math.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

/* GCC 12 at -O2 vectorises only loops that need no scalar epilogue (its
 * "very cheap" cost model), which leaves every update loop scalar. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

/* Below this many elements an update runs on the calling thread: waking the
 * pool would cost more than the loop. */
#define OPTIM_PARALLEL_MIN 32768

/* ---- fast kernels ------------------------------------------------------------------ */

static void run_split(tg_pool *pool, int64_t n, tg_pool_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (n < OPTIM_PARALLEL_MIN || tg_pool_threads(pool) == 1)
        fn(ctx, 0, n, 0);
    else
        tg_pool_for(pool, n, fn, ctx);
}

/* An update's operands when some are stored in bf16, or its gradient is to
 * be unscaled (tg_kernel_args.update): see "operands stored in bf16". */
typedef struct half_ops {
    void *at[4]; /* operand k's storage, the whole tensor */
    bool bf16[4];
    int n_in, n_mutated;
    float unscale; /* the gradient's factor; 1: none */
    bool stochastic;
    uint32_t key32[4]; /* operand k's tg_round_key32(round_key ^ k) */
    int64_t first;     /* the index of element 0 for stochastic rounding */
} half_ops;

typedef struct sgd_job {
    float *p, *buf;
    const float *g;
    float lr, wd, momentum, keep; /* keep = 1 - dampening */
    bool first, nesterov;
    half_ops half;
} sgd_job;

/* One loop per case, with the gradient-plus-decay expression D substituted,
 * so every loop body is branch-free and vectorises. A zero weight decay adds
 * nothing (not 0*p), exactly as PyTorch skips it. */
#define SGD_CASES(D)                                                                               \
    do {                                                                                           \
        if (!buf)                                                                                  \
            for (int64_t i = 0; i < n; i++) {                                                      \
                float d = (D);                                                                     \
                p[i] = p[i] - lr * d;                                                              \
            }                                                                                      \
        else if (j->first && !j->nesterov)                                                         \
            for (int64_t i = 0; i < n; i++) {                                                      \
                float d = (D);                                                                     \
                buf[i] = d;                                                                        \
                p[i] = p[i] - lr * d;                                                              \
            }                                                                                      \
        else if (j->first)                                                                         \
            for (int64_t i = 0; i < n; i++) {                                                      \
                float d = (D);                                                                     \
                buf[i] = d;                                                                        \
                p[i] = p[i] - lr * (d + mom * d);                                                  \
            }                                                                                      \
        else if (!j->nesterov)                                                                     \
            for (int64_t i = 0; i < n; i++) {                                                      \
                float d = (D), b = buf[i] * mom + keep * d;                                        \
                buf[i] = b;                                                                        \
                p[i] = p[i] - lr * b;                                                              \
            }                                                                                      \
        else                                                                                       \
            for (int64_t i = 0; i < n; i++) {                                                      \
                float d = (D), b = buf[i] * mom + keep * d;                                        \
                buf[i] = b;                                                                        \
                p[i] = p[i] - lr * (d + mom * b);                                                  \
            }                                                                                      \
    } while (0)

/* n elements, f32, in place: the f32 kernel and the bf16 one's blocks. */
static inline void sgd_loop(const sgd_job *j, float *restrict p, float *restrict buf,
                            const float *restrict g, int64_t n)
{
    const float lr = j->lr, wd = j->wd, mom = j->momentum, keep = j->keep;
    if (wd != 0)
        SGD_CASES(g[i] + wd * p[i]);
    else
        SGD_CASES(g[i]);
}

/* Not compiled per instruction set: the f32 SGD step is bound by memory,
 * and its AVX-512 copy measured no faster (Adam's, with its divisions and
 * square roots, is a quarter faster). */
static void sgd_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const sgd_job *j = ctx;
    sgd_loop(j, j->p + begin, j->buf ? j->buf + begin : NULL, j->g + begin, end - begin);
}

typedef struct adam_job {
    float *p, *m, *v;
    const float *g;
    float l2, shrink;     /* Adam: g += l2*p; AdamW: p *= shrink */
    float b1, c1, b2, c2; /* c = 1 - b */
    float step_size, bc2_sqrt, eps;
    half_ops half;
} adam_job;

/* The Adam loop runs in chunks: moments (vectorised), square roots, then the
 * step (vectorised). The square roots get their own loop because GCC does
 * not vectorise sqrtf while it may set errno; SSE's sqrtps gives the same
 * correctly rounded results four at a time. */
#define ADAM_CHUNK 512

static void sqrt_block(float *x, int n)
{
    int i = 0;
#if defined(__SSE__)
    for (; i + 4 <= n; i += 4)
        _mm_storeu_ps(x + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
#endif
    for (; i < n; i++)
        x[i] = sqrtf(x[i]);
}

/* AdamW's decay multiplies by shrink = 1 - lr*wd; Adam's shrink is exactly 1
 * (and p*1 == p), so only Adam's L2 term needs its own loop. */
#define ADAM_MOMENTS(G)                                                                            \
    for (int i = 0; i < c; i++) {                                                                  \
        float gi = (G);                                                                            \
        float mi = b1 * m[i] + c1 * gi;                                                            \
        float vi = b2 * v[i] + c2 * gi * gi;                                                       \
        m[i] = mi;                                                                                 \
        v[i] = vi;                                                                                 \
        root[i] = vi;                                                                              \
    }

/* One chunk of c <= ADAM_CHUNK elements, f32, in place: the f32 kernel
 * and the bf16 one's blocks. */
static inline void adam_chunk(const adam_job *j, float *restrict p, float *restrict m,
                              float *restrict v, const float *restrict g, int c)
{
    const float l2 = j->l2, shrink = j->shrink, b1 = j->b1, c1 = j->c1, b2 = j->b2, c2 = j->c2;
    const float step_size = j->step_size, bc2_sqrt = j->bc2_sqrt, eps = j->eps;
    float root[ADAM_CHUNK];
    if (l2 != 0)
        ADAM_MOMENTS(g[i] + l2 * p[i])
    else
        ADAM_MOMENTS(g[i])
    sqrt_block(root, c);
    for (int i = 0; i < c; i++)
        p[i] = p[i] * shrink - step_size * (m[i] / (root[i] / bc2_sqrt + eps));
}

TG_WIDE_KERNEL static void adam_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    const adam_job *j = ctx;
    for (int64_t at = begin; at < end; at += ADAM_CHUNK) {
        int c = end - at < ADAM_CHUNK ? (int)(end - at) : ADAM_CHUNK;
        adam_chunk(j, j->p + at, j->m + at, j->v + at, j->g + at, c);
    }
}

/* ---- operands stored in bf16 ---------------------------------------------------------- */

/* An update reading bf16 itself (tg_op_update_reads_bf16: the engine
 * passes the storage types in in_type and its staging's options in
 * update) runs the f32 loops above a chunk of ADAM_CHUNK elements at a
 * time: the chunk's bf16 operands widened into f32 arrays on the stack
 * (f32 ones used in place), the gradient multiplied by the unscale, the
 * loop run, the updated operands narrowed back, to nearest or
 * stochastically from the element's index. These are the values, the
 * formula and the rounding of the staged path (runtime/staging.c), so its
 * bits; but the conversions are inline in each instruction set's copy
 * (TG_WIDE_KERNEL) rather than calls per chunk, and the arrays stay in L1. */

/* Whether the update takes this path, and its operands if so. */
static bool half_prepare(const tg_kernel_args *a, half_ops *h)
{
    const tg_tensor *node = a->node;
    const tg_update_opts *u = a->update;
    bool some = false;
    *h = (half_ops){.n_in = node->n_in,
                    .n_mutated = node->n_mutated,
                    .unscale = u ? u->grad_unscale : 1.0f,
                    .stochastic = u && u->stochastic,
                    .first = u ? u->first : 0};
    for (int k = 0; k < node->n_in; k++) {
        h->at[k] = a->in[k];
        h->key32[k] = h->stochastic ? tg_round_key32(u->round_key ^ (uint64_t)k) : 0;
        h->bf16[k] = a->in_type[k] == TG_BF16;
        some |= h->bf16[k];
    }
    return some || h->unscale != 1.0f;
}

/* The run conversions a copy of the loops uses: core/bf16.h's generic
 * ones, or by AVX-512 BF16's instructions (the same bits); constants the
 * compiler calls directly once inlined. */
typedef struct half_convert {
    void (*widen)(const uint16_t *, float *, size_t);
    void (*narrow)(const float *, uint16_t *, size_t);
} half_convert;

#define HALF_GENERIC ((half_convert){tg_bf16_widen_run, tg_bf16_narrow_run})
#if TG_BF16_HW
#define HALF_HW ((half_convert){tg_bf16_widen_run_hw, tg_bf16_narrow_run_hw})
#endif

/* Operand k's elements [at, at + c) as f32: in place, or widened into blk. */
TG_VEC_INLINE float *half_load(const half_ops *h, int k, int64_t at, int c, float *blk,
                               half_convert cv)
{
    if (!h->bf16[k])
        return (float *)h->at[k] + at;
    cv.widen((const uint16_t *)h->at[k] + at, blk, (size_t)c);
    return blk;
}

/* The gradient's, times the unscale unless it is 1 (as staging: a copy). */
TG_VEC_INLINE const float *half_grad(const half_ops *h, int64_t at, int c, float *blk,
                                     half_convert cv)
{
    const float *g = half_load(h, h->n_in - 1, at, c, blk, cv);
    if (h->unscale == 1.0f)
        return g;
    for (int i = 0; i < c; i++)
        blk[i] = g[i] * h->unscale;
    return blk;
}

/* The updated operands x[k] (k < n_mutated) of elements [at, at + c) back
 * into their bf16 storage (f32 ones the loop updated in place). Stochastic
 * rounding draws as tg_convert_stochastic with key round_key ^ k and the
 * element's index. */
TG_VEC_INLINE void half_store(const half_ops *h, int64_t at, int c, float *const *x,
                              half_convert cv)
{
    for (int k = 0; k < h->n_mutated; k++) {
        if (!h->bf16[k])
            continue;
        uint16_t *d = (uint16_t *)h->at[k] + at;
        if (h->stochastic)
            tg_bf16_narrow_stochastic_run(x[k], d, (size_t)c, h->key32[k],
                                          (uint64_t)(h->first + at));
        else
            cv.narrow(x[k], d, (size_t)c);
    }
}

TG_VEC_INLINE void sgd_half_loop(const sgd_job *j, int64_t begin, int64_t end, half_convert cv)
{
    const half_ops *h = &j->half;
    float blk[3][ADAM_CHUNK];
    for (int64_t at = begin; at < end; at += ADAM_CHUNK) {
        int c = end - at < ADAM_CHUNK ? (int)(end - at) : ADAM_CHUNK;
        float *x[2] = {half_load(h, 0, at, c, blk[0], cv),
                       h->n_in == 3 ? half_load(h, 1, at, c, blk[1], cv) : NULL};
        sgd_loop(j, x[0], x[1], half_grad(h, at, c, blk[2], cv), c);
        half_store(h, at, c, x, cv);
    }
}

TG_VEC_INLINE void adam_half_loop(const adam_job *j, int64_t begin, int64_t end, half_convert cv)
{
    const half_ops *h = &j->half;
    float blk[4][ADAM_CHUNK];
    for (int64_t at = begin; at < end; at += ADAM_CHUNK) {
        int c = end - at < ADAM_CHUNK ? (int)(end - at) : ADAM_CHUNK;
        float *x[3] = {half_load(h, 0, at, c, blk[0], cv), half_load(h, 1, at, c, blk[1], cv),
                       half_load(h, 2, at, c, blk[2], cv)};
        adam_chunk(j, x[0], x[1], x[2], half_grad(h, at, c, blk[3], cv), c);
        half_store(h, at, c, x, cv);
    }
}

TG_BF16_POOL_FNS(sgd_half_range, sgd_half_loop, HALF_GENERIC, HALF_HW)
TG_BF16_POOL_FNS(adam_half_range, adam_half_loop, HALF_GENERIC, HALF_HW)

bool tg_op_update_reads_bf16(const tg_tensor *node)
{
    return tg_op_update_is_elementwise(node);
}

static void fwd_sgd(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    tg_optimizer o = tg_optim_params_get(&node->p);
    bool has_buf = node->n_in == 3;
    sgd_job j = {
        .p = a->in[0],
        .buf = has_buf ? a->in[1] : NULL,
        .g = a->in[has_buf ? 2 : 1],
        .lr = tg_lr_at(&o.lr, a->step),
        .wd = o.weight_decay,
        .momentum = o.momentum,
        .keep = (float)(1.0 - (double)o.dampening),
        .first = a->step <= 0,
        .nesterov = o.nesterov,
    };
    bool half = half_prepare(a, &j.half);
    tg_pool_fn fn = half ? TG_BF16_POOL_FN(sgd_half_range) : sgd_range;
    run_split(a->pool, tg_numel(node->in[0]), fn, &j);
}

/* ---- LAMB ---------------------------------------------------------------------------- */

#define LAMB_BLOCK ADAM_CHUNK

typedef struct lamb_job {
    float *p, *m, *v;
    const float *g;
    float b1, c1, b2, c2, bc1, bc2_sqrt, eps, wd;
    float step; /* second pass: lr * trust ratio */
    int64_t n;
    double *sums; /* first pass on threads: per block, sum p^2 and sum r^2 */
} lamb_job;

static int lamb_block_len(const lamb_job *j, int64_t b)
{
    int64_t left = j->n - b * LAMB_BLOCK;
    return left < LAMB_BLOCK ? (int)left : LAMB_BLOCK;
}

/* r for the block starting at element `at` (c elements) from its moments. */
static void lamb_direction(const lamb_job *j, int64_t at, int c, float *restrict r)
{
    const float *restrict p = j->p + at, *restrict m = j->m + at, *restrict v = j->v + at;
    const float bc1 = j->bc1, bc2_sqrt = j->bc2_sqrt, eps = j->eps, wd = j->wd;
    for (int i = 0; i < c; i++)
        r[i] = v[i];
    sqrt_block(r, c);
    for (int i = 0; i < c; i++)
        r[i] = m[i] / bc1 / (r[i] / bc2_sqrt + eps) + wd * p[i];
}

/* First pass over block b: new moments, then sum p^2 and sum r^2. */
static void lamb_block_sums(const lamb_job *j, int64_t b, double *sum_p, double *sum_r)
{
    int64_t at = b * LAMB_BLOCK;
    int c = lamb_block_len(j, b);
    float *restrict m = j->m + at, *restrict v = j->v + at;
    const float *restrict g = j->g + at, *restrict p = j->p + at;
    const float b1 = j->b1, c1 = j->c1, b2 = j->b2, c2 = j->c2;
    for (int i = 0; i < c; i++) {
        float gi = g[i];
        m[i] = b1 * m[i] + c1 * gi;
        v[i] = b2 * v[i] + c2 * gi * gi;
    }
    float r[LAMB_BLOCK];
    lamb_direction(j, at, c, r);
    double sp = 0, sr = 0;
    for (int i = 0; i < c; i++) {
        sp += (double)p[i] * p[i];
        sr += (double)r[i] * r[i];
    }
    *sum_p = sp;
    *sum_r = sr;
}

static void lamb_sums_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const lamb_job *j = ctx;
    for (int64_t b = begin; b < end; b++)
        lamb_block_sums(j, b, &j->sums[2 * b], &j->sums[2 * b + 1]);
}

static void lamb_step_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const lamb_job *j = ctx;
    float r[LAMB_BLOCK];
    for (int64_t b = begin; b < end; b++) {
        int64_t at = b * LAMB_BLOCK;
        int c = lamb_block_len(j, b);
        lamb_direction(j, at, c, r);
        float *restrict p = j->p + at;
        const float step = j->step;
        for (int i = 0; i < c; i++)
            p[i] = p[i] - step * r[i];
    }
}

static int64_t lamb_blocks(const tg_tensor *node)
{
    return (tg_numel(node->in[0]) + LAMB_BLOCK - 1) / LAMB_BLOCK;
}

/* Only a threaded first pass needs room for the blocks' sums. */
static size_t scratch_adam(const tg_tensor *node, int n_threads)
{
    tg_optimizer o = tg_optim_params_get(&node->p);
    if (o.kind != TG_OPT_LAMB || n_threads <= 1 || tg_numel(node->in[0]) < OPTIM_PARALLEL_MIN)
        return 0;
    return (size_t)lamb_blocks(node) * 2 * sizeof(double);
}

static void fwd_lamb(const tg_kernel_args *a, const tg_optimizer *o, const tg_adam_scalars *s)
{
    const tg_tensor *node = a->node;
    lamb_job j = {
        .p = a->in[0],
        .m = a->in[1],
        .v = a->in[2],
        .g = a->in[3],
        .b1 = o->beta1,
        .c1 = (float)(1.0 - (double)o->beta1),
        .b2 = o->beta2,
        .c2 = (float)(1.0 - (double)o->beta2),
        .bc1 = (float)s->bc1,
        .bc2_sqrt = (float)s->bc2_sqrt,
        .eps = o->eps,
        .wd = o->weight_decay,
        .n = tg_numel(node->in[0]),
    };
    int64_t nb = lamb_blocks(node);
    bool threads = a->pool && tg_pool_threads(a->pool) > 1 && j.n >= OPTIM_PARALLEL_MIN;
    double sum_p = 0, sum_r = 0;
    if (threads && a->scratch && a->scratch_bytes >= (size_t)nb * 2 * sizeof(double)) {
        j.sums = a->scratch;
        tg_pool_for(a->pool, nb, lamb_sums_range, &j);
        for (int64_t b = 0; b < nb; b++) {
            sum_p += j.sums[2 * b];
            sum_r += j.sums[2 * b + 1];
        }
    } else {
        for (int64_t b = 0; b < nb; b++) {
            double sp, sr;
            lamb_block_sums(&j, b, &sp, &sr);
            sum_p += sp;
            sum_r += sr;
        }
    }
    j.step = (float)(s->lr * tg_lamb_trust(sum_p, sum_r, o->max_weight_norm));
    if (threads)
        tg_pool_for(a->pool, nb, lamb_step_range, &j);
    else if (nb > 0)
        lamb_step_range(&j, 0, nb, 0);
}

static void fwd_adam(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    tg_optimizer o = tg_optim_params_get(&node->p);
    tg_adam_scalars s = tg_adam_prepare(&o, a->step);
    if (o.kind == TG_OPT_LAMB) {
        fwd_lamb(a, &o, &s);
        return;
    }
    adam_job j = {
        .p = a->in[0],
        .m = a->in[1],
        .v = a->in[2],
        .g = a->in[3],
        .l2 = (float)s.l2,
        .shrink = (float)s.shrink,
        .b1 = o.beta1,
        .c1 = (float)(1.0 - (double)o.beta1),
        .b2 = o.beta2,
        .c2 = (float)(1.0 - (double)o.beta2),
        .step_size = (float)s.step_size,
        .bc2_sqrt = (float)s.bc2_sqrt,
        .eps = o.eps,
    };
    bool half = half_prepare(a, &j.half);
    tg_pool_fn fn = half ? TG_BF16_POOL_FN(adam_half_range) : adam_range;
    run_split(a->pool, tg_numel(node->in[0]), fn, &j);
}

bool tg_op_update_is_elementwise(const tg_tensor *node)
{
    if (node->op == TG_OP_SGD_UPDATE)
        return true;
    return node->op == TG_OP_ADAM_UPDATE && tg_optim_params_get(&node->p).kind != TG_OPT_LAMB;
}

/* The element-wise updates read their bf16-stored operands themselves,
 * blocked or not (their operands are never 4-D activations). */
static bool update_reads_bf16(const tg_tensor *node, bool blocked)
{
    (void)blocked;
    return tg_op_update_reads_bf16(node);
}

const tg_kernel_def tg_cpu_kernel_SGD_UPDATE = {.forward = fwd_sgd,
                                                .reads_bf16 = update_reads_bf16};
const tg_kernel_def tg_cpu_kernel_ADAM_UPDATE = {
    .scratch = scratch_adam, .forward = fwd_adam, .reads_bf16 = update_reads_bf16};
