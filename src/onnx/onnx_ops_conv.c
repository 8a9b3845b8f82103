/* onnx/onnx_ops_conv.c - ONNX convolution, transposed convolution and
 * linear ops (Conv, ConvTranspose, Gemm, MatMul) mapped onto the graph
 * builder, refusing what it cannot express exactly.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- convolution and linear ---------------------------------------------- */

/* The weight's kernel (the last nsp dims) against kernel_shape, and the
 * weight as 2-D ([K, C, 1, k] for 1-D). */
static tg_status conv_weight(onnx_builder *b, tg_tensor *w, int nsp, tg_tensor **w2)
{
    tg_shape ws = tg_tensor_shape(w);
    if (ws.ndim != nsp + 2)
        return ob_fail(b, TG_ERR_SHAPE, "weight has %d dims (%d for a %d-D input)", ws.ndim,
                       nsp + 2, nsp);
    int n;
    const int64_t *ks = ob_attr_ints(b, "kernel_shape", &n);
    bool agree = ks && n == nsp;
    for (int i = 0; agree && i < nsp; i++)
        agree = ks[i] == ws.dim[2 + i];
    if (ks && !agree)
        return ob_fail(b, TG_ERR_SHAPE, "kernel_shape disagrees with the weight's shape");
    *w2 = ob_as_2d(b, w);
    return TG_OK;
}

/* Conv's and ConvTranspose's operands: x and w as 2-D maps (1-D and 3-D
 * ones reshaped), the optional bias, the spatial rank. x2 or w2 NULL is a
 * graph op that failed, which the caller records as the output. */
typedef struct conv_operands {
    tg_tensor *x2, *w2, *bias;
    int nsp;
} conv_operands;

static tg_status read_conv_operands(onnx_builder *b, conv_operands *o)
{
    tg_tensor *x = ob_tensor(b, 0);
    o->nsp = 0;
    TG_TRY(ob_spatial_dims(b, x, &o->nsp));
    tg_tensor *w = ob_tensor(b, 1);
    o->bias = ob_has_input(b, 2) ? ob_tensor(b, 2) : NULL;
    if (!w || (ob_has_input(b, 2) && !o->bias))
        return TG_ERR_UNSUPPORTED;
    o->x2 = ob_as_2d(b, x);
    o->w2 = NULL;
    return conv_weight(b, w, o->nsp, &o->w2);
}

static tg_status map_conv(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (x && tg_tensor_shape(x).ndim == 5)
        return ob_conv3d(b);
    conv_operands o;
    TG_TRY(read_conv_operands(b, &o));
    if (!o.x2 || !o.w2)
        return ob_set(b, 0, NULL);
    tg_shape ws = tg_tensor_shape(o.w2);
    ob_window win;
    TG_TRY(ob_read_window(b, tg_tensor_shape(o.x2), o.nsp, &ws.dim[2], &win));
    tg_conv2d_params p = {(int)win.s[0],
                          (int)win.s[1],
                          (int)win.lo[0],
                          (int)win.lo[1],
                          (int)win.d[0],
                          (int)win.d[1],
                          (int)ob_attr_int(b, "group", 1)};
    tg_tensor *y = tg_conv2d_ex(b->g, o.x2, o.w2, o.bias, p, (int)win.hi[0], (int)win.hi[1]);
    return ob_set(b, 0, ob_from_2d(b, y, o.nsp));
}

/* ---- transposed convolution ---------------------------------------------- */

static int64_t floor_div2(int64_t v)
{
    return v >= 0 ? v / 2 : -((-v + 1) / 2);
}

/* One axis of a ConvTranspose (in long, kernel k, stride s, dilation d):
 * for an output size want >= 0 (output_shape, or auto_pad SAME_*'s in * s)
 * the padding that size leaves, split as ONNX's opset 11 spec (and its
 * test data) does: SAME_UPPER (upper) puts the odd one at the end,
 * otherwise at the start; a total below zero (an output longer than the
 * transposed conv's) is extra output padding at the end. Then refuses an
 * output padding not below the stride. */
