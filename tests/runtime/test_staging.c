/* tests/runtime/test_staging.c - the replicas' sum (tg_reduce_typed): its
 * f32 path adds the copies straight from their buffers in replica order and
 * scales, giving the bits of the plain loop ((c0 + c1 + ...) * scale,
 * rounded after each operation) for any count of copies and outputs, a
 * length that is not a multiple of the working chunk, a range that starts
 * inside a buffer, and outputs that are copies themselves (a replica's own
 * buffer in one process). And the gradient accumulation with bf16 on
 * either side (tg_accumulate_typed), in one pass: the bits of converting
 * through f32 chunks.
 * TG_TEST_LABELS: isa */
#include "tg_test.h"

#include "core/alloc.h"
#include "core/convert.h"
#include "runtime/staging.h"

#include <math.h>
#include <string.h>

enum { N = 2500, MAX_COPIES = 3 };

/* Values whose sums round differently in another order. */
static float value(int r, int i)
{
    return (float)((i * 7919 + r * 104729) % 2003) * 1.37e-3f * (r % 2 ? -1.0f : 1.0f) +
           (float)(r + 1) * 3.1e4f;
}

/* The reference: element by element, in replica order. */
static float expected(int R, int i, float scale)
{
    float s = value(0, i);
    for (int r = 1; r < R; r++)
        s += value(r, i);
    return s * scale;
}

/* R copies summed over [begin, end) into n_out outputs, the first `alias`
 * of them the copies' own buffers; bit for bit the reference, and nothing
 * outside the range written. */
static void check_sum(int R, int n_out, int alias, int64_t begin, int64_t end)
{
    float *buf[MAX_COPIES * 2];
    unsigned char *copies[MAX_COPIES], *outs[MAX_COPIES];
    for (int k = 0; k < R + n_out; k++) {
        buf[k] = tg_malloc(N * sizeof(float));
        for (int i = 0; i < N; i++)
            buf[k][i] = k < R ? value(k, i) : -1.0f;
    }
    for (int r = 0; r < R; r++)
        copies[r] = (unsigned char *)buf[r];
    for (int o = 0; o < n_out; o++)
        outs[o] = (unsigned char *)(o < alias ? buf[o] : buf[R + o]);
    const float scale = 1.0f / 3.0f;
    tg_reduce_typed(copies, R, outs, n_out, TG_F32, begin, end, scale);
    for (int o = 0; o < n_out; o++) {
        const float *out = (const float *)(const void *)outs[o];
        for (int i = 0; i < N; i++) {
            float want = i >= begin && i < end ? expected(R, i, scale)
                         : o < alias           ? value(o, i)
                                               : -1.0f;
            if (memcmp(&out[i], &want, sizeof want) != 0)
                TG_CHECK(!"the sum differs from the plain loop's bits");
        }
    }
    for (int k = 0; k < R + n_out; k++)
        tg_free(buf[k]);
}

static void test_f32_sum_is_the_plain_loop(void)
{
    check_sum(1, 1, 0, 0, N);
    check_sum(2, 1, 0, 0, N);
    check_sum(3, 2, 0, 0, N);
    check_sum(2, 1, 0, 1031, N - 7); /* a replica's share of the elements */
}

static void test_outputs_may_be_the_copies(void)
{
    check_sum(2, 2, 2, 0, N);
    check_sum(3, 3, 1, 100, 2200);
}

/* ---- gradient accumulation with bf16 operands -------------------------------------- */

/* A gradient-like value, with the odd infinity, NaN and subnormal. */
static float grad_value(int r, int i)
{
    if (i % 997 == 5)
        return i % 2 ? INFINITY : NAN;
    if (i % 991 == 7)
        return 1e-39f * (float)(r + 1);
    return value(r, i) * 1e-4f - 3.0f * (float)r;
}

/* Element i as the chunked conversions leave it: acc = g or acc + g, times
 * scale unless it is 1, in f32, stored in at. */
static void accumulate_one(void *acc, tg_dtype at, float a, float g, int64_t i, bool first,
                           float scale)
{
    float s = first ? g : a + g;
    if (scale != 1.0f)
        s *= scale;
    tg_convert(&s, TG_F32, (unsigned char *)acc + (size_t)i * tg_dtype_size(at), at, 1);
}

static void check_accumulate(tg_dtype at, tg_dtype gt, int64_t n, bool first, float scale)
{
    size_t as = tg_dtype_size(at), gs = tg_dtype_size(gt);
    unsigned char *acc = tg_malloc((size_t)n * as), *want = tg_malloc((size_t)n * as);
    unsigned char *grad = tg_malloc((size_t)n * gs);
    for (int64_t i = 0; i < n; i++) {
        float a = grad_value(0, (int)i), g = grad_value(1, (int)i), a_stored, g_stored;
        tg_convert(&a, TG_F32, acc + (size_t)i * as, at, 1);
        tg_convert(&g, TG_F32, grad + (size_t)i * gs, gt, 1);
        tg_convert(acc + (size_t)i * as, at, &a_stored, TG_F32, 1);
        tg_convert(grad + (size_t)i * gs, gt, &g_stored, TG_F32, 1);
        accumulate_one(want, at, a_stored, g_stored, i, first, scale);
    }
    tg_accumulate_typed(acc, at, grad, gt, n, first, scale);
    if (memcmp(acc, want, (size_t)n * as) != 0)
        tg_test_fail(__FILE__, __LINE__,
                     "accumulating %s into %s, n %lld, first %d, scale %g: not the chunked bits",
                     tg_dtype_name(gt), tg_dtype_name(at), (long long)n, first, (double)scale);
    tg_free(acc);
    tg_free(want);
    tg_free(grad);
}

static void test_bf16_accumulation_is_the_chunked_one(void)
{
    const tg_dtype pairs[3][2] = {{TG_BF16, TG_BF16}, {TG_F32, TG_BF16}, {TG_BF16, TG_F32}};
    const int64_t lengths[] = {1, 17, N};
    for (int p = 0; p < 3; p++)
        for (int l = 0; l < 3; l++)
            for (int first = 0; first < 2; first++) {
                check_accumulate(pairs[p][0], pairs[p][1], lengths[l], first, 1.0f);
                check_accumulate(pairs[p][0], pairs[p][1], lengths[l], first, 1.0f / 3.0f);
            }
}

int main(void)
{
    TG_RUN(test_f32_sum_is_the_plain_loop);
    TG_RUN(test_outputs_may_be_the_copies);
    TG_RUN(test_bf16_accumulation_is_the_chunked_one);
    return tg_test_finish();
}
