/* onnx/onnx_fold.c - ops that move shapes and constants: Constant, Shape,
 * Gather, Unsqueeze, Squeeze, Concat, Cast, ConstantOfShape, Range,
 * Identity, Reshape, Size (folded on constants, graph ops on tensors); the
 * comparisons, logic, Where, Expand and Tile are in onnx_fold_logic.c.
 *
 * PyTorch exports compute reshape targets with chains like
 * Shape -> Gather -> Unsqueeze -> Concat -> Reshape. All shapes are known at
 * import, so these chains are folded here into constants; the same ops on
 * graph tensors become reshapes, slices and concats.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"

#include <stdio.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------- */

tg_status ob_data_new(onnx_builder *b, bool is_float, int ndim, const int64_t *dim, tg_onnx_data *d)
{
    memset(d, 0, sizeof *d);
    if (ndim > TG_MAX_DIMS)
        return ob_fail(b, TG_ERR_UNSUPPORTED, "a constant of %d dimensions (at most %d)", ndim,
                       TG_MAX_DIMS);
    d->elem_type =
        is_float ? ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT : ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    d->ndim = ndim;
    d->n = 1;
    for (int k = 0; k < TG_MAX_DIMS; k++)
        d->dim[k] = k < ndim ? dim[k] : 1;
    /* Constants computed at import are shape arithmetic, indices and masks:
     * a file that asks for more (a Tile or ConstantOfShape of 2^30) would
     * take minutes and gigabytes before anything else could refuse it. */
    const int64_t max_elements = (int64_t)1 << 24; /* a causal mask of 4096 x 4096 */
    for (int k = 0; k < ndim; k++) {
        if (dim[k] < 0)
            return ob_fail(b, TG_ERR_SHAPE, "a constant dimension of %lld", (long long)dim[k]);
        if (__builtin_mul_overflow(d->n, dim[k], &d->n) || d->n > max_elements)
            return ob_fail(b, TG_ERR_UNSUPPORTED,
                           "a constant computed at import would hold more than 2^24 elements "
                           "(dimension %d is %lld); such values must be graph inputs or "
                           "initializers",
                           k, (long long)dim[k]);
    }
    size_t n = (size_t)(d->n ? d->n : 1);
    if (is_float)
        d->f = tg_calloc(n, sizeof(float));
    else
        d->i = tg_calloc(n, sizeof(int64_t));
    return d->f || d->i ? TG_OK : ob_fail(b, TG_ERR_NOMEM, "out of memory");
}

tg_status ob_axis(onnx_builder *b, int64_t axis, int ndim, int *out)
{
    if (axis < -ndim || axis >= (ndim ? ndim : 1))
        return ob_fail(b, TG_ERR_INVALID_ARG, "axis %lld is out of range for %d dimensions",
                       (long long)axis, ndim);
    *out = (int)(axis < 0 ? axis + ndim : axis);
    return TG_OK;
}

tg_status ob_shape(onnx_builder *b, int i, tg_shape *out)
{
    if (!ob_is_const(b, i)) {
        tg_tensor *t = ob_tensor(b, i);
        if (!t)
            return tg_graph_status(b->g)
                       ? ob_fail(b, tg_graph_status(b->g), "%s", tg_graph_error(b->g))
                       : TG_ERR_INVALID_ARG;
        *out = tg_tensor_shape(t);
        return TG_OK;
    }
    const tg_onnx_data *d = ob_const(b, i);
    if (!d)
        return TG_ERR_INVALID_ARG;
    *out = tg_shape_of(d->ndim, d->dim);
    return TG_OK;
}

static tg_status copy_data(onnx_builder *b, const tg_onnx_data *src, tg_onnx_data *dst)
{
    TG_TRY(ob_data_new(b, src->f != NULL, src->ndim, src->dim, dst));
    dst->elem_type = src->elem_type;
    if (src->f)
        memcpy(dst->f, src->f, (size_t)src->n * sizeof(float));
    else
        memcpy(dst->i, src->i, (size_t)src->n * sizeof(int64_t));
    return TG_OK;
}

/* A constant (or tensor) with a new shape: the shared tail of Reshape,
 * Squeeze, Unsqueeze and Flatten. */
