/* onnx/onnx_ops.c - ONNX operators that compute: each maps one node onto
 * the graph builder API, checking every attribute it is given. A value or
 * combination the builder cannot express exactly is refused, naming the
 * node and attribute, never approximated.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- shared attribute checks --------------------------------------------- */

/* Conv window attributes for 2-D inputs: strides, dilations, and padding
 * per side (pads, or auto_pad SAME_UPPER/SAME_LOWER: the odd pixel at the
 * end for UPPER, at the start for LOWER). */
typedef struct window {
    int64_t k[2], s[2], lo[2], hi[2], d[2];
} window;

static tg_status read_window(onnx_builder *b, tg_shape x, const int64_t *kernel, window *w)
{
    int n;
    const int64_t *a;
    char pad_mode[32];
    for (int i = 0; i < 2; i++) {
        w->k[i] = kernel[i];
        w->s[i] = w->d[i] = 1;
        w->lo[i] = w->hi[i] = 0;
    }
    if ((a = ob_attr_ints(b, "strides", &n)) && n == 2)
        memcpy(w->s, a, sizeof w->s);
    if ((a = ob_attr_ints(b, "dilations", &n)) && n == 2)
        memcpy(w->d, a, sizeof w->d);
    if ((a = ob_attr_ints(b, "pads", &n))) {
        if (n != 4)
            return ob_fail(b, TG_ERR_INVALID_ARG, "pads has %d values (4 for 2-D)", n);
        for (int i = 0; i < 2; i++) {
            w->lo[i] = a[i];
            w->hi[i] = a[2 + i];
        }
    }
    const char *mode = ob_attr_string(b, "auto_pad", pad_mode, sizeof pad_mode);
    bool upper = !strcmp(mode, "SAME_UPPER");
    if (upper || !strcmp(mode, "SAME_LOWER")) {
        for (int i = 0; i < 2; i++) {
            int64_t in = x.dim[2 + i], out = (in + w->s[i] - 1) / w->s[i];
            int64_t total = (out - 1) * w->s[i] + (w->k[i] - 1) * w->d[i] + 1 - in;
            total = total > 0 ? total : 0;
            w->lo[i] = upper ? total / 2 : total - total / 2;
            w->hi[i] = total - w->lo[i];
        }
    } else if (!strcmp(mode, "VALID")) {
        w->lo[0] = w->lo[1] = w->hi[0] = w->hi[1] = 0;
    } else if (mode[0] && strcmp(mode, "NOTSET")) {
        return ob_fail(b, TG_ERR_INVALID_ARG, "auto_pad '%s' is unknown", mode);
    }
    for (int i = 0; i < 2; i++)
        if (w->lo[i] < 0 || w->hi[i] < 0)
            return ob_fail(b, TG_ERR_INVALID_ARG, "negative pads");
    return TG_OK;
}

static tg_status need_4d(onnx_builder *b, tg_tensor *x)
{
    if (!x)
        return TG_ERR_UNSUPPORTED;
    if (tg_tensor_shape(x).ndim != 4)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "only 2-D (4-dimensional NCHW) inputs are "
                       "supported, not %d dimensions",
                       tg_tensor_shape(x).ndim);
    return TG_OK;
}

/* ---- convolution and linear ---------------------------------------------- */

