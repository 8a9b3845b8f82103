/* tests/backend/cpu/test_conv_dnnl.c - the oneDNN convolutions (backend/cpu/conv_dnnl.c)
 * against the double reference: every kind (forward with and without bias,
 * backward data, backward weights) on groups, depthwise, strides, padding,
 * dilation, 1x1, 7x7 and odd sizes at 1 and 2 threads; the compile-time
 * choice and its recorded kernel name; a compiled program's steps take the
 * primitive's scratchpad as their planned scratch; and training through a
 * session with oneDNN gives the same losses as with the own kernels.
 * bf16 arithmetic within bf16 tolerance. Nothing here needs AVX-512: oneDNN picks what the CPU has.
 * TG_TEST_LABELS: threads isa */
#include "backend/backend.h"
#include "tg_conv_case.h"
#include "tg_test.h"

#include "compile/program.h"
#include "core/bf16.h"
#include "core/convert.h"
#include "core/process.h"
#include "ops/conv.h"
#include "backend/cpu/dnnl_util.h"
#include "runtime/interp.h"
#include "runtime/session_internal.h"
#include "tilegraph/optim.h"
#include "tilegraph/session.h"
#include "tilegraph/verify.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const conv_case cases[] = {
    {2, 3, 6, 5, 4, 3, 3, P(1, 1, 0, 0, 1, 1, 1), true, true},    /* plain, odd width */
    {2, 2, 7, 6, 3, 3, 3, P(2, 2, 1, 1, 1, 1, 1), false, true},   /* stride 2, pad 1 */
    {1, 2, 7, 7, 2, 3, 3, P(1, 1, 2, 2, 2, 2, 1), true, true},    /* dilation 2 */
    {2, 4, 5, 6, 6, 2, 3, P(2, 1, 1, 0, 1, 1, 2), true, true},    /* groups 2, mixed */
    {2, 3, 4, 4, 3, 3, 3, P(1, 1, 1, 1, 1, 1, 3), false, true},   /* depthwise */
    {2, 8, 4, 5, 16, 1, 1, P(1, 1, 0, 0, 1, 1, 1), true, true},   /* 1x1 */
    {2, 16, 9, 9, 16, 1, 1, P(2, 2, 0, 0, 1, 1, 1), false, true}, /* 1x1 stride 2 */
    {2, 3, 15, 15, 8, 7, 7, P(2, 2, 3, 3, 1, 1, 1), true, false}, /* ResNet stem, 7x7 */
    {1, 2, 5, 4, 2, 2, 3, P(3, 2, 2, 1, 2, 1, 1), true, true},    /* stride > kernel */
    {3, 32, 8, 8, 32, 3, 3, P(1, 1, 1, 1, 1, 1, 1), true, true},  /* blocked-friendly */
    {2, 32, 9, 7, 64, 3, 3, P(2, 2, 1, 1, 1, 1, 1), false, true}, /* downsample, odd */
    {2, 16, 6, 6, 32, 3, 3, P(1, 1, 1, 1, 1, 1, 4), true, true},  /* groups 4, wide */
    {1, 1, 12, 12, 4, 5, 5, P(1, 1, 0, 0, 1, 1, 1), true, false}, /* one channel, 5x5 */
    {4, 32, 1, 1, 16, 3, 3, P(1, 1, 1, 1, 1, 1, 1), true, true},  /* 1x1 map: centre tap only */
    {3, 16, 2, 2, 24, 3, 3, P(2, 2, 1, 1, 1, 1, 1), false, true}, /* 2x2 -> 1x1: 2x2 live taps */
    {2, 16, 1, 3, 16, 3, 3, P(1, 1, 1, 1, 1, 1, 4), true, true},  /* one row, groups: 1x3 taps */
};
#define N_CASES (sizeof cases / sizeof *cases)

/* Every kind through oneDNN (forced), at 1 and 2 threads; every conv node
 * of the graph must have been planned with a primitive. */
static void test_dnnl_kernels_match_reference(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    for (size_t i = 0; i < N_CASES; i++)
        for (int t = 1; t <= 2; t++) {
            char label[64];
            snprintf(label, sizeof label, "oneDNN conv case %zu", i);
            int planned = 0;
            tg_check_opts o = {.planned = true, .n_planned = &planned};
            TG_CHECK(tg_check_kernels(label, build_conv, (void *)&cases[i], t, 2e-4, o));
            int convs = 2 + cases[i].x_param; /* forward, weight gradient, data gradient */
            if (planned != convs)
                tg_test_fail(__FILE__, __LINE__, "%s: %d of %d conv nodes planned with oneDNN",
                             label, planned, convs);
        }
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* bf16 arithmetic (--precision bf16.*): oneDNN multiplies bf16 operands
 * (8-bit mantissas: relative error ~2^-8 per product) accumulating in f32.
 * Where oneDNN has no bf16 kernel (no AVX-512) the f32 one runs, which
 * passes the same check; the kernel name says which. */
static void test_bf16_kernels_match_reference(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    for (size_t i = 0; i < N_CASES; i++) {
        char label[64];
        snprintf(label, sizeof label, "oneDNN bf16 conv case %zu", i);
        int planned = 0;
        tg_check_opts o = {.planned = true, .n_planned = &planned, .compute = TG_BF16};
        /* the harness allows rtol x (|ref| + 1% of the largest |ref|): 0.25 gives
         * 0.25% of the largest value, about bf16's rounding (2^-8) of the sums */
        TG_CHECK(tg_check_kernels(label, build_conv, (void *)&cases[i], 2, 0.25, o));
        TG_CHECK(planned == 2 + cases[i].x_param);
    }
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(2, 32, 8, 8));
    tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape4(32, 32, 3, 3));
    tg_tensor *y = tg_conv2d(g, x, w, NULL, P(1, 1, 1, 1, 1, 1, 1));
    tg_kernel_plan kp = {0};
    TG_CHECK_OK(tg_op_planner_get(TG_OP_CONV2D)
                    ->plan(y, &(tg_plan_opts){.n_threads = 1, .compute = TG_BF16}, &kp));
    bool avx512 = strncmp(tg_dnnl_isa_name(), "avx512_core", 11) == 0;
    TG_CHECK(kp.state != NULL);
    if (avx512 && !strstr(kp.kernel, "(bf16)"))
        tg_test_fail(__FILE__, __LINE__, "ISA %s, yet the bf16 plan chose '%s'", tg_dnnl_isa_name(),
                     kp.kernel);
    if (kp.state)
        tg_op_planner_get(TG_OP_CONV2D)->plan_free(kp.state);
    tg_graph_destroy(g);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* An inference stem (3 input channels) computes in f32 under bf16
 * arithmetic, where oneDNN's bf16 kernels would pad its channel pairs; the
 * same convolution in training, or with 4 input channels, stays bf16. */
static void test_inference_stem_computes_f32(void)
{
    if (strncmp(tg_dnnl_isa_name(), "avx512_core", 11) != 0)
        return; /* no bf16 kernels: f32 either way */
    for (int c = 3; c <= 4; c++)
        for (int inference = 0; inference <= 1; inference++) {
            tg_graph *g = tg_graph_create();
            tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(2, c, 16, 16));
            tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape4(16, c, 3, 3));
            tg_tensor *y = tg_conv2d(g, x, w, NULL, P(2, 2, 1, 1, 1, 1, 1));
            tg_kernel_plan kp = {0};
            tg_plan_opts po = {.n_threads = 1, .compute = TG_BF16, .inference = inference};
            TG_CHECK_OK(tg_op_planner_get(TG_OP_CONV2D)->plan(y, &po, &kp));
            bool f32 = c == 3 && inference;
            if (!kp.state || (strstr(kp.kernel, "(bf16)") != NULL) == f32)
                tg_test_fail(__FILE__, __LINE__, "%d channels, %s: '%s'", c,
                             inference ? "inference" : "training", kp.kernel);
            if (kp.state)
                tg_op_planner_get(TG_OP_CONV2D)->plan_free(kp.state);
            tg_graph_destroy(g);
        }
}

