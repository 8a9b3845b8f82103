/* ops/gather.c - GATHER (ONNX Gather, nn.Embedding) and its gradient
 * GATHER_BWD, the scatter-add into the table.
 *
 *   GATHER(data [..., D_axis, ...], indices i32 [any])    (params: ops/gather.h)
 *     out = data[:axis] + indices.shape + data[axis+1:]
 *   GATHER_BWD(dout, indices)    axis, and data's shape
 *     out = zeros(data.shape); out[.., indices[j], ..] += dout[.., j, ..]
 *
 * GATHER_BWD is also ONNX's scatter with reduction add (tg_scatter_add): its
 * own gradient gathers the same indices.
 *
 * Indices may be negative (counted from the end, as ONNX's Gather allows),
 * except ids into an embedding (the ids param: tg_embedding, nn.Embedding,
 * which PyTorch refuses negative). An index out of range is an error: the
 * op's check (tg_op_def.check) finds it before the kernel runs and the
 * engine stops the run naming the indices, the value, its position and the
 * valid range. The kernel itself still reads no memory for it (its output
 * row is NaN for f32 data, 0 for i32, its gradient row dropped), for the
 * callers that run kernels without the engine's check.
 *
 * The gradient is deterministic: every output column is summed over the
 * indices in their order by one thread (threads split the columns), so
 * replicated, pipelined and single-device runs give the same bits; it is
 * summed in double, so a row gathered many times is as accurate as the
 * reference's.
 */
#include "ops/broadcast.h"
#include "ops/gather.h"

#include "core/error.h"

#include <math.h>
#include <stdio.h>

static tg_status gathered_shape(tg_shape data, int axis, tg_shape idx, tg_shape *out)
{
    if (data.ndim - 1 + idx.ndim > TG_MAX_DIMS)
        return tg_error(TG_ERR_SHAPE, "the result would have %d dimensions (at most %d)",
                        data.ndim - 1 + idx.ndim, TG_MAX_DIMS);
    tg_shape s = {0};
    for (int d = 0; d < axis; d++)
        s.dim[s.ndim++] = data.dim[d];
    for (int d = 0; d < idx.ndim; d++)
        s.dim[s.ndim++] = idx.dim[d];
    for (int d = axis + 1; d < data.ndim; d++)
        s.dim[s.ndim++] = data.dim[d];
    *out = s;
    return TG_OK;
}

static tg_status check_indices(const tg_tensor *node, int k)
{
    const tg_tensor *idx = node->in[k];
    if (idx->dtype != TG_I32)
        return tg_error(TG_ERR_DTYPE, "indices ('%s') are %s; gather takes i32 indices", idx->name,
                        tg_dtype_name(idx->dtype));
    return TG_OK;
}

static tg_status infer_gather(tg_tensor *node)
{
    if (node->n_in != 2)
        return tg_error(TG_ERR_INVALID_ARG, "takes 2 inputs (data, indices), got %d", node->n_in);
    const tg_tensor *data = node->in[0];
    TG_TRY(check_indices(node, 1));
    if (data->dtype != TG_F32 && data->dtype != TG_I32)
        return tg_error(TG_ERR_DTYPE, "data ('%s') is %s; gather takes f32 or i32 data", data->name,
                        tg_dtype_name(data->dtype));
    int64_t axis = tg_gather_axis(node);
    if (data->shape.ndim < 1 || axis < 0 || axis >= data->shape.ndim)
        return tg_error(TG_ERR_INVALID_ARG, "axis %lld is out of range for %d dimensions",
                        (long long)axis, data->shape.ndim);
    node->dtype = data->dtype;
    return gathered_shape(data->shape, (int)axis, node->in[1]->shape, &node->shape);
}

