/* tests/ops/test_unary.c - RELU, GELU, SIGMOID, TANH, their _BWD ops and
 * SCALE, and the math ops ERF, EXP, LOG, SQRT, NEG, ABS, RECIPROCAL,
 * LEAKY_RELU, CLIP with their _BWD ops: gradients (first and second order)
 * against finite differences, fast kernels against the reference, and
 * values from PyTorch.
 * TG_TEST_LABELS: isa */
#include "backend/backend.h"
#include "tg_test.h"

#include "ops/op.h"
#include "ops/unary.h"
#include "runtime/interp.h"

#include <string.h>

typedef struct {
    tg_op op;
    tg_shape shape;
    bool second; /* differentiate the _BWD op itself (dy and x/y are parameters) */
    int form;    /* GELU: 1 for the tanh form */
} un_case;

static tg_tensor *apply_form(tg_graph *g, tg_op op, int form, tg_tensor *x)
{
    switch (op) {
    case TG_OP_RELU:
        return tg_relu(g, x);
    case TG_OP_GELU:
        return form ? tg_gelu_tanh(g, x) : tg_gelu(g, x);
    case TG_OP_SIGMOID:
        return tg_sigmoid(g, x);
    case TG_OP_TANH:
        return tg_tanh(g, x);
    default:
        return tg_scale(g, x, -1.5f, 0.25f);
    }
}

static tg_tensor *apply(tg_graph *g, tg_op op, tg_tensor *x)
{
    return apply_form(g, op, 0, x);
}

static tg_tensor *build_unary(tg_graph *g, void *ctx)
{
    const un_case *c = ctx;
    tg_init u = {TG_INIT_UNIFORM, -2, 2};
    if (!c->second)
        return apply_form(g, c->op, c->form, tg_param(g, "x", c->shape, u));
    /* out = op_bwd(dy, x or y): build it through the public op so the node
     * is exactly what autodiff makes, then use it as the output. */
    tg_tensor *dy = tg_param(g, "dy", c->shape, u);
    /* relu_bwd has no gradient in x (0 almost everywhere): x is an input */
    tg_tensor *x =
        c->op == TG_OP_RELU ? tg_input(g, "x", TG_F32, c->shape) : tg_param(g, "x", c->shape, u);
    tg_op bwd = c->op + 1; /* X_BWD follows X in op_list.h */
    /* sigmoid/tanh backward take y in (0,1)/(-1,1): feed the forward output */
    tg_tensor *xy = c->op == TG_OP_SIGMOID || c->op == TG_OP_TANH ? apply(g, c->op, x) : x;
    tg_node_params p = {0};
    tg_gelu_set_form(&p, c->form);
    return tg_node_create(g, bwd, 2, (tg_tensor *[]){dy, xy}, &p);
}

static const tg_op ops[] = {TG_OP_RELU, TG_OP_GELU, TG_OP_SIGMOID, TG_OP_TANH, TG_OP_SCALE};

/* The tanh-form GELU: first and second order against finite differences,
 * the fast kernels (AVX2 and scalar tail) against the reference. */
