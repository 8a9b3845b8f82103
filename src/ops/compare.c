/* ops/compare.c - the integer side of a graph: CAST between f32 and i32,
 * comparisons, logic and WHERE, as the exporters emit them for token ids,
 * attention masks and causal masks.
 *
 *   CAST(x)              to = the output dtype (TG_F32 or TG_I32)
 *   COMPARE(a, b)        kind = TG_CMP_*; i32 0/1 out, broadcast
 *   LOGICAL(a[, b])      kind = TG_LOGIC_*; i32 in (non-zero is true), 0/1 out
 *   WHERE(cond, x, y)    cond i32; x, y f32 or i32 of one type; broadcast
 *
 * Booleans are i32 0/1 (ONNX bool arrives so). CAST to i32 truncates toward
 * zero as C and ONNX do, saturating at the int32 range and taking NaN to 0
 * so that no input is undefined behaviour. Integers carry no gradient
 * (autodiff skips them); WHERE's gradient routes dout to x or y by cond.
 */
#include "ops/compare.h"
#include "ops/broadcast.h"

#include "core/error.h"

#include <math.h>
#include <stdint.h>

enum { TG_CMP_EQ, TG_CMP_LT, TG_CMP_LE, TG_CMP_GT, TG_CMP_GE, TG_CMP_COUNT };
enum { TG_LOGIC_AND, TG_LOGIC_OR, TG_LOGIC_XOR, TG_LOGIC_NOT, TG_LOGIC_COUNT };

/* ---- a walk over up to three inputs broadcast to the output --------------------- */

typedef struct walk {
    int ndim;
    int64_t dim[TG_MAX_DIMS];
    int64_t stride[3][TG_MAX_DIMS]; /* element strides, 0 on stretched dims */
    int64_t inner;                  /* dim[ndim - 1] (1 for a scalar output) */
} walk;

static void walk_init(walk *w, tg_shape out, int n_in, const tg_tensor *const *in)
{
    w->ndim = out.ndim;
    for (int d = 0; d < out.ndim; d++)
        w->dim[d] = out.dim[d];
    for (int k = 0; k < n_in; k++) {
        tg_shape s = tg_shape_pad_left(in[k]->shape, out.ndim);
        int64_t st = 1;
        for (int d = out.ndim - 1; d >= 0; d--) {
            w->stride[k][d] = s.dim[d] == 1 ? 0 : st;
            st *= s.dim[d];
        }
    }
    w->inner = out.ndim ? out.dim[out.ndim - 1] : 1;
}

/* Offsets of each input at the start of output row `row` (all dims but the last). */
static void walk_row(const walk *w, int n_in, int64_t row, int64_t *off)
{
    for (int k = 0; k < n_in; k++)
        off[k] = 0;
    for (int d = w->ndim - 2; d >= 0; d--) {
        int64_t i = row % w->dim[d];
        row /= w->dim[d];
        for (int k = 0; k < n_in; k++)
            off[k] += i * w->stride[k][d];
    }
}

static int64_t inner_stride(const walk *w, int k)
{
    return w->ndim ? w->stride[k][w->ndim - 1] : 0;
}

/* ---- shape rules ---------------------------------------------------------------------- */

static tg_status broadcast_all(tg_tensor *node)
{
    tg_shape s = node->in[0]->shape;
    for (int k = 1; k < node->n_in; k++)
        TG_TRY(tg_broadcast_shape(s, node->in[k]->shape, &s));
    node->shape = s;
    return TG_OK;
}

static tg_status need_type(const tg_tensor *node, int k, tg_dtype t, const char *what)
{
    if (node->in[k]->dtype != t)
        return tg_error(TG_ERR_DTYPE, "%s ('%s') is %s, expected %s", what, node->in[k]->name,
                        tg_dtype_name(node->in[k]->dtype), tg_dtype_name(t));
    return TG_OK;
}