static tg_status map_conv(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    TG_TRY(need_4d(b, x));
    tg_tensor *w = ob_tensor(b, 1);
    tg_tensor *bias = ob_has_input(b, 2) ? ob_tensor(b, 2) : NULL;
    if (!w || (ob_has_input(b, 2) && !bias))
        return TG_ERR_UNSUPPORTED;
    tg_shape ws = tg_tensor_shape(w);
    if (ws.ndim != 4)
        return ob_fail(b, TG_ERR_SHAPE, "weight has %d dims (4 for a 2-D conv)", ws.ndim);
    int n;
    const int64_t *ks = ob_attr_ints(b, "kernel_shape", &n);
    if (ks && (n != 2 || ks[0] != ws.dim[2] || ks[1] != ws.dim[3]))
        return ob_fail(b, TG_ERR_SHAPE, "kernel_shape disagrees with the weight's shape");
    window win;
    TG_TRY(read_window(b, tg_tensor_shape(x), &ws.dim[2], &win));
    tg_conv2d_params p = {(int)win.s[0],
                          (int)win.s[1],
                          (int)win.lo[0],
                          (int)win.lo[1],
                          (int)win.d[0],
                          (int)win.d[1],
                          (int)ob_attr_int(b, "group", 1)};
    return ob_set(b, 0, tg_conv2d_ex(b->g, x, w, bias, p, (int)win.hi[0], (int)win.hi[1]));
}

static tg_status map_gemm(onnx_builder *b)
{
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

/* ---- elementwise --------------------------------------------------------- */

typedef enum { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV } bin_kind;

static double fold_one(bin_kind k, double x, double y, bool integer)
{
    switch (k) {
    case BIN_ADD:
        return x + y;
    case BIN_SUB:
        return x - y;
    case BIN_MUL:
        return x * y;
    default:
        if (integer)
            return y != 0 ? (double)((int64_t)x / (int64_t)y) : 0.0;
        return x / y;
    }
}

/* Shape arithmetic on constants (same shape, or one side a single value). */
static tg_status fold_binary(onnx_builder *b, bin_kind k)
{
    const tg_onnx_data *x = ob_const(b, 0), *y = x ? ob_const(b, 1) : NULL;
    if (!y)
        return TG_ERR_UNSUPPORTED;
    if (x->n != y->n && x->n != 1 && y->n != 1)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "folding constants of %lld and %lld elements "
                       "(same size or one element)",
                       (long long)x->n, (long long)y->n);
    const tg_onnx_data *big = x->n >= y->n ? x : y;
    bool is_float = x->f || y->f;
    if (k == BIN_DIV && !is_float)
        for (int64_t i = 0; i < y->n; i++)
            if (y->i[i] == 0)
                return ob_fail(b, TG_ERR_NUMERIC, "integer division by zero");
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, is_float, big->ndim, big->dim, &d));
    for (int64_t i = 0; i < d.n; i++) {
        double u = x->f ? x->f[x->n == 1 ? 0 : i] : (double)x->i[x->n == 1 ? 0 : i];
        double v = y->f ? y->f[y->n == 1 ? 0 : i] : (double)y->i[y->n == 1 ? 0 : i];
        double r = fold_one(k, u, v, !is_float);
        if (d.f)
            d.f[i] = (float)r;
        else
            d.i[i] = (int64_t)r;
    }
    return ob_set_const(b, 0, &d);
}

