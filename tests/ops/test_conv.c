/* tests/ops/test_conv.c - CONV2D and its two gradient ops: finite-difference
 * gradients for stride, padding, dilation, groups, odd sizes and bias; each
 * fast method (im2col + sgemm, direct SIMD at every instruction-set level)
 * against the double reference at 1 and 2 threads, including the tutorial
 * network's exact shapes; hand-computed values; shape errors; asymmetric
 * padding (tg_conv2d_ex) against PyTorch; the transposed convolution
 * (tg_conv_transpose2d) against PyTorch, by finite differences and each
 * fast method against the reference.
 * TG_TEST_LABELS: threads quick isa */
#include "backend/backend.h"
#include "tg_conv_case.h"
#include "tg_test.h"

#include "ops/conv.h"
#include "backend/cpu/simd.h"
#include "runtime/interp.h"

#include <stdlib.h>
#include <string.h>

static const conv_case small_cases[] = {
    {2, 3, 6, 5, 4, 3, 3, P(1, 1, 0, 0, 1, 1, 1), true, true},  /* plain */
    {2, 2, 7, 6, 3, 3, 3, P(2, 2, 1, 1, 1, 1, 1), false, true}, /* stride 2, pad 1, odd */
    {1, 2, 7, 7, 2, 3, 3, P(1, 1, 2, 2, 2, 2, 1), true, true},  /* dilation 2 */
    {2, 4, 5, 6, 6, 2, 3, P(2, 1, 1, 0, 1, 1, 2), true, true},  /* groups 2, mixed strides */
    {2, 3, 4, 4, 3, 3, 3, P(1, 1, 1, 1, 1, 1, 3), false, true}, /* depthwise */
    {2, 3, 4, 5, 2, 1, 1, P(1, 1, 0, 0, 1, 1, 1), true, true},  /* 1x1 */
    {1, 1, 6, 6, 2, 5, 5, P(1, 1, 0, 0, 1, 1, 1), true, false}, /* one channel, 5x5 */
    {1, 2, 5, 4, 2, 2, 3, P(3, 2, 2, 1, 2, 1, 1), true, true},  /* stride > kernel */
};
#define N_SMALL (sizeof small_cases / sizeof *small_cases)

static void test_conv_gradcheck(void)
{
    for (size_t i = 0; i < N_SMALL; i++) {
        char label[64];
        snprintf(label, sizeof label, "conv case %zu", i);
        TG_CHECK(tg_gradcheck(label, build_conv, (void *)&small_cases[i], (tg_check_opts){0}));
    }
}

/* The gradient ops' own gradient rules (second derivatives of a conv). */
typedef struct bwd_case {
    conv_case c;
    bool weight; /* CONV2D_BWD_WEIGHT, else CONV2D_BWD_DATA */
} bwd_case;

static tg_tensor *build_bwd(tg_graph *g, void *ctx)
{
    const bwd_case *b = ctx;
    const conv_case *c = &b->c;
    int64_t OH = (c->H + 2 * c->p.pad_h - c->p.dilation_h * (c->R - 1) - 1) / c->p.stride_h + 1;
    int64_t OW = (c->W + 2 * c->p.pad_w - c->p.dilation_w * (c->S - 1) - 1) / c->p.stride_w + 1;
    tg_tensor *dy = tg_param(g, "dy", tg_shape4(c->N, c->K, OH, OW), U11);
    tg_node_params p = {0};
    tg_conv_params_put(&p, &c->p);
    if (b->weight) {
        tg_tensor *x = tg_param(g, "x", tg_shape4(c->N, c->C, c->H, c->W), U11);
        tg_conv_set_extent_h(&p, c->R), tg_conv_set_extent_w(&p, c->S);
        return tg_node_create(g, TG_OP_CONV2D_BWD_WEIGHT, 2, (tg_tensor *[]){dy, x}, &p);
    }
    tg_tensor *w = tg_param(g, "w", tg_shape4(c->K, c->C / c->p.groups, c->R, c->S), U11);
    tg_conv_set_extent_h(&p, c->H), tg_conv_set_extent_w(&p, c->W);
    return tg_node_create(g, TG_OP_CONV2D_BWD_DATA, 2, (tg_tensor *[]){dy, w}, &p);
}

