/* ops/pool.c - 2-D max and average pooling and their gradients, with
 * ONNX's generality: asymmetric padding, dilation (max only), ceil_mode and
 * count_include_pad.
 *
 * Params (ops/pool.h): kernel, stride, padding (top, left, bottom, right),
 * dilation, ceil_mode, count_include_pad; the backward ops also keep the
 * input's height and width. Max
 * pooling pads with -infinity and picks the first maximum of a window (as
 * PyTorch); its gradient recomputes that choice from x instead of storing
 * indices, which saves an index tensor per pooling layer. Average pooling
 * divides by the window's size inside the padded input when
 * count_include_pad is set (PyTorch's default), else by the number of input
 * elements it covers. ceil_mode follows PyTorch and ONNX: the output size
 * rounds up, but the last window must start inside the input or its left
 * (top) padding. Work is split over the device's threads by (sample,
 * channel) planes.
 */
#include "core/clones.h"
#include "ops/pool.h"

#include "core/error.h"

#include <float.h>
#include <math.h>
#include <string.h>

typedef struct {
    int64_t planes, ih, iw, oh, ow;
    int kh, kw, sh, sw, pt, pl, pb, pr, dh, dw;
    bool cip;
} pool_geom;

static pool_geom geom(const tg_tensor *node, tg_shape in_shape, tg_shape out_shape)
{
    pool_geom g = {in_shape.dim[0] * in_shape.dim[1],
                   in_shape.dim[2],
                   in_shape.dim[3],
                   out_shape.dim[2],
                   out_shape.dim[3],
                   (int)tg_pool_kernel_h(node),
                   (int)tg_pool_kernel_w(node),
                   (int)tg_pool_stride_h(node),
                   (int)tg_pool_stride_w(node),
                   (int)tg_pool_pad_top(node),
                   (int)tg_pool_pad_left(node),
                   (int)tg_pool_pad_bottom(node),
                   (int)tg_pool_pad_right(node),
                   (int)tg_pool_dilation_h(node),
                   (int)tg_pool_dilation_w(node),
                   tg_pool_count_include_pad(node) != 0};
    return g;
}

/* The input shape of a pooling node (forward: its input; backward: stored). */
static tg_shape input_shape(const tg_tensor *node)
{
    if (node->op == TG_OP_MAXPOOL2D || node->op == TG_OP_AVGPOOL2D)
        return node->in[0]->shape;
    tg_shape s = node->in[0]->shape;
    s.dim[2] = tg_pool_in_h(node);
    s.dim[3] = tg_pool_in_w(node);
    return s;
}

static tg_shape output_shape(const tg_tensor *node)
{
    return node->op == TG_OP_MAXPOOL2D || node->op == TG_OP_AVGPOOL2D ? node->shape
                                                                      : node->in[0]->shape;
}

/* Output length along one axis (PyTorch's pooling_output_shape), 0 if the
 * window does not fit. */
static int64_t out_len(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d,
                       bool ceil_mode)
{
    int64_t span = d * (k - 1) + 1, room = in + p0 + p1 - span;
    if (room < 0)
        return 0;
    int64_t n = (ceil_mode ? (room + s - 1) / s : room / s) + 1;
    if (ceil_mode && (n - 1) * s >= in + p0)
        n--; /* the last window would start in the bottom/right padding */
    return n;
}

/* True if some window along an axis covers no input element (possible with
 * dilation): max pooling would have nothing to pick, averaging nothing to count. */
static bool has_empty_window(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p0, int64_t d)
{
    for (int64_t o = 0; o < out; o++) {
        bool hit = false;
        for (int64_t t = 0; t < k && !hit; t++) {
            int64_t i = o * s - p0 + t * d;
            hit = i >= 0 && i < in;
        }
        if (!hit)
            return true;
    }
    return false;
}

