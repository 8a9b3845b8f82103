/* ops/unary.c - elementwise functions of one tensor and their derivatives:
 * the activations RELU, GELU (exact erf form, PyTorch's default), SIGMOID,
 * TANH, LEAKY_RELU and CLIP (ONNX Clip, ReLU6, PyTorch's hardtanh/clamp),
 * the math functions ERF, EXP, LOG, SQRT, NEG, ABS, RECIPROCAL, SCALE
 * (x * scale + shift), and the _BWD ops that apply derivatives.
 *
 * Backward ops take (dy, x) when the derivative needs the input (RELU_BWD,
 * GELU_BWD, ERF_BWD, ABS_BWD) and (dy, y) when the output is enough
 * (SIGMOID_BWD, TANH_BWD, CLIP_BWD; LEAKY_RELU_BWD when alpha >= 0), so
 * those ops need not keep their input alive for the backward pass. EXP,
 * LOG, SQRT, NEG and RECIPROCAL differentiate through MUL/DIV/SCALE.
 *
 * Params: named in ops/unary.h (SCALE's scale and shift, LEAKY_RELU's
 * alpha, CLIP's bounds, GELU's form and GELU_BWD's order, ROUND_HALF's
 * type). GELU's tanh form is
 *     0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 * (PyTorch's gelu(approximate='tanh'), GPT-2's and BERT's original).
 */
#include "ops/broadcast.h"
#include "ops/unary.h"

#include "core/convert.h"
#include "core/error.h"

#include <math.h>

#define INV_SQRT2 0.70710678118654752440
#define INV_SQRT_2PI 0.39894228040143267794
#define TWO_OVER_SQRT_PI 1.12837916709551257390
#define SQRT_2_OVER_PI 0.79788456080286535588
#define GELU_TANH_A 0.044715

/* ---- shape rules ---------------------------------------------------------------- */

static tg_status infer_unary(tg_tensor *node)
{
    if (node->n_in != 1)
        return tg_error(TG_ERR_INVALID_ARG, "takes 1 input, got %d", node->n_in);
    if (node->in[0]->dtype != TG_F32)
        return tg_error(TG_ERR_DTYPE, "input '%s' is %s; this op takes f32", node->in[0]->name,
                        tg_dtype_name(node->in[0]->dtype));
    node->dtype = TG_F32;
    node->shape = node->in[0]->shape;
    return TG_OK;
}

/* GELU: the form, 0 (erf) or 1 (tanh). */
static tg_status infer_gelu(tg_tensor *node)
{
    TG_TRY(infer_unary(node));
    if (tg_gelu_form(node) < 0 || tg_gelu_form(node) > 1)
        return tg_error(TG_ERR_INVALID_ARG, "gelu form %lld (0: erf, 1: tanh)",
                        (long long)tg_gelu_form(node));
    return TG_OK;
}

/* ROUND_HALF: rounds to TG_F16 or TG_BF16 values. */
static tg_status infer_round_half(tg_tensor *node)
{
    TG_TRY(infer_unary(node));
    if (tg_round_half_to(node) != TG_F16 && tg_round_half_to(node) != TG_BF16)
        return tg_error(TG_ERR_DTYPE, "rounds to f16 or bf16 values, not %s",
                        tg_dtype_name((tg_dtype)tg_round_half_to(node)));
    return TG_OK;
}

/* x rounded to the nearest value of a half type (as a cast there and back). */
void tg_round_half(const float *x, float *o, int64_t n, tg_dtype to)
{
    uint16_t h[256];
    for (int64_t i = 0; i < n; i += 256) {
        size_t k = (size_t)(n - i < 256 ? n - i : 256);
        tg_convert(x + i, TG_F32, h, to, k);
        tg_convert(h, to, o + i, TG_F32, k);
    }
}

static tg_status infer_bwd(tg_tensor *node)
{
    TG_TRY(tg_op_infer_elementwise_grad(node, "x or y", "its operand"));
    if (node->op == TG_OP_GELU_BWD && (tg_gelu_order(node) < 0 || tg_gelu_order(node) > 1))
        return tg_error(TG_ERR_UNSUPPORTED, "derivative order %lld of gelu (only 1 and 2 exist)",
                        (long long)tg_gelu_order(node) + 1);
    if (node->op == TG_OP_GELU_BWD && (tg_gelu_form(node) < 0 || tg_gelu_form(node) > 1))
        return tg_error(TG_ERR_INVALID_ARG, "gelu form %lld (0: erf, 1: tanh)",
                        (long long)tg_gelu_form(node));
    return TG_OK;
}

