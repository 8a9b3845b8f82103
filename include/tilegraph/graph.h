/* tilegraph/graph.h - building a computation graph by plain function calls.
 *
 * A graph owns every tensor made in it; tensors are handles into the graph
 * and are freed with it. Each op call appends one node whose output is the
 * returned tensor, so building code reads like the model:
 *
 *     tg_graph *g = tg_graph_create();
 *     tg_tensor *x = tg_input(g, "image", TG_F32, tg_shape4(40, 1, 28, 28));
 *     tg_scope_push(g, "layer1");
 *     tg_tensor *h = tg_nn_conv2d(g, x, "conv", 1, 10, 5, 1, 0);
 *     h = tg_relu(g, tg_maxpool2d(g, h, 2, 2, 0));
 *     tg_scope_pop(g);
 *     ...
 *     if (tg_graph_status(g) != TG_OK) puts(tg_error_message());
 *
 * Errors are sticky: an op given bad shapes returns NULL and records a message
 * naming the op ("layer1/conv: ..."); every later op given NULL also returns
 * NULL, so a builder checks tg_graph_status() once at the end.
 *
 * Names: every node is named by the scope stack and the op ("layer1/conv"),
 * made unique with a ".1", ".2" suffix. Parameters are named scope + name
 * ("layer1/conv/weight"); checkpoints write them with dots
 * ("layer1.conv.weight"), the way PyTorch names its state_dict.
 *
 * Blocks (tg_block_begin/end) are annotations used to place ops on devices.
 * Not thread-safe: build a graph on one thread.
 */
#ifndef TILEGRAPH_GRAPH_H
#define TILEGRAPH_GRAPH_H

#include "tilegraph/export.h"

#include "tilegraph/dtype.h"
#include "tilegraph/shape.h"
#include "tilegraph/status.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_graph tg_graph;
typedef struct tg_tensor tg_tensor;

/* ---- graph ---------------------------------------------------------------- */

TG_API tg_graph *tg_graph_create(void);
TG_API void tg_graph_destroy(tg_graph *g);
/* The first error recorded while building (TG_OK if none); its message is in
 * tg_graph_error(). */
TG_API tg_status tg_graph_status(const tg_graph *g);
TG_API const char *tg_graph_error(const tg_graph *g);
/* Training mode changes what batch norm and dropout build. Default: training. */
TG_API void tg_graph_set_training(tg_graph *g, bool training);
TG_API bool tg_graph_training(const tg_graph *g);
TG_API int tg_graph_tensor_count(const tg_graph *g);
TG_API tg_tensor *tg_graph_tensor(const tg_graph *g, int index);
/* Find a tensor by its full name ("layer1/conv/weight"); NULL if none. */
TG_API tg_tensor *tg_graph_find(const tg_graph *g, const char *name);

TG_API void tg_scope_push(tg_graph *g, const char *name);
TG_API void tg_scope_pop(tg_graph *g);
/* Ops created until tg_block_end belong to block `name`. Blocks are where a
 * divided strategy (executionStrategy pipelined or sharded, or auto with
 * split, stages or devices > 1) cuts the model into stages; device_id >= 0
 * then places the block's stage on that device, -1 leaves it to the stage
 * order. Under the single strategy (auto's choice otherwise) blocks are
 * annotations only and everything runs on one device. */
TG_API void tg_block_begin(tg_graph *g, const char *name);
TG_API void tg_block_begin_on(tg_graph *g, const char *name, int device_id);
TG_API void tg_block_end(tg_graph *g);

/* ---- tensors -------------------------------------------------------------- */

TG_API tg_shape tg_tensor_shape(const tg_tensor *t);
TG_API tg_dtype tg_tensor_dtype(const tg_tensor *t);
TG_API const char *tg_tensor_name(const tg_tensor *t);
/* True for a trainable parameter (tg_param, tg_param_data), false otherwise or for NULL. */
TG_API bool tg_tensor_is_param(const tg_tensor *t);
/* True for a view (tg_reshape, tg_flatten): it shares its input's storage
 * and has no buffer of its own, so a program output must be a copy of it. */
