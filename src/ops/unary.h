/* ops/unary.h - the params of the element-wise function ops (ops/unary.c,
 * ops/activation.c) and of softmax (ops/softmax.c), named once here. */
#ifndef TG_OPS_UNARY_H
#define TG_OPS_UNARY_H

#include "ops/op.h"

/* unary.c's two float params, which its kernels read as the pair (s, b):
 * SCALE: x * scale + shift; LEAKY_RELU(_BWD): s = alpha; CLIP(_BWD): s =
 * min, b = max (+-infinity for no bound). A backward op keeps its forward
 * op's pair. */
TG_PARAM_F(unary, s, 0)
TG_PARAM_F(unary, b, 1)
/* GELU_BWD computes dy * gelu^(order+1)(x): order 0 is the gradient of gelu,
 * order 1 exists so that GELU_BWD itself has a gradient rule. */
TG_PARAM_I(gelu, order, 0)
/* GELU and GELU_BWD: 0 for the exact x Phi(x), 1 for the tanh approximation. */
TG_PARAM_I(gelu, form, 1)
/* ROUND_HALF: TG_F16 or TG_BF16, the type whose values it rounds to. */
TG_PARAM_I(round_half, to, 0)

/* ACTIVATION(_BWD) (activation.c): the function (tg_act) and its two
 * float params (alpha, beta, ...: see activation.c). */
TG_PARAM_I(act, fn, 0)
TG_PARAM_F(act, a, 0)
TG_PARAM_F(act, b, 1)

/* ACTIVATION's functions, which its reference and every backend's kernel
 * name alike. */
typedef enum tg_act {
    TG_ACT_HARD_SIGMOID,
    TG_ACT_HARD_SWISH,
    TG_ACT_SILU,
    TG_ACT_MISH,
    TG_ACT_ELU,
    TG_ACT_CELU,
    TG_ACT_SELU,
    TG_ACT_SOFTPLUS,
    TG_ACT_SOFTSIGN,
    TG_ACT_SIGN,
    TG_ACT_FLOOR,
    TG_ACT_CEIL,
    TG_ACT_ROUND,
    TG_ACT_COS,
    TG_ACT_SIN,
    TG_ACT_TAN,
    TG_ACT_ACOS,
    TG_ACT_ASIN,
    TG_ACT_ATAN,
    TG_ACT_ACOSH,
    TG_ACT_ASINH,
    TG_ACT_ATANH,
    TG_ACT_COSH,
    TG_ACT_SINH,
    TG_ACT_THRESHOLDED_RELU,
    TG_ACT_SHRINK,
    TG_ACT_COUNT
} tg_act;
/* Whether node is an ACTIVATION computing hard swish, or hard sigmoid
 * (alpha x + beta clipped to [0, 1]: act_a, act_b): the functions oneDNN
 * applies as a convolution's post-op (compile/fuse.c). */
bool tg_is_hard_swish(const tg_tensor *node);
bool tg_is_hard_sigmoid(const tg_tensor *node);

/* SOFTMAX, LOG_SOFTMAX and their gradients: the axis (stored normalised
 * to >= 0 by the shape rule). */
TG_PARAM_I(softmax, axis, 0)

/* A softmax node seen as [outer, len, inner] around its axis: a lane is one
 * (outer, inner) pair, len elements `inner` apart (ops/softmax.c; the cpu
 * backend's kernels, backend/cpu/softmax_kernels.c, run lane by lane). */
typedef struct tg_softmax_lanes {
    int64_t outer, len, inner;
} tg_softmax_lanes;
tg_softmax_lanes tg_softmax_lanes_of(const tg_tensor *node);

/* What the family's reference and the cpu backend's kernel
 * (backend/cpu/unary_kernels.c) share: GELU's second derivative in its
 * tanh form, and x rounded to the nearest value of a half type (as a cast
 * there and back). */
double tg_gelu_tanh_d2(double x);
void tg_round_half(const float *x, float *o, int64_t n, tg_dtype to);

#endif