static void test_gradient_ops_gradcheck(void)
{
    for (size_t i = 0; i < N_SMALL; i++)
        for (int wgt = 0; wgt < 2; wgt++) {
            bwd_case b = {small_cases[i], wgt != 0};
            char label[64];
            snprintf(label, sizeof label, "conv case %zu %s", i, wgt ? "bwd_weight" : "bwd_data");
            TG_CHECK(tg_gradcheck(label, build_bwd, &b, (tg_check_opts){0}));
            TG_CHECK(tg_check_kernels(label, build_bwd, &b, 2, 1e-4, (tg_check_opts){0}));
        }
}

/* Each method (and, with all_levels, each instruction-set level of the
 * direct kernels) at 1 and 2 threads. */
static void check_methods(const char *what, const conv_case *c, bool all_levels)
{
    static const tg_conv_method methods[] = {TG_CONV_AUTO, TG_CONV_GEMM, TG_CONV_DIRECT};
    static const tg_simd_level levels[] = {TG_SIMD_AVX512, TG_SIMD_AVX2, TG_SIMD_BASE};
    for (int m = all_levels ? 0 : 1; m < 3; m++)
        for (int l = 0; l < 3; l++) {
            if ((methods[m] != TG_CONV_DIRECT || !all_levels) && l > 0)
                continue; /* only the direct kernels depend on the level */
            tg_conv_force_method(methods[m]);
            tg_simd_cap(levels[l]);
            for (int t = 1; t <= 2; t++) {
                char label[128];
                snprintf(label, sizeof label, "%s method %d level %s", what, m,
                         tg_simd_level_name(levels[l]));
                TG_CHECK(
                    tg_check_kernels(label, build_conv, (void *)c, t, 2e-4, (tg_check_opts){0}));
            }
        }
    tg_conv_force_method(TG_CONV_AUTO);
    tg_simd_cap(TG_SIMD_AVX512);
}

static void test_conv_kernels_small(void)
{
    for (size_t i = 0; i < N_SMALL; i++) {
        char label[64];
        snprintf(label, sizeof label, "conv case %zu", i);
        check_methods(label, &small_cases[i], true);
    }
}

