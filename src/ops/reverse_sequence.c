/* ops/reverse_sequence.c - REVERSE_SEQUENCE (ONNX ReverseSequence, as
 * tf.reverse_sequence): x and lens, an i32 [B] of sequence lengths; along
 * time_axis, the first lens[b] elements of batch b's sequence reversed and
 * the rest copied. Params (ops/reverse_sequence.h): batch_axis, time_axis.
 *
 * The op is defined by its meaning alone: a shape rule, a gradient, FLOPs
 * and the reference kernel, with no fast kernel, no plan hook and no flags.
 * The engine runs the reference on its operands in double precision
 * (tg_op_forward), so it runs on every target and precision as it is
 * (docs/architecture.md, "Adding an op").
 *
 * It is a permutation of each sequence and its own inverse, so its
 * gradient is itself applied to dy with the same lengths.
 */
#include "ops/reverse_sequence.h"

#include "core/error.h"

#include <stdio.h>

static tg_status infer_reverse_sequence(tg_tensor *node)
{
    if (node->n_in != 2)
        return tg_error(TG_ERR_INVALID_ARG, "takes 2 inputs (x and lens), got %d", node->n_in);
    const tg_tensor *x = node->in[0], *lens = node->in[1];
    if (x->dtype != TG_F32)
        return tg_error(TG_ERR_DTYPE, "input 0 ('%s') is %s; this op takes f32", x->name,
                        tg_dtype_name(x->dtype));
    if (lens->dtype != TG_I32)
        return tg_error(TG_ERR_DTYPE, "lens ('%s') is %s; this op takes i32 lengths", lens->name,
                        tg_dtype_name(lens->dtype));
    int64_t b = tg_reverse_sequence_batch_axis(node), t = tg_reverse_sequence_time_axis(node);
    if (x->shape.ndim < 2 || b < 0 || t < 0 || b >= x->shape.ndim || t >= x->shape.ndim || b == t)
        return tg_error(TG_ERR_INVALID_ARG,
                        "batch_axis %lld and time_axis %lld must be two different axes of "
                        "'%s' (rank %d, at least 2)",
                        (long long)b, (long long)t, x->name, x->shape.ndim);
    if (lens->shape.ndim != 1 || lens->shape.dim[0] != x->shape.dim[b])
        return tg_error(TG_ERR_SHAPE,
                        "lens ('%s') must be 1-D with one length per batch (%lld, axis %lld of "
                        "'%s')",
                        lens->name, (long long)x->shape.dim[b], (long long)b, x->name);
    node->dtype = TG_F32;
    node->shape = x->shape;
    return TG_OK;
}

static double flops_none(const tg_tensor *node)
{
    (void)node;
    return 0;
}

/* Each length within [0, T] (tg_op_def.check); the first one outside is
 * named. The reference clamps, so even an unchecked caller reads no memory
 * outside x. */
static bool check_reverse_sequence(const tg_kernel_args *a, char *msg, size_t cap)
{
    const tg_tensor *node = a->node, *lens = node->in[1];
    const int32_t *v = a->in[1];
    int64_t steps = node->shape.dim[tg_reverse_sequence_time_axis(node)];
    for (int64_t k = 0; v && k < lens->shape.dim[0]; k++)
        if (v[k] < 0 || v[k] > steps) {
            snprintf(msg, cap,
                     "lens '%s' holds %d at [%lld]: a length must be in [0, %lld] (axis %lld of "
                     "'%s')",
                     lens->name, v[k], (long long)k, (long long)steps,
                     (long long)tg_reverse_sequence_time_axis(node), node->in[0]->name);
            return false;
        }
    return true;
}

static void ref_reverse_sequence(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    tg_shape s = node->shape;
    int b_ax = (int)tg_reverse_sequence_batch_axis(node);
    int t_ax = (int)tg_reverse_sequence_time_axis(node);
    int64_t stride[TG_MAX_DIMS], n = tg_numel(node);
    stride[s.ndim - 1] = 1;
    for (int d = s.ndim - 2; d >= 0; d--)
        stride[d] = stride[d + 1] * s.dim[d + 1];
    for (int64_t i = 0; i < n; i++) {
        int64_t b = i / stride[b_ax] % s.dim[b_ax], t = i / stride[t_ax] % s.dim[t_ax];
        double len = a->in[1][b];
        int64_t l = len < 0 ? 0 : len > (double)s.dim[t_ax] ? s.dim[t_ax] : (int64_t)len;
        int64_t src = t < l ? i + (l - 1 - 2 * t) * stride[t_ax] : i;
        a->out[i] = a->in[0][src];
    }
}

/* Its own inverse: dx is dy reversed the same way; lens has no gradient. */
static tg_status bwd_reverse_sequence(tg_graph *g, tg_tensor *node, tg_tensor *dout,
                                      const bool *need, tg_tensor **din)
{
    if (!need[0])
        return TG_OK;
    tg_tensor *in[2] = {dout, node->in[1]};
    din[0] = tg_node_create(g, TG_OP_REVERSE_SEQUENCE, 2, in, &node->p);
    return din[0] ? TG_OK : tg_graph_status(g);
}

tg_tensor *tg_reverse_sequence(tg_graph *g, tg_tensor *x, tg_tensor *lens, int batch_axis,
                               int time_axis)
{
    tg_node_params p = {0};
    tg_reverse_sequence_set_batch_axis(&p, batch_axis);
    tg_reverse_sequence_set_time_axis(&p, time_axis);
    tg_tensor *in[2] = {x, lens};
    return tg_node_create(g, TG_OP_REVERSE_SEQUENCE, 2, in, &p);
}

const tg_op_def tg_opdef_REVERSE_SEQUENCE = {.infer = infer_reverse_sequence,
                                             .flops = flops_none,
                                             .reference = ref_reverse_sequence,
                                             .backward = bwd_reverse_sequence,
                                             .memory = TG_OP_OWN_STORAGE,
                                             .check = check_reverse_sequence};
