/* ops/conv.c - 2-D convolution: CONV2D (x, w, optional bias), its data
 * gradient CONV2D_BWD_DATA (dy, w) -> dx and its weight gradient
 * CONV2D_BWD_WEIGHT (dy, x) -> dw, with stride, padding, dilation and groups.
 *
 * This file holds the shape rules, FLOP counts, double reference kernels and
 * gradient rules; the cpu backend's kernels are backend/cpu/conv_kernels.c
 * (the method choice) over conv_gemm.c, conv_direct.c and conv_dnnl.c (see
 * conv.h for the params layout).
 *
 * Gradient rules: the three ops are bilinear, and each one's gradient is
 * again made of the three (so higher derivatives exist):
 *   y  = conv(x, w):           dx = bwd_data(dy, w),  dw = bwd_weight(dy, x)
 *   dx = bwd_data(dy, w):      d(dy) = conv(g, w),    dw = bwd_weight(dy, g)
 *   dw = bwd_weight(dy, x):    d(dy) = conv(x, g),    dx = bwd_data(dy, g)
 * and the bias gradient is dy summed over N, H, W (tg_reduce_sum).
 */
#include "ops/conv.h"

#include "core/error.h"
#include "core/alloc.h"
#include "ops/ref_blas.h"

#include <string.h>

/* ---- geometry ------------------------------------------------------------------- */

static void params_to_geom(const tg_tensor *node, tg_conv_geom *g)
{
    g->sh = tg_conv_stride_h(node);
    g->sw = tg_conv_stride_w(node);
    g->ph = tg_conv_pad_h(node);
    g->pw = tg_conv_pad_w(node);
    g->dh = tg_conv_dilation_h(node);
    g->dw = tg_conv_dilation_w(node);
    g->G = tg_conv_groups(node);
}

static int64_t out_size(int64_t in, int64_t pad, int64_t dil, int64_t k, int64_t stride)
{
    int64_t span = dil * (k - 1) + 1;
    return in + 2 * pad < span ? 0 : (in + 2 * pad - span) / stride + 1;
}

tg_conv_geom tg_conv_geom_of(const tg_tensor *node)
{
    tg_conv_geom g;
    params_to_geom(node, &g);
    const tg_shape *s0 = &node->in[0]->shape, *s1 = &node->in[1]->shape;
    TG_ASSERT(s0->ndim == 4 && s1->ndim == 4);
    switch (node->op) {

    case TG_OP_CONV2D: /* x, w */
        g.N = s0->dim[0], g.C = s0->dim[1], g.H = s0->dim[2], g.W = s0->dim[3];
        g.K = s1->dim[0], g.R = s1->dim[2], g.S = s1->dim[3];
        break;
    case TG_OP_CONV2D_BWD_DATA: /* dy, w */
        g.N = s0->dim[0], g.K = s0->dim[1];
        g.C = s1->dim[1] * g.G, g.R = s1->dim[2], g.S = s1->dim[3];
        g.H = tg_conv_extent_h(node), g.W = tg_conv_extent_w(node);
        break;
    case TG_OP_CONV2D_BWD_WEIGHT: /* dy, x */
        g.N = s1->dim[0], g.C = s1->dim[1], g.H = s1->dim[2], g.W = s1->dim[3];
        g.K = s0->dim[1], g.R = tg_conv_extent_h(node), g.S = tg_conv_extent_w(node);
        break;
    default:
        TG_UNREACHABLE_OP(node->op);
    }
    g.OH = out_size(g.H, g.ph, g.dh, g.R, g.sh);
    g.OW = out_size(g.W, g.pw, g.dw, g.S, g.sw);
    return g;
}

/* ---- shape rules ------------------------------------------------------------------ */