static tg_status check_params(const tg_tensor *node, bool is_max)
{
    if (tg_pool_kernel_h(node) < 1 || tg_pool_kernel_w(node) < 1 || tg_pool_stride_h(node) < 1 ||
        tg_pool_stride_w(node) < 1 || tg_pool_dilation_h(node) < 1 || tg_pool_dilation_w(node) < 1)
        return tg_error(TG_ERR_INVALID_ARG,
                        "kernel %lldx%lld, stride %lldx%lld, dilation %lldx%lld: all must be "
                        "positive",
                        (long long)tg_pool_kernel_h(node), (long long)tg_pool_kernel_w(node),
                        (long long)tg_pool_stride_h(node), (long long)tg_pool_stride_w(node),
                        (long long)tg_pool_dilation_h(node), (long long)tg_pool_dilation_w(node));
    if (tg_pool_pad_top(node) < 0 || tg_pool_pad_left(node) < 0 || tg_pool_pad_bottom(node) < 0 ||
        tg_pool_pad_right(node) < 0)
        return tg_error(TG_ERR_INVALID_ARG,
                        "padding top %lld, left %lld, bottom %lld, right %lld: none may be "
                        "negative (crop with tg_pad first)",
                        (long long)tg_pool_pad_top(node), (long long)tg_pool_pad_left(node),
                        (long long)tg_pool_pad_bottom(node), (long long)tg_pool_pad_right(node));
    if (!is_max && (tg_pool_dilation_h(node) != 1 || tg_pool_dilation_w(node) != 1))
        return tg_error(TG_ERR_UNSUPPORTED,
                        "dilation %lldx%lld: average pooling supports only dilation 1 (as "
                        "PyTorch's AvgPool2d)",
                        (long long)tg_pool_dilation_h(node), (long long)tg_pool_dilation_w(node));
    /* PyTorch's rule: no side pads more than half the (dilated) window, so a
     * window never lies mostly in padding. */
    int64_t sh = tg_pool_dilation_h(node) * (tg_pool_kernel_h(node) - 1) + 1,
            sw = tg_pool_dilation_w(node) * (tg_pool_kernel_w(node) - 1) + 1;
    if (2 * tg_pool_pad_top(node) > sh || 2 * tg_pool_pad_bottom(node) > sh ||
        2 * tg_pool_pad_left(node) > sw || 2 * tg_pool_pad_right(node) > sw)
        return tg_error(TG_ERR_INVALID_ARG,
                        "padding top %lld, left %lld, bottom %lld, right %lld is more than half "
                        "the kernel %lldx%lld",
                        (long long)tg_pool_pad_top(node), (long long)tg_pool_pad_left(node),
                        (long long)tg_pool_pad_bottom(node), (long long)tg_pool_pad_right(node),
                        (long long)sh, (long long)sw);
    return TG_OK;
}

static tg_status infer_pool(tg_tensor *node)
{
    const tg_tensor *x = node->in[0];
    char buf[64];
    if (x->shape.ndim != 4 || x->dtype != TG_F32)
        return tg_error(TG_ERR_SHAPE, "pooling takes an f32 [N, C, H, W] tensor, not %s %s",
                        tg_dtype_name(x->dtype), tg_shape_str(x->shape, buf, sizeof buf));
    TG_TRY(check_params(node, node->op == TG_OP_MAXPOOL2D));
    int64_t h = x->shape.dim[2], w = x->shape.dim[3];
    int64_t oh =
        out_len(h, tg_pool_kernel_h(node), tg_pool_stride_h(node), tg_pool_pad_top(node),
                tg_pool_pad_bottom(node), tg_pool_dilation_h(node), tg_pool_ceil_mode(node));
    int64_t ow =
        out_len(w, tg_pool_kernel_w(node), tg_pool_stride_w(node), tg_pool_pad_left(node),
                tg_pool_pad_right(node), tg_pool_dilation_w(node), tg_pool_ceil_mode(node));
    if (oh < 1 || ow < 1)
        return tg_error(TG_ERR_SHAPE, "a %lldx%lld window does not fit in the %s input",
                        (long long)tg_pool_kernel_h(node), (long long)tg_pool_kernel_w(node),
                        tg_shape_str(x->shape, buf, sizeof buf));
    if (has_empty_window(h, oh, tg_pool_kernel_h(node), tg_pool_stride_h(node),
                         tg_pool_pad_top(node), tg_pool_dilation_h(node)) ||
        has_empty_window(w, ow, tg_pool_kernel_w(node), tg_pool_stride_w(node),
                         tg_pool_pad_left(node), tg_pool_dilation_w(node)))
        return tg_error(TG_ERR_SHAPE,
                        "with dilation %lldx%lld some %lldx%lld window of the %s input covers "
                        "only padding; use a smaller dilation or padding",
                        (long long)tg_pool_dilation_h(node), (long long)tg_pool_dilation_w(node),
                        (long long)tg_pool_kernel_h(node), (long long)tg_pool_kernel_w(node),
                        tg_shape_str(x->shape, buf, sizeof buf));
    node->dtype = TG_F32;
    node->shape = tg_shape4(x->shape.dim[0], x->shape.dim[1], oh, ow);
    return TG_OK;
}

static tg_status infer_bwd(tg_tensor *node)
{
    node->shape = input_shape(node);
    return TG_OK;
}

static double flops_pool(const tg_tensor *node)
{
    return (double)tg_shape_numel(output_shape(node)) *
           (double)(tg_pool_kernel_h(node) * tg_pool_kernel_w(node));
}

/* ---- max ----------------------------------------------------------------------- */

typedef struct {
    const tg_kernel_args *a;
    pool_geom g;
} pool_job;