static void test_conv_kernels_random(void)
{
    /* sizes chosen to hit vector tails, block remainders and thread splits */
    static const conv_case cases[] = {
        {3, 5, 11, 13, 7, 3, 3, P(1, 1, 1, 1, 1, 1, 1), true, true},
        {5, 3, 9, 17, 26, 3, 2, P(1, 1, 0, 1, 1, 1, 1), true, true},
        {2, 13, 8, 8, 5, 5, 5, P(1, 1, 2, 2, 1, 1, 1), false, true},
        {4, 6, 10, 9, 8, 3, 3, P(2, 2, 1, 1, 1, 1, 2), true, true},
        {3, 4, 12, 12, 9, 3, 3, P(1, 1, 3, 3, 3, 3, 1), true, true},
        {1, 8, 6, 6, 8, 1, 1, P(1, 1, 0, 0, 1, 1, 1), true, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char label[64];
        snprintf(label, sizeof label, "random conv %zu", i);
        check_methods(label, &cases[i], true);
    }
}

/* The tutorial network's convolutions at batch 40 and a ResNet-like layer,
 * each with every method forced; and which method the heuristic picks
 * (128 channels and strides go to im2col + sgemm). */
static void test_conv_kernels_model_shapes(void)
{
    static const conv_case tutorial1 = {40,   1,    28, 28, 10, 5, 5, P(1, 1, 0, 0, 1, 1, 1),
                                        true, false};
    static const conv_case tutorial2 = {40,   10,  12, 12, 20, 5, 5, P(1, 1, 0, 0, 1, 1, 1),
                                        true, true};
    static const conv_case resnet = {2, 64, 8, 8, 64, 3, 3, P(1, 1, 1, 1, 1, 1, 1), false, true};
    /* large: the best level only (the levels are covered on the cases above) */
    check_methods("tutorial conv1", &tutorial1, false);
    check_methods("tutorial conv2", &tutorial2, false);
    check_methods("resnet 64x64", &resnet, false);
    tg_conv_geom g1 = {40, 1, 28, 28, 10, 5, 5, 24, 24, 1, 1, 0, 0, 1, 1, 1};
    tg_conv_geom gr = {2, 64, 8, 8, 64, 3, 3, 8, 8, 1, 1, 1, 1, 1, 1, 1};
    TG_CHECK(tg_conv_method_for(TG_OP_CONV2D, &g1) == TG_CONV_DIRECT);
    TG_CHECK(tg_conv_method_for(TG_OP_CONV2D_BWD_WEIGHT, &g1) == TG_CONV_DIRECT);
    tg_conv_geom g2 = {40, 10, 12, 12, 20, 5, 5, 8, 8, 1, 1, 0, 0, 1, 1, 1};
    TG_CHECK(tg_conv_method_for(TG_OP_CONV2D, &g2) == TG_CONV_DIRECT);
    TG_CHECK(tg_conv_method_for(TG_OP_CONV2D_BWD_DATA, &g2) == TG_CONV_DIRECT);
    TG_CHECK(tg_conv_method_for(TG_OP_CONV2D_BWD_WEIGHT, &g2) == TG_CONV_DIRECT);
    TG_CHECK(tg_conv_method_for(TG_OP_CONV2D_BWD_DATA, &gr) == TG_CONV_DIRECT);
    TG_CHECK(tg_conv_method_for(TG_OP_CONV2D_BWD_WEIGHT, &gr) == TG_CONV_DIRECT);
    tg_conv_geom g128 = {2, 128, 8, 8, 128, 3, 3, 8, 8, 1, 1, 1, 1, 1, 1, 1};
    TG_CHECK(tg_conv_method_for(TG_OP_CONV2D, &g128) == TG_CONV_GEMM);
    TG_CHECK(tg_conv_method_for(TG_OP_CONV2D_BWD_WEIGHT, &g128) == TG_CONV_GEMM);
    TG_CHECK(tg_conv_method_for(TG_OP_CONV2D_BWD_DATA, &g128) == TG_CONV_GEMM);
    tg_conv_geom s2 = {2, 4, 8, 8, 4, 3, 3, 4, 4, 2, 2, 1, 1, 1, 1, 1};
    TG_CHECK(tg_conv_method_for(TG_OP_CONV2D, &s2) == TG_CONV_GEMM);
    tg_conv_geom pw = {2, 16, 8, 8, 16, 1, 1, 8, 8, 1, 1, 0, 0, 1, 1, 1};
    TG_CHECK(tg_conv_method_for(TG_OP_CONV2D, &pw) == TG_CONV_GEMM);
}

/* x = 1..16 as 4x4, w = [[1, 0], [0, -1]]: y[i][j] = x[i][j] - x[i+1][j+1] = -5
 * everywhere; with stride 2 and bias 0.5: -4.5 at 2x2 positions. */
static void test_conv_values(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(1, 1, 4, 4));
    tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape4(1, 1, 2, 2));
    tg_tensor *b = tg_input(g, "b", TG_F32, tg_shape1(1));
    tg_tensor *y1 = tg_conv2d(g, x, w, NULL, P(1, 1, 0, 0, 1, 1, 1));
    tg_tensor *y2 = tg_conv2d(g, x, w, b, P(2, 2, 0, 0, 1, 1, 1));
    tg_tensor *y3 = tg_conv2d(g, x, w, NULL, P(1, 1, 1, 1, 1, 1, 1)); /* padded: 5x5 */
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(y1 && tg_shape_equal(y1->shape, tg_shape4(1, 1, 3, 3)));
    TG_CHECK(y2 && tg_shape_equal(y2->shape, tg_shape4(1, 1, 2, 2)));
    TG_CHECK(y3 && tg_shape_equal(y3->shape, tg_shape4(1, 1, 5, 5)));
    if (tg_graph_status(g) != TG_OK) {
        tg_graph_destroy(g);
        return;
    }
    float X[16], W[4] = {1, 0, 0, -1}, B[1] = {0.5f}, Y1[9], Y2[4], Y3[25];
    for (int i = 0; i < 16; i++)
        X[i] = (float)(i + 1);
    const tg_kernel_def *def = tg_backend_cpu.kernel(TG_OP_CONV2D);
    for (int m = TG_CONV_GEMM; m <= TG_CONV_DIRECT; m++) {
        tg_conv_force_method((tg_conv_method)m);
        tg_tensor *ys[3] = {y1, y2, y3};
        float *outs[3] = {Y1, Y2, Y3};
        for (int k = 0; k < 3; k++) {
            size_t sb = def->scratch(ys[k], 1);
            void *scratch = malloc(sb);
            tg_kernel_args a = {.node = ys[k],
                                .in = {X, W, B},
                                .out = outs[k],
                                .scratch = scratch,
                                .scratch_bytes = sb};
            def->forward(&a);
            free(scratch);
        }
        for (int i = 0; i < 9; i++)
            TG_CHECK_NEAR(Y1[i], -5.0, 1e-6);
        for (int i = 0; i < 4; i++)
            TG_CHECK_NEAR(Y2[i], -4.5, 1e-6);
        /* padded corner (0,0) sees only x[0][0] under the -1 tap; (4,4) only x[3][3] under 1 */
        TG_CHECK_NEAR(Y3[0], -1.0, 1e-6);
        TG_CHECK_NEAR(Y3[24], 16.0, 1e-6);
        TG_CHECK_NEAR(Y3[6], -5.0, 1e-6);
    }
    tg_conv_force_method(TG_CONV_AUTO);
    tg_graph_destroy(g);
}

