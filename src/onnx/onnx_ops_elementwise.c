/* onnx/onnx_ops_elementwise.c - ONNX element-wise ops (arithmetic,
 * activations, Clip, variadic Max/Min/Sum/Mean, Softmax) mapped onto the
 * graph builder; constants fold at import. The whole activation family is
 * here: Relu, LeakyRelu, Sigmoid, Tanh beside MobileNetV3's HardSigmoid and
 * HardSwish, Mish, Elu, Celu, Selu, Softplus, Softsign, PRelu,
 * ThresholdedRelu and Shrink (tg_hard_sigmoid and its siblings,
 * ops/activation.c; PRelu is relu(x) - slope * relu(-x), exact for either
 * sign and broadcasting the slope as ONNX does), with ONNX's element-wise
 * math (Sign, Floor, Ceil, Round, the trigonometric and hyperbolic
 * functions) and SiLU's Sigmoid -> Mul pattern.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"
#include "core/check.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- elementwise --------------------------------------------------------- */

typedef enum { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_MAX, BIN_MIN, BIN_POW } bin_kind;

static double fold_one(bin_kind k, double x, double y, bool integer)
{
    switch (k) {
    case BIN_ADD:
        return x + y;
    case BIN_SUB:
        return x - y;
    case BIN_MUL:
        return x * y;
    case BIN_MAX:
        return isnan(x) || isnan(y) ? NAN : x > y ? x : y;
    case BIN_MIN:
        return isnan(x) || isnan(y) ? NAN : x < y ? x : y;
    case BIN_POW: /* an integer base keeps its type: truncated, as numpy's astype */
        return integer ? trunc(pow(x, y)) : pow(x, y);
    case BIN_DIV:
        if (integer)
            return y != 0 ? (double)((int64_t)x / (int64_t)y) : 0.0;
        return x / y;
    default:
        TG_UNREACHABLE("binary kind", k);
    }
}

static tg_status fold_data(onnx_builder *b, bin_kind k, const tg_onnx_data *x,
                           const tg_onnx_data *y, tg_onnx_data *out);

/* Arithmetic on constants (broadcast as NumPy does): inputs i and j. */
static tg_status fold_pair(onnx_builder *b, bin_kind k, int i, int j, tg_onnx_data *out)
{
    const tg_onnx_data *x = ob_const(b, i), *y = x ? ob_const(b, j) : NULL;
    if (!y)
        return TG_ERR_UNSUPPORTED;
    return fold_data(b, k, x, y, out);
}

static tg_status fold_binary(onnx_builder *b, bin_kind k)
{
    tg_onnx_data d;
    TG_TRY(fold_pair(b, k, 0, 1, &d));
    return ob_set_const(b, 0, &d);
}

/* x op y into *out (a new constant). */
static tg_status fold_data(onnx_builder *b, bin_kind k, const tg_onnx_data *x,
                           const tg_onnx_data *y, tg_onnx_data *out)
{
    if (!y)
        return TG_ERR_UNSUPPORTED;
    /* NumPy broadcasting: Swin's window mask adds a [14, 1] column of row
     * indices to a row of 14 column indices (the same count, not the same
     * shape); a scalar minus [1] is [1], as ConstantOfShape's shape must be */
    tg_shape o, in[2] = {tg_shape_of(x->ndim, x->dim), tg_shape_of(y->ndim, y->dim)};
    TG_TRY(ob_bcast_shape(b, 2, in, &o));
    /* Pow's result has its base's type */
    bool is_float = k == BIN_POW ? x->f != NULL : x->f || y->f;
    if (k == BIN_DIV && !is_float)
        for (int64_t i = 0; i < y->n; i++)
            if (y->i[i] == 0)
                return ob_fail(b, TG_ERR_NUMERIC, "integer division by zero");
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, is_float, o.ndim, o.dim, &d));
    d.elem_type = k == BIN_POW || !y->f || x->f ? x->elem_type : y->elem_type;
    for (int64_t i = 0; i < d.n; i++) {
        double u = ob_get(x, ob_bcast_at(o, in[0], i)), v = ob_get(y, ob_bcast_at(o, in[1], i));
        ob_put(&d, i, fold_one(k, u, v, !is_float));
    }
    *out = d;
    return TG_OK;
}

