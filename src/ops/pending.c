/* ops/pending.c - TEMPORARY weak placeholders so the library links while op
 * families are being written; each family file's strong definition wins.
 * Removed once every family exists. */
#include "ops/op.h"

__attribute__((weak)) const tg_op_def tg_opdef_ENUM = {.name = "name"};
__attribute__((weak)) const tg_op_def tg_opdef_RELU = {.name = "relu"};
__attribute__((weak)) const tg_op_def tg_opdef_RELU_BWD = {.name = "relu_bwd"};
__attribute__((weak)) const tg_op_def tg_opdef_GELU = {.name = "gelu"};
__attribute__((weak)) const tg_op_def tg_opdef_GELU_BWD = {.name = "gelu_bwd"};
__attribute__((weak)) const tg_op_def tg_opdef_SIGMOID = {.name = "sigmoid"};
__attribute__((weak)) const tg_op_def tg_opdef_SIGMOID_BWD = {.name = "sigmoid_bwd"};
__attribute__((weak)) const tg_op_def tg_opdef_TANH = {.name = "tanh"};
__attribute__((weak)) const tg_op_def tg_opdef_TANH_BWD = {.name = "tanh_bwd"};
__attribute__((weak)) const tg_op_def tg_opdef_SCALE = {.name = "scale"};
__attribute__((weak)) const tg_op_def tg_opdef_ADD = {.name = "add"};
__attribute__((weak)) const tg_op_def tg_opdef_SUB = {.name = "sub"};
__attribute__((weak)) const tg_op_def tg_opdef_MUL = {.name = "mul"};
__attribute__((weak)) const tg_op_def tg_opdef_DIV = {.name = "div"};
__attribute__((weak)) const tg_op_def tg_opdef_SUM_TO = {.name = "sum_to"};
__attribute__((weak)) const tg_op_def tg_opdef_EXPAND = {.name = "expand"};
__attribute__((weak)) const tg_op_def tg_opdef_RESHAPE = {.name = "reshape"};
__attribute__((weak)) const tg_op_def tg_opdef_TRANSPOSE = {.name = "transpose"};
__attribute__((weak)) const tg_op_def tg_opdef_CONCAT = {.name = "concat"};
__attribute__((weak)) const tg_op_def tg_opdef_SLICE = {.name = "slice"};
__attribute__((weak)) const tg_op_def tg_opdef_SLICE_BWD = {.name = "slice_bwd"};
__attribute__((weak)) const tg_op_def tg_opdef_REDUCE_SUM = {.name = "reduce_sum"};
__attribute__((weak)) const tg_op_def tg_opdef_MATMUL = {.name = "matmul"};
__attribute__((weak)) const tg_op_def tg_opdef_LINEAR = {.name = "linear"};
__attribute__((weak)) const tg_op_def tg_opdef_CONV2D = {.name = "conv2d"};
__attribute__((weak)) const tg_op_def tg_opdef_CONV2D_BWD_DATA = {.name = "conv2d_bwd_data"};
__attribute__((weak)) const tg_op_def tg_opdef_CONV2D_BWD_WEIGHT = {.name = "conv2d_bwd_weight"};
__attribute__((weak)) const tg_op_def tg_opdef_MAXPOOL2D = {.name = "maxpool2d"};
__attribute__((weak)) const tg_op_def tg_opdef_MAXPOOL2D_BWD = {.name = "maxpool2d_bwd"};
__attribute__((weak)) const tg_op_def tg_opdef_AVGPOOL2D = {.name = "avgpool2d"};
__attribute__((weak)) const tg_op_def tg_opdef_AVGPOOL2D_BWD = {.name = "avgpool2d_bwd"};
__attribute__((weak)) const tg_op_def tg_opdef_SOFTMAX = {.name = "softmax"};
__attribute__((weak)) const tg_op_def tg_opdef_SOFTMAX_BWD = {.name = "softmax_bwd"};
__attribute__((weak)) const tg_op_def tg_opdef_LOG_SOFTMAX = {.name = "log_softmax"};
__attribute__((weak)) const tg_op_def tg_opdef_LOG_SOFTMAX_BWD = {.name = "log_softmax_bwd"};
__attribute__((weak)) const tg_op_def tg_opdef_CROSS_ENTROPY = {.name = "cross_entropy"};
__attribute__((weak)) const tg_op_def tg_opdef_CROSS_ENTROPY_BWD = {.name = "cross_entropy_bwd"};
__attribute__((weak)) const tg_op_def tg_opdef_NLL_LOSS = {.name = "nll_loss"};
__attribute__((weak)) const tg_op_def tg_opdef_NLL_LOSS_BWD = {.name = "nll_loss_bwd"};
__attribute__((weak)) const tg_op_def tg_opdef_MSE_LOSS = {.name = "mse_loss"};
__attribute__((weak)) const tg_op_def tg_opdef_MSE_LOSS_BWD = {.name = "mse_loss_bwd"};
__attribute__((weak)) const tg_op_def tg_opdef_NORM_STATS = {.name = "norm_stats"};
__attribute__((weak)) const tg_op_def tg_opdef_NORM_STATS_BWD = {.name = "norm_stats_bwd"};
__attribute__((weak)) const tg_op_def tg_opdef_NORM_APPLY = {.name = "norm_apply"};
__attribute__((weak)) const tg_op_def tg_opdef_NORM_APPLY_BWD_X = {.name = "norm_apply_bwd_x"};
__attribute__((weak)) const tg_op_def tg_opdef_NORM_APPLY_BWD_STATS = {.name = "norm_apply_bwd_stats"};
__attribute__((weak)) const tg_op_def tg_opdef_NORM_APPLY_BWD_AFFINE = {.name = "norm_apply_bwd_affine"};
__attribute__((weak)) const tg_op_def tg_opdef_RUNNING_STATS_UPDATE = {.name = "running_stats_update"};
__attribute__((weak)) const tg_op_def tg_opdef_DROPOUT = {.name = "dropout"};
__attribute__((weak)) const tg_op_def tg_opdef_SGD_UPDATE = {.name = "sgd_update"};
__attribute__((weak)) const tg_op_def tg_opdef_ADAM_UPDATE = {.name = "adam_update"};