/* The flat index (within a plane) of the first maximum of window (oy, ox). */
static inline int64_t window_argmax(const float *x, const pool_geom *g, int64_t oy, int64_t ox)
{
    int64_t best = -1;
    float bv = -INFINITY;
    for (int ky = 0; ky < g->kh; ky++) {
        int64_t iy = oy * g->sh - g->pt + ky * g->dh;
        if (iy < 0 || iy >= g->ih)
            continue;
        for (int kx = 0; kx < g->kw; kx++) {
            int64_t ix = ox * g->sw - g->pl + kx * g->dw;
            if (ix < 0 || ix >= g->iw)
                continue;
            float v = x[iy * g->iw + ix];
            if (best < 0 || v > bv || (v != v && bv == bv)) { /* NaN wins, as in PyTorch */
                best = iy * g->iw + ix;
                bv = v;
            }
        }
    }
    return best;
}

/* 2x2 windows, stride 2, no padding or dilation, every window inside the
 * input (ceil_mode can add a last window that is not). */
static bool is_plain_2x2(const pool_geom *g)
{
    return g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->pt == 0 && g->pl == 0 &&
           g->pb == 0 && g->pr == 0 && g->dh == 1 && g->dw == 1 && 2 * g->oh <= g->ih &&
           2 * g->ow <= g->iw;
}

/* The outputs ox of a row whose tap kx reads inside the input:
 * [*lo, *hi). Taps outside are the padding, which max pooling skips. */
static void tap_columns(const pool_geom *g, int kx, int64_t *lo, int64_t *hi)
{
    int64_t off = (int64_t)kx * g->dw - g->pl; /* ix = ox * sw + off */
    int64_t a = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
    int64_t b = g->iw - 1 - off < 0 ? -1 : (g->iw - 1 - off) / g->sw;
    *lo = a;
    *hi = b + 1 < g->ow ? b + 1 : g->ow;
    if (*hi < *lo)
        *hi = *lo;
}

/* One tap over the outputs [lo, hi) of a row: the running maximum takes
 * the tap where it is larger, or NaN while the maximum is not. */
static inline __attribute__((always_inline)) void max_tap(float *best, const float *row, int64_t lo,
                                                          int64_t hi, int64_t sw)
{
    for (int64_t ox = lo; ox < hi; ox++) {
        float v = row[ox * sw], m = best[ox];
        best[ox] = (v > m || (v != v && m == m)) ? v : m;
    }
}

/* Max pooling row by row and tap by tap (the window's taps in row-major
 * order, as window_argmax): for each tap the valid outputs of the row take
 * the larger value, a loop over contiguous outputs that the compiler
 * vectorises. A tap replaces the running value when it is larger, or NaN
 * while the running value is not, so the result is window_argmax's value
 * bit for bit (the first maximum; NaN wins). `best` holds one output row. */
static void max_fwd_rows(const float *xp, float *yp, const pool_geom *g, float *best)
{
    for (int64_t oy = 0; oy < g->oh; oy++) {
        for (int64_t ox = 0; ox < g->ow; ox++)
            best[ox] = -INFINITY;
        for (int ky = 0; ky < g->kh; ky++) {
            int64_t iy = oy * g->sh - g->pt + (int64_t)ky * g->dh;
            if (iy < 0 || iy >= g->ih)
                continue;
            const float *row = xp + iy * g->iw;
            for (int kx = 0; kx < g->kw; kx++) {
                int64_t lo, hi, off = (int64_t)kx * g->dw - g->pl;
                tap_columns(g, kx, &lo, &hi);
                if (g->sw == 2) /* the stride as a constant: a vectorised loop */
                    max_tap(best, row + off, lo, hi, 2);
                else
                    max_tap(best, row + off, lo, hi, g->sw);
            }
        }
        memcpy(yp + oy * g->ow, best, (size_t)g->ow * sizeof *best);
    }
}

/* Rows up to this many outputs go through max_fwd_rows' row buffer. */
enum { MAX_ROW = 2048 };

TG_WIDE_KERNEL static void max_fwd_planes(void *ctx, int64_t begin, int64_t end, int t)
{
    const pool_job *j = ctx;
    const pool_geom *g = &j->g;
    const float *x = j->a->in[0];
    float *y = j->a->out;
    bool plain = is_plain_2x2(g);
    float best[MAX_ROW];
    for (int64_t pl = begin; pl < end; pl++) {
        const float *xp = x + pl * g->ih * g->iw;
        float *yp = y + pl * g->oh * g->ow;
        if (!plain && g->ow <= MAX_ROW) {
            max_fwd_rows(xp, yp, g, best);
            continue;
        }
        for (int64_t oy = 0; oy < g->oh; oy++) {
            if (plain) { /* the common 2x2/2 case: no bounds checks */
                const float *r0 = xp + 2 * oy * g->iw, *r1 = r0 + g->iw;
                for (int64_t ox = 0; ox < g->ow; ox++) {
                    float a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], d = r1[2 * ox + 1];
                    float m = b > a ? b : a;
                    m = c > m ? c : m;
                    m = d > m ? d : m;
                    yp[oy * g->ow + ox] = ((a != a) | (b != b) | (c != c) | (d != d)) ? NAN : m;
                }
                continue;
            }
            for (int64_t ox = 0; ox < g->ow; ox++)
                yp[oy * g->ow + ox] = xp[window_argmax(xp, g, oy, ox)];
        }
    }
    (void)t;
}

