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
 * Indices may be negative (counted from the end, as ONNX and PyTorch allow).
 * An index out of range cannot be an error in a kernel, so it reads no
 * memory: its output row is NaN (f32 data; 0 for i32 data), which the
 * engine's NaN check reports, and its gradient row is dropped. Token ids are
 * checked against the table on the host before they get here (Python's
 * narrowing, the text loader), so this is the last line, not the first.
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
#include <string.h>

/* The three extents a gather reads data as: [outer, dim, inner]. */
typedef struct gather_geom {
    int64_t outer, dim, inner, n_idx;
} gather_geom;

static gather_geom geom_of(tg_shape data, int axis, int64_t n_idx)
{
    gather_geom g = {1, data.dim[axis], 1, n_idx};
    for (int d = 0; d < axis; d++)
        g.outer *= data.dim[d];
    for (int d = axis + 1; d < data.ndim; d++)
        g.inner *= data.dim[d];
    return g;
}

/* The index k of the table, or -1 when it is out of range. */
static inline int64_t table_row(int64_t k, int64_t dim)
{
    if (k < 0)
        k += dim;
    return k >= 0 && k < dim ? k : -1;
}

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

/* ---- forward ---------------------------------------------------------------------- */

typedef struct gather_job {
    gather_geom g;
    const char *data;
    const int32_t *idx;
    char *out;
    size_t elem;
    bool is_float;
} gather_job;

/* Rows [begin, end) of the output, a row being one (outer, index) pair. */
static void gather_rows(void *ctx, int64_t begin, int64_t end, int part)
{
    const gather_job *j = ctx;
    size_t row_bytes = (size_t)j->g.inner * j->elem;
    for (int64_t r = begin; r < end; r++) {
        int64_t o = r / j->g.n_idx, k = table_row(j->idx[r % j->g.n_idx], j->g.dim);
        char *dst = j->out + (size_t)r * row_bytes;
        if (k >= 0) {
            memcpy(dst, j->data + (size_t)(o * j->g.dim + k) * row_bytes, row_bytes);
        } else if (j->is_float) {
            for (int64_t c = 0; c < j->g.inner; c++)
                ((float *)(void *)dst)[c] = NAN;
        } else {
            memset(dst, 0, row_bytes);
        }
    }
    (void)part;
}

static void fwd_gather(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node, *data = node->in[0];
    gather_job j = {geom_of(data->shape, (int)tg_gather_axis(node), tg_numel(node->in[1])),
                    a->in[0],
                    a->in[1],
                    a->out,
                    tg_dtype_size(data->dtype),
                    data->dtype == TG_F32};
    tg_par_for(a->pool, j.g.outer * j.g.n_idx, tg_numel(node), gather_rows, &j);
}

static void ref_gather(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    gather_geom g = geom_of(node->in[0]->shape, (int)tg_gather_axis(node), tg_numel(node->in[1]));
    for (int64_t o = 0; o < g.outer; o++)
        for (int64_t j = 0; j < g.n_idx; j++) {
            int64_t k = table_row((int64_t)a->in[1][j], g.dim);
            double *dst = a->out + (o * g.n_idx + j) * g.inner;
            for (int64_t c = 0; c < g.inner; c++)
                dst[c] = k >= 0 ? a->in[0][(o * g.dim + k) * g.inner + c] : NAN;
        }
}

/* ---- gradient: scatter-add -------------------------------------------------------- */

/* Columns per unit of work: a cache line of floats, so that threads never
 * write the same line. */
enum { COLS = 16 };

/* Each thread sums its columns of the whole table in double (scratch: dim x
 * COLS doubles per thread), so a row gathered thousands of times (a common
 * token) gets its gradient as accurately as the reference's. */
static size_t scratch_gather_bwd(const tg_tensor *node, int n_threads)
{
    int64_t dim = node->shape.dim[tg_gather_axis(node)];
    return (size_t)(n_threads > 0 ? n_threads : 1) * (size_t)dim * COLS * sizeof(double);
}

typedef struct scatter_job {
    gather_geom g;
    const float *dout;
    const int32_t *idx;
    float *out;
    double *acc; /* per part: dim x COLS */
    int64_t col_blocks;
} scatter_job;

static void scatter_units(void *ctx, int64_t begin, int64_t end, int part)
{
    const scatter_job *j = ctx;
    double *acc = j->acc + (size_t)part * (size_t)j->g.dim * COLS;
    for (int64_t u = begin; u < end; u++) {
        int64_t o = u / j->col_blocks, c0 = (u % j->col_blocks) * COLS;
        int64_t w = c0 + COLS < j->g.inner ? COLS : j->g.inner - c0;
        memset(acc, 0, (size_t)j->g.dim * COLS * sizeof(double));
        const float *src = j->dout + o * j->g.n_idx * j->g.inner + c0;
        for (int64_t i = 0; i < j->g.n_idx; i++) {
            int64_t k = table_row(j->idx[i], j->g.dim);
            if (k < 0)
                continue;
            double *dst = acc + k * COLS;
            const float *row = src + i * j->g.inner;
            for (int64_t c = 0; c < w; c++)
                dst[c] += row[c];
        }
        float *table = j->out + o * j->g.dim * j->g.inner + c0;
        for (int64_t k = 0; k < j->g.dim; k++)
            for (int64_t c = 0; c < w; c++)
                table[k * j->g.inner + c] = (float)acc[k * COLS + c];
    }
}

static void fwd_gather_bwd(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    scatter_job j = {geom_of(node->shape, (int)tg_gather_axis(node), tg_numel(node->in[1])),
                     a->in[0],
                     a->in[1],
                     a->out,
                     a->scratch,
                     0};
    j.col_blocks = (j.g.inner + COLS - 1) / COLS;
    tg_par_for(a->pool, j.g.outer * j.col_blocks, tg_numel(node->in[0]) + tg_numel(node),
               scatter_units, &j);
}

static void ref_gather_bwd(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    gather_geom g = geom_of(node->shape, (int)tg_gather_axis(node), tg_numel(node->in[1]));
    for (int64_t k = 0; k < tg_numel(node); k++)
        a->out[k] = 0;
    for (int64_t o = 0; o < g.outer; o++)
        for (int64_t j = 0; j < g.n_idx; j++) {
            int64_t k = table_row((int64_t)a->in[1][j], g.dim);
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
        tg_tensor *in[2] = {dout, node->in[1]};
        din[0] = tg_node_create(g, TG_OP_GATHER_BWD, 2, in, &p);
    }
    return TG_OK; /* indices have no gradient */
}

/* Scatter-add is linear in dout: its gradient gathers the same indices. */
static tg_status bwd_gather_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                                tg_tensor **din)
{
    if (need[0])
        din[0] = tg_gather(g, dout, node->in[1], (int)tg_gather_axis(node));
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
    return tg_gather(g, table, ids, 0);
}

const tg_op_def tg_opdef_GATHER = {.name = "gather",
                                   .infer = infer_gather,
                                   .flops = flops_gather,
                                   .forward = fwd_gather,
                                   .reference = ref_gather,
                                   .backward = bwd_gather,
                                   .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_GATHER_BWD = {.name = "gather_bwd",
                                       .infer = infer_gather_bwd,
                                       .flops = flops_gather_bwd,
                                       .scratch = scratch_gather_bwd,
                                       .forward = fwd_gather_bwd,
                                       .reference = ref_gather_bwd,
                                       .backward = bwd_gather_bwd,
                                       .memory = TG_OP_OWN_STORAGE};
