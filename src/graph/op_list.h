/* graph/op_list.h - every op kind, one line each: X(ENUM, "name", family).
 *
 * The family is the file under src/ops/ that defines tg_opdef_<ENUM>, the
 * op's one description (ops/op.h: shape rule, FLOPs, kernels, gradient rule,
 * memory, flags, cost kind, plan hooks); ops/registry.c declares a def for
 * every line, so a line without one does not link. Backward ops are ordinary
 * ops and are listed here too.
 *
 * It lives in graph/ because a node names its op kind: the graph layer needs the
 * enum, the op table (src/ops, the layer above) needs the whole list.
 */
#ifndef TG_GRAPH_OP_LIST_H
#define TG_GRAPH_OP_LIST_H

#define TG_OP_LIST(X)                                                                              \
    /* leaves: no kernel, data comes from the host or the initialiser */                           \
    X(INPUT, "input", leaf)                                                                        \
    X(PARAM, "param", leaf)                                                                        \
    X(STATE, "state", leaf)                                                                        \
    X(CONSTANT, "constant", leaf)                                                                  \
    /* elementwise */                                                                              \
    X(RELU, "relu", unary)                                                                         \
    X(RELU_BWD, "relu_bwd", unary)                                                                 \
    X(GELU, "gelu", unary)                                                                         \
    X(GELU_BWD, "gelu_bwd", unary)                                                                 \
    X(SIGMOID, "sigmoid", unary)                                                                   \
    X(SIGMOID_BWD, "sigmoid_bwd", unary)                                                           \
    X(TANH, "tanh", unary)                                                                         \
    X(TANH_BWD, "tanh_bwd", unary)                                                                 \
    X(SCALE, "scale", unary)                                                                       \
    X(ERF, "erf", unary)                                                                           \
    X(ERF_BWD, "erf_bwd", unary)                                                                   \
    X(EXP, "exp", unary)                                                                           \
    X(LOG, "log", unary)                                                                           \
    X(SQRT, "sqrt", unary)                                                                         \
    X(NEG, "neg", unary)                                                                           \
    X(ROUND_HALF, "round_half", unary)                                                             \
    X(ABS, "abs", unary)                                                                           \
    X(ABS_BWD, "abs_bwd", unary)                                                                   \
    X(RECIPROCAL, "reciprocal", unary)                                                             \
    X(LEAKY_RELU, "leaky_relu", unary)                                                             \
    X(LEAKY_RELU_BWD, "leaky_relu_bwd", unary)                                                     \
    X(CLIP, "clip", unary)                                                                         \
    X(CLIP_BWD, "clip_bwd", unary)                                                                 \
    X(ACTIVATION, "activation", activation)                                                        \
    X(ACTIVATION_BWD, "activation_bwd", activation)                                                \
    X(ADD, "add", binary)                                                                          \
    X(SUB, "sub", binary)                                                                          \
    X(MUL, "mul", binary)                                                                          \
    X(DIV, "div", binary)                                                                          \
    X(POW, "pow", binary)                                                                          \
    X(POW_BWD, "pow_bwd", binary)                                                                  \
    X(MAXIMUM, "maximum", binary)                                                                  \
    X(MINIMUM, "minimum", binary)                                                                  \
    X(MINMAX_BWD, "minmax_bwd", binary)                                                            \
    X(SUM_TO, "sum_to", binary)                                                                    \
    X(EXPAND, "expand", binary)                                                                    \
    /* shape */                                                                                    \
    X(RESHAPE, "reshape", shape)                                                                   \
    X(TRANSPOSE, "transpose", shape)                                                               \
    X(CONCAT, "concat", shape)                                                                     \
    X(SLICE, "slice", shape)                                                                       \
    X(SLICE_BWD, "slice_bwd", shape)                                                               \
    X(SLICE_STEP, "slice_step", slice_step)                                                        \
    X(SLICE_STEP_BWD, "slice_step_bwd", slice_step)                                                \
    X(REDUCE_SUM, "reduce_sum", shape)                                                             \
    X(REDUCE_MAX, "reduce_max", reduce_minmax)                                                     \
    X(REDUCE_MIN, "reduce_min", reduce_minmax)                                                     \
    X(REDUCE_MINMAX_BWD, "reduce_minmax_bwd", reduce_minmax)                                       \
    X(PAD, "pad", pad)                                                                             \
    X(PAD_BWD, "pad_bwd", pad)                                                                     \
    X(RESIZE, "resize", resize)                                                                    \
    X(RESIZE_BWD, "resize_bwd", resize)                                                            \
    X(REVERSE_SEQUENCE, "reverse_sequence", reverse_sequence)                                      \
    /* indices and integers */                                                                     \
    X(GATHER, "gather", gather)                                                                    \
    X(GATHER_BWD, "gather_bwd", gather)                                                            \
    X(CAST, "cast", compare)                                                                       \
    X(COMPARE, "compare", compare)                                                                 \
    X(LOGICAL, "logical", compare)                                                                 \
    X(WHERE, "where", compare)                                                                     \
    /* dense */                                                                                    \
    X(MATMUL, "matmul", matmul)                                                                    \
    X(LINEAR, "linear", matmul)                                                                    \
    X(CONV2D, "conv2d", conv)                                                                      \
    X(CONV2D_BWD_DATA, "conv2d_bwd_data", conv)                                                    \
    X(CONV2D_BWD_WEIGHT, "conv2d_bwd_weight", conv)                                                \
    X(MAXPOOL2D, "maxpool2d", pool)                                                                \
    X(MAXPOOL2D_BWD, "maxpool2d_bwd", pool)                                                        \
    X(AVGPOOL2D, "avgpool2d", pool)                                                                \
    X(AVGPOOL2D_BWD, "avgpool2d_bwd", pool)                                                        \
    /* softmax and losses */                                                                       \
    X(SOFTMAX, "softmax", softmax)                                                                 \
    X(SOFTMAX_BWD, "softmax_bwd", softmax)                                                         \
    X(LOG_SOFTMAX, "log_softmax", softmax)                                                         \
    X(LOG_SOFTMAX_BWD, "log_softmax_bwd", softmax)                                                 \
    X(CROSS_ENTROPY, "cross_entropy", loss)                                                        \
    X(CROSS_ENTROPY_BWD, "cross_entropy_bwd", loss)                                                \
    X(NLL_LOSS, "nll_loss", loss)                                                                  \
    X(NLL_LOSS_BWD, "nll_loss_bwd", loss)                                                          \
    X(MSE_LOSS, "mse_loss", loss)                                                                  \
    X(MSE_LOSS_BWD, "mse_loss_bwd", loss)                                                          \
    /* normalisation: statistics and the normalisation are separate ops, so */                     \
    /* batch norm's running update and the backward pass share the stats */                        \
    X(NORM_STATS, "norm_stats", norm)                                                              \
    X(NORM_STATS_BWD, "norm_stats_bwd", norm)                                                      \
    X(NORM_APPLY, "norm_apply", norm)                                                              \
    X(NORM_APPLY_BWD_X, "norm_apply_bwd_x", norm)                                                  \
    X(NORM_APPLY_BWD_STATS, "norm_apply_bwd_stats", norm)                                          \
    X(NORM_APPLY_BWD_AFFINE, "norm_apply_bwd_affine", norm)                                        \
    X(RUNNING_STATS_UPDATE, "running_stats_update", norm)                                          \
    X(DROPOUT, "dropout", dropout)                                                                 \
    X(RANDOM_UNIFORM, "random_uniform", random)                                                    \
    X(NORMALIZE_U8, "normalize_u8", normalize)                                                     \
    /* optimizer updates: mutate their first inputs, output nothing */                             \
    X(SGD_UPDATE, "sgd_update", optim)                                                             \
    X(ADAM_UPDATE, "adam_update", optim)

typedef enum tg_op {
#define TG_OP_ENUM(e, name, family) TG_OP_##e,
    TG_OP_LIST(TG_OP_ENUM)
#undef TG_OP_ENUM
        TG_OP_COUNT
} tg_op;

#endif
