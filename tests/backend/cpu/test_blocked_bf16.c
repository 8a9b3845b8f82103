/* tests/backend/cpu/test_blocked_bf16.c - the blocked (nChw16c) kernels of
 * squeeze-excite read their operands in the storage the engine gives them
 * (tg_kernel_args.in_type, out_type: f32 or bf16, read and written in
 * place): the per-channel Mul, Add and Sub (backend/cpu/binary_kernels.c
 * chan_loop) and the average pool's forward (backend/cpu/pool_kernels.c
 * avg_fwd_loop), global and windowed. Each element is checked against the
 * f32 formula on the widened values, in the kernels' order of summation,
 * rounded as tg_f32_to_bf16 rounds: channel counts that are no whole block
 * (24, 40, 72, 120, the padding lanes zero in and out), NaN and the
 * infinities among the values, 1 and 2 threads.
 * TG_TEST_LABELS: isa threads */
#include "backend/backend.h"
#include "tg_test.h"

#include "core/pool.h"
#include "ops/op.h"
#include "tilegraph/dtype.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { N = 2, H = 7, W = 7, L = TG_CHANNEL_BLOCK };

static const int channels[] = {24, 40, 72, 120};

/* A value of the test: every one representable in bf16, so that f32 and
 * bf16 storage hold the same numbers; one in eight special. */
static float value(uint64_t *r)
{
    static const float specials[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 65280.0f};
    *r = *r * 6364136223846793005u + 1442695040888963407u;
    if ((*r >> 60) == 0)
        return specials[(*r >> 32) % (sizeof specials / sizeof *specials)];
    return tg_bf16_to_f32(tg_f32_to_bf16((float)((*r >> 33) % 4001) / 1000.0f - 2.0f));
}

/* A blocked operand: [n][C/16][hw][16] values (the padding lanes zero)
 * and the same in the storage the kernel gets. */
typedef struct operand {
    float *v;
    void *stored;
    tg_dtype type;
    int64_t numel;
} operand;

static operand make(int64_t n, int c, int64_t hw, tg_dtype type, uint64_t seed)
{
    int64_t cb = (c + L - 1) / L;
    operand o = {.numel = n * cb * hw * L, .type = type};
    o.v = calloc((size_t)o.numel, sizeof(float));
    o.stored = calloc((size_t)o.numel, sizeof(float));
    TG_CHECK(o.v && o.stored);
    uint64_t r = seed;
    for (int64_t i = 0; o.v && i < o.numel; i++)
        if ((i / (hw * L) % cb) * L + i % L < c) /* the channel of element i */
            o.v[i] = value(&r);
    if (o.v && o.stored && type == TG_BF16)
        tg_f32_to_bf16_array(o.v, o.stored, (size_t)o.numel);
    else if (o.v && o.stored)
        memcpy(o.stored, o.v, (size_t)o.numel * sizeof(float));
    return o;
}

static void drop(operand *o)
{
    free(o->v);
    free(o->stored);
}

/* Element i of out (in its storage) against want, rounded to the storage;
 * any NaN for a NaN. */
static bool same(const operand *out, int64_t i, float want)
{
    if (out->type == TG_BF16) {
        uint16_t got = ((const uint16_t *)out->stored)[i], w = tg_f32_to_bf16(want);
        return got == w || (isnan(want) && isnan(tg_bf16_to_f32(got)));
    }
    float got = ((const float *)out->stored)[i];
    return memcmp(&got, &want, sizeof got) == 0 || (isnan(want) && isnan(got));
}

static float out_value(const operand *out, int64_t i)
{
    return out->type == TG_BF16 ? tg_bf16_to_f32(((const uint16_t *)out->stored)[i])
                                : ((const float *)out->stored)[i];
}

/* The storage of x, the scale and the output. */
typedef struct storage {
    tg_dtype x, s, out;
} storage;

