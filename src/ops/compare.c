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

/* ---- reference kernels ----------------------------------------------------------------- */

static void ref_cast(const tg_ref_args *a)
{
    bool to_int = a->node->dtype == TG_I32;
    for (int64_t k = 0; k < tg_numel(a->node); k++)
        a->out[k] = to_int ? (double)tg_to_i32(a->in[0][k]) : (double)(float)a->in[0][k];
}

static void ref_select(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    for (int64_t k = 0; k < tg_numel(node); k++) {
        double v[3];
        for (int i = 0; i < node->n_in; i++)
            v[i] = a->in[i][tg_bcast_ref_offset(node->shape, node->in[i]->shape, k)];
        a->out[k] = tg_compare_element(node, v);
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
const tg_op_def tg_opdef_COMPARE = {.infer = infer_compare,
                                    .flops = flops_per_element,
                                    .reference = ref_select,
                                    .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_LOGICAL = {.infer = infer_logical,
                                    .flops = flops_per_element,
                                    .reference = ref_select,
                                    .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_WHERE = {.infer = infer_where,
                                  .flops = flops_per_element,
                                  .reference = ref_select,
                                  .backward = bwd_where,
                                  .memory = TG_OP_OWN_STORAGE};