/* One 2x2 window of the gradient: dy to the first maximum in row-major
 * order (as window_argmax), 0 to the other three. Masks on the bits, not
 * branches: the winner is random and a branch on it mispredicts. */
TG_VEC_INLINE void max_bwd_2x2(const float *r0, const float *r1, float v, float *d0, float *d1)
{
    float a = r0[0], b = r0[1], c = r1[0], d = r1[1];
    uint32_t pa = (uint32_t)((a >= b) & (a >= c) & (a >= d));
    uint32_t pb = (uint32_t)(!pa & (b >= c) & (b >= d));
    uint32_t pc = (uint32_t)(!pa & !pb & (c >= d));
    uint32_t pd = !pa & !pb & !pc;
    uint32_t bits, out[4];
    memcpy(&bits, &v, sizeof bits);
    out[0] = bits & (0u - pa);
    out[1] = bits & (0u - pb);
    out[2] = bits & (0u - pc);
    out[3] = bits & (0u - pd);
    memcpy(d0, out, 2 * sizeof *d0);
    memcpy(d1, out + 2, 2 * sizeof *d1);
}

/* The gradient of one plane for overlapping or padded windows: per output
 * row, the first maximum of every window found tap by tap as in
 * max_fwd_rows (value and flat index), then dy added at those indices in
 * output order, the order of the per-window loop it replaces. */
static void max_bwd_rows(const float *xp, const float *dyp, float *dxp, const pool_geom *g,
                         float *best, int32_t *arg)
{
    for (int64_t k = 0; k < g->ih * g->iw; k++)
        dxp[k] = 0.0f;
    for (int64_t oy = 0; oy < g->oh; oy++) {
        for (int64_t ox = 0; ox < g->ow; ox++) {
            best[ox] = -INFINITY;
            arg[ox] = -1;
        }
        for (int ky = 0; ky < g->kh; ky++) {
            int64_t iy = oy * g->sh - g->pt + (int64_t)ky * g->dh;
            if (iy < 0 || iy >= g->ih)
                continue;
            const float *row = xp + iy * g->iw;
            for (int kx = 0; kx < g->kw; kx++) {
                int64_t lo, hi, off = (int64_t)kx * g->dw - g->pl;
                tap_columns(g, kx, &lo, &hi);
                for (int64_t ox = lo; ox < hi; ox++) {
                    float v = row[ox * g->sw + off], m = best[ox];
                    bool take = arg[ox] < 0 || v > m || (v != v && m == m);
                    best[ox] = take ? v : m;
                    arg[ox] = take ? (int32_t)(iy * g->iw + ox * g->sw + off) : arg[ox];
                }
            }
        }
        const float *dyr = dyp + oy * g->ow;
        for (int64_t ox = 0; ox < g->ow; ox++)
            dxp[arg[ox]] += dyr[ox];
    }
}

TG_WIDE_KERNEL static void max_bwd_planes(void *ctx, int64_t begin, int64_t end, int t)
{
    const pool_job *j = ctx;
    const pool_geom *g = &j->g;
    const float *dy = j->a->in[0], *x = j->a->in[1];
    float *dx = j->a->out;
    float best[MAX_ROW];
    int32_t arg[MAX_ROW];
    for (int64_t pl = begin; pl < end; pl++) {
        const float *xp = x + pl * g->ih * g->iw, *dyp = dy + pl * g->oh * g->ow;
        float *dxp = dx + pl * g->ih * g->iw;
        if (is_plain_2x2(g)) {
            /* Windows do not overlap: every covered element is written once,
             * branch-free (the winner gets dy, the others 0), and only the odd
             * last row or column outside every window is cleared. */
            for (int64_t oy = 0; oy < g->oh; oy++) {
                const float *r0 = xp + 2 * oy * g->iw, *r1 = r0 + g->iw;
                float *d0 = dxp + 2 * oy * g->iw, *d1 = d0 + g->iw;
                const float *dyr = dyp + oy * g->ow;
                for (int64_t ox = 0; ox < g->ow; ox++)
                    max_bwd_2x2(r0 + 2 * ox, r1 + 2 * ox, dyr[ox], d0 + 2 * ox, d1 + 2 * ox);
                for (int64_t ix = 2 * g->ow; ix < g->iw; ix++)
                    d0[ix] = d1[ix] = 0.0f;
            }
            for (int64_t k = 2 * g->oh * g->iw; k < g->ih * g->iw; k++)
                dxp[k] = 0.0f;
            continue;
        }
        if (g->ow <= MAX_ROW && g->ih * g->iw <= INT32_MAX) {
            max_bwd_rows(xp, dyp, dxp, g, best, arg);
            continue;
        }
        for (int64_t k = 0; k < g->ih * g->iw; k++)
            dxp[k] = 0.0f;
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++)
                dxp[window_argmax(xp, g, oy, ox)] += dyp[oy * g->ow + ox];
    }
    (void)t;
}

