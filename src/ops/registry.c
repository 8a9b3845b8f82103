/* ops/registry.c - the table of op definitions, indexed by tg_op, and the
 * questions every pass asks of it (tg_op_is_elementwise, the aliasing):
 * each is answered from the op's own tg_op_def. How an op runs is a
 * backend's (backend/dispatch.c). */
#include "ops/op.h"
#include "core/error.h"

#define TG_OP_DECLARE(e, name, family) extern const tg_op_def tg_opdef_##e;
TG_OP_LIST(TG_OP_DECLARE)
#undef TG_OP_DECLARE

static const tg_op_def *const op_table[TG_OP_COUNT] = {
#define TG_OP_ENTRY(e, name, family) [TG_OP_##e] = &tg_opdef_##e,
    TG_OP_LIST(TG_OP_ENTRY)
#undef TG_OP_ENTRY
};
/* Every enum value has a def: the extern above makes a missing tg_opdef_<E>
 * a link error, and the table spans the enum (tests/ops/test_registry.c
 * checks each def's contents). */
_Static_assert(sizeof op_table / sizeof op_table[0] == TG_OP_COUNT,
               "the op table spans tg_op (graph/op_list.h)");

const tg_op_def *tg_op_get(tg_op op)
{
    return (unsigned)op < TG_OP_COUNT ? op_table[op] : NULL;
}

const char *tg_op_name(tg_op op)
{
    static const char *const names[TG_OP_COUNT] = {
#define TG_OP_NAME(e, name, family) [TG_OP_##e] = name,
        TG_OP_LIST(TG_OP_NAME)
#undef TG_OP_NAME
    };
    return (unsigned)op < TG_OP_COUNT ? names[op] : "?";
}

tg_infer_rule tg_op_infer_rule(tg_op op)
{
    const tg_op_def *def = tg_op_get(op);
    return def ? def->infer : NULL;
}

tg_backward_rule tg_op_backward_rule(tg_op op)
{
    const tg_op_def *def = tg_op_get(op);
    return def ? def->backward : NULL;
}

bool tg_op_aliases_input(tg_op op)
{
    const tg_op_def *def = tg_op_get(op);
    return def && def->memory == TG_OP_VIEWS_INPUT;
}

tg_status tg_op_infer_elementwise_grad(tg_tensor *node, const char *inputs, const char *operand)
{
    if (node->n_in != 2)
        return tg_error(TG_ERR_INVALID_ARG, "takes 2 inputs (dy and %s), got %d", inputs,
                        node->n_in);
    for (int k = 0; k < 2; k++)
        if (node->in[k]->dtype != TG_F32)
            return tg_error(TG_ERR_DTYPE, "input %d ('%s') is %s; this op takes f32", k,
                            node->in[k]->name, tg_dtype_name(node->in[k]->dtype));
    if (!tg_shape_equal(node->in[0]->shape, node->in[1]->shape)) {
        char a[96], b[96];
        return tg_error(TG_ERR_SHAPE, "dy %s and %s %s differ in shape",
                        tg_shape_str(node->in[0]->shape, a, sizeof a), operand,
                        tg_shape_str(node->in[1]->shape, b, sizeof b));
    }
    node->dtype = TG_F32;
    node->shape = node->in[0]->shape;
    return TG_OK;
}

bool tg_op_is_elementwise(const tg_tensor *node)
{
    const tg_op_def *def = tg_op_get(node->op);
    if (!def || !(def->flags & TG_OPF_ELEMENTWISE) || node->n_in > TG_ELEMENTWISE_MAX_INPUTS)
        return false;
    for (int k = 0; k < node->n_in; k++)
        if (!tg_shape_equal(node->in[k]->shape, node->shape))
            return false;
    return true;
}

int tg_op_per_channel_full(const tg_tensor *node)
{
    tg_shape y = node->shape;
    if (node->n_in != 2 || y.ndim != 4 || node->in[0]->shape.ndim != 4 ||
        node->in[1]->shape.ndim != 4)
        return -1;
    int full = tg_shape_equal(node->in[0]->shape, y)   ? 0
               : tg_shape_equal(node->in[1]->shape, y) ? 1
                                                       : -1;
    if (full < 0)
        return -1;
    tg_shape s = node->in[1 - full]->shape;
    return s.dim[1] == y.dim[1] && s.dim[2] * s.dim[3] == 1 &&
                   (s.dim[0] == y.dim[0] || s.dim[0] == 1) && !tg_shape_equal(s, y)
               ? full
               : -1;
}

bool tg_op_check_operands(const tg_kernel_args *a, char *msg, size_t cap)
{
    const tg_op_def *def = tg_op_get(a->node->op);
    return !def || !def->check || def->check(a, msg, cap);
}