static bool numeric(tg_dtype t)
{
    return t == TG_F32 || t == TG_I32;
}

static tg_status infer_cast(tg_tensor *node)
{
    tg_dtype from = node->in[0]->dtype, to = (tg_dtype)tg_cast_to(node);
    if (node->n_in != 1 || !numeric(from) || !numeric(to))
        return tg_error(TG_ERR_DTYPE, "casts between f32 and i32 (got %s to %s)",
                        tg_dtype_name(from), numeric(to) ? tg_dtype_name(to) : "?");
    node->dtype = to;
    node->shape = node->in[0]->shape;
    return TG_OK;
}

static tg_status infer_compare(tg_tensor *node)
{
    if (node->n_in != 2 || tg_compare_kind(node) < 0 || tg_compare_kind(node) >= TG_CMP_COUNT)
        return tg_error(TG_ERR_INVALID_ARG, "a comparison takes 2 inputs and a kind");
    if (!numeric(node->in[0]->dtype))
        return tg_error(TG_ERR_DTYPE, "compares f32 or i32, not %s",
                        tg_dtype_name(node->in[0]->dtype));
    TG_TRY(need_type(node, 1, node->in[0]->dtype, "the second operand"));
    node->dtype = TG_I32;
    return broadcast_all(node);
}

static tg_status infer_logical(tg_tensor *node)
{
    bool unary = tg_compare_kind(node) == TG_LOGIC_NOT;
    if (tg_compare_kind(node) < 0 || tg_compare_kind(node) >= TG_LOGIC_COUNT ||
        node->n_in != (unary ? 1 : 2))
        return tg_error(TG_ERR_INVALID_ARG, "logic takes 2 inputs (1 for not) and a kind");
    for (int k = 0; k < node->n_in; k++)
        TG_TRY(need_type(node, k, TG_I32, "a boolean operand"));
    node->dtype = TG_I32;
    return broadcast_all(node);
}

static tg_status infer_where(tg_tensor *node)
{
    if (node->n_in != 3)
        return tg_error(TG_ERR_INVALID_ARG, "takes 3 inputs (cond, x, y), got %d", node->n_in);
    TG_TRY(need_type(node, 0, TG_I32, "the condition"));
    if (!numeric(node->in[1]->dtype))
        return tg_error(TG_ERR_DTYPE, "selects f32 or i32, not %s",
                        tg_dtype_name(node->in[1]->dtype));
    TG_TRY(need_type(node, 2, node->in[1]->dtype, "y"));
    node->dtype = node->in[1]->dtype;
    return broadcast_all(node);
}

static double flops_per_element(const tg_tensor *node)
{
    return (double)tg_numel(node);
}

/* ---- kernels ------------------------------------------------------------------------- */

static inline int32_t to_i32(double v)
{
    if (!(v == v))
        return 0;
    if (v >= 2147483647.0)
        return INT32_MAX;
    if (v <= -2147483648.0)
        return INT32_MIN;
    return (int32_t)v; /* truncates toward zero */
}

static inline double fetch(const void *p, tg_dtype t, int64_t k)
{
    return t == TG_I32 ? (double)((const int32_t *)p)[k] : (double)((const float *)p)[k];
}

static void cast_range(void *ctx, int64_t begin, int64_t end, int part)
{
    const tg_kernel_args *a = ctx;
    tg_dtype from = a->node->in[0]->dtype;
    if (a->node->dtype == TG_I32) {
        for (int64_t k = begin; k < end; k++)
            ((int32_t *)a->out)[k] = to_i32(fetch(a->in[0], from, k));
    } else {
        for (int64_t k = begin; k < end; k++)
            ((float *)a->out)[k] = (float)fetch(a->in[0], from, k);
    }
    (void)part;
}

static void fwd_cast(const tg_kernel_args *a)
{
    tg_par_for(a->pool, tg_numel(a->node), tg_numel(a->node), cast_range, (void *)a);
}

