/* onnx/onnx_scatter.c - ONNX's writes at indices and its selections:
 * ScatterElements (and Scatter, its name before opset 11), ScatterND,
 * GatherND and TopK, with Einsum's entry (onnx_einsum.c).
 *
 * The scatters take indices known at import (static, as exporters give
 * them: a constant, an initializer or shape arithmetic), and
 * ScatterElements also indices computed in the graph (scatter_runtime).
 * Each index then is a flat offset into the data, and the scatter is built
 * from graph ops that have kernels, reference kernels and gradients:
 *   reduction add   data + scatter_add(updates at the offsets)
 *   reduction none  where(written, scatter_add(updates at the offsets), data)
 * (tg_scatter_add is gather's gradient op; its own gradient gathers), so
 * the data's gradient is zero where written over and the updates' is the
 * output's gradient gathered at their offsets. Reduction none with an
 * offset written twice (ONNX leaves which update wins undefined) and the
 * reductions mul, max and min are refused by name.
 *
 * GatherND, with static indices too, is one gather of the data's elements
 * at their flat offsets (its gradient scatter-adds them back).
 *
 * TopK is K selections along the axis, each the first index holding the
 * largest (smallest) value not yet taken (reduce, compare, where, reduce,
 * as ArgMax), so equal values come in index order as ONNX's reference
 * gives them; values are the reductions' results, exact. For inference:
 * a gradient flows to the values through the reductions, none to the
 * indices.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"

#include <math.h>
#include <string.h>

/* ---- shared ---------------------------------------------------------------------- */

/* Input i as integer values known at import, failing naming it otherwise. */
static const tg_onnx_data *static_indices(onnx_builder *b, int i)
{
    if (!ob_is_const(b, i)) {
        ob_fail(b, TG_ERR_UNSUPPORTED,
                "the indices must be known at import (static: a constant, an initializer or "
                "computed from shapes), not computed from the model's inputs");
        return NULL;
    }
    const tg_onnx_data *d = ob_const(b, i);
    if (d && !d->i) {
        ob_fail(b, TG_ERR_FORMAT, "the indices are %s; integers are taken",
                tg_onnx_elem_name(d->elem_type));
        return NULL;
    }
    return d;
}

/* Row-major strides of s. */
static void strides_of(tg_shape s, int64_t *st)
{
    int64_t m = 1;
    for (int d = s.ndim - 1; d >= 0; d--) {
        st[d] = m;
        m *= s.dim[d];
    }
}

/* The reduction attribute (opset 16 on): 0 none, 1 add; others refused. */
static tg_status scatter_reduction(onnx_builder *b, bool *add)
{
    char buf[16];
    TG_TRY(ob_attr_in_opsets(b, "reduction", 16, 1 << 30));
    const char *r = ob_attr_string(b, "reduction", buf, sizeof buf);
    *add = !strcmp(r, "add");
    if (*add || !r[0] || !strcmp(r, "none"))
        return TG_OK;
    return ob_fail(b, TG_ERR_UNSUPPORTED, "reduction '%s' is not implemented (none and add are)",
                   r);
}

/* data with updates (n values, in the order of off[]) written at the flat
 * offsets off[] (reduction none) or added there (add). */
static tg_status scatter_offsets(onnx_builder *b, tg_tensor *data, tg_tensor *updates,
                                 const int64_t *off, int64_t n, bool add, bool ints)
{
    tg_graph *g = b->g;
    tg_shape ds = tg_tensor_shape(data);
    int64_t total = tg_shape_numel(ds);
    if (n == 0)
        return ob_set(b, 0, ints ? tg_cast(g, data, TG_I32) : data);
    int64_t *written = tg_calloc((size_t)total, sizeof *written);
    if (!written)
        return ob_fail(b, TG_ERR_NOMEM, "out of memory");
    for (int64_t k = 0; k < n; k++) {
        if (!add && written[off[k]]) {
            tg_free(written);
            return ob_fail(b, TG_ERR_UNSUPPORTED,
                           "element %lld of the data is written twice with reduction none (ONNX "
                           "leaves which update wins undefined; reduction add sums them)",
                           (long long)off[k]);
        }
        written[off[k]] = 1;
    }
    tg_tensor *idx = ob_int_constant(b, "the scatter offsets", tg_shape1(n), off);
    tg_tensor *mask = add ? NULL : ob_int_constant(b, "the written mask", ds, written);
    tg_free(written);
    if (!idx || (!add && !mask))
        return TG_ERR_UNSUPPORTED;
    tg_tensor *flat = tg_reshape(g, updates, tg_shape1(n));
    tg_tensor *s = tg_reshape(g, tg_scatter_add(g, flat, idx, 0, tg_shape1(total)), ds);
    tg_tensor *y = add ? tg_add(g, data, s) : tg_where(g, mask, s, data);
    return ob_set(b, 0, ints && y ? tg_cast(g, y, TG_I32) : y);
}