/* FLOPs per element; a transcendental (exp, erf, tanh) counts as 4. */
static double per_elem(const tg_tensor *node)
{
    switch (node->op) {
    case TG_OP_RELU:
        return 1;
    case TG_OP_RELU_BWD:
        return 1;
    case TG_OP_GELU:
        return 8;
    case TG_OP_GELU_BWD:
        return 14;
    case TG_OP_SIGMOID:
        return 6;
    case TG_OP_SIGMOID_BWD:
        return 3;
    case TG_OP_TANH:
        return 4;
    case TG_OP_TANH_BWD:
        return 3;
    case TG_OP_SCALE:
        return 2;
    case TG_OP_ERF:
        return 4;
    case TG_OP_ERF_BWD:
        return 7;
    case TG_OP_EXP:
        return 4;
    case TG_OP_LOG:
        return 4;
    case TG_OP_SQRT:
        return 4;
    case TG_OP_LEAKY_RELU:
        return 2;
    case TG_OP_LEAKY_RELU_BWD:
        return 2;
    case TG_OP_CLIP:
        return 2;
    case TG_OP_CLIP_BWD:
        return 2;
    case TG_OP_NEG:
    case TG_OP_ABS:
    case TG_OP_ABS_BWD:
    case TG_OP_RECIPROCAL:
    case TG_OP_ROUND_HALF:
        return 1;
    default:
        TG_UNREACHABLE_OP(node->op);
    }
}

static double flops(const tg_tensor *node)
{
    return per_elem(node) * (double)tg_numel(node);
}

/* The tanh form: u = c (x + a x^3), t = tanh(u), gelu = x (1 + t) / 2,
 * gelu' = (1 + t) / 2 + x (1 - t^2) u' / 2, gelu'' = (1 - t^2) u'
 * + x (1 - t^2) (u'' - 2 t u'^2) / 2, u' = c (1 + 3 a x^2), u'' = 6 a c x. */
static double gelu_tanh_d1(double x)
{
    double t = tanh(SQRT_2_OVER_PI * (x + GELU_TANH_A * x * x * x));
    double du = SQRT_2_OVER_PI * (1 + 3 * GELU_TANH_A * x * x);
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du;
}

double tg_gelu_tanh_d2(double x)
{
    double t = tanh(SQRT_2_OVER_PI * (x + GELU_TANH_A * x * x * x));
    double du = SQRT_2_OVER_PI * (1 + 3 * GELU_TANH_A * x * x);
    double ddu = 6 * GELU_TANH_A * SQRT_2_OVER_PI * x;
    return (1 - t * t) * du + 0.5 * x * (1 - t * t) * (ddu - 2 * t * du * du);
}

/* ---- reference kernels ---------------------------------------------------------------- */

/* u = the first input, v = the second (or the first again), s, b: ops/unary.h. */
static double ref_math(tg_op op, double u, double v, double s, double b)
{
    switch (op) {
    case TG_OP_ERF:
        return erf(u);
    case TG_OP_ERF_BWD:
        return u * TWO_OVER_SQRT_PI * exp(-v * v);
    case TG_OP_EXP:
        return exp(u);
    case TG_OP_LOG:
        return log(u);
    case TG_OP_SQRT:
        return sqrt(u);
    case TG_OP_NEG:
        return -u;
    case TG_OP_ABS:
        return fabs(u);
    case TG_OP_ABS_BWD:
        return v > 0 ? u : v < 0 ? -u : 0;
    case TG_OP_RECIPROCAL:
        return 1 / u;
    case TG_OP_LEAKY_RELU:
        return u > 0 ? u : u * s;
    case TG_OP_LEAKY_RELU_BWD:
        return v > 0 ? u : u * s;
    case TG_OP_CLIP: {
        double r = u < s ? s : u;
        return r > b ? b : r;
    }
    case TG_OP_CLIP_BWD:
        return v > s && v < b ? u : 0;
    default: /* an op of this file left out of ref_map and here */
        TG_UNREACHABLE_OP(op);
    }
}

