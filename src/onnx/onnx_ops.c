/* onnx/onnx_ops.c - ONNX operators that compute: each maps one node onto
 * the graph builder API, checking every attribute it is given. A value or
 * combination the builder cannot express exactly is refused, naming the
 * node and attribute, never approximated.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- shared attribute checks --------------------------------------------- */

/* Convolution and pooling over 1-D inputs [N, C, L] run as the 2-D ops over
 * [N, C, 1, L]: a window of height 1 with stride and dilation 1 and no
 * padding in the added dimension computes exactly the 1-D op. The helpers
 * below read an attribute's nsp values (1 or 2) into the last nsp of two
 * slots, the added height keeping its neutral value. */

/* The number of spatial dims of x (1 or 2), refusing others. */
static tg_status spatial_dims(onnx_builder *b, tg_tensor *x, int *nsp)
{
    if (!x)
        return TG_ERR_UNSUPPORTED;
    int nd = tg_tensor_shape(x).ndim;
    if (nd != 3 && nd != 4)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "only 1-D and 2-D inputs (3-dimensional NCL or 4-dimensional NCHW) are "
                       "supported, not %d dimensions%s",
                       nd, nd == 5 ? " (3-D convolution and pooling are not implemented)" : "");
    *nsp = nd - 2;
    return TG_OK;
}

/* [N, C, L] -> [N, C, 1, L]; a 4-D x as it is. */
static tg_tensor *as_2d(onnx_builder *b, tg_tensor *x)
{
    tg_shape s = tg_tensor_shape(x);
    return s.ndim == 3 ? tg_reshape(b->g, x, tg_shape4(s.dim[0], s.dim[1], 1, s.dim[2])) : x;
}

/* The 2-D op's output back to nsp spatial dims: [N, C, 1, L] -> [N, C, L]. */
static tg_tensor *from_2d(onnx_builder *b, tg_tensor *y, int nsp)
{
    if (!y || nsp == 2)
        return y;
    tg_shape s = tg_tensor_shape(y);
    return tg_reshape(b->g, y, tg_shape_of(3, (int64_t[]){s.dim[0], s.dim[1], s.dim[3]}));
}

/* Attribute `name` (nsp values, one per spatial dim) into out[2 - nsp ..]:
 * out keeps its values when the attribute is absent. */
static tg_status spatial_ints_min(onnx_builder *b, const char *name, int nsp, int64_t lo,
                                  int64_t out[2])
{
    int n;
    const int64_t *a = ob_attr_ints(b, name, &n);
    if (!a)
        return TG_OK;
    if (n != nsp)
        return ob_fail(b, TG_ERR_INVALID_ARG, "%s has %d values for %d spatial dimension%s", name,
                       n, nsp, nsp > 1 ? "s" : "");
    for (int i = 0; i < nsp; i++) {
        if (a[i] < lo || a[i] > (1 << 20))
            return ob_fail(b, TG_ERR_INVALID_ARG, "%s has %lld (must be %lld to 2^20)", name,
                           (long long)a[i], (long long)lo);
        out[2 - nsp + i] = a[i];
    }
    return TG_OK;
}

static tg_status spatial_ints(onnx_builder *b, const char *name, int nsp, int64_t out[2])
{
    return spatial_ints_min(b, name, nsp, 1, out);
}

/* pads (begins of the spatial dims, then their ends) into lo/hi. */
static tg_status spatial_pads(onnx_builder *b, int nsp, int64_t lo[2], int64_t hi[2])
{
    int n;
    const int64_t *a = ob_attr_ints(b, "pads", &n);
    if (!a)
        return TG_OK;
    if (n != 2 * nsp)
        return ob_fail(b, TG_ERR_INVALID_ARG, "pads has %d values (%d for %d-D)", n, 2 * nsp, nsp);
    for (int i = 0; i < nsp; i++) {
        lo[2 - nsp + i] = a[i];
        hi[2 - nsp + i] = a[nsp + i];
    }
    for (int i = 0; i < 2; i++)
        if (lo[i] < 0 || hi[i] < 0 || lo[i] > (1 << 20) || hi[i] > (1 << 20))
            return ob_fail(b, TG_ERR_INVALID_ARG, "pads are negative or too large");
    return TG_OK;
}

/* Conv window attributes: strides, dilations, and padding per side (pads,
 * or auto_pad SAME_UPPER/SAME_LOWER: the odd pixel at the end for UPPER, at
 * the start for LOWER). x is the input as 2-D ([N, C, 1, L] for 1-D) and
 * kernel its 2-D window. */
typedef struct window {
    int64_t k[2], s[2], lo[2], hi[2], d[2];
} window;

static tg_status read_window(onnx_builder *b, tg_shape x, int nsp, const int64_t *kernel, window *w)
{
    char pad_mode[32];
    for (int i = 0; i < 2; i++) {
        w->k[i] = kernel[i];
        w->s[i] = w->d[i] = 1;
        w->lo[i] = w->hi[i] = 0;
    }
    TG_TRY(spatial_ints(b, "strides", nsp, w->s));
    TG_TRY(spatial_ints(b, "dilations", nsp, w->d));
    TG_TRY(spatial_pads(b, nsp, w->lo, w->hi));
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
    return TG_OK;
}

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
    *w2 = as_2d(b, w);
    return TG_OK;
}