/* ---- average ------------------------------------------------------------------------ */

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}
static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* The part of window (oy, ox) inside the input: rows [y0, y1), columns
 * [x0, x1); returns the divisor: with count_include_pad the window's size
 * within the padded input (PyTorch: a ceil_mode window hanging past the
 * bottom/right padding counts only up to it), else the covered input
 * elements. Without ceil_mode or cut windows that is kh * kw. */
static int64_t window_bounds(const pool_geom *g, int64_t oy, int64_t ox, int64_t *y0, int64_t *y1,
                             int64_t *x0, int64_t *x1)
{
    int64_t ys = oy * g->sh - g->pt, xs = ox * g->sw - g->pl;
    int64_t ye = min64(ys + g->kh, g->ih + g->pb), xe = min64(xs + g->kw, g->iw + g->pr);
    *y0 = max64(ys, 0);
    *x0 = max64(xs, 0);
    *y1 = min64(ye, g->ih);
    *x1 = min64(xe, g->iw);
    return g->cip ? (ye - ys) * (xe - xs) : (*y1 - *y0) * (*x1 - *x0);
}

/* The means of `count` (at most 16) whole planes of n floats, side by
 * side: each plane summed in the order the blocked kernel sums it (so the
 * two layouts agree to the bit), 16 independent running sums where one
 * waited an add's latency per element. mobilenet_v3_large's squeeze-excite
 * pools in NCHW (channels that are no whole blocks) took 17-65 us each
 * plane by plane at batch 1 against onnxruntime's 4-11
 * (docs/performance.md). */
static void plane_means(const float *p, int64_t n, int count, float inv, float *mean)
{
    float acc[16] = {0};
    for (int64_t i = 0; i < n; i++)
        for (int l = 0; l < count; l++)
            acc[l] += p[l * n + i];
    for (int l = 0; l < count; l++)
        mean[l] = acc[l] * inv;
}

/* Whether every output of an average pool is the mean of its whole plane
 * (a global pool); *inv is then 1 / the count. */
static bool whole_plane(const pool_geom *g, float *inv)
{
    int64_t y0, y1, x0, x1;
    if (g->oh != 1 || g->ow != 1)
        return false;
    *inv = 1.0f / (float)window_bounds(g, 0, 0, &y0, &y1, &x0, &x1);
    return y0 == 0 && y1 == g->ih && x0 == 0 && x1 == g->iw;
}

static void avg_planes(void *ctx, int64_t begin, int64_t end, int t)
{
    const pool_job *j = ctx;
    const pool_geom *g = &j->g;
    bool bwd = j->a->node->op == TG_OP_AVGPOOL2D_BWD;
    const float *src = j->a->in[0];
    float *dst = j->a->out;
    int64_t in_plane = g->ih * g->iw, out_plane = g->oh * g->ow;
    float whole_inv;
    if (!bwd && whole_plane(g, &whole_inv)) {
        for (int64_t pl = begin; pl < end; pl += 16)
            plane_means(src + pl * in_plane, in_plane, end - pl < 16 ? (int)(end - pl) : 16,
                        whole_inv, dst + pl);
        return;
    }
    for (int64_t pl = begin; pl < end; pl++) {
        /* forward: x plane -> y plane; backward: dy plane -> dx plane */
        const float *sp = src + pl * (bwd ? out_plane : in_plane);
        float *dp = dst + pl * (bwd ? in_plane : out_plane);
        if (bwd)
            for (int64_t k = 0; k < in_plane; k++)
                dp[k] = 0.0f;
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                int64_t y0, y1, x0, x1;
                float inv = 1.0f / (float)window_bounds(g, oy, ox, &y0, &y1, &x0, &x1);
                float acc = 0.0f, v = bwd ? sp[oy * g->ow + ox] * inv : 0.0f;
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++) {
                        if (bwd)
                            dp[iy * g->iw + ix] += v;
                        else
                            acc += sp[iy * g->iw + ix];
                    }
                if (!bwd)
                    dp[oy * g->ow + ox] = acc * inv;
            }
    }
    (void)t;
}

/* ---- the blocked layout (ops/pool.h) ---------------------------------------------- */

/* On nChw16c a "plane" is a block of 16 channels of one sample: each pixel
 * one vector of 16 lanes, so a window's taps are vector maxima or sums. The
 * arithmetic per lane is the NCHW kernels' (first maximum, NaN wins; the
 * same divisors), so both layouts give the same bits. */