static const char *build_error(tg_shape xs, tg_shape ws, int64_t bias_len, tg_conv2d_params p)
{
    static char msg[1024];
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, xs);
    tg_tensor *w = tg_param(g, "w", ws, U11);
    tg_tensor *b = bias_len ? tg_param(g, "b", tg_shape1(bias_len), U11) : NULL;
    tg_scope_push(g, "layer1");
    tg_tensor *y = tg_conv2d(g, x, w, b, p);
    TG_CHECK(y == NULL);
    TG_CHECK(tg_graph_status(g) != TG_OK);
    snprintf(msg, sizeof msg, "%s", tg_graph_error(g));
    tg_graph_destroy(g);
    return msg;
}

static void expect_in(const char *msg, const char *a, const char *b)
{
    TG_CHECK(strstr(msg, a) != NULL);
    TG_CHECK(strstr(msg, b) != NULL);
    if (!strstr(msg, a) || !strstr(msg, b))
        fprintf(stderr, "    message was: %s\n", msg);
}

static void test_shape_errors(void)
{
    const char *m;
    m = build_error(tg_shape4(2, 3, 8, 8), tg_shape4(4, 2, 3, 3), 0, P(1, 1, 0, 0, 1, 1, 1));
    expect_in(m, "layer1/conv2d", "[2, 3, 8, 8]");
    expect_in(m, "[4, 2, 3, 3]", "3 channels");
    m = build_error(tg_shape4(2, 3, 4, 4), tg_shape4(4, 3, 5, 5), 0, P(1, 1, 0, 0, 1, 1, 1));
    expect_in(m, "conv2d", "does not fit");
    m = build_error(tg_shape4(2, 4, 8, 8), tg_shape4(3, 2, 3, 3), 0, P(1, 1, 0, 0, 1, 1, 2));
    expect_in(m, "conv2d", "divisible by groups");
    m = build_error(tg_shape4(2, 3, 8, 8), tg_shape4(4, 3, 3, 3), 5, P(1, 1, 0, 0, 1, 1, 1));
    expect_in(m, "conv2d", "bias [5]");
    m = build_error(tg_shape3(3, 8, 8), tg_shape4(4, 3, 3, 3), 0, P(1, 1, 0, 0, 1, 1, 1));
    expect_in(m, "conv2d", "[3, 8, 8] must be 4-D");
    m = build_error(tg_shape4(2, 3, 8, 8), tg_shape4(4, 3, 3, 3), 0, P(0, 1, 0, 0, 1, 1, 1));
    expect_in(m, "conv2d", "stride_h is 0");
}