static tg_status map_conv(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    int nsp = 0;
    TG_TRY(spatial_dims(b, x, &nsp));
    tg_tensor *w = ob_tensor(b, 1);
    tg_tensor *bias = ob_has_input(b, 2) ? ob_tensor(b, 2) : NULL;
    if (!w || (ob_has_input(b, 2) && !bias))
        return TG_ERR_UNSUPPORTED;
    tg_tensor *x2 = as_2d(b, x), *w2 = NULL;
    TG_TRY(conv_weight(b, w, nsp, &w2));
    if (!x2 || !w2)
        return ob_set(b, 0, NULL);
    tg_shape ws = tg_tensor_shape(w2);
    window win;
    TG_TRY(read_window(b, tg_tensor_shape(x2), nsp, &ws.dim[2], &win));
    tg_conv2d_params p = {(int)win.s[0],
                          (int)win.s[1],
                          (int)win.lo[0],
                          (int)win.lo[1],
                          (int)win.d[0],
                          (int)win.d[1],
                          (int)ob_attr_int(b, "group", 1)};
    tg_tensor *y = tg_conv2d_ex(b->g, x2, w2, bias, p, (int)win.hi[0], (int)win.hi[1]);
    return ob_set(b, 0, from_2d(b, y, nsp));
}

/* ---- transposed convolution ---------------------------------------------- */

static int64_t floor_div2(int64_t v)
{
    return v >= 0 ? v / 2 : -((-v + 1) / 2);
}

/* The padding per side of a ConvTranspose, and any output padding beyond
 * the attribute's, from pads, or from output_shape / auto_pad SAME_*: those
 * fix the output size and split the padding the size leaves (total) as
 * ONNX's opset 11 spec (and its test data) does: SAME_UPPER puts the odd
 * one at the end, otherwise at the start. A total below zero (an output
 * longer than the transposed conv's) is extra output padding at the end. */
typedef struct tconv_dims {
    int64_t s[2], d[2], lo[2], hi[2], op[2];
} tconv_dims;

static tg_status tconv_read(onnx_builder *b, tg_shape x2, tg_shape w2, int nsp, tconv_dims *t)
{
    for (int i = 0; i < 2; i++)
        t->s[i] = t->d[i] = 1, t->lo[i] = t->hi[i] = t->op[i] = 0;
    TG_TRY(spatial_ints(b, "strides", nsp, t->s));
    TG_TRY(spatial_ints(b, "dilations", nsp, t->d));
    TG_TRY(spatial_pads(b, nsp, t->lo, t->hi));
    TG_TRY(spatial_ints_min(b, "output_padding", nsp, 0, t->op));
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
    for (int i = 2 - nsp; i < 2 && (os || same); i++) {
        int64_t in = x2.dim[2 + i], span = (w2.dim[2 + i] - 1) * t->d[i] + 1;
        int64_t want = os ? os[n - 2 + i] : in * t->s[i];
        int64_t total = t->s[i] * (in - 1) + t->op[i] + span - want;
        t->lo[i] = upper ? floor_div2(total) : total - floor_div2(total);
        t->hi[i] = total - t->lo[i];
        if (t->lo[i] < 0)
            return ob_fail(b, TG_ERR_UNSUPPORTED,
                           "an output size of %lld where the transposed convolution gives "
                           "%lld (a larger size is supported up to stride - 1 - "
                           "output_padding more, added at the end)",
                           (long long)want, (long long)(want + total));
        if (t->hi[i] < 0)
            t->op[i] -= t->hi[i], t->hi[i] = 0;
    }
    for (int i = 0; i < 2; i++)
        if (t->op[i] >= t->s[i])
            return ob_fail(b, TG_ERR_UNSUPPORTED,
                           "an output padding of %lld with stride %lld (less than the stride "
                           "is supported)",
                           (long long)t->op[i], (long long)t->s[i]);
    return TG_OK;
}

/* ConvTranspose runs as tg_conv_transpose2d padded by the smaller side of
 * each axis; the larger side's excess is cropped after (a negative tg_pad). */
