/* ops/binary.c - elementwise ADD, SUB, MUL, DIV, POW, MAXIMUM, MINIMUM with
 * NumPy broadcasting, the backward ops POW_BWD and MINMAX_BWD, and the two
 * ops that move between broadcast shapes: SUM_TO (sum down to a smaller
 * broadcast-compatible shape: the gradient of a broadcast) and EXPAND
 * (broadcast up to a larger shape: the gradient of SUM_TO).
 *
 * Params: SUM_TO and EXPAND keep their target shape (ops/shape.h). The
 * arithmetic ops have none. POW_BWD and MINMAX_BWD take (dy, a, b), dy at
 * the broadcast output's shape, and give the gradient of input `which`
 * (ops/binary.h: 0 = a, 1 = b) at that shape (the caller sums it down);
 * MINMAX_BWD's is_min tells MINIMUM's from MAXIMUM's.
 *
 * The cpu backend's kernels (backend/cpu/binary_kernels.c) view the inputs
 * through a merged strided view (tg_bcast), so the common cases reduce to
 * one inner loop over contiguous memory: same shape (one dimension, both
 * strides 1), scalar operand (stride 0) and row broadcast such as a bias add
 * [N, K] + [K] (rows of K with the bias at stride 1). Anything else walks
 * the view one inner run at a time.
 */
#include "ops/binary.h"
#include "ops/broadcast.h"
#include "ops/shape.h"

#include "core/error.h"

#include <math.h>

/* ---- shape rules ------------------------------------------------------------------- */

static tg_status need_f32(const tg_tensor *node, int k)
{
    if (node->in[k]->dtype != TG_F32)
        return tg_error(TG_ERR_DTYPE, "input %d ('%s') is %s; this op takes f32", k,
                        node->in[k]->name, tg_dtype_name(node->in[k]->dtype));
    return TG_OK;
}

static tg_status infer_arith(tg_tensor *node)
{
    if (node->n_in != 2)
        return tg_error(TG_ERR_INVALID_ARG, "takes 2 inputs, got %d", node->n_in);
    TG_TRY(need_f32(node, 0));
    TG_TRY(need_f32(node, 1));
    node->dtype = TG_F32;
    return tg_broadcast_shape(node->in[0]->shape, node->in[1]->shape, &node->shape);
}

/* (dy, a, b): a and b broadcast to dy's shape, which is the output's. */
static tg_status infer_grad3(tg_tensor *node)
{
    if (node->n_in != 3)
        return tg_error(TG_ERR_INVALID_ARG, "takes 3 inputs (dy, a, b), got %d", node->n_in);
    for (int k = 0; k < 3; k++)
        TG_TRY(need_f32(node, k));
    tg_shape out;
    TG_TRY(tg_broadcast_shape(node->in[1]->shape, node->in[2]->shape, &out));
    if (!tg_shape_equal(out, node->in[0]->shape)) {
        char a[96], b[96];
        return tg_error(TG_ERR_SHAPE, "dy %s is not the broadcast shape %s of its operands",
                        tg_shape_str(node->in[0]->shape, a, sizeof a),
                        tg_shape_str(out, b, sizeof b));
    }
    if (tg_grad3_which(node) != 0 && tg_grad3_which(node) != 1)
        return tg_error(TG_ERR_INVALID_ARG, "input index %lld (0 or 1)",
                        (long long)tg_grad3_which(node));
    node->dtype = TG_F32;
    node->shape = out;
    return TG_OK;
}

static tg_status infer_sum_to(tg_tensor *node)
{
    if (node->n_in != 1)
        return tg_error(TG_ERR_INVALID_ARG, "takes 1 input, got %d", node->n_in);
    TG_TRY(need_f32(node, 0));
    TG_TRY(tg_params_check_shape(&node->p, TG_SHAPE_AT));
    tg_shape to = tg_params_get_shape(&node->p, TG_SHAPE_AT), from = node->in[0]->shape;
    if (!tg_broadcasts_to(to, from)) {
        char a[96], b[96];
        return tg_error(TG_ERR_SHAPE, "cannot sum %s down to %s (%s does not broadcast to %s)",
                        tg_shape_str(from, a, sizeof a), tg_shape_str(to, b, sizeof b), b, a);
    }
    node->dtype = TG_F32;
    node->shape = to;
    return TG_OK;
}

