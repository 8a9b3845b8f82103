/* runtime/staging.c - f32 staging of half-precision steps and typed reductions
 * (gradient accumulation, the replicas' all-reduce, gradient clipping). */
#include "backend/backend.h"
#include "runtime/staging.h"

#include "core/bf16.h"
#include "core/clones.h"
#include "core/convert.h"

#include <string.h>

/* Below this many elements a conversion runs on the calling thread. */
#define CONVERT_PARALLEL_MIN 65536

typedef struct convert_job {
    const unsigned char *src;
    unsigned char *dst;
    tg_dtype sd, dd;
    float scale; /* applied after converting to f32 (dd == f32 only) */
} convert_job;

static void convert_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const convert_job *j = ctx;
    size_t ss = tg_dtype_size(j->sd), ds = tg_dtype_size(j->dd);
    tg_convert(j->src + (size_t)begin * ss, j->sd, j->dst + (size_t)begin * ds, j->dd,
               (size_t)(end - begin));
    if (j->scale != 1.0f) {
        float *f = (float *)(void *)(j->dst + (size_t)begin * ds);
        for (int64_t i = 0; i < end - begin; i++)
            f[i] *= j->scale;
    }
}

/* dst = src converted (times scale, into f32), over the device's threads
 * when the tensor is large. */
static void convert_on(tg_pool *pool, const void *src, tg_dtype sd, void *dst, tg_dtype dd,
                       int64_t n, float scale)
{
    convert_job j = {src, dst, sd, dd, scale};
    if (n >= CONVERT_PARALLEL_MIN && pool && tg_pool_threads(pool) > 1)
        tg_pool_for(pool, n, convert_range, &j);
    else
        convert_range(&j, 0, n, 0);
}

/* Element-wise steps and element-wise weight updates are staged a chunk
 * at a time (tg_step_stages_in_chunks): the chunk's inputs converted to f32
 * on the stack, the kernel run on that stretch alone, its output and the
 * inputs it updates converted back, so the half-precision bytes are read
 * and written once and the f32 copies stay in L1. Rounding (to nearest, or
 * stochastic from the element's index) is as for whole tensors: the same
 * bits. */
#define STAGE_CHUNK 8192

typedef struct chunk_job {
    const tg_program *p;
    const tg_step *st;
    const tg_kernel_args *a;
    const tg_update_opts *o;
    int64_t n;
    bool in_staged[TG_ELEMENTWISE_MAX_INPUTS + 1], out_staged; /* the step's, once */
} chunk_job;

static tg_dtype buffer_type(const tg_program *p, int b)
{
    return b >= 0 ? p->buffers[b].dtype : TG_F32;
}

static void stage_chunk(const chunk_job *j, int64_t first, int64_t len)
{
    const tg_tensor *t = j->a->node;
    bool update = tg_is_weight_update(t);
    float buf[TG_ELEMENTWISE_MAX_INPUTS + 2][STAGE_CHUNK];
    tg_tensor node = *t, ins[TG_ELEMENTWISE_MAX_INPUTS + 1];
    tg_kernel_args b = *j->a;
    b.node = &node;
    b.pool = NULL;
    node.shape = update ? t->shape : tg_shape1(len);
    for (int k = 0; k < t->n_in; k++) {
        ins[k] = *t->in[k];
        ins[k].shape = tg_shape1(len);
        node.in[k] = &ins[k];
        tg_dtype dt = buffer_type(j->p, j->st->in[k]);
        unsigned char *src = (unsigned char *)j->a->in[k] + first * tg_dtype_size(dt);
        b.in[k] = src;
        if (!j->in_staged[k])
            continue;
        b.in[k] = buf[k];
        tg_convert(src, dt, buf[k], TG_F32, (size_t)len);
        if (update && k == t->n_in - 1 && j->o->grad_unscale != 1.0f)
            for (int64_t e = 0; e < len; e++)
                buf[k][e] *= j->o->grad_unscale;
    }
    tg_dtype ot = buffer_type(j->p, j->st->out);
    unsigned char *dst =
        j->st->out >= 0 ? (unsigned char *)j->a->out + first * tg_dtype_size(ot) : NULL;
    b.out = j->out_staged ? buf[TG_ELEMENTWISE_MAX_INPUTS + 1] : (void *)dst;
    tg_op_forward(&b);
    if (j->out_staged)
        tg_convert(b.out, TG_F32, dst, ot, (size_t)len);
    for (int k = 0; k < t->n_mutated; k++) {
        tg_dtype dt = buffer_type(j->p, j->st->in[k]);
        if (b.in[k] != buf[k] || dt == TG_F32)
            continue;
        void *back = (unsigned char *)j->a->in[k] + first * tg_dtype_size(dt);
        if (j->o->stochastic)
            tg_convert_stochastic(buf[k], back, dt, (size_t)len, j->o->round_key ^ (uint64_t)k,
                                  (uint64_t)(j->o->first + first));
        else
            tg_convert(buf[k], TG_F32, back, dt, (size_t)len);
    }
}

