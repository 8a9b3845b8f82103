/* backend/cpu/binary_kernels.c - the cpu backend's kernels for the binary
 * family (ops/binary.c is what they are): the inputs seen through a merged
 * strided view (tg_bcast), so that the common cases are one inner loop over
 * contiguous memory, over the device's pool; POW's and MAXIMUM's / MINIMUM's
 * gradients from ops/binary.h's rules. */
#include "backend/backend.h"
#include "core/bf16.h"
#include "core/clones.h"
#include "ops/binary.h"
#include "ops/broadcast.h"
#include "ops/shape.h"

#include <math.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
/* 16-float vectors pass only between always-inlined functions (core/clones.h) */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

typedef struct arith_job {
    tg_arith op;
    tg_bcast bc;
    const float *a, *b;
    float *out;
} arith_job;

/* One inner run of n outputs. On the innermost merged dim a contiguous
 * input has stride 1 or 0 (stretched), so three patterns cover every case
 * and each gets its own loop, which the compiler vectorises. */
#define RUN_LOOPS(EXPR)                                                                            \
    do {                                                                                           \
        if (sa == 1 && sb == 1)                                                                    \
            for (int64_t q = 0; q < n; q++) {                                                      \
                float x = a[q], y = b[q];                                                          \
                o[q] = EXPR;                                                                       \
            }                                                                                      \
        else if (sa == 1 && sb == 0) {                                                             \
            float y = b[0];                                                                        \
            for (int64_t q = 0; q < n; q++) {                                                      \
                float x = a[q];                                                                    \
                o[q] = EXPR;                                                                       \
            }                                                                                      \
        } else if (sa == 0 && sb == 1) {                                                           \
            float x = a[0];                                                                        \
            for (int64_t q = 0; q < n; q++) {                                                      \
                float y = b[q];                                                                    \
                o[q] = EXPR;                                                                       \
            }                                                                                      \
        } else /* both stretched: cannot happen, kept as a safe net */                             \
            for (int64_t q = 0; q < n; q++) {                                                      \
                float x = a[q * sa], y = b[q * sb];                                                \
                o[q] = EXPR;                                                                       \
            }                                                                                      \
    } while (0)

static void run_inner(tg_arith op, const float *a, int64_t sa, const float *b, int64_t sb, float *o,
                      int64_t n)
{
    switch (op) {
    case TG_ARITH_ADD:
        RUN_LOOPS(x + y);
        break;
    case TG_ARITH_SUB:
        RUN_LOOPS(x - y);
        break;
    case TG_ARITH_MUL:
        RUN_LOOPS(x * y);
        break;
    case TG_ARITH_DIV:
        RUN_LOOPS(x / y);
        break;
    case TG_ARITH_POW:
        RUN_LOOPS(powf(x, y));
        break;
    /* NaN in either operand gives NaN, as torch.maximum / torch.minimum */
    case TG_ARITH_MAX:
        RUN_LOOPS(x > y || x != x ? x : y);
        break;
    case TG_ARITH_MIN:
        RUN_LOOPS(x < y || x != x ? x : y);
        break;
    case TG_ARITH_COPY:
        RUN_LOOPS(((void)y, x));
        break;
    default:
        TG_UNREACHABLE("arithmetic op", op);
    }
}

static void arith_range(void *ctx, int64_t begin, int64_t end, int t)
{
    const arith_job *j = ctx;
    const tg_bcast *bc = &j->bc;
    int last = bc->ndim - 1;
    int64_t inner = bc->dim[last];
    /* run_inner walks the last dimension: each operand's stride there is
     * 1 (contiguous) or 0 (broadcast) */
    TG_ASSERT(bc->stride[0][last] <= 1 && bc->stride[1][last] <= 1);
    for (int64_t k = begin; k < end;) {

        int64_t i = k % inner, n = inner - i < end - k ? inner - i : end - k;
        int64_t off[2];
        tg_bcast_offsets(bc, k, off);
        run_inner(j->op, j->a + off[0], bc->stride[0][last], j->b + off[1], bc->stride[1][last],
                  j->out + k, n);
        k += n;
    }
}

/* A 4-D shape [N, C, H, W] as its nChw16c memory: [N, C/16, H*W, 16]
 * (the engine gives padded operands whole blocks). */
static tg_shape blocked_shape(tg_shape s)
{
    return tg_shape4(s.dim[0], tg_channel_blocks(s.dim[1]), s.dim[2] * s.dim[3], TG_CHANNEL_BLOCK);
}

/* Whether a blocked op's operands broadcast per channel (kernels.c TG_CPU_PER_CHANNEL):
 * with every shape seen as its nChw16c memory, the broadcast is one over
 * the pixels and the samples, which the strided view takes as it is. */
static bool blocked_broadcast(const tg_kernel_args *a, const tg_shape ins[2])
{
    return a->blocked && a->node->shape.ndim == 4 && ins[0].ndim == 4 && ins[1].ndim == 4 &&
           !(tg_shape_equal(ins[0], a->node->shape) && tg_shape_equal(ins[1], a->node->shape));
}