static tg_status binary(onnx_builder *b, bin_kind k)
{
    TG_TRY(ob_legacy_broadcast(b));
    if (ob_is_const(b, 0) && ob_is_const(b, 1) && ob_initializer(b, 0) < 0 &&
        ob_initializer(b, 1) < 0)
        return fold_binary(b, k);
    tg_tensor *x = ob_typed_tensor(b, 0), *y = x ? ob_typed_tensor(b, 1) : NULL;
    if (!y)
        return TG_ERR_UNSUPPORTED;
    tg_tensor *(*fn[])(tg_graph *, tg_tensor *, tg_tensor *) = {tg_add, tg_sub, tg_mul, tg_div};
    bool ix = tg_tensor_dtype(x) == TG_I32, iy = tg_tensor_dtype(y) == TG_I32;
    if (!ix && !iy)
        return ob_set(b, 0, fn[k](b->g, x, y));
    if (ix != iy)
        return ob_fail(b, TG_ERR_DTYPE, "one operand is an integer tensor and the other f32");
    /* integer arithmetic (position ids, lengths) through f32: exact while
     * the values stay within 2^24, and the cast back truncates toward zero
     * as ONNX's integer Div does */
    tg_tensor *r = fn[k](b->g, tg_cast(b->g, x, TG_F32), tg_cast(b->g, y, TG_F32));
    return ob_set(b, 0, tg_cast(b->g, r, TG_I32));
}

static tg_status map_add(onnx_builder *b)
{
    return binary(b, BIN_ADD);
}
static tg_status map_sub(onnx_builder *b)
{
    return binary(b, BIN_SUB);
}
static tg_status map_mul(onnx_builder *b)
{
    return binary(b, BIN_MUL);
}
static tg_status map_div(onnx_builder *b)
{
    return binary(b, BIN_DIV);
}

static tg_status unary(onnx_builder *b, tg_tensor *(*fn)(tg_graph *, tg_tensor *))
{
    tg_tensor *x = ob_tensor(b, 0);
    return x ? ob_set(b, 0, fn(b->g, x)) : TG_ERR_UNSUPPORTED;
}

static tg_status map_relu(onnx_builder *b)
{
    return unary(b, tg_relu);
}
static tg_status map_erf(onnx_builder *b)
{
    return unary(b, tg_erf);
}
static tg_status map_exp(onnx_builder *b)
{
    return unary(b, tg_exp);
}
static tg_status map_log(onnx_builder *b)
{
    return unary(b, tg_log);
}
static tg_status map_sqrt(onnx_builder *b)
{
    return unary(b, tg_sqrt);
}
/* Neg and Abs of an integer constant (shape arithmetic: the expanded
 * LayerNormalization negates its axis count) fold, exactly. */
static tg_status fold_sign_op(onnx_builder *b, bool neg)
{
    const tg_onnx_data *c = ob_const(b, 0);
    if (!c)
        return TG_ERR_UNSUPPORTED;
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, false, c->ndim, c->dim, &d));
    d.elem_type = c->elem_type;
    for (int64_t k = 0; k < c->n; k++)
        d.i[k] = neg ? -c->i[k] : c->i[k] < 0 ? -c->i[k] : c->i[k];
    return ob_set_const(b, 0, &d);
}

static bool int_foldable(onnx_builder *b, int i)
{
    if (!ob_is_foldable(b, i))
        return false;
    const tg_onnx_data *c = ob_const(b, i);
    return c && c->i;
}

static tg_status map_neg(onnx_builder *b)
{
    return int_foldable(b, 0) ? fold_sign_op(b, true) : unary(b, tg_neg);
}
static tg_status map_abs(onnx_builder *b)
{
    return int_foldable(b, 0) ? fold_sign_op(b, false) : unary(b, tg_abs);
}
static tg_status map_reciprocal(onnx_builder *b)
{
    return unary(b, tg_reciprocal);
}

static tg_status map_leaky_relu(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    return x ? ob_set(b, 0, tg_leaky_relu(b->g, x, ob_attr_float(b, "alpha", 0.01f)))
             : TG_ERR_UNSUPPORTED;
}

