/* tests/ops/test_activation.c - ACTIVATION and ACTIVATION_BWD (ops/activation.c):
 * each function's gradient (and the linear part of its backward op's)
 * against finite differences, the fast kernels against the reference, and
 * both against PyTorch's values and gradients in float64, kinks included
 * (the inverse and hyperbolic functions, ThresholdedRelu and Shrink against
 * the C library's double-precision functions, Python's math module, and
 * their derivatives' formulas). Each function is evaluated inside its
 * domain: at a X + b (the `at` table).
 * TG_TEST_LABELS: isa */
#include "backend/backend.h"
#include "tg_test.h"

#include "ops/op.h"
#include "runtime/interp.h"

#include <math.h>
#include <string.h>

enum { N_FN = 26, N_X = 9 };

typedef tg_tensor *(*act_fn)(tg_graph *, tg_tensor *);

static tg_tensor *hard_sigmoid_torch(tg_graph *g, tg_tensor *x)
{
    return tg_hard_sigmoid(g, x, 1.0f / 6.0f, 0.5f);
}
static tg_tensor *elu_07(tg_graph *g, tg_tensor *x)
{
    return tg_elu(g, x, 0.7f);
}
static tg_tensor *celu_15(tg_graph *g, tg_tensor *x)
{
    return tg_celu(g, x, 1.5f);
}
static tg_tensor *selu_onnx(tg_graph *g, tg_tensor *x)
{
    return tg_selu(g, x, 1.67326319217681884765625f, 1.05070102214813232421875f);
}
static tg_tensor *thresholded_relu_1(tg_graph *g, tg_tensor *x)
{
    return tg_thresholded_relu(g, x, 1.0f);
}
static tg_tensor *softshrink(tg_graph *g, tg_tensor *x)
{
    return tg_shrink(g, x, 0.5f, 0.5f);
}

/* In the order of the PyTorch table below. */
static const struct {
    const char *name;
    act_fn fn;
} fns[N_FN] = {{"hard_sigmoid", hard_sigmoid_torch},
               {"hard_swish", tg_hard_swish},
               {"silu", tg_silu},
               {"mish", tg_mish},
               {"elu", elu_07},
               {"celu", celu_15},
               {"selu", selu_onnx},
               {"softplus", tg_softplus},
               {"softsign", tg_softsign},
               {"sign", tg_sign},
               {"floor", tg_floor},
               {"ceil", tg_ceil},
               {"round", tg_round},
               {"cos", tg_cos},
               {"sin", tg_sin},
               {"tan", tg_tan},
               {"acos", tg_acos},
               {"asin", tg_asin},
               {"atan", tg_atan},
               {"acosh", tg_acosh},
               {"asinh", tg_asinh},
               {"atanh", tg_atanh},
               {"cosh", tg_cosh},
               {"sinh", tg_sinh},
               {"thresholded_relu", thresholded_relu_1},
               {"shrink", softshrink}};

/* Where each function is evaluated: at a X + b for the table's X (in
 * [-4, 4]), at (a x + b) for the checkers' x (in [-2, 2]): tan clear of its
 * poles, the inverse functions inside their domains. */
static const struct {
    double a, b;
} at[N_FN] = {{1, 0}, {1, 0},      {1, 0}, {1, 0},   {1, 0}, {1, 0}, {1, 0},    {1, 0},   {1, 0},
              {1, 0}, {1, 0},      {1, 0}, {1, 0},   {1, 0}, {1, 0}, {0.25, 0}, {0.2, 0}, {0.2, 0},
              {1, 0}, {0.25, 2.5}, {1, 0}, {0.2, 0}, {1, 0}, {1, 0}, {1, 0},    {1, 0}};

typedef struct {
    int fn;
    tg_shape shape;
    bool second; /* ACTIVATION_BWD(dy, x) itself: dy a parameter */
} act_case;

