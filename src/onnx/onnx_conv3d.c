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

#include <math.h>
#include <string.h>

/* The 3 values of a spatial attribute (dflt when absent). */
static tg_status ints3(onnx_builder *b, const char *name, int64_t dflt, int64_t *v)
{
    int n = 0;
    const int64_t *a = ob_attr_ints(b, name, &n);
    for (int i = 0; i < 3; i++)
        v[i] = a ? (i < n ? a[i] : 0) : dflt;
    if (a && n != 3)
        return ob_fail(b, TG_ERR_INVALID_ARG, "%s has %d values (3 for a 3-D convolution)", name,
                       n);
    for (int i = 0; i < 3; i++)
        if (v[i] < 1)
            return ob_fail(b, TG_ERR_INVALID_ARG, "%s holds %lld (at least 1)", name,
                           (long long)v[i]);
    return TG_OK;
}

typedef struct conv3d_attrs {
    /* strides, dilations, pads (begin, end) per spatial dim; Conv's group */
    int64_t s[3], d[3], lo[3], hi[3];
    int group;
} conv3d_attrs;

static tg_status read_attrs(onnx_builder *b, tg_shape ws, conv3d_attrs *a)
{
    char buf[32];
    const char *mode = ob_attr_string(b, "auto_pad", buf, sizeof buf);
    bool valid = !strcmp(mode, "VALID");
    if (mode[0] && strcmp(mode, "NOTSET") && !valid)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "auto_pad '%s' with a 3-D convolution (give pads; NOTSET and VALID are "
                       "taken)",
                       mode);
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
        if (a->lo[i] < 0 || a->hi[i] < 0)
            return ob_fail(b, TG_ERR_INVALID_ARG, "pads must not be negative");
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

/* x [N, C, D, H, W] padded along its depth by a's pads (with pad_value) into
 * *xp, and the output depth *od of a window of taps depth taps over it;
 * refused when the window is deeper than the padded input. */
static tg_status pad_depth(onnx_builder *b, tg_tensor *x, int64_t taps, const conv3d_attrs *a,
                           float pad_value, tg_tensor **xp, int64_t *od)
{
    int64_t span = (taps - 1) * a->d[0] + 1,
            depth = tg_tensor_shape(x).dim[2] + a->lo[0] + a->hi[0];
    if (depth < span)
        return ob_fail(b, TG_ERR_SHAPE, "the padded depth %lld is shorter than the window's %lld",
                       (long long)depth, (long long)span);
    *od = (depth - span) / a->s[0] + 1;
    *xp = x;
    if (a->lo[0] || a->hi[0])
        *xp = tg_pad(b->g, x, (const int64_t[]){0, 0, a->lo[0], 0, 0, 0, 0, a->hi[0], 0, 0},
                     TG_PAD_CONSTANT, pad_value);
    return TG_OK;
}

tg_status ob_conv3d(onnx_builder *b)
{
    tg_graph *g = b->g;
    tg_tensor *x = ob_tensor(b, 0), *w = x ? ob_tensor(b, 1) : NULL;
    tg_tensor *bias = ob_has_input(b, 2) && w ? ob_tensor(b, 2) : NULL;
    if (!w || (ob_has_input(b, 2) && !bias))
        return TG_ERR_UNSUPPORTED;
    tg_shape xs = tg_tensor_shape(x), ws = tg_tensor_shape(w);
    if (ws.ndim != 5)
        return ob_fail(b, TG_ERR_SHAPE, "weight has %d dims (5 for a 3-D input)", ws.ndim);
    conv3d_attrs a;
    TG_TRY(read_attrs(b, ws, &a));
    tg_tensor *xp;
    int64_t od;
    TG_TRY(pad_depth(b, x, ws.dim[2], &a, 0.0f, &xp, &od));
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
    tg_shape ys = tg_tensor_shape(sum); /* [N*od, O, OH, OW] */
    tg_tensor *y = tg_reshape(
        g, sum, tg_shape_of(5, (int64_t[]){xs.dim[0], od, ys.dim[1], ys.dim[2], ys.dim[3]}));
    return ob_set(b, 0, tg_transpose(g, y, (const int[]){0, 2, 1, 3, 4}));
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

/* MaxPool and AveragePool on [N, C, D, H, W] (onnx_ops_norm.c passes them
 * here): the 2-D pooling of every depth tap's slices, then the taps'
 * maximum or mean. */
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
    if (b->node->n_output > 1 && b->node->output[1][0])
        return ob_fail(b, TG_ERR_UNSUPPORTED, "the Indices output of a 3-D MaxPool");
    if (ob_attr_int(b, "ceil_mode", 0))
        return ob_fail(b, TG_ERR_UNSUPPORTED, "ceil_mode with 3-D pooling");
    tg_shape ws = tg_shape_of(5, (int64_t[]){1, 1, ks[0], ks[1], ks[2]});
    conv3d_attrs a;
    TG_TRY(read_attrs(b, ws, &a));
    bool counts_pads = ob_attr_int(b, "count_include_pad", 0) != 0;
    bool padded = a.lo[0] || a.lo[1] || a.lo[2] || a.hi[0] || a.hi[1] || a.hi[2];
    if (!max && padded && !counts_pads)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "a padded 3-D AveragePool without count_include_pad (each window would "
                       "count the elements it covers)");
    if (!max && (a.d[0] != 1 || a.d[1] != 1 || a.d[2] != 1))
        return ob_fail(b, TG_ERR_UNSUPPORTED, "dilated average pooling is not supported");
    tg_shape xs = tg_tensor_shape(x);
    tg_tensor *xp;
    int64_t od;
    TG_TRY(pad_depth(b, x, ks[0], &a, max ? -INFINITY : 0.0f, &xp, &od));
    tg_pool2d_params p = {(int)ks[1],   (int)ks[2],   (int)a.s[1],  (int)a.s[2],
                          (int)a.lo[1], (int)a.lo[2], (int)a.hi[1], (int)a.hi[2],
                          (int)a.d[1],  (int)a.d[2],  false,        true};
    tg_tensor *acc = NULL;
    for (int64_t kd = 0; kd < ks[0]; kd++) {
        tg_tensor *sl = depth_slices(g, xp, kd * a.d[0], a.s[0], od);
        tg_tensor *y = max ? tg_maxpool2d_ex(g, sl, p) : tg_avgpool2d_ex(g, sl, p);
        acc = !acc ? y : max ? tg_maximum(g, acc, y) : tg_add(g, acc, y);
    }
    if (!max && acc)
        acc = tg_scale(g, acc, 1.0f / (float)ks[0], 0.0f);
    if (!acc)
        return ob_set(b, 0, NULL);
    tg_shape ys = tg_tensor_shape(acc);
    tg_tensor *y = tg_reshape(
        g, acc, tg_shape_of(5, (int64_t[]){xs.dim[0], od, ys.dim[1], ys.dim[2], ys.dim[3]}));
    return ob_set(b, 0, tg_transpose(g, y, (const int[]){0, 2, 1, 3, 4}));
}