static void test_gelu_tanh_form(void)
{
    un_case c = {TG_OP_GELU, tg_shape3(2, 3, 5), false, 1};
    tg_gradcheck("gelu tanh", build_unary, &c, (tg_check_opts){0});
    c.second = true;
    tg_gradcheck("gelu tanh second order", build_unary, &c, (tg_check_opts){0});
    for (int big = 0; big <= 1; big++)
        for (int second = 0; second <= 1; second++)
            for (int threads = 1; threads <= 2; threads++) {
                un_case k = {TG_OP_GELU, big ? tg_shape2(200, 200) : tg_shape2(7, 9), second, 1};
                tg_check_kernels("gelu tanh", build_unary, &k, threads, big ? 1e-3 : 2e-5,
                                 (tg_check_opts){0});
            }
    /* PyTorch's gelu(approximate='tanh') and its gradient in float64 */
    const double xv[8] = {-2, -0.5, 0, 0.5, 3, -1.25, 0.75, 4};
    const double want[8] = {-0.04540230591222494, -0.15428599017485606, 0.0,
                            0.34571400982514394,  2.996362607918227,    -0.13228579703028537,
                            0.5799605551656203,   3.9999297540518075};
    const double want_grad[8] = {-0.0860992566236183, 0.13263009646535764, 0.5,
                                 0.8673699035346424,  1.0115841666309695,  -0.12249263224964863,
                                 0.9989382561374143,  1.000335123197122};
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(8));
    tg_tensor *dy = tg_input(g, "dy", TG_F32, tg_shape1(8));
    tg_tensor *y = tg_gelu_tanh(g, x);
    TG_CHECK_OK(tg_graph_status(g));
    tg_node_params p = {0};
    tg_gelu_set_form(&p, 1);
    tg_tensor *d = tg_node_create(g, TG_OP_GELU_BWD, 2, (tg_tensor *[]){dy, x}, &p);
    TG_CHECK_OK(tg_graph_status(g));
    float xf[8], dyf[8], out[8];
    for (int k = 0; k < 8; k++)
        xf[k] = (float)xv[k], dyf[k] = 1;
    tg_kernel_args a = {.node = y, .in = {xf}, .out = out};
    tg_backend_cpu.kernel(TG_OP_GELU)->forward(&a);
    for (int k = 0; k < 8; k++)
        TG_CHECK_NEAR(out[k], want[k], 3e-7 * (1 + fabs(want[k])));
    a = (tg_kernel_args){.node = d, .in = {dyf, xf}, .out = out};
    tg_backend_cpu.kernel(TG_OP_GELU_BWD)->forward(&a);
    for (int k = 0; k < 8; k++)
        TG_CHECK_NEAR(out[k], want_grad[k], 3e-7 * (1 + fabs(want_grad[k])));
    /* a form other than 0 or 1 is refused by name */
    tg_node_params bad = {0};
    tg_gelu_set_form(&bad, 2);
    TG_CHECK(tg_node_create(g, TG_OP_GELU, 1, &x, &bad) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "gelu form 2") != NULL);
    tg_graph_destroy(g);
}

static void test_gradcheck(void)
{
    for (int o = 0; o < 5; o++) {
        un_case c = {ops[o], tg_shape3(2, 3, 5), false, 0};
        tg_gradcheck(tg_op_name(c.op), build_unary, &c, (tg_check_opts){0});
        if (c.op == TG_OP_SCALE)
            continue;
        c.second = true;
        char label[64];
        snprintf(label, sizeof label, "%s second order", tg_op_name(c.op));
        tg_gradcheck(label, build_unary, &c, (tg_check_opts){0});
    }
}

static void test_kernels(void)
{
    for (int o = 0; o < 5; o++)
        for (int big = 0; big <= 1; big++)
            for (int second = 0; second <= (ops[o] != TG_OP_SCALE); second++)
                for (int threads = 1; threads <= 2; threads++) {
                    /* the big shape (40000 elements) takes the pool path */
                    un_case c = {ops[o], big ? tg_shape2(200, 200) : tg_shape2(7, 9), second, 0};
                    char label[64];
                    snprintf(label, sizeof label, "%s%s%s", tg_op_name(c.op),
                             second ? " second order" : "", big ? " large" : "");
                    /* The harness's loss sums all 40000 products out * r; float
                     * rounding of that cancelling sum exceeds 2e-5 relative,
                     * so the large cases get a looser (still bug-catching) bound. */
                    tg_check_kernels(label, build_unary, &c, threads, big ? 1e-3 : 2e-5,
                                     (tg_check_opts){0});
                }
}

/* Values of the exact formulas PyTorch uses (erf GELU), computed in float64
 * with Python's math module. */
