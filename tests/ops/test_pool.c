/* tests/ops/test_pool.c - max and average pooling: gradients, fast kernels
 * against the reference (global pools of many planes too), hand-checked
 * values, bad shapes; and the general form (asymmetric padding, dilation,
 * ceil_mode, count_include_pad) against PyTorch's values and gradients.
 * TG_TEST_LABELS: isa */
#include "tg_test.h"

#include "runtime/interp.h"

#include <math.h>
#include <string.h>

typedef struct {
    int n, c, h, w, k, s, p;
    bool max, global;
} pool_case;

static tg_tensor *build(tg_graph *g, void *ctx)
{
    const pool_case *pc = ctx;
    tg_tensor *x =
        tg_param(g, "x", tg_shape4(pc->n, pc->c, pc->h, pc->w), (tg_init){TG_INIT_UNIFORM, -1, 1});
    if (pc->global)
        return tg_global_avgpool(g, x);
    return pc->max ? tg_maxpool2d(g, x, pc->k, pc->s, pc->p)
                   : tg_avgpool2d(g, x, pc->k, pc->s, pc->p);
}

static const pool_case cases[] = {
    {2, 3, 8, 8, 2, 2, 0, true, false},
    {2, 3, 7, 9, 3, 2, 1, true, false},
    {2, 3, 7, 9, 2, 2, 0, true, false}, /* 2x2 windows leave the last row and column out */
    {1, 2, 6, 6, 3, 1, 1, true, false},
    {2, 3, 8, 8, 2, 2, 0, false, false},
    {2, 2, 7, 5, 3, 2, 1, false, false},
    {2, 4, 5, 7, 0, 0, 0, false, true},
    /* global pools: planes summed 16 side by side, the last group short */
    {2, 3, 9, 7, 0, 0, 0, false, true},
    {1, 5, 28, 28, 0, 0, 0, false, true},
    {2, 20, 7, 7, 0, 0, 0, false, true},
    {40, 10, 24, 24, 2, 2, 0, true, false},
};

static void test_gradients(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] - 1; i++) {
        char label[64];
        snprintf(label, sizeof label, "pool case %zu", i);
        tg_gradcheck(label, build, (void *)&cases[i], (tg_check_opts){0});
    }
}

static void test_fast_matches_reference(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int threads = 1; threads <= 2; threads++) {
            char label[64];
            snprintf(label, sizeof label, "pool case %zu", i);
            tg_check_kernels(label, build, (void *)&cases[i], threads, 1e-5, (tg_check_opts){0});
        }
}

static void test_values(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(1, 1, 2, 4));
    tg_tensor *mx = tg_maxpool2d(g, x, 2, 2, 0), *av = tg_avgpool2d(g, x, 2, 2, 0);
    tg_tensor *gl = tg_global_avgpool(g, x);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(tg_shape_equal(tg_tensor_shape(mx), tg_shape4(1, 1, 1, 2)));
    TG_CHECK(tg_shape_equal(tg_tensor_shape(gl), tg_shape4(1, 1, 1, 1)));
    tg_interp *ip = NULL;
    TG_CHECK_OK(tg_interp_create(g, 0, &ip));
    const double v[8] = {1, 5, -2, 0, 3, 2, 7, 7};
    memcpy(tg_interp_data(ip, x), v, sizeof v);
    TG_CHECK_OK(tg_interp_run(ip, 0));
    TG_CHECK(tg_interp_data(ip, mx)[0] == 5 && tg_interp_data(ip, mx)[1] == 7);
    TG_CHECK_NEAR(tg_interp_data(ip, av)[0], 11.0 / 4, 1e-12);
    TG_CHECK_NEAR(tg_interp_data(ip, av)[1], 12.0 / 4, 1e-12);
    TG_CHECK_NEAR(tg_interp_data(ip, gl)[0], 23.0 / 8, 1e-12);
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
}

/* A NaN anywhere in a window wins, the first NaN if several (the fast
 * kernels' rule and PyTorch's); the reference once let it win only as a
 * window's first tap, and these windows hold it second and last. */
static void test_reference_nan_wins_anywhere(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(1, 1, 2, 4));
    tg_tensor *mx = tg_maxpool2d(g, x, 2, 2, 0);
    TG_CHECK_OK(tg_graph_status(g));
    tg_interp *ip = NULL;
    TG_CHECK_OK(tg_interp_create(g, 0, &ip));
    const double v[8] = {1, NAN, -2, 0, 3, 2, 7, NAN};
    memcpy(tg_interp_data(ip, x), v, sizeof v);
    TG_CHECK_OK(tg_interp_run(ip, 0));
    TG_CHECK(isnan(tg_interp_data(ip, mx)[0]) && isnan(tg_interp_data(ip, mx)[1]));
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
}