static tg_status reshaped(onnx_builder *b, tg_shape s)
{
    if (!ob_is_foldable(b, 0)) {
        tg_tensor *x = ob_tensor(b, 0);
        return ob_set(b, 0, x ? tg_reshape(b->g, x, s) : NULL);
    }
    const tg_onnx_data *c = ob_const(b, 0);
    if (!c)
        return TG_ERR_INVALID_ARG;
    if (tg_shape_numel(s) != c->n)
        return ob_fail(b, TG_ERR_SHAPE, "cannot reshape %lld elements to %lld", (long long)c->n,
                       (long long)tg_shape_numel(s));
    tg_onnx_data d;
    TG_TRY(copy_data(b, c, &d));
    d.ndim = s.ndim;
    memcpy(d.dim, s.dim, sizeof d.dim);
    return ob_set_const(b, 0, &d);
}

/* Integer list from an attribute (old opsets) or a constant input (new). */
static tg_status int_list(onnx_builder *b, const char *attr, int input, int64_t *out, int *n,
                          int cap)
{
    int na = 0;
    const int64_t *a = ob_attr_ints(b, attr, &na);
    if (a) {
        *n = na;
    } else if (ob_has_input(b, input)) {
        const tg_onnx_data *d = ob_const(b, input);
        if (!d)
            return TG_ERR_UNSUPPORTED;
        if (!d->i)
            return ob_fail(b, TG_ERR_FORMAT, "input %d must be integers", input);
        *n = (int)d->n;
        a = d->i;
    } else {
        *n = -1; /* absent */
        return TG_OK;
    }
    if (*n > cap)
        return ob_fail(b, TG_ERR_UNSUPPORTED, "%s: %d values (at most %d)", attr, *n, cap);
    memcpy(out, a, (size_t)*n * sizeof *out);
    return TG_OK;
}

/* ---- ops ----------------------------------------------------------------- */

static tg_status map_constant(onnx_builder *b)
{
    const Onnx__AttributeProto *a;
    tg_onnx_data d;
    int64_t one = 1;
    if ((a = ob_attr(b, "value")) && a->t) {
        char what[256];
        snprintf(what, sizeof what, "%s: Constant '%s'", b->m->path, b->node->name);
        if (a->t->has_data_location &&
            a->t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
            return ob_fail(b, TG_ERR_UNSUPPORTED, "a Constant with external data");
        TG_TRY(tg_onnx_data_decode(a->t, NULL, 0, what, &d));
    } else if ((a = ob_attr(b, "value_float")) || (a = ob_attr(b, "value_int"))) {
        bool f = a->has_f;
        TG_TRY(ob_data_new(b, f, 0, &one, &d));
        if (f)
            d.f[0] = a->f;
        else
            d.i[0] = a->i;
    } else if ((a = ob_attr(b, "value_floats")) || (a = ob_attr(b, "value_ints"))) {
        bool f = a->n_floats > 0 || !strcmp(a->name, "value_floats");
        int64_t n = f ? (int64_t)a->n_floats : (int64_t)a->n_ints;
        TG_TRY(ob_data_new(b, f, 1, &n, &d));
        for (int64_t k = 0; k < n; k++) {
            if (f)
                d.f[k] = a->floats[k];
            else
                d.i[k] = a->ints[k];
        }
    } else {
        return ob_fail(b, TG_ERR_FORMAT, "no value attribute");
    }
    return ob_set_const(b, 0, &d);
}

static tg_status map_shape(onnx_builder *b)
{
    tg_shape s;
    TG_TRY(ob_shape(b, 0, &s));
    int64_t start = ob_attr_int(b, "start", 0), end = ob_attr_int(b, "end", s.ndim);
    start = start < 0 ? start + s.ndim : start;
    end = end < 0 ? end + s.ndim : end;
    start = start < 0 ? 0 : start > s.ndim ? s.ndim : start;
    end = end < start ? start : end > s.ndim ? s.ndim : end;
    int64_t n = end - start;
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, false, 1, &n, &d));
    for (int64_t k = 0; k < n; k++)
        d.i[k] = s.dim[start + k];
    return ob_set_const(b, 0, &d);
}