static tg_status binary(onnx_builder *b, bin_kind k)
{
    if (ob_is_const(b, 0) && ob_is_const(b, 1) && ob_initializer(b, 0) < 0 &&
        ob_initializer(b, 1) < 0)
        return fold_binary(b, k);
    tg_tensor *x = ob_tensor(b, 0), *y = x ? ob_tensor(b, 1) : NULL;
    if (!y)
        return TG_ERR_UNSUPPORTED;
    tg_tensor *(*fn[])(tg_graph *, tg_tensor *, tg_tensor *) = {tg_add, tg_sub, tg_mul, tg_div};
    return ob_set(b, 0, fn[k](b->g, x, y));
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
static tg_status map_neg(onnx_builder *b)
{
    return unary(b, tg_neg);
}
static tg_status map_abs(onnx_builder *b)
{
    return unary(b, tg_abs);
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

static tg_status map_clip(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    float lo, hi;
    TG_TRY(clip_bound(b, 1, -INFINITY, &lo));
    TG_TRY(clip_bound(b, 2, INFINITY, &hi));
    if (isnan(lo) || isnan(hi))
        return ob_fail(b, TG_ERR_UNSUPPORTED, "a NaN bound");
    return ob_set(b, 0, tg_clip(b->g, x, lo, hi));
}

/* Max, Min, Sum, Mean: any number of inputs, broadcast pairwise. */
static tg_status variadic(onnx_builder *b, tg_tensor *(*fn)(tg_graph *, tg_tensor *, tg_tensor *),
                          bool mean)
{
    int n = (int)b->node->n_input;
    tg_tensor *y = n > 0 ? ob_tensor(b, 0) : NULL;
    for (int k = 1; y && k < n; k++) {
        tg_tensor *x = ob_tensor(b, k);
        y = x ? fn(b->g, y, x) : NULL;
    }
    if (!y)
        return n > 0 ? TG_ERR_UNSUPPORTED : ob_fail(b, TG_ERR_FORMAT, "no inputs");
    if (mean && n > 1)
        y = tg_scale(b->g, y, 1.0f / (float)n, 0.0f);
    return ob_set(b, 0, y);
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
    const tg_onnx_data *e = ob_is_const(b, 1) ? ob_const(b, 1) : NULL;
    double v = e && e->n == 1 ? (e->f ? e->f[0] : (double)e->i[0]) : NAN;
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    if (v == 1.0)
        return ob_set(b, 0, x);
    if (v == 2.0)
        return ob_set(b, 0, tg_mul(b->g, x, x));
    tg_tensor *y = ob_tensor(b, 1);
    return y ? ob_set(b, 0, tg_pow(b->g, x, y)) : TG_ERR_UNSUPPORTED;
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

/* ---- pooling ------------------------------------------------------------- */

/* kernel_shape, strides, pads (per side), dilations, ceil_mode and auto_pad
 * into the builder's pooling parameters. */
static tg_status pool_params(onnx_builder *b, tg_tensor *x, tg_pool2d_params *p)
{
    int n;
    const int64_t *ks = ob_attr_ints(b, "kernel_shape", &n), *a;
    if (!ks || n != 2)
        return ob_fail(b, TG_ERR_UNSUPPORTED, "kernel_shape must have 2 values (2-D pooling)");
    tg_pool2d_params q = {(int)ks[0], (int)ks[1], 1, 1, 0, 0, 0, 0, 1, 1, false, false};
    if ((a = ob_attr_ints(b, "strides", &n)) && n == 2) {
        q.stride_h = (int)a[0];
        q.stride_w = (int)a[1];
    }
    if ((a = ob_attr_ints(b, "dilations", &n)) && n == 2) {
        q.dilation_h = (int)a[0];
        q.dilation_w = (int)a[1];
    }
    if ((a = ob_attr_ints(b, "pads", &n))) {
        if (n != 4)
            return ob_fail(b, TG_ERR_INVALID_ARG, "pads has %d values (4 for 2-D)", n);
        q.pad_top = (int)a[0];
        q.pad_left = (int)a[1];
        q.pad_bottom = (int)a[2];
        q.pad_right = (int)a[3];
    }
    q.ceil_mode = ob_attr_int(b, "ceil_mode", 0) != 0;
    char mode_buf[32];
    const char *mode = ob_attr_string(b, "auto_pad", mode_buf, sizeof mode_buf);
    bool upper = !strcmp(mode, "SAME_UPPER");
    if (upper || !strcmp(mode, "SAME_LOWER")) {
        /* output ceil(in / stride); the odd padding pixel goes at the end
         * for SAME_UPPER, at the start for SAME_LOWER */
        tg_shape s = tg_tensor_shape(x);
        int k[2] = {(q.kernel_h - 1) * q.dilation_h + 1, (q.kernel_w - 1) * q.dilation_w + 1};
        int st[2] = {q.stride_h, q.stride_w}, lo[2], hi[2];
        for (int i = 0; i < 2; i++) {
            int64_t in = s.dim[2 + i], out = (in + st[i] - 1) / st[i];
            int64_t total = (out - 1) * st[i] + k[i] - in;
            total = total > 0 ? total : 0;
            lo[i] = (int)(upper ? total / 2 : total - total / 2);
            hi[i] = (int)(total - lo[i]);
        }
        q.pad_top = lo[0];
        q.pad_left = lo[1];
        q.pad_bottom = hi[0];
        q.pad_right = hi[1];
    } else if (!strcmp(mode, "VALID")) {
        q.pad_top = q.pad_left = q.pad_bottom = q.pad_right = 0;
    } else if (mode[0] && strcmp(mode, "NOTSET")) {
        return ob_fail(b, TG_ERR_INVALID_ARG, "auto_pad '%s' is unknown", mode);
    }
    *p = q;
    return TG_OK;
}

/* The builder refuses pads over half the window; ONNX allows them but
 * PyTorch never exports them: refuse as unsupported, naming the values. */
static tg_status check_pool_pads(onnx_builder *b, const tg_pool2d_params *p)
{
    int kh = (p->kernel_h - 1) * p->dilation_h + 1, kw = (p->kernel_w - 1) * p->dilation_w + 1;
    if (2 * p->pad_top > kh || 2 * p->pad_bottom > kh || 2 * p->pad_left > kw ||
        2 * p->pad_right > kw)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "pads [%d, %d, %d, %d] with a %dx%d window (at "
                       "most half the window, as PyTorch allows)",
                       p->pad_top, p->pad_left, p->pad_bottom, p->pad_right, kh, kw);
    return TG_OK;
}

static tg_status map_maxpool(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    TG_TRY(need_4d(b, x));
    tg_pool2d_params p;
    TG_TRY(pool_params(b, x, &p));
    TG_TRY(check_pool_pads(b, &p));
    if (ob_attr_int(b, "storage_order", 0))
        return ob_fail(b, TG_ERR_UNSUPPORTED, "storage_order=1 is not supported");
    return ob_set(b, 0, tg_maxpool2d_ex(b->g, x, p));
}

static tg_status map_avgpool(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    TG_TRY(need_4d(b, x));
    tg_pool2d_params p;
    TG_TRY(pool_params(b, x, &p));
    TG_TRY(check_pool_pads(b, &p));
    if (p.dilation_h != 1 || p.dilation_w != 1)
        return ob_fail(b, TG_ERR_UNSUPPORTED, "dilated average pooling is not supported");
    p.count_include_pad = ob_attr_int(b, "count_include_pad", 0) != 0;
    return ob_set(b, 0, tg_avgpool2d_ex(b->g, x, p));
}

static tg_status map_global_avgpool(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    TG_TRY(need_4d(b, x));
    return ob_set(b, 0, tg_global_avgpool(b->g, x));
}

/* ---- normalisation ------------------------------------------------------- */

/* "bn1.running_mean" -> "bn1.running_stats": the [2, C] state tg_batch_norm
 * keeps, named after the module. */
static void stats_name(const char *mean_name, char *buf, size_t cap)
{
    const char *suffix = "running_mean";
    size_t n = strlen(mean_name), s = strlen(suffix);
    if (n >= s && !strcmp(mean_name + n - s, suffix))
        snprintf(buf, cap, "%.*srunning_stats", (int)(n - s), mean_name);
    else
        snprintf(buf, cap, "%s.running_stats", mean_name);
}

static tg_status map_batch_norm(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    tg_tensor *gamma = x ? ob_tensor(b, 1) : NULL, *beta = gamma ? ob_tensor(b, 2) : NULL;
    if (!beta)
        return TG_ERR_UNSUPPORTED;
    if (!ob_is_const(b, 3) || !ob_is_const(b, 4))
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "the running mean and variance must be "
                       "initializers (they become the batch norm's state)");
    const tg_onnx_data *mean = ob_const(b, 3), *var = mean ? ob_const(b, 4) : NULL;
    if (!var)
        return TG_ERR_UNSUPPORTED;
    int64_t c = tg_tensor_shape(x).ndim > 1 ? tg_tensor_shape(x).dim[1] : 0;
    if (!mean->f || !var->f || mean->n != c || var->n != c)
        return ob_fail(b, TG_ERR_SHAPE, "mean and variance must be %lld floats each", (long long)c);
    /* ONNX's momentum weighs the old statistics; tg_batch_norm uses
     * PyTorch's 0.1 for the new ones, i.e. ONNX's 0.9 */
    float momentum = ob_attr_float(b, "momentum", 0.9f);
    if (tg_graph_training(b->g) && fabsf(momentum - 0.9f) > 1e-6f)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "momentum %g in training (0.9, PyTorch's 0.1, is "
                       "supported)",
                       (double)momentum);
    float *stats = tg_malloc((size_t)(2 * c) * sizeof(float));
    if (!stats)
        return ob_fail(b, TG_ERR_NOMEM, "out of memory");
    memcpy(stats, mean->f, (size_t)c * sizeof(float));
    memcpy(stats + c, var->f, (size_t)c * sizeof(float));
    char name[512];
    stats_name(b->node->input[3], name, sizeof name);
    tg_tensor *running = ob_param(b, name, tg_shape2(2, c), stats, true);
    tg_free(stats);
    return ob_set(b, 0,
                  tg_batch_norm(b->g, x, gamma, beta, running, ob_attr_float(b, "epsilon", 1e-5f)));
}