static void ref_cast(const tg_ref_args *a)
{
    bool to_int = a->node->dtype == TG_I32;
    for (int64_t k = 0; k < tg_numel(a->node); k++)
        a->out[k] = to_int ? (double)to_i32(a->in[0][k]) : (double)(float)a->in[0][k];
}

static inline bool compare_one(int kind, double x, double y)
{
    switch (kind) {
    case TG_CMP_EQ:
        return x == y;
    case TG_CMP_LT:
        return x < y;
    case TG_CMP_LE:
        return x <= y;
    case TG_CMP_GT:
        return x > y;
    case TG_CMP_GE:
        return x >= y;
    default:
        TG_UNREACHABLE("comparison", kind);
    }
}

static inline bool logic_one(int kind, bool x, bool y)
{
    switch (kind) {
    case TG_LOGIC_AND:
        return x && y;
    case TG_LOGIC_OR:
        return x || y;
    case TG_LOGIC_XOR:
        return x != y;
    case TG_LOGIC_NOT:
        return !x;
    default:
        TG_UNREACHABLE("logical op", kind);
    }
}

/* One output value from the inputs' values at offsets off (in double: exact
 * for every f32 and i32 operand, so the fast and reference kernels agree). */
static double element(const tg_tensor *node, const double *v)
{
    switch (node->op) {
    case TG_OP_COMPARE:
        return compare_one((int)tg_compare_kind(node), v[0], v[1]);
    case TG_OP_LOGICAL:
        return logic_one((int)tg_compare_kind(node), v[0] != 0, node->n_in > 1 && v[1] != 0);
    case TG_OP_WHERE:
        return v[0] != 0 ? v[1] : v[2];
    default:
        TG_UNREACHABLE_OP(node->op);
    }
}

typedef struct select_job {
    const tg_kernel_args *a;
    walk w;
} select_job;

static void select_rows(void *ctx, int64_t begin, int64_t end, int part)
{
    const select_job *j = ctx;
    const tg_tensor *node = j->a->node;
    int n = node->n_in;
    int64_t st[3];
    for (int k = 0; k < n; k++)
        st[k] = inner_stride(&j->w, k);
    for (int64_t r = begin; r < end; r++) {
        int64_t off[3];
        walk_row(&j->w, n, r, off);
        for (int64_t c = 0; c < j->w.inner; c++) {
            double v[3];
            for (int k = 0; k < n; k++)
                v[k] = fetch(j->a->in[k], node->in[k]->dtype, off[k] + c * st[k]);
            double y = element(node, v);
            int64_t at = r * j->w.inner + c;
            if (node->dtype == TG_I32)
                ((int32_t *)j->a->out)[at] = (int32_t)y;
            else
                ((float *)j->a->out)[at] = (float)y;
        }
    }
    (void)part;
}

static void fwd_select(const tg_kernel_args *a)
{
    select_job j = {a, {0}};
    walk_init(&j.w, a->node->shape, a->node->n_in, (const tg_tensor *const *)a->node->in);
    int64_t rows = j.w.inner ? tg_numel(a->node) / j.w.inner : 0;
    tg_par_for(a->pool, rows, tg_numel(a->node), select_rows, &j);
}

static void ref_select(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    for (int64_t k = 0; k < tg_numel(node); k++) {
        double v[3];
        for (int i = 0; i < node->n_in; i++)
            v[i] = a->in[i][tg_bcast_ref_offset(node->shape, node->in[i]->shape, k)];
        a->out[k] = element(node, v);
    }
}

/* dx = where(cond, dout, 0) summed down to x's shape; dy likewise with 0 and dout. */
static tg_status bwd_where(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                           tg_tensor **din)
{
    tg_tensor *zero = tg_constant(g, tg_shape_of(0, NULL), 0.0f);
    if (need[1])
        din[1] = tg_sum_to(g, tg_where(g, node->in[0], dout, zero), node->in[1]->shape);
    if (need[2])
        din[2] = tg_sum_to(g, tg_where(g, node->in[0], zero, dout), node->in[2]->shape);
    return TG_OK;
}