/* One bound of Clip: an optional constant scalar input. */
static tg_status clip_bound(onnx_builder *b, int i, float dflt, float *out)
{
    *out = dflt;
    if (!ob_has_input(b, i))
        return TG_OK;
    const tg_onnx_data *d = ob_const(b, i);
    if (!d)
        return TG_ERR_UNSUPPORTED;
    if (d->n != 1)
        return ob_fail(b, TG_ERR_FORMAT, "input %d must be one value", i);
    *out = d->f ? d->f[0] : (float)d->i[0];
    return TG_OK;
}

/* Clip of an integer tensor (HF's QA head clamps its start and end
 * positions to the sequence length): exact as comparisons and selections
 * against the i32 bounds. */
static tg_status clip_int(onnx_builder *b, tg_tensor *x)
{
    tg_tensor *y = x;
    if (ob_has_input(b, 1)) {
        tg_tensor *lo = ob_typed_tensor(b, 1);
        if (!lo)
            return TG_ERR_UNSUPPORTED;
        y = tg_where(b->g, tg_less(b->g, y, lo), lo, y);
    }
    if (ob_has_input(b, 2)) {
        tg_tensor *hi = ob_typed_tensor(b, 2);
        if (!hi)
            return TG_ERR_UNSUPPORTED;
        y = tg_where(b->g, tg_greater(b->g, y, hi), hi, y);
    }
    return ob_set(b, 0, y);
}

/* Clip: min and max attributes before opset 11, optional inputs after. */
static tg_status map_clip(onnx_builder *b)
{
    TG_TRY(ob_attr_in_opsets(b, "min", 1, 11));
    TG_TRY(ob_attr_in_opsets(b, "max", 1, 11));
    tg_tensor *x = ob_typed_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    float lo, hi;
    if (ob_opset(b) < 11) {
        /* the old form's defaults are the float range (an infinity is
         * clipped to it), not infinities */
        if (tg_tensor_dtype(x) != TG_F32)
            return ob_fail(b, TG_ERR_DTYPE, "Clip of an integer tensor (opset 11 and later)");
        lo = ob_attr_float(b, "min", -FLT_MAX);
        hi = ob_attr_float(b, "max", FLT_MAX);
    } else if (tg_tensor_dtype(x) == TG_I32) {
        return clip_int(b, x);
    } else {
        TG_TRY(clip_bound(b, 1, -INFINITY, &lo));
        TG_TRY(clip_bound(b, 2, INFINITY, &hi));
    }
    if (isnan(lo) || isnan(hi))
        return ob_fail(b, TG_ERR_UNSUPPORTED, "a NaN bound");
    return ob_set(b, 0, tg_clip(b->g, x, lo, hi));
}

/* Max or Min of constants only (integer ones: shape arithmetic, and the
 * integer forms, which the graph's f32 ops do not take), exactly. */
static tg_status fold_variadic(onnx_builder *b, bin_kind k)
{
    int n = (int)b->node->n_input;
    tg_onnx_data acc, next;
    const tg_onnx_data *first = ob_const(b, 0);
    if (!first)
        return TG_ERR_UNSUPPORTED;
    TG_TRY(fold_data(b, k, first, first, &acc)); /* max(x, x) = x, a copy */
    for (int i = 1; i < n; i++) {
        const tg_onnx_data *x = ob_const(b, i);
        tg_status s = x ? fold_data(b, k, &acc, x, &next) : TG_ERR_UNSUPPORTED;
        tg_onnx_data_free(&acc);
        if (s != TG_OK)
            return s;
        acc = next;
    }
    return ob_set_const(b, 0, &acc);
}

static bool all_foldable(onnx_builder *b)
{
    for (int i = 0; i < (int)b->node->n_input; i++)
        if (!ob_is_foldable(b, i))
            return false;
    return b->node->n_input > 0;
}

/* Max, Min, Sum, Mean: any number of inputs, broadcast pairwise. Integer
 * tensors (T5's relative-position buckets clamp with Min) go through f32 as
 * the integer Add and Sub do, exact within 2^24, and come back as integers. */
