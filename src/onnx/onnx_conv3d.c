/* onnx/onnx_conv3d.c - 3-D convolution and pooling (ONNX Conv, MaxPool,
 * AveragePool and GlobalAveragePool on [N, C, D, H, W]: torchvision's video
 * models, r3d_18's Conv3d and AdaptiveAvgPool3d(1)) built from the 2-D ops,
 * so that they need no kernel of their own and their gradients are those
 * ops':
 *
 *   conv3d(x, w)[:, :, d] = sum over kd of conv2d(xp[:, :, d*sd + kd*dd], w[:, :, kd])
 *
 * with xp x zero-padded in depth. Each kd is one conv2d over the depth
 * slices it reads, stacked into the batch ([N, C, OD, H, W] -> [N*OD, C, H,
 * W]), so a 3x3x3 convolution is three 2-D convolutions and a sum; the
 * bias is added once. Pooling likewise: each depth tap is the 2-D pooling
 * of its slices, and the taps' maximum (max) or mean (average: the 2-D
 * means over equal window sizes, so without padding or counting the pads)
 * is the 3-D result. Global average pooling is the 2-D one over [N, C,
 * D*H, W]. auto_pad other than NOTSET and VALID, ceil_mode, and an average
 * that leaves padding out of its count over padded windows are refused by
 * name.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"

#include <math.h>
#include <string.h>

/* The 3 values of a spatial attribute (dflt when absent), each at least min. */
static tg_status ints3_min(onnx_builder *b, const char *name, int64_t dflt, int64_t min, int64_t *v)
{
    int n = 0;
    const int64_t *a = ob_attr_ints(b, name, &n);
    for (int i = 0; i < 3; i++)
        v[i] = a ? (i < n ? a[i] : 0) : dflt;
    if (a && n != 3)
        return ob_fail(b, TG_ERR_INVALID_ARG, "%s has %d values (3 for a 3-D convolution)", name,
                       n);
    for (int i = 0; i < 3; i++)
        if (v[i] < min || v[i] > (1 << 20))
            return ob_fail(b, TG_ERR_INVALID_ARG, "%s holds %lld (%lld to 2^20)", name,
                           (long long)v[i], (long long)min);
    return TG_OK;
}

static tg_status ints3(onnx_builder *b, const char *name, int64_t dflt, int64_t *v)
{
    return ints3_min(b, name, dflt, 1, v);
}

typedef struct conv3d_attrs {
    /* strides, dilations, pads (begin, end) per spatial dim; Conv's group;
     * auto_pad SAME_UPPER (1) or SAME_LOWER (2), else 0 */
    int64_t s[3], d[3], lo[3], hi[3];
    int group, same;
} conv3d_attrs;

/* Conv's and pooling's attributes on x [N, C, D, H, W] with a window of
 * ws.dim[2..4] (the weight's shape; ConvTranspose's too): auto_pad SAME_*
 * pads so that each output is ceil(in / stride) long, the odd one at the
 * end for UPPER (as ob_read_window), except for a transposed convolution
 * (tconv), whose SAME fixes the output size instead (ob_tconv_axis). */