/* Constant indices must be in range (the kernel would give NaN rows). */
static tg_status check_indices(onnx_builder *b, const tg_onnx_data *idx, int64_t dim)
{
    for (int64_t k = 0; k < idx->n; k++)
        if (idx->i[k] < -dim || idx->i[k] >= dim)
            return ob_fail(b, TG_ERR_INVALID_ARG, "index %lld is out of range for dimension %lld",
                           (long long)idx->i[k], (long long)dim);
    return TG_OK;
}

/* Gather as a graph op (tg_gather): indices from the model's inputs (token
 * ids), or too many constant ones for slices (position ids [1, S]). Rows
 * of a 2-D weight picked at run time are nn.Embedding's export: its ids
 * are refused negative as PyTorch refuses them (tg_embedding), where
 * ONNX's Gather would count them from the end and pick row V + id. */
static tg_status gather_runtime(onnx_builder *b, int axis)
{
    tg_tensor *x = ob_typed_tensor(b, 0);
    tg_tensor *idx = x ? ob_typed_tensor(b, 1) : NULL;
    if (!idx)
        return TG_ERR_INVALID_ARG;
    if (tg_tensor_dtype(idx) != TG_I32)
        return ob_fail(b, TG_ERR_FORMAT, "indices must be integers, not %s",
                       tg_dtype_name(tg_tensor_dtype(idx)));
    bool embedding =
        axis == 0 && tg_tensor_is_param(x) && tg_tensor_shape(x).ndim == 2 && !ob_is_const(b, 1);
    return ob_set(b, 0, embedding ? tg_embedding(b->g, x, idx) : tg_gather(b->g, x, idx, axis));
}

/* tg_concat takes at most CONCAT_MAX inputs (the graph's TG_MAX_INPUTS):
 * more are concatenated in groups, then the groups (a copy, so exact). */
#define CONCAT_MAX 8
tg_tensor *ob_concat_many(onnx_builder *b, tg_tensor **xs, int n, int axis)
{
    if (n <= CONCAT_MAX)
        return tg_concat(b->g, xs, n, axis);
    tg_tensor *groups[CONCAT_MAX];
    int per = (n + CONCAT_MAX - 1) / CONCAT_MAX, ng = 0;
    for (int k = 0; k < n; k += per) {
        int m = n - k < per ? n - k : per;
        groups[ng++] = m == 1 ? xs[k] : tg_concat(b->g, xs + k, m, axis);
    }
    return ob_concat_many(b, groups, ng, axis);
}

/* Whether the indices are i, i+1, ..., i+n-1 (position ids [0, S)): one slice. */
static bool is_run(const tg_onnx_data *idx, int64_t dim)
{
    for (int64_t k = 0; k < idx->n; k++) {
        int64_t i = idx->i[k] < 0 ? idx->i[k] + dim : idx->i[k];
        int64_t i0 = idx->i[0] < 0 ? idx->i[0] + dim : idx->i[0];
        if (i != i0 + k)
            return false;
    }
    return true;
}

/* Gather on a graph tensor with constant indices: a run of consecutive
 * indices is one slice, a few others one slice each, concatenated. */
static tg_status gather_tensor(onnx_builder *b, int axis, const tg_onnx_data *idx)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_INVALID_ARG;
    tg_shape s = tg_tensor_shape(x);
    bool run = is_run(idx, s.dim[axis]);
    if (idx->n < 1 || (!run && idx->n > 64) || idx->ndim > 1)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "Gather on a tensor takes a scalar, a run of consecutive indices or up to "
                       "%d constant indices (got %lld in %d dims)",
                       64, (long long)idx->n, idx->ndim);
    if (run && idx->n > 1) {
        int64_t i0 = idx->i[0] < 0 ? idx->i[0] + s.dim[axis] : idx->i[0];
        TG_TRY(check_indices(b, idx, s.dim[axis]));
        return ob_set(b, 0, tg_slice(b->g, x, axis, i0, i0 + idx->n));
    }
    tg_tensor *parts[64];
    for (int64_t k = 0; k < idx->n; k++) {
        int64_t i = idx->i[k] < 0 ? idx->i[k] + s.dim[axis] : idx->i[k];
        if (i < 0 || i >= s.dim[axis])
            return ob_fail(b, TG_ERR_INVALID_ARG, "index %lld is out of range for dimension %lld",
                           (long long)idx->i[k], (long long)s.dim[axis]);
        parts[k] = tg_slice(b->g, x, axis, i, i + 1);
    }
    tg_tensor *y = idx->n == 1 ? parts[0] : ob_concat_many(b, parts, (int)idx->n, axis);
    if (idx->ndim == 0) { /* a scalar index drops the axis */
        tg_shape o = s;
        for (int d = axis; d + 1 < s.ndim; d++)
            o.dim[d] = s.dim[d + 1];
        o.dim[--o.ndim] = 1;
        y = tg_reshape(b->g, y, o);
    }
    return ob_set(b, 0, y);
}