static tg_status check_params(const tg_tensor *node)
{
    const char *names[] = {"stride_h",   "stride_w",   "pad_h", "pad_w",
                           "dilation_h", "dilation_w", "groups"};
    const int64_t v[] = {tg_conv_stride_h(node), tg_conv_stride_w(node),   tg_conv_pad_h(node),
                         tg_conv_pad_w(node),    tg_conv_dilation_h(node), tg_conv_dilation_w(node),
                         tg_conv_groups(node)};
    for (int i = 0; i < 7; i++) {
        int64_t lo = (i == 2 || i == 3) ? 0 : 1;
        if (v[i] < lo || v[i] > (1 << 20))
            return tg_error(TG_ERR_INVALID_ARG, "%s is %lld (must be %s)", names[i],
                            (long long)v[i], lo ? "at least 1" : "0 or more");
    }
    return TG_OK;
}

static tg_status check_4d(const tg_tensor *t, const char *what)
{
    char s[96];
    if (t->dtype != TG_F32)
        return tg_error(TG_ERR_DTYPE, "%s '%s' is %s; conv2d takes f32", what, t->name,
                        tg_dtype_name(t->dtype));
    if (t->shape.ndim != 4)
        return tg_error(TG_ERR_SHAPE, "%s %s must be 4-D", what,
                        tg_shape_str(t->shape, s, sizeof s));
    return TG_OK;
}

/* Checks shared by the three ops once the geometry is known. */
static tg_status check_geom(const tg_conv_geom *g, const char *xs, const char *ws)
{
    if (g->C % g->G != 0 || g->K % g->G != 0)
        return tg_error(TG_ERR_SHAPE,
                        "x %s and weight %s: %lld input and %lld output channels are not both "
                        "divisible by groups = %lld",
                        xs, ws, (long long)g->C, (long long)g->K, (long long)g->G);
    if (g->R < 1 || g->S < 1)
        return tg_error(TG_ERR_SHAPE, "weight %s: empty kernel", ws);
    if (g->OH < 1 || g->OW < 1)
        return tg_error(TG_ERR_SHAPE,
                        "x %s with weight %s: the (dilated) %lldx%lld kernel does not fit the "
                        "padded input",
                        xs, ws, (long long)g->R, (long long)g->S);
    return TG_OK;
}

static tg_status infer_conv(tg_tensor *node)
{
    if (node->n_in != 2 && node->n_in != 3)
        return tg_error(TG_ERR_INVALID_ARG, "takes 2 or 3 inputs (x, weight, bias), got %d",
                        node->n_in);
    TG_TRY(check_params(node));
    TG_TRY(check_4d(node->in[0], "x"));
    TG_TRY(check_4d(node->in[1], "weight"));
    const tg_tensor *x = node->in[0], *w = node->in[1];
    char xs[96], ws[96], bs[96];
    tg_shape_str(x->shape, xs, sizeof xs);
    tg_shape_str(w->shape, ws, sizeof ws);
    tg_conv_geom g = tg_conv_geom_of(node);
    if (w->shape.dim[1] * g.G != g.C)
        return tg_error(TG_ERR_SHAPE,
                        "x %s has %lld channels but weight %s with groups = %lld expects %lld", xs,
                        (long long)g.C, ws, (long long)g.G, (long long)(w->shape.dim[1] * g.G));
    TG_TRY(check_geom(&g, xs, ws));
    if (node->n_in == 3) {
        const tg_tensor *b = node->in[2];
        if (b->dtype != TG_F32 || b->shape.ndim != 1 || b->shape.dim[0] != g.K)
            return tg_error(TG_ERR_SHAPE, "bias %s must be f32 [%lld] for weight %s",
                            tg_shape_str(b->shape, bs, sizeof bs), (long long)g.K, ws);
    }
    node->dtype = TG_F32;
    node->shape = tg_shape4(g.N, g.K, g.OH, g.OW);
    return TG_OK;
}