static tg_tensor *build(tg_graph *g, void *ctx)
{
    const act_case *c = ctx;
    tg_init u = {TG_INIT_UNIFORM, -2, 2};
    float a = (float)at[c->fn].a, b = (float)at[c->fn].b;
    bool moved = a != 1 || b != 0;
    if (c->fn == 15)
        a = 0.5f; /* tan: clear of its poles at +-pi/2 */
    if (!c->second) {
        tg_tensor *x = tg_param(g, "x", c->shape, u);
        return fns[c->fn].fn(g, moved ? tg_scale(g, x, a, b) : x);
    }
    /* the backward op is linear in dy; in x its derivative is 0 almost
     * everywhere (piecewise-linear functions) or refused: x is an input */
    tg_tensor *dy = tg_param(g, "dy", c->shape, u);
    tg_tensor *x = tg_input(g, "x", TG_F32, c->shape);
    x = moved ? tg_scale(g, x, a, b) : x;
    tg_tensor *y = fns[c->fn].fn(g, x);
    return y ? tg_node_create(g, TG_OP_ACTIVATION_BWD, 2, (tg_tensor *[]){dy, x}, &y->p) : NULL;
}

static void test_gradcheck(void)
{
    for (int f = 0; f < N_FN; f++)
        for (int second = 0; second <= 1; second++) {
            act_case c = {f, tg_shape3(2, 3, 5), second};
            char label[64];
            snprintf(label, sizeof label, "%s%s", fns[f].name, second ? " backward" : "");
            tg_gradcheck(label, build, &c, (tg_check_opts){0});
        }
}

static void test_kernels(void)
{
    for (int f = 0; f < N_FN; f++)
        for (int big = 0; big <= 1; big++)
            for (int second = 0; second <= 1; second++)
                for (int threads = 1; threads <= 2; threads++) {
                    act_case c = {f, big ? tg_shape2(200, 200) : tg_shape2(7, 9), second};
                    char label[64];
                    snprintf(label, sizeof label, "%s%s%s", fns[f].name, second ? " backward" : "",
                             big ? " large" : "");
                    /* the harness sums all 40000 products out * r: see test_unary.c */
                    tg_check_kernels(label, build, &c, threads, big ? 1e-3 : 2e-5,
                                     (tg_check_opts){0});
                }
}

/* torch.nn.functional's functions in float64 at a X + b (tan at X / 4), and the
 * gradient of their sum (elu alpha 0.7, celu alpha 1.5, hardsigmoid). */
