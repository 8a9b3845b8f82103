/* tests/backend/cpu/test_matmul_dnnl.c - MATMUL and LINEAR through oneDNN's matmul
 * (backend/cpu/matmul_dnnl.c) against the double reference: every operand mode
 * and transpose flag, attention's 4-D products [B, heads, S, d] and their
 * gradients, LINEAR with and without bias over 2-D and 3-D x (its weight
 * gradient is the summed mode), at 1 and 2 threads (parts per thread and
 * shapes that 2 does not divide); the backward graph's products are
 * planned too. bf16 compute within bf16 tolerance; the kernel names; no
 * plan when the own kernels are forced.
 * TG_TEST_LABELS: threads isa */
#include "backend/backend.h"
#include "tg_test.h"

#include "tg_matmul_case.h"

#include "backend/cpu/dnnl_util.h"
#include "ops/op.h"

#include <string.h>

static const mm_case mm_cases[] = {
    {{0}, {0}, 3, 4, 5, false, false},
    {{0}, {0}, 3, 4, 5, true, false},
    {{0}, {0}, 3, 4, 5, false, true},
    {{0}, {0}, 3, 4, 5, true, true},
    {{0}, {0}, 64, 48, 40, true, false},
    {{2}, {2}, 3, 2, 4, false, false},
    {{2}, {2}, 3, 2, 4, true, true},
    {{3}, {3}, 5, 7, 6, true, false},
    {{2, 3}, {2, 3}, 2, 3, 2, false, true},
    {{3}, {0}, 2, 3, 4, false, false}, /* b shared over a's batch */
    {{4}, {0}, 6, 3, 4, true, false},
    {{3}, {0}, 2, 3, 4, false, true},
    {{2, 2}, {0}, 2, 3, 4, true, true},
    {{0}, {4}, 3, 5, 2, false, false}, /* a shared over b's batch */
    {{0}, {0}, 1, 1, 1, false, false},
    /* attention: scores q k^T and context p v, [B, heads, S, d] */
    {{2, 3}, {2, 3}, 16, 16, 8, false, true},
    {{2, 3}, {2, 3}, 16, 8, 16, false, false},
    {{1, 3}, {1, 3}, 9, 9, 4, false, true}, /* a batch of 3: 2 threads cannot split it */
    {{4}, {4}, 70, 90, 80, false, false},
};
#define N_MM (sizeof mm_cases / sizeof *mm_cases)

static const lin_case lin_cases[] = {
    {{3}, 4, 5, true},       {{3}, 4, 5, false},       {{2, 3}, 4, 2, true}, {{1}, 1, 1, true},
    {{40}, 320, 256, true},  {{3, 17}, 33, 65, false}, /* 51 rows: no split */
    {{4, 16}, 48, 96, true},                           /* BERT-like [B, S, hidden] */
};
#define N_LIN (sizeof lin_cases / sizeof *lin_cases)

/* Every product of the forward and backward graphs on oneDNN (forced), 1
 * and 2 threads. tg_check_kernels compares every node with the reference. */
static void test_dnnl_matches_reference(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    for (int t = 1; t <= 2; t++) {
        for (size_t i = 0; i < N_MM; i++) {
            char label[64];
            snprintf(label, sizeof label, "oneDNN matmul case %zu, %d threads", i, t);
            int planned = 0;
            tg_check_opts o = {.planned = true, .n_planned = &planned};
            TG_CHECK(tg_check_kernels(label, build_mm, (void *)&mm_cases[i], t, 1e-4, o));
            if (planned < 1)
                tg_test_fail(__FILE__, __LINE__, "%s: no node planned with oneDNN", label);
        }
        for (size_t i = 0; i < N_LIN; i++) {
            char label[64];
            snprintf(label, sizeof label, "oneDNN linear case %zu, %d threads", i, t);
            int planned = 0;
            tg_check_opts o = {.planned = true, .n_planned = &planned};
            TG_CHECK(tg_check_kernels(label, build_linear, (void *)&lin_cases[i], t, 1e-4, o));
            /* the forward, the input gradient and the weight gradient */
            if (planned < 3)
                tg_test_fail(__FILE__, __LINE__, "%s: %d products planned, want 3", label, planned);
        }
    }
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* bf16 compute: oneDNN's bf16 math where the CPU has it (relative error
 * about 2^-8 per product), f32 elsewhere; the name says which. */