static tg_status map_gather(onnx_builder *b)
{
    tg_shape s;
    TG_TRY(ob_shape(b, 0, &s));
    int axis = 0;
    TG_TRY(ob_axis(b, ob_attr_int(b, "axis", 0), s.ndim, &axis));
    if (!ob_is_const(b, 1)) /* token ids, or indices computed from them */
        return gather_runtime(b, axis);
    const tg_onnx_data *idx = ob_const(b, 1);
    if (!idx)
        return TG_ERR_UNSUPPORTED;
    if (!idx->i)
        return ob_fail(b, TG_ERR_FORMAT, "indices must be integers");
    TG_TRY(check_indices(b, idx, s.dim[axis]));
    if (!ob_is_foldable(b, 0))
        return idx->ndim <= 1 && (idx->n <= 64 || is_run(idx, s.dim[axis]))
                   ? gather_tensor(b, axis, idx)
                   : gather_runtime(b, axis);
    const tg_onnx_data *x = ob_const(b, 0);
    int64_t dims[TG_MAX_DIMS * 2];
    int nd = 0;
    for (int d = 0; d < axis; d++)
        dims[nd++] = s.dim[d];
    for (int d = 0; d < idx->ndim; d++)
        dims[nd++] = idx->dim[d];
    for (int d = axis + 1; d < s.ndim; d++)
        dims[nd++] = s.dim[d];
    tg_onnx_data out;
    TG_TRY(ob_data_new(b, x->f != NULL, nd, dims, &out));
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= s.dim[d];
    for (int d = axis + 1; d < s.ndim; d++)
        inner *= s.dim[d];
    for (int64_t o = 0, w = 0; o < outer; o++)
        for (int64_t k = 0; k < idx->n; k++) {
            int64_t i = idx->i[k] < 0 ? idx->i[k] + s.dim[axis] : idx->i[k];
            if (i < 0 || i >= s.dim[axis]) {
                tg_onnx_data_free(&out);
                return ob_fail(b, TG_ERR_INVALID_ARG,
                               "index %lld is out of range for dimension "
                               "%lld",
                               (long long)idx->i[k], (long long)s.dim[axis]);
            }
            for (int64_t j = 0; j < inner; j++, w++) {
                int64_t r = (o * s.dim[axis] + i) * inner + j;
                ob_copy_at(&out, w, x, r);
            }
        }
    return ob_set_const(b, 0, &out);
}

static tg_status map_unsqueeze(onnx_builder *b)
{
    tg_shape s;
    TG_TRY(ob_shape(b, 0, &s));
    int64_t axes[TG_MAX_DIMS];
    int n;
    TG_TRY(int_list(b, "axes", 1, axes, &n, TG_MAX_DIMS));
    int out_nd = s.ndim + (n > 0 ? n : 0);
    if (n <= 0 || out_nd > TG_MAX_DIMS)
        return ob_fail(b, TG_ERR_UNSUPPORTED, "needs 1 to %d axes and at most %d dims in all",
                       TG_MAX_DIMS, TG_MAX_DIMS);
    bool is_new[TG_MAX_DIMS] = {false};
    for (int k = 0; k < n; k++) {
        int a = 0;
        TG_TRY(ob_axis(b, axes[k], out_nd, &a));
        if (is_new[a])
            return ob_fail(b, TG_ERR_INVALID_ARG, "axis %lld is given twice", (long long)axes[k]);
        is_new[a] = true;
    }
    tg_shape o = tg_shape_of(0, NULL);
    o.ndim = out_nd;
    for (int d = 0, src = 0; d < out_nd; d++)
        o.dim[d] = is_new[d] ? 1 : s.dim[src++];
    return reshaped(b, o);
}