static const double X[N_X] = {-4, -3, -2.5, -0.5, 0, 0.5, 2.5, 3, 4};
static const double want[N_FN][2][N_X] = {
    {{0.0, 0.0, 0.08333333333333333, 0.4166666666666667, 0.5, 0.5833333333333334,
      0.9166666666666666, 1.0, 1.0},
     {0.0, 0.0, 0.1666666716337204, 0.1666666716337204, 0.1666666716337204, 0.1666666716337204,
      0.1666666716337204, 0.0, 0.0}},
    {{-0.0, -0.0, -0.20833333333333334, -0.20833333333333334, 0.0, 0.2916666666666667,
      2.2916666666666665, 3.0, 4.0},
     {0.0, -0.5, -0.33333333333333337, 0.33333333333333337, 0.5, 0.6666666666666666,
      1.3333333333333335, 1.0, 1.0}},
    {{-0.07194483984836623, -0.14227761953270035, -0.18964545005310887, -0.1887703343990727, 0.0,
      0.3112296656009273, 2.3103545499468914, 2.8577223804672998, 3.928055160151634},
     {-0.05266461489107291, -0.08810410601516962, -0.09940111134152683, 0.2600388126973482, 0.5,
      0.7399611873026519, 1.0994011113415267, 1.0881041060151693, 1.0526646148910728}},
    {{-0.07259174079202535, -0.1456474612756246, -0.19681620390653332, -0.22074377465173, 0.0,
      0.37524521130489513, 2.471392304557881, 2.9865350049679575, 3.9974128069762385},
     {-0.05377320979348033, -0.09339311453232084, -0.10974357275018568, 0.28951067791351226, 0.6,
      0.8864243753577273, 1.041129530131353, 1.0211069109294435, 1.0044328769037503}},
    {{-0.687179052777886, -0.6651490521424952, -0.6425405009632708, -0.2754285382011566, 0.0, 0.5,
      2.5, 3.0, 4.0},
     {0.012820947222113924, 0.03485094785750476, 0.05745949903672916, 0.42457146179884336, 0.7, 1.0,
      1.0, 1.0, 1.0}},
    {{-1.3957748231657976, -1.296997075145081, -1.2166865957436572, -0.4252030341393161, 0.0, 0.5,
      2.5, 3.0, 4.0},
     {0.06948345122280154, 0.1353352832366127, 0.18887560283756188, 0.7165313105737893, 1.0, 1.0,
      1.0, 1.0, 1.0}},
    {{-1.7258986281898945, -1.6705687287671118, -1.6137857588732423, -0.6917581878028713, 0.0,
      0.5253504936777402, 2.626752468388701, 3.1521029620664414, 4.202803949421922},
     {0.03220071265748214, 0.08753061208026487, 0.1443135819741343, 1.0663411530445053,
      1.7580993408473766, 1.0507009873554805, 1.0507009873554805, 1.0507009873554805,
      1.0507009873554805}},
    {{0.018149927917809738, 0.04858735157374206, 0.07888973429254963, 0.4740769841801067,
      0.6931471805599453, 0.9740769841801067, 2.5788897342925496, 3.048587351573742,
      4.0181499279178094},
     {0.017986209962091555, 0.04742587317756679, 0.07585818002124356, 0.37754066879814546, 0.5,
      0.6224593312018546, 0.9241418199787564, 0.9525741268224333, 0.9820137900379085}},
    {{-0.8, -0.75, -0.7142857142857143, -0.3333333333333333, 0.0, 0.3333333333333333,
      0.7142857142857143, 0.75, 0.8},
     {0.04000000000000001, 0.0625, 0.08163265306122447, 0.4444444444444444, 1.0, 0.4444444444444444,
      0.08163265306122447, 0.0625, 0.04000000000000001}},
    {{-1.0, -1.0, -1.0, -1.0, 0.0, 1.0, 1.0, 1.0, 1.0}, {0}},
    {{-4.0, -3.0, -3.0, -1.0, 0.0, 0.0, 2.0, 3.0, 4.0}, {0}},
    {{-4.0, -3.0, -2.0, -0.0, 0.0, 1.0, 3.0, 3.0, 4.0}, {0}},
    {{-4.0, -3.0, -2.0, -0.0, 0.0, 0.0, 2.0, 3.0, 4.0}, {0}}, /* halves to even */
    {{-0.6536436208636119, -0.9899924966004454, -0.8011436155469337, 0.8775825618903728, 1.0,
      0.8775825618903728, -0.8011436155469337, -0.9899924966004454, -0.6536436208636119},
     {-0.7568024953079282, 0.1411200080598672, 0.5984721441039564, 0.479425538604203, -0.0,
      -0.479425538604203, -0.5984721441039564, -0.1411200080598672, 0.7568024953079282}},
    {{0.7568024953079282, -0.1411200080598672, -0.5984721441039564, -0.479425538604203, 0.0,
      0.479425538604203, 0.5984721441039564, 0.1411200080598672, -0.7568024953079282},
     {-0.6536436208636119, -0.9899924966004454, -0.8011436155469337, 0.8775825618903728, 1.0,
      0.8775825618903728, -0.8011436155469337, -0.9899924966004454, -0.6536436208636119}},
    {{-1.5574077246549023, -0.9315964599440725, -0.7214844409909044, -0.12565513657513097, 0.0,
      0.12565513657513097, 0.7214844409909044, 0.9315964599440725, 1.5574077246549023},
     /* d tan(x / 4) / dx: sec^2 / 4 */
     {0.85637970520369, 0.46696799104508196, 0.38013494964798944, 0.2539473033369287, 0.25,
      0.2539473033369287, 0.38013494964798944, 0.46696799104508196, 0.85637970520369}},
    /* acos at 0.2 X + 0 */
    {{2.498091564664724, 2.2142974653905036, 2.0943951023931957, 1.6709637494540794,
      1.5707963267948966, 1.4706289041357137, 1.0471975511965979, 0.9272951881992895,
      0.6435010889250692},
     {-0.3333333421636515, -0.2500000055879358, -0.23094010767585035, -0.20100756308209744, -0.2,
      -0.20100756308209744, -0.23094010767585035, -0.2500000055879358, -0.3333333421636515}},
    /* asin at 0.2 X + 0 */
    {{-0.9272952378698274, -0.6435011385956071, -0.5235987755982989, -0.10016742265918284, 0.0,
      0.10016742265918284, 0.5235987755982989, 0.6435011385956071, 0.9272952378698274},
     {0.3333333421636515, 0.2500000055879358, 0.23094010767585035, 0.20100756308209744, 0.2,
      0.20100756308209744, 0.23094010767585035, 0.2500000055879358, 0.3333333421636515}},
    /* atan at 1 X + 0 */
    {{-1.3258176636680326, -1.2490457723982544, -1.1902899496825317, -0.4636476090008061, 0.0,
      0.4636476090008061, 1.1902899496825317, 1.2490457723982544, 1.3258176636680326},
     {0.058823529411764705, 0.1, 0.13793103448275862, 0.8, 1.0, 0.8, 0.13793103448275862, 0.1,
      0.058823529411764705}},
    /* acosh at 0.25 X + 2.5 */
    {{0.9624236501192069, 1.158810360429947, 1.2415784233077212, 1.5105477504732074,
      1.566799236972411, 1.6197962748565, 1.8059384409192865, 1.8472460857138377,
      1.9248473002384139},
     {0.22360679774997896, 0.17407765595569785, 0.15762208124782012, 0.11605177063713189,
      0.1091089451179962, 0.10300524052492095, 0.08444006618414981, 0.08084520834544433,
      0.07453559924999299}},
    /* asinh at 1 X + 0 */
    {{-2.0947125472611012, -1.8184464592320668, -1.6472311463710958, -0.48121182505960347, 0.0,
      0.48121182505960347, 1.6472311463710958, 1.8184464592320668, 2.0947125472611012},
     {0.24253562503633297, 0.31622776601683794, 0.3713906763541037, 0.8944271909999159, 1.0,
      0.8944271909999159, 0.3713906763541037, 0.31622776601683794, 0.24253562503633297}},
    /* atanh at 0.2 X + 0 */
    {{-1.098612321781802, -0.6931472178128492, -0.5493061443340548, -0.10033534923624338, 0.0,
      0.10033534923624338, 0.5493061443340548, 0.6931472178128492, 1.098612321781802},
     {0.5555555849899498, 0.3125000139698395, 0.26666666666666666, 0.20202020208101687, 0.2,
      0.20202020208101687, 0.26666666666666666, 0.3125000139698395, 0.5555555849899498}},
    /* cosh at 1 X + 0 */
    {{27.308232836016487, 10.067661995777765, 6.132289479663686, 1.1276259652063807, 1.0,
      1.1276259652063807, 6.132289479663686, 10.067661995777765, 27.308232836016487},
     {-27.28991719712775, -10.017874927409903, -6.0502044810397875, -0.5210953054937474, 0.0,
      0.5210953054937474, 6.0502044810397875, 10.017874927409903, 27.28991719712775}},
    /* sinh at 1 X + 0 */
    {{-27.28991719712775, -10.017874927409903, -6.0502044810397875, -0.5210953054937474, 0.0,
      0.5210953054937474, 6.0502044810397875, 10.017874927409903, 27.28991719712775},
     {27.308232836016487, 10.067661995777765, 6.132289479663686, 1.1276259652063807, 1.0,
      1.1276259652063807, 6.132289479663686, 10.067661995777765, 27.308232836016487}},
    /* thresholded_relu at 1 X + 0 */
    {{0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.5, 3.0, 4.0}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0}},
    /* shrink at 1 X + 0 */
    {{-3.5, -2.5, -2.0, 0.0, 0.0, 0.0, 2.0, 2.5, 3.5},
     {1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0}},
};