static void test_bad_shapes(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape3(1, 4, 4));
    TG_CHECK(tg_maxpool2d(g, x, 2, 2, 0) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "[N, C, H, W]") != NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape4(1, 1, 3, 3));
    TG_CHECK(tg_maxpool2d(g, x, 5, 1, 0) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "does not fit") != NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape4(1, 1, 8, 8));
    TG_CHECK(tg_avgpool2d(g, x, 2, 2, 2) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "more than half") != NULL);
    tg_graph_destroy(g);
}

/* ---- the general form ---------------------------------------------------------------- */

typedef struct {
    bool max;
    tg_pool2d_params p;
    tg_shape shape;
} ex_case;

static tg_tensor *build_ex(tg_graph *g, void *ctx)
{
    const ex_case *c = ctx;
    tg_tensor *x = tg_param(g, "x", c->shape, (tg_init){TG_INIT_UNIFORM, -1, 1});
    return c->max ? tg_maxpool2d_ex(g, x, c->p) : tg_avgpool2d_ex(g, x, c->p);
}

/* kernel h, w, stride h, w, pad top, left, bottom, right, dilation h, w, ceil, count pad */
static const ex_case ex_cases[] = {
    {true, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true}, {4, {2, 3, 8, 9}}},
    {false, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true}, {4, {2, 3, 8, 9}}},
    {false, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, false}, {4, {2, 3, 8, 9}}},
    {false, {3, 2, 2, 1, 1, 0, 0, 1, 1, 1, false, false}, {4, {2, 2, 7, 6}}},
    {true, {2, 3, 1, 2, 1, 0, 0, 1, 2, 2, false, true}, {4, {2, 2, 7, 8}}},
    {true, {3, 3, 3, 3, 0, 1, 1, 0, 1, 1, true, true}, {4, {1, 2, 10, 11}}},
    {true, {2, 2, 2, 2, 0, 0, 0, 0, 1, 1, true, true}, {4, {2, 3, 7, 9}}}, /* 2x2 with ceil */
    {false, {2, 2, 2, 2, 0, 0, 0, 0, 1, 1, true, false}, {4, {2, 3, 7, 9}}},
    {true, {3, 3, 2, 2, 1, 1, 1, 1, 2, 2, true, true}, {4, {16, 8, 33, 31}}}, /* pool path */
};

static void test_ex_gradients_and_kernels(void)
{
    for (size_t i = 0; i < sizeof ex_cases / sizeof ex_cases[0]; i++) {
        char label[64];
        snprintf(label, sizeof label, "general pool case %zu", i);
        tg_gradcheck(label, build_ex, (void *)&ex_cases[i], (tg_check_opts){0});
        for (int threads = 1; threads <= 2; threads++)
            tg_check_kernels(label, build_ex, (void *)&ex_cases[i], threads, 1e-5,
                             (tg_check_opts){0});
    }
}

/* x [1, 1, 5, 6] = (7k mod 11) - 5; want = the pooled values and the
 * gradient of sum(y * (1, 2, 3, ...)), from PyTorch 1.13 (float64):
 * max_pool2d / avg_pool2d(x, 3, 2, 1, ceil_mode=True[, count_include_pad]),
 * max_pool2d(x, 2, 1, 1, dilation=2), and asymmetric padding as F.pad(x,
 * (0, 1, 1, 0)) followed by a 2x2/2 pool (-inf padding for max). */
typedef struct {
    bool max;
    tg_pool2d_params p;
    int oh, ow;
    double y[30], dx[30];
} torch_case;