static tg_status infer_bwd_data(tg_tensor *node)
{
    if (node->n_in != 2)
        return tg_error(TG_ERR_INVALID_ARG, "takes 2 inputs (dy, weight), got %d", node->n_in);
    TG_TRY(check_params(node));
    TG_TRY(check_4d(node->in[0], "dy"));
    TG_TRY(check_4d(node->in[1], "weight"));
    char ys[96], ws[96], xs[96];
    tg_shape_str(node->in[0]->shape, ys, sizeof ys);
    tg_shape_str(node->in[1]->shape, ws, sizeof ws);
    if (tg_conv_extent_h(node) < 1 || tg_conv_extent_w(node) < 1)
        return tg_error(TG_ERR_INVALID_ARG, "input size %lldx%lld is empty",
                        (long long)tg_conv_extent_h(node), (long long)tg_conv_extent_w(node));
    tg_conv_geom g = tg_conv_geom_of(node);
    tg_shape_str(tg_shape4(g.N, g.C, g.H, g.W), xs, sizeof xs);
    TG_TRY(check_geom(&g, xs, ws));
    if (node->in[1]->shape.dim[0] != g.K || node->in[0]->shape.dim[2] != g.OH ||
        node->in[0]->shape.dim[3] != g.OW)
        return tg_error(TG_ERR_SHAPE,
                        "dy %s does not match weight %s and input %s (expected "
                        "[%lld, %lld, %lld, %lld])",
                        ys, ws, xs, (long long)g.N, (long long)node->in[1]->shape.dim[0],
                        (long long)g.OH, (long long)g.OW);
    node->dtype = TG_F32;
    node->shape = tg_shape4(g.N, g.C, g.H, g.W);
    return TG_OK;
}

static tg_status infer_bwd_weight(tg_tensor *node)
{
    if (node->n_in != 2)
        return tg_error(TG_ERR_INVALID_ARG, "takes 2 inputs (dy, x), got %d", node->n_in);
    TG_TRY(check_params(node));
    TG_TRY(check_4d(node->in[0], "dy"));
    TG_TRY(check_4d(node->in[1], "x"));
    char ys[96], ws[96], xs[96];
    tg_shape_str(node->in[0]->shape, ys, sizeof ys);
    tg_shape_str(node->in[1]->shape, xs, sizeof xs);
    if (tg_conv_extent_h(node) < 1 || tg_conv_extent_w(node) < 1)
        return tg_error(TG_ERR_INVALID_ARG, "kernel size %lldx%lld is empty",
                        (long long)tg_conv_extent_h(node), (long long)tg_conv_extent_w(node));
    tg_conv_geom g = tg_conv_geom_of(node);
    tg_shape_str(tg_shape4(g.K, g.C / g.G, g.R, g.S), ws, sizeof ws);
    TG_TRY(check_geom(&g, xs, ws));
    const tg_shape *dy = &node->in[0]->shape;
    if (dy->dim[0] != g.N || dy->dim[2] != g.OH || dy->dim[3] != g.OW)
        return tg_error(TG_ERR_SHAPE,
                        "dy %s does not match x %s and weight %s (expected "
                        "[%lld, %lld, %lld, %lld])",
                        ys, xs, ws, (long long)g.N, (long long)g.K, (long long)g.OH,
                        (long long)g.OW);
    node->dtype = TG_F32;
    node->shape = tg_shape4(g.K, g.C / g.G, g.R, g.S);
    return TG_OK;
}

/* Every one of the three ops does the same multiply-adds. */
static double flops_conv(const tg_tensor *node)
{
    tg_conv_geom g = tg_conv_geom_of(node);
    double f = 2.0 * (double)g.N * (double)g.K * (double)g.OH * (double)g.OW * (double)(g.C / g.G) *
               (double)g.R * (double)g.S;
    if (node->op == TG_OP_CONV2D && node->n_in == 3)
        f += (double)tg_numel(node);
    return f;
}

/* ---- reference kernels ------------------------------------------------------------------ */

/* Calls fn(x_index, w_index, y_index) for every multiply-add of the conv, in
 * plain loops; each reference kernel is one accumulation pattern over it. */
