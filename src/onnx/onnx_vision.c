/* onnx/onnx_vision.c - the ops torchvision's models and image-to-image nets
 * export beyond the plain conv net's: MobileNetV3's HardSigmoid and
 * HardSwish, the activation family (Mish, Elu, Celu, Selu, Softplus,
 * Softsign, PRelu), ONNX's element-wise math (Sign, Floor, Ceil, Round,
 * Cos, Sin, Tan), InstanceNormalization (also PyTorch's GroupNorm export)
 * and LRN, Resize (opset 10 on) and Upsample (opsets 7 to 9) for
 * F.interpolate, DepthToSpace / SpaceToDepth (PixelShuffle), and the random
 * ops of stochastic depth, RandomUniformLike and Bernoulli, with
 * RandomNormalLike, RandomNormal and RandomUniform, and
 * GroupNormalization.
 *
 * The activations map onto tg_hard_sigmoid and its siblings
 * (ops/activation.c); PRelu is relu(x) - slope * relu(-x), exact for
 * either sign and broadcasting the slope as ONNX does; DepthToSpace and
 * SpaceToDepth are a reshape, a transpose and a reshape (a copy, exact);
 * Resize is tg_resize (ops/resize.c). What Resize does not implement
 * (cubic, antialias, tf_crop_and_resize, keep_aspect_ratio_policy other than
 * stretch, resizing the batch or channel axis) is refused naming the
 * attribute, never computed another way.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- activations and element-wise math ------------------------------------------ */

static tg_status unary(onnx_builder *b, tg_tensor *(*fn)(tg_graph *, tg_tensor *))
{
    tg_tensor *x = ob_tensor(b, 0);
    return x ? ob_set(b, 0, fn(b->g, x)) : TG_ERR_UNSUPPORTED;
}

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

/* ---- InstanceNormalization, LRN ----------------------------------------------------- */

/* Whether input i is a constant whose every element is v (the exporter's
 * ones and zeros around GroupNorm's InstanceNormalization). */
static bool constant_all(onnx_builder *b, int i, double v)
{
    if (!ob_is_foldable(b, i))
        return false;
    const tg_onnx_data *d = ob_const(b, i);
    for (int64_t k = 0; d && k < d->n; k++)
        if (ob_get(d, k) != v)
            return false;
    return d != NULL;
}

/* Per sample and channel over the spatial axes: group norm with one group
 * per channel. PyTorch exports GroupNorm as this over [N, G, -1] with
 * constant ones and zeros (left out here), then its own affine. */
static tg_status map_instance_norm(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    tg_shape s = tg_tensor_shape(x);
    if (s.ndim < 3)
        return ob_fail(b, TG_ERR_SHAPE, "the input has %d dims ([N, C, D1, ...] is taken)", s.ndim);
    tg_tensor *gamma = NULL, *beta = NULL;
    if (!constant_all(b, 1, 1.0) && !(gamma = ob_tensor(b, 1)))
        return TG_ERR_UNSUPPORTED;
    if (!constant_all(b, 2, 0.0) && !(beta = ob_tensor(b, 2)))
        return TG_ERR_UNSUPPORTED;
    for (int k = 0; k < 2; k++) {
        tg_tensor *t = k ? beta : gamma;
        if (t && (tg_tensor_shape(t).ndim != 1 || tg_tensor_shape(t).dim[0] != s.dim[1]))
            return ob_fail(b, TG_ERR_SHAPE, "%s must be [%lld]", k ? "B" : "scale",
                           (long long)s.dim[1]);
    }
    float eps = ob_attr_float(b, "epsilon", 1e-5f);
    return ob_set(b, 0, tg_group_norm(b->g, x, (int)s.dim[1], gamma, beta, eps));
}

/* GroupNormalization (opset 18, 21): tg_group_norm. Opset 18's scale and
 * bias are per group ([num_groups]: each repeated over its C / G
 * channels), 21's per channel ([C]); statistics in float32 (stash_type 1,
 * the only one: the devices have no f64). */