/* Taps that read only padding are left out of the primitive (its kernel
 * name says how many are live), and the results still match the reference
 * (test_dnnl_kernels_match_reference runs these geometries); a conv where
 * every tap reads the input is not cropped. */
static void test_dead_taps_are_cropped(void)
{
    static const struct {
        int64_t h, w, stride;
        const char *live;
    } c[] = {{1, 1, 1, "1x1 live taps"}, {2, 2, 2, "2x2 live taps"}, {8, 8, 1, NULL}};
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        tg_graph *g = tg_graph_create();
        tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(2, 16, c[i].h, c[i].w));
        tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape4(16, 16, 3, 3));
        tg_tensor *y = tg_conv2d(g, x, w, NULL, P(c[i].stride, c[i].stride, 1, 1, 1, 1, 1));
        TG_CHECK_OK(tg_graph_status(g));
        tg_kernel_plan kp = {0};
        if (y)
            TG_CHECK_OK(tg_op_planner_get(TG_OP_CONV2D)
                            ->plan(y, &(tg_plan_opts){.n_threads = 1, .compute = TG_F32}, &kp));
        bool says = strstr(kp.kernel, "live taps") != NULL;
        if (c[i].live ? !strstr(kp.kernel, c[i].live) : says)
            tg_test_fail(__FILE__, __LINE__, "%lldx%lld input, stride %lld: kernel '%s'",
                         (long long)c[i].h, (long long)c[i].w, (long long)c[i].stride, kp.kernel);
        if (kp.state)
            tg_op_planner_get(TG_OP_CONV2D)->plan_free(kp.state);
        tg_graph_destroy(g);
    }
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* With the own kernels forced, no node gets oneDNN state, and the
 * harness still checks them against the reference. */
static void test_own_kernels_when_forced(void)
{
    tg_dnnl_force_mode(TG_DNNL_NEVER, true);
    int planned = 0;
    tg_check_opts o = {.planned = true, .n_planned = &planned};
    TG_CHECK(tg_check_kernels("own conv", build_conv, (void *)&cases[9], 2, 2e-4, o));
    TG_CHECK(planned == 0);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* The recorded kernel: the tutorial's 1->10 5x5 conv keeps the direct
 * kernel, a 64-channel stride-2 ResNet conv goes to oneDNN, whose
 * implementation name is recorded. */
static void test_choice_and_kernel_name(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x1 = tg_input(g, "x1", TG_F32, tg_shape4(40, 1, 28, 28));
    tg_tensor *w1 = tg_input(g, "w1", TG_F32, tg_shape4(10, 1, 5, 5));
    tg_tensor *y1 = tg_conv2d(g, x1, w1, NULL, P(1, 1, 0, 0, 1, 1, 1));
    tg_tensor *x2 = tg_input(g, "x2", TG_F32, tg_shape4(4, 64, 16, 16));
    tg_tensor *w2 = tg_input(g, "w2", TG_F32, tg_shape4(128, 64, 3, 3));
    tg_tensor *y2 = tg_conv2d(g, x2, w2, NULL, P(2, 2, 1, 1, 1, 1, 1));
    TG_CHECK_OK(tg_graph_status(g));
    if (tg_graph_status(g) != TG_OK) {
        tg_graph_destroy(g);
        return;
    }
    const tg_op_planner *pl = tg_op_planner_get(TG_OP_CONV2D);
    TG_CHECK(pl != NULL && tg_op_planner_get(TG_OP_RELU) == NULL);
    tg_dnnl_force_mode(TG_DNNL_AUTO, true);
    tg_kernel_plan k1 = {0}, k2 = {0};
    TG_CHECK_OK(pl->plan(y1, &(tg_plan_opts){.n_threads = 1, .compute = TG_F32}, &k1));
    TG_CHECK_OK(pl->plan(y2, &(tg_plan_opts){.n_threads = 1, .compute = TG_F32}, &k2));
    TG_CHECK(k1.state == NULL && strcmp(k1.kernel, "own direct") == 0);
    TG_CHECK(k2.state != NULL && strncmp(k2.kernel, "oneDNN ", 7) == 0 && strlen(k2.kernel) > 7);
    if (k2.state)
        pl->plan_free(k2.state);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
    TG_CHECK(strlen(tg_dnnl_isa_name()) > 0);
    tg_graph_destroy(g);
}

/* Weight gradients over maps of at most 4 pixels are one matmul over the
 * batch (backend/cpu/conv_wgrad_mm.c): with and without im2col (a 1x1 kernel at
 * stride 1 reads x as it is), strided, dilated, padded, f32 and bf16, 1
 * and 2 threads (bands of output channels), against the reference. */
static void test_small_maps_weight_gradient_is_a_matmul(void)
{
    static const conv_case mm[] = {
        {4, 32, 2, 2, 32, 3, 3, P(1, 1, 1, 1, 1, 1, 1), false, true},  /* 2x2, 3x3: im2col */
        {3, 32, 4, 4, 48, 3, 3, P(2, 2, 1, 1, 1, 1, 1), false, true},  /* 4x4 -> 2x2 */
        {4, 32, 4, 4, 64, 1, 1, P(2, 2, 0, 0, 1, 1, 1), false, true},  /* 1x1 stride 2 */
        {2, 16, 2, 2, 32, 1, 1, P(1, 1, 0, 0, 1, 1, 1), true, true},   /* 1x1: x as it is */
        {2, 16, 1, 2, 16, 3, 3, P(1, 1, 1, 1, 1, 1, 1), false, true},  /* 1x2 map */
        {2, 16, 2, 2, 16, 3, 3, P(1, 1, 2, 2, 2, 2, 1), false, false}, /* dilation 2 */
        {3, 16, 5, 3, 32, 3, 3, P(2, 2, 1, 1, 1, 1, 1), false, true},  /* 5x3 -> 3x2: not */
    };
    tg_dnnl_force_mode(TG_DNNL_AUTO, true);
    for (size_t i = 0; i < sizeof mm / sizeof *mm; i++)
        for (int t = 1; t <= 2; t++)
            for (int bf16 = 0; bf16 <= 1; bf16++) {
                char label[80];
                snprintf(label, sizeof label, "small-map case %zu, %d threads%s", i, t,
                         bf16 ? ", bf16" : "");
                int planned = 0, matmuls = 0;
                tg_check_opts o = {.planned = true,
                                   .n_planned = &planned,
                                   .compute = bf16 ? TG_BF16 : TG_F32,
                                   .kernel_like = "matmul",
                                   .n_kernel_like = &matmuls};
                TG_CHECK(
                    tg_check_kernels(label, build_conv, (void *)&mm[i], t, bf16 ? 0.25 : 2e-4, o));
                /* oneDNN's bf16 matmul needs AVX-512: without it the f32 kernels run */
                bool bf16_matmul = strncmp(tg_dnnl_isa_name(), "avx512_core", 11) == 0;
                int want = i == sizeof mm / sizeof *mm - 1 || (bf16 && !bf16_matmul) ? 0 : 1;
                if (matmuls != want)
                    tg_test_fail(__FILE__, __LINE__, "%s: %d weight gradients as a matmul, not %d",
                                 label, matmuls, want);
            }
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* At 2 threads a batch that splits in two runs as two one-thread
 * primitives (the recorded kernel says so); an odd batch does not split. */
static void test_two_threads_split_the_batch(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    const tg_op_planner *pl = tg_op_planner_get(TG_OP_CONV2D);
    for (int64_t n = 3; n <= 4; n++) {
        tg_graph *g = tg_graph_create();
        tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(n, 64, 16, 16));
        tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape4(128, 64, 3, 3));
        tg_tensor *y = tg_conv2d(g, x, w, NULL, P(2, 2, 1, 1, 1, 1, 1));
        TG_CHECK_OK(tg_graph_status(g));
        tg_kernel_plan one = {0}, two = {0};
        if (y) {
            TG_CHECK_OK(pl->plan(y, &(tg_plan_opts){.n_threads = 1, .compute = TG_F32}, &one));
            TG_CHECK_OK(pl->plan(y, &(tg_plan_opts){.n_threads = 2, .compute = TG_F32}, &two));
        }
        bool split = strstr(two.kernel, "batch in 2 parts") != NULL;
        if (split != (n % 2 == 0) || strstr(one.kernel, "parts"))
            tg_test_fail(__FILE__, __LINE__, "batch %lld: kernels '%s' (1 thread), '%s' (2)",
                         (long long)n, one.kernel, two.kernel);
        if (one.state)
            pl->plan_free(one.state);
        if (two.state)
            pl->plan_free(two.state);
        tg_graph_destroy(g);
    }
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* One sample on two threads. The plan hook for training keeps the own
 * kernels (no OpenMP team: the rule as before); for inference the
 * ungrouped convolution's output channels are split into two parts, the
 * grouped one runs on one thread. */
static void test_one_sample_plans(void)
{
    const tg_op_planner *pl = tg_op_planner_get(TG_OP_CONV2D);
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(1, 32, 10, 10));
    tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape4(64, 32, 3, 3));
    tg_tensor *wg = tg_input(g, "wg", TG_F32, tg_shape4(64, 16, 3, 3));
    tg_tensor *y = tg_conv2d(g, x, w, NULL, P(1, 1, 1, 1, 1, 1, 1));
    tg_tensor *yg = tg_conv2d(g, x, wg, NULL, P(1, 1, 1, 1, 1, 1, 2));
    TG_CHECK_OK(tg_graph_status(g));
    for (int k = 0; y && yg && k < 3; k++) {
        bool inference = k > 0;
        tg_kernel_plan kp = {0};
        TG_CHECK_OK(pl->plan(k == 2 ? yg : y,
                             &(tg_plan_opts){.n_threads = 2, .inference = inference}, &kp));
        const char *want = !inference ? (tg_dnnl_passive_wait() ? "oneDNN" : "own")
                           : k == 1   ? "out channels in 2 parts"
                                      : "oneDNN";
        if (!strstr(kp.kernel, want) || (k == 2 && strstr(kp.kernel, "parts")))
            tg_test_fail(__FILE__, __LINE__, "case %d: kernel '%s', wanted '%s'", k, kp.kernel,
                         want);
        if (kp.state)
            pl->plan_free(kp.state);
    }
    tg_graph_destroy(g);
}