static void test_against_pytorch(void)
{
    for (int f = 0; f < N_FN; f++) {
        tg_graph *g = tg_graph_create();
        tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(N_X));
        tg_tensor *dy = tg_input(g, "dy", TG_F32, tg_shape1(N_X));
        tg_tensor *y = fns[f].fn(g, x);
        tg_tensor *d =
            y ? tg_node_create(g, TG_OP_ACTIVATION_BWD, 2, (tg_tensor *[]){dy, x}, &y->p) : NULL;
        TG_CHECK_OK(tg_graph_status(g));
        double scale = at[f].a; /* at a X + b: the derivative in X is a f' */
        float xf[N_X], dyf[N_X], out[N_X];
        double xd[N_X], dyd[N_X];
        for (int k = 0; k < N_X; k++)
            xf[k] = (float)(X[k] * scale + at[f].b), xd[k] = xf[k], dyf[k] = (float)scale,
            dyd[k] = scale;
        for (int threads = 1; threads <= 2; threads++) {
            tg_pool *pool = tg_pool_create(threads);
            tg_kernel_args a = {.node = y, .in = {xf}, .out = out, .pool = pool};
            tg_backend_cpu.kernel(TG_OP_ACTIVATION)->forward(&a);
            for (int k = 0; k < N_X; k++)
                if (!(fabs(out[k] - want[f][0][k]) <= 4e-7 * (1 + fabs(want[f][0][k]))))
                    TG_CHECK_NEAR(out[k], want[f][0][k], 4e-7 * (1 + fabs(want[f][0][k])));
            a = (tg_kernel_args){.node = d, .in = {dyf, xf}, .out = out, .pool = pool};
            tg_backend_cpu.kernel(TG_OP_ACTIVATION_BWD)->forward(&a);
            for (int k = 0; k < N_X; k++)
                TG_CHECK_NEAR(out[k], want[f][1][k], 4e-7 * (1 + fabs(want[f][1][k])));
            tg_pool_destroy(pool);
        }
        /* the reference kernels, in double from the same float inputs */
        double outd[N_X];
        tg_ref_args r = {.node = y, .in = {xd}, .out = outd};
        tg_op_get(TG_OP_ACTIVATION)->reference(&r);
        for (int k = 0; k < N_X; k++)
            TG_CHECK_NEAR(outd[k], want[f][0][k], 1e-7 * (1 + fabs(want[f][0][k])));
        r = (tg_ref_args){.node = d, .in = {dyd, xd}, .out = outd};
        tg_op_get(TG_OP_ACTIVATION_BWD)->reference(&r);
        for (int k = 0; k < N_X; k++)
            TG_CHECK_NEAR(outd[k], want[f][1][k], 1e-7 * (1 + fabs(want[f][1][k])));
        tg_graph_destroy(g);
    }
}