tg_status ob_tconv_axis(onnx_builder *b, int64_t in, int64_t k, int64_t want, bool upper, int64_t s,
                        int64_t d, int64_t *lo, int64_t *hi, int64_t *op)
{
    if (want >= 0) {
        int64_t total = s * (in - 1) + *op + (k - 1) * d + 1 - want;
        *lo = upper ? floor_div2(total) : total - floor_div2(total);
        *hi = total - *lo;
        if (*lo < 0)
            return ob_fail(b, TG_ERR_UNSUPPORTED,
                           "an output size of %lld where the transposed convolution gives "
                           "%lld (a larger size is supported up to stride - 1 - "
                           "output_padding more, added at the end)",
                           (long long)want, (long long)(want + total));
        if (*hi < 0)
            *op -= *hi, *hi = 0;
    }
    if (*op >= s)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "an output padding of %lld with stride %lld (less than the stride "
                       "is supported)",
                       (long long)*op, (long long)s);
    return TG_OK;
}

/* The padding per side of a ConvTranspose and its output padding: pads and
 * output_padding, or what output_shape or auto_pad SAME_* leave
 * (ob_tconv_axis). */
typedef struct tconv_dims {
    int64_t s[2], d[2], lo[2], hi[2], op[2];
} tconv_dims;

static tg_status tconv_read(onnx_builder *b, tg_shape x2, tg_shape w2, int nsp, tconv_dims *t)
{
    for (int i = 0; i < 2; i++)
        t->s[i] = t->d[i] = 1, t->lo[i] = t->hi[i] = t->op[i] = 0;
    TG_TRY(ob_spatial_ints(b, "strides", nsp, t->s));
    TG_TRY(ob_spatial_ints(b, "dilations", nsp, t->d));
    TG_TRY(ob_spatial_pads(b, nsp, t->lo, t->hi));
    TG_TRY(ob_spatial_ints_min(b, "output_padding", nsp, 0, t->op));
    char buf[32];
    const char *mode = ob_attr_string(b, "auto_pad", buf, sizeof buf);
    bool upper = !strcmp(mode, "SAME_UPPER"), same = upper || !strcmp(mode, "SAME_LOWER");
    if (!same && mode[0] && strcmp(mode, "NOTSET") && strcmp(mode, "VALID"))
        return ob_fail(b, TG_ERR_INVALID_ARG, "auto_pad '%s' is unknown", mode);
    if (!strcmp(mode, "VALID"))
        t->lo[0] = t->lo[1] = t->hi[0] = t->hi[1] = 0;
    int n;
    const int64_t *os = ob_attr_ints(b, "output_shape", &n);
    if (os && n != nsp && n != nsp + 2)
        return ob_fail(b, TG_ERR_INVALID_ARG, "output_shape has %d values for %d spatial dims", n,
                       nsp);
    for (int i = 2 - nsp; i < 2; i++) {
        int64_t want = os ? os[n - 2 + i] : x2.dim[2 + i] * t->s[i];
        TG_TRY(ob_tconv_axis(b, x2.dim[2 + i], w2.dim[2 + i], os || same ? want : -1, upper,
                             t->s[i], t->d[i], &t->lo[i], &t->hi[i], &t->op[i]));
    }
    return TG_OK;
}

/* ConvTranspose runs as tg_conv_transpose2d padded by the smaller side of
 * each axis; the larger side's excess is cropped after (a negative tg_pad). */
static tg_status map_conv_transpose(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (x && tg_tensor_shape(x).ndim == 5)
        return ob_conv_transpose3d(b);
    conv_operands o;
    TG_TRY(read_conv_operands(b, &o));
    if (!o.x2 || !o.w2)
        return ob_set(b, 0, NULL);
    tconv_dims t;
    TG_TRY(tconv_read(b, tg_tensor_shape(o.x2), tg_tensor_shape(o.w2), o.nsp, &t));
    int64_t sym[2], crop[8] = {0};
    for (int i = 0; i < 2; i++) {
        sym[i] = t.lo[i] < t.hi[i] ? t.lo[i] : t.hi[i];
        crop[2 + i] = sym[i] - t.lo[i];
        crop[6 + i] = sym[i] - t.hi[i];
    }
    tg_conv2d_params p = {(int)t.s[0],
                          (int)t.s[1],
                          (int)sym[0],
                          (int)sym[1],
                          (int)t.d[0],
                          (int)t.d[1],
                          (int)ob_attr_int(b, "group", 1)};
    tg_tensor *y = tg_conv_transpose2d(b->g, o.x2, o.w2, o.bias, p, (int)t.op[0], (int)t.op[1]);
    if (y && (t.lo[0] != t.hi[0] || t.lo[1] != t.hi[1]))
        y = tg_pad(b->g, y, crop, TG_PAD_CONSTANT, 0.0f);
    return ob_set(b, 0, ob_from_2d(b, y, o.nsp));
}