#define LANES TG_CHANNEL_BLOCK

/* Per lane: the first maximum of window (oy, ox) in best[] and, when arg
 * is not NULL, the pixel (iy * iw + ix) it came from. Loops over the 16
 * lanes, which the compiler turns into vector compares and blends. */
static void window_max_lanes(const float *xb, const pool_geom *g, int64_t oy, int64_t ox,
                             float *best, int32_t *arg)
{
    bool first = true;
    for (int ky = 0; ky < g->kh; ky++) {
        int64_t iy = oy * g->sh - g->pt + (int64_t)ky * g->dh;
        if (iy < 0 || iy >= g->ih)
            continue;
        for (int kx = 0; kx < g->kw; kx++) {
            int64_t ix = ox * g->sw - g->pl + (int64_t)kx * g->dw;
            if (ix < 0 || ix >= g->iw)
                continue;
            const float *v = xb + (iy * g->iw + ix) * LANES;
            int32_t at = (int32_t)(iy * g->iw + ix);
            if (first) {
                memcpy(best, v, LANES * sizeof *best);
                for (int l = 0; arg && l < LANES; l++)
                    arg[l] = at;
                first = false;
                continue;
            }
            if (arg) {
                for (int l = 0; l < LANES; l++) {
                    int take = (v[l] > best[l]) | ((v[l] != v[l]) & (best[l] == best[l]));
                    best[l] = take ? v[l] : best[l];
                    arg[l] = take ? at : arg[l];
                }
                continue;
            }
            for (int l = 0; l < LANES; l++) {
                int take = (v[l] > best[l]) | ((v[l] != v[l]) & (best[l] == best[l]));
                best[l] = take ? v[l] : best[l];
            }
        }
    }
}

TG_WIDE_KERNEL static void max_blocked(void *ctx, int64_t begin, int64_t end, int t)
{
    const pool_job *j = ctx;
    const pool_geom *g = &j->g;
    bool bwd = j->a->node->op == TG_OP_MAXPOOL2D_BWD;
    const float *x = j->a->in[bwd ? 1 : 0], *dy = j->a->in[0];
    float *out = j->a->out;
    int64_t in_px = g->ih * g->iw, out_px = g->oh * g->ow;
    for (int64_t b = begin; b < end; b++) {
        const float *xb = x + b * in_px * LANES;
        float *dxb = out + b * in_px * LANES;
        if (bwd)
            memset(dxb, 0, (size_t)in_px * LANES * sizeof(float));
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                int64_t o = (b * out_px + oy * g->ow + ox) * LANES;
                int32_t arg[LANES];
                float best[LANES];
                window_max_lanes(xb, g, oy, ox, best, bwd ? arg : NULL);
                if (!bwd) {
                    memcpy(out + o, best, sizeof best);
                    continue;
                }
                for (int l = 0; l < LANES; l++)
                    dxb[(int64_t)arg[l] * LANES + l] += dy[o + l];
            }
    }
    (void)t;
}

TG_WIDE_KERNEL static void avg_blocked(void *ctx, int64_t begin, int64_t end, int t)
{
    const pool_job *j = ctx;
    const pool_geom *g = &j->g;
    bool bwd = j->a->node->op == TG_OP_AVGPOOL2D_BWD;
    const float *src = j->a->in[0];
    float *dst = j->a->out;
    int64_t in_px = g->ih * g->iw, out_px = g->oh * g->ow;
    for (int64_t b = begin; b < end; b++) {
        const float *sb = src + b * (bwd ? out_px : in_px) * LANES;
        float *db = dst + b * (bwd ? in_px : out_px) * LANES;
        if (bwd)
            memset(db, 0, (size_t)in_px * LANES * sizeof(float));
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                int64_t y0, y1, x0, x1;
                float inv = 1.0f / (float)window_bounds(g, oy, ox, &y0, &y1, &x0, &x1);
                float acc[LANES] = {0}, v[LANES];
                const float *so = sb + (oy * g->ow + ox) * LANES;
                for (int l = 0; bwd && l < LANES; l++)
                    v[l] = so[l] * inv;
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++) {
                        int64_t at = (iy * g->iw + ix) * LANES;
                        for (int l = 0; bwd && l < LANES; l++)
                            db[at + l] += v[l];
                        for (int l = 0; !bwd && l < LANES; l++)
                            acc[l] += sb[at + l];
                    }
                for (int l = 0; !bwd && l < LANES; l++)
                    db[(oy * g->ow + ox) * LANES + l] = acc[l] * inv;
            }
    }
    (void)t;
}

