/* onnx/onnx_build.h - the state of one tg_onnx_build and the helpers op
 * mappings use (internal).
 *
 * Every ONNX value is either a graph tensor or a constant known at import
 * (an initializer not yet placed in the graph, a Constant, or shape
 * arithmetic folded from known shapes). Mappings ask for what they need:
 * ob_tensor() places a constant in the graph (a float initializer becomes a
 * parameter named as in the file); ob_const() insists on a constant.
 */
#ifndef TG_ONNX_BUILD_H
#define TG_ONNX_BUILD_H

#include "onnx/onnx_internal.h"

#include "core/error.h"

#include <stdbool.h>

typedef struct ob_value {
    const char *name;
    tg_tensor *t;   /* in the graph, or NULL */
    tg_onnx_data c; /* a constant (c.f or c.i set) when t is NULL */
    int init;       /* >= 0: an initializer, decoded into c on first use */
    bool known;     /* produced (t or c) */
} ob_value;

typedef struct onnx_builder {
    const tg_onnx_model *m;
    tg_graph *g;
    const tg_onnx_build_config *cfg;
    const tg_onnx_data *const *bound; /* per model input, or NULL */
    ob_value *vals;
    int n_vals;
    tg_onnx_names index;
    const Onnx__NodeProto *node; /* the node being mapped */
    char scope[512];             /* its scope ("layer3/0/conv1"), "" for none */
    char leaf[256];              /* its own name ("Conv") */
    bool *frozen;                /* per initializer: kept fixed (state), or NULL: none */
} onnx_builder;

/* Record a failure naming the file and the current node. */
tg_status ob_fail(onnx_builder *b, tg_status s, const char *fmt, ...) TG_PRINTF(3, 4);

/* Input i of the current node, as a graph tensor; NULL (after ob_fail) if
 * it is missing or cannot be one. */
tg_tensor *ob_tensor(onnx_builder *b, int i);
/* Input i as a constant; NULL (after ob_fail) if it depends on the model's
 * inputs or is missing. */
const tg_onnx_data *ob_const(onnx_builder *b, int i);
/* Input i as a graph tensor of its own type: a graph tensor as it is, an
 * integer or boolean constant as an i32 tensor (each use its own node, so
 * the constant stays foldable for other nodes), a float one via ob_tensor.
 * NULL (after ob_fail) for an integer that int32 cannot hold. */
tg_tensor *ob_typed_tensor(onnx_builder *b, int i);
/* The value `name` (one a subgraph reads from the enclosing graph) as
 * ob_typed_tensor (typed) or ob_tensor would give it as an input; NULL
 * (after ob_fail) when no earlier node produced it. */
tg_tensor *ob_named_tensor(onnx_builder *b, const char *name, bool typed);
/* An i32 constant in the graph with values v (shape's element count);
 * `what` names it in the message for a value beyond 2^24. */
tg_tensor *ob_int_constant(onnx_builder *b, const char *what, tg_shape shape, const int64_t *v);
bool ob_has_input(const onnx_builder *b, int i);
/* Whether input i is known at import (without failing). */
bool ob_is_const(onnx_builder *b, int i);
/* Input i's initializer index if it is an unplaced initializer, else -1. */
int ob_initializer(const onnx_builder *b, int i);
/* Whether input i can be folded at import: a constant that is not a float
 * initializer (a weight, which must stay a trainable parameter). */
bool ob_is_foldable(onnx_builder *b, int i);
/* Input i as a constant folded at import (*c) or as a tensor (*t), exactly
 * one set, and its shape in *s: TG_ERR_UNSUPPORTED when it is neither. */
tg_status ob_value_in(onnx_builder *b, int i, const tg_onnx_data **c, tg_tensor **t, tg_shape *s);

/* Set output k of the current node. The constant form takes ownership of
 * d's arrays. */
tg_status ob_set(onnx_builder *b, int k, tg_tensor *t);
tg_status ob_set_const(onnx_builder *b, int k, tg_onnx_data *d);
/* Output k is initializer `init` under the output's own name, not yet
 * placed: each use decides what it becomes (a weight, a batch norm's
 * state), as for the initializer itself. */
tg_status ob_set_initializer(onnx_builder *b, int k, int init);