#define CONV_LOOPS(g, BODY)                                                                        \
    do {                                                                                           \
        int64_t Cg_ = (g).C / (g).G, Kg_ = (g).K / (g).G;                                          \
        for (int64_t n = 0; n < (g).N; n++)                                                        \
            for (int64_t k = 0; k < (g).K; k++) {                                                  \
                int64_t grp = k / Kg_;                                                             \
                for (int64_t oy = 0; oy < (g).OH; oy++)                                            \
                    for (int64_t ox = 0; ox < (g).OW; ox++) {                                      \
                        int64_t yi = ((n * (g).K + k) * (g).OH + oy) * (g).OW + ox;                \
                        for (int64_t c = 0; c < Cg_; c++)                                          \
                            for (int64_t r = 0; r < (g).R; r++) {                                  \
                                int64_t iy = oy * (g).sh - (g).ph + r * (g).dh;                    \
                                if (iy < 0 || iy >= (g).H)                                         \
                                    continue;                                                      \
                                for (int64_t s = 0; s < (g).S; s++) {                              \
                                    int64_t ix = ox * (g).sw - (g).pw + s * (g).dw;                \
                                    if (ix < 0 || ix >= (g).W)                                     \
                                        continue;                                                  \
                                    int64_t xi =                                                   \
                                        ((n * (g).C + grp * Cg_ + c) * (g).H + iy) * (g).W + ix;   \
                                    int64_t wi = ((k * Cg_ + c) * (g).R + r) * (g).S + s;          \
                                    BODY;                                                          \
                                }                                                                  \
                            }                                                                      \
                    }                                                                              \
            }                                                                                      \
    } while (0)

/* The same products through double-precision GEMMs (OpenBLAS's dgemm) on
 * the unfolded input of one sample and group, col [Cg*R*S, OH*OW]: the
 * plain loops above took most of a ResNet check's minutes. In double, the
 * other summation order is far below any tolerance the checker applies.
 * The loops remain for when the unfolded input does not fit in memory. */
/* col = the input x of group grp unfolded; or, given dx, its transpose:
 * dx += col folded back. */
static void unfold(const tg_conv_geom *g, const double *x, double *dx, int64_t grp, double *col)
{
    int64_t Cg = g->C / g->G, P = g->OH * g->OW;
    for (int64_t c = 0; c < Cg; c++)
        for (int64_t r = 0; r < g->R; r++)
            for (int64_t s = 0; s < g->S; s++, col += P)
                for (int64_t oy = 0; oy < g->OH; oy++) {
                    int64_t iy = oy * g->sh - g->ph + r * g->dh;
                    for (int64_t ox = 0; ox < g->OW; ox++) {
                        int64_t ix = ox * g->sw - g->pw + s * g->dw, p = oy * g->OW + ox;
                        bool in = iy >= 0 && iy < g->H && ix >= 0 && ix < g->W;
                        int64_t at = in ? ((grp * Cg + c) * g->H + iy) * g->W + ix : -1;
                        if (dx && in)
                            dx[at] += col[p];
                        else if (!dx)
                            col[p] = in ? x[at] : 0;
                    }
                }
}

/* One of the three convolutions by GEMMs; false (nothing done) without
 * memory for the unfolded input. */
static bool ref_by_gemm(tg_op op, const tg_conv_geom *g, const double *x, const double *w,
                        const double *dy, double *out)
{
    int64_t Cg = g->C / g->G, Kg = g->K / g->G, P = g->OH * g->OW, CRS = Cg * g->R * g->S;
    double *col = tg_malloc((size_t)(CRS * P > 0 ? CRS * P : 1) * sizeof(double));
    if (!col)
        return false;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t grp = 0; grp < g->G; grp++) {
            const double *xn = x ? x + n * g->C * g->H * g->W : NULL;
            double *yk = NULL;
            const double *dyk = dy ? dy + (n * g->K + grp * Kg) * P : NULL;
            const double *wg = w ? w + grp * Kg * CRS : NULL;
            if (op == TG_OP_CONV2D) { /* y[Kg, P] += w[Kg, CRS] col[CRS, P] */
                yk = out + (n * g->K + grp * Kg) * P;
                unfold(g, xn, NULL, grp, col);
                tg_dgemm(false, false, Kg, P, CRS, 1.0, wg, CRS, col, P, 1.0, yk, P);
            } else if (op == TG_OP_CONV2D_BWD_WEIGHT) { /* dw[Kg, CRS] += dy[Kg, P] col^T */
                unfold(g, xn, NULL, grp, col);
                tg_dgemm(false, true, Kg, CRS, P, 1.0, dyk, P, col, P, 1.0, out + grp * Kg * CRS,
                         CRS);
            } else { /* col[CRS, P] = w^T dy[Kg, P], folded into dx */
                tg_dgemm(true, false, CRS, P, Kg, 1.0, wg, CRS, dyk, P, 0.0, col, P);
                unfold(g, NULL, out + n * g->C * g->H * g->W, grp, col);
            }
        }
    tg_free(col);
    return true;
}