/* ---- builders ------------------------------------------------------------------------ */

tg_tensor *tg_cast(tg_graph *g, tg_tensor *x, tg_dtype to)
{
    if (x && x->dtype == to)
        return x;
    if (x && x->dtype == TG_U8) /* bytes: their values in f32 first */
        x = tg_cast_u8(g, x);
    if (x && x->dtype == to)
        return x;
    tg_node_params p = {{0}, {0}};
    tg_cast_set_to(&p, to);
    return tg_node_create(g, TG_OP_CAST, 1, &x, &p);
}

static tg_tensor *make(tg_graph *g, tg_op op, int kind, int n, tg_tensor *a, tg_tensor *b)
{
    tg_node_params p = {{0}, {0}};
    tg_compare_set_kind(&p, kind);
    tg_tensor *in[2] = {a, b};
    return tg_node_create(g, op, n, in, &p);
}

tg_tensor *tg_equal(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return make(g, TG_OP_COMPARE, TG_CMP_EQ, 2, a, b);
}
tg_tensor *tg_less(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return make(g, TG_OP_COMPARE, TG_CMP_LT, 2, a, b);
}
tg_tensor *tg_less_equal(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return make(g, TG_OP_COMPARE, TG_CMP_LE, 2, a, b);
}
tg_tensor *tg_greater(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return make(g, TG_OP_COMPARE, TG_CMP_GT, 2, a, b);
}
tg_tensor *tg_greater_equal(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return make(g, TG_OP_COMPARE, TG_CMP_GE, 2, a, b);
}
tg_tensor *tg_logical_and(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return make(g, TG_OP_LOGICAL, TG_LOGIC_AND, 2, a, b);
}
tg_tensor *tg_logical_or(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return make(g, TG_OP_LOGICAL, TG_LOGIC_OR, 2, a, b);
}
tg_tensor *tg_logical_xor(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return make(g, TG_OP_LOGICAL, TG_LOGIC_XOR, 2, a, b);
}
tg_tensor *tg_logical_not(tg_graph *g, tg_tensor *a)
{
    return make(g, TG_OP_LOGICAL, TG_LOGIC_NOT, 1, a, NULL);
}

tg_tensor *tg_where(tg_graph *g, tg_tensor *cond, tg_tensor *x, tg_tensor *y)
{
    tg_node_params p = {{0}, {0}};
    tg_tensor *in[3] = {cond, x, y};
    return tg_node_create(g, TG_OP_WHERE, 3, in, &p);
}

const tg_op_def tg_opdef_CAST = {.infer = infer_cast,
                                 .flops = flops_per_element,
                                 .reference = ref_cast,
                                 .memory = TG_OP_OWN_STORAGE};
const tg_kernel_def tg_cpu_kernel_CAST = {.forward = fwd_cast};
const tg_op_def tg_opdef_COMPARE = {.infer = infer_compare,
                                    .flops = flops_per_element,
                                    .reference = ref_select,
                                    .memory = TG_OP_OWN_STORAGE};
const tg_kernel_def tg_cpu_kernel_COMPARE = {.forward = fwd_select};
const tg_op_def tg_opdef_LOGICAL = {.infer = infer_logical,
                                    .flops = flops_per_element,
                                    .reference = ref_select,
                                    .memory = TG_OP_OWN_STORAGE};
const tg_kernel_def tg_cpu_kernel_LOGICAL = {.forward = fwd_select};
const tg_op_def tg_opdef_WHERE = {.infer = infer_where,
                                  .flops = flops_per_element,
                                  .reference = ref_select,
                                  .backward = bwd_where,
                                  .memory = TG_OP_OWN_STORAGE};
const tg_kernel_def tg_cpu_kernel_WHERE = {.forward = fwd_select};
