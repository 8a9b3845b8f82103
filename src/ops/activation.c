/* ops/activation.c - the activations and math functions of one tensor that
 * vision models bring (MobileNetV3's hard sigmoid and hard swish,
 * EfficientNet's SiLU, Mish, the ELU family, softplus, softsign) and ONNX's
 * element-wise math (Sign, Floor, Ceil, Round, Cos, Sin, Tan, the inverse
 * and hyperbolic functions Acos, Asin, Atan, Acosh, Asinh, Atanh, Cosh,
 * Sinh, and ThresholdedRelu and Shrink), as two ops:
 *
 *   ACTIVATION(x)          y = f(x)
 *   ACTIVATION_BWD(dy, x)  dy * f'(x)
 *
 * Params (ops/unary.h): the function (tg_act there) and its two
 * constants (hard sigmoid's alpha and beta, ELU's and CELU's alpha, SELU's
 * alpha and gamma, ThresholdedRelu's alpha, Shrink's lambd and bias). One op kind for the family
 * rather than one per function: each is a formula per element with no position in it, so the passes
 * that care (the blocked layout, bf16 staging) treat them all alike, and a new function is a case
 * here, not a new op for every pass to learn.
 *
 * Derivatives at the kinks follow PyTorch: hard sigmoid passes the gradient
 * strictly inside (-3, 3) (in general 0 < alpha x + beta < 1), hard swish's
 * is 0 below -3, x / 3 + 1 / 2 on [-3, 3) and 1 from 3 on (PyTorch's at 3), ELU/CELU/SELU take
 * the left branch at 0. Sign, Floor, Ceil and Round have gradient 0 (as
 * PyTorch's); ThresholdedRelu's is 1 strictly above alpha, Shrink's 1
 * strictly outside [-lambd, lambd]. Outside their domains (acos of 2,
 * acosh of 0.5, atanh of 1) values and gradients are NaN or infinite, as
 * the C library's. ACTIVATION_BWD is linear in dy; its derivative in x (a second
 * derivative) exists for the piecewise-linear functions (it is 0) and is
 * refused, naming the function, for the others.
 */
#include "ops/broadcast.h"
#include "ops/unary.h"

#include "core/error.h"

#include <math.h>

static const char *const act_names[TG_ACT_COUNT] = {
    "hard_sigmoid", "hard_swish", "silu",     "mish",     "elu",
    "celu",         "selu",       "softplus", "softsign", "sign",
    "floor",        "ceil",       "round",    "cos",      "sin",
    "tan",          "acos",       "asin",     "atan",     "acosh",
    "asinh",        "atanh",      "cosh",     "sinh",     "thresholded_relu",
    "shrink"};

/* Functions whose derivative is piecewise constant: ACTIVATION_BWD's own
 * derivative in x is 0 almost everywhere. */
static bool piecewise_linear(tg_act f)
{
    return f == TG_ACT_HARD_SIGMOID || f == TG_ACT_SIGN || f == TG_ACT_FLOOR || f == TG_ACT_CEIL ||
           f == TG_ACT_ROUND || f == TG_ACT_THRESHOLDED_RELU || f == TG_ACT_SHRINK;
}

/* ---- shape rules ----------------------------------------------------------------- */

static tg_status check_kind(const tg_tensor *node)
{
    if (tg_act_fn(node) < 0 || tg_act_fn(node) >= TG_ACT_COUNT)
        return tg_error(TG_ERR_INVALID_ARG, "activation kind %lld (0 to %d)",
                        (long long)tg_act_fn(node), TG_ACT_COUNT - 1);
    return TG_OK;
}

static tg_status infer_act(tg_tensor *node)
{
    TG_TRY(check_kind(node));
    if (node->n_in != 1)
        return tg_error(TG_ERR_INVALID_ARG, "takes 1 input, got %d", node->n_in);
    if (node->in[0]->dtype != TG_F32)
        return tg_error(TG_ERR_DTYPE, "input '%s' is %s; %s takes f32", node->in[0]->name,
                        tg_dtype_name(node->in[0]->dtype), act_names[tg_act_fn(node)]);
    node->dtype = TG_F32;
    node->shape = node->in[0]->shape;
    return TG_OK;
}