static void ref_conv(const tg_ref_args *a)
{
    tg_conv_geom g = tg_conv_geom_of(a->node);
    int64_t n_out = tg_numel(a->node);
    const double *bias = a->node->n_in == 3 ? a->in[2] : NULL;
    int64_t plane = g.OH * g.OW;
    for (int64_t i = 0; i < n_out; i++)
        a->out[i] = bias ? bias[(i / plane) % g.K] : 0.0;
    const double *x = a->in[0], *w = a->in[1];
    double *y = a->out;
    if (!ref_by_gemm(TG_OP_CONV2D, &g, x, w, NULL, y))
        CONV_LOOPS(g, y[yi] += x[xi] * w[wi]);
}

static void ref_bwd_data(const tg_ref_args *a)
{
    tg_conv_geom g = tg_conv_geom_of(a->node);
    memset(a->out, 0, (size_t)tg_numel(a->node) * sizeof(double));
    const double *dy = a->in[0], *w = a->in[1];
    double *dx = a->out;
    if (!ref_by_gemm(TG_OP_CONV2D_BWD_DATA, &g, NULL, w, dy, dx))
        CONV_LOOPS(g, dx[xi] += dy[yi] * w[wi]);
}

static void ref_bwd_weight(const tg_ref_args *a)
{
    tg_conv_geom g = tg_conv_geom_of(a->node);
    memset(a->out, 0, (size_t)tg_numel(a->node) * sizeof(double));
    const double *dy = a->in[0], *x = a->in[1];
    double *dw = a->out;
    if (!ref_by_gemm(TG_OP_CONV2D_BWD_WEIGHT, &g, x, NULL, dy, dw))
        CONV_LOOPS(g, dw[wi] += dy[yi] * x[xi]);
}

/* ---- builders and gradient rules --------------------------------------------------------- */

static tg_tensor *bwd_data_op(tg_graph *g, tg_tensor *dy, tg_tensor *w, tg_node_params p, int64_t H,
                              int64_t W)
{
    tg_conv_set_extent_h(&p, H);
    tg_conv_set_extent_w(&p, W);
    return tg_node_create(g, TG_OP_CONV2D_BWD_DATA, 2, (tg_tensor *[]){dy, w}, &p);
}

static tg_tensor *bwd_weight_op(tg_graph *g, tg_tensor *dy, tg_tensor *x, tg_node_params p,
                                int64_t R, int64_t S)
{
    tg_conv_set_extent_h(&p, R);
    tg_conv_set_extent_w(&p, S);
    return tg_node_create(g, TG_OP_CONV2D_BWD_WEIGHT, 2, (tg_tensor *[]){dy, x}, &p);
}

static tg_tensor *conv_op(tg_graph *g, tg_tensor *x, tg_tensor *w, tg_tensor *b, tg_node_params p)
{
    tg_conv_set_extent_h(&p, 0);
    tg_conv_set_extent_w(&p, 0);
    tg_tensor *in[3] = {x, w, b};
    return tg_node_create(g, TG_OP_CONV2D, b ? 3 : 2, in, &p);
}