/* ---- asymmetric padding ---------------------------------------------------------------- */

typedef struct {
    conv_case c;
    int pad_bottom, pad_right; /* c.p.pad_h / pad_w are the top / left padding */
} ex_case;

static tg_tensor *build_conv_ex(tg_graph *g, void *ctx)
{
    const ex_case *e = ctx;
    const conv_case *c = &e->c;
    tg_tensor *x = tg_param(g, "x", tg_shape4(c->N, c->C, c->H, c->W), U11);
    tg_tensor *w = tg_param(g, "w", tg_shape4(c->K, c->C / c->p.groups, c->R, c->S), U11);
    tg_tensor *b = c->bias ? tg_param(g, "b", tg_shape1(c->K), U11) : NULL;
    return tg_conv2d_ex(g, x, w, b, c->p, e->pad_bottom, e->pad_right);
}

static void test_conv_ex(void)
{
    const ex_case cases[] = {
        {{2, 3, 6, 5, 4, 3, 3, P(2, 2, 0, 0, 1, 1, 1), true, true}, 1, 1}, /* SAME_UPPER */
        {{2, 3, 6, 5, 4, 3, 3, P(2, 2, 1, 1, 1, 1, 1), true, true}, 0, 0}, /* SAME_LOWER */
        {{1, 4, 7, 6, 4, 3, 2, P(1, 2, 2, 0, 2, 1, 2), false, true}, 1, 3},
        {{8, 16, 14, 14, 16, 3, 3, P(2, 2, 0, 1, 1, 1, 1), true, true}, 1, 0}, /* pool path */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char label[64];
        snprintf(label, sizeof label, "asymmetric conv case %zu", i);
        tg_gradcheck(label, build_conv_ex, (void *)&cases[i], (tg_check_opts){.max_elems = 24});
        for (int threads = 1; threads <= 2; threads++)
            tg_check_kernels(label, build_conv_ex, (void *)&cases[i], threads, 1e-4,
                             (tg_check_opts){0});
    }
}

/* F.conv2d(F.pad(x, (0, 2, 1, 0)), w, b, stride=(2, 1)) from PyTorch 1.13
 * (float64), x [1, 2, 4, 5] = ((5k mod 13) - 6) / 4, w [3, 2, 2, 3] = ((7k
 * mod 11) - 5) / 5; and equal sides build one plain conv node. */
static void test_conv_ex_values(void)
{
    const double want[30] = {-0.95, -0.95, 1.65,  0.45,  0.3,  0.25,  0.3,  1.0,   1.7,  -1.3,
                             0.75,  -1.7,  -1.55, -0.85, -0.8, 0.95,  -3.1, -1.95, 0.25, -0.8,
                             -0.3,  1.95,  -0.35, -0.5,  0.85, -2.75, 0.65, -0.5,  -1.2, 2.45};
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(1, 2, 4, 5));
    tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape4(3, 2, 2, 3));
    tg_tensor *b = tg_input(g, "b", TG_F32, tg_shape1(3));
    tg_tensor *y = tg_conv2d_ex(g, x, w, b, P(2, 1, 1, 0, 1, 1, 1), 0, 2);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(y && tg_shape_equal(y->shape, tg_shape4(1, 3, 2, 5)));
    tg_interp *ip = NULL;
    TG_CHECK_OK(tg_interp_create(g, 1, &ip));
    for (int k = 0; k < 40; k++)
        tg_interp_data(ip, x)[k] = ((5 * k) % 13 - 6) / 4.0;
    for (int k = 0; k < 36; k++)
        tg_interp_data(ip, w)[k] = ((7 * k) % 11 - 5) / 5.0;
    const double bv[3] = {0.5, -1.0, 0.25};
    memcpy(tg_interp_data(ip, b), bv, sizeof bv);
    TG_CHECK_OK(tg_interp_run(ip, 0));
    for (int k = 0; k < 30 && y; k++)
        TG_CHECK_NEAR(tg_interp_data(ip, y)[k], want[k], 1e-12);
    tg_interp_destroy(ip);
    int before = tg_graph_tensor_count(g);
    tg_tensor *sym = tg_conv2d_ex(g, x, w, b, P(1, 1, 1, 2, 1, 1, 1), 1, 2);
    TG_CHECK(sym && sym->op == TG_OP_CONV2D && sym->in[0] == x);
    TG_CHECK(tg_graph_tensor_count(g) == before + 1);
    TG_CHECK(tg_conv2d_ex(g, x, w, b, P(1, 1, 1, 0, 1, 1, 1), -1, 0) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "conv2d: padding top 1, left 0, bottom -1, right 0: none "
                                       "may be negative") != NULL);
    tg_graph_destroy(g);
}