/* The data and updates as f32 graph tensors (integer data is refused). */
/* data and updates as f32; integer ones (BART's and T5's shift of the ids
 * one place right, written in place into a new int64 tensor) go through f32,
 * exact within 2^24, and *ints says to cast the result back. */
static tg_status scatter_operands(onnx_builder *b, tg_tensor **data, tg_tensor **updates,
                                  bool *ints)
{
    *data = ob_typed_tensor(b, 0);
    *updates = *data ? ob_typed_tensor(b, 2) : NULL;
    if (!*updates)
        return TG_ERR_UNSUPPORTED;
    *ints = tg_tensor_dtype(*data) == TG_I32;
    if (*ints != (tg_tensor_dtype(*updates) == TG_I32))
        return ob_fail(b, TG_ERR_DTYPE, "the data is %s and the updates %s",
                       *ints ? "an integer tensor" : "f32", *ints ? "f32" : "an integer tensor");
    if (*ints) {
        *data = tg_cast(b->g, *data, TG_F32);
        *updates = tg_cast(b->g, *updates, TG_F32);
    }
    if (tg_shape_numel(tg_tensor_shape(*data)) > ((int64_t)1 << 24))
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "data of %lld elements (offsets are exact up to 2^24)",
                       (long long)tg_shape_numel(tg_tensor_shape(*data)));
    return TG_OK;
}

/* ---- ScatterElements, Scatter --------------------------------------------------------- */

/* Indices computed in the graph (a SegNet's unpooling: zeros scattered
 * with a max pool's values at its indices): offsets checked along the
 * axis as the run goes (ob_element_offsets), then the updates and a count
 * of writes scatter-added at them. Reduction none writes the mean of the
 * updates an element gets: ONNX leaves which of several wins undefined
 * (PyTorch's scatter picks any), and an unpooling's repeated writes, where
 * windows overlap, are of one value, which the mean keeps exactly. */
static tg_status scatter_runtime(onnx_builder *b, tg_tensor *data, tg_tensor *updates, int axis,
                                 bool add, bool ints)
{
    tg_graph *g = b->g;
    tg_shape ds = tg_tensor_shape(data), us = tg_tensor_shape(updates);
    int64_t n = tg_shape_numel(us), total = tg_shape_numel(ds);
    tg_tensor *off = ob_element_offsets(b, ds, us, axis);
    if (!off)
        return TG_ERR_UNSUPPORTED;
    off = tg_reshape(g, off, tg_shape1(n));
    tg_tensor *sum =
        tg_scatter_add(g, tg_reshape(g, updates, tg_shape1(n)), off, 0, tg_shape1(total));
    sum = tg_reshape(g, sum, ds);
    if (add) {
        tg_tensor *y = tg_add(g, data, sum);
        return ob_set(b, 0, ints && y ? tg_cast(g, y, TG_I32) : y);
    }
    tg_tensor *one = tg_constant(g, tg_shape_of(0, NULL), 1.0f);
    tg_tensor *count =
        tg_scatter_add(g, tg_constant(g, tg_shape1(n), 1.0f), off, 0, tg_shape1(total));
    count = tg_reshape(g, count, ds);
    tg_tensor *mean = tg_div(g, sum, tg_maximum(g, count, one));
    tg_tensor *y =
        tg_where(g, tg_greater(g, count, tg_constant(g, tg_shape_of(0, NULL), 0.0f)), mean, data);
    return ob_set(b, 0, ints && y ? tg_cast(g, y, TG_I32) : y); /* integer data: back to i32 */
}

/* ScatterElements' indices and updates share one shape, of the data's rank,
 * no larger than the data off the scatter axis (constant or run-time
 * indices alike). */