/* An inference session of g on `threads` threads. */
static tg_session *open_threads(tg_graph *g, int threads, int seed)
{
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", threads);
    tg_options_set_int(o, "randomSeed", seed);
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    tg_options_destroy(o);
    return s;
}

/* The checker's report on s's run: every row within tolerance. */
static void expect_verified(tg_session *s, int threads)
{
    const tg_verify_report *r = s ? tg_session_verify_report(s) : NULL;
    for (int i = 0; r && i < tg_verify_rows(r); i++) {
        const tg_verify_row *row = tg_verify_row_at(r, i);
        if (row->verdict != TG_VERIFY_OK)
            tg_test_fail(__FILE__, __LINE__, "%d threads: %s not ok: %s", threads, row->name,
                         row->note);
    }
    TG_CHECK(r != NULL);
}

/* Values (two: 2 threads') within f32 rounding of the expected (one: 1 thread's). */
static void expect_close(const float *one, const float *two, int count)
{
    double diff = 0, most = 0;
    for (int i = 0; i < count; i++) {
        diff = fmax(diff, fabs((double)one[i] - two[i]));
        most = fmax(most, fabs((double)one[i]));
    }
    if (!(diff <= 1e-6 * most) || most == 0)
        tg_test_fail(__FILE__, __LINE__, "values differ from the expected by %.3g (largest %.3g)",
                     diff, most);
}

/* A k x c x r x r weight parameter, uniform over its fan-in. */
static tg_tensor *weight(tg_graph *g, const char *name, int k, int c, int r)
{
    return tg_param(g, name, tg_shape4(k, c, r, r),
                    (tg_init){TG_INIT_FAN_IN_UNIFORM, c * r * r, 0});
}

/* An inference program at batch 1: conv (+ bias) -> conv 1x1 (host output,
 * plain) -> grouped conv, on two threads, gives what one thread gives, and
 * the checker finds every value within tolerance of the reference. Output
 * channels split in parts read each part's own weights and bias: a part
 * given another's would differ in half the channels. */
static void one_sample_run(int threads, float *out, size_t count, bool check)
{
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, false);
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(1, 32, 9, 9));
    tg_tensor *w1 = weight(g, "w1", 64, 32, 3);
    tg_tensor *b1 = tg_param(g, "b1", tg_shape1(64), (tg_init){TG_INIT_FAN_IN_UNIFORM, 4, 0});
    tg_tensor *w2 = weight(g, "w2", 48, 64, 1);
    tg_tensor *w3 = weight(g, "w3", 48, 24, 3);
    tg_tensor *h = tg_relu(g, tg_conv2d(g, x, w1, b1, P(1, 1, 1, 1, 1, 1, 1)));
    tg_tensor *y2 = tg_conv2d(g, h, w2, NULL, P(1, 1, 0, 0, 1, 1, 1));
    tg_tensor *y = tg_conv2d(g, y2, w3, NULL, P(2, 2, 1, 1, 1, 1, 2));
    tg_tensor_mark_output(y2);
    tg_tensor_mark_output(y);
    TG_CHECK_OK(tg_graph_status(g));
    tg_session *s = open_threads(g, threads, 4);
    float xs[32 * 9 * 9];
    for (size_t i = 0; i < sizeof xs / sizeof *xs; i++)
        xs[i] = (float)(((int)i * 29) % 23) / 11.0f - 1.0f;
    if (s && threads == 2) {
        const tg_kernel_plan *kp = tg_session_program(s)->plans;
        const tg_tensor *c1 = h->in[0];
        if (!strstr(kp[c1->id].kernel, "in 2 parts") || !strstr(kp[y2->id].kernel, "in 2 parts"))
            tg_test_fail(__FILE__, __LINE__, "kernels '%s', '%s': output channels not split",
                         kp[c1->id].kernel, kp[y2->id].kernel);
    }
    if (s && check)
        TG_CHECK_OK(tg_session_verify_next_run(s));
    TG_CHECK_OK(tg_session_write(s, x, xs, sizeof xs));
    TG_CHECK_OK(tg_session_run(s));
    size_t n2 = (size_t)tg_numel(y2);
    TG_CHECK_OK(tg_session_read(s, y2, out, n2 * sizeof(float)));
    TG_CHECK_OK(tg_session_read(s, y, out + n2, (count - n2) * sizeof(float)));
    if (check)
        expect_verified(s, threads);
    tg_session_destroy(s);
    tg_graph_destroy(g);
}

