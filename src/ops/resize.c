/* ops/resize.c - RESIZE (ONNX Resize and Upsample, torch's F.interpolate in
 * nearest and (bi)linear modes) over the last two axes of [N, C, H, W], and
 * its gradient RESIZE_BWD.
 *
 * Params (both ops, ops/resize.h): mode, coordinate transformation, nearest
 * rounding, the resized H and W (out_h, out_w), the original H and W (in_h,
 * in_w), the scales along H and W (0: the ratio of the sizes). RESIZE maps [N, C, H, W] to [N, C,
 * OH, OW]; RESIZE_BWD maps dy [N, C, OH, OW] back to [N, C, H, W].
 *
 * Each axis is separable: output index o reads input indices i0, i1 with
 * weights 1 - w, w (nearest: i0 = i1, w = 0), from the source coordinate of
 * ONNX's coordinate_transformation_mode, clamped to [0, len - 1] (ONNX's
 * edge padding and PyTorch's clamping give the same values). The tables are
 * computed in double, once per run, for the reference and the fast kernel
 * alike. An output element is a fixed sum of at most four inputs, so
 * RESIZE is linear: RESIZE_BWD is its transpose (each plane scatters and
 * adds dy in a fixed order, so the gradient is deterministic), and each
 * op's gradient is the other.
 */
#include "ops/broadcast.h"
#include "ops/resize.h"

#include "core/alloc.h"
#include "core/error.h"

#include <math.h>
#include <string.h>

/* The source coordinate of output index o (ONNX's formulas). `out` is the
 * resized length as ONNX's reference takes it: in * scale, unrounded, when
 * a scale is given (so align_corners from scales 0.6 of 4 divides by 1.4,
 * not 1), the output length otherwise. */
static double source_coord(tg_resize_coord mode, int64_t o, double scale, int64_t in, double out)
{
    switch (mode) {
    case TG_RESIZE_HALF_PIXEL:
        return (o + 0.5) / scale - 0.5;
    case TG_RESIZE_PYTORCH_HALF_PIXEL:
        return out > 1 ? (o + 0.5) / scale - 0.5 : 0;
    case TG_RESIZE_ALIGN_CORNERS:
        return out == 1 ? 0 : (double)o * (double)(in - 1) / (out - 1);
    case TG_RESIZE_ASYMMETRIC:
        return o / scale;
    case TG_RESIZE_TF_HALF_PIXEL_FOR_NN:
        return (o + 0.5) / scale;
    case TG_RESIZE_HALF_PIXEL_SYMMETRIC: {
        double adjust = out / (scale * (double)in), center = (double)in / 2;
        return center * (1 - adjust) + (o + 0.5) / scale - 0.5;
    }
    default:
        TG_UNREACHABLE("resize coordinate mode", mode);
    }
}

static int64_t clamp_index(double v, int64_t len)
{
    return v < 0 ? 0 : v > (double)(len - 1) ? len - 1 : (int64_t)v;
}

/* Output index o's inputs and weight along one axis. */
static tg_resize_axis_entry axis_at(const tg_node_params *p, int64_t o, double scale, int64_t in,
                                    double out)
{
    double x = source_coord((tg_resize_coord)tg_resize_get_coords(p), o, scale, in, out);
    tg_resize_axis_entry e;
    if (tg_resize_get_kind(p) == TG_RESIZE_NEAREST) {
        double r;
        switch ((tg_resize_nearest)tg_resize_get_rounding(p)) {
        case TG_RESIZE_ROUND_PREFER_FLOOR:
            r = ceil(x - 0.5);
            break;
        case TG_RESIZE_ROUND_PREFER_CEIL:
            r = floor(x + 0.5);
            break;
        case TG_RESIZE_FLOOR:
            r = floor(x);
            break;
        case TG_RESIZE_CEIL:
            r = ceil(x);
            break;
        default:
            TG_UNREACHABLE("resize rounding", tg_resize_get_rounding(p));
        }

        e.i0 = e.i1 = clamp_index(r, in);
        e.w = 0;
        return e;
    }
    if (x < 0)
        x = 0;
    if (x > (double)(in - 1))
        x = (double)(in - 1);
    e.i0 = (int64_t)floor(x);
    e.i1 = e.i0 + 1 < in ? e.i0 + 1 : e.i0;
    e.w = x - (double)e.i0;
    return e;
}