static tg_status check_indices_shape(onnx_builder *b, tg_shape is, tg_shape us, tg_shape ds,
                                     int axis)
{
    if (!tg_shape_equal(is, us) || is.ndim != ds.ndim)
        return ob_fail(b, TG_ERR_SHAPE,
                       "indices (%d dims) and updates (%d dims) must have one shape, with the "
                       "data's rank (%d)",
                       is.ndim, us.ndim, ds.ndim);
    for (int d = 0; d < ds.ndim; d++)
        if (d != axis && is.dim[d] > ds.dim[d])
            return ob_fail(b, TG_ERR_SHAPE, "indices dim %d is %lld, beyond the data's %lld", d,
                           (long long)is.dim[d], (long long)ds.dim[d]);
    return TG_OK;
}

static tg_status map_scatter_elements(onnx_builder *b)
{
    tg_tensor *data, *updates;
    bool add = false, ints = false;
    TG_TRY(scatter_reduction(b, &add));
    TG_TRY(scatter_operands(b, &data, &updates, &ints));
    tg_shape ds = tg_tensor_shape(data), us = tg_tensor_shape(updates);
    int axis = 0;
    TG_TRY(ob_axis(b, ob_attr_int(b, "axis", 0), ds.ndim, &axis));
    if (!ob_is_const(b, 1)) {
        tg_shape is;
        TG_TRY(ob_shape(b, 1, &is));
        TG_TRY(check_indices_shape(b, is, us, ds, axis));
        return scatter_runtime(b, data, updates, axis, add, ints);
    }
    const tg_onnx_data *idx = static_indices(b, 1);
    if (!idx)
        return TG_ERR_UNSUPPORTED;
    tg_shape is = tg_shape_of(idx->ndim, idx->dim);
    TG_TRY(check_indices_shape(b, is, us, ds, axis));
    int64_t n = idx->n, dst[TG_MAX_DIMS], ist[TG_MAX_DIMS];
    strides_of(ds, dst);
    strides_of(is, ist);
    int64_t *off = tg_malloc((size_t)(n ? n : 1) * sizeof *off);
    if (!off)
        return ob_fail(b, TG_ERR_NOMEM, "out of memory");
    for (int64_t k = 0; k < n; k++) {
        int64_t i = idx->i[k], len = ds.dim[axis], o = 0;
        i = i < 0 ? i + len : i;
        if (i < 0 || i >= len) {
            tg_free(off);
            return ob_fail(b, TG_ERR_INVALID_ARG,
                           "index %lld is out of range for axis %d of size %lld",
                           (long long)idx->i[k], axis, (long long)len);
        }
        for (int d = 0; d < ds.ndim; d++)
            o += (d == axis ? i : (k / ist[d]) % is.dim[d]) * dst[d];
        off[k] = o;
    }
    tg_status s = scatter_offsets(b, data, updates, off, n, add, ints);
    tg_free(off);
    return s;
}

/* ---- MaxUnpool -------------------------------------------------------------------------- */

/* Flat indices into the unpooled shape `from` moved to the same (n, c, h,
 * w) of the larger shape `to` (an output_shape beyond the default: the
 * extra rows and columns are at the end), in f32 (exact within 2^24). */
static tg_tensor *reindex(tg_graph *g, tg_tensor *k, tg_shape from, tg_shape to)
{
    tg_tensor *f = tg_cast(g, k, TG_F32), *off = NULL;
    float stride = 1;
    for (int d = from.ndim - 1; d >= 2; d--) {
        float len = (float)from.dim[d];
        tg_tensor *q = tg_floor(g, tg_scale(g, f, 1.0f / len, 0.0f));
        tg_tensor *r = tg_sub(g, f, tg_scale(g, q, len, 0.0f)); /* the index along d */
        r = tg_scale(g, r, stride, 0.0f);
        off = off ? tg_add(g, off, r) : r;
        stride *= (float)to.dim[d];
        f = q;
    }
    off = tg_add(g, off, tg_scale(g, f, stride, 0.0f)); /* the (n, c) plane */
    return tg_cast(g, off, TG_I32);
}

/* MaxUnpool(X, I [, output_shape]): zeros of the output shape with X's
 * values at the flat indices I (MaxPool's Indices: into the whole N, C, H,
 * W tensor), as scatter_runtime writes them (an element written twice
 * gets the mean, which keeps equal values exactly). The output's spatial
 * size is output_shape's (a constant) or (in - 1) * stride - pads +
 * kernel; the indices are into the latter (the pooled input's), so with a
 * larger output_shape they move to the same place of it (reindex).
 * Indices outside the output stop the run naming them. */