static void chunk_range(void *ctx, int64_t begin, int64_t end, int part)
{
    (void)part;
    const chunk_job *j = ctx;
    for (int64_t c = begin; c < end; c++) {
        int64_t first = c * STAGE_CHUNK;
        stage_chunk(j, first, j->n - first < STAGE_CHUNK ? j->n - first : STAGE_CHUNK);
    }
}

static void stage_in_chunks(const tg_program *p, const tg_step *st, const tg_kernel_args *a,
                            const tg_update_opts *o)
{
    const tg_tensor *t = a->node;
    /* an update's output is empty: its length is its weight's */
    chunk_job j = {p, st, a, o, tg_numel(tg_is_weight_update(t) ? t->in[0] : t), {0}, false};
    for (int k = 0; k < t->n_in; k++)
        j.in_staged[k] = tg_step_stages_input(p, st, k);
    j.out_staged = tg_step_stages_output(p, st);
    int64_t chunks = (j.n + STAGE_CHUNK - 1) / STAGE_CHUNK;
    if (j.n >= CONVERT_PARALLEL_MIN && a->pool)
        tg_pool_for(a->pool, chunks, chunk_range, &j);
    else
        chunk_range(&j, 0, chunks, 0);
}

void tg_stage_run(const tg_program *p, const tg_step *st, tg_kernel_args *a,
                  const tg_update_opts *o)
{
    const tg_tensor *t = a->node;
    if (!st->staged) {
        /* an update reading bf16 itself unscales and rounds as staging would */
        tg_update_opts u = *o;
        if (!tg_step_unscales_gradient(p, st))
            u.grad_unscale = 1.0f;
        a->update = tg_is_weight_update(t) ? &u : NULL;
        tg_op_forward(a);
        return;
    }
    if (tg_step_stages_in_chunks(t)) {
        stage_in_chunks(p, st, a, o);
        return;
    }
    bool update = tg_is_weight_update(t);
    unsigned char *stage = (unsigned char *)a->scratch + tg_align(st->kernel_scratch);
    void *stored_in[TG_MAX_INPUTS] = {0}, *stored_out = NULL;
    for (int k = 0; k < t->n_in; k++) {
        if (!tg_step_stages_input(p, st, k))
            continue;
        int64_t n = tg_numel(t->in[k]);
        float *f = (float *)stage;
        bool grad = update && k == t->n_in - 1; /* staged: divide by the loss scale */
        convert_on(a->pool, a->in[k], p->buffers[st->in[k]].dtype, f, TG_F32, n,
                   grad ? o->grad_unscale : 1.0f);
        stored_in[k] = a->in[k];
        a->in[k] = f;
        stage += tg_align((size_t)n * sizeof(float));
    }
    if (tg_step_stages_output(p, st)) {
        stored_out = a->out;
        a->out = stage;
    }
    a->scratch = st->kernel_scratch ? a->scratch : NULL;
    a->scratch_bytes = st->kernel_scratch;
    tg_op_forward(a);
    for (int k = 0; k < t->n_mutated; k++) {
        tg_dtype dt = p->buffers[st->in[k]].dtype;
        if (!stored_in[k] || dt == TG_F32)
            continue;
        size_t n = (size_t)tg_numel(t->in[k]);
        if (update && o->stochastic)
            tg_convert_stochastic(a->in[k], stored_in[k], dt, n, o->round_key ^ (uint64_t)k,
                                  (uint64_t)o->first);
        else
            convert_on(a->pool, a->in[k], TG_F32, stored_in[k], dt, (int64_t)n, 1.0f);
    }
    if (stored_out)
        convert_on(a->pool, a->out, TG_F32, stored_out, p->buffers[st->out].dtype, tg_numel(t),
                   1.0f);
}

