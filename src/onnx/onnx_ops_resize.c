/* onnx/onnx_ops_resize.c - the ONNX ops that move elements in space:
 * Resize (opset 10 on) and Upsample (opsets 7 to 9) for F.interpolate, and
 * DepthToSpace / SpaceToDepth (PixelShuffle).
 *
 * DepthToSpace and SpaceToDepth are a reshape, a transpose and a reshape (a
 * copy, exact); Resize is tg_resize (ops/resize.c). What Resize does not
 * implement (cubic, antialias, tf_crop_and_resize, keep_aspect_ratio_policy
 * other than stretch, resizing the batch or channel axis) is refused naming
 * the attribute, never computed another way. (The activations and the norms
 * this file once held with these, as the ops torchvision's models brought,
 * are with their families in onnx_ops_elementwise.c and onnx_ops_norm.c;
 * the random ops are in onnx_ops_random.c.)
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- DepthToSpace, SpaceToDepth ----------------------------------------------------- */

/* The input x of DepthToSpace or SpaceToDepth, its dims (n, c, h, w) and
 * the blocksize attribute bs, refusing an input not 4-D and a bs below 1. */
typedef struct block_input {
    tg_tensor *x;
    int64_t n, c, h, w, bs;
} block_input;

static tg_status block_input_of(onnx_builder *b, block_input *in)
{
    in->x = ob_tensor(b, 0);
    if (!in->x)
        return TG_ERR_UNSUPPORTED;
    tg_shape s = tg_tensor_shape(in->x);
    in->bs = ob_attr_int(b, "blocksize", 0);
    if (s.ndim != 4)
        return ob_fail(b, TG_ERR_SHAPE, "the input has %d dims ([N, C, H, W] is taken)", s.ndim);
    if (in->bs < 1)
        return ob_fail(b, TG_ERR_INVALID_ARG, "blocksize %lld (give one >= 1)", (long long)in->bs);
    in->n = s.dim[0], in->c = s.dim[1], in->h = s.dim[2], in->w = s.dim[3];
    return TG_OK;
}

/* [N, C, H, W] -> [N, C / bs^2, H bs, W bs]. DCR (the default) takes the
 * channel as (bh, bw, c), CRD (PyTorch's PixelShuffle) as (c, bh, bw). */
static tg_status map_depth_to_space(onnx_builder *b)
{
    block_input in;
    TG_TRY(block_input_of(b, &in));
    tg_tensor *x = in.x;
    int64_t n = in.n, c = in.c, h = in.h, w = in.w, bs = in.bs;
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
    block_input in;
    TG_TRY(block_input_of(b, &in));
    tg_tensor *x = in.x;
    int64_t n = in.n, c = in.c, h = in.h, w = in.w, bs = in.bs;
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

#define RESIZE_ATTRS                                                                               \
    "antialias,axes,coordinate_transformation_mode,cubic_coeff_a,exclude_outside,"                 \
    "extrapolation_value,keep_aspect_ratio_policy,mode,nearest_mode"

const ob_op tg_onnx_resize_ops[] = {
    {"Resize", map_resize, RESIZE_ATTRS},
    {"Upsample", map_upsample, "mode,scales"},
    {"DepthToSpace", map_depth_to_space, "blocksize,mode"},
    {"SpaceToDepth", map_space_to_depth, "blocksize"},
};
const int tg_onnx_resize_op_count = (int)(sizeof tg_onnx_resize_ops / sizeof tg_onnx_resize_ops[0]);