static tg_status map_layer_norm(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    tg_tensor *gamma = x ? ob_tensor(b, 1) : NULL;
    tg_tensor *beta = gamma && ob_has_input(b, 2) ? ob_tensor(b, 2) : NULL;
    if (!gamma || (ob_has_input(b, 2) && !beta))
        return TG_ERR_UNSUPPORTED;
    int axis = 0, nd = tg_tensor_shape(x).ndim;
    TG_TRY(ob_axis(b, ob_attr_int(b, "axis", -1), nd, &axis));
    if (ob_attr_int(b, "stash_type", 1) != 1)
        return ob_fail(b, TG_ERR_UNSUPPORTED, "stash_type other than float");
    return ob_set(
        b, 0, tg_layer_norm(b->g, x, nd - axis, gamma, beta, ob_attr_float(b, "epsilon", 1e-5f)));
}

static tg_status map_dropout(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    float ratio = ob_attr_float(b, "ratio", 0.5f);
    if (ob_has_input(b, 1)) {
        const tg_onnx_data *r = ob_const(b, 1);
        if (!r || r->n != 1)
            return r ? ob_fail(b, TG_ERR_FORMAT, "ratio must be one value") : TG_ERR_UNSUPPORTED;
        ratio = r->f ? r->f[0] : (float)r->i[0];
    }
    /* the graph's mode decides (tg_graph_set_training), not the file's
     * training_mode input: the same export trains and infers */
    if (ratio < 0.0f || ratio >= 1.0f)
        return ob_fail(b, TG_ERR_INVALID_ARG, "ratio %g is outside [0, 1)", (double)ratio);
    return ob_set(b, 0, tg_dropout(b->g, x, ratio));
}