static tg_status map_squeeze(onnx_builder *b)
{
    tg_shape s;
    TG_TRY(ob_shape(b, 0, &s));
    int64_t axes[TG_MAX_DIMS];
    int n;
    TG_TRY(int_list(b, "axes", 1, axes, &n, TG_MAX_DIMS));
    bool drop[TG_MAX_DIMS] = {false};
    for (int d = 0; n < 0 && d < s.ndim; d++)
        drop[d] = s.dim[d] == 1;
    for (int k = 0; k < n; k++) {
        int a = 0;
        TG_TRY(ob_axis(b, axes[k], s.ndim, &a));
        if (s.dim[a] != 1)
            return ob_fail(b, TG_ERR_SHAPE, "axis %d has size %lld, not 1", a, (long long)s.dim[a]);
        drop[a] = true;
    }
    tg_shape o = tg_shape_of(0, NULL);
    for (int d = 0; d < s.ndim; d++)
        if (!drop[d])
            o.dim[o.ndim++] = s.dim[d];
    return reshaped(b, o);
}

static tg_status map_reshape(onnx_builder *b)
{
    tg_shape s;
    TG_TRY(ob_shape(b, 0, &s));
    const tg_onnx_data *t = ob_const(b, 1);
    if (!t)
        return TG_ERR_UNSUPPORTED;
    if (!t->i || t->ndim != 1 || t->n > TG_MAX_DIMS)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "the target shape must be 1-D integers with at "
                       "most %d values",
                       TG_MAX_DIMS);
    bool allowzero = ob_attr_int(b, "allowzero", 0) != 0;
    tg_shape o = tg_shape_of(0, NULL);
    o.ndim = (int)t->n;
    int infer = -1;
    int64_t known = 1;
    for (int d = 0; d < o.ndim; d++) {
        int64_t v = t->i[d];
        if (v == 0 && !allowzero) {
            if (d >= s.ndim)
                return ob_fail(b, TG_ERR_SHAPE,
                               "target dim %d is 0 (copy) but the input has "
                               "%d dims",
                               d, s.ndim);
            v = s.dim[d];
        }
        if (v == -1) {
            if (infer >= 0)
                return ob_fail(b, TG_ERR_SHAPE, "two -1 dims in the target shape");
            infer = d;
            v = 1;
        } else if (v < 0) {
            return ob_fail(b, TG_ERR_SHAPE, "target dim %d is %lld", d, (long long)v);
        }
        o.dim[d] = v;
        /* a target dim from the file can be anything: its product must not
         * overflow before the element counts are compared */
        if (__builtin_mul_overflow(known, v, &known) || known > ((int64_t)1 << 40))
            return ob_fail(b, TG_ERR_SHAPE,
                           "the target shape's dims (dim %d is %lld) hold more elements than "
                           "the input's %lld",
                           d, (long long)v, (long long)tg_shape_numel(s));
    }
    if (infer >= 0) {
        if (known == 0 || tg_shape_numel(s) % known)
            return ob_fail(b, TG_ERR_SHAPE,
                           "cannot infer the -1 dim: %lld elements into blocks "
                           "of %lld",
                           (long long)tg_shape_numel(s), (long long)known);
        o.dim[infer] = tg_shape_numel(s) / known;
    }
    return reshaped(b, o);
}