/* A blocked per-channel op where one operand has the output's shape and
 * the other one value per channel (and sample, or for all): per 16-channel
 * block, one vector of the scale against every pixel's vector. */
typedef struct chan_job {
    tg_arith op;
    const void *x, *s;
    void *out;
    int64_t blocks, hw, s_sample;      /* s_sample: s's stride between samples (0: shared) */
    bool s_first;                      /* s is the first operand */
    tg_dtype x_type, s_type, out_type; /* as stored (tg_kernel_args.in_type) */
} chan_job;

#define CHAN_LOOP_16(EXPR)                                                                         \
    for (int64_t p = 0; p < j->hw; p++) {                                                          \
        int64_t at = (r * j->hw + p) * TG_CHANNEL_BLOCK;                                           \
        tg_f32x16 u = tg_x16_load(cv, j->x, x_bf16, at);                                           \
        tg_x16_store(cv, j->out, out_bf16, at, EXPR);                                              \
    }

/* The pixels of row r against the row's scale v, x and out in the storage
 * given (constants where chan_row passes them, so each pair is its own
 * loop without a test per pixel). */
TG_VEC_INLINE void chan_pixels(const chan_job *j, int64_t r, tg_f32x16 v, bool x_bf16,
                               bool out_bf16, tg_bf16x16_ops cv)
{
    if (j->op == TG_ARITH_MUL)
        CHAN_LOOP_16(u * v)
    else if (j->op == TG_ARITH_ADD)
        CHAN_LOOP_16(u + v)
    else if (j->s_first)
        CHAN_LOOP_16(v - u)
    else
        CHAN_LOOP_16(u - v)
}
#undef CHAN_LOOP_16

/* Rows [begin, end) of a chan_job (row r: sample r / blocks, block r %
 * blocks): each 16-channel vector read in its storage type (bf16 widened
 * by cv), computed in f32 and stored (bf16 rounded once, as staging
 * rounds). With cv the AVX-512 BF16 instructions (TG_BF16_POOL_FNS) a
 * squeeze-excite Mul in bf16 took 0.41-0.60 ms against 0.34-0.40 in f32
 * with the generic conversions (mobilenet_v3_large, batch 32, 1 thread). */
TG_VEC_INLINE void chan_loop(const chan_job *j, int64_t begin, int64_t end, tg_bf16x16_ops cv)
{
    bool x_bf16 = j->x_type == TG_BF16, out_bf16 = j->out_type == TG_BF16;
    for (int64_t r = begin; r < end; r++) {
        int64_t n = r / j->blocks, cb = r % j->blocks;
        tg_f32x16 v =
            tg_x16_load(cv, j->s, j->s_type == TG_BF16, n * j->s_sample + cb * TG_CHANNEL_BLOCK);
        if (x_bf16 && out_bf16)
            chan_pixels(j, r, v, true, true, cv);
        else if (!x_bf16 && !out_bf16)
            chan_pixels(j, r, v, false, false, cv);
        else
            chan_pixels(j, r, v, x_bf16, out_bf16, cv);
    }
}

TG_BF16_POOL_FNS(chan_range, chan_loop, TG_BF16X16_GENERIC, TG_BF16X16_HW)

/* The per-channel case of a blocked broadcast (chan_job); false for any
 * other, which the strided view takes. */
static bool chan_forward(const tg_kernel_args *a, tg_arith op)
{
    tg_shape y = a->node->shape;
    int full = tg_op_per_channel_full(a->node);
    if (full < 0 || (op != TG_ARITH_MUL && op != TG_ARITH_ADD && op != TG_ARITH_SUB))
        return false;
    tg_shape s = a->node->in[1 - full]->shape;
    int64_t blocks = tg_channel_blocks(y.dim[1]);
    chan_job j = {op,
                  a->in[full],
                  a->in[1 - full],
                  a->out,
                  blocks,
                  y.dim[2] * y.dim[3],
                  s.dim[0] == 1 ? 0 : blocks * TG_CHANNEL_BLOCK,
                  full == 1,
                  a->in_type[full],
                  a->in_type[1 - full],
                  a->out_type};
    int64_t n = y.dim[0] * blocks;
    tg_par_for(a->pool, n, n * j.hw * TG_CHANNEL_BLOCK, TG_BF16_POOL_FN(chan_range), &j);
    return true;
}

static void arith_forward(const tg_kernel_args *a, tg_arith op)
{
    const tg_tensor *node = a->node;
    arith_job j = {.op = op, .a = a->in[0], .out = a->out};
    tg_shape ins[2] = {node->in[0]->shape,
                       op == TG_ARITH_COPY ? node->in[0]->shape : node->in[1]->shape};
    j.b = op == TG_ARITH_COPY ? a->in[0] : a->in[1];
    if (blocked_broadcast(a, ins)) {
        if (chan_forward(a, op))
            return;
        ins[0] = blocked_shape(ins[0]), ins[1] = blocked_shape(ins[1]);
        tg_bcast_init(&j.bc, blocked_shape(node->shape), 2, ins);
    } else {
        tg_bcast_init(&j.bc, node->shape, 2, ins);
    }
    int64_t n = tg_numel(node);
    tg_par_for(a->pool, n, n, arith_range, &j);
}