static tg_status map_group_norm(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    tg_tensor *gamma = x ? ob_tensor(b, 1) : NULL, *beta = gamma ? ob_tensor(b, 2) : NULL;
    if (!beta)
        return TG_ERR_UNSUPPORTED;
    TG_TRY(ob_attr_in_opsets(b, "stash_type", 21, 1 << 30));
    tg_shape s = tg_tensor_shape(x);
    int64_t groups = ob_attr_int(b, "num_groups", 0), stash = ob_attr_int(b, "stash_type", 1);
    if (stash != 1)
        return ob_fail(b, TG_ERR_UNSUPPORTED, "stash_type %lld (1, float32 statistics, is taken)",
                       (long long)stash);
    if (s.ndim < 3)
        return ob_fail(b, TG_ERR_SHAPE, "the input has %d dims ([N, C, D1, ...] is taken)", s.ndim);
    int64_t c = s.dim[1];
    if (groups < 1 || c % groups)
        return ob_fail(b, TG_ERR_INVALID_ARG, "num_groups %lld does not divide %lld channels",
                       (long long)groups, (long long)c);
    int64_t per = ob_opset(b) < 21 ? groups : c; /* the affine's length */
    tg_graph *g = b->g;
    for (int k = 0; k < 2; k++) {
        tg_tensor **t = k ? &beta : &gamma;
        tg_shape ts = tg_tensor_shape(*t);
        if (ts.ndim != 1 || ts.dim[0] != per)
            return ob_fail(b, TG_ERR_SHAPE, "%s must be [%lld] at opset %d", k ? "bias" : "scale",
                           (long long)per, ob_opset(b));
        if (per != c) /* [G] -> [G, C/G] -> [C] */
            *t = tg_reshape(g,
                            tg_expand(g, tg_reshape(g, *t, tg_shape2(groups, 1)),
                                      tg_shape2(groups, c / groups)),
                            tg_shape1(c));
    }
    float eps = ob_attr_float(b, "epsilon", 1e-5f);
    return ob_set(b, 0, tg_group_norm(g, x, (int)groups, gamma, beta, eps));
}

/* LRN: x / (bias + alpha / size * sum of x^2 over `size` channels about
 * each)^beta, the window floor((size-1)/2) channels before and
 * ceil((size-1)/2) after. The sum is an average pool of x^2 laid out as
 * [N, 1, C, rest] with a (size, 1) window, zeros padded and counted, times
 * size; so y = x * (bias + alpha * mean)^-beta, from ops with gradients. */
static tg_status map_lrn(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    tg_shape s = tg_tensor_shape(x);
    int64_t size = ob_attr_int(b, "size", 0);
    if (s.ndim < 3)
        return ob_fail(b, TG_ERR_SHAPE, "the input has %d dims ([N, C, D1, ...] is taken)", s.ndim);
    if (size < 1 || size > 2 * s.dim[1] + 1 || size > 1 << 20)
        return ob_fail(b, TG_ERR_INVALID_ARG, "size %lld (give an odd or even window of 1 to %lld)",
                       (long long)size, (long long)(2 * s.dim[1] + 1));
    float alpha = ob_attr_float(b, "alpha", 1e-4f), beta = ob_attr_float(b, "beta", 0.75f);
    float bias = ob_attr_float(b, "bias", 1.0f);
    int64_t rest = tg_shape_numel(s) / (s.dim[0] * s.dim[1]);
    tg_graph *g = b->g;
    tg_tensor *sq = tg_reshape(g, tg_mul(g, x, x), tg_shape4(s.dim[0], 1, s.dim[1], rest));
    int lo = (int)((size - 1) / 2), hi = (int)(size - 1 - lo);
    tg_pool2d_params p = {(int)size, 1, 1, 1, lo, 0, hi, 0, 1, 1, false, true};
    tg_tensor *mean = tg_reshape(g, tg_avgpool2d_ex(g, sq, p), s);
    float one = -beta;
    tg_tensor *e = tg_constant_data(g, "lrn_exponent", tg_shape1(1), &one);
    tg_tensor *d = tg_pow(g, tg_scale(g, mean, alpha, bias), e);
    return ob_set(b, 0, tg_mul(g, x, d));
}