bool tg_pool_blocked_run(const tg_kernel_args *a)
{
    if (!a->blocked)
        return false;
    pool_job j = {a, geom(a->node, input_shape(a->node), output_shape(a->node))};
    bool is_max = a->node->op == TG_OP_MAXPOOL2D || a->node->op == TG_OP_MAXPOOL2D_BWD;
    tg_pool_for(a->pool, j.g.planes / LANES, is_max ? max_blocked : avg_blocked, &j);
    return true;
}

/* Every pooling kernel splits the work by (sample, channel) planes. */
static void run_planes(const tg_kernel_args *a, tg_pool_fn fn)
{
    pool_job j = {a, geom(a->node, input_shape(a->node), output_shape(a->node))};
    tg_pool_for(a->pool, j.g.planes, fn, &j);
}

static void fwd_maxpool(const tg_kernel_args *a)
{
    if (!tg_pool_blocked_run(a))
        run_planes(a, max_fwd_planes);
}
static void fwd_maxpool_bwd(const tg_kernel_args *a)
{
    if (!tg_pool_blocked_run(a))
        run_planes(a, max_bwd_planes);
}
static void fwd_avgpool(const tg_kernel_args *a)
{
    if (!tg_pool_blocked_run(a))
        run_planes(a, avg_planes);
}

/* ---- reference kernels (double) ---------------------------------------------------------- */

static void ref_pool(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    pool_geom g = geom(node, input_shape(node), output_shape(node));
    bool is_max = node->op == TG_OP_MAXPOOL2D || node->op == TG_OP_MAXPOOL2D_BWD;
    bool bwd = node->op == TG_OP_MAXPOOL2D_BWD || node->op == TG_OP_AVGPOOL2D_BWD;
    const double *x = bwd ? (is_max ? a->in[1] : NULL) : a->in[0];
    const double *dy = bwd ? a->in[0] : NULL;
    if (bwd)
        for (int64_t k = 0; k < g.planes * g.ih * g.iw; k++)
            a->out[k] = 0.0;
    for (int64_t pl = 0; pl < g.planes; pl++)
        for (int64_t oy = 0; oy < g.oh; oy++)
            for (int64_t ox = 0; ox < g.ow; ox++) {
                double acc = 0.0, best = -INFINITY;
                int64_t arg = -1, o = (pl * g.oh + oy) * g.ow + ox, y0, y1, x0, x1;
                double count = (double)window_bounds(&g, oy, ox, &y0, &y1, &x0, &x1);
                for (int ky = 0; ky < g.kh; ky++)
                    for (int kx = 0; kx < g.kw; kx++) {
                        int64_t iy = oy * g.sh - g.pt + ky * g.dh;
                        int64_t ix = ox * g.sw - g.pl + kx * g.dw;
                        if (iy < 0 || iy >= g.ih || ix < 0 || ix >= g.iw)
                            continue;
                        int64_t i = (pl * g.ih + iy) * g.iw + ix;
                        if (bwd && !is_max)
                            a->out[i] += dy[o] / count;
                        else if (is_max && (arg < 0 || x[i] > best)) {
                            arg = i;
                            best = x[i];
                        } else if (!is_max)
                            acc += x[i];
                    }
                if (!bwd)
                    a->out[o] = is_max ? best : acc / count;
                else if (is_max)
                    a->out[arg] += dy[o];
            }
}

/* ---- builders and gradient rules ------------------------------------------------------------ */

static tg_tensor *pool(tg_graph *g, tg_op op, tg_tensor *x, tg_pool2d_params q)
{
    tg_node_params p = {0};
    tg_pool_set_kernel_h(&p, q.kernel_h), tg_pool_set_kernel_w(&p, q.kernel_w);
    tg_pool_set_stride_h(&p, q.stride_h), tg_pool_set_stride_w(&p, q.stride_w);
    tg_pool_set_pad_top(&p, q.pad_top), tg_pool_set_pad_left(&p, q.pad_left);
    tg_pool_set_pad_bottom(&p, q.pad_bottom), tg_pool_set_pad_right(&p, q.pad_right);
    tg_pool_set_dilation_h(&p, q.dilation_h), tg_pool_set_dilation_w(&p, q.dilation_w);
    tg_pool_set_ceil_mode(&p, q.ceil_mode);
    tg_pool_set_count_include_pad(&p, q.count_include_pad);
    return tg_node_create(g, op, 1, &x, &p);
}

/* Square windows, symmetric padding, PyTorch's defaults otherwise. */
static tg_pool2d_params square(int kernel, int stride, int pad)
{
    return (tg_pool2d_params){kernel, kernel, stride, stride, pad,   pad,
                              pad,    pad,    1,      1,      false, true};
}

tg_tensor *tg_maxpool2d_ex(tg_graph *g, tg_tensor *x, tg_pool2d_params p)
{
    return pool(g, TG_OP_MAXPOOL2D, x, p);
}

tg_tensor *tg_avgpool2d_ex(tg_graph *g, tg_tensor *x, tg_pool2d_params p)
{
    return pool(g, TG_OP_AVGPOOL2D, x, p);
}