static void test_one_sample_two_threads_match_one(void)
{
    enum { COUNT = 48 * 9 * 9 + 48 * 5 * 5 };
    static float one[COUNT], two[COUNT];
    one_sample_run(1, one, COUNT, false);
    one_sample_run(2, two, COUNT, true);
    expect_close(one, two, COUNT);
}

/* mobilenet's shapes at batch 1 on two threads: depthwise convolutions on
 * 48 channels (batch norm folded and hard swish; 5x5, stride 2, bias: in
 * and out blocked, as an inference program keeps a depthwise convolution
 * between blocked ones) and on 40 (plain), a 1x1 one to 48 channels
 * (blocked, batch norm folded): the threads divide none of them in equal
 * 16-channel blocks. Each runs in parts of its
 * channels with a primitive each (the kernel names say so) and gives what one thread gives; the
 * checker finds every value within tolerance of the reference. The statistics differ per channel: a
 * part reading another's (or its weights, bias, input) would differ from one thread. */
static void chan_parts_run(int threads, float *out, size_t count)
{
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, false);
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(1, 48, 11, 11));
    tg_init u9 = {TG_INIT_FAN_IN_UNIFORM, 9, 0}, u1 = {TG_INIT_FAN_IN_UNIFORM, 1, 0};
    tg_tensor *wd = tg_param(g, "wd", tg_shape4(48, 1, 3, 3), u9);
    tg_tensor *w5 = tg_param(g, "w5", tg_shape4(48, 1, 5, 5), u9);
    tg_tensor *b5 = tg_param(g, "b5", tg_shape1(48), u1);
    tg_tensor *wm = tg_param(g, "wm", tg_shape4(48, 48, 1, 1), u9);
    tg_tensor *wp = tg_param(g, "wp", tg_shape4(40, 48, 1, 1), u9);
    tg_tensor *w4 = tg_param(g, "w4", tg_shape4(40, 1, 3, 3), u9);
    tg_tensor *we = tg_param(g, "we", tg_shape4(48, 40, 1, 1), u9);
    tg_tensor *gd = tg_param(g, "gd", tg_shape1(48), u1);
    tg_tensor *bd = tg_param(g, "bd", tg_shape1(48), u1);
    tg_tensor *sd = tg_state(g, "sd", tg_shape2(2, 48), (tg_init){TG_INIT_NORM_STATS, 0, 0});
    tg_tensor *se = tg_state(g, "se", tg_shape2(2, 48), (tg_init){TG_INIT_NORM_STATS, 0, 0});
    tg_tensor *cd = tg_conv2d(g, x, wd, NULL, P(1, 1, 1, 1, 1, 1, 48));
    tg_tensor *h = tg_hard_swish(g, tg_batch_norm(g, cd, gd, bd, sd, 1e-5f));
    tg_tensor *c5 = tg_conv2d(g, h, w5, b5, P(2, 2, 2, 2, 1, 1, 48));
    tg_tensor *cm = tg_conv2d(g, c5, wm, NULL, P(1, 1, 0, 0, 1, 1, 1));
    h = tg_batch_norm(g, cm, NULL, NULL, se, 1e-5f);
    tg_tensor *cp = tg_conv2d(g, h, wp, NULL, P(1, 1, 0, 0, 1, 1, 1));
    tg_tensor *c4 = tg_conv2d(g, cp, w4, NULL, P(1, 1, 1, 1, 1, 1, 40));
    tg_tensor *ce = tg_conv2d(g, c4, we, NULL, P(1, 1, 0, 0, 1, 1, 1));
    tg_tensor *y = tg_batch_norm(g, ce, NULL, NULL, se, 1e-5f);
    tg_tensor_mark_output(y);
    TG_CHECK_OK(tg_graph_status(g));
    tg_session *s = open_threads(g, threads, 5);
    const tg_tensor *convs[] = {cd, c5, cm, c4};
    for (int i = 0; s && threads == 2 && i < 4; i++) {
        const char *k = tg_session_program(s)->plans[convs[i]->id].kernel;
        if (!strstr(k, "channels in 2 parts") || strstr(k, "out channels"))
            tg_test_fail(__FILE__, __LINE__, "conv %d: kernel '%s', not in 2 parts", i, k);
    }
    /* between blocked convolutions a depthwise one reads and writes nChw16c */
    const char *k5 = s ? tg_session_program(s)->plans[c5->id].kernel : "";
    if (!strstr(k5, "nChw16c"))
        tg_test_fail(__FILE__, __LINE__, "%d threads: depthwise kernel '%s', not blocked", threads,
                     k5);
    float st[2 * 48], xs[48 * 11 * 11];
    for (int c = 0; c < 48; c++) {
        st[c] = (float)((c * 7) % 11) / 10.0f - 0.5f;
        st[48 + c] = 0.1f + (float)((c * 5) % 13) / 4.0f;
    }
    for (size_t i = 0; i < sizeof xs / sizeof *xs; i++)
        xs[i] = (float)(((int)i * 29) % 23) / 11.0f - 1.0f;
    TG_CHECK_OK(tg_session_write(s, sd, st, sizeof st));
    TG_CHECK_OK(tg_session_write(s, se, st, sizeof st));
    TG_CHECK_OK(tg_session_write(s, x, xs, sizeof xs));
    if (s && threads == 2)
        TG_CHECK_OK(tg_session_verify_next_run(s));
    TG_CHECK_OK(tg_session_run(s));
    TG_CHECK_OK(tg_session_read(s, y, out, count * sizeof(float)));
    if (threads == 2)
        expect_verified(s, threads);
    tg_session_destroy(s);
    tg_graph_destroy(g);
}

static void test_channel_parts_match_one_thread(void)
{
    enum { COUNT = 48 * 6 * 6 };
    static float one[COUNT], two[COUNT];
    chan_parts_run(1, one, COUNT);
    chan_parts_run(2, two, COUNT);
    expect_close(one, two, COUNT);
}

/* A small conv net trained for a few SGD steps. */
typedef struct net {
    tg_tensor *x, *labels, *loss;
} net;

static tg_graph *build_net(net *n)
{
    tg_graph *g = tg_graph_create();
    n->x = tg_input(g, "x", TG_F32, tg_shape4(4, 3, 12, 12));
    n->labels = tg_input(g, "labels", TG_I32, tg_shape1(4));
    tg_tensor *w1 =
        tg_param(g, "w1", tg_shape4(16, 3, 3, 3), (tg_init){TG_INIT_FAN_IN_UNIFORM, 27, 0});
    tg_tensor *b1 = tg_param(g, "b1", tg_shape1(16), (tg_init){TG_INIT_FAN_IN_UNIFORM, 27, 0});
    tg_tensor *w2 =
        tg_param(g, "w2", tg_shape4(32, 16, 3, 3), (tg_init){TG_INIT_FAN_IN_UNIFORM, 144, 0});
    tg_tensor *h = tg_relu(g, tg_conv2d(g, n->x, w1, b1, P(2, 2, 1, 1, 1, 1, 1)));
    h = tg_relu(g, tg_conv2d(g, h, w2, NULL, P(2, 2, 1, 1, 1, 1, 1)));
    h = tg_reduce_mean(g, h, 4u | 8u, false); /* [4, 32] */
    tg_tensor *wl = tg_param(g, "wl", tg_shape2(5, 32), (tg_init){TG_INIT_FAN_IN_UNIFORM, 32, 0});
    n->loss = tg_cross_entropy(g, tg_linear(g, h, wl, NULL), n->labels);
    tg_tensor_mark_output(n->loss);
    TG_CHECK_OK(tg_graph_backward(g, n->loss));
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.9f);
    TG_CHECK_OK(tg_graph_add_optimizer(g, &opt));
    TG_CHECK_OK(tg_graph_status(g));
    return g;
}