static tg_status variadic(onnx_builder *b, tg_tensor *(*fn)(tg_graph *, tg_tensor *, tg_tensor *),
                          bool mean)
{
    int n = (int)b->node->n_input;
    if ((fn == tg_maximum || fn == tg_minimum) && all_foldable(b))
        return fold_variadic(b, fn == tg_maximum ? BIN_MAX : BIN_MIN);
    if (n < 1)
        return ob_fail(b, TG_ERR_FORMAT, "no inputs");
    tg_tensor *y = NULL;
    bool ints = false;
    for (int k = 0; k < n; k++) {
        tg_tensor *x = mean ? ob_tensor(b, k) : ob_typed_tensor(b, k);
        if (!x)
            return TG_ERR_UNSUPPORTED;
        bool ix = tg_tensor_dtype(x) == TG_I32;
        if (k > 0 && ix != ints)
            return ob_fail(b, TG_ERR_DTYPE, "input %d is %s where input 0 is %s", k,
                           ix ? "an integer tensor" : "f32", ints ? "an integer tensor" : "f32");
        ints = ix;
        x = ix ? tg_cast(b->g, x, TG_F32) : x;
        y = k ? fn(b->g, y, x) : x;
    }
    if (mean && n > 1)
        y = tg_scale(b->g, y, 1.0f / (float)n, 0.0f);
    return ob_set(b, 0, ints && y ? tg_cast(b->g, y, TG_I32) : y);
}

static tg_status map_max(onnx_builder *b)
{
    return variadic(b, tg_maximum, false);
}
static tg_status map_min(onnx_builder *b)
{
    return variadic(b, tg_minimum, false);
}
static tg_status map_sum(onnx_builder *b)
{
    return variadic(b, tg_add, false);
}
static tg_status map_mean(onnx_builder *b)
{
    return variadic(b, tg_add, true);
}
static tg_status map_sigmoid(onnx_builder *b)
{
    return unary(b, tg_sigmoid);
}
static tg_status map_tanh(onnx_builder *b)
{
    return unary(b, tg_tanh);
}

/* Pow; squares (the decomposed layer norm's Pow(x - mean, 2)) as x * x. */
static tg_status map_pow(onnx_builder *b)
{
    TG_TRY(ob_legacy_broadcast(b));
    if (ob_is_foldable(b, 0) && ob_is_foldable(b, 1))
        return fold_binary(b, BIN_POW);
    const tg_onnx_data *e = ob_is_const(b, 1) ? ob_const(b, 1) : NULL;
    double v = e && e->n == 1 ? (e->f ? e->f[0] : (double)e->i[0]) : NAN;
    tg_tensor *x = ob_typed_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    bool int_base = tg_tensor_dtype(x) == TG_I32;
    if (v == 1.0)
        return ob_set(b, 0, x);
    if (v == 2.0 && !int_base)
        return ob_set(b, 0, tg_mul(b->g, x, x));
    /* an integer exponent is the same value in f32 (within 2^24); an
     * integer base computes in f32 and keeps its type, truncated (numpy's
     * astype, which ONNX's reference uses), exact for the values f32 holds */
    tg_tensor *y = ob_typed_tensor(b, 1);
    if (!y)
        return TG_ERR_UNSUPPORTED;
    tg_tensor *r = tg_pow(b->g, tg_cast(b->g, x, TG_F32), tg_cast(b->g, y, TG_F32));
    return ob_set(b, 0, int_base ? tg_cast(b->g, r, TG_I32) : r);
}

/* Softmax before opset 13 works on the input flattened to 2-D at `axis`. */
static tg_status softmax_like(onnx_builder *b, tg_tensor *(*fn)(tg_graph *, tg_tensor *, int))
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    tg_shape s = tg_tensor_shape(x);
    int axis = 0;
    TG_TRY(ob_axis(b, ob_attr_int(b, "axis", ob_opset(b) < 13 ? 1 : -1), s.ndim, &axis));
    if (ob_opset(b) >= 13 || axis == s.ndim - 1)
        return ob_set(b, 0, fn(b->g, x, axis));
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < s.ndim; d++)
        *(d < axis ? &outer : &inner) *= s.dim[d];
    tg_tensor *y = fn(b->g, tg_reshape(b->g, x, tg_shape2(outer, inner)), 1);
    return ob_set(b, 0, tg_reshape(b->g, y, s));
}

static tg_status map_softmax(onnx_builder *b)
{
    return softmax_like(b, tg_softmax);
}
static tg_status map_log_softmax(onnx_builder *b)
{
    return softmax_like(b, tg_log_softmax);
}