/* ---- random: RandomUniformLike, Bernoulli --------------------------------------------- */

/* The dtype attribute of a random op: float (the default, or dflt_int for
 * Bernoulli's input type) or, with ints_ok, an integer type. */
static tg_status random_dtype(onnx_builder *b, bool ints_ok, bool *is_int)
{
    int64_t dt = ob_attr_int(b, "dtype", 1);
    bool integer = dt == 2 || dt == 3 || dt == 4 || dt == 5 || dt == 6 || dt == 7 || dt == 9 ||
                   dt == 12 || dt == 13;
    *is_int = integer;
    if (dt == 1 || (ints_ok && integer))
        return TG_OK;
    return ob_fail(b, TG_ERR_UNSUPPORTED, "dtype %s (float%s is produced)",
                   tg_onnx_elem_name((int)dt), ints_ok ? " or an integer type" : "");
}

/* Uniform in [low, high) of the input's shape, from the session's seed: a
 * seed attribute is not used (each step and replica draws its own). */
static tg_status map_random_uniform_like(onnx_builder *b)
{
    tg_tensor *x = ob_typed_tensor(b, 0);
    bool is_int;
    if (!x)
        return TG_ERR_UNSUPPORTED;
    TG_TRY(random_dtype(b, false, &is_int));
    return ob_set(b, 0,
                  tg_random_uniform_like(b->g, x, ob_attr_float(b, "low", 0.0f),
                                         ob_attr_float(b, "high", 1.0f)));
}

/* Normal of mean and scale, of the input's shape, from the session's seed. */
static tg_status map_random_normal_like(onnx_builder *b)
{
    tg_tensor *x = ob_typed_tensor(b, 0);
    bool is_int;
    if (!x)
        return TG_ERR_UNSUPPORTED;
    TG_TRY(random_dtype(b, false, &is_int));
    return ob_set(b, 0,
                  tg_random_normal_like(b->g, x, ob_attr_float(b, "mean", 0.0f),
                                        ob_attr_float(b, "scale", 1.0f)));
}

/* RandomUniform and RandomNormal: the shape attribute's; a constant of
 * that shape stands for the input of the Like forms (its values unread). */
static tg_status random_of_shape(onnx_builder *b, bool normal)
{
    int n;
    const int64_t *dims = ob_attr_ints(b, "shape", &n);
    bool is_int;
    TG_TRY(random_dtype(b, false, &is_int));
    if (!dims || n > TG_MAX_DIMS)
        return ob_fail(b, TG_ERR_INVALID_ARG, "the shape attribute is %s (give 0 to %d dims)",
                       dims ? "too long" : "missing", TG_MAX_DIMS);
    for (int d = 0; d < n; d++)
        if (dims[d] < 1 || dims[d] > (1 << 30))
            return ob_fail(b, TG_ERR_INVALID_ARG, "shape dim %d is %lld", d, (long long)dims[d]);
    tg_tensor *like = tg_constant(b->g, tg_shape_of(n, dims), 0.0f);
    if (normal)
        return ob_set(b, 0,
                      tg_random_normal_like(b->g, like, ob_attr_float(b, "mean", 0.0f),
                                            ob_attr_float(b, "scale", 1.0f)));
    return ob_set(b, 0,
                  tg_random_uniform_like(b->g, like, ob_attr_float(b, "low", 0.0f),
                                         ob_attr_float(b, "high", 1.0f)));
}

static tg_status map_random_normal(onnx_builder *b)
{
    return random_of_shape(b, true);
}

static tg_status map_random_uniform(onnx_builder *b)
{
    return random_of_shape(b, false);
}

/* 1 with probability p (each element of the input), else 0: u < p for u
 * uniform in [0, 1). No gradient reaches p. */