static tg_status map_conv_transpose(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    int nsp = 0;
    TG_TRY(spatial_dims(b, x, &nsp));
    tg_tensor *w = ob_tensor(b, 1);
    tg_tensor *bias = ob_has_input(b, 2) ? ob_tensor(b, 2) : NULL;
    if (!w || (ob_has_input(b, 2) && !bias))
        return TG_ERR_UNSUPPORTED;
    tg_tensor *x2 = as_2d(b, x), *w2 = NULL;
    TG_TRY(conv_weight(b, w, nsp, &w2));
    if (!x2 || !w2)
        return ob_set(b, 0, NULL);
    tconv_dims t;
    TG_TRY(tconv_read(b, tg_tensor_shape(x2), tg_tensor_shape(w2), nsp, &t));
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
    tg_tensor *y = tg_conv_transpose2d(b->g, x2, w2, bias, p, (int)t.op[0], (int)t.op[1]);
    if (y && (t.lo[0] != t.hi[0] || t.lo[1] != t.hi[1]))
        y = tg_pad(b->g, y, crop, TG_PAD_CONSTANT, 0.0f);
    return ob_set(b, 0, from_2d(b, y, nsp));
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
    default:
        if (integer)
            return y != 0 ? (double)((int64_t)x / (int64_t)y) : 0.0;
        return x / y;
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

/* Max, Min, Sum, Mean: any number of inputs, broadcast pairwise. */
static tg_status variadic(onnx_builder *b, tg_tensor *(*fn)(tg_graph *, tg_tensor *, tg_tensor *),
                          bool mean)
{
    int n = (int)b->node->n_input;
    if ((fn == tg_maximum || fn == tg_minimum) && all_foldable(b))
        return fold_variadic(b, fn == tg_maximum ? BIN_MAX : BIN_MIN);
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

/* ---- pooling ------------------------------------------------------------- */

/* kernel_shape, strides, pads (per side), dilations, ceil_mode and auto_pad
 * into the builder's pooling parameters; x2 is the input as 2-D. */
static tg_status pool_params(onnx_builder *b, tg_tensor *x2, int nsp, tg_pool2d_params *p)
{
    int n;
    const int64_t *ks = ob_attr_ints(b, "kernel_shape", &n);
    if (!ks || n != nsp)
        return ob_fail(b, TG_ERR_INVALID_ARG, "kernel_shape must have %d value%s (%d-D pooling)",
                       nsp, nsp > 1 ? "s" : "", nsp);
    int64_t kernel[2] = {1, 1};
    TG_TRY(spatial_ints(b, "kernel_shape", nsp, kernel));
    window w;
    TG_TRY(read_window(b, tg_tensor_shape(x2), nsp, kernel, &w));
    tg_pool2d_params q = {(int)w.k[0],  (int)w.k[1],  (int)w.s[0],  (int)w.s[1],
                          (int)w.lo[0], (int)w.lo[1], (int)w.hi[0], (int)w.hi[1],
                          (int)w.d[0],  (int)w.d[1],  false,        false};
    q.ceil_mode = ob_attr_int(b, "ceil_mode", 0) != 0;
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
    int nsp = 0;
    TG_TRY(spatial_dims(b, x, &nsp));
    tg_tensor *x2 = as_2d(b, x);
    tg_pool2d_params p;
    TG_TRY(pool_params(b, x2, nsp, &p));
    TG_TRY(check_pool_pads(b, &p));
    if (ob_attr_int(b, "storage_order", 0))
        return ob_fail(b, TG_ERR_UNSUPPORTED, "storage_order=1 is not supported");
    if (b->node->n_output > 1 && b->node->output[1][0])
        return ob_fail(b, TG_ERR_UNSUPPORTED, "the Indices output is not supported");
    return ob_set(b, 0, from_2d(b, tg_maxpool2d_ex(b->g, x2, p), nsp));
}

static tg_status map_avgpool(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    int nsp = 0;
    TG_TRY(spatial_dims(b, x, &nsp));
    tg_tensor *x2 = as_2d(b, x);
    tg_pool2d_params p;
    TG_TRY(pool_params(b, x2, nsp, &p));
    TG_TRY(check_pool_pads(b, &p));
    if (p.dilation_h != 1 || p.dilation_w != 1)
        return ob_fail(b, TG_ERR_UNSUPPORTED, "dilated average pooling is not supported");
    p.count_include_pad = ob_attr_int(b, "count_include_pad", 0) != 0;
    return ob_set(b, 0, from_2d(b, tg_avgpool2d_ex(b->g, x2, p), nsp));
}

static tg_status map_global_avgpool(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    int nsp = 0;
    TG_TRY(spatial_dims(b, x, &nsp));
    return ob_set(b, 0, from_2d(b, tg_global_avgpool(b->g, as_2d(b, x)), nsp));
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

/* BatchNormalization's older forms: is_test (before 7) says the mode, which
 * the graph's decides here as training_mode does from 14; spatial=1 (before
 * 9, the default) is the only form; spatial=0 (statistics per activation,
 * not per channel) is not implemented. */
static tg_status batch_norm_old_forms(onnx_builder *b)
{
    TG_TRY(ob_attr_in_opsets(b, "is_test", 1, 7));
    TG_TRY(ob_attr_in_opsets(b, "spatial", 1, 9));
    TG_TRY(ob_attr_in_opsets(b, "training_mode", 14, 1 << 30));
    if (ob_attr_int(b, "spatial", 1) != 1)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "spatial=0 (opset %d: statistics per activation rather than per channel) "
                       "is not implemented",
                       ob_opset(b));
    return TG_OK;
}

static tg_status map_batch_norm(onnx_builder *b)
{
    TG_TRY(batch_norm_old_forms(b));
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
    /* ONNX's momentum weighs the old statistics, tg_batch_norm_ex's (as
     * PyTorch's) the new ones: PyTorch's momentum m exports as 1 - m */
    float momentum = ob_attr_float(b, "momentum", 0.9f);
    if (!(momentum >= 0 && momentum <= 1))
        return ob_fail(b, TG_ERR_INVALID_ARG, "momentum %g is outside [0, 1]", (double)momentum);
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
                  tg_batch_norm_ex(b->g, x, gamma, beta, running,
                                   ob_attr_float(b, "epsilon", 1e-5f),
                                   (float)(1.0 - (double)momentum)));
}

/* LayerNormalization's optional outputs, when asked for: Mean and
 * InvStdDev = 1 / sqrt(Var + epsilon) over the normalised dims (kept as
 * ones), from reductions of their own. tg_layer_norm keeps its statistics
 * inside; these agree with them to float32's rounding. */
static tg_status layer_norm_stats(onnx_builder *b, tg_tensor *x, int axis, float eps)
{
    if (!ob_output_used(b, 1) && !ob_output_used(b, 2))
        return TG_OK;
    tg_graph *g = b->g;
    int nd = tg_tensor_shape(x).ndim;
    unsigned mask = ((1u << nd) - 1) & ~((1u << axis) - 1);
    tg_tensor *mean = tg_reduce_mean(g, x, mask, true);
    tg_tensor *d = tg_sub(g, x, mean);
    tg_tensor *var = tg_reduce_mean(g, tg_mul(g, d, d), mask, true);
    tg_tensor *inv = tg_reciprocal(g, tg_sqrt(g, tg_scale(g, var, 1.0f, eps)));
    if (ob_output_used(b, 1))
        TG_TRY(ob_set(b, 1, mean));
    return ob_output_used(b, 2) ? ob_set(b, 2, inv) : TG_OK;
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
    float eps = ob_attr_float(b, "epsilon", 1e-5f);
    TG_TRY(ob_set(b, 0, tg_layer_norm(b->g, x, nd - axis, gamma, beta, eps)));
    return layer_norm_stats(b, x, axis, eps);
}

/* Dropout: ratio an attribute before opset 12, an input after; is_test
 * (before 7) names the mode, which the graph's decides. */
static tg_status map_dropout(onnx_builder *b)
{
    TG_TRY(ob_attr_in_opsets(b, "is_test", 1, 7));
    TG_TRY(ob_attr_in_opsets(b, "ratio", 1, 12));
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
    TG_TRY(ob_set(b, 0, tg_dropout(b->g, x, ratio)));
    if (!ob_output_used(b, 1))
        return TG_OK;
    /* the mask: every element kept in inference; in training tg_dropout
     * keeps its mask inside (y != 0 would miss the kept zeros of x) */
    if (tg_graph_training(b->g))
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "the mask output is read, in training (the mask stays inside the "
                       "dropout op)");
    tg_tensor *one = tg_constant(b->g, tg_tensor_shape(x), 1.0f);
    return ob_set(b, 1, tg_cast(b->g, one, TG_I32));
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

/* Transpose of a constant: F.pad's exporter reverses its integer pads as
 * Reshape [-1, 2] -> Slice -> Transpose -> Reshape [-1] (Swin's padding to
 * whole windows), all known at import. */
static tg_status fold_transpose(onnx_builder *b, const int *perm)
{
    const tg_onnx_data *x = ob_const(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    int64_t dims[TG_MAX_DIMS], in_stride[TG_MAX_DIMS];
    int64_t st = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        in_stride[d] = st;
        st *= x->dim[d];
    }
    for (int d = 0; d < x->ndim; d++)
        dims[d] = x->dim[perm[d]];
    tg_onnx_data o;
    TG_TRY(ob_data_new(b, x->f != NULL, x->ndim, dims, &o));
    o.elem_type = x->elem_type;
    for (int64_t k = 0; k < o.n; k++) {
        int64_t rest = k, src = 0;
        for (int d = x->ndim - 1; d >= 0; d--) {
            src += rest % dims[d] * in_stride[perm[d]];
            rest /= dims[d];
        }
        ob_copy_at(&o, k, x, src);
    }
    return ob_set_const(b, 0, &o);
}

static tg_status map_transpose(onnx_builder *b)
{
    tg_shape s;
    TG_TRY(ob_shape(b, 0, &s));
    int nd = s.ndim, n, perm[TG_MAX_DIMS];
    const int64_t *p = ob_attr_ints(b, "perm", &n);
    if (p && n != nd)
        return ob_fail(b, TG_ERR_INVALID_ARG, "perm has %d values for %d dims", n, nd);
    bool seen[TG_MAX_DIMS] = {false};
    for (int d = 0; d < nd; d++) {
        int64_t v = p ? p[d] : nd - 1 - d;
        if (v < 0 || v >= nd || seen[v])
            return ob_fail(b, TG_ERR_INVALID_ARG,
                           "perm must name each of the %d dims once (value %d is %lld)", nd, d,
                           (long long)v);
        seen[v] = true;
        perm[d] = (int)v;
    }
    if (ob_is_foldable(b, 0))
        return fold_transpose(b, perm);
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    return ob_set(b, 0, tg_transpose(b->g, x, perm));
}

/* ONNX's first element and count of a slice of n elements along one axis. */
static void slice_range(int64_t n, int64_t lo, int64_t hi, int64_t step, int64_t *first,
                        int64_t *count)
{
    lo = lo < 0 ? lo + n : lo;
    hi = hi < 0 ? hi + n : hi;
    if (step > 0) {
        lo = lo < 0 ? 0 : lo > n ? n : lo;
        hi = hi < 0 ? 0 : hi > n ? n : hi;
        *count = hi > lo ? (hi - lo + step - 1) / step : 0;
    } else {
        lo = lo < 0 ? -1 : lo > n - 1 ? n - 1 : lo;
        hi = hi < -1 ? -1 : hi > n - 1 ? n - 1 : hi;
        *count = lo > hi ? (lo - hi - step - 1) / -step : 0;
    }
    *first = lo;
}

/* Slice of a constant (position ids sliced to the sequence length): folded
 * into output `out` of the node. */
static tg_status fold_slice(onnx_builder *b, int out, const tg_onnx_data *x, const tg_onnx_data *st,
                            const tg_onnx_data *en, const tg_onnx_data *ax, const tg_onnx_data *sp)
{
    int64_t first[TG_MAX_DIMS], step[TG_MAX_DIMS], count[TG_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        first[d] = 0, step[d] = 1, count[d] = x->dim[d];
    for (int64_t k = 0; k < st->n; k++) {
        int axis = 0;
        TG_TRY(ob_axis(b, ax ? ax->i[k] : k, x->ndim, &axis));
        step[axis] = sp ? sp->i[k] : 1;
        if (step[axis] == 0)
            return ob_fail(b, TG_ERR_INVALID_ARG, "step 0 on axis %d", axis);
        slice_range(x->dim[axis], st->i[k], en->i[k], step[axis], &first[axis], &count[axis]);
    }
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, x->f != NULL, x->ndim, count, &d));
    d.elem_type = x->elem_type;
    for (int64_t o = 0; o < d.n; o++) {
        int64_t src = 0, rest = o;
        int64_t mul = 1;
        for (int dd = x->ndim - 1; dd >= 0; dd--) {
            int64_t i = rest % count[dd];
            rest /= count[dd];
            src += (first[dd] + i * step[dd]) * mul;
            mul *= x->dim[dd];
        }
        ob_copy_at(&d, o, x, src);
    }
    return ob_set_const(b, out, &d);
}