/* Hard sigmoid and hard swish's vectorised loops give fmaxf(0, fminf(1, u))
 * bit for bit, the formula they replaced (training must not move): signed
 * zeros, NaN, infinities, the kinks and a run of ordinary values, at odd
 * lengths (the vector loops' tails), with ONNX's constants and others. */
static void test_clip_bit_exact(void)
{
    enum { N = 1037 };
    static float x[N], out[N];
    const float special[] = {0.0f,  -0.0f, NAN,   -NAN,   INFINITY, -INFINITY, 3.0f,
                             -3.0f, 6.0f,  -6.0f, 1e-45f, -1e-45f,  2.5f,      -2.5f};
    for (int i = 0; i < N; i++)
        x[i] = i < 14 ? special[i] : (float)((i * 7919) % 2001 - 1000) / 97.0f;
    const float ab[][2] = {{1.0f / 6.0f, 0.5f}, {0.2f, 0.5f}, {-0.3f, -0.0f}, {0.25f, -0.0f}};
    for (int k = 0; k < 5; k++) {
        tg_graph *g = tg_graph_create();
        tg_tensor *in = tg_input(g, "x", TG_F32, tg_shape1(N - k));
        tg_tensor *y = k < 4 ? tg_hard_sigmoid(g, in, ab[k][0], ab[k][1]) : tg_hard_swish(g, in);
        TG_CHECK_OK(tg_graph_status(g));
        tg_kernel_args a = {.node = y, .in = {x}, .out = out};
        if (y)
            tg_backend_cpu.kernel(TG_OP_ACTIVATION)->forward(&a);
        for (int i = 0; y && i < N - k; i++) {
            volatile float u = k < 4 ? ab[k][0] * x[i] + ab[k][1] : x[i] / 6.0f + 0.5f;
            float c = fmaxf(0.0f, fminf(1.0f, u)), w = k < 4 ? c : x[i] * c;
            if (memcmp(&w, &out[i], sizeof w) != 0 && !(isnan(w) && isnan(out[i]))) {
                tg_test_fail(__FILE__, __LINE__, "case %d, x %a: %a, wanted %a", k, (double)x[i],
                             (double)out[i], (double)w);
                break;
            }
        }
        tg_graph_destroy(g);
    }
}