static tg_status map_bernoulli(onnx_builder *b)
{
    tg_tensor *p = ob_tensor(b, 0);
    bool is_int;
    if (!p)
        return TG_ERR_UNSUPPORTED;
    TG_TRY(random_dtype(b, true, &is_int));
    tg_graph *g = b->g;
    tg_tensor *hit = tg_less(g, tg_random_uniform_like(g, p, 0.0f, 1.0f), p);
    return ob_set(b, 0, is_int ? hit : tg_cast(g, hit, TG_F32));
}

/* ---- DepthToSpace, SpaceToDepth ----------------------------------------------------- */

static tg_status block_size(onnx_builder *b, tg_tensor *x, int64_t *bs)
{
    tg_shape s = tg_tensor_shape(x);
    *bs = ob_attr_int(b, "blocksize", 0);
    if (s.ndim != 4)
        return ob_fail(b, TG_ERR_SHAPE, "the input has %d dims ([N, C, H, W] is taken)", s.ndim);
    if (*bs < 1)
        return ob_fail(b, TG_ERR_INVALID_ARG, "blocksize %lld (give one >= 1)", (long long)*bs);
    return TG_OK;
}

/* [N, C, H, W] -> [N, C / bs^2, H bs, W bs]. DCR (the default) takes the
 * channel as (bh, bw, c), CRD (PyTorch's PixelShuffle) as (c, bh, bw). */
static tg_status map_depth_to_space(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    int64_t bs;
    if (!x)
        return TG_ERR_UNSUPPORTED;
    TG_TRY(block_size(b, x, &bs));
    tg_shape s = tg_tensor_shape(x);
    int64_t n = s.dim[0], c = s.dim[1], h = s.dim[2], w = s.dim[3];
    if (c % (bs * bs))
        return ob_fail(b, TG_ERR_SHAPE, "%lld channels are not a multiple of blocksize^2 = %lld",
                       (long long)c, (long long)(bs * bs));
    char mode[16];
    ob_attr_string(b, "mode", mode, sizeof mode);
    bool crd = !strcmp(mode, "CRD");
    if (!crd && mode[0] && strcmp(mode, "DCR"))
        return ob_fail(b, TG_ERR_UNSUPPORTED, "mode '%s' (DCR and CRD are)", mode);
    int64_t cc = c / (bs * bs);
    int64_t dcr[6] = {n, bs, bs, cc, h, w}, crdd[6] = {n, cc, bs, bs, h, w};
    static const int perm_dcr[6] = {0, 3, 4, 1, 5, 2}, perm_crd[6] = {0, 1, 4, 2, 5, 3};
    tg_graph *g = b->g;
    tg_tensor *y = tg_reshape(g, x, tg_shape_of(6, crd ? crdd : dcr));
    y = tg_transpose(g, y, crd ? perm_crd : perm_dcr);
    int64_t out[4] = {n, cc, h * bs, w * bs};
    return ob_set(b, 0, tg_reshape(g, y, tg_shape_of(4, out)));
}

/* [N, C, H, W] -> [N, C bs^2, H / bs, W / bs], the channel as (bh, bw, c). */
static tg_status map_space_to_depth(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    int64_t bs;
    if (!x)
        return TG_ERR_UNSUPPORTED;
    TG_TRY(block_size(b, x, &bs));
    tg_shape s = tg_tensor_shape(x);
    int64_t n = s.dim[0], c = s.dim[1], h = s.dim[2], w = s.dim[3];
    if (h % bs || w % bs)
        return ob_fail(b, TG_ERR_SHAPE, "maps of %lldx%lld are not multiples of blocksize %lld",
                       (long long)h, (long long)w, (long long)bs);
    int64_t split[6] = {n, c, h / bs, bs, w / bs, bs};
    static const int perm[6] = {0, 3, 5, 1, 2, 4};
    tg_graph *g = b->g;
    tg_tensor *y = tg_transpose(g, tg_reshape(g, x, tg_shape_of(6, split)), perm);
    int64_t out[4] = {n, c * bs * bs, h / bs, w / bs};
    return ob_set(b, 0, tg_reshape(g, y, tg_shape_of(4, out)));
}