static tg_status read_attrs(onnx_builder *b, tg_shape xs, tg_shape ws, bool tconv, conv3d_attrs *a)
{
    char buf[32];
    const char *mode = ob_attr_string(b, "auto_pad", buf, sizeof buf);
    bool valid = !strcmp(mode, "VALID");
    a->same = !strcmp(mode, "SAME_UPPER") ? 1 : !strcmp(mode, "SAME_LOWER") ? 2 : 0;
    if (mode[0] && strcmp(mode, "NOTSET") && !valid && !a->same)
        return ob_fail(b, TG_ERR_INVALID_ARG,
                       "auto_pad '%s' is unknown (NOTSET, VALID, SAME_UPPER, SAME_LOWER)", mode);
    TG_TRY(ints3(b, "strides", 1, a->s));
    TG_TRY(ints3(b, "dilations", 1, a->d));
    int n = 0;
    const int64_t *ks = ob_attr_ints(b, "kernel_shape", &n);
    for (int i = 0; ks && i < 3; i++)
        if (n != 3 || ks[i] != ws.dim[2 + i])
            return ob_fail(b, TG_ERR_SHAPE, "kernel_shape disagrees with the weight's shape");
    const int64_t *p = ob_attr_ints(b, "pads", &n);
    if (p && n != 6)
        return ob_fail(b, TG_ERR_INVALID_ARG, "pads has %d values (6 for a 3-D convolution)", n);
    for (int i = 0; i < 3; i++) {
        a->lo[i] = p && !valid ? p[i] : 0;
        a->hi[i] = p && !valid ? p[3 + i] : 0;
        if (a->lo[i] < 0 || a->hi[i] < 0 || a->lo[i] > (1 << 20) || a->hi[i] > (1 << 20))
            return ob_fail(b, TG_ERR_INVALID_ARG, "pads are negative or too large");
        if (a->same && !tconv) {
            int64_t in = xs.dim[2 + i], out = (in + a->s[i] - 1) / a->s[i];
            int64_t total = (out - 1) * a->s[i] + (ws.dim[2 + i] - 1) * a->d[i] + 1 - in;
            total = total > 0 ? total : 0;
            a->lo[i] = a->same == 1 ? total / 2 : total - total / 2;
            a->hi[i] = total - a->lo[i];
        }
    }
    a->group = (int)ob_attr_int(b, "group", 1);
    return TG_OK;
}

/* x's depth slices kd*dd, kd*dd + sd, ... (od of them) as a batch of 2-D
 * maps: [N, C, D', H, W] -> [N*od, C, H, W]. */
static tg_tensor *depth_slices(tg_graph *g, tg_tensor *xp, int64_t start, int64_t stride,
                               int64_t od)
{
    tg_tensor *s = tg_slice_ex(g, xp, 2, start, start + (od - 1) * stride + 1, stride);
    tg_shape xs = tg_tensor_shape(xp);
    tg_tensor *t = tg_transpose(g, s, (const int[]){0, 2, 1, 3, 4});
    return tg_reshape(g, t, tg_shape4(xs.dim[0] * od, xs.dim[1], xs.dim[3], xs.dim[4]));
}

/* The output length of a window spanning span over in padded by lo and
 * hi, rounded up under ceil_mode as PyTorch and ONNX do: the last window
 * must start inside the input or its begin padding. room >= 0. */
static int64_t window_count(int64_t in, int64_t lo, int64_t room, int64_t s, bool ceil)
{
    int64_t out = (ceil ? (room + s - 1) / s : room / s) + 1;
    return ceil && (out - 1) * s >= in + lo ? out - 1 : out;
}

/* x [N, C, D, H, W] padded along its depth by a's pads (with pad_value),
 * and further at the end for ceil_mode's last window, into *xp, and the
 * output depth *od of a window of taps depth taps over it; refused when
 * the window is deeper than the padded input. */
static tg_status pad_depth(onnx_builder *b, tg_tensor *x, int64_t taps, const conv3d_attrs *a,
                           bool ceil, float pad_value, tg_tensor **xp, int64_t *od)
{
    int64_t span = (taps - 1) * a->d[0] + 1, in = tg_tensor_shape(x).dim[2],
            depth = in + a->lo[0] + a->hi[0];
    if (depth < span)
        return ob_fail(b, TG_ERR_SHAPE, "the padded depth %lld is shorter than the window's %lld",
                       (long long)depth, (long long)span);
    *od = window_count(in, a->lo[0], depth - span, a->s[0], ceil);
    int64_t need = (*od - 1) * a->s[0] + span - in - a->lo[0];
    int64_t hi = need > a->hi[0] ? need : a->hi[0];
    *xp = x;
    if (a->lo[0] || hi)
        *xp = tg_pad(b->g, x, (const int64_t[]){0, 0, a->lo[0], 0, 0, 0, 0, hi, 0, 0},
                     TG_PAD_CONSTANT, pad_value);
    return TG_OK;
}

/* [N*od, C, OH, OW] (depth slices stacked in the batch) -> [N, C, od, OH, OW] */
static tg_tensor *from_slices(tg_graph *g, tg_tensor *t, int64_t n, int64_t od)
{
    tg_shape ts = tg_tensor_shape(t);
    tg_tensor *y =
        tg_reshape(g, t, tg_shape_of(5, (int64_t[]){n, od, ts.dim[1], ts.dim[2], ts.dim[3]}));
    return tg_transpose(g, y, (const int[]){0, 2, 1, 3, 4});
}