static void ref_map(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    const double *x = a->in[0], *y = node->n_in > 1 ? a->in[1] : a->in[0];
    double s = tg_unary_s(node), b = tg_unary_b(node);
    int order = (int)(node->op == TG_OP_ROUND_HALF ? tg_round_half_to(node) : tg_gelu_order(node));
    int64_t n = tg_numel(node);
    for (int64_t k = 0; k < n; k++) {
        double v = y[k], r;
        switch (node->op) {
        case TG_OP_RELU:
            r = x[k] < 0 ? 0 : x[k];
            break;
        case TG_OP_RELU_BWD:
            r = v > 0 ? x[k] : 0;
            break;
        case TG_OP_GELU:
            r = tg_gelu_form(node)
                    ? 0.5 * x[k] *
                          (1 + tanh(SQRT_2_OVER_PI * (x[k] + GELU_TANH_A * x[k] * x[k] * x[k])))
                    : 0.5 * x[k] * (1 + erf(x[k] * INV_SQRT2));
            break;
        case TG_OP_GELU_BWD: {
            double pdf = INV_SQRT_2PI * exp(-0.5 * v * v);
            if (tg_gelu_form(node))
                r = x[k] * (order == 0 ? gelu_tanh_d1(v) : tg_gelu_tanh_d2(v));
            else
                r = order == 0 ? x[k] * (0.5 * (1 + erf(v * INV_SQRT2)) + v * pdf)
                               : x[k] * pdf * (2 - v * v);
            break;
        }
        case TG_OP_SIGMOID:
            r = 1 / (1 + exp(-x[k]));
            break;
        case TG_OP_SIGMOID_BWD:
            r = x[k] * v * (1 - v);
            break;
        case TG_OP_TANH:
            r = tanh(x[k]);
            break;
        case TG_OP_TANH_BWD:
            r = x[k] * (1 - v * v);
            break;
        case TG_OP_SCALE:
            r = x[k] * s + b;
            break;
        case TG_OP_ROUND_HALF: {
            float f = (float)x[k], g;
            tg_round_half(&f, &g, 1, (tg_dtype)order);
            r = g;
            break;
        }
        default:
            r = ref_math(node->op, x[k], v, s, b);
            break;
        }
        a->out[k] = r;
    }
}

/* ---- builders ------------------------------------------------------------------------ */

static tg_tensor *unary(tg_graph *g, tg_op op, tg_tensor *x, const tg_node_params *p)
{
    return tg_node_create(g, op, 1, &x, p);
}

static tg_tensor *bwd_op(tg_graph *g, tg_op op, tg_tensor *dy, tg_tensor *xy, int order)
{
    tg_node_params p = {0};
    tg_gelu_set_order(&p, order);
    return tg_node_create(g, op, 2, (tg_tensor *[]){dy, xy}, &p);
}

/* A backward op that keeps the forward node's float params (alpha, bounds). */
static tg_tensor *bwd_op_f(tg_graph *g, tg_op op, tg_tensor *dy, tg_tensor *xy,
                           const tg_tensor *fwd)
{
    tg_node_params p = {0};
    tg_unary_set_s(&p, tg_unary_s(fwd));
    tg_unary_set_b(&p, tg_unary_b(fwd));
    return tg_node_create(g, op, 2, (tg_tensor *[]){dy, xy}, &p);
}

tg_tensor *tg_relu(tg_graph *g, tg_tensor *x)
{
    return unary(g, TG_OP_RELU, x, NULL);
}
tg_tensor *tg_gelu_tanh(tg_graph *g, tg_tensor *x)
{
    tg_node_params p = {0};
    tg_gelu_set_form(&p, 1);
    return unary(g, TG_OP_GELU, x, &p);
}
tg_tensor *tg_gelu(tg_graph *g, tg_tensor *x)
{
    return unary(g, TG_OP_GELU, x, NULL);
}
tg_tensor *tg_sigmoid(tg_graph *g, tg_tensor *x)
{
    return unary(g, TG_OP_SIGMOID, x, NULL);
}
tg_tensor *tg_tanh(tg_graph *g, tg_tensor *x)
{
    return unary(g, TG_OP_TANH, x, NULL);
}