#define CHUNK 1024

/* acc = g, or acc + g, then times scale unless it is 1: each case its own
 * loop (G the gradient's element as f32, A the accumulator's, STORE its
 * write), rounded where the f32 arithmetic of the chunked path rounds. */
#define ACCUMULATE(A, G, STORE)                                                                    \
    do {                                                                                           \
        if (first && scale == 1.0f)                                                                \
            for (int64_t i = 0; i < n; i++)                                                        \
                STORE(G);                                                                          \
        else if (first)                                                                            \
            for (int64_t i = 0; i < n; i++)                                                        \
                STORE((G)*scale);                                                                  \
        else if (scale == 1.0f)                                                                    \
            for (int64_t i = 0; i < n; i++)                                                        \
                STORE((A) + (G));                                                                  \
        else                                                                                       \
            for (int64_t i = 0; i < n; i++)                                                        \
                STORE(((A) + (G)) * scale);                                                        \
    } while (0)

#define STORE_BF16(x) ab[i] = tg_bf16_narrow(x)
#define STORE_F32(x) af[i] = (x)

/* Accumulation with bf16 on either side in one pass over acc and grad, the
 * conversions inline in each instruction set's copy: the micro-batches'
 * gradients are summed into bf16 accumulators (accumType auto in
 * bf16.bf16) at every micro-batch. The bits of the chunked conversions. */
TG_WIDE_KERNEL static void accumulate_bf16(void *acc, tg_dtype at, const void *grad, tg_dtype gt,
                                           int64_t n, bool first, float scale)
{
    uint16_t *ab = acc;
    float *af = acc;
    const uint16_t *gb = grad;
    const float *gf = grad;
    if (at == TG_BF16 && gt == TG_BF16)
        ACCUMULATE(tg_bf16_widen(ab[i]), tg_bf16_widen(gb[i]), STORE_BF16);
    else if (at == TG_BF16)
        ACCUMULATE(tg_bf16_widen(ab[i]), gf[i], STORE_BF16);
    else
        ACCUMULATE(af[i], tg_bf16_widen(gb[i]), STORE_F32);
}

void tg_accumulate_typed(void *acc, tg_dtype at, const void *grad, tg_dtype gt, int64_t n,
                         bool first, float scale)
{
    bool bf16_or_f32 = (at == TG_BF16 || at == TG_F32) && (gt == TG_BF16 || gt == TG_F32);
    if (bf16_or_f32 && (at == TG_BF16 || gt == TG_BF16)) {
        accumulate_bf16(acc, at, grad, gt, n, first, scale);
        return;
    }
    if (at == TG_F32 && gt == TG_F32) {
        float *a = acc;
        const float *g = grad;
        if (first)
            memcpy(a, g, (size_t)n * 4);
        else
            for (int64_t i = 0; i < n; i++)
                a[i] += g[i];
        if (scale != 1.0f)
            for (int64_t i = 0; i < n; i++)
                a[i] *= scale;
        return;
    }
    float fa[CHUNK], fg[CHUNK];
    size_t as = tg_dtype_size(at), gs = tg_dtype_size(gt);
    for (int64_t i = 0; i < n; i += CHUNK) {
        size_t k = (size_t)(n - i < CHUNK ? n - i : CHUNK);
        unsigned char *ap = (unsigned char *)acc + (size_t)i * as;
        tg_convert((const unsigned char *)grad + (size_t)i * gs, gt, fg, TG_F32, k);
        if (first)
            memcpy(fa, fg, k * 4);
        else {
            tg_convert(ap, at, fa, TG_F32, k);
            for (size_t e = 0; e < k; e++)
                fa[e] += fg[e];
        }
        if (scale != 1.0f)
            for (size_t e = 0; e < k; e++)
                fa[e] *= scale;
        tg_convert(fa, TG_F32, ap, at, k);
    }
}

