/* ops/softmax.c - SOFTMAX and LOG_SOFTMAX over one axis, and their
 * backward ops SOFTMAX_BWD(dy, y) and LOG_SOFTMAX_BWD(dy, y), which need only
 * the forward output y.
 *
 * Numerically stable: every lane subtracts its maximum before exp, so large
 * logits neither overflow nor lose the small ones.
 *   softmax:          y = exp(x - m) / s,    s = sum exp(x - m)
 *   log_softmax:      y = x - m - log(s)
 *   softmax_bwd:      dx = y * (dy - sum(dy * y))
 *   log_softmax_bwd:  dx = dy - exp(y) * sum(dy)
 *
 * Params (ops/unary.h): the axis (negative counts from the end; stored
 * normalised).
 * A tensor is seen as [outer, L, inner] around the axis; a "lane" is one
 * (outer, inner) pair, L elements apart by `inner`. The last axis (inner = 1)
 * is the common case and runs over contiguous rows. The cpu backend's
 * kernels are backend/cpu/softmax_kernels.c.
 */
#include "ops/broadcast.h"
#include "ops/unary.h"

#include "core/error.h"

#include <math.h>

/* ---- shape rules ------------------------------------------------------------------ */

static tg_status check_f32(const tg_tensor *node, int k)
{
    if (node->in[k]->dtype != TG_F32)
        return tg_error(TG_ERR_DTYPE, "input '%s' is %s; this op takes f32", node->in[k]->name,
                        tg_dtype_name(node->in[k]->dtype));
    return TG_OK;
}

static tg_status infer_softmax(tg_tensor *node)
{
    tg_shape s = node->in[0]->shape;
    for (int k = 0; k < node->n_in; k++)
        TG_TRY(check_f32(node, k));
    if (node->n_in == 2 && !tg_shape_equal(s, node->in[1]->shape)) {
        char a[96], b[96];
        return tg_error(TG_ERR_SHAPE, "dy %s and y %s differ in shape",
                        tg_shape_str(s, a, sizeof a),
                        tg_shape_str(node->in[1]->shape, b, sizeof b));
    }
    int64_t axis =
        tg_softmax_axis(node) < 0 ? tg_softmax_axis(node) + s.ndim : tg_softmax_axis(node);
    if (axis < 0 || axis >= s.ndim) {
        char a[96];
        return tg_error(TG_ERR_INVALID_ARG, "axis %lld out of range for %s",
                        (long long)tg_softmax_axis(node), tg_shape_str(s, a, sizeof a));
    }
    tg_softmax_set_axis(&node->p, axis);
    node->dtype = TG_F32;
    node->shape = s;
    return TG_OK;
}

/* exp counts as 4, like the other families. */
static double flops(const tg_tensor *node)
{
    double n = (double)tg_numel(node);
    switch (node->op) {
    case TG_OP_SOFTMAX:
        return 7 * n; /* max, sub, exp, sum, div */
    case TG_OP_LOG_SOFTMAX:
        return 7 * n; /* max, sub, exp, sum, sub (+ a log per lane) */
    case TG_OP_SOFTMAX_BWD:
        return 4 * n;
    case TG_OP_LOG_SOFTMAX_BWD:
        return 6 * n;
    default:
        TG_UNREACHABLE_OP(node->op);
    }
}

tg_softmax_lanes tg_softmax_lanes_of(const tg_tensor *node)
{
    tg_softmax_lanes l = {1, node->shape.dim[tg_softmax_axis(node)], 1};
    for (int d = 0; d < tg_softmax_axis(node); d++)
        l.outer *= node->shape.dim[d];
    for (int d = (int)tg_softmax_axis(node) + 1; d < node->shape.ndim; d++)
        l.inner *= node->shape.dim[d];
    return l;
}

/* ---- reference kernels ------------------------------------------------------------------ */

static void ref_softmax(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    tg_softmax_lanes l = tg_softmax_lanes_of(node);
    const double *x = a->in[0], *y = node->n_in > 1 ? a->in[1] : a->in[0];
    for (int64_t o = 0; o < l.outer; o++)
        for (int64_t i = 0; i < l.inner; i++) {
            int64_t base = o * l.len * l.inner + i, st = l.inner;
            double m = -INFINITY, s = 0;
            switch (node->op) {
            case TG_OP_SOFTMAX:
            case TG_OP_LOG_SOFTMAX:
                for (int64_t q = 0; q < l.len; q++)
                    m = fmax(m, x[base + q * st]);
                if (m == -INFINITY)
                    m = 0;
                for (int64_t q = 0; q < l.len; q++)
                    s += exp(x[base + q * st] - m);
                for (int64_t q = 0; q < l.len; q++) {
                    double v = x[base + q * st] - m;
                    a->out[base + q * st] = node->op == TG_OP_SOFTMAX ? exp(v) / s : v - log(s);
                }
                break;
            case TG_OP_SOFTMAX_BWD:
                for (int64_t q = 0; q < l.len; q++)
                    s += x[base + q * st] * y[base + q * st];
                for (int64_t q = 0; q < l.len; q++)
                    a->out[base + q * st] = y[base + q * st] * (x[base + q * st] - s);
                break;
            case TG_OP_LOG_SOFTMAX_BWD:
                for (int64_t q = 0; q < l.len; q++)
                    s += x[base + q * st];
                for (int64_t q = 0; q < l.len; q++)
                    a->out[base + q * st] = x[base + q * st] - exp(y[base + q * st]) * s;
                break;
            default:
                TG_UNREACHABLE_OP(node->op);
            }
        }
}