static tg_status infer_act_bwd(tg_tensor *node)
{
    TG_TRY(check_kind(node));
    return tg_op_infer_elementwise_grad(node, "x", "x");
}

/* FLOPs per element; a transcendental counts as 4. */
static double flops_act(const tg_tensor *node)
{
    static const double per[TG_ACT_COUNT] = {3, 4, 6, 14, 5, 6, 6, 8, 3, 1, 1, 1, 1,
                                             4, 4, 4, 4,  4, 4, 6, 6, 6, 5, 5, 1, 2};
    double bwd = node->op == TG_OP_ACTIVATION_BWD ? 2 : 0;
    return (per[tg_act_fn(node)] + bwd) * (double)tg_numel(node);
}

/* ---- the functions, in double (reference) ------------------------------------------ */

static double softplus(double x)
{
    return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

static double f_ref(tg_act f, double x, double a, double b)
{
    switch (f) {
    case TG_ACT_HARD_SIGMOID:
        return fmax(0, fmin(1, a * x + b));
    case TG_ACT_HARD_SWISH:
        return x * fmax(0, fmin(1, x / 6 + 0.5));
    case TG_ACT_SILU:
        return x / (1 + exp(-x));
    case TG_ACT_MISH:
        return x * tanh(softplus(x));
    case TG_ACT_ELU:
        return x > 0 ? x : a * expm1(x);
    case TG_ACT_CELU:
        return x > 0 ? x : a * expm1(x / a);
    case TG_ACT_SELU:
        return b * (x > 0 ? x : a * expm1(x));
    case TG_ACT_SOFTPLUS:
        return softplus(x);
    case TG_ACT_SOFTSIGN:
        return x / (1 + fabs(x));
    case TG_ACT_SIGN:
        return x > 0 ? 1 : x < 0 ? -1 : x;
    case TG_ACT_FLOOR:
        return floor(x);
    case TG_ACT_CEIL:
        return ceil(x);
    case TG_ACT_ROUND:
        return nearbyint(x); /* halves to even, as ONNX and PyTorch */
    case TG_ACT_COS:
        return cos(x);
    case TG_ACT_SIN:
        return sin(x);
    case TG_ACT_TAN:
        return tan(x);
    case TG_ACT_ACOS:
        return acos(x);
    case TG_ACT_ASIN:
        return asin(x);
    case TG_ACT_ATAN:
        return atan(x);
    case TG_ACT_ACOSH:
        return acosh(x);
    case TG_ACT_ASINH:
        return asinh(x);
    case TG_ACT_ATANH:
        return atanh(x);
    case TG_ACT_COSH:
        return cosh(x);
    case TG_ACT_SINH:
        return sinh(x);
    case TG_ACT_THRESHOLDED_RELU:
        return x > a ? x : 0;
    case TG_ACT_SHRINK:
        return x < -a ? x + b : x > a ? x - b : 0;
    default:
        TG_UNREACHABLE("activation", f);
    }
}

static double df_ref(tg_act f, double x, double a, double b)
{
    switch (f) {
    case TG_ACT_HARD_SIGMOID: {
        double v = a * x + b;
        return v > 0 && v < 1 ? a : 0;
    }
    case TG_ACT_HARD_SWISH:
        return x < -3 ? 0 : x < 3 ? x / 3 + 0.5 : 1;
    case TG_ACT_SILU: {
        double s = 1 / (1 + exp(-x));
        return s * (1 + x * (1 - s));
    }
    case TG_ACT_MISH: {
        double t = tanh(softplus(x)), s = 1 / (1 + exp(-x));
        return t + x * s * (1 - t * t);
    }
    case TG_ACT_ELU:
        return x > 0 ? 1 : a * exp(x);
    case TG_ACT_CELU:
        return x > 0 ? 1 : exp(x / a);
    case TG_ACT_SELU:
        return b * (x > 0 ? 1 : a * exp(x));
    case TG_ACT_SOFTPLUS:
        return 1 / (1 + exp(-x));
    case TG_ACT_SOFTSIGN: {
        double d = 1 + fabs(x);
        return 1 / (d * d);
    }
    case TG_ACT_COS:
        return -sin(x);
    case TG_ACT_SIN:
        return cos(x);
    case TG_ACT_TAN: {
        double t = tan(x);
        return 1 + t * t;
    }
    case TG_ACT_ACOS:
        return -1 / sqrt(1 - x * x);
    case TG_ACT_ASIN:
        return 1 / sqrt(1 - x * x);
    case TG_ACT_ATAN:
        return 1 / (1 + x * x);
    case TG_ACT_ACOSH:
        return 1 / sqrt(x * x - 1);
    case TG_ACT_ASINH:
        return 1 / sqrt(x * x + 1);
    case TG_ACT_ATANH:
        return 1 / (1 - x * x);
    case TG_ACT_COSH:
        return sinh(x);
    case TG_ACT_SINH:
        return cosh(x);
    case TG_ACT_THRESHOLDED_RELU:
        return x > a ? 1 : 0;
    case TG_ACT_SHRINK:
        return x < -a || x > a ? 1 : 0;
    case TG_ACT_SIGN:
    case TG_ACT_FLOOR:
    case TG_ACT_CEIL:
    case TG_ACT_ROUND:
        return 0;
    default:
        TG_UNREACHABLE("activation", f);
    }
}

static void ref_act(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    tg_act f = (tg_act)tg_act_fn(node);
    double pa = tg_act_a(node), pb = tg_act_b(node);
    int64_t n = tg_numel(node);
    if (node->op == TG_OP_ACTIVATION)
        for (int64_t k = 0; k < n; k++)
            a->out[k] = f_ref(f, a->in[0][k], pa, pb);
    else
        for (int64_t k = 0; k < n; k++)
            a->out[k] = a->in[0][k] * df_ref(f, a->in[1][k], pa, pb);
}

/* ---- builders and gradient rules ----------------------------------------------------- */

static tg_tensor *act(tg_graph *g, tg_act f, tg_tensor *x, float a, float b)
{
    tg_node_params p = {0};
    tg_act_set_fn(&p, f);
    tg_act_set_a(&p, a);
    tg_act_set_b(&p, b);
    return tg_node_create(g, TG_OP_ACTIVATION, 1, &x, &p);
}

static tg_tensor *act_bwd(tg_graph *g, const tg_tensor *fwd, tg_tensor *dy, tg_tensor *x)
{
    tg_node_params p = fwd->p;
    return tg_node_create(g, TG_OP_ACTIVATION_BWD, 2, (tg_tensor *[]){dy, x}, &p);
}

static tg_status bwd_act(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                         tg_tensor **din)
{
    (void)need;
    din[0] = act_bwd(g, node, dout, node->in[0]);
    return TG_OK;
}

static tg_status bwd_act_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                             tg_tensor **din)
{
    tg_act f = (tg_act)tg_act_fn(node);
    if (need[0])
        din[0] = act_bwd(g, node, dout, node->in[1]);
    if (need[1] && !piecewise_linear(f))
        return tg_error(TG_ERR_UNSUPPORTED,
                        "%s: the second derivative of %s is not implemented (only its first)",
                        node->name, act_names[f]);
    return TG_OK;
}

