/* ops/slice_step.c - strided slicing along one axis (ONNX Slice with steps,
 * Python's x[start:end:step], negative steps included): SLICE_STEP and its
 * gradient SLICE_STEP_BWD, and the builder tg_slice_ex, which reads start
 * and end as ONNX does and builds a plain SLICE when the step is 1.
 *
 * Params (ops/shape.h): axis (normalised to >= 0), start (the first index
 * read), step (not 0), count (>= 1): output row r along the axis is input
 * row start + r * step. SLICE_STEP_BWD adds len, the input's length along
 * the axis, and scatters dy's rows back (distinct rows, so no
 * two land on the same place; the others are zero).
 */
#include "ops/broadcast.h"
#include "ops/shape.h"

#include "core/error.h"

/* ---- shape rule ------------------------------------------------------------------- */

static tg_status infer_slice_step(tg_tensor *node)
{
    if (node->n_in != 1)
        return tg_error(TG_ERR_INVALID_ARG, "takes 1 input, got %d", node->n_in);
    bool bwd = node->op == TG_OP_SLICE_STEP_BWD;
    tg_shape in = node->in[0]->shape;
    if (tg_slice_step_axis(node) < 0 || tg_slice_step_axis(node) >= in.ndim)
        return tg_error(TG_ERR_INVALID_ARG, "axis %lld out of range for %d dimensions",
                        (long long)tg_slice_step_axis(node), in.ndim);
    int axis = (int)tg_slice_step_axis(node);
    int64_t len = bwd ? tg_slice_step_len(node) : in.dim[axis],
            last = tg_slice_step_start(node) +
                   (tg_slice_step_count(node) - 1) * tg_slice_step_step(node);
    if (tg_slice_step_step(node) == 0 || tg_slice_step_count(node) < 1 ||
        tg_slice_step_start(node) < 0 || tg_slice_step_start(node) >= len || last < 0 ||
        last >= len)
        return tg_error(TG_ERR_INVALID_ARG,
                        "%lld rows from %lld by step %lld do not fit axis %d of length %lld",
                        (long long)tg_slice_step_count(node), (long long)tg_slice_step_start(node),
                        (long long)tg_slice_step_step(node), axis, (long long)len);
    if (bwd && in.dim[axis] != tg_slice_step_count(node))
        return tg_error(TG_ERR_SHAPE, "dy has %lld rows along axis %d, the slice %lld",
                        (long long)in.dim[axis], axis, (long long)tg_slice_step_count(node));
    node->dtype = node->in[0]->dtype;
    node->shape = in;
    node->shape.dim[axis] = bwd ? len : tg_slice_step_count(node);
    return TG_OK;
}

static double flops_none(const tg_tensor *node)
{
    return 0;
}

/* ---- reference --------------------------------------------------------------------- */

static void ref_slice_step(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    bool scatter = node->op == TG_OP_SLICE_STEP_BWD;
    const tg_tensor *big = scatter ? node : node->in[0];
    int64_t outer, inner, len = big->shape.dim[tg_slice_step_axis(node)];
    tg_outer_inner(big->shape, (int)tg_slice_step_axis(node), &outer, &inner);
    if (scatter)
        for (int64_t k = 0; k < tg_numel(node); k++)
            a->out[k] = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t r = 0; r < tg_slice_step_count(node); r++)
            for (int64_t q = 0; q < inner; q++) {
                int64_t bi =
                    (o * len + tg_slice_step_start(node) + r * tg_slice_step_step(node)) * inner +
                    q;
                int64_t si = (o * tg_slice_step_count(node) + r) * inner + q;
                if (scatter)
                    a->out[bi] = a->in[0][si];
                else
                    a->out[si] = a->in[0][bi];
            }
}

/* ---- builder and gradient rules --------------------------------------------------------- */

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

tg_tensor *tg_slice_ex(tg_graph *g, tg_tensor *x, int axis, int64_t start, int64_t end,
                       int64_t step)
{
    if (!x)
        return tg_node_create(g, TG_OP_SLICE_STEP, 1, &x, NULL); /* records the NULL input */
    int ndim = x->shape.ndim, a = axis < 0 ? axis + ndim : axis;
    if (a < 0 || a >= ndim)
        return tg_graph_fail(g, TG_ERR_INVALID_ARG,
                             "slice: axis %d out of range for '%s' with %d dimensions", axis,
                             x->name, ndim);
    if (step == 0)
        return tg_graph_fail(g, TG_ERR_INVALID_ARG, "slice: step 0 along axis %d of '%s'", axis,
                             x->name);
    /* ONNX Slice: negative indices count from the end, then clamp */
    int64_t n = x->shape.dim[a], count;
    /* a step as long as the axis takes one element at most: clamping it keeps
     * the arithmetic below from overflowing on INT64_MAX-like steps */
    step = step > n ? n : step < -n ? -n : step;
    start = start < 0 ? start + n : start;
    end = end < 0 ? end + n : end;
    if (step > 0) {
        start = clamp64(start, 0, n);
        end = clamp64(end, 0, n);
        count = end > start ? (end - start + step - 1) / step : 0;
    } else {
        start = clamp64(start, 0, n - 1);
        end = clamp64(end, -1, n - 1);
        count = start > end ? (start - end - step - 1) / -step : 0;
    }
    if (count < 1)
        return tg_graph_fail(g, TG_ERR_SHAPE,
                             "slice: [%lld:%lld:%lld] selects nothing from axis %d (length %lld) "
                             "of '%s'",
                             (long long)start, (long long)end, (long long)step, axis, (long long)n,
                             x->name);
    if (step == 1)
        return tg_slice(g, x, a, start, start + count);
    tg_node_params p = {0};
    tg_slice_step_set_axis(&p, a), tg_slice_step_set_start(&p, start);
    tg_slice_step_set_step(&p, step), tg_slice_step_set_count(&p, count);
    return tg_node_create(g, TG_OP_SLICE_STEP, 1, &x, &p);
}

static tg_status bwd_slice_step(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                                tg_tensor **din)
{
    tg_node_params p = node->p;
    tg_slice_step_set_len(&p, node->in[0]->shape.dim[tg_slice_step_axis(node)]);
    din[0] = tg_node_create(g, TG_OP_SLICE_STEP_BWD, 1, &dout, &p);
    return din[0] ? TG_OK : tg_graph_status(g);
}

static tg_status bwd_slice_step_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                                    tg_tensor **din)
{
    tg_node_params p = node->p;
    tg_slice_step_set_len(&p, 0);
    din[0] = tg_node_create(g, TG_OP_SLICE_STEP, 1, &dout, &p);
    return din[0] ? TG_OK : tg_graph_status(g);
}

const tg_op_def tg_opdef_SLICE_STEP = {.infer = infer_slice_step,
                                       .flops = flops_none,
                                       .reference = ref_slice_step,
                                       .backward = bwd_slice_step,
                                       .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_SLICE_STEP_BWD = {.infer = infer_slice_step,
                                           .flops = flops_none,
                                           .reference = ref_slice_step,
                                           .backward = bwd_slice_step_bwd,
                                           .memory = TG_OP_OWN_STORAGE};