/* ---- Resize, Upsample ------------------------------------------------------------------ */

typedef struct name_value {
    const char *name;
    int value;
} name_value;

/* The enum value of string attribute `attr` (dflt when absent); refuses a
 * value not in the table, naming the attribute and what is taken. */
static tg_status attr_enum(onnx_builder *b, const char *attr, const char *dflt,
                           const name_value *table, int n, int *out)
{
    char v[64];
    const char *s = ob_attr_string(b, attr, v, sizeof v);
    if (!s[0])
        s = dflt;
    for (int k = 0; k < n; k++)
        if (!strcmp(s, table[k].name)) {
            *out = table[k].value;
            return TG_OK;
        }
    char taken[256] = "";
    size_t used = 0;
    for (int k = 0; k < n && used < sizeof taken; k++)
        used += (size_t)snprintf(taken + used, sizeof taken - used, "%s%s", k ? ", " : "",
                                 table[k].name);
    return ob_fail(b, TG_ERR_UNSUPPORTED, "%s '%s' is not implemented (%s are)", attr, s, taken);
}

static const name_value modes[] = {
    {"nearest", TG_RESIZE_NEAREST}, {"linear", TG_RESIZE_LINEAR}, {"bilinear", TG_RESIZE_LINEAR}};
static const name_value coords[] = {{"half_pixel", TG_RESIZE_HALF_PIXEL},
                                    {"pytorch_half_pixel", TG_RESIZE_PYTORCH_HALF_PIXEL},
                                    {"align_corners", TG_RESIZE_ALIGN_CORNERS},
                                    {"asymmetric", TG_RESIZE_ASYMMETRIC},
                                    {"tf_half_pixel_for_nn", TG_RESIZE_TF_HALF_PIXEL_FOR_NN},
                                    {"half_pixel_symmetric", TG_RESIZE_HALF_PIXEL_SYMMETRIC}};
static const name_value nearests[] = {{"round_prefer_floor", TG_RESIZE_ROUND_PREFER_FLOOR},
                                      {"round_prefer_ceil", TG_RESIZE_ROUND_PREFER_CEIL},
                                      {"floor", TG_RESIZE_FLOOR},
                                      {"ceil", TG_RESIZE_CEIL}};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Input i if given and not empty (Resize's optional inputs are often ''
 * or an empty constant), as a constant; *d NULL when absent. */
static tg_status optional_const(onnx_builder *b, int i, const tg_onnx_data **d)
{
    *d = NULL;
    if (!ob_has_input(b, i))
        return TG_OK;
    const tg_onnx_data *c = ob_const(b, i);
    if (!c)
        return TG_ERR_UNSUPPORTED;
    *d = c->n > 0 ? c : NULL;
    return TG_OK;
}

/* Per-axis scales and sizes of an x of nd dims; scale[k] 0 when sizes give
 * the axis. Reads Resize's axes attribute (opset 18): the axes not listed
 * keep their size. */
static tg_status resize_targets(onnx_builder *b, tg_shape s, const tg_onnx_data *scales,
                                const tg_onnx_data *sizes, double *scale, int64_t *size)
{
    int n_axes = 0;
    const int64_t *axes = ob_attr_ints(b, "axes", &n_axes);
    const tg_onnx_data *d = scales ? scales : sizes;
    int want = axes ? n_axes : s.ndim;
    if (d->n != want)
        return ob_fail(b, TG_ERR_SHAPE, "%s has %lld values for %d axes",
                       scales ? "scales" : "sizes", (long long)d->n, want);
    for (int k = 0; k < s.ndim; k++) {
        scale[k] = 1;
        size[k] = s.dim[k];
    }
    for (int k = 0; k < want; k++) {
        int axis = k;
        if (axes)
            TG_TRY(ob_axis(b, axes[k], s.ndim, &axis));
        double v = ob_get(d, k);
        if (scales) {
            if (!(v > 0) || !isfinite(v))
                return ob_fail(b, TG_ERR_INVALID_ARG, "scale %g for axis %d (give one > 0)", v,
                               axis);
            scale[axis] = (double)(float)v;
            size[axis] = (int64_t)floor((double)s.dim[axis] * (double)(float)v);
        } else {
            scale[axis] = 0;
            size[axis] = (int64_t)v;
        }
        if (size[axis] < 1)
            return ob_fail(b, TG_ERR_SHAPE, "axis %d of %lld resized to %lld elements", axis,
                           (long long)s.dim[axis], (long long)size[axis]);
    }
    return TG_OK;
}