/* Tables for H (out_h entries) then W (out_w entries). */
void tg_resize_make_tables(const tg_node_params *p, tg_resize_axis_entry *t)
{
    int64_t oh = tg_resize_get_out_h(p), ow = tg_resize_get_out_w(p), h = tg_resize_get_in_h(p),
            w = tg_resize_get_in_w(p);
    double sh = tg_resize_get_scale_h(p) > 0 ? tg_resize_get_scale_h(p) : (double)oh / (double)h;
    double sw = tg_resize_get_scale_w(p) > 0 ? tg_resize_get_scale_w(p) : (double)ow / (double)w;
    double lh = tg_resize_get_scale_h(p) > 0 ? sh * (double)h : (double)oh;
    double lw = tg_resize_get_scale_w(p) > 0 ? sw * (double)w : (double)ow;
    for (int64_t o = 0; o < oh; o++)
        t[o] = axis_at(p, o, sh, h, lh);
    for (int64_t o = 0; o < ow; o++)
        t[oh + o] = axis_at(p, o, sw, w, lw);
}

/* ---- shape rule --------------------------------------------------------------------- */

static tg_status infer_resize(tg_tensor *node)
{
    const tg_node_params *p = &node->p;
    tg_shape in = node->in[0]->shape;
    bool bwd = node->op == TG_OP_RESIZE_BWD;
    char a[96];
    if (node->n_in != 1 || node->in[0]->dtype != TG_F32 || in.ndim != 4)
        return tg_error(TG_ERR_SHAPE, "takes one f32 [N, C, H, W] tensor, got %s %s",
                        tg_dtype_name(node->in[0]->dtype), tg_shape_str(in, a, sizeof a));
    if (tg_resize_get_kind(p) < 0 || tg_resize_get_kind(p) > TG_RESIZE_LINEAR ||
        tg_resize_get_coords(p) < 0 || tg_resize_get_coords(p) > TG_RESIZE_HALF_PIXEL_SYMMETRIC ||
        tg_resize_get_rounding(p) < 0 || tg_resize_get_rounding(p) > TG_RESIZE_CEIL)
        return tg_error(TG_ERR_INVALID_ARG, "mode %lld, coordinates %lld, rounding %lld",
                        (long long)tg_resize_get_kind(p), (long long)tg_resize_get_coords(p),
                        (long long)tg_resize_get_rounding(p));
    if (tg_resize_get_out_h(p) < 1 || tg_resize_get_out_w(p) < 1 || tg_resize_get_in_h(p) < 1 ||
        tg_resize_get_in_w(p) < 1)
        return tg_error(TG_ERR_SHAPE, "sizes %lldx%lld from %lldx%lld: each must be >= 1",
                        (long long)tg_resize_get_out_h(p), (long long)tg_resize_get_out_w(p),
                        (long long)tg_resize_get_in_h(p), (long long)tg_resize_get_in_w(p));
    if (!(tg_resize_get_scale_h(p) >= 0 && tg_resize_get_scale_w(p) >= 0 &&
          isfinite(tg_resize_get_scale_h(p)) && isfinite(tg_resize_get_scale_w(p))))
        return tg_error(TG_ERR_INVALID_ARG,
                        "scales %g, %g (give positive values, or 0 for the "
                        "ratio of the sizes)",
                        (double)tg_resize_get_scale_h(p), (double)tg_resize_get_scale_w(p));
    int64_t h = bwd ? tg_resize_get_out_h(p) : tg_resize_get_in_h(p),
            w = bwd ? tg_resize_get_out_w(p) : tg_resize_get_in_w(p);
    if (in.dim[2] != h || in.dim[3] != w)
        return tg_error(TG_ERR_SHAPE, "input %s, the resize expects %lldx%lld maps",
                        tg_shape_str(in, a, sizeof a), (long long)h, (long long)w);
    node->dtype = TG_F32;
    node->shape = in;
    node->shape.dim[2] = bwd ? tg_resize_get_in_h(p) : tg_resize_get_out_h(p);
    node->shape.dim[3] = bwd ? tg_resize_get_in_w(p) : tg_resize_get_out_w(p);
    return TG_OK;
}

static double flops_resize(const tg_tensor *node)
{
    const tg_tensor *big = node->op == TG_OP_RESIZE ? node : node->in[0];
    return (tg_resize_kind(node) == TG_RESIZE_LINEAR ? 8.0 : 0.0) * (double)tg_numel(big);
}