/* ---- transposed convolution (tg_conv_transpose2d) ---------------------------------- */

typedef struct tconv_case {
    int64_t N, Cin, H, W, Cout, R, S;
    tg_conv2d_params p;
    int op_h, op_w; /* output padding */
    bool bias;
} tconv_case;

static tg_tensor *build_tconv(tg_graph *g, void *ctx)
{
    const tconv_case *c = ctx;
    tg_tensor *x = tg_param(g, "x", tg_shape4(c->N, c->Cin, c->H, c->W), U11);
    tg_tensor *w = tg_param(g, "w", tg_shape4(c->Cin, c->Cout / c->p.groups, c->R, c->S), U11);
    tg_tensor *b = c->bias ? tg_param(g, "b", tg_shape1(c->Cout), U11) : NULL;
    return tg_conv_transpose2d(g, x, w, b, c->p, c->op_h, c->op_w);
}

static const tconv_case tconv_cases[] = {
    {2, 3, 4, 5, 2, 3, 3, P(1, 1, 0, 0, 1, 1, 1), 0, 0, true},  /* plain */
    {2, 3, 3, 4, 4, 3, 3, P(2, 2, 1, 1, 1, 1, 1), 1, 1, true},  /* stride 2, pad, output pad */
    {1, 4, 3, 3, 6, 2, 3, P(2, 3, 0, 1, 2, 1, 2), 1, 2, false}, /* groups, dilation, mixed */
    {2, 4, 4, 4, 4, 3, 3, P(1, 1, 1, 1, 1, 1, 4), 0, 0, true},  /* depthwise */
    {1, 2, 5, 1, 3, 4, 1, P(3, 1, 1, 0, 1, 1, 1), 2, 0, true},  /* 1-D as H x 1, stride > k */
};

/* Finite differences through x, w and b, and every fast method (and the
 * oneDNN plan, where built) against the double reference. */
static void test_conv_transpose_gradcheck(void)
{
    static const tg_conv_method methods[] = {TG_CONV_AUTO, TG_CONV_GEMM, TG_CONV_DIRECT};
    for (size_t i = 0; i < sizeof tconv_cases / sizeof *tconv_cases; i++) {
        char label[64];
        snprintf(label, sizeof label, "conv_transpose case %zu", i);
        TG_CHECK(tg_gradcheck(label, build_tconv, (void *)&tconv_cases[i], (tg_check_opts){0}));
        for (int m = 0; m < 3; m++) {
            tg_conv_force_method(methods[m]);
            for (int t = 1; t <= 2; t++)
                TG_CHECK(tg_check_kernels(label, build_tconv, (void *)&tconv_cases[i], t, 2e-4,
                                          (tg_check_opts){0}));
        }
        tg_conv_force_method(TG_CONV_AUTO);
        TG_CHECK(tg_check_kernels(label, build_tconv, (void *)&tconv_cases[i], 2, 2e-4,
                                  (tg_check_opts){.planned = true}));
    }
}

/* F.conv_transpose2d(x, w, b, stride=(2, 1), padding=(1, 0),
 * output_padding=(1, 0), dilation=(1, 2)) from PyTorch 1.13 (float64), x
 * [1, 2, 2, 3] = ((5k mod 13) - 6) / 4, w [2, 2, 2, 2] = ((7k mod 11) - 5)
 * / 5, b = [0.5, -1]; and the errors a user can make. */