static tg_status map_max_unpool(onnx_builder *b)
{
    tg_graph *g = b->g;
    tg_tensor *x = ob_tensor(b, 0), *i = x ? ob_typed_tensor(b, 1) : NULL;
    if (!i)
        return TG_ERR_UNSUPPORTED;
    tg_shape xs = tg_tensor_shape(x), os = xs, base;
    int nsp = xs.ndim - 2, n = 0;
    const int64_t *ks = ob_attr_ints(b, "kernel_shape", &n), *st = NULL, *pd = NULL;
    if (nsp < 1 || !ks || n != nsp)
        return ob_fail(b, TG_ERR_INVALID_ARG, "kernel_shape must have a value per spatial dim");
    int ns = 0, np = 0;
    st = ob_attr_ints(b, "strides", &ns);
    pd = ob_attr_ints(b, "pads", &np);
    if ((st && ns != nsp) || (pd && np != 2 * nsp))
        return ob_fail(b, TG_ERR_INVALID_ARG, "strides or pads disagree with %d spatial dims", nsp);
    for (int d = 0; d < nsp; d++)
        os.dim[2 + d] =
            (xs.dim[2 + d] - 1) * (st ? st[d] : 1) - (pd ? pd[d] + pd[nsp + d] : 0) + ks[d];
    base = os;
    if (ob_has_input(b, 2)) {
        const tg_onnx_data *o = ob_const(b, 2);
        if (!o || !o->i || o->n != xs.ndim)
            return o ? ob_fail(b, TG_ERR_UNSUPPORTED,
                               "output_shape must be %d integers known at import", xs.ndim)
                     : TG_ERR_UNSUPPORTED;
        for (int d = 0; d < xs.ndim; d++)
            os.dim[d] = o->i[d];
    }
    int64_t total = tg_shape_numel(os), m = tg_shape_numel(xs);
    if (total > ((int64_t)1 << 24) || os.dim[0] != xs.dim[0] || os.dim[1] != xs.dim[1])
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "an output of %lld elements with the input's batch and channels (exact to "
                       "2^24)",
                       (long long)total);
    for (int d = 2; d < os.ndim; d++)
        if (os.dim[d] < base.dim[d])
            return ob_fail(b, TG_ERR_SHAPE, "output_shape is smaller than the pooled input's");
    if (tg_tensor_dtype(i) != TG_I32)
        i = tg_cast(g, i, TG_I32);
    if (!tg_shape_equal(os, base))
        i = reindex(g, i, base, os);
    tg_tensor *off = tg_reshape(g, i, tg_shape1(m));
    tg_tensor *sum = tg_scatter_add(g, tg_reshape(g, x, tg_shape1(m)), off, 0, tg_shape1(total));
    tg_tensor *count =
        tg_scatter_add(g, tg_constant(g, tg_shape1(m), 1.0f), off, 0, tg_shape1(total));
    tg_tensor *one = tg_constant(g, tg_shape_of(0, NULL), 1.0f);
    return ob_set(b, 0, tg_reshape(g, tg_div(g, sum, tg_maximum(g, count, one)), os));
}

/* ---- ScatterND -------------------------------------------------------------------------- */

/* indices [..., q] address slices data[i0, .., iq-1, :, ...]; updates are
 * indices.shape[:-1] + data.shape[q:]. */
static tg_status map_scatter_nd(onnx_builder *b)
{
    tg_tensor *data, *updates;
    bool add = false, ints = false;
    TG_TRY(scatter_reduction(b, &add));
    TG_TRY(scatter_operands(b, &data, &updates, &ints));
    const tg_onnx_data *idx = static_indices(b, 1);
    if (!idx)
        return TG_ERR_UNSUPPORTED;
    tg_shape ds = tg_tensor_shape(data), us = tg_tensor_shape(updates);
    int q = idx->ndim ? (int)idx->dim[idx->ndim - 1] : 0;
    if (idx->ndim < 1 || q < 1 || q > ds.ndim)
        return ob_fail(b, TG_ERR_SHAPE,
                       "indices must be [..., q] with q from 1 to the data's rank %d", ds.ndim);
    /* updates: indices.shape[:-1] + data.shape[q:] */
    bool agree = us.ndim == idx->ndim - 1 + ds.ndim - q;
    for (int d = 0; agree && d < us.ndim; d++)
        agree = us.dim[d] == (d < idx->ndim - 1 ? idx->dim[d] : ds.dim[q + d - (idx->ndim - 1)]);
    if (!agree)
        return ob_fail(b, TG_ERR_SHAPE,
                       "updates have %d dims; they must be indices.shape[:-1] + data.shape[%d:]",
                       us.ndim, q);
    int64_t dst[TG_MAX_DIMS], slice = 1;
    strides_of(ds, dst);
    for (int d = q; d < ds.ndim; d++)
        slice *= ds.dim[d];
    int64_t rows = idx->n / q, n = rows * slice;
    int64_t *off = tg_malloc((size_t)(n ? n : 1) * sizeof *off);
    if (!off)
        return ob_fail(b, TG_ERR_NOMEM, "out of memory");
    for (int64_t r = 0; r < rows; r++) {
        int64_t base = 0;
        for (int d = 0; d < q; d++) {
            int64_t i = idx->i[r * q + d];
            i = i < 0 ? i + ds.dim[d] : i;
            if (i < 0 || i >= ds.dim[d]) {
                tg_free(off);
                return ob_fail(b, TG_ERR_INVALID_ARG,
                               "index %lld is out of range for axis %d of size %lld",
                               (long long)idx->i[r * q + d], d, (long long)ds.dim[d]);
            }
            base += i * dst[d];
        }
        for (int64_t e = 0; e < slice; e++)
            off[r * slice + e] = base + e;
    }
    tg_status s = scatter_offsets(b, data, updates, off, n, add, ints);
    tg_free(off);
    return s;
}