tg_tensor *tg_erf(tg_graph *g, tg_tensor *x)
{
    return unary(g, TG_OP_ERF, x, NULL);
}
tg_tensor *tg_exp(tg_graph *g, tg_tensor *x)
{
    return unary(g, TG_OP_EXP, x, NULL);
}
tg_tensor *tg_log(tg_graph *g, tg_tensor *x)
{
    return unary(g, TG_OP_LOG, x, NULL);
}
tg_tensor *tg_sqrt(tg_graph *g, tg_tensor *x)
{
    return unary(g, TG_OP_SQRT, x, NULL);
}
tg_tensor *tg_cast_half(tg_graph *g, tg_tensor *x, tg_dtype to)
{
    tg_node_params p = {0};
    tg_round_half_set_to(&p, to);
    return unary(g, TG_OP_ROUND_HALF, x, &p);
}
tg_tensor *tg_neg(tg_graph *g, tg_tensor *x)
{
    return unary(g, TG_OP_NEG, x, NULL);
}
tg_tensor *tg_abs(tg_graph *g, tg_tensor *x)
{
    return unary(g, TG_OP_ABS, x, NULL);
}
tg_tensor *tg_reciprocal(tg_graph *g, tg_tensor *x)
{
    return unary(g, TG_OP_RECIPROCAL, x, NULL);
}

tg_tensor *tg_leaky_relu(tg_graph *g, tg_tensor *x, float alpha)
{
    if (!isfinite(alpha))
        return tg_graph_fail(g, TG_ERR_INVALID_ARG,
                             "leaky_relu: alpha is %g; give a finite slope (0.01 is PyTorch's "
                             "default)",
                             (double)alpha);
    tg_node_params p = {0};
    tg_unary_set_s(&p, alpha);
    return unary(g, TG_OP_LEAKY_RELU, x, &p);
}

tg_tensor *tg_clip(tg_graph *g, tg_tensor *x, float min, float max)
{
    if (isnan(min) || isnan(max))
        return tg_graph_fail(g, TG_ERR_INVALID_ARG,
                             "clip: bounds [%g, %g] contain NaN; pass -INFINITY or INFINITY for "
                             "no bound",
                             (double)min, (double)max);
    tg_node_params p = {0};
    tg_unary_set_s(&p, min);
    tg_unary_set_b(&p, max);
    return unary(g, TG_OP_CLIP, x, &p);
}

tg_tensor *tg_scale(tg_graph *g, tg_tensor *x, float scale, float shift)
{
    tg_node_params p = {0};
    tg_unary_set_s(&p, scale);
    tg_unary_set_b(&p, shift);
    return unary(g, TG_OP_SCALE, x, &p);
}

/* ---- gradient rules --------------------------------------------------------------------- */

/* relu_bwd reads the output: y > 0 exactly where x > 0, and the output is
 * what the next layer keeps anyway, so the input (a batch-norm output,
 * typically) need not live until the backward pass. */
static tg_status bwd_relu(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                          tg_tensor **din)
{
    din[0] = bwd_op(g, TG_OP_RELU_BWD, dout, node, 0);
    return TG_OK;
}

/* relu_bwd(dy, x) is linear in dy; its derivative in x is 0 almost everywhere. */
static tg_status bwd_relu_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                              tg_tensor **din)
{
    if (need[0])
        din[0] = bwd_op(g, TG_OP_RELU_BWD, dout, node->in[1], 0);
    return TG_OK;
}

/* dy * gelu^(order+1)(x) in the given form. */
static tg_tensor *gelu_bwd_op(tg_graph *g, tg_tensor *dy, tg_tensor *x, int order, int64_t form)
{
    tg_node_params p = {0};
    tg_gelu_set_order(&p, order);
    tg_gelu_set_form(&p, form);
    return tg_node_create(g, TG_OP_GELU_BWD, 2, (tg_tensor *[]){dy, x}, &p);
}

static tg_status bwd_gelu(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                          tg_tensor **din)
{
    din[0] = gelu_bwd_op(g, dout, node->in[0], 0, tg_gelu_form(node));
    return TG_OK;
}

/* gelu_bwd_k(dy, x) = dy * gelu^(k+1)(x): linear in dy; in x it is
 * dy * gelu^(k+2)(x), the next order. */