tg_tensor *tg_maxpool2d(tg_graph *g, tg_tensor *x, int kernel, int stride, int pad)
{
    return pool(g, TG_OP_MAXPOOL2D, x, square(kernel, stride, pad));
}

tg_tensor *tg_avgpool2d(tg_graph *g, tg_tensor *x, int kernel, int stride, int pad)
{
    return pool(g, TG_OP_AVGPOOL2D, x, square(kernel, stride, pad));
}

tg_tensor *tg_global_avgpool(tg_graph *g, tg_tensor *x)
{
    if (x && x->shape.ndim != 4)
        return tg_graph_fail(g, TG_ERR_SHAPE, "global average pool: '%s' is not [N, C, H, W]",
                             x->name);
    int h = x ? (int)x->shape.dim[2] : 1, w = x ? (int)x->shape.dim[3] : 1;
    tg_pool2d_params p = square(1, 1, 0);
    p.kernel_h = h, p.kernel_w = w;
    return pool(g, TG_OP_AVGPOOL2D, x, p);
}

static tg_status bwd_pool(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                          tg_tensor **din)
{
    (void)need;
    tg_node_params p = node->p;
    tg_pool_set_in_h(&p, node->in[0]->shape.dim[2]);
    tg_pool_set_in_w(&p, node->in[0]->shape.dim[3]);
    if (node->op == TG_OP_MAXPOOL2D) {
        /* (dy, x): the window maxima are found again in x, so the pooled
         * output need not live until the backward pass */
        tg_tensor *in[2] = {dout, node->in[0]};
        din[0] = tg_node_create(g, TG_OP_MAXPOOL2D_BWD, 2, in, &p);
    } else {
        din[0] = tg_node_create(g, TG_OP_AVGPOOL2D_BWD, 1, &dout, &p);
    }
    return din[0] ? TG_OK : tg_graph_status(g);
}

/* avgpool_bwd is linear in dy: its gradient is an average pool of the same window. */
static tg_status bwd_avgpool_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                                 tg_tensor **din)
{
    (void)need;
    tg_node_params p = node->p;
    tg_pool_set_in_h(&p, 0), tg_pool_set_in_w(&p, 0);
    din[0] = tg_node_create(g, TG_OP_AVGPOOL2D, 1, &dout, &p);
    return din[0] ? TG_OK : tg_graph_status(g);
}

/* maxpool_bwd's derivative in x and y is zero almost everywhere; in dy it would
 * need a gather by argmax, which no training graph asks for. */
static tg_status bwd_maxpool_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                                 tg_tensor **din)
{
    (void)g, (void)dout, (void)din;
    if (need[0])
        return tg_error(TG_ERR_UNSUPPORTED,
                        "%s: the second derivative of max pooling is not "
                        "implemented",
                        node->name);
    return TG_OK;
}

const tg_op_def tg_opdef_MAXPOOL2D = {.infer = infer_pool,
                                      .flops = flops_pool,
                                      .reference = ref_pool,
                                      .backward = bwd_pool,
                                      .flags = TG_OPF_BLOCKED,
                                      .memory = TG_OP_OWN_STORAGE,
                                      .cost = TG_COST_POOL};
const tg_kernel_def tg_cpu_kernel_MAXPOOL2D = {.forward = fwd_maxpool};
const tg_op_def tg_opdef_MAXPOOL2D_BWD = {.infer = infer_bwd,
                                          .flops = flops_pool,
                                          .reference = ref_pool,
                                          .backward = bwd_maxpool_bwd,
                                          .flags = TG_OPF_BLOCKED,
                                          .memory = TG_OP_OWN_STORAGE,
                                          .cost = TG_COST_POOL};
const tg_kernel_def tg_cpu_kernel_MAXPOOL2D_BWD = {.forward = fwd_maxpool_bwd};
const tg_op_def tg_opdef_AVGPOOL2D = {.infer = infer_pool,
                                      .flops = flops_pool,
                                      .reference = ref_pool,
                                      .backward = bwd_pool,
                                      .flags = TG_OPF_BLOCKED,
                                      .memory = TG_OP_OWN_STORAGE,
                                      .cost = TG_COST_POOL};
const tg_kernel_def tg_cpu_kernel_AVGPOOL2D = {.forward = fwd_avgpool};
const tg_op_def tg_opdef_AVGPOOL2D_BWD = {.infer = infer_bwd,
                                          .flops = flops_pool,
                                          .reference = ref_pool,
                                          .backward = bwd_avgpool_bwd,
                                          .flags = TG_OPF_BLOCKED,
                                          .memory = TG_OP_OWN_STORAGE,
                                          .cost = TG_COST_POOL};
const tg_kernel_def tg_cpu_kernel_AVGPOOL2D_BWD = {.forward = fwd_avgpool};