static void test_values(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(5));
    tg_tensor *dy = tg_input(g, "dy", TG_F32, tg_shape1(5));
    tg_tensor *outs[5];
    for (int o = 0; o < 5; o++)
        outs[o] = apply(g, ops[o], x);
    tg_tensor *gelu_bwd =
        tg_node_create(g, TG_OP_GELU_BWD, 2, (tg_tensor *[]){dy, x}, &(tg_node_params){0});
    tg_tensor *relu_bwd =
        tg_node_create(g, TG_OP_RELU_BWD, 2, (tg_tensor *[]){dy, x}, &(tg_node_params){0});
    TG_CHECK_OK(tg_graph_status(g));
    const double xv[5] = {-2, -0.5, 0, 0.5, 3};
    const double want[5][5] = {
        {0, 0, 0, 0.5, 3},
        {-0.04550026389635842, -0.15426876936299344, 0, 0.34573123063700656, 2.99595030590511},
        {0.11920292202211755, 0.3775406687981454, 0.5, 0.6224593312018546, 0.9525741268224334},
        {-0.9640275800758169, -0.46211715726000974, 0, 0.46211715726000974, 0.9950547536867305},
        {3.25, 1, 0.25, -0.5, -4.25},
    };
    /* d gelu / dx at xv, times dy = 1 */
    const double want_gelu_grad[5] = {-0.08523180107819692, 0.13250487534383712, 0.5,
                                      0.8674951246561629, 1.011945647204184};
    for (int threads = 1; threads <= 2; threads++) {
        tg_pool *pool = tg_pool_create(threads);
        float xf[5], dyf[5] = {1, 1, 1, 1, 1}, out[5];
        for (int k = 0; k < 5; k++)
            xf[k] = (float)xv[k];
        for (int o = 0; o < 5; o++) {
            tg_kernel_args a = {.node = outs[o], .in = {xf}, .out = out, .pool = pool};
            tg_backend_cpu.kernel(outs[o]->op)->forward(&a);
            for (int k = 0; k < 5; k++)
                TG_CHECK_NEAR(out[k], want[o][k], 2e-7 * (1 + fabs(want[o][k])));
        }
        tg_kernel_args a = {.node = gelu_bwd, .in = {dyf, xf}, .out = out, .pool = pool};
        tg_backend_cpu.kernel(TG_OP_GELU_BWD)->forward(&a);
        for (int k = 0; k < 5; k++)
            TG_CHECK_NEAR(out[k], want_gelu_grad[k], 3e-7);
        a.node = relu_bwd;
        tg_backend_cpu.kernel(TG_OP_RELU_BWD)->forward(&a);
        const double want_relu_grad[5] = {0, 0, 0, 1, 1}; /* 0 at x = 0, as PyTorch */
        for (int k = 0; k < 5; k++)
            TG_CHECK_NEAR(out[k], want_relu_grad[k], 0);
        tg_pool_destroy(pool);
    }
    /* the reference kernels give the same values in double */
    tg_interp *ip = NULL;
    TG_CHECK_OK(tg_interp_create(g, 1, &ip));
    memcpy(tg_interp_data(ip, x), xv, sizeof xv);
    TG_CHECK_OK(tg_interp_run(ip, 0));
    for (int o = 0; o < 5; o++)
        for (int k = 0; k < 5; k++)
            TG_CHECK_NEAR(tg_interp_data(ip, outs[o])[k], want[o][k], 1e-12);
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
}

static void test_bad_inputs(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *l = tg_input(g, "labels", TG_I32, tg_shape1(4));
    TG_CHECK(tg_relu(g, l) == NULL);
    TG_CHECK(tg_graph_status(g) == TG_ERR_DTYPE);
    TG_CHECK(strstr(tg_graph_error(g), "relu: input 'labels' is i32") != NULL);
    tg_graph_destroy(g);

    g = tg_graph_create();
    tg_tensor *a = tg_input(g, "a", TG_F32, tg_shape1(4));
    tg_tensor *b = tg_input(g, "b", TG_F32, tg_shape1(5));
    TG_CHECK(tg_node_create(g, TG_OP_TANH_BWD, 2, (tg_tensor *[]){a, b}, NULL) == NULL);
    TG_CHECK(tg_graph_status(g) == TG_ERR_SHAPE);
    TG_CHECK(strstr(tg_graph_error(g), "tanh_bwd: dy [4] and its operand [5] differ") != NULL);
    tg_graph_destroy(g);

    g = tg_graph_create();
    TG_CHECK(tg_sigmoid(g, NULL) == NULL);
    TG_CHECK(tg_graph_status(g) == TG_ERR_INVALID_ARG);
    tg_graph_destroy(g);
}

