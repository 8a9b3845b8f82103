/* ops/registry.c - the table of op definitions, indexed by tg_op. */
#include "ops/blocked.h"
#include "core/error.h"

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
extern const tg_op_planner tg_matmul_planner;

static const tg_op_planner *const planners[TG_OP_COUNT] = {
    [TG_OP_CONV2D] = &tg_conv_planner,
    [TG_OP_CONV2D_BWD_DATA] = &tg_conv_planner,
    [TG_OP_CONV2D_BWD_WEIGHT] = &tg_conv_planner,
    [TG_OP_MATMUL] = &tg_matmul_planner,
    [TG_OP_LINEAR] = &tg_matmul_planner,
};

const tg_op_planner *tg_op_planner_get(tg_op op)
{
    return (unsigned)op < TG_OP_COUNT ? planners[op] : NULL;
}

/* Element-wise ops whose kernels apply one formula per element with no
 * position in it. */
static bool elementwise_anywhere(tg_op op)
{
    switch (op) {
    case TG_OP_RELU:
    case TG_OP_RELU_BWD:
    case TG_OP_LEAKY_RELU:
    case TG_OP_LEAKY_RELU_BWD:
    case TG_OP_CLIP:
    case TG_OP_CLIP_BWD:
    case TG_OP_ACTIVATION:
    case TG_OP_ACTIVATION_BWD:
    case TG_OP_SCALE:
    case TG_OP_NEG:
    case TG_OP_GELU:
    case TG_OP_GELU_BWD:
    case TG_OP_SIGMOID:
    case TG_OP_SIGMOID_BWD:
    case TG_OP_TANH:
    case TG_OP_TANH_BWD:
    case TG_OP_ADD:
    case TG_OP_SUB:
    case TG_OP_MUL:
    case TG_OP_DIV:
    case TG_OP_MAXIMUM:
    case TG_OP_MINIMUM:
        return true;
    default:
        return false;
    }
}

/* One of the six ops of batch norm over a 4-D x (ops/norm.c: mode 0). */
static bool is_batch_norm_4d(const tg_tensor *node)
{
    switch (node->op) {
    case TG_OP_NORM_STATS:
    case TG_OP_NORM_STATS_BWD:
    case TG_OP_NORM_APPLY:
    case TG_OP_NORM_APPLY_BWD_X:
    case TG_OP_NORM_APPLY_BWD_STATS:
    case TG_OP_NORM_APPLY_BWD_AFFINE: {
        const tg_tensor *x = node->op == TG_OP_NORM_STATS_BWD ? node->in[1] : node->in[0];
        return node->p.i[0] == 0 && x->shape.ndim == 4;
    }
    default:
        return false;
    }
}

bool tg_blocked_kernel_exists(const tg_tensor *node)
{
    if (is_batch_norm_4d(node))
        return true;
    switch (node->op) {
    case TG_OP_MAXPOOL2D:
    case TG_OP_MAXPOOL2D_BWD:
    case TG_OP_AVGPOOL2D:
    case TG_OP_AVGPOOL2D_BWD:
        return true;
    default:
        break;
    }
    return tg_op_is_elementwise(node);
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
    if (!elementwise_anywhere(node->op) || node->n_in > TG_ELEMENTWISE_MAX_INPUTS)
        return false;
    for (int k = 0; k < node->n_in; k++)
        if (!tg_shape_equal(node->in[k]->shape, node->shape))
            return false;
    return true;
}

bool tg_op_reads_bf16(const tg_tensor *node, bool blocked)
{
    return (blocked && is_batch_norm_4d(node)) || tg_elementwise_bf16_supported(node) ||
           tg_op_update_reads_bf16(node);
}