/* ---- the activation family and ONNX's element-wise math ------------------------ */

#define UNARY_MAP(NAME, FN)                                                                        \
    static tg_status map_##NAME(onnx_builder *b)                                                   \
    {                                                                                              \
        return unary(b, FN);                                                                       \
    }
UNARY_MAP(hard_swish, tg_hard_swish)
UNARY_MAP(mish, tg_mish)
UNARY_MAP(softplus, tg_softplus)
UNARY_MAP(softsign, tg_softsign)
UNARY_MAP(sign, tg_sign)
UNARY_MAP(floor, tg_floor)
UNARY_MAP(ceil, tg_ceil)
UNARY_MAP(round, tg_round)
UNARY_MAP(cos, tg_cos)
UNARY_MAP(sin, tg_sin)
UNARY_MAP(tan, tg_tan)
UNARY_MAP(acos, tg_acos)
UNARY_MAP(asin, tg_asin)
UNARY_MAP(atan, tg_atan)
UNARY_MAP(acosh, tg_acosh)
UNARY_MAP(asinh, tg_asinh)
UNARY_MAP(atanh, tg_atanh)
UNARY_MAP(cosh, tg_cosh)
UNARY_MAP(sinh, tg_sinh)

static tg_status map_thresholded_relu(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    return x ? ob_set(b, 0, tg_thresholded_relu(b->g, x, ob_attr_float(b, "alpha", 1.0f)))
             : TG_ERR_UNSUPPORTED;
}

static tg_status map_shrink(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    return x ? ob_set(b, 0,
                      tg_shrink(b->g, x, ob_attr_float(b, "lambd", 0.5f),
                                ob_attr_float(b, "bias", 0.0f)))
             : TG_ERR_UNSUPPORTED;
}

static tg_status map_hard_sigmoid(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    return x ? ob_set(b, 0,
                      tg_hard_sigmoid(b->g, x, ob_attr_float(b, "alpha", 0.2f),
                                      ob_attr_float(b, "beta", 0.5f)))
             : TG_ERR_UNSUPPORTED;
}

static tg_status map_elu(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    return x ? ob_set(b, 0, tg_elu(b->g, x, ob_attr_float(b, "alpha", 1.0f))) : TG_ERR_UNSUPPORTED;
}

static tg_status map_celu(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    return x ? ob_set(b, 0, tg_celu(b->g, x, ob_attr_float(b, "alpha", 1.0f))) : TG_ERR_UNSUPPORTED;
}

static tg_status map_selu(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    float alpha = ob_attr_float(b, "alpha", 1.67326319217681884765625f);
    float gamma = ob_attr_float(b, "gamma", 1.05070102214813232421875f);
    return x ? ob_set(b, 0, tg_selu(b->g, x, alpha, gamma)) : TG_ERR_UNSUPPORTED;
}

/* relu(x) - slope * relu(-x): x where x > 0 and slope * x where x < 0, both
 * exactly (one rounding, as x * slope); the slope's gradient is summed over
 * the axes it is broadcast along. */
static tg_status map_prelu(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    tg_tensor *slope = x ? ob_tensor(b, 1) : NULL;
    if (!slope)
        return TG_ERR_UNSUPPORTED;
    tg_graph *g = b->g;
    /* before opset 7 a slope of one dim is per channel (axis 1), not
     * broadcast from the last axis */
    tg_shape xs = tg_tensor_shape(x), ss = tg_tensor_shape(slope);
    if (ob_opset(b) < 7 && ss.ndim == 1 && xs.ndim > 2 && ss.dim[0] == xs.dim[1]) {
        tg_shape per_channel = ss;
        per_channel.ndim = xs.ndim - 1;
        for (int d = 1; d < per_channel.ndim; d++)
            per_channel.dim[d] = 1;
        slope = tg_reshape(g, slope, per_channel);
    }
    return ob_set(b, 0, tg_sub(g, tg_relu(g, x), tg_mul(g, slope, tg_relu(g, tg_neg(g, x)))));
}

/* ---- SiLU: Sigmoid(x) -> Mul(x, .) ------------------------------------------------ */