static const torch_case torch_cases[] = {
    {true,
     {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true},
     3,
     4,
     {4, 5, 5, -3, 4, 5, 4, 4, 5, 5, 4, 2},
     {0, 0, 0,  5, 0, 4, 6, 0, 0,  0, 0,  0, 0, 0,  6,
      0, 0, 15, 0, 0, 0, 0, 0, 12, 0, 19, 0, 0, 11, 0}},
    {false,
     {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, false},
     3,
     4,
     {0.25, 0.6666666666666666, 0.0, -4.0, 0.0, 0.1111111111111111, -0.5555555555555556,
      0.3333333333333333, -0.25, 0.16666666666666666, -0.5, 1.0},
     {0.25,
      0.5833333333333333,
      0.3333333333333333,
      0.8333333333333333,
      0.5,
      2.5,
      1.0833333333333335,
      2.083333333333333,
      1.0,
      2.2777777777777777,
      1.2777777777777777,
      5.944444444444445,
      0.8333333333333334,
      1.5,
      0.6666666666666666,
      1.4444444444444444,
      0.7777777777777778,
      3.444444444444444,
      3.0833333333333335,
      5.416666666666667,
      2.3333333333333335,
      4.944444444444445,
      2.611111111111111,
      11.277777777777779,
      2.25,
      3.916666666666667,
      1.6666666666666667,
      3.5,
      1.8333333333333333,
      7.833333333333333}},
    {false,
     {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true},
     3,
     4,
     {0.1111111111111111, 0.4444444444444444, 0.0, -1.3333333333333333, 0.0, 0.1111111111111111,
      -0.5555555555555556, 0.16666666666666666, -0.1111111111111111, 0.1111111111111111,
      -0.3333333333333333, 0.3333333333333333},
     {0.1111111111111111,
      0.3333333333333333,
      0.2222222222222222,
      0.5555555555555556,
      0.3333333333333333,
      1.0,
      0.6666666666666667,
      1.5555555555555554,
      0.8888888888888888,
      2.0,
      1.1111111111111112,
      3.1111111111111107,
      0.5555555555555556,
      1.2222222222222223,
      0.6666666666666666,
      1.4444444444444444,
      0.7777777777777778,
      2.111111111111111,
      1.5555555555555556,
      3.3333333333333335,
      1.7777777777777777,
      3.7777777777777777,
      2.0,
      5.333333333333334,
      1.0,
      2.111111111111111,
      1.1111111111111112,
      2.3333333333333335,
      1.2222222222222223,
      3.2222222222222223}},
    {true,
     {2, 2, 1, 1, 1, 1, 1, 1, 2, 2, false, true},
     5,
     6,
     {0, 4, 3,  -1, 3, -1, 2, 5, 5, 5,  5, 1,  0, 4, 3,
      3, 3, -1, 5,  5, 5,  5, 4, 4, -4, 3, -1, 3, 2, -5},
     {0, 7, 0,  20, 12, 0,  16, 14, 0,  40, 28, 0, 0, 0,  60,
      0, 0, 23, 0,  25, 70, 27, 30, 29, 0,  40, 0, 0, 24, 0}},
    {false,
     {2, 2, 2, 2, 1, 0, 0, 1, 1, 1, false, true},
     3,
     3,
     {-0.75, 0.75, -0.5, 1.0, 1.25, -1.25, -0.25, 0.0, 0.25},
     {0.25, 0.25, 0.5, 0.5,  0.75, 0.75, 1.0, 1.0,  1.25, 1.25, 1.5,  1.5, 1.0, 1.0,  1.25,
      1.25, 1.5,  1.5, 1.75, 1.75, 2.0,  2.0, 2.25, 2.25, 1.75, 1.75, 2.0, 2.0, 2.25, 2.25}},
    {true,
     {2, 2, 2, 2, 1, 0, 0, 1, 1, 1, false, true},
     3,
     3,
     {2, 5, 1, 4, 5, 4, 5, 3, 4},
     {0, 1, 0, 2, 3, 0, 4, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 6, 0, 0, 8, 0, 0, 0, 0, 7, 0, 0, 9, 0}},
};

static void test_ex_torch_values(void)
{
    for (size_t c = 0; c < sizeof torch_cases / sizeof torch_cases[0]; c++) {
        const torch_case *tc = &torch_cases[c];
        tg_graph *g = tg_graph_create();
        tg_tensor *x = tg_param(g, "x", tg_shape4(1, 1, 5, 6), (tg_init){TG_INIT_ZEROS, 0, 0});
        tg_tensor *y = tc->max ? tg_maxpool2d_ex(g, x, tc->p) : tg_avgpool2d_ex(g, x, tc->p);
        TG_CHECK_OK(tg_graph_status(g));
        if (!y) {
            tg_graph_destroy(g);
            continue;
        }
        TG_CHECK(tg_shape_equal(y->shape, tg_shape4(1, 1, tc->oh, tc->ow)));
        tg_tensor *r = tg_input(g, "r", TG_F32, y->shape);
        TG_CHECK_OK(tg_graph_backward(g, tg_reduce_sum(g, tg_mul(g, y, r), 15, false)));
        tg_interp *ip = NULL;
        TG_CHECK_OK(tg_interp_create(g, 1, &ip));
        for (int k = 0; k < 30; k++)
            tg_interp_data(ip, x)[k] = (double)((7 * k) % 11) - 5;
        for (int k = 0; k < tc->oh * tc->ow; k++)
            tg_interp_data(ip, r)[k] = k + 1;
        TG_CHECK_OK(tg_interp_run(ip, 0));
        for (int k = 0; k < tc->oh * tc->ow; k++)
            TG_CHECK_NEAR(tg_interp_data(ip, y)[k], tc->y[k], 1e-12);
        for (int k = 0; k < 30; k++)
            TG_CHECK_NEAR(tg_interp_data(ip, tg_tensor_grad(x))[k], tc->dx[k], 1e-12);
        tg_interp_destroy(ip);
        tg_graph_destroy(g);
    }
}