/* Conv's and ConvTranspose's x, 5-D weight w and optional bias. */
static tg_status read_operands(onnx_builder *b, tg_tensor **x, tg_tensor **w, tg_tensor **bias)
{
    *x = ob_tensor(b, 0);
    *w = *x ? ob_tensor(b, 1) : NULL;
    *bias = ob_has_input(b, 2) && *w ? ob_tensor(b, 2) : NULL;
    if (!*w || (ob_has_input(b, 2) && !*bias))
        return TG_ERR_UNSUPPORTED;
    int nd = tg_tensor_shape(*w).ndim;
    if (nd != 5)
        return ob_fail(b, TG_ERR_SHAPE, "weight has %d dims (5 for a 3-D input)", nd);
    return TG_OK;
}

tg_status ob_conv3d(onnx_builder *b)
{
    tg_graph *g = b->g;
    tg_tensor *x, *w, *bias;
    TG_TRY(read_operands(b, &x, &w, &bias));
    tg_shape xs = tg_tensor_shape(x), ws = tg_tensor_shape(w);
    conv3d_attrs a;
    TG_TRY(read_attrs(b, xs, ws, false, &a));
    tg_tensor *xp;
    int64_t od;
    TG_TRY(pad_depth(b, x, ws.dim[2], &a, false, 0.0f, &xp, &od));
    tg_conv2d_params p = {(int)a.s[1], (int)a.s[2], (int)a.lo[1], (int)a.lo[2],
                          (int)a.d[1], (int)a.d[2], a.group};
    tg_tensor *sum = NULL;
    for (int64_t kd = 0; kd < ws.dim[2]; kd++) {
        tg_tensor *wk = tg_reshape(g, tg_slice(g, w, 2, kd, kd + 1),
                                   tg_shape4(ws.dim[0], ws.dim[1], ws.dim[3], ws.dim[4]));
        tg_tensor *y = tg_conv2d_ex(g, depth_slices(g, xp, kd * a.d[0], a.s[0], od), wk,
                                    kd == 0 ? bias : NULL, p, (int)a.hi[1], (int)a.hi[2]);
        sum = sum ? tg_add(g, sum, y) : y;
    }
    if (!sum)
        return ob_set(b, 0, NULL);
    return ob_set(b, 0, from_slices(g, sum, xs.dim[0], od));
}

tg_status ob_global_avgpool3d(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    tg_shape s = tg_tensor_shape(x);
    tg_tensor *y = tg_global_avgpool(
        b->g, tg_reshape(b->g, x, tg_shape4(s.dim[0], s.dim[1], s.dim[2] * s.dim[3], s.dim[4])));
    return ob_set(b, 0,
                  tg_reshape(b->g, y, tg_shape_of(5, (int64_t[]){s.dim[0], s.dim[1], 1, 1, 1})));
}

/* A constant [N*od, 1, 1, 1] of the depth each average window divides by
 * (a count, exact in float), as PyTorch's avg_pool3d: the window clipped to the padded input,
 * and to the input itself unless counts_pads. */