/* ---- GatherND --------------------------------------------------------------------------- */

/* indices [..., q] (the first batch_dims dims the data's) pick slices
 * data[b.., i0, .., iq-1, :, ...]: the result is indices.shape[:-1] +
 * data.shape[batch_dims + q:]. */
static tg_status map_gather_nd(onnx_builder *b)
{
    tg_tensor *data = ob_typed_tensor(b, 0);
    const tg_onnx_data *idx = data ? static_indices(b, 1) : NULL;
    if (!idx)
        return TG_ERR_UNSUPPORTED;
    tg_shape ds = tg_tensor_shape(data);
    int64_t bd = ob_attr_int(b, "batch_dims", 0);
    int q = idx->ndim ? (int)idx->dim[idx->ndim - 1] : 0;
    if (idx->ndim < 1 || bd < 0 || bd >= idx->ndim || q < 1 || bd + q > ds.ndim)
        return ob_fail(b, TG_ERR_SHAPE,
                       "indices must be [..., q] with batch_dims + q at most the data's rank %d",
                       ds.ndim);
    for (int d = 0; d < bd; d++)
        if (idx->dim[d] != ds.dim[d])
            return ob_fail(b, TG_ERR_SHAPE, "batch dim %d is %lld in the indices, %lld in the data",
                           d, (long long)idx->dim[d], (long long)ds.dim[d]);
    if (tg_shape_numel(ds) > ((int64_t)1 << 24))
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "data of %lld elements (offsets are exact up to 2^24)",
                       (long long)tg_shape_numel(ds));
    int64_t dst[TG_MAX_DIMS], slice = 1, per_batch = 1, batch_size = 1;
    strides_of(ds, dst);
    for (int d = (int)bd + q; d < ds.ndim; d++)
        slice *= ds.dim[d];
    for (int d = 0; d < bd; d++)
        batch_size *= ds.dim[d];
    int64_t rows = idx->n / q, n = rows * slice;
    per_batch = rows / batch_size;
    tg_shape os = tg_shape_of(0, NULL);
    for (int d = 0; d < idx->ndim - 1; d++)
        os.dim[os.ndim++] = idx->dim[d];
    for (int d = (int)bd + q; d < ds.ndim && os.ndim < TG_MAX_DIMS; d++)
        os.dim[os.ndim++] = ds.dim[d];
    int64_t *off = tg_malloc((size_t)(n ? n : 1) * sizeof *off);
    if (!off)
        return ob_fail(b, TG_ERR_NOMEM, "out of memory");
    for (int64_t r = 0; r < rows; r++) {
        int64_t base = bd ? (r / per_batch) * dst[bd - 1] : 0;
        for (int d = 0; d < q; d++) {
            int64_t len = ds.dim[bd + d], i = idx->i[r * q + d];
            i = i < 0 ? i + len : i;
            if (i < 0 || i >= len) {
                tg_free(off);
                return ob_fail(b, TG_ERR_INVALID_ARG,
                               "index %lld is out of range for axis %d of size %lld",
                               (long long)idx->i[r * q + d], (int)bd + d, (long long)len);
            }
            base += i * dst[bd + d];
        }
        for (int64_t e = 0; e < slice; e++)
            off[r * slice + e] = base + e;
    }
    tg_tensor *t = ob_int_constant(b, "the element offsets", tg_shape1(n), off);
    tg_free(off);
    tg_graph *g = b->g;
    tg_tensor *flat = tg_reshape(g, data, tg_shape1(tg_shape_numel(ds)));
    return t ? ob_set(b, 0, tg_reshape(g, tg_gather(g, flat, t, 0), os)) : TG_ERR_UNSUPPORTED;
}