TG_API bool tg_tensor_is_view(const tg_tensor *t);
/* Rename to scope + name (the graph makes it unique with a ".N" suffix). */
TG_API void tg_graph_rename(tg_graph *g, tg_tensor *t, const char *name);
TG_API int tg_tensor_id(const tg_tensor *t);
/* The gradient of `t` after tg_graph_backward, else NULL. */
TG_API tg_tensor *tg_tensor_grad(const tg_tensor *t);
/* Keep this tensor readable after a run (outputs, losses, metrics). */
TG_API void tg_tensor_mark_output(tg_tensor *t);

/* ---- leaves --------------------------------------------------------------- */

typedef enum tg_init_kind {
    TG_INIT_ZEROS,
    TG_INIT_ONES,
    TG_INIT_CONSTANT, /* a */
    TG_INIT_UNIFORM,  /* U(a, b) */
    TG_INIT_NORMAL,   /* N(a, b^2) */
    /* PyTorch's Conv2d/Linear default for weights and biases:
     * U(-1/sqrt(fan_in), 1/sqrt(fan_in)), with fan_in = a. */
    TG_INIT_FAN_IN_UNIFORM,
    /* Normalisation statistics [2, C]: row 0 (means) zeros, row 1 (variances) ones. */
    TG_INIT_NORM_STATS,
    /* Given values (tg_param_data and friends: imported weights). */
    TG_INIT_DATA,
} tg_init_kind;

typedef struct tg_init {
    tg_init_kind kind;
    double a, b;
} tg_init;

/* Data fed from the host for every run. */
TG_API tg_tensor *tg_input(tg_graph *g, const char *name, tg_dtype dtype, tg_shape shape);
/* A trainable parameter, initialised from the session's random seed. */
TG_API tg_tensor *tg_param(tg_graph *g, const char *name, tg_shape shape, tg_init init);
/* Persistent state that is not trained (batch norm running statistics). */
TG_API tg_tensor *tg_state(tg_graph *g, const char *name, tg_shape shape, tg_init init);
/* A constant filled with one value. */
TG_API tg_tensor *tg_constant(tg_graph *g, tg_shape shape, float value);
/* The same leaves filled from `data` (numel(shape) floats, copied into the
 * graph: the caller keeps ownership of `data`). The ONNX importer makes its
 * initializers with these. */
TG_API tg_tensor *tg_param_data(tg_graph *g, const char *name, tg_shape shape, const float *data);
TG_API tg_tensor *tg_state_data(tg_graph *g, const char *name, tg_shape shape, const float *data);
TG_API tg_tensor *tg_constant_data(tg_graph *g, const char *name, tg_shape shape,
                                   const float *data);

/* ---- ops ------------------------------------------------------------------ */

typedef struct tg_conv2d_params {
    int stride_h, stride_w;
    int pad_h, pad_w;
    int dilation_h, dilation_w;
    int groups;
} tg_conv2d_params;

/* x [N, Cin, H, W], w [Cout, Cin/groups, KH, KW], b [Cout] or NULL. */
TG_API tg_tensor *tg_conv2d(tg_graph *g, tg_tensor *x, tg_tensor *w, tg_tensor *b,
                            tg_conv2d_params p);
/* As tg_conv2d with padding that may differ per side (ONNX Conv's pads,
 * auto_pad SAME_UPPER/SAME_LOWER): p.pad_h and p.pad_w are the top and left
 * padding, pad_bottom and pad_right the others. Equal sides build exactly
 * tg_conv2d; otherwise the excess of the larger side is an explicit zero
 * tg_pad node in front of a conv padded by the smaller side. */
TG_API tg_tensor *tg_conv2d_ex(tg_graph *g, tg_tensor *x, tg_tensor *w, tg_tensor *b,
                               tg_conv2d_params p, int pad_bottom, int pad_right);
