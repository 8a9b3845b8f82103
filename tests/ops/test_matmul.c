/* tests/ops/test_matmul.c - MATMUL and LINEAR: gradients by finite
 * differences for every operand mode and transpose flag, fast sgemm kernels
 * against the double reference on 1 and 2 threads, shape errors.
 * TG_TEST_LABELS: threads quick isa */
#include "backend/backend.h"
#include "tg_test.h"

#include "tg_matmul_case.h"

#include "core/error.h"
#include "ops/op.h"

#include <string.h>

static const mm_case mm_cases[] = {
    {{0}, {0}, 3, 4, 5, false, false},  {{0}, {0}, 3, 4, 5, true, false},
    {{0}, {0}, 3, 4, 5, false, true},   {{0}, {0}, 3, 4, 5, true, true},
    {{2}, {2}, 3, 2, 4, false, false},                                          /* batched */
    {{2}, {2}, 3, 2, 4, true, true},    {{2, 3}, {2, 3}, 2, 3, 2, false, true}, /* two batch dims */
    {{3}, {0}, 2, 3, 4, false, false}, /* b shared over a's batch */
    {{3}, {0}, 2, 3, 4, true, false},   {{3}, {0}, 2, 3, 4, false, true},
    {{2, 2}, {0}, 2, 3, 4, true, true}, {{0}, {0}, 1, 1, 1, false, false},
};

static void test_matmul_gradcheck(void)
{
    for (size_t i = 0; i < sizeof mm_cases / sizeof *mm_cases; i++) {
        char label[64];
        snprintf(label, sizeof label, "matmul case %zu", i);
        TG_CHECK(tg_gradcheck(label, build_mm, (void *)&mm_cases[i], (tg_check_opts){0}));
    }
}

static void test_matmul_kernels(void)
{
    static const mm_case big[] = {
        {{0}, {0}, 67, 45, 33, false, false},  {{0}, {0}, 67, 45, 33, true, true},
        {{0}, {0}, 130, 129, 70, false, true}, /* large enough to split over threads */
        {{0}, {0}, 20, 300, 70, true, false},  /* wide: split by columns */
        {{4}, {4}, 17, 9, 12, false, true},    {{5}, {0}, 37, 40, 33, false, false},
        {{1}, {1}, 70, 90, 80, false, false}, /* one large product, split inside */
        {{3}, {0}, 7, 9, 11, true, false},
    };
    for (size_t i = 0; i < sizeof big / sizeof *big; i++)
        for (int t = 1; t <= 2; t++) {
            char label[64];
            snprintf(label, sizeof label, "matmul kernels case %zu", i);
            TG_CHECK(
                tg_check_kernels(label, build_mm, (void *)&big[i], t, 1e-4, (tg_check_opts){0}));
        }
    for (size_t i = 0; i < sizeof mm_cases / sizeof *mm_cases; i++)
        TG_CHECK(tg_check_kernels("matmul small", build_mm, (void *)&mm_cases[i], 2, 1e-4,
                                  (tg_check_opts){0}));
}

/* Hand-checked values: [[1,2],[3,4]] x [[5,6],[7,8]] = [[19,22],[43,50]]. */
static void test_matmul_values(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *a = tg_input(g, "a", TG_F32, tg_shape2(2, 2));
    tg_tensor *b = tg_input(g, "b", TG_F32, tg_shape2(2, 2));
    tg_tensor *c = tg_matmul(g, a, b, false, false);
    tg_tensor *ct = tg_matmul(g, a, b, true, false); /* [[26,30],[38,44]] */
    TG_CHECK_OK(tg_graph_status(g));
    float A[] = {1, 2, 3, 4}, B[] = {5, 6, 7, 8}, C[4], CT[4];
    const tg_kernel_def *def = tg_backend_cpu.kernel(TG_OP_MATMUL);
    tg_kernel_args k = {.node = c, .in = {A, B}, .out = C};
    def->forward(&k);
    k.node = ct;
    k.out = CT;
    def->forward(&k);
    float want[] = {19, 22, 43, 50}, want_t[] = {26, 30, 38, 44};
    for (int i = 0; i < 4; i++) {
        TG_CHECK_NEAR(C[i], want[i], 1e-5);
        TG_CHECK_NEAR(CT[i], want_t[i], 1e-5);
    }
    tg_graph_destroy(g);
}