/* Attributes: the default when absent. */
int64_t ob_attr_int(const onnx_builder *b, const char *name, int64_t dflt);
float ob_attr_float(const onnx_builder *b, const char *name, float dflt);
/* NULL (and *n = 0) when absent. */
const int64_t *ob_attr_ints(const onnx_builder *b, const char *name, int *n);
const float *ob_attr_floats(const onnx_builder *b, const char *name, int *n);
/* "" when absent. */
const char *ob_attr_string(const onnx_builder *b, const char *name, char *buf, size_t cap);
const Onnx__AttributeProto *ob_attr(const onnx_builder *b, const char *name);

/* A parameter/state made at the root scope (names as in the file). */
tg_tensor *ob_param(onnx_builder *b, const char *name, tg_shape shape, const float *data,
                    bool state);

/* Which float initializers stay fixed (onnx_frozen.c): those the file's
 * TG_ONNX_PARAMETERS_KEY list leaves out and those cfg->freeze matches.
 * Sets b->frozen (NULL when none is); ob_frozen_free releases it. */
tg_status ob_frozen_init(onnx_builder *b);
void ob_frozen_free(onnx_builder *b);
static inline bool ob_init_frozen(const onnx_builder *b, int init)
{
    return b->frozen && init >= 0 && b->frozen[init];
}

/* Element k of a constant as a double (exact for f32, and for integers
 * within 2^53). */
static inline double ob_get(const tg_onnx_data *d, int64_t k)
{
    return d->f ? d->f[k] : (double)d->i[k];
}
/* Set element k: rounded to f32, or truncated to an integer. */
static inline void ob_put(tg_onnx_data *d, int64_t k, double v)
{
    if (d->f)
        d->f[k] = (float)v;
    else
        d->i[k] = (int64_t)v;
}
/* Element `from` of src into element `to` of dst, of the same kind, exactly. */
static inline void ob_copy_at(tg_onnx_data *dst, int64_t to, const tg_onnx_data *src, int64_t from)
{
    if (dst->f)
        dst->f[to] = src->f[from];
    else
        dst->i[to] = src->i[from];
}

/* tg_concat of any number of tensors: more than a node's inputs are
 * joined as a tree of concats (copies, exact). */
tg_tensor *ob_concat_many(onnx_builder *b, tg_tensor **xs, int n, int axis);

/* The NumPy broadcast of n shapes (fails naming the two that clash), and
 * the flat index into `in` (broadcast to `out`) of out's element k: for
 * folding elementwise ops on constants. */
tg_status ob_bcast_shape(onnx_builder *b, int n, const tg_shape *in, tg_shape *out);
int64_t ob_bcast_at(tg_shape out, tg_shape in, int64_t k);

/* Whether optional output k of the current node is read: by a node or as
 * a graph output (exporters name outputs nothing reads, such as Dropout's
 * mask). */
bool ob_output_used(const onnx_builder *b, int k);

/* Input i's shape, whether a tensor or a constant. */
tg_status ob_shape(onnx_builder *b, int i, tg_shape *out);
/* A new constant of the given shape (float or int64 values, zeroed). */
tg_status ob_data_new(onnx_builder *b, bool is_float, int ndim, const int64_t *dim,
                      tg_onnx_data *d);
/* A negative axis counts from the end; fails naming the node when out of
 * range for `ndim` dims. */
tg_status ob_axis(onnx_builder *b, int64_t axis, int ndim, int *out);

/* The value named `name` (NULL if none), and its constant (an initializer
 * decoded on first use; NULL for a graph tensor or on failure). */
ob_value *ob_find(const onnx_builder *b, const char *name);
const tg_onnx_data *ob_value_const(onnx_builder *b, ob_value *v);

/* Make n the current node and push its scope; ob_leave pops it. */
void ob_enter(onnx_builder *b, const Onnx__NodeProto *n);
void ob_leave(onnx_builder *b);

/* Patterns (onnx_pattern.c): if node k starts GELU's erf form, build
 * tg_gelu for it, set the pattern's last output, mark the nodes it covers
 * in skip[] and return true. */
bool ob_match_gelu(onnx_builder *b, int k, bool *skip);
/* The same for LayerNorm's decomposed form (opsets before 17) and for
 * GELU's tanh form. */
bool ob_match_layer_norm(onnx_builder *b, int k, bool *skip);
bool ob_match_gelu_tanh(onnx_builder *b, int k, bool *skip);
/* SiLU's Sigmoid(x) -> Mul(x, .) (onnx_ops_elementwise.c). */
bool ob_match_silu(onnx_builder *b, int k, bool *skip);
/* 0, 1, ..., len - 1 along `axis` of an ndim-dimensional f32 constant that
 * is 1 on every other axis: the indices ArgMax, OneHot and TopK compare
 * with (onnx_index.c). NULL after ob_fail when out of memory. */