static tg_status infer_gather_bwd(tg_tensor *node)
{
    if (node->n_in != 2)
        return tg_error(TG_ERR_INVALID_ARG, "takes 2 inputs (dout, indices), got %d", node->n_in);
    TG_TRY(check_indices(node, 1));
    if (node->in[0]->dtype != TG_F32)
        return tg_error(TG_ERR_DTYPE, "dout is %s; the gather gradient takes f32",
                        tg_dtype_name(node->in[0]->dtype));
    TG_TRY(tg_params_check_shape(&node->p, TG_GATHER_SHAPE_AT));
    tg_shape data = tg_params_get_shape(&node->p, TG_GATHER_SHAPE_AT), want;
    int64_t axis = tg_gather_axis(node);
    if (axis < 0 || axis >= data.ndim)
        return tg_error(TG_ERR_INVALID_ARG, "axis %lld is out of range for %d dimensions",
                        (long long)axis, data.ndim);
    TG_TRY(gathered_shape(data, (int)axis, node->in[1]->shape, &want));
    if (!tg_shape_equal(want, node->in[0]->shape)) {
        char a[96], b[96];
        return tg_error(TG_ERR_SHAPE, "dout is %s, expected %s",
                        tg_shape_str(node->in[0]->shape, a, sizeof a),
                        tg_shape_str(want, b, sizeof b));
    }
    node->dtype = TG_F32;
    node->shape = data;
    return TG_OK;
}

static double flops_gather(const tg_tensor *node)
{
    (void)node;
    return 0; /* a copy */
}

static double flops_gather_bwd(const tg_tensor *node)
{
    return (double)tg_numel(node->in[0]); /* one add per gradient element */
}

/* ---- the indices' check ------------------------------------------------------------ */

/* Element k of a tensor of shape s as "i, j, ..." (its position). */
static void position_str(tg_shape s, int64_t k, char *at, size_t cap)
{
    int64_t pos[TG_MAX_DIMS];
    for (int d = s.ndim - 1; d >= 0; d--) {
        pos[d] = s.dim[d] ? k % s.dim[d] : 0;
        k = s.dim[d] ? k / s.dim[d] : 0;
    }
    size_t used = 0;
    at[0] = 0;
    for (int d = 0; d < s.ndim && used < cap; d++)
        used += (size_t)snprintf(at + used, cap - used, "%s%lld", d ? ", " : "", (long long)pos[d]);
}

/* The message for index value v at element k of the indices. */
static void bad_index_msg(const tg_tensor *node, int64_t k, int32_t v, char *msg, size_t cap)
{
    const tg_tensor *idx = node->in[1];
    int axis = (int)tg_gather_axis(node);
    tg_shape table = node->op == TG_OP_GATHER ? node->in[0]->shape : node->shape;
    const char *name = node->op == TG_OP_GATHER ? node->in[0]->name : "the table";
    long long dim = (long long)table.dim[axis];
    char at[96], where[160];
    position_str(idx->shape, k, at, sizeof at);
    if (tg_gather_ids(node)) {
        snprintf(msg, cap,
                 "ids '%s' hold %d at [%s]: '%s' has %lld rows, so ids must be in [0, %lld) "
                 "(negative ids are refused, as by nn.Embedding)",
                 idx->name, v, at, name, dim, dim);
        return;
    }
    if (table.ndim == 1)
        snprintf(where, sizeof where, "'%s' has %lld entries", name, dim);
    else
        snprintf(where, sizeof where, "axis %d of '%s' has size %lld", axis, name, dim);
    snprintf(msg, cap, "indices '%s' hold %d at [%s]: %s, so indices must be in [%lld, %lld)",
             idx->name, v, at, where, -dim, dim);
}

/* Every index of the run within the axis (tg_op_def.check); the first one
 * outside is named. The indices are small next to the data they select,
 * so the scan costs little beside the copy. */
static bool check_gather(const tg_kernel_args *a, char *msg, size_t cap)
{
    const tg_tensor *node = a->node;
    const int32_t *v = a->in[1];
    tg_shape table = node->op == TG_OP_GATHER ? node->in[0]->shape : node->shape;
    int64_t n = tg_numel(node->in[1]), dim = table.dim[tg_gather_axis(node)];
    bool ids = tg_gather_ids(node) != 0;
    for (int64_t k = 0; v && k < n; k++)
        if (tg_gather_table_row(v[k], dim, ids) < 0) {
            bad_index_msg(node, k, v[k], msg, cap);
            return false;
        }
    return true;
}

/* ---- reference kernels ------------------------------------------------------------------ */