static tg_tensor *depth_divisors(onnx_builder *b, int64_t n, int64_t od, int64_t in, int64_t k,
                                 const conv3d_attrs *a, bool counts_pads)
{
    float *v = tg_malloc((size_t)(n * od) * sizeof *v);
    if (!v) {
        ob_fail(b, TG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int64_t o = 0; o < od; o++) {
        int64_t lo = o * a->s[0] - a->lo[0], hi = lo + k;
        hi = hi < in + a->hi[0] ? hi : in + a->hi[0];
        if (!counts_pads)
            lo = lo > 0 ? lo : 0, hi = hi < in ? hi : in;
        for (int64_t i = 0; i < n; i++)
            v[i * od + o] = (float)(hi > lo ? hi - lo : 1);
    }
    tg_tensor *t = tg_constant_data(b->g, "window depths", tg_shape4(n * od, 1, 1, 1), v);
    tg_free(v);
    return t;
}

/* MaxPool and AveragePool on [N, C, D, H, W] (onnx_ops_norm.c passes them
 * here): the 2-D pooling of every depth tap's slices (which handles
 * height and width's pads, ceil_mode and count_include_pad), then the
 * taps' maximum, or their sum over the window's depth (depth_divisors). A
 * 2-D average divides by the height and width it counts, and the 3-D
 * window is their box with the depth, so the product of the two divisors
 * is the 3-D one. MaxPool's Indices: ob_maxpool_indices. */
tg_status ob_pool3d(onnx_builder *b, bool max)
{
    tg_graph *g = b->g;
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    int n = 0;
    const int64_t *ks = ob_attr_ints(b, "kernel_shape", &n);
    if (!ks || n != 3)
        return ob_fail(b, TG_ERR_INVALID_ARG, "kernel_shape must have 3 values (3-D pooling)");
    tg_shape xs = tg_tensor_shape(x), ws = tg_shape_of(5, (int64_t[]){1, 1, ks[0], ks[1], ks[2]});
    conv3d_attrs a;
    TG_TRY(read_attrs(b, xs, ws, false, &a));
    bool ceil = ob_attr_int(b, "ceil_mode", 0) != 0;
    bool counts_pads = ob_attr_int(b, "count_include_pad", 0) != 0;
    if (!max && (a.d[0] != 1 || a.d[1] != 1 || a.d[2] != 1))
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "dilated average pooling is not supported (dilations must be "
                       "1, as PyTorch's average pools have)");
    tg_tensor *xp;
    int64_t od;
    TG_TRY(pad_depth(b, x, ks[0], &a, ceil, max ? -INFINITY : 0.0f, &xp, &od));
    tg_pool2d_params p = {(int)ks[1],   (int)ks[2],   (int)a.s[1],  (int)a.s[2],
                          (int)a.lo[1], (int)a.lo[2], (int)a.hi[1], (int)a.hi[2],
                          (int)a.d[1],  (int)a.d[2],  ceil,         counts_pads};
    tg_tensor *acc = NULL;
    for (int64_t kd = 0; kd < ks[0]; kd++) {
        tg_tensor *sl = depth_slices(g, xp, kd * a.d[0], a.s[0], od);
        tg_tensor *y = max ? tg_maxpool2d_ex(g, sl, p) : tg_avgpool2d_ex(g, sl, p);
        acc = !acc ? y : max ? tg_maximum(g, acc, y) : tg_add(g, acc, y);
    }
    if (!max && acc) {
        tg_tensor *div = depth_divisors(b, xs.dim[0], od, xs.dim[2], ks[0], &a, counts_pads);
        if (!div)
            return TG_ERR_NOMEM;
        acc = tg_div(g, acc, div);
    }
    tg_tensor *y = acc ? from_slices(g, acc, xs.dim[0], od) : NULL;
    if (max && b->node->n_output > 1 && b->node->output[1][0]) {
        tg_tensor *idx = y ? ob_maxpool_indices(b, x, y, ks, a.s, a.d, a.lo) : NULL;
        TG_TRY(ob_set(b, 1, idx));
    }
    return ob_set(b, 0, y);
}

/* ConvTranspose's attributes on x [N, C, D, H, W] and its output padding:
 * pads, or what output_shape or auto_pad SAME_* leave (ob_tconv_axis). */
static tg_status read_tconv_attrs(onnx_builder *b, tg_shape xs, tg_shape ws, conv3d_attrs *a,
                                  int64_t op[3])
{
    TG_TRY(read_attrs(b, xs, ws, true, a));
    TG_TRY(ints3_min(b, "output_padding", 0, 0, op));
    int n = 0;
    const int64_t *os = ob_attr_ints(b, "output_shape", &n);
    if (os && n != 3 && n != 5)
        return ob_fail(b, TG_ERR_INVALID_ARG, "output_shape has %d values (3 or 5 for a 3-D input)",
                       n);
    for (int i = 0; i < 3; i++) {
        int64_t want = os ? os[n - 3 + i] : a->same ? xs.dim[2 + i] * a->s[i] : -1;
        TG_TRY(ob_tconv_axis(b, xs.dim[2 + i], ws.dim[2 + i], want, a->same == 1, a->s[i], a->d[i],
                             &a->lo[i], &a->hi[i], &op[i]));
    }
    return TG_OK;
}