/* Four steps on the same batch (so the loss must fall); their losses. */
static void run_steps(tg_session *s, const net *n, float *losses)
{
    float x[4 * 3 * 12 * 12];
    int32_t y[4];
    for (size_t i = 0; i < sizeof x / sizeof *x; i++)
        x[i] = (float)(((int)i * 37) % 19) / 9.0f - 1.0f;
    for (int i = 0; i < 4; i++)
        y[i] = (i * 3) % 5;
    for (int step = 0; s && step < 4; step++) {
        TG_CHECK_OK(tg_session_write(s, n->x, x, sizeof x));
        TG_CHECK_OK(tg_session_write(s, n->labels, y, sizeof y));
        TG_CHECK_OK(tg_session_run(s));
        TG_CHECK_OK(tg_session_read(s, n->loss, &losses[step], sizeof(float)));
    }
}

/* Losses of 4 steps with the given kernel mode; checks the program's conv
 * steps: planned with oneDNN exactly when expected, their kernel scratch
 * the primitive's scratchpad, inside the device arena. */
static void train(tg_dnnl_mode mode, int threads, float *losses)
{
    tg_dnnl_force_mode(mode, true);
    net n;
    tg_graph *g = build_net(&n);
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", threads);
    tg_options_set_int(o, "randomSeed", 3);
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(g, o, &p));
    for (int ph = 0; p && ph < TG_PHASE_COUNT; ph++)
        for (int k = 0; k < p->devices[0].n_steps[ph]; k++) {
            const tg_step *st = &p->devices[0].steps[ph][k];
            const tg_tensor *t = g->nodes[st->node];
            if (!tg_op_planner_get(t->op))
                continue;
            const tg_kernel_plan *kp = &p->plans[st->node];
            TG_CHECK((kp->state != NULL) == (mode == TG_DNNL_ALWAYS));
            if (kp->state)
                TG_CHECK(st->kernel_scratch == kp->scratch);
            TG_CHECK(st->scratch_offset + st->scratch_bytes <= p->devices[0].arena_bytes);
        }
    tg_program_destroy(p);
    run_steps(s, &n, losses);
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_graph_destroy(g);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

static void test_training_matches_own_kernels(void)
{
    for (int t = 1; t <= 2; t++) {
        float own[4], dnnl[4];
        train(TG_DNNL_NEVER, t, own);
        train(TG_DNNL_ALWAYS, t, dnnl);
        for (int i = 0; i < 4; i++)
            TG_CHECK_NEAR(dnnl[i], own[i], 1e-4 * (1 + own[i]));
        TG_CHECK(own[3] < own[0]); /* it trains */
    }
}

/* Threads of this process, from /proc (-1 if unreadable). */
static int process_threads(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "Threads:", 8) == 0)
            n = atoi(line + 8);
    if (f)
        fclose(f);
    return n;
}

static void *no_work(void *arg)
{
    return arg;
}

/* A device of one thread runs oneDNN on that thread alone: OpenMP must not
 * start a team of one per core (2 devices x 1 thread on 2 cores would
 * oversubscribe). Nor does a device of two threads whose batch splits in
 * two: its own pool threads run the parts. Runs first, before any 2-thread
 * team exists. */
static void test_one_thread_device_starts_no_openmp_threads(void)
{
    /* One thread started and joined first: ThreadSanitizer starts its own
     * background thread at a process's first pthread_create, which under
     * OMP_NUM_THREADS=1 would otherwise be the device pool's, in the count. */
    pthread_t t;
    if (pthread_create(&t, NULL, no_work, NULL) == 0)
        pthread_join(t, NULL);
    int before = process_threads();
    float losses[4];
    train(TG_DNNL_ALWAYS, 1, losses);
    train(TG_DNNL_ALWAYS, 2, losses); /* batch 4: every conv in 2 parts */
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    int planned = 0;
    tg_check_opts o = {.planned = true, .n_planned = &planned};
    TG_CHECK(tg_check_kernels("one thread", build_conv, (void *)&cases[9], 1, 2e-4, o));
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
    TG_CHECK(planned == 3);
    int after = process_threads();
    TG_CHECK(before > 0);
    if (after != before)
        tg_test_fail(__FILE__, __LINE__, "%d threads before, %d after one-thread oneDNN runs",
                     before, after);
}

/* Stored in bf16 (--precision bf16.bf16), a oneDNN conv reads and writes
 * its operands as stored: its steps are not staged through f32, and it
 * still trains as the own kernels (staged) do, within bf16's rounding. A
 * plan for f16 operands (oneDNN's reorders here take f32 and bf16) leaves
 * them to the staging. At 2 threads the batch parts start at bf16 offsets. */
static void bf16_losses(tg_dnnl_mode mode, int threads, float *losses, int *native_steps,
                        int *conv_steps)
{
    tg_dnnl_force_mode(mode, true);
    net n;
    tg_graph *g = build_net(&n);
    tg_options *o = tg_options_create();
    tg_options_set(o, "precision", "bf16.bf16");
    tg_options_set_int(o, "threadsPerDevice", threads);
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(g, o, &p));
    *native_steps = *conv_steps = 0;
    for (int ph = 0; p && ph < TG_PHASE_COUNT; ph++)
        for (int k = 0; k < p->devices[0].n_steps[ph]; k++) {
            const tg_step *st = &p->devices[0].steps[ph][k];
            tg_op op = g->nodes[st->node]->op;
            if (op != TG_OP_CONV2D && op != TG_OP_CONV2D_BWD_DATA && op != TG_OP_CONV2D_BWD_WEIGHT)
                continue; /* the net's linear head is planned too (backend/cpu/matmul_dnnl.c) */
            (*conv_steps)++;
            if (p->plans[st->node].native_storage) {
                (*native_steps)++;
                TG_CHECK(!st->staged && st->scratch_bytes == st->kernel_scratch);
            }
        }
    tg_program_destroy(p);
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    run_steps(s, &n, losses);
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_graph_destroy(g);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

static void test_bf16_storage_is_read_natively(void)
{
    float own[4], dnnl[4];
    int native = 0, convs = 0;
    bf16_losses(TG_DNNL_NEVER, 1, own, &native, &convs);
    TG_CHECK(native == 0 && convs == 5);
    for (int t = 1; t <= 2; t++) {
        bf16_losses(TG_DNNL_ALWAYS, t, dnnl, &native, &convs);
        TG_CHECK(native == convs && convs == 5);
        for (int i = 0; i < 4; i++)
            TG_CHECK_NEAR(dnnl[i], own[i], 3e-2 * (1 + own[i]));
        TG_CHECK(dnnl[3] < dnnl[0]);
    }

    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(2, 16, 8, 8));
    tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape4(16, 16, 3, 3));
    tg_tensor *y = tg_conv2d(g, x, w, NULL, P(1, 1, 1, 1, 1, 1, 1));
    const tg_op_planner *pl = tg_op_planner_get(TG_OP_CONV2D);
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    tg_dtype kinds[3] = {TG_BF16, TG_F32, TG_F16};
    for (int k = 0; y && k < 3; k++) {
        tg_plan_opts po = {.n_threads = 1, .compute = TG_F32};
        po.in_storage[0] = po.in_storage[1] = po.out_storage = kinds[k];
        tg_kernel_plan kp = {0};
        TG_CHECK_OK(pl->plan(y, &po, &kp));
        TG_CHECK(kp.state != NULL && kp.native_storage == (kinds[k] != TG_F16));
        if (kp.state)
            pl->plan_free(kp.state);
    }
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
    tg_graph_destroy(g);
}

