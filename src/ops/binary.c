/* ops/binary.c - elementwise ADD, SUB, MUL, DIV with NumPy broadcasting,
 * and the two ops that move between broadcast shapes: SUM_TO (sum down to
 * a smaller broadcast-compatible shape: the gradient of a broadcast) and
 * EXPAND (broadcast up to a larger shape: the gradient of SUM_TO).
 *
 * Params: SUM_TO and EXPAND keep their target shape in p.i[0..] (see
 * tg_params_put_shape). The arithmetic ops have none.
 *
 * Fast kernels view the inputs through a merged strided view (tg_bcast), so
 * the common cases reduce to one inner loop over contiguous memory: same
 * shape (one dimension, both strides 1), scalar operand (stride 0) and row
 * broadcast such as a bias add [N, K] + [K] (rows of K with the bias at
 * stride 1). Anything else walks the view one inner run at a time.
 */
#include "ops/broadcast.h"

#include "core/error.h"

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

static tg_status infer_sum_to(tg_tensor *node)
{
    if (node->n_in != 1)
        return tg_error(TG_ERR_INVALID_ARG, "takes 1 input, got %d", node->n_in);
    TG_TRY(need_f32(node, 0));
    TG_TRY(tg_params_check_shape(&node->p, 0));
    tg_shape to = tg_params_get_shape(&node->p, 0), from = node->in[0]->shape;
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
    TG_TRY(tg_params_check_shape(&node->p, 0));
    tg_shape to = tg_params_get_shape(&node->p, 0), from = node->in[0]->shape;
    if (!tg_broadcasts_to(from, to)) {
        char a[96], b[96];
        return tg_error(TG_ERR_SHAPE, "cannot expand %s to %s", tg_shape_str(from, a, sizeof a),
                        tg_shape_str(to, b, sizeof b));
    }
    node->dtype = TG_F32;
    node->shape = to;
    return TG_OK;
}

static double flops_out(const tg_tensor *node) { return (double)tg_numel(node); }
static double flops_in(const tg_tensor *node) { return (double)tg_numel(node->in[0]); }
static double flops_none(const tg_tensor *node) { return 0; }

/* ---- fast kernels ------------------------------------------------------------------ */

typedef enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_COPY } arith;

typedef struct arith_job {
    arith op;
    tg_bcast bc;
    const float *a, *b;
    float *out;
} arith_job;

/* One inner run of n outputs. On the innermost merged dim a contiguous
 * input has stride 1 or 0 (stretched), so three patterns cover every case
 * and each gets its own loop, which the compiler vectorises. */
#define RUN_LOOPS(EXPR)                                                 \
    do {                                                                \
        if (sa == 1 && sb == 1)                                         \
            for (int64_t q = 0; q < n; q++) {                           \
                float x = a[q], y = b[q];                               \
                o[q] = EXPR;                                            \
            }                                                           \
        else if (sa == 1 && sb == 0) {                                  \
            float y = b[0];                                             \
            for (int64_t q = 0; q < n; q++) {                           \
                float x = a[q];                                         \
                o[q] = EXPR;                                            \
            }                                                           \
        } else if (sa == 0 && sb == 1) {                                \
            float x = a[0];                                             \
            for (int64_t q = 0; q < n; q++) {                           \
                float y = b[q];                                         \
                o[q] = EXPR;                                            \
            }                                                           \
        } else /* both stretched: cannot happen, kept as a safe net */ \
            for (int64_t q = 0; q < n; q++) {                           \
                float x = a[q * sa], y = b[q * sb];                     \
                o[q] = EXPR;                                            \
            }                                                           \
    } while (0)

static void run_inner(arith op, const float *a, int64_t sa, const float *b, int64_t sb, float *o,
                      int64_t n)
{
    switch (op) {
    case OP_ADD: RUN_LOOPS(x + y); break;
    case OP_SUB: RUN_LOOPS(x - y); break;
    case OP_MUL: RUN_LOOPS(x * y); break;
    case OP_DIV: RUN_LOOPS(x / y); break;
    case OP_COPY: RUN_LOOPS(((void)y, x)); break;
    }
}