/* ---- the math ops ------------------------------------------------------------- */

static const tg_op math_ops[] = {TG_OP_ERF,        TG_OP_EXP,        TG_OP_LOG,
                                 TG_OP_SQRT,       TG_OP_NEG,        TG_OP_ABS,
                                 TG_OP_RECIPROCAL, TG_OP_LEAKY_RELU, TG_OP_CLIP};
#define N_MATH (int)(sizeof math_ops / sizeof math_ops[0])

static tg_tensor *apply_math(tg_graph *g, tg_op op, tg_tensor *x)
{
    switch (op) {
    case TG_OP_ERF:
        return tg_erf(g, x);
    case TG_OP_EXP:
        return tg_exp(g, x);
    case TG_OP_LOG:
        return tg_log(g, x);
    case TG_OP_SQRT:
        return tg_sqrt(g, x);
    case TG_OP_NEG:
        return tg_neg(g, x);
    case TG_OP_ABS:
        return tg_abs(g, x);
    case TG_OP_RECIPROCAL:
        return tg_reciprocal(g, x);
    case TG_OP_LEAKY_RELU:
        return tg_leaky_relu(g, x, 0.1f);
    default:
        return tg_clip(g, x, -0.5f, 0.7f);
    }
}

/* The op's own backward op, or TG_OP_COUNT if it differentiates through others. */
static tg_op math_bwd(tg_op op)
{
    switch (op) {
    case TG_OP_ERF:
        return TG_OP_ERF_BWD;
    case TG_OP_ABS:
        return TG_OP_ABS_BWD;
    case TG_OP_LEAKY_RELU:
        return TG_OP_LEAKY_RELU_BWD;
    case TG_OP_CLIP:
        return TG_OP_CLIP_BWD;
    default:
        return TG_OP_COUNT;
    }
}

static tg_tensor *build_math(tg_graph *g, void *ctx)
{
    const un_case *c = ctx;
    /* log, sqrt and reciprocal want x away from 0 and negative values */
    bool positive = c->op == TG_OP_LOG || c->op == TG_OP_SQRT || c->op == TG_OP_RECIPROCAL;
    tg_init u = {TG_INIT_UNIFORM, positive ? 0.5 : -2, 2};
    if (!c->second)
        return apply_math(g, c->op, tg_param(g, "x", c->shape, u));
    tg_tensor *dy = tg_param(g, "dy", c->shape, u);
    /* only erf_bwd has a gradient in x; the others are piecewise constant in x */
    tg_tensor *x =
        c->op == TG_OP_ERF ? tg_param(g, "x", c->shape, u) : tg_input(g, "x", TG_F32, c->shape);
    tg_tensor *fwd = apply_math(g, c->op, x);
    /* clip_bwd and leaky_relu_bwd (alpha >= 0) read the output, the others x */
    tg_tensor *xy = c->op == TG_OP_CLIP || c->op == TG_OP_LEAKY_RELU ? fwd : x;
    tg_node_params p = fwd ? fwd->p : (tg_node_params){0};
    return tg_node_create(g, math_bwd(c->op), 2, (tg_tensor *[]){dy, xy}, &p);
}

/* leaky_relu with a negative slope: the gradient is decided by x, not y. */
static tg_tensor *build_leaky_neg(tg_graph *g, void *ctx)
{
    tg_tensor *x = tg_param(g, "x", tg_shape2(4, 6), (tg_init){TG_INIT_UNIFORM, -2, 2});
    return tg_leaky_relu(g, x, -0.5f);
}

