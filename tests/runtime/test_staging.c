/* tests/runtime/test_staging.c - the replicas' sum (tg_reduce_typed): its
 * f32 path adds the copies straight from their buffers in replica order and
 * scales, giving the bits of the plain loop ((c0 + c1 + ...) * scale,
 * rounded after each operation) for any count of copies and outputs, a
 * length that is not a multiple of the working chunk, a range that starts
 * inside a buffer, and outputs that are copies themselves (a replica's own
 * buffer in one process). */
#include "tg_test.h"

#include "core/alloc.h"
#include "runtime/staging.h"

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

int main(void)
{
    TG_RUN(test_f32_sum_is_the_plain_loop);
    TG_RUN(test_outputs_may_be_the_copies);
    return tg_test_finish();
}