/* One run of node's oneDNN kernel with every operand stored as `t`
 * (in: f32 values, converted), the activations blocked or not, the result
 * widened to f32. */
static float *run_stored(const tg_tensor *node, tg_dtype t, int threads, bool blocked,
                         float *const in[2], tg_dtype compute, size_t *scratch_bytes, char *kernel)
{
    /* bf16 arithmetic: as an inference program plans (the stem in f32) */
    tg_plan_opts po = {.n_threads = threads, .compute = compute, .inference = compute == TG_BF16};
    po.in_storage[0] = po.in_storage[1] = po.out_storage = t;
    /* the activations (x, y and their gradients) in nChw16c: dy or x in
     * front, then the output unless it is the weight gradient */
    po.in_blocked[0] =
        blocked && node->in[0]->shape.dim[1] % TG_CHANNEL_BLOCK == 0; /* a stem's image: plain */
    po.in_blocked[1] = blocked && node->op == TG_OP_CONV2D_BWD_WEIGHT;
    po.out_blocked = blocked && node->op != TG_OP_CONV2D_BWD_WEIGHT;
    tg_kernel_plan kp = {0};
    const tg_op_planner *pl = tg_op_planner_get(node->op);
    TG_CHECK_OK(pl->plan(node, &po, &kp));
    if (scratch_bytes)
        *scratch_bytes = kp.scratch;
    if (kernel)
        memcpy(kernel, kp.kernel, sizeof kp.kernel);
    size_t es = tg_dtype_size(t);
    void *stored[2], *out = malloc((size_t)tg_numel(node) * es);
    memset(out, 0xff, (size_t)tg_numel(node) * es); /* NaN: an element left unwritten shows */
    for (int k = 0; k < 2; k++) {
        size_t n = (size_t)tg_numel(node->in[k]);
        stored[k] = malloc(n * es);
        tg_convert(in[k], TG_F32, stored[k], t, n);
    }
    void *scratch = kp.scratch ? malloc(kp.scratch) : NULL;
    tg_pool *pool = threads > 1 ? tg_pool_create(threads) : NULL;
    tg_kernel_args a = {.node = node,
                        .out = out,
                        .scratch = scratch,
                        .scratch_bytes = kp.scratch,
                        .pool = pool,
                        .plan = kp.state};
    a.in[0] = stored[0], a.in[1] = stored[1];
    if (kp.state)
        tg_conv_dnnl_run(kp.state, &a);
    float *wide = malloc((size_t)tg_numel(node) * sizeof(float));
    tg_convert(out, t, wide, TG_F32, (size_t)tg_numel(node));
    if (kp.state)
        pl->plan_free(kp.state);
    tg_pool_destroy(pool);
    free(scratch);
    free(out);
    free(stored[0]);
    free(stored[1]);
    return wide;
}

/* bf16 storage with f32 arithmetic (no AVX-512 BF16): the kernel converts
 * its operands itself rather than through oneDNN's bf16 reorders (its
 * generic ones there, 200x slower than its f32 reorders). The result must
 * be the f32-stored kernel's on the same values, rounded to bf16: bit for
 * bit, in the three directions, with all taps live and with a cropped
 * weight gradient (its dead taps zero), channels that are and are not a
 * multiple of 16, plain and nChw16c activations (the layout pass blocks
 * only multiples of 16), on 1 thread and on 2 (the batch in parts, the
 * shared weights reordered in slices). */
static void test_bf16_storage_converts_exactly(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    /* 8x8: all taps live; 2x2 at stride 2: cropped; 24 -> 40 channels */
    static const struct {
        int64_t hw, stride, c, k;
    } cs[3] = {{8, 1, 16, 32}, {2, 2, 16, 32}, {8, 1, 24, 40}};
    for (int c = 0; c < 3; c++) {
        tg_graph *g = tg_graph_create();
        tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(4, cs[c].c, cs[c].hw, cs[c].hw));
        tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape4(cs[c].k, cs[c].c, 3, 3));
        int64_t stride = cs[c].stride;
        tg_tensor *y = tg_conv2d(g, x, w, NULL, P(stride, stride, 1, 1, 1, 1, 1));
        TG_CHECK_OK(tg_graph_status(g));
        if (!y)
            break;
        tg_node_params p = y->p;
        tg_conv_set_extent_h(&p, cs[c].hw);
        tg_conv_set_extent_w(&p, cs[c].hw);
        tg_tensor *dx = tg_node_create(g, TG_OP_CONV2D_BWD_DATA, 2, (tg_tensor *[]){y, w}, &p);
        p = y->p;
        tg_conv_set_extent_h(&p, 3);
        tg_conv_set_extent_w(&p, 3);
        tg_tensor *dw = tg_node_create(g, TG_OP_CONV2D_BWD_WEIGHT, 2, (tg_tensor *[]){y, x}, &p);
        tg_tensor *nodes[3] = {y, dx, dw};
        for (int n = 0; n < 3 && dx && dw; n++)
            for (int v = 0; v < 4; v++) {
                int threads = 1 + v % 2;
                bool blocked = v >= 2;
                if (blocked && cs[c].c % TG_CHANNEL_BLOCK != 0)
                    continue;
                float *in[2];
                for (int k = 0; k < 2; k++) {
                    size_t len = (size_t)tg_numel(nodes[n]->in[k]);
                    in[k] = malloc(len * sizeof(float));
                    for (size_t i = 0; i < len; i++) /* bf16 values, as the storage holds */
                        in[k][i] = tg_bf16_widen(
                            tg_bf16_narrow((float)((i * 37 + 11 * k) % 97) / 48.0f - 1.0f));
                }
                float *f32 = run_stored(nodes[n], TG_F32, threads, blocked, in, TG_F32, NULL, NULL);
                float *bf16 =
                    run_stored(nodes[n], TG_BF16, threads, blocked, in, TG_F32, NULL, NULL);
                size_t len = (size_t)tg_numel(nodes[n]), bad = 0;
                for (size_t i = 0; i < len; i++)
                    bad += tg_bf16_narrow(f32[i]) != tg_bf16_narrow(bf16[i]);
                if (bad)
                    tg_test_fail(__FILE__, __LINE__, "%s, case %d, %d threads%s: %zu of %zu differ",
                                 tg_op_name(nodes[n]->op), c, threads, blocked ? ", nChw16c" : "",
                                 bad, len);
                free(f32);
                free(bf16);
                free(in[0]);
                free(in[1]);
            }
        tg_graph_destroy(g);
    }
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* x [xs] -> conv2d with w [ws] in g (NULL when the graph refuses it). */
static tg_tensor *conv_node(tg_graph *g, tg_shape xs, tg_shape ws, tg_conv2d_params p)
{
    tg_tensor *y =
        tg_conv2d(g, tg_input(g, "x", TG_F32, xs), tg_input(g, "w", TG_F32, ws), NULL, p);
    TG_CHECK_OK(tg_graph_status(g));
    return y;
}

/* y's kernel on bf16 arithmetic with bf16 storage against the f32-stored
 * result rounded, bit for bit (x and w bf16 values, x[nan_at] NaN and
 * x[inf_at] -inf, whose NaNs must reach the output); the bf16 plan's
 * scratch and kernel name in *scratch, kernel. */