/* ---- shapes and reductions ----------------------------------------------- */

static tg_status map_flatten(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    tg_shape s = tg_tensor_shape(x);
    int64_t a = ob_attr_int(b, "axis", 1);
    if (a < -s.ndim || a > s.ndim)
        return ob_fail(b, TG_ERR_INVALID_ARG, "axis %lld is out of range for %d dims", (long long)a,
                       s.ndim);
    int axis = (int)(a < 0 ? a + s.ndim : a);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < s.ndim; d++)
        *(d < axis ? &outer : &inner) *= s.dim[d];
    return ob_set(b, 0, tg_reshape(b->g, x, tg_shape2(outer, inner)));
}

static tg_status map_transpose(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    int nd = tg_tensor_shape(x).ndim, n, perm[TG_MAX_DIMS];
    const int64_t *p = ob_attr_ints(b, "perm", &n);
    if (p && n != nd)
        return ob_fail(b, TG_ERR_INVALID_ARG, "perm has %d values for %d dims", n, nd);
    for (int d = 0; d < nd; d++)
        perm[d] = p ? (int)p[d] : nd - 1 - d;
    return ob_set(b, 0, tg_transpose(b->g, x, perm));
}

/* Slice of a constant, folded (the exporter slices its zero initial
 * states of recurrent layers out of one Constant): Python's slicing rules
 * per axis, as tg_slice_ex. */