static tg_status map_gemm(onnx_builder *b)
{
    /* before opset 7 C broadcast only with broadcast=1; NumPy's rule takes
     * both forms' valid models */
    TG_TRY(ob_attr_in_opsets(b, "broadcast", 1, 7));
    tg_tensor *a = ob_tensor(b, 0), *w = a ? ob_tensor(b, 1) : NULL;
    tg_tensor *c = w && ob_has_input(b, 2) ? ob_tensor(b, 2) : NULL;
    if (!w || (ob_has_input(b, 2) && !c))
        return TG_ERR_UNSUPPORTED;
    float alpha = ob_attr_float(b, "alpha", 1.0f), beta = ob_attr_float(b, "beta", 1.0f);
    bool ta = ob_attr_int(b, "transA", 0) != 0, tb = ob_attr_int(b, "transB", 0) != 0;
    if (tg_tensor_shape(a).ndim != 2 || tg_tensor_shape(w).ndim != 2)
        return ob_fail(b, TG_ERR_SHAPE, "A and B must be 2-D");
    /* PyTorch's nn.Linear: x W^T + b in one op (its fast path) */
    if (!ta && tb && alpha == 1.0f && (!c || (beta == 1.0f && tg_tensor_shape(c).ndim == 1)))
        return ob_set(b, 0, tg_linear(b->g, a, w, c));
    tg_tensor *y = tg_matmul(b->g, a, w, ta, tb);
    if (alpha != 1.0f)
        y = tg_scale(b->g, y, alpha, 0.0f);
    if (c)
        y = tg_add(b->g, y, beta != 1.0f ? tg_scale(b->g, c, beta, 0.0f) : c);
    return ob_set(b, 0, y);
}

static tg_status map_matmul(onnx_builder *b)
{
    tg_tensor *a = ob_tensor(b, 0), *m = a ? ob_tensor(b, 1) : NULL;
    if (!m)
        return TG_ERR_UNSUPPORTED;
    tg_shape sa = tg_tensor_shape(a), sb = tg_tensor_shape(m);
    if (sa.ndim < 1 || sb.ndim < 1)
        return ob_fail(b, TG_ERR_SHAPE, "MatMul of a scalar");
    /* 1-D operands become matrices and the added dim is dropped after */
    tg_tensor *a2 = sa.ndim == 1 ? tg_reshape(b->g, a, tg_shape2(1, sa.dim[0])) : a;
    tg_tensor *b2 = sb.ndim == 1 ? tg_reshape(b->g, m, tg_shape2(sb.dim[0], 1)) : m;
    tg_shape s2a = tg_tensor_shape(a2), s2b = tg_tensor_shape(b2);
    if (s2b.ndim > 2 && s2b.ndim != s2a.ndim)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "batched MatMul of %d-D by %d-D (the batch dims "
                       "must be equal or B 2-D)",
                       s2a.ndim, s2b.ndim);
    tg_tensor *y = tg_matmul(b->g, a2, b2, false, false);
    if (y && (sa.ndim == 1 || sb.ndim == 1)) {
        tg_shape o = tg_tensor_shape(y), r = tg_shape_of(0, NULL);
        for (int d = 0; d < o.ndim; d++)
            if (!((sa.ndim == 1 && d == o.ndim - 2) || (sb.ndim == 1 && d == o.ndim - 1)))
                r.dim[r.ndim++] = o.dim[d];
        y = tg_reshape(b->g, y, r);
    }
    return ob_set(b, 0, y);
}

const ob_op tg_onnx_conv_ops[] = {
    {"Conv", map_conv, OB_WINDOW_ATTRS ",dilations,group"},
    {"ConvTranspose", map_conv_transpose,
     OB_WINDOW_ATTRS ",dilations,group,output_padding,output_shape"},
    {"Gemm", map_gemm, "alpha,beta,broadcast,transA,transB"},
    {"MatMul", map_matmul, ""},
};
const int tg_onnx_conv_op_count = (int)(sizeof tg_onnx_conv_ops / sizeof tg_onnx_conv_ops[0]);