static void fwd_add(const tg_kernel_args *a)
{
    arith_forward(a, TG_ARITH_ADD);
}
static void fwd_sub(const tg_kernel_args *a)
{
    arith_forward(a, TG_ARITH_SUB);
}
static void fwd_mul(const tg_kernel_args *a)
{
    arith_forward(a, TG_ARITH_MUL);
}
static void fwd_div(const tg_kernel_args *a)
{
    arith_forward(a, TG_ARITH_DIV);
}
static void fwd_pow(const tg_kernel_args *a)
{
    arith_forward(a, TG_ARITH_POW);
}
static void fwd_max(const tg_kernel_args *a)
{
    arith_forward(a, TG_ARITH_MAX);
}
static void fwd_min(const tg_kernel_args *a)
{
    arith_forward(a, TG_ARITH_MIN);
}
static void fwd_expand(const tg_kernel_args *a)
{
    arith_forward(a, TG_ARITH_COPY);
}

static void fwd_sum_to(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    tg_shape in = node->in[0]->shape;
    tg_sum_f32(a->pool, in, tg_shape_pad_left(node->shape, in.ndim), a->in[0], a->out);
}

/* ---- gradient kernels of POW, MAXIMUM, MINIMUM ----------------------------------------- */

typedef struct grad3_job {
    const tg_tensor *node;
    tg_bcast bc; /* a and b seen at dy's shape */
    const float *dy, *a, *b;
    float *out;
} grad3_job;

static void grad3_range(void *ctx, int64_t begin, int64_t end, int t)
{
    const grad3_job *j = ctx;
    const tg_bcast *bc = &j->bc;
    int last = bc->ndim - 1, which = (int)tg_grad3_which(j->node),
        is_min = (int)tg_grad3_is_min(j->node);
    bool is_pow = j->node->op == TG_OP_POW_BWD;
    int64_t inner = bc->dim[last], sa = bc->stride[0][last], sb = bc->stride[1][last];
    for (int64_t k = begin; k < end;) {
        int64_t i = k % inner, n = inner - i < end - k ? inner - i : end - k;
        int64_t off[2];
        tg_bcast_offsets(bc, k, off);
        const float *a = j->a + off[0], *b = j->b + off[1], *dy = j->dy + k;
        float *o = j->out + k;
        for (int64_t q = 0; q < n; q++) {
            float u = a[q * sa], v = b[q * sb];
            o[q] = dy[q] * (is_pow ? TG_POW_GRAD(float, powf, logf, which, u, v)
                                   : TG_MINMAX_GRAD(float, is_min, which, u, v));
        }
        k += n;
    }
    (void)t;
}

static void fwd_grad3(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    grad3_job j = {.node = node, .dy = a->in[0], .a = a->in[1], .b = a->in[2], .out = a->out};
    tg_shape ins[2] = {node->in[1]->shape, node->in[2]->shape};
    tg_bcast_init(&j.bc, node->shape, 2, ins);
    int64_t n = tg_numel(node);
    tg_par_for(a->pool, n, n, grad3_range, &j);
}

/* Element-wise in bf16 as every such op (backend/cpu/elementwise_bf16.c),
 * and blocked per channel (chan_job) in its operands' storage: staged, a
 * squeeze-excite Mul converted its whole input to f32 and its output back
 * (mobilenet_v3_large's 9: 11.1 ms per run at batch 32 in bf16 against 3.8
 * in f32, 1 thread, under load). */
static bool binary_reads_bf16(const tg_tensor *node, bool blocked)
{
    return tg_elementwise_bf16_supported(node) || (blocked && tg_op_per_channel_full(node) >= 0);
}

const tg_kernel_def tg_cpu_kernel_ADD = {.forward = fwd_add, .reads_bf16 = binary_reads_bf16};
const tg_kernel_def tg_cpu_kernel_SUB = {.forward = fwd_sub, .reads_bf16 = binary_reads_bf16};
const tg_kernel_def tg_cpu_kernel_MUL = {.forward = fwd_mul, .reads_bf16 = binary_reads_bf16};
const tg_kernel_def tg_cpu_kernel_DIV = {.forward = fwd_div};
const tg_kernel_def tg_cpu_kernel_POW = {.forward = fwd_pow};
const tg_kernel_def tg_cpu_kernel_POW_BWD = {.forward = fwd_grad3};
const tg_kernel_def tg_cpu_kernel_MAXIMUM = {.forward = fwd_max};
const tg_kernel_def tg_cpu_kernel_MINIMUM = {.forward = fwd_min};
const tg_kernel_def tg_cpu_kernel_MINMAX_BWD = {.forward = fwd_grad3};
const tg_kernel_def tg_cpu_kernel_SUM_TO = {.forward = fwd_sum_to};
const tg_kernel_def tg_cpu_kernel_EXPAND = {.forward = fwd_expand};