static tg_status fold_slice(onnx_builder *b, const tg_onnx_data *x, const tg_onnx_data *st,
                            const tg_onnx_data *en, const tg_onnx_data *ax, const tg_onnx_data *sp)
{
    int64_t first[TG_MAX_DIMS], step[TG_MAX_DIMS], count[TG_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        first[d] = 0;
        step[d] = 1;
        count[d] = x->dim[d];
    }
    for (int64_t k = 0; k < st->n; k++) {
        int a = 0;
        TG_TRY(ob_axis(b, ax ? ax->i[k] : k, x->ndim, &a));
        int64_t n = x->dim[a], lo = st->i[k], hi = en->i[k], by = sp ? sp->i[k] : 1;
        if (by == 0)
            return ob_fail(b, TG_ERR_INVALID_ARG, "step 0 on axis %d", a);
        lo = lo < 0 ? lo + n : lo;
        hi = hi < 0 ? hi + n : hi;
        int64_t min = by > 0 ? 0 : -1, max = by > 0 ? n : n - 1;
        lo = lo < min ? min : lo > max ? max : lo;
        hi = hi < min ? min : hi > max ? max : hi;
        int64_t len = by > 0 ? (hi - lo + by - 1) / by : (lo - hi - by - 1) / -by;
        first[a] = lo;
        step[a] = by;
        count[a] = len > 0 ? len : 0;
    }
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, x->f != NULL, x->ndim, count, &d));
    d.elem_type = x->elem_type;
    for (int64_t k = 0; k < d.n; k++) {
        int64_t rem = k, src = 0, stride = 1;
        for (int a = x->ndim - 1; a >= 0; a--) {
            src += (first[a] + rem % count[a] * step[a]) * stride;
            rem /= count[a];
            stride *= x->dim[a];
        }
        if (d.f)
            d.f[k] = x->f[src];
        else
            d.i[k] = x->i[src];
    }
    return ob_set_const(b, 0, &d);
}

