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
#include "ops/pool.h"

#include "core/error.h"

#include <math.h>

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
    node->shape = tg_pool_input_shape(node);
    return TG_OK;
}

static double flops_pool(const tg_tensor *node)
{
    return (double)tg_shape_numel(tg_pool_output_shape(node)) *
           (double)(tg_pool_kernel_h(node) * tg_pool_kernel_w(node));
}

/* ---- reference kernels (double) ---------------------------------------------------------- */

static void ref_pool(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    tg_pool_geom g = tg_pool_geom_of(node, tg_pool_input_shape(node), tg_pool_output_shape(node));
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
                double count = (double)tg_pool_window_bounds(&g, oy, ox, &y0, &y1, &x0, &x1);
                for (int ky = 0; ky < g.kh; ky++)
                    for (int kx = 0; kx < g.kw; kx++) {
                        int64_t iy = oy * g.sh - g.pt + ky * g.dh;
                        int64_t ix = ox * g.sw - g.pl + kx * g.dw;
                        if (iy < 0 || iy >= g.ih || ix < 0 || ix >= g.iw)
                            continue;
                        int64_t i = (pl * g.ih + iy) * g.iw + ix;
                        if (bwd && !is_max)
                            a->out[i] += dy[o] / count;
                        else if (is_max &&
                                 (arg < 0 || x[i] > best || (isnan(x[i]) && !isnan(best)))) {
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
                                      .memory = TG_OP_OWN_STORAGE,
                                      .cost = TG_COST_POOL};
const tg_op_def tg_opdef_MAXPOOL2D_BWD = {.infer = infer_bwd,
                                          .flops = flops_pool,
                                          .reference = ref_pool,
                                          .backward = bwd_maxpool_bwd,
                                          .memory = TG_OP_OWN_STORAGE,
                                          .cost = TG_COST_POOL};
const tg_op_def tg_opdef_AVGPOOL2D = {.infer = infer_pool,
                                      .flops = flops_pool,
                                      .reference = ref_pool,
                                      .backward = bwd_pool,
                                      .memory = TG_OP_OWN_STORAGE,
                                      .cost = TG_COST_POOL};
const tg_op_def tg_opdef_AVGPOOL2D_BWD = {.infer = infer_bwd,
                                          .flops = flops_pool,
                                          .reference = ref_pool,
                                          .backward = bwd_avgpool_bwd,
                                          .memory = TG_OP_OWN_STORAGE,
                                          .cost = TG_COST_POOL};