static tg_status map_concat(onnx_builder *b)
{
    int n = (int)b->node->n_input;
    bool all_const = true;
    for (int k = 0; k < n; k++)
        all_const = all_const && ob_is_foldable(b, k);
    tg_shape s;
    TG_TRY(ob_shape(b, 0, &s));
    int axis = 0;
    TG_TRY(ob_axis(b, ob_attr_int(b, "axis", 0), s.ndim, &axis));
    if (!all_const) {
        /* any number: DenseNet-201's last block concatenates 33 maps, and
         * nothing bounds an exporter's */
        tg_tensor **xs = tg_malloc((size_t)n * sizeof *xs);
        if (!xs)
            return ob_fail(b, TG_ERR_NOMEM, "out of memory for %d inputs", n);
        /* run-time integers (nn.EmbeddingBag's offsets and the index
         * count after them) concatenate as i32, integer constants with them */
        bool ints = false;
        for (int k = 0; k < n; k++)
            if (!ob_is_const(b, k)) {
                tg_tensor *t = ob_typed_tensor(b, k);
                ints = ints || (t && tg_tensor_dtype(t) == TG_I32);
            }
        tg_status st = TG_OK;
        for (int k = 0; k < n && st == TG_OK; k++)
            if (!(xs[k] = ints ? ob_typed_tensor(b, k) : ob_tensor(b, k)))
                st = TG_ERR_UNSUPPORTED;
        if (st == TG_OK)
            st = ob_set(b, 0, ob_concat_many(b, xs, n, axis));
        tg_free(xs);
        return st;
    }
    /* folded: the shape vectors the exporter builds, and Swin's shifted-window
     * mask (x.new_zeros then slice assignments: ScatterND and Concat of the
     * pieces, all constants) */
    if (s.ndim == 0)
        return ob_fail(b, TG_ERR_INVALID_ARG, "Concat of scalars (inputs need at least 1 dim)");
    int64_t dims[TG_MAX_DIMS];
    bool is_float = false;
    for (int k = 0; k < n; k++) {
        const tg_onnx_data *d = ob_const(b, k);
        if (!d)
            return TG_ERR_UNSUPPORTED;
        if (d->ndim != s.ndim)
            return ob_fail(b, TG_ERR_SHAPE, "input %d has %d dims, input 0 %d", k, d->ndim, s.ndim);
        for (int e = 0; e < s.ndim; e++)
            if (e != axis && d->dim[e] != s.dim[e])
                return ob_fail(b, TG_ERR_SHAPE, "input %d has %lld on dim %d, input 0 %lld", k,
                               (long long)d->dim[e], e, (long long)s.dim[e]);
        dims[axis] = k ? dims[axis] + d->dim[axis] : d->dim[axis];
        is_float = is_float || d->f != NULL;
    }
    for (int e = 0; e < s.ndim; e++)
        if (e != axis)
            dims[e] = s.dim[e];
    int64_t outer = 1, inner = 1;
    for (int e = 0; e < axis; e++)
        outer *= s.dim[e];
    for (int e = axis + 1; e < s.ndim; e++)
        inner *= s.dim[e];
    tg_onnx_data out;
    TG_TRY(ob_data_new(b, is_float, s.ndim, dims, &out));
    if ((ob_const(b, 0)->f != NULL) == is_float)
        out.elem_type = ob_const(b, 0)->elem_type; /* bool stays bool */
    for (int64_t o = 0, w = 0; o < outer; o++)
        for (int k = 0; k < n; k++) {
            const tg_onnx_data *d = ob_const(b, k);
            int64_t run = d->dim[axis] * inner;
            for (int64_t j = 0; j < run; j++, w++)
                ob_put(&out, w, ob_get(d, o * run + j));
        }
    return ob_set_const(b, 0, &out);
}

static bool float_type(int64_t t)
{
    return t == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
           t == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
           t == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 ||
           t == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
}

static bool int_type(int64_t t)
{
    switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
        return true;
    default:
        return false;
    }
}

/* Cast of a graph tensor (f32 or i32; bool is i32 0/1). Integer types all
 * become i32: the graph has no other (int64 inputs are narrowed on the host,
 * with a range check). To bool is "not equal to zero". */
static tg_status cast_tensor(onnx_builder *b, tg_tensor *x, int64_t to)
{
    if (to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || to == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE)
        return ob_set(b, 0, tg_cast(b->g, x, TG_F32));
    if (int_type(to))
        return ob_set(b, 0, tg_cast(b->g, x, TG_I32));
    if (to == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL) {
        tg_tensor *zero =
            tg_cast(b->g, tg_constant(b->g, tg_shape_of(0, NULL), 0.0f), tg_tensor_dtype(x));
        return ob_set(b, 0, tg_logical_not(b->g, tg_equal(b->g, x, zero)));
    }
    return ob_fail(b, TG_ERR_UNSUPPORTED,
                   "casting a tensor to %s (float, double, half, integer and bool are taken)",
                   tg_onnx_elem_name((int)to));
}