/* One depth tap's 2-D output z [N*D, O, OH, OW] (input depth slices in the
 * batch) placed at depths id*sd + off of a [N, full, O*OH*OW] tensor:
 * spread by the stride (zeros between), shifted by off. */
static tg_tensor *place_tap(tg_graph *g, tg_tensor *z, int64_t n, int64_t depth, int64_t sd,
                            int64_t off, int64_t full)
{
    tg_shape zs = tg_tensor_shape(z);
    int64_t plane = zs.dim[1] * zs.dim[2] * zs.dim[3];
    tg_tensor *t = tg_reshape(g, z, tg_shape4(n, depth, 1, plane));
    if (sd > 1)
        t = tg_pad(g, t, (const int64_t[]){0, 0, 0, 0, 0, 0, sd - 1, 0}, TG_PAD_CONSTANT, 0.0f);
    t = tg_reshape(g, t, tg_shape_of(3, (int64_t[]){n, depth * sd, plane}));
    return tg_pad(g, t, (const int64_t[]){0, off, 0, 0, full - off - depth * sd, 0},
                  TG_PAD_CONSTANT, 0.0f);
}

/* ConvTranspose on [N, C, D, H, W]: weight depth tap kd is a 2-D
 * transposed convolution of every input depth slice (stacked into the
 * batch) whose outputs land at depths id*sd + kd*dd (place_tap); the taps
 * summed, then one tg_pad crops every axis's pads at both ends and adds
 * output_padding at the end, and the bias is added last (output_padding's
 * positions get it too, as in PyTorch). Gradients are those ops'. */
tg_status ob_conv_transpose3d(onnx_builder *b)
{
    tg_graph *g = b->g;
    tg_tensor *x, *w, *bias;
    TG_TRY(read_operands(b, &x, &w, &bias));
    tg_shape xs = tg_tensor_shape(x), ws = tg_tensor_shape(w);
    conv3d_attrs a;
    int64_t op[3];
    TG_TRY(read_tconv_attrs(b, xs, ws, &a, op));
    int64_t n = xs.dim[0], depth = xs.dim[2],
            full = (depth - 1) * a.s[0] + (ws.dim[2] - 1) * a.d[0] + 1;
    tg_tensor *xb = tg_reshape(g, tg_transpose(g, x, (const int[]){0, 2, 1, 3, 4}),
                               tg_shape4(n * depth, xs.dim[1], xs.dim[3], xs.dim[4]));
    tg_conv2d_params p = {(int)a.s[1], (int)a.s[2], 0, 0, (int)a.d[1], (int)a.d[2], a.group};
    tg_tensor *sum = NULL;
    tg_shape zs = {0};
    for (int64_t kd = 0; kd < ws.dim[2]; kd++) {
        tg_tensor *wk = tg_reshape(g, tg_slice(g, w, 2, kd, kd + 1),
                                   tg_shape4(ws.dim[0], ws.dim[1], ws.dim[3], ws.dim[4]));
        tg_tensor *z = tg_conv_transpose2d(g, xb, wk, NULL, p, 0, 0);
        if (!z)
            return ob_set(b, 0, NULL);
        zs = tg_tensor_shape(z);
        tg_tensor *t = place_tap(g, z, n, depth, a.s[0], kd * a.d[0], full);
        sum = sum ? tg_add(g, sum, t) : t;
    }
    if (!sum)
        return ob_set(b, 0, NULL);
    tg_tensor *y =
        tg_reshape(g, sum, tg_shape_of(5, (int64_t[]){n, full, zs.dim[1], zs.dim[2], zs.dim[3]}));
    y = tg_transpose(g, y, (const int[]){0, 2, 1, 3, 4});
    int64_t pads[10] = {0};
    bool crop = false;
    for (int i = 0; i < 3; i++) {
        pads[2 + i] = -a.lo[i];
        pads[7 + i] = op[i] - a.hi[i];
        crop = crop || pads[2 + i] || pads[7 + i];
    }
    if (crop)
        y = tg_pad(g, y, pads, TG_PAD_CONSTANT, 0.0f);
    if (bias)
        y = tg_add(g, y, tg_reshape(g, bias, tg_shape_of(5, (int64_t[]){1, zs.dim[1], 1, 1, 1})));
    return ob_set(b, 0, y);
}
