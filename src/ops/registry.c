/* ops/registry.c - the table of op definitions, indexed by tg_op. */
#include "ops/op.h"

#define TG_OP_DECLARE(e, name, family) extern const tg_op_def tg_opdef_##e;
TG_OP_LIST(TG_OP_DECLARE)
#undef TG_OP_DECLARE

static const tg_op_def *const op_table[TG_OP_COUNT] = {
#define TG_OP_ENTRY(e, name, family) [TG_OP_##e] = &tg_opdef_##e,
    TG_OP_LIST(TG_OP_ENTRY)
#undef TG_OP_ENTRY
};

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

/* The ops with plan hooks (op.h). */
extern const tg_op_planner tg_conv_planner;

static const tg_op_planner *const planners[TG_OP_COUNT] = {
    [TG_OP_CONV2D] = &tg_conv_planner,
    [TG_OP_CONV2D_BWD_DATA] = &tg_conv_planner,
    [TG_OP_CONV2D_BWD_WEIGHT] = &tg_conv_planner,
};

const tg_op_planner *tg_op_planner_get(tg_op op)
{
    return (unsigned)op < TG_OP_COUNT ? planners[op] : NULL;
}