static tg_status infer_expand(tg_tensor *node)
{
    if (node->n_in != 1)
        return tg_error(TG_ERR_INVALID_ARG, "takes 1 input, got %d", node->n_in);
    TG_TRY(need_f32(node, 0));
    TG_TRY(tg_params_check_shape(&node->p, TG_SHAPE_AT));
    tg_shape to = tg_params_get_shape(&node->p, TG_SHAPE_AT), from = node->in[0]->shape;
    if (!tg_broadcasts_to(from, to)) {
        char a[96], b[96];
        return tg_error(TG_ERR_SHAPE, "cannot expand %s to %s", tg_shape_str(from, a, sizeof a),
                        tg_shape_str(to, b, sizeof b));
    }
    node->dtype = TG_F32;
    node->shape = to;
    return TG_OK;
}

static double flops_out(const tg_tensor *node)
{
    return (double)tg_numel(node);
}
static double flops_in(const tg_tensor *node)
{
    return (double)tg_numel(node->in[0]);
}
static double flops_none(const tg_tensor *node)
{
    return 0;
}
/* powf and logf count as 4 each, as the transcendental functions in unary.c. */
static double flops_pow(const tg_tensor *node)
{
    return 4 * (double)tg_numel(node);
}
static double flops_pow_bwd(const tg_tensor *node)
{
    return 10 * (double)tg_numel(node);
}
static double flops_minmax_bwd(const tg_tensor *node)
{
    return 3 * (double)tg_numel(node);
}

/* ---- reference kernels ---------------------------------------------------------------- */

static void ref_grad3(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    int which = (int)tg_grad3_which(node), is_min = (int)tg_grad3_is_min(node);
    tg_shape sa = node->in[1]->shape, sb = node->in[2]->shape;
    for (int64_t k = 0; k < tg_numel(node); k++) {
        double u = a->in[1][tg_bcast_ref_offset(node->shape, sa, k)];
        double v = a->in[2][tg_bcast_ref_offset(node->shape, sb, k)];
        a->out[k] =
            a->in[0][k] * (node->op == TG_OP_POW_BWD ? TG_POW_GRAD(double, pow, log, which, u, v)
                                                     : TG_MINMAX_GRAD(double, is_min, which, u, v));
    }
}

static void arith_ref(const tg_ref_args *a, tg_arith op)
{
    const tg_tensor *node = a->node;
    tg_shape sa = node->in[0]->shape, sb = op == TG_ARITH_COPY ? sa : node->in[1]->shape;
    const double *x = a->in[0], *y = op == TG_ARITH_COPY ? a->in[0] : a->in[1];
    int64_t n = tg_numel(node);
    for (int64_t k = 0; k < n; k++) {
        double u = x[tg_bcast_ref_offset(node->shape, sa, k)];
        double v = y[tg_bcast_ref_offset(node->shape, sb, k)];
        switch (op) {
        case TG_ARITH_ADD:
            a->out[k] = u + v;
            break;
        case TG_ARITH_SUB:
            a->out[k] = u - v;
            break;
        case TG_ARITH_MUL:
            a->out[k] = u * v;
            break;
        case TG_ARITH_DIV:
            a->out[k] = u / v;
            break;
        case TG_ARITH_POW:
            a->out[k] = pow(u, v);
            break;
        case TG_ARITH_MAX:
            a->out[k] = u > v || u != u ? u : v;
            break;
        case TG_ARITH_MIN:
            a->out[k] = u < v || u != u ? u : v;
            break;
        case TG_ARITH_COPY:
            a->out[k] = u;
            break;
        default:
            TG_UNREACHABLE("arithmetic op", op);
        }
    }
}

static void ref_add(const tg_ref_args *a)
{
    arith_ref(a, TG_ARITH_ADD);
}
static void ref_sub(const tg_ref_args *a)
{
    arith_ref(a, TG_ARITH_SUB);
}
static void ref_mul(const tg_ref_args *a)
{
    arith_ref(a, TG_ARITH_MUL);
}
static void ref_div(const tg_ref_args *a)
{
    arith_ref(a, TG_ARITH_DIV);
}
static void ref_pow(const tg_ref_args *a)
{
    arith_ref(a, TG_ARITH_POW);
}
static void ref_max(const tg_ref_args *a)
{
    arith_ref(a, TG_ARITH_MAX);
}
static void ref_min(const tg_ref_args *a)
{
    arith_ref(a, TG_ARITH_MIN);
}
static void ref_expand(const tg_ref_args *a)
{
    arith_ref(a, TG_ARITH_COPY);
}