static const storage storages[] = {
    {TG_BF16, TG_BF16, TG_BF16},
    {TG_F32, TG_F32, TG_F32},
    {TG_BF16, TG_F32, TG_BF16},
    {TG_F32, TG_BF16, TG_BF16},
};
#define N_STORAGES (sizeof storages / sizeof *storages)

static void run(const tg_tensor *node, tg_pool *pool, const operand *in, int n_in, operand *out)
{
    tg_kernel_args k = {.node = node, .out = out->stored, .pool = pool, .blocked = true};
    for (int i = 0; i < n_in; i++)
        k.in[i] = in[i].stored, k.in_type[i] = in[i].type;
    k.out_type = out->type;
    tg_op_forward(&k);
}

static float arith(tg_op op, float x, float s, bool s_first)
{
    if (op == TG_OP_MUL)
        return x * s;
    if (op == TG_OP_ADD)
        return x + s;
    return s_first ? s - x : x - s;
}

/* One per-channel op, scale [sn, c, 1, 1], x [N, c, H, W], in `st`. */
static void check_chan(tg_op op, int c, int sn, bool s_first, storage st, tg_pool *pool)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(N, c, H, W));
    tg_tensor *s = tg_input(g, "s", TG_F32, tg_shape4(sn, c, 1, 1));
    tg_tensor *a = s_first ? s : x, *b = s_first ? x : s;
    tg_tensor *y = op == TG_OP_MUL   ? tg_mul(g, a, b)
                   : op == TG_OP_ADD ? tg_add(g, a, b)
                                     : tg_sub(g, a, b);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(tg_op_per_channel_full(y) == (s_first ? 1 : 0));
    operand xs = make(N, c, H * W, st.x, (uint64_t)c * 7 + 1);
    operand ss = make(sn, c, 1, st.s, (uint64_t)c * 7 + 2);
    operand out = make(N, c, H * W, st.out, 3);
    memset(out.stored, 0xff, (size_t)out.numel * tg_dtype_size(st.out)); /* NaN everywhere */
    operand ins[2] = {s_first ? ss : xs, s_first ? xs : ss};
    run(y, pool, ins, 2, &out);
    int64_t cb = (c + L - 1) / L;
    for (int64_t i = 0; i < out.numel; i++) {
        int64_t row = i / (H * W * L), n = row / cb, k = row % cb, l = i % L;
        float sv = ss.v[(sn == 1 ? 0 : n) * cb * L + k * L + l];
        float want = arith(op, xs.v[i], sv, s_first);
        if (!same(&out, i, want)) {
            tg_test_fail(__FILE__, __LINE__,
                         "%s%s, %d channels, scale per %s, storage x %s s %s out %s: element "
                         "%lld (%g, %g) gave %g, want %g",
                         tg_op_name(op), s_first ? " (scale first)" : "", c,
                         sn == 1 ? "batch" : "sample", tg_dtype_name(st.x), tg_dtype_name(st.s),
                         tg_dtype_name(st.out), (long long)i, xs.v[i], sv, out_value(&out, i),
                         want);
            break;
        }
    }
    drop(&xs), drop(&ss), drop(&out);
    tg_graph_destroy(g);
}

static void test_per_channel_ops(void)
{
    for (int threads = 1; threads <= 2; threads++) {
        tg_pool *pool = threads > 1 ? tg_pool_create(threads) : NULL;
        for (size_t ci = 0; ci < sizeof channels / sizeof *channels; ci++)
            for (size_t st = 0; st < N_STORAGES; st++) {
                int c = channels[ci];
                check_chan(TG_OP_MUL, c, N, false, storages[st], pool);
                check_chan(TG_OP_MUL, c, 1, true, storages[st], pool);
                check_chan(TG_OP_ADD, c, N, true, storages[st], pool);
                check_chan(TG_OP_SUB, c, N, false, storages[st], pool);
                check_chan(TG_OP_SUB, c, 1, true, storages[st], pool);
            }
        tg_pool_destroy(pool);
    }
}