/* The transposed convolution (PyTorch's ConvTranspose2d, ONNX's
 * ConvTranspose): x [N, Cin, H, W], w [Cin, Cout/groups, KH, KW] (the
 * weight of the convolution it transposes, as PyTorch stores it), b [Cout]
 * or NULL. Each output size is (in - 1) * stride - 2 * pad +
 * dilation * (K - 1) + 1 + output_padding, with 0 <= output_padding <
 * stride. It is the data gradient of tg_conv2d with the same params (that
 * op, so its gradients are a tg_conv2d and a weight gradient); the bias is a
 * broadcast add. */
TG_API tg_tensor *tg_conv_transpose2d(tg_graph *g, tg_tensor *x, tg_tensor *w, tg_tensor *b,
                                      tg_conv2d_params p, int output_padding_h,
                                      int output_padding_w);
/* Pooling with ONNX's MaxPool/AveragePool generality. Padding may differ per
 * side (none more than half the dilated window, as PyTorch requires);
 * dilation (>= 1) is for max pooling only, average pooling rejects anything
 * but 1. ceil_mode rounds the output size up as PyTorch and ONNX do: the
 * last window must start inside the input or its top/left padding.
 * count_include_pad (average only): divide by the window's size within the
 * padded input (a ceil_mode window hanging past the padding counts only up
 * to it, as PyTorch), else by the number of input elements covered. Max
 * pooling pads with -infinity and its gradient goes to the first maximum of
 * each window. */
typedef struct tg_pool2d_params {
    int kernel_h, kernel_w, stride_h, stride_w;
    int pad_top, pad_left, pad_bottom, pad_right;
    int dilation_h, dilation_w;
    bool ceil_mode;
    bool count_include_pad;
} tg_pool2d_params;

TG_API tg_tensor *tg_maxpool2d_ex(tg_graph *g, tg_tensor *x, tg_pool2d_params p);
TG_API tg_tensor *tg_avgpool2d_ex(tg_graph *g, tg_tensor *x, tg_pool2d_params p);
/* Square window, `pad` on every side, dilation 1, no ceil_mode. */
TG_API tg_tensor *tg_maxpool2d(tg_graph *g, tg_tensor *x, int kernel, int stride, int pad);
/* As tg_maxpool2d; count_include_pad follows PyTorch's default (true). */
TG_API tg_tensor *tg_avgpool2d(tg_graph *g, tg_tensor *x, int kernel, int stride, int pad);
/* [N, C, H, W] -> [N, C, 1, 1] */
TG_API tg_tensor *tg_global_avgpool(tg_graph *g, tg_tensor *x);

TG_API tg_tensor *tg_relu(tg_graph *g, tg_tensor *x);
/* The exact (erf) GELU, PyTorch's default. */
TG_API tg_tensor *tg_gelu(tg_graph *g, tg_tensor *x);
/* The tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))):
 * PyTorch's gelu(approximate='tanh'), ONNX Gelu with approximate="tanh". */