tg_tensor *ob_ramp_along(onnx_builder *b, int ndim, int axis, int64_t len);
/* The one node that reads `name`, or -1 (none, several, or a graph output):
 * where a pattern may continue (onnx_pattern.c). */
int ob_sole_consumer(const onnx_builder *b, const char *name);

/* Opset of the model (semantics of some ops changed over opsets). */
int ob_opset(const onnx_builder *b);
/* Fails (naming the attribute, the op and the model's opset) when the node
 * carries attribute `name` at an opset outside [from, until): an attribute
 * an op had only in some of its forms (Clip's min before 11) is read only
 * there. */
tg_status ob_attr_in_opsets(onnx_builder *b, const char *name, int from, int until);
/* Binary ops before opset 7 (Add, Pow, Equal, ...) broadcast only with
 * broadcast=1, B's dims aligned at `axis` of A's: the trailing alignment
 * (NumPy's) is taken, others are refused, as are unequal shapes without
 * broadcast=1; from opset 7 those attributes are refused. */
tg_status ob_legacy_broadcast(onnx_builder *b);
#define OB_LEGACY_BROADCAST_ATTRS "axis,broadcast"

typedef tg_status (*ob_map_fn)(onnx_builder *b);

typedef struct ob_op {
    const char *op_type;
    ob_map_fn map;
    const char *attrs; /* the attributes it understands, comma-separated */
} ob_op;

/* The recurrent ops (onnx_rnn.c), unrolled over the sequence; their entries
 * are in the loss table (onnx_ops_loss.c). */
tg_status ob_map_lstm(onnx_builder *b);
tg_status ob_map_gru(onnx_builder *b);
tg_status ob_map_rnn(onnx_builder *b);
#define OB_RNN_ATTRS                                                                               \
    "activation_alpha,activation_beta,activations,clip,direction,hidden_size,layout"

/* Attribute checks the convolution and pooling mappers share
 * (onnx_attrs.c). 1-D inputs [N, C, L] run as the 2-D ops over
 * [N, C, 1, L]: an attribute's nsp values (1 or 2) go into the last nsp of
 * two slots, the added height keeping its neutral value. */
/* The number of spatial dims of x (1 or 2), refusing others. */
tg_status ob_spatial_dims(onnx_builder *b, tg_tensor *x, int *nsp);
/* [N, C, L] -> [N, C, 1, L]; a 4-D x as it is. */
tg_tensor *ob_as_2d(onnx_builder *b, tg_tensor *x);
/* The 2-D op's output back to nsp spatial dims: [N, C, 1, L] -> [N, C, L]. */
tg_tensor *ob_from_2d(onnx_builder *b, tg_tensor *y, int nsp);
/* Attribute `name` (nsp values in [lo, 2^20]) into out[2 - nsp ..]; out
 * keeps its values when the attribute is absent. ob_spatial_ints: lo 1. */
tg_status ob_spatial_ints_min(onnx_builder *b, const char *name, int nsp, int64_t lo,
                              int64_t out[2]);
tg_status ob_spatial_ints(onnx_builder *b, const char *name, int nsp, int64_t out[2]);
/* pads (begins of the spatial dims, then their ends) into lo/hi. */
tg_status ob_spatial_pads(onnx_builder *b, int nsp, int64_t lo[2], int64_t hi[2]);
/* A conv or pooling window: kernel, strides, padding per side, dilations. */
/* The flat offsets into data of shape ds of GatherElements' or
 * ScatterElements' indices (input 1, shape is) computed in the graph: each
 * index along `axis` wrapped when negative and, outside [-dim, dim),
 * stopping the run naming the indices, the value and its position
 * (gather's check); i32 of shape is, exact while ds has at most 2^24
 * elements (onnx_index.c). */
tg_tensor *ob_element_offsets(onnx_builder *b, tg_shape ds, tg_shape is, int axis);

/* Conv and GlobalAveragePool on a 5-D input [N, C, D, H, W], built from
 * the 2-D ops (onnx_conv3d.c). */
tg_status ob_conv3d(onnx_builder *b);
/* ConvTranspose on a 5-D input (onnx_conv3d.c). */
tg_status ob_conv_transpose3d(onnx_builder *b);
/* One axis of a ConvTranspose: the pads (*lo, *hi) and output padding *op
 * that an output size want >= 0 leaves (auto_pad SAME_UPPER: upper), then
 * *op refused unless below the stride s (onnx_ops_conv.c). */