static void ref_sum_to(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    tg_shape in = node->in[0]->shape;
    tg_sum_ref(in, tg_shape_pad_left(node->shape, in.ndim), a->in[0], a->out);
}

/* ---- builders ------------------------------------------------------------------------ */

tg_tensor *tg_add(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return tg_node_create(g, TG_OP_ADD, 2, (tg_tensor *[]){a, b}, NULL);
}

tg_tensor *tg_sub(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return tg_node_create(g, TG_OP_SUB, 2, (tg_tensor *[]){a, b}, NULL);
}

tg_tensor *tg_mul(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return tg_node_create(g, TG_OP_MUL, 2, (tg_tensor *[]){a, b}, NULL);
}

tg_tensor *tg_div(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return tg_node_create(g, TG_OP_DIV, 2, (tg_tensor *[]){a, b}, NULL);
}

tg_tensor *tg_pow(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return tg_node_create(g, TG_OP_POW, 2, (tg_tensor *[]){a, b}, NULL);
}

tg_tensor *tg_maximum(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return tg_node_create(g, TG_OP_MAXIMUM, 2, (tg_tensor *[]){a, b}, NULL);
}

tg_tensor *tg_minimum(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return tg_node_create(g, TG_OP_MINIMUM, 2, (tg_tensor *[]){a, b}, NULL);
}

static tg_tensor *grad3(tg_graph *g, tg_op op, tg_tensor *dy, const tg_tensor *fwd, int which)
{
    tg_node_params p = {0};
    tg_grad3_set_which(&p, which);
    tg_grad3_set_is_min(&p, fwd->op == TG_OP_MINIMUM);
    return tg_node_create(g, op, 3, (tg_tensor *[]){dy, fwd->in[0], fwd->in[1]}, &p);
}

static tg_tensor *shape_op(tg_graph *g, tg_op op, tg_tensor *x, tg_shape shape)
{
    if (x && tg_shape_equal(x->shape, shape))
        return x;
    tg_node_params p = {0};
    tg_params_put_shape(&p, TG_SHAPE_AT, shape);
    return tg_node_create(g, op, 1, &x, &p);
}

tg_tensor *tg_sum_to(tg_graph *g, tg_tensor *x, tg_shape shape)
{
    return shape_op(g, TG_OP_SUM_TO, x, shape);
}

tg_tensor *tg_expand(tg_graph *g, tg_tensor *x, tg_shape shape)
{
    return shape_op(g, TG_OP_EXPAND, x, shape);
}

/* ---- gradient rules --------------------------------------------------------------------- */

/* Gradients are computed at the output's (broadcast) shape and summed down
 * to each input's shape; a scale by -1 goes after the sum, on the smaller
 * tensor. */
static tg_status bwd_add_sub(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                             tg_tensor **din)
{
    if (need[0])
        din[0] = tg_sum_to(g, dout, node->in[0]->shape);
    if (need[1]) {
        din[1] = tg_sum_to(g, dout, node->in[1]->shape);
        if (node->op == TG_OP_SUB)
            din[1] = tg_scale(g, din[1], -1.0f, 0.0f);
    }
    return TG_OK;
}

static tg_status bwd_mul(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                         tg_tensor **din)
{
    tg_tensor *a = node->in[0], *b = node->in[1];
    if (need[0])
        din[0] = tg_sum_to(g, tg_mul(g, dout, b), a->shape);
    if (need[1])
        din[1] = tg_sum_to(g, tg_mul(g, dout, a), b->shape);
    return TG_OK;
}

/* d(a/b)/da = 1/b; d(a/b)/db = -a/b^2 = -(a/b)/b, read from the output. */
static tg_status bwd_div(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                         tg_tensor **din)
{
    tg_tensor *a = node->in[0], *b = node->in[1];
    if (need[0])
        din[0] = tg_sum_to(g, tg_div(g, dout, b), a->shape);
    if (need[1]) {
        tg_tensor *t = tg_div(g, tg_mul(g, dout, node), b);
        din[1] = tg_scale(g, tg_sum_to(g, t, b->shape), -1.0f, 0.0f);
    }
    return TG_OK;
}