/* ---- TopK ------------------------------------------------------------------------------ */

#define TOPK_MAX 64 /* selections built as graph ops: K of them */

/* K: the k attribute before opset 10, input 1 (one integer) from it. */
static tg_status topk_k(onnx_builder *b, int64_t *k)
{
    TG_TRY(ob_attr_in_opsets(b, "k", 1, 10));
    if (ob_opset(b) < 10) {
        *k = ob_attr_int(b, "k", -1);
        return TG_OK;
    }
    const tg_onnx_data *d = ob_const(b, 1);
    if (!d)
        return TG_ERR_UNSUPPORTED;
    if (!d->i || d->n != 1)
        return ob_fail(b, TG_ERR_FORMAT, "K must be one integer");
    *k = d->i[0];
    return TG_OK;
}

static tg_status map_topk(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    tg_graph *g = b->g;
    tg_shape s = tg_tensor_shape(x);
    int axis = 0;
    int64_t k = 0;
    TG_TRY(ob_axis(b, ob_attr_int(b, "axis", -1), s.ndim, &axis));
    TG_TRY(topk_k(b, &k));
    bool largest = ob_attr_int(b, "largest", 1) != 0;
    int64_t len = s.dim[axis];
    if (k < 1 || k > len || k > TOPK_MAX)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "K = %lld along an axis of %lld (1 to the axis' length, at most %d, is "
                       "taken: each selection is built as graph ops)",
                       (long long)k, (long long)len, TOPK_MAX);
    /* sorted=0 lets the order be any: the sorted one is an order */
    unsigned mask = 1u << axis;
    tg_tensor *r = ob_ramp_along(b, s.ndim, axis, len);
    tg_tensor *none = tg_constant(g, tg_shape_of(0, NULL), (float)len);
    tg_tensor *taken = NULL, *vals[TOPK_MAX], *idxs[TOPK_MAX];
    for (int64_t j = 0; r && j < k; j++) {
        /* the extreme among those not taken: the taken ones are pushed past it */
        tg_tensor *far = tg_constant(g, tg_shape_of(0, NULL), largest ? -INFINITY : INFINITY);
        tg_tensor *cur = taken ? tg_where(g, taken, far, x) : x;
        tg_tensor *ext =
            largest ? tg_reduce_max(g, cur, mask, true) : tg_reduce_min(g, cur, mask, true);
        tg_tensor *hit = tg_equal(g, cur, ext);
        hit = taken ? tg_logical_and(g, hit, tg_logical_not(g, taken)) : hit;
        tg_tensor *at = tg_reduce_min(g, tg_where(g, hit, r, none), mask, true);
        tg_tensor *pick = tg_equal(g, r, at);
        taken = taken ? tg_logical_or(g, taken, pick) : pick;
        /* the value at the index picked (the extreme, or x's own where all taken
         * ones were -inf) */
        vals[j] = tg_reduce_sum(g, tg_where(g, pick, x, tg_constant(g, tg_shape_of(0, NULL), 0)),
                                mask, true);
        idxs[j] = at;
    }
    if (tg_graph_status(g) != TG_OK || !r)
        return ob_set(b, 0, NULL);
    TG_TRY(ob_set(b, 0, ob_concat_many(b, vals, (int)k, axis)));
    tg_tensor *ix = ob_concat_many(b, idxs, (int)k, axis);
    return ob_set(b, 1, ix ? tg_cast(g, ix, TG_I32) : NULL);
}

const ob_op tg_onnx_scatter_ops[] = {
    {"ScatterElements", map_scatter_elements, "axis,reduction"},
    {"Scatter", map_scatter_elements, "axis"},
    {"ScatterND", map_scatter_nd, "reduction"},
    {"MaxUnpool", map_max_unpool, "kernel_shape,pads,strides"},
    {"GatherND", map_gather_nd, "batch_dims"},
    {"TopK", map_topk, "axis,k,largest,sorted"},
    {"Einsum", ob_map_einsum, "equation"},
};
const int tg_onnx_scatter_op_count =
    (int)(sizeof tg_onnx_scatter_ops / sizeof tg_onnx_scatter_ops[0]);