static tg_status bwd_gelu_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                              tg_tensor **din)
{
    int order = (int)tg_gelu_order(node);
    tg_tensor *dy = node->in[0], *x = node->in[1];
    if (need[0])
        din[0] = gelu_bwd_op(g, dout, x, order, tg_gelu_form(node));
    if (need[1]) {
        if (order >= 1)
            return tg_error(TG_ERR_UNSUPPORTED, "%s: derivative order %d of gelu is not available",
                            node->name, order + 3);
        din[1] = gelu_bwd_op(g, tg_mul(g, dout, dy), x, order + 1, tg_gelu_form(node));
    }
    return TG_OK;
}

static tg_status bwd_sigmoid(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                             tg_tensor **din)
{
    din[0] = bwd_op(g, TG_OP_SIGMOID_BWD, dout, node, 0);
    return TG_OK;
}

/* dy * y * (1 - y): in y the derivative is dy * (1 - 2y). */
static tg_status bwd_sigmoid_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                                 tg_tensor **din)
{
    tg_tensor *dy = node->in[0], *y = node->in[1];
    if (need[0])
        din[0] = bwd_op(g, TG_OP_SIGMOID_BWD, dout, y, 0);
    if (need[1])
        din[1] = tg_mul(g, tg_mul(g, dout, dy), tg_scale(g, y, -2.0f, 1.0f));
    return TG_OK;
}

static tg_status bwd_tanh(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                          tg_tensor **din)
{
    din[0] = bwd_op(g, TG_OP_TANH_BWD, dout, node, 0);
    return TG_OK;
}

/* dy * (1 - y^2): in y the derivative is dy * (-2y). */
static tg_status bwd_tanh_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                              tg_tensor **din)
{
    tg_tensor *dy = node->in[0], *y = node->in[1];
    if (need[0])
        din[0] = bwd_op(g, TG_OP_TANH_BWD, dout, y, 0);
    if (need[1])
        din[1] = tg_mul(g, tg_mul(g, dout, dy), tg_scale(g, y, -2.0f, 0.0f));
    return TG_OK;
}

static tg_status bwd_scale(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                           tg_tensor **din)
{
    din[0] = tg_scale(g, dout, tg_unary_s(node), 0.0f);
    return TG_OK;
}

/* erf'(x) = 2/sqrt(pi) exp(-x^2). */
static tg_status bwd_erf(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                         tg_tensor **din)
{
    din[0] = bwd_op(g, TG_OP_ERF_BWD, dout, node->in[0], 0);
    return TG_OK;
}

/* erf_bwd(dy, x) = dy erf'(x): linear in dy; in x, d/dx erf'(x) = -2x erf'(x),
 * so the gradient is erf_bwd(dout * dy * (-2x), x). */
static tg_status bwd_erf_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                             tg_tensor **din)
{
    tg_tensor *dy = node->in[0], *x = node->in[1];
    if (need[0])
        din[0] = bwd_op(g, TG_OP_ERF_BWD, dout, x, 0);
    if (need[1])
        din[1] =
            bwd_op(g, TG_OP_ERF_BWD, tg_mul(g, tg_mul(g, dout, dy), tg_scale(g, x, -2, 0)), x, 0);
    return TG_OK;
}

/* d exp(x) = exp(x): read the output. */
static tg_status bwd_exp(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                         tg_tensor **din)
{
    din[0] = tg_mul(g, dout, node);
    return TG_OK;
}

static tg_status bwd_log(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                         tg_tensor **din)
{
    din[0] = tg_div(g, dout, node->in[0]);
    return TG_OK;
}

/* d sqrt(x) = 1 / (2 sqrt(x)): read the output (infinite at 0, as PyTorch). */
static tg_status bwd_sqrt(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                          tg_tensor **din)
{
    din[0] = tg_div(g, tg_scale(g, dout, 0.5f, 0.0f), node);
    return TG_OK;
}

static tg_status bwd_neg(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                         tg_tensor **din)
{
    din[0] = tg_neg(g, dout);
    return TG_OK;
}

/* A cast's gradient is the incoming one (PyTorch casts it back). */
static tg_status bwd_round_half(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                                tg_tensor **din)
{
    (void)g, (void)node, (void)need;
    din[0] = dout;
    return TG_OK;
}

static tg_status bwd_abs(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                         tg_tensor **din)
{
    din[0] = bwd_op(g, TG_OP_ABS_BWD, dout, node->in[0], 0);
    return TG_OK;
}