/* Each input's gradient is computed at the output's shape by a 3-input
 * backward op and summed down to the input's shape. */
static tg_status bwd_pow_minmax(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                                tg_tensor **din)
{
    tg_op op = node->op == TG_OP_POW ? TG_OP_POW_BWD : TG_OP_MINMAX_BWD;
    for (int k = 0; k < 2; k++)
        if (need[k])
            din[k] = tg_sum_to(g, grad3(g, op, dout, node, k), node->in[k]->shape);
    return TG_OK;
}

/* Both are linear in dy: the gradient in dy is the same op applied to the
 * incoming gradient. In a and b, MINMAX_BWD is piecewise constant (no
 * gradient); POW_BWD's second derivatives are not implemented. */
static tg_status bwd_grad3(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                           tg_tensor **din)
{
    if (node->op == TG_OP_POW_BWD && (need[1] || need[2]))
        return tg_error(TG_ERR_UNSUPPORTED,
                        "%s: the second derivative of pow in its base or exponent is not "
                        "implemented; only the gradient in dy is",
                        node->name);
    if (need[0]) {
        tg_node_params p = node->p;
        din[0] =
            tg_node_create(g, node->op, 3, (tg_tensor *[]){dout, node->in[1], node->in[2]}, &p);
    }
    return TG_OK;
}

static tg_status bwd_sum_to(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                            tg_tensor **din)
{
    din[0] = tg_expand(g, dout, node->in[0]->shape);
    return TG_OK;
}

static tg_status bwd_expand(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                            tg_tensor **din)
{
    din[0] = tg_sum_to(g, dout, node->in[0]->shape);
    return TG_OK;
}

const tg_op_def tg_opdef_ADD = {.infer = infer_arith,
                                .flops = flops_out,
                                .reference = ref_add,
                                .backward = bwd_add_sub,
                                .flags =
                                    TG_OPF_ELEMENTWISE | TG_OPF_BF16_NATIVE | TG_OPF_PER_CHANNEL,
                                .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_SUB = {.infer = infer_arith,
                                .flops = flops_out,
                                .reference = ref_sub,
                                .backward = bwd_add_sub,
                                .flags = TG_OPF_ELEMENTWISE | TG_OPF_PER_CHANNEL,
                                .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_MUL = {.infer = infer_arith,
                                .flops = flops_out,
                                .reference = ref_mul,
                                .backward = bwd_mul,
                                .flags = TG_OPF_ELEMENTWISE | TG_OPF_PER_CHANNEL,
                                .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_DIV = {.infer = infer_arith,
                                .flops = flops_out,
                                .reference = ref_div,
                                .backward = bwd_div,
                                .flags = TG_OPF_ELEMENTWISE,
                                .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_POW = {.infer = infer_arith,
                                .flops = flops_pow,
                                .reference = ref_pow,
                                .backward = bwd_pow_minmax,
                                .flags = TG_OPF_ELEMENTWISE,
                                .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_POW_BWD = {.infer = infer_grad3,
                                    .flops = flops_pow_bwd,
                                    .reference = ref_grad3,
                                    .backward = bwd_grad3,
                                    .flags = TG_OPF_ELEMENTWISE,
                                    .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_MAXIMUM = {.infer = infer_arith,
                                    .flops = flops_out,
                                    .reference = ref_max,
                                    .backward = bwd_pow_minmax,
                                    .flags = TG_OPF_ELEMENTWISE,
                                    .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_MINIMUM = {.infer = infer_arith,
                                    .flops = flops_out,
                                    .reference = ref_min,
                                    .backward = bwd_pow_minmax,
                                    .flags = TG_OPF_ELEMENTWISE,
                                    .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_MINMAX_BWD = {.infer = infer_grad3,
                                       .flops = flops_minmax_bwd,
                                       .reference = ref_grad3,
                                       .backward = bwd_grad3,
                                       .flags = TG_OPF_ELEMENTWISE,
                                       .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_SUM_TO = {.infer = infer_sum_to,
                                   .flops = flops_in,
                                   .reference = ref_sum_to,
                                   .backward = bwd_sum_to,
                                   .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_EXPAND = {.infer = infer_expand,
                                   .flops = flops_none,
                                   .reference = ref_expand,
                                   .backward = bwd_expand,
                                   .memory = TG_OP_OWN_STORAGE};