/* Cast input 0 to ONNX type `to` (Cast's attribute, CastLike's input). */
static tg_status cast_to(onnx_builder *b, int64_t to)
{
    if (!ob_is_foldable(b, 0)) {
        tg_tensor *x = ob_tensor(b, 0);
        /* a uint8 input (8-bit images) becomes f32 with the same values;
         * to float16 too: graph tensors are f32, the precision stores halves */
        bool to_float = to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        if (x && tg_tensor_dtype(x) == TG_U8 &&
            (to_float || to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16))
            return ob_set(b, 0, tg_cast_u8(b->g, x));
        /* graph tensors are f32 (the precision option picks what is stored
         * in half): a cast to a half type rounds to its values */
        bool f16 = to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
        if ((f16 || to == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16) && x &&
            tg_tensor_dtype(x) == TG_F32)
            return ob_set(b, 0, tg_cast_half(b->g, x, f16 ? TG_F16 : TG_BF16));
        return x ? cast_tensor(b, x, to) : TG_ERR_INVALID_ARG;
    }
    const tg_onnx_data *c = ob_const(b, 0);
    if (!c)
        return TG_ERR_UNSUPPORTED;
    if (!tg_onnx_elem_size((int)to))
        return ob_fail(b, TG_ERR_UNSUPPORTED, "casting to %s", tg_onnx_elem_name((int)to));
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, float_type(to), c->ndim, c->dim, &d));
    d.elem_type = (int)to;
    for (int64_t k = 0; k < c->n; k++) {
        if (d.f)
            d.f[k] = (float)ob_get(c, k);
        else
            d.i[k] = to == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL ? ob_get(c, k) != 0
                                                               : (int64_t)ob_get(c, k);
    }
    return ob_set_const(b, 0, &d);
}

static tg_status map_cast(onnx_builder *b)
{
    /* saturate (opset 19) changes only casts to float8, which are refused */
    TG_TRY(ob_attr_in_opsets(b, "saturate", 19, 1 << 30));
    return cast_to(b, ob_attr_int(b, "to", 0));
}

/* The ONNX type of input i: a constant's own; a graph tensor's from the
 * model input it is, else from its graph type (f32 is float; an i32 made
 * in the graph could stand for any integer or bool, so it is refused). */
static tg_status input_elem_type(onnx_builder *b, int i, int64_t *out)
{
    if (ob_is_const(b, i)) {
        const tg_onnx_data *d = ob_const(b, i);
        if (!d)
            return TG_ERR_UNSUPPORTED;
        *out = d->elem_type;
        return TG_OK;
    }
    for (int k = 0; k < tg_onnx_input_count(b->m); k++)
        if (!strcmp(tg_onnx_input(b->m, k).name, b->node->input[i])) {
            const Onnx__TypeProto *t = b->m->graph->input[b->m->inputs[k]]->type;
            if (t && t->tensor_type) {
                *out = t->tensor_type->elem_type;
                return TG_OK;
            }
        }
    tg_tensor *x = ob_tensor(b, i);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    if (tg_tensor_dtype(x) != TG_F32)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "input %d ('%s') is an integer tensor computed in the graph, whose ONNX "
                       "type (int32, int64, bool, ...) the graph does not keep",
                       i, b->node->input[i]);
    *out = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    return TG_OK;
}

/* CastLike (opset 15): Cast to the type of input 1. */
static tg_status map_cast_like(onnx_builder *b)
{
    TG_TRY(ob_attr_in_opsets(b, "saturate", 19, 1 << 30));
    int64_t to = 0;
    TG_TRY(input_elem_type(b, 1, &to));
    return cast_to(b, to);
}