static void ref_gather(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    tg_gather_geom g =
        tg_gather_geom_of(node->in[0]->shape, (int)tg_gather_axis(node), tg_numel(node->in[1]));
    for (int64_t o = 0; o < g.outer; o++)
        for (int64_t j = 0; j < g.n_idx; j++) {
            int64_t k = tg_gather_table_row((int64_t)a->in[1][j], g.dim, tg_gather_ids(node) != 0);
            double *dst = a->out + (o * g.n_idx + j) * g.inner;
            for (int64_t c = 0; c < g.inner; c++)
                dst[c] = k >= 0 ? a->in[0][(o * g.dim + k) * g.inner + c] : NAN;
        }
}

static void ref_gather_bwd(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    tg_gather_geom g =
        tg_gather_geom_of(node->shape, (int)tg_gather_axis(node), tg_numel(node->in[1]));
    for (int64_t k = 0; k < tg_numel(node); k++)
        a->out[k] = 0;
    for (int64_t o = 0; o < g.outer; o++)
        for (int64_t j = 0; j < g.n_idx; j++) {
            int64_t k = tg_gather_table_row((int64_t)a->in[1][j], g.dim, tg_gather_ids(node) != 0);
            for (int64_t c = 0; k >= 0 && c < g.inner; c++)
                a->out[(o * g.dim + k) * g.inner + c] += a->in[0][(o * g.n_idx + j) * g.inner + c];
        }
}

static tg_status bwd_gather(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                            tg_tensor **din)
{
    if (need[0]) {
        tg_node_params p = {{0}, {0}};
        tg_gather_set_axis(&p, tg_gather_axis(node));
        tg_params_put_shape(&p, TG_GATHER_SHAPE_AT, node->in[0]->shape);
        tg_gather_set_ids(&p, tg_gather_ids(node));
        tg_tensor *in[2] = {dout, node->in[1]};
        din[0] = tg_node_create(g, TG_OP_GATHER_BWD, 2, in, &p);
    }
    return TG_OK; /* indices have no gradient */
}

/* Scatter-add is linear in dout: its gradient gathers the same indices. */
static tg_status bwd_gather_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                                tg_tensor **din)
{
    if (need[0]) {
        din[0] = tg_gather(g, dout, node->in[1], (int)tg_gather_axis(node));
        if (din[0] && tg_gather_ids(node))
            tg_gather_set_ids(&din[0]->p, 1);
    }
    return TG_OK;
}

tg_tensor *tg_scatter_add(tg_graph *g, tg_tensor *updates, tg_tensor *indices, int axis,
                          tg_shape shape)
{
    tg_node_params p = {{0}, {0}};
    tg_gather_set_axis(&p, axis < 0 ? axis + shape.ndim : axis);
    if (shape.ndim < 1 || shape.ndim > TG_MAX_DIMS)
        return tg_graph_fail(g, TG_ERR_SHAPE, "scatter_add: the result has %d dims (1 to %d)",
                             shape.ndim, TG_MAX_DIMS);
    tg_params_put_shape(&p, TG_GATHER_SHAPE_AT, shape);
    return tg_node_create(g, TG_OP_GATHER_BWD, 2, (tg_tensor *[]){updates, indices}, &p);
}

tg_tensor *tg_gather(tg_graph *g, tg_tensor *data, tg_tensor *indices, int axis)
{
    tg_node_params p = {{0}, {0}};
    int ndim = data ? data->shape.ndim : 0;
    tg_gather_set_axis(&p, axis < 0 ? axis + ndim : axis);
    tg_tensor *in[2] = {data, indices};
    return tg_node_create(g, TG_OP_GATHER, 2, in, &p);
}

tg_tensor *tg_embedding(tg_graph *g, tg_tensor *table, tg_tensor *ids)
{
    tg_tensor *t = tg_gather(g, table, ids, 0);
    if (t)
        tg_gather_set_ids(&t->p, 1);
    return t;
}

const tg_op_def tg_opdef_GATHER = {.infer = infer_gather,
                                   .flops = flops_gather,
                                   .reference = ref_gather,
                                   .backward = bwd_gather,
                                   .memory = TG_OP_OWN_STORAGE,
                                   .check = check_gather};
const tg_op_def tg_opdef_GATHER_BWD = {.infer = infer_gather_bwd,
                                       .flops = flops_gather_bwd,
                                       .reference = ref_gather_bwd,
                                       .backward = bwd_gather_bwd,
                                       .memory = TG_OP_OWN_STORAGE,
                                       .check = check_gather};