tg_status ob_tconv_axis(onnx_builder *b, int64_t in, int64_t k, int64_t want, bool upper, int64_t s,
                        int64_t d, int64_t *lo, int64_t *hi, int64_t *op);
tg_status ob_global_avgpool3d(onnx_builder *b);
/* MaxPool (max) or AveragePool on a 5-D input. */
tg_status ob_pool3d(onnx_builder *b, bool max);
/* MaxPool's Indices (i32) for x [N, C, D, H, W] pooled into y by a window
 * of k with strides s, dilations d and begin pads lo (onnx_ops_norm.c). */
tg_tensor *ob_maxpool_indices(onnx_builder *b, tg_tensor *x, tg_tensor *y, const int64_t *k,
                              const int64_t *s, const int64_t *d, const int64_t *lo);

typedef struct ob_window {
    int64_t k[2], s[2], lo[2], hi[2], d[2];
} ob_window;
/* strides, dilations, pads or auto_pad into w; x is the input as 2-D
 * ([N, C, 1, L] for 1-D) and kernel its 2-D window. */
tg_status ob_read_window(onnx_builder *b, tg_shape x, int nsp, const int64_t *kernel, ob_window *w);
#define OB_WINDOW_ATTRS "auto_pad,kernel_shape,pads,strides"

/* The op tables, in the order the supported list names them. Each mapper
 * maps one node onto the graph builder API, checking every attribute it is
 * given: a value or combination the builder cannot express exactly is
 * refused, naming the node and attribute, never approximated. The NN ops by
 * family (onnx_ops_conv.c, onnx_ops_elementwise.c, onnx_ops_norm.c,
 * onnx_ops_shape.c, onnx_ops_loss.c with the recurrent ops), constant
 * folding (onnx_fold.c; comparisons, logic, Where, Expand and Tile in
 * onnx_fold_logic.c), index and mask ops (onnx_index.c), resizing
 * (onnx_ops_resize.c) and random ops (onnx_ops_random.c). */
const ob_op *ob_find_op(const char *op_type);
extern const ob_op tg_onnx_conv_ops[];
extern const int tg_onnx_conv_op_count;
extern const ob_op tg_onnx_elementwise_ops[];
extern const int tg_onnx_elementwise_op_count;
extern const ob_op tg_onnx_norm_ops[];
extern const int tg_onnx_norm_op_count;
extern const ob_op tg_onnx_shape_ops[];
extern const int tg_onnx_shape_op_count;
extern const ob_op tg_onnx_loss_ops[];
extern const int tg_onnx_loss_op_count;
extern const ob_op tg_onnx_fold_ops[];
extern const int tg_onnx_fold_op_count;
extern const ob_op tg_onnx_fold_logic_ops[];
extern const int tg_onnx_fold_logic_op_count;
extern const ob_op tg_onnx_index_ops[];
extern const int tg_onnx_index_op_count;
/* Resize, Upsample, DepthToSpace, SpaceToDepth (onnx_ops_resize.c). */
extern const ob_op tg_onnx_resize_ops[];
extern const int tg_onnx_resize_op_count;
/* RandomUniformLike, Bernoulli, RandomNormalLike, RandomNormal,
 * RandomUniform (onnx_ops_random.c). */
extern const ob_op tg_onnx_random_ops[];
extern const int tg_onnx_random_op_count;
/* Scatter, ScatterElements, ScatterND, TopK and Einsum (onnx_scatter.c,
 * onnx_einsum.c's entry is in it). */
extern const ob_op tg_onnx_scatter_ops[];
extern const int tg_onnx_scatter_op_count;
tg_status ob_map_einsum(onnx_builder *b);
/* ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare
 * (onnx_reduce.c). */
extern const ob_op tg_onnx_reduce_ops[];
extern const int tg_onnx_reduce_op_count;
/* Loop, in the one form taken: nn.EmbeddingBag's export (onnx_loop.c). */
extern const ob_op tg_onnx_loop_ops[];
extern const int tg_onnx_loop_op_count;
/* The axes of a Reduce* node over ndim dims as a bit mask (all dims when
 * none are given): an attribute before opset `axes_input` (13 for
 * ReduceSum, 18 for the others), input 1 from it, with
 * noop_with_empty_axes (*noop: no axes given, and the node asks for x
 * itself). */
tg_status ob_reduce_axes(onnx_builder *b, int ndim, int axes_input, unsigned *mask, bool *noop);

#endif
