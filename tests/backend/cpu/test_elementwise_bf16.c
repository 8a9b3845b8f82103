/* tests/backend/cpu/test_elementwise_bf16.c - ReLU, its gradient and add read and
 * written in bf16 (backend/cpu/elementwise_bf16.c) give, element by element, the
 * f32 formula on the widened values rounded as tg_f32_to_bf16 rounds (a
 * NaN for a NaN, whose payload C leaves open): special values (NaN, infinities, signed zeros,
 * subnormals, rounding ties) and lengths around the 16-wide vectors, on 1 and 2 threads.
 * TG_TEST_LABELS: isa */
#include "backend/backend.h"
#include "tg_test.h"

#include "core/pool.h"
#include "graph/node.h"
#include "ops/op.h"
#include "tilegraph/dtype.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The bits of some values that rounding and the masks must get right. */
static const uint16_t specials[] = {
    0x7fc0, 0xffc1, 0x7f80, 0xff80, 0x0000, 0x8000, 0x0001, 0x8001, 0x007f,
    0x3f80, 0xbf80, 0x7f7f, 0xff7f, 0x4049, 0xc049, 0x3f81, 0x0080, 0x8080,
};
#define N_SPECIAL (sizeof specials / sizeof *specials)

static float expected(tg_op op, uint16_t a, uint16_t b)
{
    float x = tg_bf16_to_f32(a), y = tg_bf16_to_f32(b);
    switch (op) {
    case TG_OP_RELU:
        return x < 0.0f ? 0.0f : x;
    case TG_OP_RELU_BWD:
        return y > 0.0f ? x : 0.0f;
    default:
        return x + y;
    }
}

static void check_op(tg_op op, tg_tensor *node, int64_t n, tg_pool *pool, uint64_t seed)
{
    uint16_t *a = malloc((size_t)n * 2), *b = malloc((size_t)n * 2), *o = malloc((size_t)n * 2);
    TG_CHECK(a && b && o);
    if (!a || !b || !o)
        goto done;
    uint64_t r = seed;
    for (int64_t i = 0; i < n; i++) {
        r = r * 6364136223846793005u + 1442695040888963407u;
        a[i] = (r >> 40) % 3 == 0 ? specials[(r >> 20) % N_SPECIAL] : (uint16_t)(r >> 48);
        b[i] = (r >> 44) % 3 == 0 ? specials[(r >> 24) % N_SPECIAL] : (uint16_t)(r >> 32);
    }
    tg_kernel_args k = {.node = node, .out = o, .pool = pool, .out_type = TG_BF16};
    k.in[0] = a, k.in[1] = b, k.in_type[0] = k.in_type[1] = TG_BF16;
    TG_CHECK(tg_elementwise_bf16_run(&k));
    for (int64_t i = 0; i < n; i++) {
        uint16_t want = tg_f32_to_bf16(expected(op, a[i], b[i]));
        /* which operand's NaN a sum of two NaNs carries is the compiler's choice */
        bool both_nan = (want & 0x7fff) > 0x7f80 && (o[i] & 0x7fff) > 0x7f80;
        if (o[i] != want && !both_nan) {
            tg_test_fail(__FILE__, __LINE__,
                         "%s, length %lld, element %lld (0x%04x, 0x%04x): 0x%04x, "
                         "want 0x%04x",
                         tg_op_name(op), (long long)n, (long long)i, a[i], b[i], o[i], want);
            break;
        }
    }
done:
    free(a);
    free(b);
    free(o);
}

static void test_matches_scalar_rounding(void)
{
    static const int64_t lengths[] = {1, 15, 16, 17, 33, 255, 4099, 70001};
    for (int threads = 1; threads <= 2; threads++) {
        tg_pool *pool = threads > 1 ? tg_pool_create(threads) : NULL;
        for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++) {
            int64_t n = lengths[l];
            tg_graph *g = tg_graph_create();
            tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(n));
            tg_tensor *y = tg_input(g, "y", TG_F32, tg_shape1(n));
            tg_tensor *ops[] = {tg_relu(g, x),
                                tg_node_create(g, TG_OP_RELU_BWD, 2, (tg_tensor *[]){x, y},
                                               &(tg_node_params){.i = {0}}),
                                tg_add(g, x, y)};
            TG_CHECK_OK(tg_graph_status(g));
            for (int k = 0; k < 3 && tg_graph_status(g) == TG_OK; k++) {
                TG_CHECK(tg_elementwise_bf16_supported(ops[k]));
                check_op(ops[k]->op, ops[k], n, pool, (uint64_t)(n * 3 + k));
            }
            tg_graph_destroy(g);
        }
        tg_pool_destroy(pool);
    }
}

int main(void)
{
    TG_RUN(test_matches_scalar_rounding);
    return tg_test_finish();
}