tg_tensor *tg_conv2d(tg_graph *g, tg_tensor *x, tg_tensor *w, tg_tensor *b, tg_conv2d_params cp)
{
    tg_node_params p = {0};
    tg_conv_params_put(&p, &cp);
    return conv_op(g, x, w, b, p);
}

/* The conv kernels pad symmetrically; the part of an asymmetric padding
 * beyond the smaller side goes into an explicit zero tg_pad in front, so
 * the kernels and their gradients stay as they are. */
tg_tensor *tg_conv2d_ex(tg_graph *g, tg_tensor *x, tg_tensor *w, tg_tensor *b, tg_conv2d_params cp,
                        int pad_bottom, int pad_right)
{
    int top = cp.pad_h, left = cp.pad_w;
    if (top < 0 || left < 0 || pad_bottom < 0 || pad_right < 0)
        return tg_graph_fail(g, TG_ERR_INVALID_ARG,
                             "conv2d: padding top %d, left %d, bottom %d, right %d: none may be "
                             "negative (crop with tg_pad first)",
                             top, left, pad_bottom, pad_right);
    int sym_h = top < pad_bottom ? top : pad_bottom, sym_w = left < pad_right ? left : pad_right;
    if (x && (top != pad_bottom || left != pad_right)) {
        if (x->shape.ndim != 4)
            return tg_conv2d(g, x, w, b, cp); /* its shape rule names the fault */
        int64_t pads[8] = {0, 0, top - sym_h,        left - sym_w,
                           0, 0, pad_bottom - sym_h, pad_right - sym_w};
        x = tg_pad(g, x, pads, TG_PAD_CONSTANT, 0.0f);
    }
    cp.pad_h = sym_h;
    cp.pad_w = sym_w;
    return tg_conv2d(g, x, w, b, cp);
}

/* A transposed convolution is the data gradient of the convolution it
 * transposes: CONV2D_BWD_DATA with x in the place of dy, its gradient rule
 * (bwd_bwd_data) making the input gradient a conv2d and the weight gradient
 * a conv2d_bwd_weight with dy and x in each other's places. The output size
 * is the one input size the conv maps onto x's: output_padding (< stride)
 * picks among the stride's candidates, as PyTorch's output_padding does. */
tg_tensor *tg_conv_transpose2d(tg_graph *g, tg_tensor *x, tg_tensor *w, tg_tensor *b,
                               tg_conv2d_params cp, int output_padding_h, int output_padding_w)
{
    if (!g || !x || !w)
        return tg_conv2d(g, x, w, b, cp); /* names the missing operand */
    char xs[96], ws[96];
    tg_shape_str(x->shape, xs, sizeof xs);
    tg_shape_str(w->shape, ws, sizeof ws);
    if (x->shape.ndim != 4 || w->shape.ndim != 4)
        return tg_graph_fail(g, TG_ERR_SHAPE,
                             "conv_transpose2d: x %s and weight %s must be 4-D ([N, Cin, H, W] "
                             "and [Cin, Cout/groups, KH, KW])",
                             xs, ws);
    if (x->shape.dim[1] != w->shape.dim[0])
        return tg_graph_fail(g, TG_ERR_SHAPE,
                             "conv_transpose2d: x %s has %lld channels but weight %s takes %lld "
                             "(its first dim)",
                             xs, (long long)x->shape.dim[1], ws, (long long)w->shape.dim[0]);
    int op[2] = {output_padding_h, output_padding_w}, st[2] = {cp.stride_h, cp.stride_w};
    for (int i = 0; i < 2; i++)
        if (op[i] < 0 || op[i] >= st[i])
            return tg_graph_fail(g, TG_ERR_INVALID_ARG,
                                 "conv_transpose2d: output padding %d with stride %d (must be 0 "
                                 "or more and less than the stride)",
                                 op[i], st[i]);
    tg_node_params p = {0};
    int64_t in[2] = {x->shape.dim[2], x->shape.dim[3]}, out[2];
    int64_t pad[2] = {cp.pad_h, cp.pad_w}, dil[2] = {cp.dilation_h, cp.dilation_w};
    for (int i = 0; i < 2; i++) {
        out[i] = (in[i] - 1) * st[i] - 2 * pad[i] + dil[i] * (w->shape.dim[2 + i] - 1) + 1 + op[i];
        if (out[i] < 1)
            return tg_graph_fail(g, TG_ERR_SHAPE,
                                 "conv_transpose2d: x %s with weight %s, stride %d, padding %lld "
                                 "and dilation %lld gives an empty output",
                                 xs, ws, st[i], (long long)pad[i], (long long)dil[i]);
    }
    tg_conv_params_put(&p, &cp);
    tg_tensor *y = bwd_data_op(g, x, w, p, out[0], out[1]);
    if (y)
        tg_graph_rename(g, y, "conv_transpose2d");
    if (!y || !b)
        return y;
    int64_t cout = y->shape.dim[1];
    if (b->shape.ndim != 1 || b->shape.dim[0] != cout) {
        char bs[96];
        return tg_graph_fail(g, TG_ERR_SHAPE,
                             "conv_transpose2d: bias %s must be [%lld] for weight %s",
                             tg_shape_str(b->shape, bs, sizeof bs), (long long)cout, ws);
    }
    return tg_add(g, y, tg_reshape(g, b, tg_shape_of(3, (int64_t[]){cout, 1, 1})));
}