static void test_math_gradcheck(void)
{
    tg_gradcheck("leaky_relu negative slope", build_leaky_neg, NULL, (tg_check_opts){0});
    for (int o = 0; o < N_MATH; o++)
        for (int second = 0; second <= (math_bwd(math_ops[o]) != TG_OP_COUNT); second++) {
            un_case c = {math_ops[o], tg_shape3(2, 3, 5), second, 0};
            char label[64];
            snprintf(label, sizeof label, "%s%s", tg_op_name(c.op), second ? " second order" : "");
            tg_gradcheck(label, build_math, &c, (tg_check_opts){0});
        }
}

static void test_math_kernels(void)
{
    for (int o = 0; o < N_MATH; o++)
        for (int big = 0; big <= 1; big++)
            for (int second = 0; second <= (math_bwd(math_ops[o]) != TG_OP_COUNT); second++)
                for (int threads = 1; threads <= 2; threads++) {
                    un_case c = {math_ops[o], big ? tg_shape2(200, 200) : tg_shape2(7, 9), second,
                                 0};
                    char label[64];
                    snprintf(label, sizeof label, "%s%s%s", tg_op_name(c.op),
                             second ? " second order" : "", big ? " large" : "");
                    tg_check_kernels(label, build_math, &c, threads, big ? 1e-3 : 2e-5,
                                     (tg_check_opts){0});
                }
}

/* Values and gradients from PyTorch 1.13 in float64 (torch.erf,
 * leaky_relu(x, 0.1), hardtanh(x, -0.5, 6) for clip, torch.abs). */
static void test_math_values(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_param(g, "x", tg_shape1(5), (tg_init){TG_INIT_ZEROS, 0, 0});
    tg_tensor *outs[4] = {tg_erf(g, x), tg_leaky_relu(g, x, 0.1f), tg_clip(g, x, -0.5f, 6.0f),
                          tg_abs(g, x)};
    tg_tensor *loss = tg_reduce_sum(g, outs[0], 1, false);
    for (int o = 1; o < 4; o++)
        loss = tg_add(g, loss, tg_reduce_sum(g, outs[o], 1, false));
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK_OK(tg_graph_backward(g, loss));
    const double xv[5] = {-2, -0.5, 0, 0.5, 3};
    const double want[4][5] = {
        {-0.9953222650189527, -0.5204998778130465, 0, 0.5204998778130465, 0.9999779095030014},
        {-0.2, -0.05, 0, 0.5, 3},
        {-0.5, -0.5, 0, 0.5, 3},
        {2, 0.5, 0, 0.5, 3},
    };
    /* sum of the four gradients: erf' + leaky' + clip' (0 at the bound -0.5) + sign;
     * alpha is stored as a float, hence the 1e-7 tolerances */
    const double erf_grad[5] = {0.020666985354092053, 0.8787825789354448, 1.1283791670955126,
                                0.8787825789354448, 0.00013925305194674786};
    const double rest[5] = {0.1 + 0 - 1, 0.1 + 0 - 1, 0.1 + 1 + 0, 1 + 1 + 1, 1 + 1 + 1};
    tg_interp *ip = NULL;
    TG_CHECK_OK(tg_interp_create(g, 1, &ip));
    memcpy(tg_interp_data(ip, x), xv, sizeof xv);
    TG_CHECK_OK(tg_interp_run(ip, 0));
    for (int o = 0; o < 4; o++)
        for (int k = 0; k < 5; k++)
            TG_CHECK_NEAR(tg_interp_data(ip, outs[o])[k], want[o][k], 1e-7);
    for (int k = 0; k < 5; k++)
        TG_CHECK_NEAR(tg_interp_data(ip, tg_tensor_grad(x))[k], erf_grad[k] + rest[k], 1e-7);
    /* and the fast kernels give the forward values in float */
    tg_pool *pool = tg_pool_create(1);
    float xf[5], out[5];
    for (int k = 0; k < 5; k++)
        xf[k] = (float)xv[k];
    for (int o = 0; o < 4; o++) {
        tg_kernel_args a = {.node = outs[o], .in = {xf}, .out = out, .pool = pool};
        tg_backend_cpu.kernel(outs[o]->op)->forward(&a);
        for (int k = 0; k < 5; k++)
            TG_CHECK_NEAR(out[k], want[o][k], 2e-7 * (1 + fabs(want[o][k])));
    }
    tg_pool_destroy(pool);
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
}