static void bf16_matches_f32_rounded(const tg_tensor *y, int threads, bool blocked, size_t nan_at,
                                     size_t inf_at, size_t *scratch, char *kernel)
{
    float *in[2];
    for (int k = 0; k < 2; k++) {
        size_t n = (size_t)tg_numel(y->in[k]);
        in[k] = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++)
            in[k][i] =
                tg_bf16_widen(tg_bf16_narrow((float)((i * 37 + 11 * k) % 97) / 48.0f - 1.0f));
    }
    in[0][nan_at] = NAN, in[0][inf_at] = -INFINITY;
    float *f32 = run_stored(y, TG_F32, threads, blocked, in, TG_BF16, NULL, NULL);
    float *bf16 = run_stored(y, TG_BF16, threads, blocked, in, TG_BF16, scratch, kernel);
    size_t len = (size_t)tg_numel(y), bad = 0, nan = 0;
    for (size_t i = 0; i < len; i++) {
        nan += isnan(bf16[i]);
        bad += isnan(f32[i]) ? !isnan(bf16[i]) : tg_bf16_narrow(f32[i]) != tg_bf16_narrow(bf16[i]);
    }
    char w[64];
    if (bad || nan == 0)
        tg_test_fail(__FILE__, __LINE__, "w %s, %d threads%s: %zu of %zu differ, %zu NaN",
                     tg_shape_str(y->in[1]->shape, w, sizeof w), threads,
                     blocked ? ", nChw16c" : "", bad, len, nan);
    free(f32), free(bf16), free(in[0]), free(in[1]);
}

/* A bf16-stored output: with bf16 arithmetic oneDNN's kernel writes it
 * itself (blocked, on one thread: no f32 copy of it in the scratch,
 * converted after); the inference stem computes in f32
 * (test_inference_stem_computes_f32), whose kernel writes no bf16, so its
 * result is converted, one sample a part, each thread's parts in one
 * scratch region (a sample's f32 copy per thread, not the batch's). Both
 * give the bits of the f32-stored result rounded, the output plain and
 * blocked (the stem's image plain), on 1 and 2 threads. */
static void test_bf16_output_without_a_batch_copy(void)
{
    if (strncmp(tg_dnnl_isa_name(), "avx512_core", 11) != 0)
        return; /* no bf16 kernels: every convolution in f32, converted */
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    for (int stem = 0; stem <= 1; stem++) {
        tg_graph *g = tg_graph_create();
        tg_tensor *y = stem ? conv_node(g, tg_shape4(8, 3, 32, 32), tg_shape4(16, 3, 3, 3),
                                        P(2, 2, 1, 1, 1, 1, 1))
                            : conv_node(g, tg_shape4(2, 32, 32, 32), tg_shape4(32, 32, 1, 1),
                                        P(1, 1, 0, 0, 1, 1, 1));
        size_t copy = y ? (size_t)tg_numel(y) * sizeof(float) : 0;
        for (int v = 0; y && v < 4; v++) {
            int threads = 1 + v % 2;
            size_t scratch = 0;
            char kernel[sizeof((tg_kernel_plan *)0)->kernel];
            bf16_matches_f32_rounded(y, threads, v >= 2, stem ? 40 : 5, stem ? 3000 : 7, &scratch,
                                     kernel);
            bool ok = stem ? strstr(kernel, "batch in 8 parts") && !strstr(kernel, "(bf16)") &&
                                 scratch <= copy / 8 * (size_t)threads + (64u << 10)
                           : threads > 1 || v < 2 || scratch < copy;
            if (!ok)
                tg_test_fail(__FILE__, __LINE__,
                             "%s, %d threads%s: '%s', %zu bytes of scratch, the output's f32 "
                             "copy %zu",
                             stem ? "stem" : "1x1", threads, v >= 2 ? ", nChw16c" : "", kernel,
                             scratch, copy);
        }
        tg_graph_destroy(g);
    }
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

/* The fast-path graph: x -> conv 1x1 (so that c1 reads a blocked input, as
 * in a network) -> c1 = conv 3x3 + bias + ReLU (fused) -> conv 3x3 -> y, on
 * odd 9x9 maps (a partial Winograd tile), batch 2. */
typedef struct fast_graph {
    tg_graph *g;
    tg_tensor *x, *w0, *w1, *b1, *w2, *c1, *y;
} fast_graph;

static fast_graph fast_graph_make(int stride)
{
    fast_graph f = {0};
    f.g = tg_graph_create();
    tg_graph_set_training(f.g, false);
    f.x = tg_input(f.g, "x", TG_F32, tg_shape4(2, 32, 9, 9));
    f.w1 = weight(f.g, "w1", 64, 32, 3);
    f.b1 = tg_param(f.g, "b1", tg_shape1(64), (tg_init){TG_INIT_FAN_IN_UNIFORM, 4, 0});
    f.w2 = weight(f.g, "w2", 32, 64, 3);
    f.w0 = weight(f.g, "w0", 32, 32, 1);
    tg_tensor *x0 = tg_conv2d(f.g, f.x, f.w0, NULL, P(1, 1, 0, 0, 1, 1, 1));
    f.c1 = tg_conv2d(f.g, x0, f.w1, f.b1, P(stride, stride, 1, 1, 1, 1, 1));
    f.y = tg_conv2d(f.g, tg_relu(f.g, f.c1), f.w2, NULL, P(1, 1, 1, 1, 1, 1, 1));
    tg_tensor_mark_output(f.y);
    TG_CHECK_OK(tg_graph_status(f.g));
    return f;
}

#define FAST_X (2 * 32 * 9 * 9)

static void fast_x(float *xs)
{
    for (int i = 0; i < FAST_X; i++)
        xs[i] = (float)((i * 37) % 29) / 14.0f - 1.0f;
}

/* The inference fast paths of 3x3 convolutions on the fast-path graph, at
 * 1 and 2 threads (the batch in parts): at stride 1 oneDNN's Winograd
 * kernel first (tg_process_winograd, on by default; add_winograd), at
 * stride 2 its brgemm kernel on nhwc with the reorders from and back to
 * nChw16c (brgemm_fits). Where oneDNN has them (AVX-512) they run, and the
 * checker finds every value within tolerance of the double reference; a
 * NaN in x passes through the fused ReLU into y, and the other sample is
 * what it was without it. Winograd off, the same program runs the direct
 * kernel only. */
static void fast_path_run(int threads, int stride, bool wino)
{
    tg_process_set_winograd(wino);
    fast_graph f = fast_graph_make(stride);
    tg_session *s = open_threads(f.g, threads, 5);
    const tg_kernel_plan *kp = s ? tg_session_program(s)->plans : NULL;
    bool avx512 = strncmp(tg_dnnl_isa_name(), "avx512_core", 11) == 0;
    const char *k1 = kp ? kp[f.c1->id].kernel : "", *k2 = kp ? kp[f.y->id].kernel : "";
    bool want_wino = avx512 && wino && stride == 1;
    if (kp && avx512 &&
        (want_wino
             ? !strstr(k1, "wino") || !strstr(k1, "ReLU (max, ELU on NaN)") || !strstr(k2, "wino")
         : stride == 2 ? !strstr(k1, "brgconv") || !strstr(k1, "ReLU (max, ELU on NaN)")
                       : strstr(k1, "wino") != NULL))
        tg_test_fail(__FILE__, __LINE__, "%d threads, stride %d, Winograd %s: kernels '%s', '%s'",
                     threads, stride, wino ? "on" : "off", k1, k2);
    float xs[FAST_X];
    fast_x(xs);
    if (s)
        TG_CHECK_OK(tg_session_verify_next_run(s));
    TG_CHECK_OK(tg_session_write(s, f.x, xs, sizeof xs));
    TG_CHECK_OK(tg_session_run(s));
    expect_verified(s, threads);
    int per = (int)tg_numel(f.y) / 2;
    static float finite[FAST_X], ys[FAST_X];
    TG_CHECK_OK(tg_session_read(s, f.y, finite, (size_t)tg_numel(f.y) * sizeof(float)));
    xs[32 * 81 + 5 * 81 + 40] = NAN; /* sample 1, channel 5, the centre */
    TG_CHECK_OK(tg_session_write(s, f.x, xs, sizeof xs));
    TG_CHECK_OK(tg_session_run(s));
    TG_CHECK_OK(tg_session_read(s, f.y, ys, (size_t)tg_numel(f.y) * sizeof(float)));
    int nan0 = 0, nan1 = 0;
    for (int i = 0; i < per; i++)
        nan0 += isnan(ys[i]), nan1 += isnan(ys[per + i]);
    /* sample 0, rerun where sample 1's NaN met the max or (Winograd) the
     * scan found it (one thread: one primitive over both), is what it was
     * without the NaN, to the direct kernel's rounding */
    if (nan0 == 0)
        expect_close(finite, ys, per);
    if (nan0 != 0 || nan1 < 32 * 9)
        tg_test_fail(__FILE__, __LINE__,
                     "%d threads, stride %d: %d NaN outputs in sample 0, %d in sample 1 "
                     "(expected 0 and all 32 channels' 3x3 around the NaN's at least)",
                     threads, stride, nan0, nan1);
    tg_session_destroy(s);
    tg_graph_destroy(f.g);
    tg_process_set_winograd(-1);
}

static void test_fast_paths_match_reference(void)
{
    for (int threads = 1; threads <= 2; threads++) {
        fast_path_run(threads, 1, true);
        fast_path_run(threads, 2, false);
    }
    fast_path_run(1, 1, false);
}

/* One case of test_winograd_falls_back_exactly: y of the fast-path graph
 * (stride 1) with Winograd on or off, on `threads`, x and the weights as
 * the case makes them. */
static void nonfinite_case_run(int c, int threads, bool wino, float *y)
{
    tg_process_set_winograd(wino);
    fast_graph f = fast_graph_make(1);
    tg_session *s = open_threads(f.g, threads, 7);
    static float xs[FAST_X], w1[64 * 32 * 9], w0[32 * 32];
    fast_x(xs);
    TG_CHECK_OK(tg_session_read(s, f.w1, w1, sizeof w1));
    for (int n = 0; n < 2 && c < 3; n++) /* every sample: every part falls back */
        xs[n * 32 * 81 + 5 * 81 + 40 + n] = c == 0 ? NAN : c == 1 ? INFINITY : -INFINITY;
    if (c == 3) { /* overflow: x0 = x up to 1e37 (w0 the identity), weights up to
                   * ~6: sums past FLT_MAX from finite operands */
        for (int i = 0; i < FAST_X; i++)
            xs[i] *= 1e37f;
        for (int i = 0; i < 32 * 32; i++)
            w0[i] = i % 33 == 0 ? 1.0f : 0.0f;
        for (int i = 0; i < 64 * 32 * 9; i++)
            w1[i] *= 100.0f;
        TG_CHECK_OK(tg_session_write(s, f.w0, w0, sizeof w0));
    }
    TG_CHECK_OK(tg_session_write(s, f.w1, w1, sizeof w1));
    TG_CHECK_OK(tg_session_write(s, f.x, xs, sizeof xs));
    TG_CHECK_OK(tg_session_run(s));
    TG_CHECK_OK(tg_session_read(s, f.y, y, (size_t)tg_numel(f.y) * sizeof(float)));
    tg_session_destroy(s);
    tg_graph_destroy(f.g);
    tg_process_set_winograd(-1);
}

/* A NaN weight, a corner tap, of a lone 3x3 convolution without ReLU (no
 * max to raise the invalid flag; NaN arithmetic raises none): the direct
 * kernel skips the tap on the padding, the Winograd one spreads it over
 * the output channel. y with Winograd on or off, on `threads`. */
static void nan_weight_run(int threads, bool wino, float *y)
{
    tg_process_set_winograd(wino);
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, false);
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(2, 32, 9, 9));
    tg_tensor *w = weight(g, "w", 32, 32, 3);
    tg_tensor *out = tg_conv2d(g, x, w, NULL, P(1, 1, 1, 1, 1, 1, 1));
    tg_tensor_mark_output(out);
    tg_session *s = open_threads(g, threads, 7);
    static float xs[FAST_X], ws[32 * 32 * 9];
    fast_x(xs);
    TG_CHECK_OK(tg_session_read(s, w, ws, sizeof ws));
    ws[7 * 32 * 9 + 3 * 9] = NAN;
    TG_CHECK_OK(tg_session_write(s, w, ws, sizeof ws));
    TG_CHECK_OK(tg_session_write(s, x, xs, sizeof xs));
    TG_CHECK_OK(tg_session_run(s));
    TG_CHECK_OK(tg_session_read(s, out, y, sizeof xs));
    tg_session_destroy(s);
    tg_graph_destroy(g);
    tg_process_set_winograd(-1);
}