/* Window (oy, ox) of p's pool: its rows [*y0, *y1), columns [*x0, *x1). */
static void window(tg_pool2d_params p, int oy, int ox, int *y0, int *y1, int *x0, int *x1)
{
    int ty = oy * p.stride_h - p.pad_top, tx = ox * p.stride_w - p.pad_left;
    *y0 = ty < 0 ? 0 : ty, *y1 = ty + p.kernel_h > H ? H : ty + p.kernel_h;
    *x0 = tx < 0 ? 0 : tx, *x1 = tx + p.kernel_w > W ? W : tx + p.kernel_w;
}

/* An average pool of x [N, c, H, W] in `st` (x's and out's), against each
 * lane's f32 sum in rows-then-columns order times 1 / the count. */
static void check_avg(tg_pool2d_params p, bool global, int c, storage st, tg_pool *pool)
{
    tg_graph *g = tg_graph_create();
    /* the node as the engine shows a padded operand's op (runtime/engine_passes.c
     * padded_view): its channels padded to whole blocks */
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(N, (c + L - 1) / L * L, H, W));
    tg_tensor *y = global ? tg_global_avgpool(g, x) : tg_avgpool2d_ex(g, x, p);
    TG_CHECK_OK(tg_graph_status(g));
    if (global)
        p = (tg_pool2d_params){.kernel_h = H, .kernel_w = W, .stride_h = 1, .stride_w = 1};
    int oh = (int)y->shape.dim[2], ow = (int)y->shape.dim[3];
    operand xs = make(N, c, H * W, st.x, (uint64_t)c * 11 + 5);
    operand out = make(N, c, (int64_t)oh * ow, st.out, 3);
    memset(out.stored, 0xff, (size_t)out.numel * tg_dtype_size(st.out));
    run(y, pool, &xs, 1, &out);
    for (int64_t i = 0; i < out.numel; i++) {
        int64_t plane = i / ((int64_t)oh * ow * L), px = i / L % (oh * ow), l = i % L;
        int y0, y1, x0, x1;
        window(p, (int)(px / ow), (int)(px % ow), &y0, &y1, &x0, &x1);
        float acc = 0.0f;
        for (int iy = y0; iy < y1; iy++)
            for (int ix = x0; ix < x1; ix++)
                acc += xs.v[(plane * H * W + iy * W + ix) * L + l];
        float want = acc * (1.0f / (float)((y1 - y0) * (x1 - x0)));
        if (!same(&out, i, want)) {
            tg_test_fail(__FILE__, __LINE__,
                         "average pool %s, %d channels, storage x %s out %s: element %lld "
                         "gave %g, want %g",
                         global ? "global" : "3x3/2", c, tg_dtype_name(st.x), tg_dtype_name(st.out),
                         (long long)i, out_value(&out, i), want);
            break;
        }
    }
    drop(&xs), drop(&out);
    tg_graph_destroy(g);
}

static void test_average_pool(void)
{
    /* 3x3, stride 2, padding 1, the padding not counted: windows of 4, 6 and 9 */
    tg_pool2d_params p = {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false};
    for (int threads = 1; threads <= 2; threads++) {
        tg_pool *pool = threads > 1 ? tg_pool_create(threads) : NULL;
        for (size_t ci = 0; ci < sizeof channels / sizeof *channels; ci++)
            for (size_t st = 0; st < N_STORAGES; st++) {
                check_avg(p, true, channels[ci], storages[st], pool);
                check_avg(p, false, channels[ci], storages[st], pool);
            }
        tg_pool_destroy(pool);
    }
}

/* The engine lets the blocked forward read bf16 itself, and only it. */
static void test_reads_bf16(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(N, 24, H, W));
    tg_tensor *y = tg_global_avgpool(g, x);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(tg_op_reads_bf16(y, true));
    TG_CHECK(!tg_op_reads_bf16(y, false));
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_per_channel_ops);
    TG_RUN(test_average_pool);
    TG_RUN(test_reads_bf16);
    return tg_test_finish();
}