/* Unbounded clip sides, min > max, NaN propagation. */
static void test_clip_edges(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(4));
    tg_tensor *relu6 = tg_clip(g, x, 0.0f, 6.0f);
    tg_tensor *upper = tg_clip(g, x, -INFINITY, 1.0f);
    tg_tensor *crossed = tg_clip(g, x, 2.0f, 1.0f);
    TG_CHECK_OK(tg_graph_status(g));
    const float xv[4] = {-3, 0.5f, 9, NAN};
    const float want[3][4] = {{0, 0.5f, 6, NAN}, {-3, 0.5f, 1, NAN}, {1, 1, 1, NAN}};
    tg_tensor *outs[3] = {relu6, upper, crossed};
    float out[4];
    for (int o = 0; o < 3; o++) {
        tg_kernel_args a = {.node = outs[o], .in = {(void *)xv}, .out = out};
        tg_backend_cpu.kernel(TG_OP_CLIP)->forward(&a);
        for (int k = 0; k < 3; k++)
            TG_CHECK_NEAR(out[k], want[o][k], 0);
        TG_CHECK(isnan(out[3]));
    }
    tg_graph_destroy(g);

    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape1(4));
    TG_CHECK(tg_clip(g, x, NAN, 1.0f) == NULL);
    TG_CHECK(tg_graph_status(g) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_graph_error(g), "clip: bounds [nan, 1] contain NaN") != NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape1(4));
    TG_CHECK(tg_leaky_relu(g, x, INFINITY) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "leaky_relu: alpha is inf") != NULL);
    tg_tensor *l = tg_input(g, "labels", TG_I32, tg_shape1(4));
    TG_CHECK(tg_exp(g, l) == NULL); /* sticky */
    tg_graph_destroy(g);
    g = tg_graph_create();
    l = tg_input(g, "labels", TG_I32, tg_shape1(4));
    TG_CHECK(tg_sqrt(g, l) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "sqrt: input 'labels' is i32") != NULL);
    tg_graph_destroy(g);
}

/* A cast to a half type rounds to its nearest value and stays f32; its
 * gradient passes through (PyTorch casts the gradient back). */
static void test_cast_half_rounds(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(3));
    tg_tensor *h = tg_cast_half(g, x, TG_F16), *b = tg_cast_half(g, x, TG_BF16);
    TG_CHECK(tg_cast_half(g, x, TG_I32) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "f16 or bf16") != NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape1(3));
    h = tg_cast_half(g, x, TG_F16);
    b = tg_cast_half(g, x, TG_BF16);
    TG_CHECK_OK(tg_graph_status(g));
    tg_interp *ip = NULL;
    TG_CHECK_OK(tg_interp_create(g, 0, &ip));
    const double v[3] = {1.0 / 3.0, 65520.0, -2.5};
    memcpy(tg_interp_data(ip, x), v, sizeof v);
    TG_CHECK_OK(tg_interp_run(ip, 0));
    /* f16: 1/3 -> 0.333251953125, 65520 overflows to inf; bf16: 0.333984375, 65536 */
    TG_CHECK(tg_interp_data(ip, h)[0] == 0.333251953125 && isinf(tg_interp_data(ip, h)[1]));
    TG_CHECK(tg_interp_data(ip, b)[0] == 0.333984375 && tg_interp_data(ip, b)[1] == 65536.0);
    TG_CHECK(tg_interp_data(ip, h)[2] == -2.5 && tg_interp_data(ip, b)[2] == -2.5);
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_math_values);
    TG_RUN(test_clip_edges);
    TG_RUN(test_math_gradcheck);
    TG_RUN(test_math_kernels);
    TG_RUN(test_values);
    TG_RUN(test_bad_inputs);
    TG_RUN(test_gradcheck);
    TG_RUN(test_kernels);
    TG_RUN(test_gelu_tanh_form);
    TG_RUN(test_cast_half_rounds);
    return tg_test_finish();
}