/* nn.SiLU (EfficientNet's activation) exports as Sigmoid(x) then Mul(x, .):
 * built as tg_silu, one kernel whose backward keeps only x, where the two
 * ops keep x and the sigmoid both. A sigmoid read elsewhere, or multiplied
 * by another tensor (a squeeze-excitation gate), is left to the node-by-node
 * mapping, which computes the same function. */
bool ob_match_silu(onnx_builder *b, int k, bool *skip)
{
    const Onnx__NodeProto *const *node = (const Onnx__NodeProto *const *)b->m->graph->node;
    const Onnx__NodeProto *sig = node[k];
    if (strcmp(sig->op_type, "Sigmoid") || sig->n_input != 1 || sig->n_output < 1)
        return false;
    int m = ob_sole_consumer(b, sig->output[0]);
    const Onnx__NodeProto *mul = m > k ? node[m] : NULL;
    if (!mul || strcmp(mul->op_type, "Mul") || mul->n_input != 2 || mul->n_output < 1)
        return false;
    const char *x = sig->input[0];
    bool pair = (!strcmp(mul->input[0], x) && !strcmp(mul->input[1], sig->output[0])) ||
                (!strcmp(mul->input[1], x) && !strcmp(mul->input[0], sig->output[0]));
    ob_value *in = ob_find(b, x), *out = ob_find(b, mul->output[0]);
    if (!pair || !in || !in->t || !out || tg_tensor_dtype(in->t) != TG_F32)
        return false;
    ob_enter(b, mul); /* the SiLU takes the Mul's scope */
    out->t = tg_silu(b->g, in->t);
    ob_leave(b);
    out->known = true;
    skip[m] = true;
    return true;
}

const ob_op tg_onnx_elementwise_ops[] = {
    {"Add", map_add, OB_LEGACY_BROADCAST_ATTRS},
    {"Sub", map_sub, OB_LEGACY_BROADCAST_ATTRS},
    {"Mul", map_mul, OB_LEGACY_BROADCAST_ATTRS},
    {"Div", map_div, OB_LEGACY_BROADCAST_ATTRS},
    {"Pow", map_pow, OB_LEGACY_BROADCAST_ATTRS},
    {"Relu", map_relu, ""},
    {"Erf", map_erf, ""},
    {"Exp", map_exp, ""},
    {"Log", map_log, ""},
    {"Sqrt", map_sqrt, ""},
    {"Neg", map_neg, ""},
    {"Abs", map_abs, ""},
    {"Reciprocal", map_reciprocal, ""},
    {"LeakyRelu", map_leaky_relu, "alpha"},
    {"Clip", map_clip, "max,min"},
    {"Max", map_max, ""},
    {"Min", map_min, ""},
    {"Sum", map_sum, ""},
    {"Mean", map_mean, ""},
    {"Sigmoid", map_sigmoid, ""},
    {"Tanh", map_tanh, ""},
    {"Softmax", map_softmax, "axis"},
    {"LogSoftmax", map_log_softmax, "axis"},
    {"HardSigmoid", map_hard_sigmoid, "alpha,beta"},
    {"HardSwish", map_hard_swish, ""},
    {"Mish", map_mish, ""},
    {"Elu", map_elu, "alpha"},
    {"Celu", map_celu, "alpha"},
    {"Selu", map_selu, "alpha,gamma"},
    {"Softplus", map_softplus, ""},
    {"Softsign", map_softsign, ""},
    {"PRelu", map_prelu, ""},
    {"Sign", map_sign, ""},
    {"Floor", map_floor, ""},
    {"Ceil", map_ceil, ""},
    {"Round", map_round, ""},
    {"Cos", map_cos, ""},
    {"Sin", map_sin, ""},
    {"Tan", map_tan, ""},
    {"Acos", map_acos, ""},
    {"Asin", map_asin, ""},
    {"Atan", map_atan, ""},
    {"Acosh", map_acosh, ""},
    {"Asinh", map_asinh, ""},
    {"Atanh", map_atanh, ""},
    {"Cosh", map_cosh, ""},
    {"Sinh", map_sinh, ""},
    {"ThresholdedRelu", map_thresholded_relu, "alpha"},
    {"Shrink", map_shrink, "bias,lambd"},
};
const int tg_onnx_elementwise_op_count =
    (int)(sizeof tg_onnx_elementwise_ops / sizeof tg_onnx_elementwise_ops[0]);