/* x [N, C, H, W] or [N, C, L] resized by scale/size per axis: the batch and
 * channel axes must keep their size. */
static tg_status resize_build(onnx_builder *b, tg_tensor *x, tg_resize_params rp,
                              const double *scale, const int64_t *size)
{
    tg_shape s = tg_tensor_shape(x);
    if (s.ndim != 3 && s.ndim != 4)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "a %d-D input (Resize of [N, C, L] and [N, C, H, W] is implemented)",
                       s.ndim);
    for (int k = 0; k < 2; k++)
        if (size[k] != s.dim[k] || (scale[k] != 0 && scale[k] != 1))
            return ob_fail(b, TG_ERR_UNSUPPORTED,
                           "resizing axis %d (the %s) is not implemented: only the spatial axes", k,
                           k ? "channels" : "batch");
    tg_tensor *x4 = x;
    if (s.ndim == 3)
        x4 = tg_reshape(b->g, x, tg_shape4(s.dim[0], s.dim[1], 1, s.dim[2]));
    int h = s.ndim - 2, w = s.ndim - 1;
    rp.out_h = s.ndim == 4 ? size[h] : 1;
    rp.out_w = size[w];
    rp.scale_h = s.ndim == 4 ? (float)scale[h] : 1.0f;
    rp.scale_w = (float)scale[w];
    tg_tensor *y = tg_resize(b->g, x4, &rp);
    if (y && s.ndim == 3)
        y = tg_reshape(b->g, y, tg_shape3(s.dim[0], s.dim[1], rp.out_w));
    return ob_set(b, 0, y);
}

static tg_status refuse_attr(onnx_builder *b, const char *attr, bool bad, const char *what)
{
    return bad ? ob_fail(b, TG_ERR_UNSUPPORTED, "%s: %s is not implemented", attr, what) : TG_OK;
}

static tg_status map_resize(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    int opset = ob_opset(b), mode, coord = TG_RESIZE_ASYMMETRIC, nearest = TG_RESIZE_FLOOR;
    char buf[64];
    const char *m = ob_attr_string(b, "mode", buf, sizeof buf);
    if (!strcmp(m, "cubic"))
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "mode 'cubic' is not implemented (nearest and "
                       "linear are)");
    TG_TRY(attr_enum(b, "mode", "nearest", modes, 2, &mode));
    TG_TRY(refuse_attr(b, "antialias", ob_attr_int(b, "antialias", 0) != 0,
                       "antialiased downsampling"));
    char kp[32];
    const char *keep = ob_attr_string(b, "keep_aspect_ratio_policy", kp, sizeof kp);
    TG_TRY(refuse_attr(b, "keep_aspect_ratio_policy", keep[0] && strcmp(keep, "stretch"), keep));
    const tg_onnx_data *scales, *sizes = NULL;
    if (opset < 11) { /* Resize-10: (X, scales), asymmetric, nearest rounds down */
        TG_TRY(optional_const(b, 1, &scales));
    } else {
        char cm[64];
        const char *c = ob_attr_string(b, "coordinate_transformation_mode", cm, sizeof cm);
        if (!strcmp(c, "tf_crop_and_resize"))
            return ob_fail(b, TG_ERR_UNSUPPORTED,
                           "coordinate_transformation_mode 'tf_crop_and_resize' (a region of "
                           "interest) is not implemented");
        TG_TRY(attr_enum(b, "coordinate_transformation_mode", "half_pixel", coords, COUNT(coords),
                         &coord));
        TG_TRY(attr_enum(b, "nearest_mode", "round_prefer_floor", nearests, COUNT(nearests),
                         &nearest));
        TG_TRY(optional_const(b, 2, &scales));
        TG_TRY(optional_const(b, 3, &sizes));
    }
    /* Resize-10's nearest truncates when enlarging (as floor) but rounds
     * up when shrinking: only the first is implemented */
    if (opset < 11 && mode == TG_RESIZE_NEAREST && scales)
        for (int64_t k = 0; k < scales->n; k++)
            if (ob_get(scales, k) < 1)
                return ob_fail(b, TG_ERR_UNSUPPORTED,
                               "nearest downsampling before opset 11 is not implemented");
    if (!scales == !sizes)
        return ob_fail(b, TG_ERR_INVALID_ARG, "give either scales or sizes (%s given)",
                       scales ? "both are" : "neither is");
    tg_shape s = tg_tensor_shape(x);
    double scale[TG_MAX_DIMS];
    int64_t size[TG_MAX_DIMS];
    TG_TRY(resize_targets(b, s, scales, sizes, scale, size));
    tg_resize_params rp = {
        (tg_resize_mode)mode, (tg_resize_coord)coord, (tg_resize_nearest)nearest, 0, 0, 0, 0};
    return resize_build(b, x, rp, scale, size);
}