/* abs_bwd(dy, x) = dy sign(x): linear in dy, 0 almost everywhere in x. */
static tg_status bwd_abs_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                             tg_tensor **din)
{
    if (need[0])
        din[0] = bwd_op(g, TG_OP_ABS_BWD, dout, node->in[1], 0);
    return TG_OK;
}

/* d (1/x) = -1/x^2 = -y^2: read the output. */
static tg_status bwd_reciprocal(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                                tg_tensor **din)
{
    din[0] = tg_neg(g, tg_mul(g, dout, tg_mul(g, node, node)));
    return TG_OK;
}

/* With alpha >= 0, y > 0 exactly where x > 0, so the output decides (and
 * the input need not live); a negative alpha flips the sign of y for x < 0,
 * so then the input decides. */
static tg_status bwd_leaky_relu(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                                tg_tensor **din)
{
    tg_tensor *xy = tg_unary_s(node) >= 0 ? node : node->in[0];
    din[0] = bwd_op_f(g, TG_OP_LEAKY_RELU_BWD, dout, xy, node);
    return TG_OK;
}

/* Both _BWD ops below are linear in dy and piecewise constant in x or y. */
static tg_status bwd_masked_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                                tg_tensor **din)
{
    if (need[0])
        din[0] = bwd_op_f(g, node->op, dout, node->in[1], node);
    return TG_OK;
}

/* Gradient 1 strictly inside (min, max), 0 elsewhere (PyTorch's hardtanh;
 * torch.clamp passes the gradient at the bounds themselves as well). */
static tg_status bwd_clip(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                          tg_tensor **din)
{
    din[0] = bwd_op_f(g, TG_OP_CLIP_BWD, dout, node, node);
    return TG_OK;
}

/* Every op here is one formula per element (fwd_map): element-wise. */
#define UNARY_DEF(E, INFER, BWD, FLAGS)                                                            \
    const tg_op_def tg_opdef_##E = {.infer = INFER,                                                \
                                    .flops = flops,                                                \
                                    .reference = ref_map,                                          \
                                    .backward = BWD,                                               \
                                    .flags = TG_OPF_ELEMENTWISE | (FLAGS),                         \
                                    .memory = TG_OP_OWN_STORAGE}

UNARY_DEF(RELU, infer_unary, bwd_relu, 0);
UNARY_DEF(RELU_BWD, infer_bwd, bwd_relu_bwd, 0);
UNARY_DEF(GELU, infer_gelu, bwd_gelu, 0);
UNARY_DEF(GELU_BWD, infer_bwd, bwd_gelu_bwd, 0);
UNARY_DEF(SIGMOID, infer_unary, bwd_sigmoid, 0);
UNARY_DEF(SIGMOID_BWD, infer_bwd, bwd_sigmoid_bwd, 0);
UNARY_DEF(TANH, infer_unary, bwd_tanh, 0);
UNARY_DEF(TANH_BWD, infer_bwd, bwd_tanh_bwd, 0);
UNARY_DEF(SCALE, infer_unary, bwd_scale, 0);
UNARY_DEF(ERF, infer_unary, bwd_erf, 0);
UNARY_DEF(ERF_BWD, infer_bwd, bwd_erf_bwd, 0);
UNARY_DEF(EXP, infer_unary, bwd_exp, 0);
UNARY_DEF(LOG, infer_unary, bwd_log, 0);
UNARY_DEF(SQRT, infer_unary, bwd_sqrt, 0);
UNARY_DEF(NEG, infer_unary, bwd_neg, 0);
UNARY_DEF(ROUND_HALF, infer_round_half, bwd_round_half, 0);
UNARY_DEF(ABS, infer_unary, bwd_abs, 0);
UNARY_DEF(ABS_BWD, infer_bwd, bwd_abs_bwd, 0);
UNARY_DEF(RECIPROCAL, infer_unary, bwd_reciprocal, 0);
UNARY_DEF(LEAKY_RELU, infer_unary, bwd_leaky_relu, 0);
UNARY_DEF(LEAKY_RELU_BWD, infer_bwd, bwd_masked_bwd, 0);
UNARY_DEF(CLIP, infer_unary, bwd_clip, 0);
UNARY_DEF(CLIP_BWD, infer_bwd, bwd_masked_bwd, 0);