bool tg_is_hard_swish(const tg_tensor *node)
{
    return node->op == TG_OP_ACTIVATION && tg_act_fn(node) == TG_ACT_HARD_SWISH;
}

bool tg_is_hard_sigmoid(const tg_tensor *node)
{
    return node->op == TG_OP_ACTIVATION && tg_act_fn(node) == TG_ACT_HARD_SIGMOID;
}

tg_tensor *tg_hard_sigmoid(tg_graph *g, tg_tensor *x, float alpha, float beta)
{
    if (!isfinite(alpha) || !isfinite(beta) || alpha == 0)
        return tg_graph_fail(g, TG_ERR_INVALID_ARG,
                             "hard_sigmoid: alpha %g, beta %g; give finite values with alpha != 0 "
                             "(PyTorch's are 1/6 and 0.5)",
                             (double)alpha, (double)beta);
    return act(g, TG_ACT_HARD_SIGMOID, x, alpha, beta);
}
tg_tensor *tg_hard_swish(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_HARD_SWISH, x, 0, 0);
}
tg_tensor *tg_silu(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_SILU, x, 0, 0);
}
tg_tensor *tg_mish(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_MISH, x, 0, 0);
}
tg_tensor *tg_elu(tg_graph *g, tg_tensor *x, float alpha)
{
    if (!isfinite(alpha))
        return tg_graph_fail(g, TG_ERR_INVALID_ARG, "elu: alpha is %g; give a finite value",
                             (double)alpha);
    return act(g, TG_ACT_ELU, x, alpha, 0);
}
tg_tensor *tg_celu(tg_graph *g, tg_tensor *x, float alpha)
{
    if (!isfinite(alpha) || alpha == 0)
        return tg_graph_fail(g, TG_ERR_INVALID_ARG,
                             "celu: alpha is %g; give a finite nonzero value (1 is the default)",
                             (double)alpha);
    return act(g, TG_ACT_CELU, x, alpha, 0);
}
tg_tensor *tg_selu(tg_graph *g, tg_tensor *x, float alpha, float gamma)
{
    if (!isfinite(alpha) || !isfinite(gamma))
        return tg_graph_fail(g, TG_ERR_INVALID_ARG, "selu: alpha %g, gamma %g; give finite values",
                             (double)alpha, (double)gamma);
    return act(g, TG_ACT_SELU, x, alpha, gamma);
}
tg_tensor *tg_softplus(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_SOFTPLUS, x, 0, 0);
}
tg_tensor *tg_softsign(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_SOFTSIGN, x, 0, 0);
}
tg_tensor *tg_sign(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_SIGN, x, 0, 0);
}
tg_tensor *tg_floor(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_FLOOR, x, 0, 0);
}
tg_tensor *tg_ceil(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_CEIL, x, 0, 0);
}
tg_tensor *tg_round(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_ROUND, x, 0, 0);
}
tg_tensor *tg_cos(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_COS, x, 0, 0);
}
tg_tensor *tg_sin(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_SIN, x, 0, 0);
}
tg_tensor *tg_tan(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_TAN, x, 0, 0);
}