/* The thin wrappers are the general form with PyTorch's defaults. */
static void test_wrappers_are_general_form(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(2, 3, 9, 9));
    tg_tensor *a = tg_maxpool2d(g, x, 3, 2, 1);
    tg_tensor *b =
        tg_maxpool2d_ex(g, x, (tg_pool2d_params){3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true});
    tg_tensor *c = tg_avgpool2d(g, x, 3, 2, 1);
    tg_tensor *d =
        tg_avgpool2d_ex(g, x, (tg_pool2d_params){3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true});
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(memcmp(&a->p, &b->p, sizeof a->p) == 0 && memcmp(&c->p, &d->p, sizeof c->p) == 0);
    TG_CHECK(tg_shape_equal(a->shape, tg_shape4(2, 3, 5, 5)));
    tg_graph_destroy(g);
}

static const char *ex_error(bool max, tg_shape s, tg_pool2d_params p)
{
    static char msg[512];
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, s);
    tg_tensor *y = max ? tg_maxpool2d_ex(g, x, p) : tg_avgpool2d_ex(g, x, p);
    snprintf(msg, sizeof msg, "%s", y ? "(built)" : tg_graph_error(g));
    tg_graph_destroy(g);
    return msg;
}

static void test_ex_bad_params(void)
{
    tg_shape s = tg_shape4(1, 1, 8, 8);
    TG_CHECK(
        strstr(ex_error(false, s, (tg_pool2d_params){3, 3, 1, 1, 0, 0, 0, 0, 2, 2, false, true}),
               "average pooling supports only dilation 1") != NULL);
    TG_CHECK(
        strstr(ex_error(true, s, (tg_pool2d_params){3, 3, 1, 1, 0, 0, 0, 0, 0, 1, false, true}),
               "all must be positive") != NULL);
    TG_CHECK(
        strstr(ex_error(true, s, (tg_pool2d_params){3, 3, 1, 1, 0, -1, 0, 0, 1, 1, false, true}),
               "none may be negative") != NULL);
    TG_CHECK(
        strstr(ex_error(true, s, (tg_pool2d_params){2, 2, 1, 1, 0, 0, 2, 0, 1, 1, false, true}),
               "bottom 2, right 0 is more than half the kernel 2x2") != NULL);
    /* 2 taps 3 rows apart over a 2-row input padded by 2: the window at row
     * -1 reads rows -1 and 2, both padding */
    TG_CHECK(strstr(ex_error(true, tg_shape4(1, 1, 2, 4),
                             (tg_pool2d_params){2, 1, 1, 1, 2, 0, 2, 0, 3, 1, false, true}),
                    "covers only padding") != NULL);
}

/* Every window ties (a constant input): forward and backward must pick the
 * first maximum in the window's row-major order, as the reference does, also
 * where windows overlap, are padded or dilated (the row-wise fast path) and
 * in the plain 2x2 case. */
static tg_tensor *build_ties(tg_graph *g, void *ctx)
{
    const tg_pool2d_params *p = ctx;
    tg_tensor *x = tg_param(g, "x", tg_shape4(2, 3, 9, 11), (tg_init){TG_INIT_CONSTANT, 0.5, 0});
    return tg_maxpool2d_ex(g, x, *p);
}

static void test_ties_pick_the_first_maximum(void)
{
    static const tg_pool2d_params ps[] = {
        {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true}, /* the ResNet stem's pooling */
        {3, 2, 1, 2, 1, 0, 1, 1, 2, 1, true, true},  /* dilated, asymmetric, ceil */
        {2, 2, 2, 2, 0, 0, 0, 0, 1, 1, false, true}, /* plain 2x2 */
    };
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        for (int threads = 1; threads <= 2; threads++) {
            char label[64];
            snprintf(label, sizeof label, "max pooling ties, case %zu", i);
            tg_check_kernels(label, build_ties, (void *)&ps[i], threads, 1e-6, (tg_check_opts){0});
        }
}

int main(void)
{
    TG_RUN(test_ex_torch_values);
    TG_RUN(test_wrappers_are_general_form);
    TG_RUN(test_ex_bad_params);
    TG_RUN(test_ex_gradients_and_kernels);
    TG_RUN(test_gradients);
    TG_RUN(test_fast_matches_reference);
    TG_RUN(test_ties_pick_the_first_maximum);
    TG_RUN(test_values);
    TG_RUN(test_reference_nan_wins_anywhere);
    TG_RUN(test_bad_shapes);
    return tg_test_finish();
}