static tg_status bwd_conv(tg_graph *g, tg_tensor *node, tg_tensor *dy, const bool *need,
                          tg_tensor **din)
{
    tg_tensor *x = node->in[0], *w = node->in[1];
    if (need[0])
        din[0] = bwd_data_op(g, dy, w, node->p, x->shape.dim[2], x->shape.dim[3]);
    if (need[1])
        din[1] = bwd_weight_op(g, dy, x, node->p, w->shape.dim[2], w->shape.dim[3]);
    if (node->n_in == 3 && need[2])
        din[2] = tg_reduce_sum(g, dy, 1u | 4u | 8u, false);
    return TG_OK;
}

/* dx = bwd_data(dy, w); gx is the gradient arriving at dx. */
static tg_status bwd_bwd_data(tg_graph *g, tg_tensor *node, tg_tensor *gx, const bool *need,
                              tg_tensor **din)
{
    tg_tensor *dy = node->in[0], *w = node->in[1];
    if (need[0])
        din[0] = conv_op(g, gx, w, NULL, node->p);
    if (need[1])
        din[1] = bwd_weight_op(g, dy, gx, node->p, w->shape.dim[2], w->shape.dim[3]);
    return TG_OK;
}

/* dw = bwd_weight(dy, x); gw is the gradient arriving at dw. */
static tg_status bwd_bwd_weight(tg_graph *g, tg_tensor *node, tg_tensor *gw, const bool *need,
                                tg_tensor **din)
{
    tg_tensor *dy = node->in[0], *x = node->in[1];
    if (need[0])
        din[0] = conv_op(g, x, gw, NULL, node->p);
    if (need[1])
        din[1] = bwd_data_op(g, dy, gw, node->p, x->shape.dim[2], x->shape.dim[3]);
    return TG_OK;
}

const tg_op_def tg_opdef_CONV2D = {.infer = infer_conv,
                                   .flops = flops_conv,
                                   .reference = ref_conv,
                                   .backward = bwd_conv,
                                   .cost = TG_COST_CONV,
                                   .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_CONV2D_BWD_DATA = {.infer = infer_bwd_data,
                                            .flops = flops_conv,
                                            .reference = ref_bwd_data,
                                            .backward = bwd_bwd_data,
                                            .cost = TG_COST_CONV,
                                            .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_CONV2D_BWD_WEIGHT = {.infer = infer_bwd_weight,
                                              .flops = flops_conv,
                                              .reference = ref_bwd_weight,
                                              .backward = bwd_bwd_weight,
                                              .cost = TG_COST_CONV,
                                              .memory = TG_OP_OWN_STORAGE};