static void nan_weight_case(int c, int threads, bool wino, float *y)
{
    (void)c;
    nan_weight_run(threads, wino, y);
}

/* With Winograd on (the default), a NaN, +inf or -inf in every sample's
 * input, an input whose Winograd transforms overflow where the direct
 * sums do not, and a NaN weight give y bit for bit as the direct kernel
 * (Winograd off) gives it: conv_dnnl_run.c's run_checked falls back on the
 * scan, on the overflow and invalid flags, and the weights' finite word. */
static void test_winograd_falls_back_exactly(void)
{
    if (strncmp(tg_dnnl_isa_name(), "avx512_core", 11) != 0)
        return; /* no Winograd kernel */
    static const char *what[] = {"NaN", "+inf", "-inf", "overflow", "NaN weight"};
    static float on[FAST_X], off[FAST_X];
    for (int c = 0; c < 5; c++)
        for (int threads = 1; threads <= 2; threads++) {
            void (*run)(int, int, bool, float *) = c < 4 ? nonfinite_case_run : nan_weight_case;
            run(c, threads, true, on);
            run(c, threads, false, off);
            int diff = 0, special = 0;
            for (int i = 0; i < FAST_X; i++) {
                diff += memcmp(&on[i], &off[i], sizeof(float)) != 0;
                special += !isfinite(off[i]);
            }
            if (diff || special == 0)
                tg_test_fail(__FILE__, __LINE__,
                             "%s, %d threads: %d of %d outputs differ from the direct kernel's "
                             "(%d not finite there)",
                             what[c], threads, diff, FAST_X, special);
        }
}

int main(void)
{
    TG_RUN(test_one_thread_device_starts_no_openmp_threads);
    TG_RUN(test_small_maps_weight_gradient_is_a_matmul);
    TG_RUN(test_dnnl_kernels_match_reference);
    TG_RUN(test_inference_stem_computes_f32);
    TG_RUN(test_bf16_kernels_match_reference);
    TG_RUN(test_dead_taps_are_cropped);
    TG_RUN(test_own_kernels_when_forced);
    TG_RUN(test_choice_and_kernel_name);
    TG_RUN(test_two_threads_split_the_batch);
    TG_RUN(test_one_sample_plans);
    TG_RUN(test_one_sample_two_threads_match_one);
    TG_RUN(test_channel_parts_match_one_thread);
    TG_RUN(test_fast_paths_match_reference);
    TG_RUN(test_winograd_falls_back_exactly);
    TG_RUN(test_training_matches_own_kernels);
    TG_RUN(test_bf16_storage_is_read_natively);
    TG_RUN(test_bf16_storage_converts_exactly);
    TG_RUN(test_bf16_output_without_a_batch_copy);
    return tg_test_finish();
}