static tg_status map_slice(onnx_builder *b)
{
    bool folded = ob_is_foldable(b, 0);
    const tg_onnx_data *xc = folded ? ob_const(b, 0) : NULL;
    tg_tensor *x = folded ? NULL : ob_tensor(b, 0);
    if (!x && !xc)
        return TG_ERR_UNSUPPORTED;
    tg_shape s = x ? tg_tensor_shape(x) : tg_shape_of(xc->ndim, xc->dim);
    const tg_onnx_data *st = ob_const(b, 1), *en = st ? ob_const(b, 2) : NULL;
    const tg_onnx_data *ax = en && ob_has_input(b, 3) ? ob_const(b, 3) : NULL;
    const tg_onnx_data *sp = en && ob_has_input(b, 4) ? ob_const(b, 4) : NULL;
    if (!en || (ob_has_input(b, 3) && !ax) || (ob_has_input(b, 4) && !sp))
        return TG_ERR_UNSUPPORTED;
    if (!st->i || !en->i || st->n != en->n || (ax && ax->n != st->n) || (sp && sp->n != st->n))
        return ob_fail(b, TG_ERR_FORMAT,
                       "starts, ends, axes and steps must be integer lists of "
                       "one length");
    if (xc)
        return fold_slice(b, xc, st, en, ax, sp);
    tg_tensor *y = x;
    for (int64_t k = 0; k < st->n; k++) {
        int axis = 0;
        TG_TRY(ob_axis(b, ax ? ax->i[k] : k, s.ndim, &axis));
        if (sp && sp->i[k] == 0)
            return ob_fail(b, TG_ERR_INVALID_ARG, "step 0 on axis %d", axis);
        if (sp && sp->i[k] != 1) {
            /* tg_slice_ex reads start and end as ONNX does */
            y = tg_slice_ex(b->g, y, axis, st->i[k], en->i[k], sp->i[k]);
            continue;
        }
        int64_t n = s.dim[axis], lo = st->i[k], hi = en->i[k];
        lo = lo < 0 ? lo + n : lo;
        hi = hi < 0 ? hi + n : hi;
        lo = lo < 0 ? 0 : lo > n ? n : lo;
        hi = hi < lo ? lo : hi > n ? n : hi;
        /* the slice kernels are not written for empty tensors */
        if (hi == lo)
            return ob_fail(b, TG_ERR_UNSUPPORTED, "the slice of axis %d is empty", axis);
        if (lo != 0 || hi != n)
            y = tg_slice(b->g, y, axis, lo, hi);
    }
    return ob_set(b, 0, y);
}

static tg_status reduce(onnx_builder *b, tg_tensor *(*fn)(tg_graph *, tg_tensor *, unsigned, bool))
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    int nd = tg_tensor_shape(x).ndim, n;
    int64_t axes[TG_MAX_DIMS];
    const int64_t *a = ob_attr_ints(b, "axes", &n);
    if (!a && ob_has_input(b, 1)) { /* ReduceSum since opset 13 */
        const tg_onnx_data *d = ob_const(b, 1);
        if (!d)
            return TG_ERR_UNSUPPORTED;
        a = d->i;
        n = (int)d->n;
    }
    if (n > TG_MAX_DIMS || (n && !a))
        return ob_fail(b, TG_ERR_FORMAT, "axes must be at most %d integers", TG_MAX_DIMS);
    if (n)
        memcpy(axes, a, (size_t)n * sizeof *axes);
    unsigned mask = 0;
    if (n == 0 && ob_attr_int(b, "noop_with_empty_axes", 0))
        return ob_set(b, 0, x);
    for (int k = 0; k < n; k++) {
        int ax = 0;
        TG_TRY(ob_axis(b, axes[k], nd, &ax));
        mask |= 1u << ax;
    }
    if (n == 0)
        mask = (1u << nd) - 1;
    bool keep = ob_attr_int(b, "keepdims", 1) != 0;
    return ob_set(b, 0, fn(b->g, x, mask, keep));
}

static tg_status map_reduce_mean(onnx_builder *b)
{
    return reduce(b, tg_reduce_mean);
}
static tg_status map_reduce_sum(onnx_builder *b)
{
    return reduce(b, tg_reduce_sum);
}

static tg_status map_reduce_max(onnx_builder *b)
{
    return reduce(b, tg_reduce_max);
}
static tg_status map_reduce_min(onnx_builder *b)
{
    return reduce(b, tg_reduce_min);
}