tg_tensor *tg_acos(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_ACOS, x, 0, 0);
}
tg_tensor *tg_asin(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_ASIN, x, 0, 0);
}
tg_tensor *tg_atan(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_ATAN, x, 0, 0);
}
tg_tensor *tg_acosh(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_ACOSH, x, 0, 0);
}
tg_tensor *tg_asinh(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_ASINH, x, 0, 0);
}
tg_tensor *tg_atanh(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_ATANH, x, 0, 0);
}
tg_tensor *tg_cosh(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_COSH, x, 0, 0);
}
tg_tensor *tg_sinh(tg_graph *g, tg_tensor *x)
{
    return act(g, TG_ACT_SINH, x, 0, 0);
}
tg_tensor *tg_thresholded_relu(tg_graph *g, tg_tensor *x, float alpha)
{
    if (isnan(alpha))
        return tg_graph_fail(g, TG_ERR_INVALID_ARG,
                             "thresholded_relu: alpha is nan; give a number (1 is ONNX's default)");
    return act(g, TG_ACT_THRESHOLDED_RELU, x, alpha, 0);
}
tg_tensor *tg_shrink(tg_graph *g, tg_tensor *x, float lambd, float bias)
{
    if (!(lambd >= 0) || !isfinite(lambd) || !isfinite(bias))
        return tg_graph_fail(g, TG_ERR_INVALID_ARG,
                             "shrink: lambd %g, bias %g; give finite values with lambd >= 0",
                             (double)lambd, (double)bias);
    return act(g, TG_ACT_SHRINK, x, lambd, bias);
}

const tg_op_def tg_opdef_ACTIVATION = {.infer = infer_act,
                                       .flops = flops_act,
                                       .reference = ref_act,
                                       .backward = bwd_act,
                                       .flags = TG_OPF_ELEMENTWISE,
                                       .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_ACTIVATION_BWD = {.infer = infer_act_bwd,
                                           .flops = flops_act,
                                           .reference = ref_act,
                                           .backward = bwd_act_bwd,
                                           .flags = TG_OPF_ELEMENTWISE,
                                           .memory = TG_OP_OWN_STORAGE};