TG_API tg_tensor *tg_gelu_tanh(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_sigmoid(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_tanh(tg_graph *g, tg_tensor *x);
/* x * scale + shift */
TG_API tg_tensor *tg_scale(tg_graph *g, tg_tensor *x, float scale, float shift);
/* Elementwise math, as the C99 functions (erff, expf, logf, sqrtf, fabsf) and
 * with PyTorch's gradients: log and sqrt give -inf/NaN/inf outside their
 * domain rather than an error; abs has gradient sign(x), 0 at 0. */
TG_API tg_tensor *tg_erf(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_exp(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_log(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_sqrt(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_neg(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_abs(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_reciprocal(tg_graph *g, tg_tensor *x); /* 1 / x */
/* x > 0 ? x : alpha * x (ONNX LeakyRelu; PyTorch's default alpha is 0.01). */
TG_API tg_tensor *tg_leaky_relu(tg_graph *g, tg_tensor *x, float alpha);
/* min(max(x, min), max) (ONNX Clip, ReLU6 = clip(x, 0, 6)); -INFINITY or
 * INFINITY for no bound; min > max gives max everywhere, NaN stays NaN. The
 * gradient is 1 strictly inside (min, max) and 0 elsewhere, as PyTorch's
 * hardtanh (ReLU6). NaN bounds are an error. */
TG_API tg_tensor *tg_clip(tg_graph *g, tg_tensor *x, float min, float max);
/* The activations vision models use and ONNX's element-wise math, each
 * with its gradient (ops/activation.c); derivatives at kinks as PyTorch's.
 * hard_sigmoid: max(0, min(1, alpha x + beta)) (PyTorch: alpha 1/6, beta
 * 0.5; ONNX's default 0.2, 0.5); hard_swish: x * hard_sigmoid(x) with 1/6
 * and 0.5; silu: x sigmoid(x); mish: x tanh(softplus(x)); elu: x > 0 ? x :
 * alpha (e^x - 1); celu: x > 0 ? x : alpha (e^(x/alpha) - 1); selu: gamma *
 * elu(x, alpha) (ONNX's defaults 1.6732632, 1.0507010); softplus: log(1 +
 * e^x); softsign: x / (1 + |x|). sign, floor, ceil and round (halves to
 * even) have gradient 0. */
TG_API tg_tensor *tg_hard_sigmoid(tg_graph *g, tg_tensor *x, float alpha, float beta);
TG_API tg_tensor *tg_hard_swish(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_silu(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_mish(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_elu(tg_graph *g, tg_tensor *x, float alpha);
TG_API tg_tensor *tg_celu(tg_graph *g, tg_tensor *x, float alpha);
TG_API tg_tensor *tg_selu(tg_graph *g, tg_tensor *x, float alpha, float gamma);
TG_API tg_tensor *tg_softplus(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_softsign(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_sign(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_floor(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_ceil(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_round(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_cos(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_sin(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_tan(tg_graph *g, tg_tensor *x);
/* The inverse and hyperbolic functions (NaN outside their domains, as the
 * C library's): derivatives -1/sqrt(1-x^2), 1/sqrt(1-x^2), 1/(1+x^2),
 * 1/sqrt(x^2-1), 1/sqrt(x^2+1), 1/(1-x^2), sinh, cosh. */
TG_API tg_tensor *tg_acos(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_asin(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_atan(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_acosh(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_asinh(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_atanh(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_cosh(tg_graph *g, tg_tensor *x);
TG_API tg_tensor *tg_sinh(tg_graph *g, tg_tensor *x);
/* x > alpha ? x : 0 (ONNX ThresholdedRelu; gradient 1 strictly above
 * alpha), and x < -lambd ? x + bias : x > lambd ? x - bias : 0 (ONNX
 * Shrink, PyTorch's hardshrink with bias 0 and softshrink with bias =
 * lambd; gradient 1 strictly outside [-lambd, lambd]). */
TG_API tg_tensor *tg_thresholded_relu(tg_graph *g, tg_tensor *x, float alpha);
TG_API tg_tensor *tg_shrink(tg_graph *g, tg_tensor *x, float lambd, float bias);

/* Elementwise with NumPy broadcasting. */
TG_API tg_tensor *tg_add(tg_graph *g, tg_tensor *a, tg_tensor *b);
TG_API tg_tensor *tg_sub(tg_graph *g, tg_tensor *a, tg_tensor *b);
TG_API tg_tensor *tg_mul(tg_graph *g, tg_tensor *a, tg_tensor *b);
TG_API tg_tensor *tg_div(tg_graph *g, tg_tensor *a, tg_tensor *b);
/* a ^ b (powf). Gradients as PyTorch: to a, b a^(b-1) (0 where b = 0); to b,
 * a^b log(a) (0 where a = 0 and b >= 0; NaN for a < 0). Only the gradient in
 * dy of pow's backward op exists: no second derivative in a or b. */
TG_API tg_tensor *tg_pow(tg_graph *g, tg_tensor *a, tg_tensor *b);
/* Elementwise larger / smaller (ONNX Max / Min of 2 inputs, torch.maximum /
 * torch.minimum): NaN if either is NaN. The gradient goes to the larger
 * (smaller) input; on a tie each input gets half, as PyTorch. */
TG_API tg_tensor *tg_maximum(tg_graph *g, tg_tensor *a, tg_tensor *b);
TG_API tg_tensor *tg_minimum(tg_graph *g, tg_tensor *a, tg_tensor *b);

/* x broadcast to `shape` (NumPy's rules: x's dims, aligned on the right,
 * each equal or 1; ONNX's Expand, torch's expand): the gradient is summed
 * back to x's shape. Returns x itself when the shapes are equal. */
TG_API tg_tensor *tg_expand(tg_graph *g, tg_tensor *x, tg_shape shape);

/* [..., M, K] x [..., K, N] -> [..., M, N], batch dims equal or b 2-D. */
TG_API tg_tensor *tg_matmul(tg_graph *g, tg_tensor *a, tg_tensor *b, bool trans_a, bool trans_b);
/* x [N, in], w [out, in] (PyTorch's layout), b [out] or NULL -> [N, out] */
TG_API tg_tensor *tg_linear(tg_graph *g, tg_tensor *x, tg_tensor *w, tg_tensor *b);

/* Same elements, new shape; one dimension may be -1 (inferred, as in
 * PyTorch). No copy: the result shares x's storage. */
TG_API tg_tensor *tg_reshape(tg_graph *g, tg_tensor *x, tg_shape shape);
/* Keep dims before `axis`, join the rest: [N, C, H, W] -> [N, C*H*W] for axis 1. */
TG_API tg_tensor *tg_flatten(tg_graph *g, tg_tensor *x, int axis);
/* Output dim d is x's dim perm[d]; perm has x's number of dims. */
TG_API tg_tensor *tg_transpose(tg_graph *g, tg_tensor *x, const int *perm);
TG_API tg_tensor *tg_concat(tg_graph *g, tg_tensor *const *xs, int n, int axis);
/* Elements start..end-1 along axis (negative axis counts from the end). */
TG_API tg_tensor *tg_slice(tg_graph *g, tg_tensor *x, int axis, int64_t start, int64_t end);
/* Elements start, start + step, ... before end along axis, as ONNX Slice and
 * Python's x[start:end:step]: a negative start or end counts from the end,
 * then both are clamped to the axis (so INT64_MAX / INT64_MIN mean "to the
 * end"); step may be negative, not 0. Step 1 builds tg_slice. A slice that
 * selects nothing is an error. */
TG_API tg_tensor *tg_slice_ex(tg_graph *g, tg_tensor *x, int axis, int64_t start, int64_t end,
                              int64_t step);

/* ---- indices and integers -------------------------------------------------- */

/* ONNX Gather: data's slices along `axis` picked by i32 `indices` (any shape;
 * negative counts from the end): the result is data.shape[:axis] +
 * indices.shape + data.shape[axis+1:]. Data is f32 or i32. The gradient
 * scatter-adds into data (deterministically). An index outside [-dim, dim)
 * stops the run (tg_session_run fails naming the indices, the value and
 * its position); it never reads outside data. */
TG_API tg_tensor *tg_gather(tg_graph *g, tg_tensor *data, tg_tensor *indices, int axis);
/* Gather's transpose: zeros of `shape`, then for every index j the slice
 * updates[.., j, ..] added at indices[j] along `axis` (repeated indices
 * add up, in index order). updates is shape[:axis] + indices.shape +
 * shape[axis+1:], f32. ONNX's ScatterElements / ScatterND with reduction
 * add over flat offsets; the gradient gathers. */
TG_API tg_tensor *tg_scatter_add(tg_graph *g, tg_tensor *updates, tg_tensor *indices, int axis,
                                 tg_shape shape);
/* nn.Embedding: rows of table [V, D] for i32 ids [any] -> [ids..., D]. An
 * id outside [0, V) (negative ones too, as nn.Embedding) stops the run
 * naming the ids, the value and its position. */
TG_API tg_tensor *tg_embedding(tg_graph *g, tg_tensor *table, tg_tensor *ids);
/* Between f32 and i32 (and u8 to f32): to i32 truncates toward zero and
 * saturates (NaN gives 0). Returns x when it already has that type. */
TG_API tg_tensor *tg_cast(tg_graph *g, tg_tensor *x, tg_dtype to);
/* Comparisons of two f32 or two i32 tensors, broadcast: i32 0/1. */
TG_API tg_tensor *tg_equal(tg_graph *g, tg_tensor *a, tg_tensor *b);
TG_API tg_tensor *tg_less(tg_graph *g, tg_tensor *a, tg_tensor *b);
TG_API tg_tensor *tg_less_equal(tg_graph *g, tg_tensor *a, tg_tensor *b);
TG_API tg_tensor *tg_greater(tg_graph *g, tg_tensor *a, tg_tensor *b);
TG_API tg_tensor *tg_greater_equal(tg_graph *g, tg_tensor *a, tg_tensor *b);
/* Logic on i32 booleans (non-zero is true), broadcast: i32 0/1. */
TG_API tg_tensor *tg_logical_and(tg_graph *g, tg_tensor *a, tg_tensor *b);
TG_API tg_tensor *tg_logical_or(tg_graph *g, tg_tensor *a, tg_tensor *b);
TG_API tg_tensor *tg_logical_xor(tg_graph *g, tg_tensor *a, tg_tensor *b);
TG_API tg_tensor *tg_logical_not(tg_graph *g, tg_tensor *a);
/* cond ? x : y elementwise, broadcast over all three; cond i32, x and y
 * both f32 or both i32. The gradient goes to x where cond holds, else y. */
TG_API tg_tensor *tg_where(tg_graph *g, tg_tensor *cond, tg_tensor *x, tg_tensor *y);

typedef enum tg_pad_mode {
    TG_PAD_CONSTANT, /* the value given */
    TG_PAD_REFLECT,  /* mirror without repeating the border (numpy/PyTorch "reflect") */
    TG_PAD_EDGE,     /* repeat the border element (PyTorch "replicate") */
} tg_pad_mode;
/* Pad (or, with negative values, crop) every axis: pads has 2 * ndim values,
 * the begins of axes 0..ndim-1 then their ends (ONNX Pad's order). Reflect
 * padding must be shorter than the axis, as in PyTorch. The gradient sums
 * dy over every output element read from an input element. */
TG_API tg_tensor *tg_pad(tg_graph *g, tg_tensor *x, const int64_t *pads, tg_pad_mode mode,
                         float value);
/* ONNX ReverseSequence (tf.reverse_sequence): along time_axis, the first
 * lens[b] elements of each batch b (indexed along batch_axis) reversed, the
 * rest copied. lens is an i32 [B], each in [0, T]; a run with a length
 * outside stops naming it. Its gradient reverses dy alike. */
TG_API tg_tensor *tg_reverse_sequence(tg_graph *g, tg_tensor *x, tg_tensor *lens, int batch_axis,
                                      int time_axis);
/* Resize the maps of [N, C, H, W] to [N, C, out_h, out_w] (ONNX Resize and
 * Upsample, torch's F.interpolate): nearest or bilinear, the source
 * coordinate of output index o by ONNX's coordinate_transformation_mode
 * (PyTorch exports nearest as asymmetric + floor, bilinear as
 * pytorch_half_pixel, align_corners=True as align_corners), from scale_h,
 * scale_w (0: out / in, as ONNX when sizes are given). The gradient sums dy
 * back over the inputs each output read (ops/resize.c). */
typedef enum tg_resize_mode { TG_RESIZE_NEAREST, TG_RESIZE_LINEAR } tg_resize_mode;
typedef enum tg_resize_coord {
    TG_RESIZE_HALF_PIXEL,           /* (o + 0.5) / scale - 0.5 */
    TG_RESIZE_PYTORCH_HALF_PIXEL,   /* the same, 0 when out is 1 */
    TG_RESIZE_ALIGN_CORNERS,        /* o (in - 1) / (out - 1) */
    TG_RESIZE_ASYMMETRIC,           /* o / scale */
    TG_RESIZE_TF_HALF_PIXEL_FOR_NN, /* (o + 0.5) / scale */
    TG_RESIZE_HALF_PIXEL_SYMMETRIC  /* half_pixel about the centre (ONNX opset 19) */
} tg_resize_coord;
typedef enum tg_resize_nearest {
    TG_RESIZE_ROUND_PREFER_FLOOR,
    TG_RESIZE_ROUND_PREFER_CEIL,
    TG_RESIZE_FLOOR,
    TG_RESIZE_CEIL
} tg_resize_nearest;
typedef struct tg_resize_params {
    tg_resize_mode mode;
    tg_resize_coord coord;
    tg_resize_nearest nearest; /* nearest mode only */
    int64_t out_h, out_w;
    float scale_h, scale_w; /* 0: out / in */
} tg_resize_params;
TG_API tg_tensor *tg_resize(tg_graph *g, tg_tensor *x, const tg_resize_params *p);
/* Sum or mean over the axes set in `axes_mask` (bit i = axis i). */
TG_API tg_tensor *tg_reduce_sum(tg_graph *g, tg_tensor *x, unsigned axes_mask, bool keepdim);
TG_API tg_tensor *tg_reduce_mean(tg_graph *g, tg_tensor *x, unsigned axes_mask, bool keepdim);
/* Largest / smallest element over the axes in `axes_mask` (ONNX ReduceMax /
 * ReduceMin, torch.amax / torch.amin): NaN if the group holds one. The
 * gradient is split evenly between the elements equal to the result. */
TG_API tg_tensor *tg_reduce_max(tg_graph *g, tg_tensor *x, unsigned axes_mask, bool keepdim);
TG_API tg_tensor *tg_reduce_min(tg_graph *g, tg_tensor *x, unsigned axes_mask, bool keepdim);

TG_API tg_tensor *tg_softmax(tg_graph *g, tg_tensor *x, int axis);
TG_API tg_tensor *tg_log_softmax(tg_graph *g, tg_tensor *x, int axis);

/* Losses return a scalar (ndim 0): the mean over the batch. labels are
 * TG_I32 [N] in [0, C); a label outside that range is not clamped or skipped:
 * it makes that sample's loss (hence the mean) and its gradient row NaN, so
 * the engine's NaN check reports it. */
TG_API tg_tensor *tg_cross_entropy(tg_graph *g, tg_tensor *logits, tg_tensor *labels);
TG_API tg_tensor *tg_nll_loss(tg_graph *g, tg_tensor *log_probs, tg_tensor *labels);
TG_API tg_tensor *tg_mse_loss(tg_graph *g, tg_tensor *a, tg_tensor *b);

/* The class losses as PyTorch and ONNX define them: scores [N, C, d1, ...]
 * (classes on axis 1), labels [N, d1, ...] (i32; f32 holding integers is
 * taken too), optional class weights f32 [C] (NULL for none; constants:
 * their gradient is refused). Each row (n, d1, ...) adds w[label] * loss;
 * a row labelled ignore_index (when has_ignore_index) adds nothing and is
 * left out of the mean. MEAN divides by the sum of the rows' weights (the
 * count of rows not ignored without weights; 0/0 = NaN if all are), SUM
 * does not, NONE returns one loss per row ([N, d1, ...], 0 where ignored).
 * A label outside [0, C) that is not ignored gives NaN, as above. */
typedef enum tg_loss_reduction { TG_LOSS_MEAN, TG_LOSS_SUM, TG_LOSS_NONE } tg_loss_reduction;
typedef struct tg_loss_params {
    tg_loss_reduction reduction;
    bool has_ignore_index;
    int64_t ignore_index;
} tg_loss_params;
TG_API tg_tensor *tg_cross_entropy_ex(tg_graph *g, tg_tensor *scores, tg_tensor *labels,
                                      tg_tensor *weights, tg_loss_params p);
TG_API tg_tensor *tg_nll_loss_ex(tg_graph *g, tg_tensor *log_probs, tg_tensor *labels,
                                 tg_tensor *weights, tg_loss_params p);

/* Normalisations over [N, C, ...]: gamma/beta [C] (or NULL for none). In
 * training mode batch norm normalises with the batch statistics and updates
 * running_stats ([2, C]: mean then variance, momentum 0.1, unbiased variance,
 * as PyTorch); in inference mode it normalises with running_stats. */
TG_API tg_tensor *tg_batch_norm(tg_graph *g, tg_tensor *x, tg_tensor *gamma, tg_tensor *beta,
                                tg_tensor *running_stats, float eps);
/* The same with another momentum: in training, running = (1 - momentum) *
 * running + momentum * batch statistic, PyTorch's convention (ONNX's
 * momentum attribute is 1 - this); in [0, 1]. */
TG_API tg_tensor *tg_batch_norm_ex(tg_graph *g, tg_tensor *x, tg_tensor *gamma, tg_tensor *beta,
                                   tg_tensor *running_stats, float eps, float momentum);
TG_API tg_tensor *tg_group_norm(tg_graph *g, tg_tensor *x, int groups, tg_tensor *gamma,
                                tg_tensor *beta, float eps);
/* Normalises over the last `norm_dims` dims; gamma/beta have those dims' shape. */
TG_API tg_tensor *tg_layer_norm(tg_graph *g, tg_tensor *x, int norm_dims, tg_tensor *gamma,
                                tg_tensor *beta, float eps);
/* u8 images [N, C, ...] -> f32 (x / 255 - mean[c]) / std[c], on the device
 * (8-bit input: the host streams a quarter of the bytes). At most 4 channels;
 * the arithmetic is the data loader's, so results are bit-identical. */
TG_API tg_tensor *tg_normalize_u8(tg_graph *g, tg_tensor *x, const float *mean, const float *std);
/* u8 [any shape] -> f32 with the same values 0..255 (ONNX's Cast from
 * uint8): 8-bit input that the model's own ops then normalise. */
TG_API tg_tensor *tg_cast_u8(tg_graph *g, tg_tensor *x);
/* x rounded to the values of `to` (TG_F16 or TG_BF16), kept in f32: ONNX's
 * Cast to float16/bfloat16 (storage in half is the precision option's);
 * the gradient passes through unchanged. */
TG_API tg_tensor *tg_cast_half(tg_graph *g, tg_tensor *x, tg_dtype to);
/* Identity in inference mode; in training, zeroes with probability p and
 * scales by 1/(1-p), from the session seed, the op and the step. */
TG_API tg_tensor *tg_dropout(tg_graph *g, tg_tensor *x, float p);
/* A tensor of like's shape, each element uniform in [low, high), drawn
 * afresh each step and for each micro-batch and replica from the session
 * seed (ONNX RandomUniformLike; Bernoulli(p) is it compared with p). like's
 * values are not read; there is no gradient. In training and inference. */
TG_API tg_tensor *tg_random_uniform_like(tg_graph *g, tg_tensor *like, float low, float high);
/* The same, each element normal of mean `mean` and standard deviation
 * `scale` (>= 0; ONNX RandomNormalLike and RandomNormal), by Box-Muller
 * from 24-bit uniforms: |z| is at most 5.8. */
TG_API tg_tensor *tg_random_normal_like(tg_graph *g, tg_tensor *like, float mean, float scale);

/* ---- autodiff ------------------------------------------------------------- */

/* Mark t as a recomputation checkpoint (PopTorch's recomputationCheckpoint):
 * with the option recomputation=pipeline, the backward pass keeps t and
 * recomputes the activations after it instead of keeping them. Returns t. */
TG_API tg_tensor *tg_recomputation_checkpoint(tg_graph *g, tg_tensor *t);

/* Append the backward pass of scalar `loss` as ordinary ops; afterwards
 * tg_tensor_grad(p) is the gradient of every parameter p that loss depends on.
 * A tensor's gradient contributions are added in a fixed order; those of its
 * disjoint slices are concatenated, so cutting a tensor into T slices costs
 * O(T) in the backward pass, not T tensors of its full size. */
TG_API tg_status tg_graph_backward(tg_graph *g, tg_tensor *loss);

#ifdef __cplusplus
}
#endif
#endif