/* Pad (opset 11+): pads and constant_value as constant inputs. */
static tg_status map_pad(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    const tg_onnx_data *pads = x ? ob_const(b, 1) : NULL;
    if (!pads)
        return TG_ERR_UNSUPPORTED;
    int nd = tg_tensor_shape(x).ndim;
    if (!pads->i || pads->n != 2 * nd)
        return ob_fail(b, TG_ERR_FORMAT, "pads must be %d integers for %d dims", 2 * nd, nd);
    float value = 0.0f;
    if (ob_has_input(b, 2)) {
        const tg_onnx_data *v = ob_const(b, 2);
        if (!v || v->n != 1)
            return v ? ob_fail(b, TG_ERR_FORMAT, "constant_value must be one value")
                     : TG_ERR_UNSUPPORTED;
        value = v->f ? v->f[0] : (float)v->i[0];
    }
    if (ob_has_input(b, 3))
        return ob_fail(b, TG_ERR_UNSUPPORTED, "the axes input (opset 18)");
    char buf[32];
    const char *mode = ob_attr_string(b, "mode", buf, sizeof buf);
    tg_pad_mode m;
    if (!mode[0] || !strcmp(mode, "constant"))
        m = TG_PAD_CONSTANT;
    else if (!strcmp(mode, "reflect"))
        m = TG_PAD_REFLECT;
    else if (!strcmp(mode, "edge"))
        m = TG_PAD_EDGE;
    else
        return ob_fail(b, TG_ERR_UNSUPPORTED, "mode '%s' (constant, reflect and edge are)", mode);
    return ob_set(b, 0, tg_pad(b->g, x, pads->i, m, value));
}

#define WINDOW_ATTRS "auto_pad,kernel_shape,pads,strides"

const ob_op tg_onnx_nn_ops[] = {
    {"Conv", map_conv, WINDOW_ATTRS ",dilations,group"},
    {"Gemm", map_gemm, "alpha,beta,transA,transB"},
    {"MatMul", map_matmul, ""},
    {"Add", map_add, ""},
    {"Sub", map_sub, ""},
    {"Mul", map_mul, ""},
    {"Div", map_div, ""},
    {"Pow", map_pow, ""},
    {"Relu", map_relu, ""},
    {"Erf", map_erf, ""},
    {"Exp", map_exp, ""},
    {"Log", map_log, ""},
    {"Sqrt", map_sqrt, ""},
    {"Neg", map_neg, ""},
    {"Abs", map_abs, ""},
    {"Reciprocal", map_reciprocal, ""},
    {"LeakyRelu", map_leaky_relu, "alpha"},
    {"Clip", map_clip, ""},
    {"Max", map_max, ""},
    {"Min", map_min, ""},
    {"Sum", map_sum, ""},
    {"Mean", map_mean, ""},
    {"Sigmoid", map_sigmoid, ""},
    {"Tanh", map_tanh, ""},
    {"Softmax", map_softmax, "axis"},
    {"LogSoftmax", map_log_softmax, "axis"},
    {"MaxPool", map_maxpool, WINDOW_ATTRS ",ceil_mode,dilations,storage_order"},
    {"AveragePool", map_avgpool, WINDOW_ATTRS ",ceil_mode,count_include_pad,dilations"},
    {"GlobalAveragePool", map_global_avgpool, ""},
    {"BatchNormalization", map_batch_norm, "epsilon,momentum,training_mode"},
    {"LayerNormalization", map_layer_norm, "axis,epsilon,stash_type"},
    {"Dropout", map_dropout, "ratio,seed"},
    {"Flatten", map_flatten, "axis"},
    {"Transpose", map_transpose, "perm"},
    {"Slice", map_slice, ""},
    {"ReduceMean", map_reduce_mean, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceSum", map_reduce_sum, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceMax", map_reduce_max, "axes,keepdims"},
    {"ReduceMin", map_reduce_min, "axes,keepdims"},
    {"Pad", map_pad, "mode"},
    {"LSTM", ob_map_lstm, OB_RNN_ATTRS ",input_forget"},
    {"GRU", ob_map_gru, OB_RNN_ATTRS ",linear_before_reset"},
    {"RNN", ob_map_rnn, OB_RNN_ATTRS},
};
const int tg_onnx_nn_op_count = (int)(sizeof tg_onnx_nn_ops / sizeof tg_onnx_nn_ops[0]);