static void arith_range(void *ctx, int64_t begin, int64_t end, int t)
{
    const arith_job *j = ctx;
    const tg_bcast *bc = &j->bc;
    int last = bc->ndim - 1;
    int64_t inner = bc->dim[last];
    for (int64_t k = begin; k < end;) {
        int64_t i = k % inner, n = inner - i < end - k ? inner - i : end - k;
        int64_t off[2];
        tg_bcast_offsets(bc, k, off);
        run_inner(j->op, j->a + off[0], bc->stride[0][last], j->b + off[1], bc->stride[1][last],
                  j->out + k, n);
        k += n;
    }
}

static void arith_forward(const tg_kernel_args *a, arith op)
{
    const tg_tensor *node = a->node;
    arith_job j = {.op = op, .a = a->in[0], .out = a->out};
    tg_shape ins[2] = {node->in[0]->shape, op == OP_COPY ? node->in[0]->shape : node->in[1]->shape};
    j.b = op == OP_COPY ? a->in[0] : a->in[1];
    tg_bcast_init(&j.bc, node->shape, 2, ins);
    int64_t n = tg_numel(node);
    tg_par_for(a->pool, n, n, arith_range, &j);
}

static void fwd_add(const tg_kernel_args *a) { arith_forward(a, OP_ADD); }
static void fwd_sub(const tg_kernel_args *a) { arith_forward(a, OP_SUB); }
static void fwd_mul(const tg_kernel_args *a) { arith_forward(a, OP_MUL); }
static void fwd_div(const tg_kernel_args *a) { arith_forward(a, OP_DIV); }
static void fwd_expand(const tg_kernel_args *a) { arith_forward(a, OP_COPY); }

static void fwd_sum_to(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    tg_shape in = node->in[0]->shape;
    tg_sum_f32(a->pool, in, tg_shape_pad_left(node->shape, in.ndim), a->in[0], a->out);
}

/* ---- reference kernels ---------------------------------------------------------------- */

static void arith_ref(const tg_ref_args *a, arith op)
{
    const tg_tensor *node = a->node;
    tg_shape sa = node->in[0]->shape, sb = op == OP_COPY ? sa : node->in[1]->shape;
    const double *x = a->in[0], *y = op == OP_COPY ? a->in[0] : a->in[1];
    int64_t n = tg_numel(node);
    for (int64_t k = 0; k < n; k++) {
        double u = x[tg_bcast_ref_offset(node->shape, sa, k)];
        double v = y[tg_bcast_ref_offset(node->shape, sb, k)];
        switch (op) {
        case OP_ADD: a->out[k] = u + v; break;
        case OP_SUB: a->out[k] = u - v; break;
        case OP_MUL: a->out[k] = u * v; break;
        case OP_DIV: a->out[k] = u / v; break;
        case OP_COPY: a->out[k] = u; break;
        }
    }
}

static void ref_add(const tg_ref_args *a) { arith_ref(a, OP_ADD); }
static void ref_sub(const tg_ref_args *a) { arith_ref(a, OP_SUB); }
static void ref_mul(const tg_ref_args *a) { arith_ref(a, OP_MUL); }
static void ref_div(const tg_ref_args *a) { arith_ref(a, OP_DIV); }
static void ref_expand(const tg_ref_args *a) { arith_ref(a, OP_COPY); }

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

static tg_tensor *shape_op(tg_graph *g, tg_op op, tg_tensor *x, tg_shape shape)
{
    if (x && tg_shape_equal(x->shape, shape))
        return x;
    tg_node_params p = {0};
    tg_params_put_shape(&p, 0, shape);
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

const tg_op_def tg_opdef_ADD = {"add", infer_arith, flops_out, NULL, fwd_add, ref_add, bwd_add_sub};
const tg_op_def tg_opdef_SUB = {"sub", infer_arith, flops_out, NULL, fwd_sub, ref_sub, bwd_add_sub};
const tg_op_def tg_opdef_MUL = {"mul", infer_arith, flops_out, NULL, fwd_mul, ref_mul, bwd_mul};
const tg_op_def tg_opdef_DIV = {"div", infer_arith, flops_out, NULL, fwd_div, ref_div, bwd_div};
const tg_op_def tg_opdef_SUM_TO = {"sum_to",   infer_sum_to, flops_in, NULL,
                                   fwd_sum_to, ref_sum_to,   bwd_sum_to};
const tg_op_def tg_opdef_EXPAND = {"expand",   infer_expand, flops_none, NULL,
                                   fwd_expand, ref_expand,   bwd_expand};