static void test_linear(void)
{
    static const lin_case small[] = {
        {{3}, 4, 5, true}, {{3}, 4, 5, false}, {{2, 3}, 4, 2, true}, {{1}, 1, 1, true}};
    for (size_t i = 0; i < sizeof small / sizeof *small; i++) {
        TG_CHECK(tg_gradcheck("linear", build_linear, (void *)&small[i], (tg_check_opts){0}));
        TG_CHECK(tg_check_kernels("linear small", build_linear, (void *)&small[i], 1, 1e-4,
                                  (tg_check_opts){0}));
    }
    static const lin_case big[] = {
        {{40}, 320, 256, true}, {{40}, 256, 10, true}, {{3, 17}, 33, 65, false}};
    for (size_t i = 0; i < sizeof big / sizeof *big; i++)
        for (int t = 1; t <= 2; t++)
            TG_CHECK(tg_check_kernels("linear", build_linear, (void *)&big[i], t, 1e-4,
                                      (tg_check_opts){0}));
}

static void expect_error(tg_tensor *(*make)(tg_graph *), const char *want1, const char *want2)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *t = make(g);
    TG_CHECK(t == NULL);
    TG_CHECK(tg_graph_status(g) == TG_ERR_SHAPE);
    const char *msg = tg_graph_error(g);
    TG_CHECK(strstr(msg, want1) != NULL);
    TG_CHECK(strstr(msg, want2) != NULL);
    if (!strstr(msg, want1) || !strstr(msg, want2))
        fprintf(stderr, "    message was: %s\n", msg);
    tg_graph_destroy(g);
}

static tg_tensor *bad_inner(tg_graph *g)
{
    return tg_matmul(g, tg_input(g, "a", TG_F32, tg_shape2(3, 4)),
                     tg_input(g, "b", TG_F32, tg_shape2(5, 6)), false, false);
}
static tg_tensor *bad_batch(tg_graph *g)
{
    return tg_matmul(g, tg_input(g, "a", TG_F32, tg_shape3(2, 3, 4)),
                     tg_input(g, "b", TG_F32, tg_shape3(3, 4, 6)), false, false);
}
static tg_tensor *bad_rank(tg_graph *g)
{
    return tg_matmul(g, tg_input(g, "a", TG_F32, tg_shape1(3)),
                     tg_input(g, "b", TG_F32, tg_shape2(3, 4)), false, false);
}
static tg_tensor *bad_linear(tg_graph *g)
{
    return tg_linear(g, tg_input(g, "x", TG_F32, tg_shape2(8, 320)),
                     tg_input(g, "w", TG_F32, tg_shape2(256, 300)), NULL);
}
static tg_tensor *bad_bias(tg_graph *g)
{
    return tg_linear(g, tg_input(g, "x", TG_F32, tg_shape2(8, 3)),
                     tg_input(g, "w", TG_F32, tg_shape2(4, 3)),
                     tg_input(g, "b", TG_F32, tg_shape1(3)));
}

static void test_shape_errors(void)
{
    expect_error(bad_inner, "matmul", "[3, 4]");
    expect_error(bad_inner, "[5, 6]", "inner dimensions 4 and 5");
    expect_error(bad_batch, "matmul", "batch dimensions differ");
    expect_error(bad_rank, "matmul", "[3]");
    expect_error(bad_linear, "linear", "[256, 300]");
    expect_error(bad_linear, "[8, 320]", "320");
    expect_error(bad_bias, "linear", "bias [3]");
}

int main(void)
{
    TG_RUN(test_matmul_values);
    TG_RUN(test_matmul_gradcheck);
    TG_RUN(test_matmul_kernels);
    TG_RUN(test_linear);
    TG_RUN(test_shape_errors);
    return tg_test_finish();
}