static void test_conv_transpose_values(void)
{
    const double want[30] = {1.2,  0.45,  -0.65, -0.5,  2.75, 1.5,  -0.75, -0.8,  1.35,  0.65,
                             0.9,  0.15,  -0.95, -0.5,  2.75, -2.7, -0.45, -1.55, -0.85, -1.25,
                             -1.2, -0.45, -0.4,  -1.65, -1.6, -1.8, 0.45,  -0.55, -0.75, -1.15};
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(1, 2, 2, 3));
    tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape4(2, 2, 2, 2));
    tg_tensor *b = tg_input(g, "b", TG_F32, tg_shape1(2));
    tg_tensor *y = tg_conv_transpose2d(g, x, w, b, P(2, 1, 1, 0, 1, 2, 1), 1, 0);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(y && tg_shape_equal(y->shape, tg_shape4(1, 2, 3, 5)));
    tg_tensor *t = y ? y->in[0] : NULL; /* the bias add's first operand */
    TG_CHECK(t && t->op == TG_OP_CONV2D_BWD_DATA && strstr(t->name, "conv_transpose2d"));
    tg_interp *ip = NULL;
    TG_CHECK_OK(tg_interp_create(g, 1, &ip));
    for (int k = 0; k < 12; k++)
        tg_interp_data(ip, x)[k] = ((5 * k) % 13 - 6) / 4.0;
    for (int k = 0; k < 16; k++)
        tg_interp_data(ip, w)[k] = ((7 * k) % 11 - 5) / 5.0;
    const double bv[2] = {0.5, -1.0};
    memcpy(tg_interp_data(ip, b), bv, sizeof bv);
    TG_CHECK_OK(tg_interp_run(ip, 0));
    for (int k = 0; k < 30 && y; k++)
        TG_CHECK_NEAR(tg_interp_data(ip, y)[k], want[k], 1e-12);
    tg_interp_destroy(ip);
    tg_graph_destroy(g);

    struct {
        tg_shape ws, bs;
        tg_conv2d_params p;
        int op;
        const char *msg;
    } bad[] = {
        {tg_shape4(2, 2, 2, 2), tg_shape1(2), P(2, 2, 0, 0, 1, 1, 1), 2,
         "output padding 2 with stride 2 (must be 0 or more and less than the stride)"},
        {tg_shape4(3, 2, 2, 2), tg_shape1(2), P(1, 1, 0, 0, 1, 1, 1), 0,
         "x [1, 2, 2, 3] has 2 channels but weight [3, 2, 2, 2] takes 3"},
        {tg_shape4(2, 2, 2, 2), tg_shape1(3), P(1, 1, 0, 0, 1, 1, 1), 0,
         "bias [3] must be [2] for weight [2, 2, 2, 2]"},
        {tg_shape4(2, 2, 2, 2), tg_shape1(2), P(1, 1, 2, 2, 1, 1, 1), 0, "gives an empty output"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        g = tg_graph_create();
        x = tg_input(g, "x", TG_F32, tg_shape4(1, 2, 2, 3));
        w = tg_input(g, "w", TG_F32, bad[i].ws);
        b = tg_input(g, "b", TG_F32, bad[i].bs);
        TG_CHECK(tg_conv_transpose2d(g, x, w, b, bad[i].p, bad[i].op, 0) == NULL);
        TG_CHECK(tg_graph_error(g) && strstr(tg_graph_error(g), bad[i].msg));
        if (tg_graph_error(g) && !strstr(tg_graph_error(g), bad[i].msg))
            printf("  got: %s\n", tg_graph_error(g));
        tg_graph_destroy(g);
    }
}

int main(void)
{
    TG_RUN(test_conv_ex_values);
    TG_RUN(test_conv_ex);
    TG_RUN(test_conv_values);
    TG_RUN(test_conv_gradcheck);
    TG_RUN(test_gradient_ops_gradcheck);
    TG_RUN(test_conv_kernels_small);
    TG_RUN(test_conv_kernels_random);
    TG_RUN(test_conv_kernels_model_shapes);
    TG_RUN(test_shape_errors);
    TG_RUN(test_conv_transpose_values);
    TG_RUN(test_conv_transpose_gradcheck);
    return tg_test_finish();
}