/* Bad constants are refused naming the function; a second derivative that
 * is not implemented is refused naming the node and the function. */
static void test_errors(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(4));
    TG_CHECK(tg_hard_sigmoid(g, x, NAN, 0.5f) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "hard_sigmoid: alpha nan") != NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape1(4));
    TG_CHECK(tg_celu(g, x, 0.0f) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "celu: alpha is 0") != NULL);
    tg_graph_destroy(g);
    /* d/dx of mish's backward: refused */
    g = tg_graph_create();
    tg_tensor *w = tg_param(g, "w", tg_shape1(4), (tg_init){TG_INIT_UNIFORM, -1, 1});
    tg_tensor *dy = tg_param(g, "dy", tg_shape1(4), (tg_init){TG_INIT_UNIFORM, -1, 1});
    tg_tensor *y = tg_mish(g, w);
    tg_tensor *d = tg_node_create(g, TG_OP_ACTIVATION_BWD, 2, (tg_tensor *[]){dy, w}, &y->p);
    tg_tensor *loss = tg_reduce_sum(g, d, 1, false);
    TG_CHECK(tg_graph_backward(g, loss) == TG_ERR_UNSUPPORTED);
    TG_CHECK(strstr(tg_error_message(), "the second derivative of mish is not implemented") !=
             NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape1(4));
    TG_CHECK(tg_shrink(g, x, -1.0f, 0.0f) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "shrink: lambd -1, bias 0; give finite values") != NULL);
    tg_graph_destroy(g);
    /* an integer input is refused naming the function */
    g = tg_graph_create();
    x = tg_input(g, "ids", TG_I32, tg_shape1(4));
    TG_CHECK(tg_floor(g, x) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "input 'ids' is i32; floor takes f32") != NULL);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_gradcheck);
    TG_RUN(test_kernels);
    TG_RUN(test_against_pytorch);
    TG_RUN(test_clip_bit_exact);
    TG_RUN(test_errors);
    return tg_test_finish();
}