static void test_bf16_compute(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    for (size_t i = 0; i < N_LIN; i++) {
        int planned = 0;
        tg_check_opts o = {.planned = true, .n_planned = &planned, .compute = TG_BF16};
        TG_CHECK(tg_check_kernels("bf16 linear", build_linear, (void *)&lin_cases[i], 2, 0.25, o));
        TG_CHECK(planned >= 3);
    }
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(8, 16));
    tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape2(4, 16));
    tg_tensor *y = tg_linear(g, x, w, NULL);
    tg_kernel_plan kp = {0};
    TG_CHECK_OK(tg_op_planner_get(TG_OP_LINEAR)
                    ->plan(y, &(tg_plan_opts){.n_threads = 1, .compute = TG_BF16}, &kp));
    TG_CHECK(kp.state != NULL);
    bool native = dnnl_get_effective_cpu_isa() >= dnnl_cpu_isa_avx512_core_bf16;
    const char *want = native ? "(bf16 math)" : "(f32: no bf16 arithmetic";
    if (!strstr(kp.kernel, want))
        tg_test_fail(__FILE__, __LINE__, "ISA %s: kernel '%s' does not say '%s'",
                     tg_dnnl_isa_name(), kp.kernel, want);
    if (kp.state)
        tg_op_planner_get(TG_OP_LINEAR)->plan_free(kp.state);
    tg_graph_destroy(g);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* The kernel names: oneDNN's implementation with the split, or the own
 * kernel and why. */
static void test_kernel_names(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *a = tg_input(g, "a", TG_F32, tg_shape3(4, 6, 8));
    tg_tensor *b = tg_input(g, "b", TG_F32, tg_shape3(4, 8, 6));
    tg_tensor *c = tg_matmul(g, a, b, false, false);
    tg_tensor *s = tg_matmul(g, a, a, false, true); /* [4,6,8] x [4,6,8]^T: 6x6 */
    TG_CHECK_OK(tg_graph_status(g));
    const tg_op_planner *pl = tg_op_planner_get(TG_OP_MATMUL);
    TG_CHECK(pl != NULL && tg_op_planner_get(TG_OP_LINEAR) == pl);
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    tg_kernel_plan kp = {0};
    TG_CHECK_OK(pl->plan(c, &(tg_plan_opts){.n_threads = 2}, &kp));
    if (!kp.state || !strstr(kp.kernel, "oneDNN matmul") || !strstr(kp.kernel, "parts"))
        tg_test_fail(__FILE__, __LINE__, "batch of 4 on 2 threads: kernel '%s'", kp.kernel);
    pl->plan_free(kp.state);
    /* the rule: batched products on oneDNN, 2-D ones on OpenBLAS */
    tg_dnnl_force_mode(TG_DNNL_AUTO, true);
    memset(&kp, 0, sizeof kp);
    TG_CHECK_OK(pl->plan(c, &(tg_plan_opts){.n_threads = 1}, &kp));
    TG_CHECK(kp.state != NULL && strstr(kp.kernel, "oneDNN matmul") != NULL);
    pl->plan_free(kp.state);
    /* a batch of 3 on 2 threads: one OpenMP team, only if it sleeps */
    tg_tensor *a3 = tg_input(g, "a3", TG_F32, tg_shape3(3, 6, 8));
    tg_tensor *c3 = tg_matmul(g, a3, a3, false, true);
    memset(&kp, 0, sizeof kp);
    TG_CHECK_OK(pl->plan(c3, &(tg_plan_opts){.n_threads = 2}, &kp));
    if (tg_dnnl_passive_wait())
        TG_CHECK(kp.state != NULL);
    else
        TG_CHECK(kp.state == NULL && strstr(kp.kernel, "OMP_WAIT_POLICY=passive") != NULL);
    pl->plan_free(kp.state);
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape3(2, 5, 8));
    tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape2(3, 8));
    tg_tensor *y = tg_linear(g, x, w, NULL);
    memset(&kp, 0, sizeof kp);
    TG_CHECK_OK(pl->plan(y, &(tg_plan_opts){.n_threads = 1}, &kp));
    TG_CHECK(kp.state == NULL && strstr(kp.kernel, "OpenBLAS") != NULL);
    tg_dnnl_force_mode(TG_DNNL_NEVER, true);
    memset(&kp, 0, sizeof kp);
    TG_CHECK_OK(pl->plan(s, &(tg_plan_opts){.n_threads = 1}, &kp));
    TG_CHECK(kp.state == NULL);
    TG_CHECK(strstr(kp.kernel, "OpenBLAS") != NULL);
    int planned = 0;
    tg_check_opts o = {.planned = true, .n_planned = &planned};
    TG_CHECK(tg_check_kernels("own matmul", build_mm, (void *)&mm_cases[15], 2, 1e-4, o));
    TG_CHECK(planned == 0);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_dnnl_matches_reference);
    TG_RUN(test_bf16_compute);
    TG_RUN(test_kernel_names);
    return tg_test_finish();
}