static tg_status map_constant_of_shape(onnx_builder *b)
{
    const tg_onnx_data *s = ob_const(b, 0);
    if (!s)
        return TG_ERR_UNSUPPORTED;
    if (!s->i || s->ndim != 1)
        return ob_fail(b, TG_ERR_FORMAT, "the shape must be 1-D integers");
    tg_onnx_data v = {0};
    const Onnx__AttributeProto *a = ob_attr(b, "value");
    if (a && a->t) {
        char what[256];
        snprintf(what, sizeof what, "%s: ConstantOfShape value", b->m->path);
        TG_TRY(tg_onnx_data_decode(a->t, NULL, 0, what, &v));
        if (v.n != 1) {
            tg_onnx_data_free(&v);
            return ob_fail(b, TG_ERR_FORMAT, "value must hold one element");
        }
    }
    tg_onnx_data d;
    tg_status st = ob_data_new(b, !v.i, (int)s->n, s->i, &d);
    for (int64_t k = 0; st == TG_OK && k < d.n; k++) {
        if (d.f)
            d.f[k] = v.f ? v.f[0] : 0.0f;
        else
            d.i[k] = v.i[0];
    }
    if (st == TG_OK && v.elem_type)
        d.elem_type = v.elem_type;
    tg_onnx_data_free(&v);
    return st == TG_OK ? ob_set_const(b, 0, &d) : st;
}

static tg_status map_range(onnx_builder *b)
{
    const tg_onnx_data *s = ob_const(b, 0), *l = s ? ob_const(b, 1) : NULL,
                       *dl = l ? ob_const(b, 2) : NULL;
    if (!dl)
        return TG_ERR_UNSUPPORTED;
    if (s->n != 1 || l->n != 1 || dl->n != 1 || ob_get(dl, 0) == 0)
        return ob_fail(b, TG_ERR_INVALID_ARG,
                       "start, limit and delta must be scalars, delta "
                       "non-zero");
    double start = ob_get(s, 0), limit = ob_get(l, 0), delta = ob_get(dl, 0);
    double steps = (limit - start) / delta;
    int64_t n = steps > 0 ? (int64_t)steps + (steps > (double)(int64_t)steps) : 0;
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, s->f != NULL, 1, &n, &d));
    d.elem_type = s->elem_type;
    for (int64_t k = 0; k < n; k++) {
        if (d.f)
            d.f[k] = (float)(start + (double)k * delta);
        else
            d.i[k] = (int64_t)start + k * (int64_t)delta;
    }
    return ob_set_const(b, 0, &d);
}

/* Size: the element count, known at import from the shape. */
static tg_status map_size(onnx_builder *b)
{
    tg_shape s;
    TG_TRY(ob_shape(b, 0, &s));
    int64_t one = 1;
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, false, 0, &one, &d));
    d.i[0] = tg_shape_numel(s);
    return ob_set_const(b, 0, &d);
}

/* An inference export shares initializers of equal values through Identity
 * (every batch norm's zero running mean): each Identity's output stays an
 * initializer of its own name, so a batch norm still finds its statistics.
 * A training export shares only tensors that are one in PyTorch (tied
 * weights), which must stay one parameter. */
static tg_status map_identity(onnx_builder *b)
{
    int init = ob_initializer(b, 0);
    if (init >= 0 && !tg_graph_training(b->g) && !ob_is_foldable(b, 0))
        return ob_set_initializer(b, 0, init);
    if (!ob_is_foldable(b, 0))
        return ob_set(b, 0, ob_tensor(b, 0));
    const tg_onnx_data *c = ob_const(b, 0);
    if (!c)
        return TG_ERR_UNSUPPORTED;
    tg_onnx_data d;
    TG_TRY(copy_data(b, c, &d));
    return ob_set_const(b, 0, &d);
}

const ob_op tg_onnx_fold_ops[] = {
    {"Constant", map_constant, "value,value_float,value_floats,value_int,value_ints"},
    {"Shape", map_shape, "start,end"},
    {"Gather", map_gather, "axis"},
    {"Unsqueeze", map_unsqueeze, "axes"},
    {"Squeeze", map_squeeze, "axes"},
    {"Reshape", map_reshape, "allowzero"},
    {"Concat", map_concat, "axis"},
    {"Cast", map_cast, "saturate,to"},
    {"CastLike", map_cast_like, "saturate"},
    {"ConstantOfShape", map_constant_of_shape, "value"},
    {"Range", map_range, ""},
    {"Identity", map_identity, ""},
    {"Size", map_size, ""},
};
const int tg_onnx_fold_op_count = (int)(sizeof tg_onnx_fold_ops / sizeof tg_onnx_fold_ops[0]);