/* ---- reference kernel ----------------------------------------------------------------- */

static void ref_resize(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    const tg_node_params *p = &node->p;
    int64_t oh = tg_resize_get_out_h(p), ow = tg_resize_get_out_w(p), h = tg_resize_get_in_h(p),
            w = tg_resize_get_in_w(p);
    tg_resize_axis_entry *t = tg_malloc((size_t)(oh + ow) * sizeof *t);
    if (!t)
        return; /* the reference runs in tests only: a failed allocation shows as wrong values */
    tg_resize_make_tables(p, t);
    int64_t planes = node->shape.dim[0] * node->shape.dim[1];
    bool bwd = node->op == TG_OP_RESIZE_BWD;
    if (bwd)
        memset(a->out, 0, (size_t)tg_numel(node) * sizeof *a->out);
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++) {
                const tg_resize_axis_entry *ey = &t[oy], *ex = &t[oh + ox];
                int64_t iy[2] = {ey->i0, ey->i1}, ix[2] = {ex->i0, ex->i1};
                double wy[2] = {1 - ey->w, ey->w}, wx[2] = {1 - ex->w, ex->w};
                int64_t o = (pl * oh + oy) * ow + ox;
                double sum = 0;
                for (int u = 0; u < 2; u++)
                    for (int v = 0; v < 2; v++) {
                        int64_t i = (pl * h + iy[u]) * w + ix[v];
                        double c = wy[u] * wx[v];
                        if (tg_resize_get_kind(p) == TG_RESIZE_NEAREST)
                            c = u == 0 && v == 0 ? 1 : 0;
                        if (bwd)
                            a->out[i] += c * a->in[0][o];
                        else
                            sum += c * a->in[0][i];
                    }
                if (!bwd)
                    a->out[o] = sum;
            }
    tg_free(t);
}

/* ---- builder and gradients ----------------------------------------------------------------- */

static tg_status bwd_resize(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                            tg_tensor **din)
{
    (void)need;
    tg_op other = node->op == TG_OP_RESIZE ? TG_OP_RESIZE_BWD : TG_OP_RESIZE;
    din[0] = tg_node_create(g, other, 1, &dout, &node->p);
    return din[0] ? TG_OK : tg_graph_status(g);
}

tg_tensor *tg_resize(tg_graph *g, tg_tensor *x, const tg_resize_params *rp)
{
    if (!x || !rp)
        return tg_graph_fail(g, TG_ERR_INVALID_ARG, "resize: %s is NULL", x ? "params" : "x");
    tg_shape s = tg_tensor_shape(x);
    char a[96];
    if (s.ndim != 4)
        return tg_graph_fail(g, TG_ERR_SHAPE,
                             "resize: x is %s; it resizes the last two axes of [N, C, H, W]",
                             tg_shape_str(s, a, sizeof a));
    if ((unsigned)rp->coord > TG_RESIZE_HALF_PIXEL_SYMMETRIC)
        return tg_graph_fail(g, TG_ERR_INVALID_ARG, "resize: coordinate mode %d (0 to %d)",
                             (int)rp->coord, TG_RESIZE_HALF_PIXEL_SYMMETRIC);
    tg_node_params p = {0};
    tg_resize_set_kind(&p, rp->mode);
    tg_resize_set_coords(&p, rp->coord);
    tg_resize_set_rounding(&p, rp->nearest);
    tg_resize_set_out_h(&p, rp->out_h);
    tg_resize_set_out_w(&p, rp->out_w);
    tg_resize_set_in_h(&p, s.dim[2]);
    tg_resize_set_in_w(&p, s.dim[3]);
    tg_resize_set_scale_h(&p, rp->scale_h);
    tg_resize_set_scale_w(&p, rp->scale_w);
    return tg_node_create(g, TG_OP_RESIZE, 1, &x, &p);
}

const tg_op_def tg_opdef_RESIZE = {.infer = infer_resize,
                                   .flops = flops_resize,
                                   .reference = ref_resize,
                                   .backward = bwd_resize,
                                   .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_RESIZE_BWD = {.infer = infer_resize,
                                       .flops = flops_resize,
                                       .reference = ref_resize,
                                       .backward = bwd_resize,
                                       .memory = TG_OP_OWN_STORAGE};