/* Slice before opset 10: starts, ends and axes as attributes (no steps),
 * viewed as the constants the inputs give later (read-only). */
static tg_status slice_attrs(onnx_builder *b, tg_onnx_data *st, tg_onnx_data *en, tg_onnx_data *ax)
{
    int n[3];
    const int64_t *v[3] = {ob_attr_ints(b, "starts", &n[0]), ob_attr_ints(b, "ends", &n[1]),
                           ob_attr_ints(b, "axes", &n[2])};
    tg_onnx_data *d[3] = {st, en, ax};
    if (!v[0] || !v[1])
        return ob_fail(b, TG_ERR_FORMAT, "starts and ends attributes are required (opset %d)",
                       ob_opset(b));
    for (int k = 0; k < 3; k++) {
        memset(d[k], 0, sizeof *d[k]);
        d[k]->ndim = 1;
        d[k]->n = d[k]->dim[0] = n[k];
        d[k]->i = (int64_t *)(uintptr_t)v[k];
    }
    return TG_OK;
}

static tg_status map_slice(onnx_builder *b)
{
    for (int k = 0; k < 3; k++)
        TG_TRY(ob_attr_in_opsets(b, (const char *[]){"starts", "ends", "axes"}[k], 1, 10));
    tg_onnx_data old[3];
    const tg_onnx_data *st, *en, *ax = NULL, *sp = NULL;
    if (ob_opset(b) < 10) {
        TG_TRY(slice_attrs(b, &old[0], &old[1], &old[2]));
        st = &old[0], en = &old[1], ax = old[2].i ? &old[2] : NULL;
    } else {
        st = ob_const(b, 1), en = st ? ob_const(b, 2) : NULL;
        ax = en && ob_has_input(b, 3) ? ob_const(b, 3) : NULL;
        sp = en && ob_has_input(b, 4) ? ob_const(b, 4) : NULL;
        if (!en || (ob_has_input(b, 3) && !ax) || (ob_has_input(b, 4) && !sp))
            return TG_ERR_UNSUPPORTED;
    }
    if (!st->i || !en->i || st->n != en->n || (ax && ax->n != st->n) || (sp && sp->n != st->n))
        return ob_fail(b, TG_ERR_FORMAT,
                       "starts, ends, axes and steps must be integer lists of "
                       "one length");
    bool folded = ob_is_foldable(b, 0);
    const tg_onnx_data *xc = folded ? ob_const(b, 0) : NULL;
    tg_tensor *x = folded ? NULL : ob_tensor(b, 0);
    if (!x && !xc)
        return TG_ERR_UNSUPPORTED;
    if (xc)
        return fold_slice(b, 0, xc, st, en, ax, sp);
    tg_shape s = tg_tensor_shape(x);
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

/* The sizes of Split's outputs along an axis of n: the `split` input (opset
 * 13) or attribute (opset 11), else equal parts, one per output. */
static tg_status split_sizes(onnx_builder *b, int64_t n, int outputs, int64_t *size)
{
    const int64_t *sz = NULL;
    int m = 0;
    if (ob_has_input(b, 1)) {
        const tg_onnx_data *d = ob_const(b, 1);
        if (!d)
            return TG_ERR_UNSUPPORTED;
        if (!d->i)
            return ob_fail(b, TG_ERR_FORMAT, "split must be a list of integers");
        sz = d->i, m = (int)d->n;
    } else {
        sz = ob_attr_ints(b, "split", &m);
    }
    int64_t parts = ob_attr_int(b, "num_outputs", 0);
    if (!sz && ob_attr(b, "num_outputs")) {
        /* opset 18: parts of ceil(n / num_outputs), the last one smaller */
        if (parts != outputs)
            return ob_fail(b, TG_ERR_INVALID_ARG, "num_outputs is %lld for %d outputs",
                           (long long)parts, outputs);
        int64_t each = (n + parts - 1) / parts;
        for (int k = 0; k < outputs; k++) {
            int64_t left = n - each * k;
            size[k] = left < each ? left : each;
            if (size[k] <= 0)
                return ob_fail(b, TG_ERR_UNSUPPORTED, "output %d of the split is empty", k);
        }
        return TG_OK;
    }
    if (!sz) {
        if (n % outputs)
            return ob_fail(b, TG_ERR_INVALID_ARG,
                           "%lld elements do not split into %d equal parts (give split sizes)",
                           (long long)n, outputs);
        for (int k = 0; k < outputs; k++)
            size[k] = n / outputs;
        return TG_OK;
    }
    if (m != outputs)
        return ob_fail(b, TG_ERR_INVALID_ARG, "split has %d sizes for %d outputs", m, outputs);
    int64_t total = 0;
    for (int k = 0; k < outputs; k++) {
        if (sz[k] < 0)
            return ob_fail(b, TG_ERR_INVALID_ARG, "split size %lld is negative", (long long)sz[k]);
        /* the slice kernels are not written for empty tensors */
        if (sz[k] == 0)
            return ob_fail(b, TG_ERR_UNSUPPORTED, "output %d of the split is empty", k);
        size[k] = sz[k];
        total += sz[k];
    }
    if (total != n)
        return ob_fail(b, TG_ERR_INVALID_ARG, "split sizes add up to %lld, the axis has %lld",
                       (long long)total, (long long)n);
    return TG_OK;
}

/* Split (HF's `logits.split(1, dim=-1)`): one slice per output; a foldable
 * constant is split at import. */
static tg_status map_split(onnx_builder *b)
{
    TG_TRY(ob_attr_in_opsets(b, "split", 1, 13));
    TG_TRY(ob_attr_in_opsets(b, "num_outputs", 18, 1 << 30));
    int outputs = (int)b->node->n_output;
    if (outputs < 1 || outputs > 4096)
        return ob_fail(b, TG_ERR_FORMAT, "Split has %d outputs", outputs);
    bool folded = ob_is_foldable(b, 0);
    const tg_onnx_data *xc = folded ? ob_const(b, 0) : NULL;
    tg_tensor *x = folded ? NULL : ob_tensor(b, 0);
    if (!x && !xc)
        return TG_ERR_UNSUPPORTED;
    tg_shape s = x ? tg_tensor_shape(x) : tg_shape_of(xc->ndim, xc->dim);
    int axis = 0;
    TG_TRY(ob_axis(b, ob_attr_int(b, "axis", 0), s.ndim, &axis));
    int64_t *size = tg_malloc((size_t)outputs * sizeof *size);
    if (!size)
        return ob_fail(b, TG_ERR_NOMEM, "no memory for %d split sizes", outputs);
    tg_status st = split_sizes(b, s.dim[axis], outputs, size);
    int64_t lo = 0;
    for (int k = 0; k < outputs && st == TG_OK; lo += size[k], k++) {
        if (!b->node->output[k][0])
            continue;
        if (xc) {
            int64_t a = axis, from = lo, to = lo + size[k];
            tg_onnx_data ax = {.n = 1, .i = &a}, st0 = {.n = 1, .i = &from},
                         en = {.n = 1, .i = &to};
            st = fold_slice(b, k, xc, &st0, &en, &ax, NULL);
        } else {
            tg_tensor *y = size[k] == s.dim[axis] ? x : tg_slice(b->g, x, axis, lo, lo + size[k]);
            st = ob_set(b, k, y);
        }
    }
    tg_free(size);
    return st;
}

tg_status ob_reduce_axes(onnx_builder *b, int nd, int axes_input, unsigned *mask, bool *noop)
{
    TG_TRY(ob_attr_in_opsets(b, "axes", 1, axes_input));
    TG_TRY(ob_attr_in_opsets(b, "noop_with_empty_axes", axes_input, 1 << 30));
    if (ob_opset(b) < axes_input && ob_has_input(b, 1))
        return ob_fail(b, TG_ERR_INVALID_ARG, "an axes input, which %s takes from opset %d",
                       b->node->op_type, axes_input);
    int n;
    int64_t axes[TG_MAX_DIMS];
    const int64_t *a = ob_attr_ints(b, "axes", &n);
    if (!a && ob_has_input(b, 1)) {
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
    *mask = 0;
    *noop = n == 0 && ob_attr_int(b, "noop_with_empty_axes", 0);
    for (int k = 0; k < n; k++) {
        int ax = 0;
        TG_TRY(ob_axis(b, axes[k], nd, &ax));
        *mask |= 1u << ax;
    }
    if (n == 0)
        *mask = (1u << nd) - 1;
    return TG_OK;
}

/* A reduction over ob_reduce_axes's axes. */
static tg_status reduce(onnx_builder *b, tg_tensor *(*fn)(tg_graph *, tg_tensor *, unsigned, bool),
                        int axes_input)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    unsigned mask;
    bool noop;
    TG_TRY(ob_reduce_axes(b, tg_tensor_shape(x).ndim, axes_input, &mask, &noop));
    if (noop)
        return ob_set(b, 0, x);
    bool keep = ob_attr_int(b, "keepdims", 1) != 0;
    return ob_set(b, 0, fn(b->g, x, mask, keep));
}

static tg_status map_reduce_mean(onnx_builder *b)
{
    return reduce(b, tg_reduce_mean, 18);
}
static tg_status map_reduce_sum(onnx_builder *b)
{
    return reduce(b, tg_reduce_sum, 13);
}

static tg_status map_reduce_max(onnx_builder *b)
{
    return reduce(b, tg_reduce_max, 18);
}
static tg_status map_reduce_min(onnx_builder *b)
{
    return reduce(b, tg_reduce_min, 18);
}

/* Pad's begins and ends per dim of an nd-dim input into full[2 * nd]:
 * the pads attribute before opset 11, the pads input after; from opset 18
 * an axes input says which dims the pads are for (the others get none). */
static tg_status pad_amounts(onnx_builder *b, int nd, int64_t *full)
{
    int n = 0;
    const int64_t *p = NULL;
    if (ob_opset(b) < 11) {
        p = ob_attr_ints(b, "pads", &n);
        if (!p && !ob_attr(b, "pads"))
            return ob_fail(b, TG_ERR_FORMAT, "no pads attribute (opset %d)", ob_opset(b));
    } else {
        const tg_onnx_data *d = ob_const(b, 1);
        if (!d)
            return TG_ERR_UNSUPPORTED;
        if (!d->i && d->n)
            return ob_fail(b, TG_ERR_FORMAT, "pads must be integers");
        p = d->i, n = (int)d->n;
    }
    int axes[TG_MAX_DIMS], n_axes = nd;
    for (int k = 0; k < nd; k++)
        axes[k] = k;
    if (ob_has_input(b, 3)) { /* opset 18 */
        const tg_onnx_data *ax = ob_const(b, 3);
        if (!ax)
            return TG_ERR_UNSUPPORTED;
        if ((!ax->i && ax->n) || ax->n > nd)
            return ob_fail(b, TG_ERR_FORMAT, "axes must be at most %d integers", nd);
        n_axes = (int)ax->n;
        bool seen[TG_MAX_DIMS] = {false};
        for (int k = 0; k < n_axes; k++) {
            TG_TRY(ob_axis(b, ax->i[k], nd, &axes[k]));
            if (seen[axes[k]])
                return ob_fail(b, TG_ERR_INVALID_ARG, "axis %d is given twice", axes[k]);
            seen[axes[k]] = true;
        }
    }
    if (n != 2 * n_axes)
        return ob_fail(b, TG_ERR_FORMAT, "pads has %d values for %d axes (2 per axis)", n, n_axes);
    memset(full, 0, (size_t)(2 * nd) * sizeof *full);
    for (int k = 0; k < n_axes; k++) {
        full[axes[k]] = p[k];
        full[nd + axes[k]] = p[n_axes + k];
    }
    return TG_OK;
}

/* The value constant padding fills with: the value attribute before opset
 * 11, the constant_value input after. */
static tg_status pad_value(onnx_builder *b, float *value)
{
    *value = ob_attr_float(b, "value", 0.0f);
    if (ob_opset(b) < 11 || !ob_has_input(b, 2))
        return TG_OK;
    const tg_onnx_data *v = ob_const(b, 2);
    if (!v || v->n != 1)
        return v ? ob_fail(b, TG_ERR_FORMAT, "constant_value must be one value")
                 : TG_ERR_UNSUPPORTED;
    *value = v->f ? v->f[0] : (float)v->i[0];
    return TG_OK;
}

static tg_status map_pad(onnx_builder *b)
{
    TG_TRY(ob_attr_in_opsets(b, "pads", 1, 11));
    TG_TRY(ob_attr_in_opsets(b, "value", 1, 11));
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    int nd = tg_tensor_shape(x).ndim;
    int64_t pads[2 * TG_MAX_DIMS];
    float value;
    TG_TRY(pad_amounts(b, nd, pads));
    TG_TRY(pad_value(b, &value));
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
    return ob_set(b, 0, tg_pad(b->g, x, pads, m, value));
}

/* ---- losses --------------------------------------------------------------- */

/* reduction and ignore_index of SoftmaxCrossEntropyLoss and
 * NegativeLogLikelihoodLoss (opset 12+; PyTorch's CrossEntropyLoss and
 * NLLLoss export to them). */
static tg_status read_loss_params(onnx_builder *b, tg_loss_params *p)
{
    char buf[32];
    const char *r = ob_attr_string(b, "reduction", buf, sizeof buf);
    if (!r[0] || !strcmp(r, "mean"))
        p->reduction = TG_LOSS_MEAN;
    else if (!strcmp(r, "sum"))
        p->reduction = TG_LOSS_SUM;
    else if (!strcmp(r, "none"))
        p->reduction = TG_LOSS_NONE;
    else
        return ob_fail(b, TG_ERR_UNSUPPORTED, "reduction '%s' (mean, sum and none are)", r);
    p->has_ignore_index = ob_attr(b, "ignore_index") != NULL;
    p->ignore_index = ob_attr_int(b, "ignore_index", 0);
    return TG_OK;
}

/* Labels known at import (a constant, a bound input) become an f32 constant
 * of their integer values, which the loss ops take; a graph input is i32. */
static tg_tensor *loss_labels(onnx_builder *b)
{
    if (!ob_is_const(b, 1))
        return ob_tensor(b, 1);
    const tg_onnx_data *d = ob_const(b, 1);
    if (!d)
        return NULL;
    if (!d->i) {
        ob_fail(b, TG_ERR_DTYPE, "the labels are %s (integer labels are taken)",
                tg_onnx_elem_name(d->elem_type));
        return NULL;
    }
    float *f = tg_malloc((size_t)(d->n ? d->n : 1) * sizeof(float));
    if (!f) {
        ob_fail(b, TG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int64_t k = 0; k < d->n; k++) {
        if (d->i[k] > (1 << 24) || d->i[k] < -(1 << 24)) {
            ob_fail(b, TG_ERR_UNSUPPORTED, "label %lld is beyond the integers f32 holds exactly",
                    (long long)d->i[k]);
            tg_free(f);
            return NULL;
        }
        f[k] = (float)d->i[k];
    }
    tg_tensor *t = tg_constant_data(b->g, "labels", tg_shape_of(d->ndim, d->dim), f);
    tg_free(f);
    return t;
}

/* Optional class weights (input 2): a constant stays a constant (the loss's
 * weights are not trained, unlike a float initializer elsewhere). */
static tg_status loss_weights(onnx_builder *b, tg_tensor **out)
{
    *out = NULL;
    if (!ob_has_input(b, 2))
        return TG_OK;
    if (!ob_is_const(b, 2))
        return (*out = ob_tensor(b, 2)) ? TG_OK : TG_ERR_UNSUPPORTED;
    const tg_onnx_data *d = ob_const(b, 2);
    if (!d)
        return TG_ERR_UNSUPPORTED;
    if (!d->f)
        return ob_fail(b, TG_ERR_DTYPE, "the class weights are %s (float weights are taken)",
                       tg_onnx_elem_name(d->elem_type));
    *out = tg_constant_data(b->g, "weights", tg_shape_of(d->ndim, d->dim), d->f);
    return *out ? TG_OK : TG_ERR_UNSUPPORTED;
}

static tg_status class_loss(onnx_builder *b, bool softmax)
{
    tg_loss_params p;
    TG_TRY(read_loss_params(b, &p));
    tg_tensor *x = ob_tensor(b, 0), *labels = x ? loss_labels(b) : NULL, *w;
    if (!labels)
        return TG_ERR_UNSUPPORTED;
    TG_TRY(loss_weights(b, &w));
    tg_tensor *loss = softmax ? tg_cross_entropy_ex(b->g, x, labels, w, p)
                              : tg_nll_loss_ex(b->g, x, labels, w, p);
    TG_TRY(ob_set(b, 0, loss));
    /* SoftmaxCrossEntropyLoss's optional log_prob output */
    if (softmax && b->node->n_output > 1 && b->node->output[1][0])
        return ob_set(b, 1, tg_log_softmax(b->g, x, 1));
    return TG_OK;
}

static tg_status map_softmax_cross_entropy(onnx_builder *b)
{
    return class_loss(b, true);
}
static tg_status map_nll_loss(onnx_builder *b)
{
    return class_loss(b, false);
}

#define WINDOW_ATTRS "auto_pad,kernel_shape,pads,strides"

const ob_op tg_onnx_nn_ops[] = {
    {"Conv", map_conv, WINDOW_ATTRS ",dilations,group"},
    {"ConvTranspose", map_conv_transpose,
     WINDOW_ATTRS ",dilations,group,output_padding,output_shape"},
    {"Gemm", map_gemm, "alpha,beta,broadcast,transA,transB"},
    {"MatMul", map_matmul, ""},
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
    {"MaxPool", map_maxpool, WINDOW_ATTRS ",ceil_mode,dilations,storage_order"},
    {"AveragePool", map_avgpool, WINDOW_ATTRS ",ceil_mode,count_include_pad,dilations"},
    {"GlobalAveragePool", map_global_avgpool, ""},
    {"BatchNormalization", map_batch_norm, "epsilon,is_test,momentum,spatial,training_mode"},
    {"LayerNormalization", map_layer_norm, "axis,epsilon,stash_type"},
    {"Dropout", map_dropout, "is_test,ratio,seed"},
    {"Flatten", map_flatten, "axis"},
    {"Transpose", map_transpose, "perm"},
    {"Slice", map_slice, "axes,ends,starts"},
    {"Split", map_split, "axis,num_outputs,split"},
    {"ReduceMean", map_reduce_mean, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceSum", map_reduce_sum, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceMax", map_reduce_max, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceMin", map_reduce_min, "axes,keepdims,noop_with_empty_axes"},
    {"Pad", map_pad, "mode,pads,value"},
    {"SoftmaxCrossEntropyLoss", map_softmax_cross_entropy, "ignore_index,reduction"},
    {"NegativeLogLikelihoodLoss", map_nll_loss, "ignore_index,reduction"},
    {"LSTM", ob_map_lstm, OB_RNN_ATTRS ",input_forget"},
    {"GRU", ob_map_gru, OB_RNN_ATTRS ",linear_before_reset"},
    {"RNN", ob_map_rnn, OB_RNN_ATTRS},
};
const int tg_onnx_nn_op_count = (int)(sizeof tg_onnx_nn_ops / sizeof tg_onnx_nn_ops[0]);