/* ---- builders ------------------------------------------------------------------------- */

static tg_tensor *make(tg_graph *g, tg_op op, int n, tg_tensor *x, tg_tensor *y, int64_t axis)
{
    tg_node_params p = {0};
    tg_softmax_set_axis(&p, axis);
    return tg_node_create(g, op, n, (tg_tensor *[]){x, y}, &p);
}

tg_tensor *tg_softmax(tg_graph *g, tg_tensor *x, int axis)
{
    return make(g, TG_OP_SOFTMAX, 1, x, NULL, axis);
}

tg_tensor *tg_log_softmax(tg_graph *g, tg_tensor *x, int axis)
{
    return make(g, TG_OP_LOG_SOFTMAX, 1, x, NULL, axis);
}

/* ---- gradient rules ----------------------------------------------------------------------- */

static tg_status bwd_softmax(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                             tg_tensor **din)
{
    tg_op op = node->op == TG_OP_SOFTMAX ? TG_OP_SOFTMAX_BWD : TG_OP_LOG_SOFTMAX_BWD;
    din[0] = make(g, op, 2, dout, node, tg_softmax_axis(node));
    return TG_OK;
}

/* softmax_bwd(dy, y) = J dy with J = diag(y) - y y^T symmetric, so its
 * adjoint in dy is softmax_bwd(g, y). In y, with s = sum(dy * y) and
 * t = sum(g * y) over the axis: dy * (g - t) - g * s. */
static tg_status bwd_softmax_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                                 tg_tensor **din)
{
    tg_tensor *dy = node->in[0], *y = node->in[1];
    unsigned axis_mask = 1u << tg_softmax_axis(node);
    if (need[0])
        din[0] = make(g, TG_OP_SOFTMAX_BWD, 2, dout, y, tg_softmax_axis(node));
    if (need[1]) {
        tg_tensor *s = tg_reduce_sum(g, tg_mul(g, dy, y), axis_mask, true);
        tg_tensor *t = tg_reduce_sum(g, tg_mul(g, dout, y), axis_mask, true);
        din[1] = tg_sub(g, tg_mul(g, dy, tg_sub(g, dout, t)), tg_mul(g, dout, s));
    }
    return TG_OK;
}

/* log_softmax_bwd(dy, y) = dy - p * sum(dy) with p = exp(y). Adjoint in dy:
 * g - sum(g * p); in y: -g * p * sum(dy). p is computed as softmax(y),
 * which equals exp(y) because y is a log-softmax (sum exp(y) = 1) and
 * needs no exp op of its own. */
static tg_status bwd_log_softmax_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout,
                                     const bool *need, tg_tensor **din)
{
    tg_tensor *dy = node->in[0], *y = node->in[1];
    int axis = (int)tg_softmax_axis(node);
    unsigned axis_mask = 1u << axis;
    tg_tensor *p = tg_softmax(g, y, axis);
    if (need[0])
        din[0] = tg_sub(g, dout, tg_reduce_sum(g, tg_mul(g, dout, p), axis_mask, true));
    if (need[1]) {
        tg_tensor *s = tg_reduce_sum(g, dy, axis_mask, true);
        din[1] = tg_scale(g, tg_mul(g, tg_mul(g, dout, p), s), -1.0f, 0.0f);
    }
    return TG_OK;
}

const tg_op_def tg_opdef_SOFTMAX = {.infer = infer_softmax,
                                    .flops = flops,
                                    .reference = ref_softmax,
                                    .backward = bwd_softmax,
                                    .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_LOG_SOFTMAX = {.infer = infer_softmax,
                                        .flops = flops,
                                        .reference = ref_softmax,
                                        .backward = bwd_softmax,
                                        .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_SOFTMAX_BWD = {.infer = infer_softmax,
                                        .flops = flops,
                                        .reference = ref_softmax,
                                        .backward = bwd_softmax_bwd,
                                        .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_LOG_SOFTMAX_BWD = {.infer = infer_softmax,
                                            .flops = flops,
                                            .reference = ref_softmax,
                                            .backward = bwd_log_softmax_bwd,
                                            .memory = TG_OP_OWN_STORAGE};