/* f32 copies: the same additions in the same order, read straight from the
 * copies rather than converted into a chunk first (a copy of every copy),
 * and the last addition and the scaling in one pass (each still rounded:
 * (a + b) * s is no fused multiply-add). Outputs may be copies (a replica's
 * own buffer), so each chunk is summed whole before it is written. */
static void reduce_f32(unsigned char *const *copies, int R, unsigned char *const *outs, int n_out,
                       int64_t begin, int64_t end, float scale)
{
    float sum[CHUNK];
    for (int64_t i = begin; i < end; i += CHUNK) {
        size_t k = (size_t)(end - i < CHUNK ? end - i : CHUNK);
        memcpy(sum, (const float *)(const void *)copies[0] + i, k * 4);
        for (int r = 1; r < R - 1; r++) {
            const float *x = (const float *)(const void *)copies[r] + i;
            for (size_t e = 0; e < k; e++)
                sum[e] += x[e];
        }
        const float *last = (const float *)(const void *)copies[R - 1] + i;
        if (R > 1)
            for (size_t e = 0; e < k; e++)
                sum[e] = (sum[e] + last[e]) * scale;
        else
            for (size_t e = 0; e < k; e++)
                sum[e] *= scale;
        for (int r = 0; r < n_out; r++)
            memcpy((float *)(void *)outs[r] + i, sum, k * 4);
    }
}

void tg_reduce_typed(unsigned char *const *copies, int R, unsigned char *const *outs, int n_out,
                     tg_dtype t, int64_t begin, int64_t end, float scale)
{
    if (t == TG_F32) {
        reduce_f32(copies, R, outs, n_out, begin, end, scale);
        return;
    }
    size_t es = tg_dtype_size(t);
    float sum[CHUNK], x[CHUNK];
    for (int64_t i = begin; i < end; i += CHUNK) {
        size_t k = (size_t)(end - i < CHUNK ? end - i : CHUNK);
        for (int r = 0; r < R; r++) {
            tg_convert(copies[r] + (size_t)i * es, t, r ? x : sum, TG_F32, k);
            for (size_t e = 0; r && e < k; e++)
                sum[e] += x[e];
        }
        for (size_t e = 0; e < k; e++)
            sum[e] *= scale;
        for (int r = 0; r < n_out; r++)
            tg_convert(sum, TG_F32, outs[r] + (size_t)i * es, t, k);
    }
}

double tg_sum_squares_typed(const void *x, tg_dtype t, int64_t n)
{
    double sum = 0;
    if (t == TG_F32) {
        const float *f = x;
        for (int64_t i = 0; i < n; i++)
            sum += (double)f[i] * f[i];
        return sum;
    }
    float f[CHUNK];
    size_t es = tg_dtype_size(t);
    for (int64_t i = 0; i < n; i += CHUNK) {
        size_t k = (size_t)(n - i < CHUNK ? n - i : CHUNK);
        tg_convert((const unsigned char *)x + (size_t)i * es, t, f, TG_F32, k);
        for (size_t e = 0; e < k; e++)
            sum += (double)f[e] * f[e];
    }
    return sum;
}

void tg_scale_typed(void *x, tg_dtype t, int64_t n, float scale)
{
    if (t == TG_F32) {
        float *f = x;
        for (int64_t i = 0; i < n; i++)
            f[i] *= scale;
        return;
    }
    float f[CHUNK];
    size_t es = tg_dtype_size(t);
    for (int64_t i = 0; i < n; i += CHUNK) {
        size_t k = (size_t)(n - i < CHUNK ? n - i : CHUNK);
        unsigned char *at = (unsigned char *)x + (size_t)i * es;
        tg_convert(at, t, f, TG_F32, k);
        for (size_t e = 0; e < k; e++)
            f[e] *= scale;
        tg_convert(f, TG_F32, at, t, k);
    }
}