/* Upsample (opsets 7 to 9, deprecated since 10): scales as an attribute
 * (7) or input 1 (9); source coordinates o / scale, nearest rounding down. */
static tg_status map_upsample(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    int mode;
    TG_TRY(attr_enum(b, "mode", "nearest", modes, COUNT(modes), &mode));
    tg_shape s = tg_tensor_shape(x);
    tg_onnx_data attr = {0};
    const tg_onnx_data *scales = NULL;
    int n = 0;
    const float *f = ob_attr_floats(b, "scales", &n);
    if (f) {
        attr.n = n;
        attr.f = (float *)f; /* read only */
        scales = &attr;
    } else {
        TG_TRY(optional_const(b, 1, &scales));
        if (!scales)
            return ob_fail(b, TG_ERR_INVALID_ARG, "no scales");
    }
    double scale[TG_MAX_DIMS];
    int64_t size[TG_MAX_DIMS];
    TG_TRY(resize_targets(b, s, scales, NULL, scale, size));
    tg_resize_params rp = {(tg_resize_mode)mode, TG_RESIZE_ASYMMETRIC, TG_RESIZE_FLOOR, 0, 0, 0, 0};
    return resize_build(b, x, rp, scale, size);
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

#define RESIZE_ATTRS                                                                               \
    "antialias,axes,coordinate_transformation_mode,cubic_coeff_a,exclude_outside,"                 \
    "extrapolation_value,keep_aspect_ratio_policy,mode,nearest_mode"

const ob_op tg_onnx_vision_ops[] = {
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
    {"Resize", map_resize, RESIZE_ATTRS},
    {"Upsample", map_upsample, "mode,scales"},
    {"RandomUniformLike", map_random_uniform_like, "dtype,high,low,seed"},
    {"Bernoulli", map_bernoulli, "dtype,seed"},
    {"RandomNormalLike", map_random_normal_like, "dtype,mean,scale,seed"},
    {"RandomNormal", map_random_normal, "dtype,mean,scale,seed,shape"},
    {"RandomUniform", map_random_uniform, "dtype,high,low,seed,shape"},
    {"GroupNormalization", map_group_norm, "epsilon,num_groups,stash_type"},
    {"InstanceNormalization", map_instance_norm, "epsilon"},
    {"LRN", map_lrn, "alpha,beta,bias,size"},
    {"DepthToSpace", map_depth_to_space, "blocksize,mode"},
    {"SpaceToDepth", map_space_to_depth, "blocksize"},
};
const int tg_onnx_vision_op_count = (int)(sizeof tg_onnx_vision_ops / sizeof tg_onnx_vision_ops[0]);
