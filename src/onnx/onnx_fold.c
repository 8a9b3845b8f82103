/* onnx/onnx_fold.c - ops that move shapes and constants: Constant, Shape,
 * Gather, Unsqueeze, Squeeze, Concat, Cast, ConstantOfShape, Range,
 * Identity, Reshape, Expand.
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
    for (int k = 0; k < ndim; k++) {
        if (dim[k] < 0 || dim[k] > ((int64_t)1 << 40))
            return ob_fail(b, TG_ERR_SHAPE, "a constant dimension of %lld", (long long)dim[k]);
        d->n *= dim[k];
    }
    if (d->n > ((int64_t)1 << 31))
        return ob_fail(b, TG_ERR_SHAPE, "a constant of %lld elements", (long long)d->n);
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

static double get(const tg_onnx_data *d, int64_t k)
{
    return d->f ? d->f[k] : (double)d->i[k];
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

/* Gather on a graph tensor with constant indices: one slice per index. */
static tg_status gather_tensor(onnx_builder *b, int axis, const tg_onnx_data *idx)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_INVALID_ARG;
    tg_shape s = tg_tensor_shape(x);
    if (idx->n < 1 || idx->n > 64 || idx->ndim > 1)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "Gather on a tensor takes a scalar or up to 64 "
                       "constant indices (got %lld in %d dims)",
                       (long long)idx->n, idx->ndim);
    tg_tensor *parts[64];
    for (int64_t k = 0; k < idx->n; k++) {
        int64_t i = idx->i[k] < 0 ? idx->i[k] + s.dim[axis] : idx->i[k];
        if (i < 0 || i >= s.dim[axis])
            return ob_fail(b, TG_ERR_INVALID_ARG, "index %lld is out of range for dimension %lld",
                           (long long)idx->i[k], (long long)s.dim[axis]);
        parts[k] = tg_slice(b->g, x, axis, i, i + 1);
    }
    tg_tensor *y = idx->n == 1 ? parts[0] : tg_concat(b->g, parts, (int)idx->n, axis);
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
    const tg_onnx_data *idx = ob_const(b, 1);
    if (!idx)
        return TG_ERR_UNSUPPORTED;
    if (!idx->i)
        return ob_fail(b, TG_ERR_FORMAT, "indices must be integers");
    if (!ob_is_foldable(b, 0))
        return gather_tensor(b, axis, idx);
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
                if (out.f)
                    out.f[w] = x->f[r];
                else
                    out.i[w] = x->i[r];
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
        known *= v;
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
        tg_tensor *xs[64];
        if (n > 64)
            return ob_fail(b, TG_ERR_UNSUPPORTED, "%d inputs (at most 64)", n);
        for (int k = 0; k < n; k++)
            if (!(xs[k] = ob_tensor(b, k)))
                return TG_ERR_UNSUPPORTED;
        return ob_set(b, 0, tg_concat(b->g, xs, n, axis));
    }
    /* folded: only the 1-D shape vectors the exporter builds */
    int64_t total = 0;
    bool is_float = false;
    for (int k = 0; k < n; k++) {
        const tg_onnx_data *d = ob_const(b, k);
        if (!d)
            return TG_ERR_UNSUPPORTED;
        if (d->ndim != 1)
            return ob_fail(b, TG_ERR_UNSUPPORTED, "folding Concat of %d-D constants (1-D only)",
                           d->ndim);
        total += d->n;
        is_float = d->f != NULL;
    }
    tg_onnx_data out;
    TG_TRY(ob_data_new(b, is_float, 1, &total, &out));
    for (int k = 0, w = 0; k < n; k++) {
        const tg_onnx_data *d = ob_const(b, k);
        for (int64_t j = 0; j < d->n; j++, w++) {
            if (out.f)
                out.f[w] = (float)get(d, j);
            else
                out.i[w] = (int64_t)get(d, j);
        }
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

static tg_status map_cast(onnx_builder *b)
{
    int64_t to = ob_attr_int(b, "to", 0);
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
        if (!to_float)
            return ob_fail(b, TG_ERR_UNSUPPORTED, "casting a tensor to %s (only to float types)",
                           tg_onnx_elem_name((int)to));
        return ob_set(b, 0, x);
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
            d.f[k] = (float)get(c, k);
        else
            d.i[k] =
                to == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL ? get(c, k) != 0 : (int64_t)get(c, k);
    }
    return ob_set_const(b, 0, &d);
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
    if (s->n != 1 || l->n != 1 || dl->n != 1 || get(dl, 0) == 0)
        return ob_fail(b, TG_ERR_INVALID_ARG,
                       "start, limit and delta must be scalars, delta "
                       "non-zero");
    double start = get(s, 0), limit = get(l, 0), delta = get(dl, 0);
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

static tg_status map_identity(onnx_builder *b)
{
    if (!ob_is_foldable(b, 0))
        return ob_set(b, 0, ob_tensor(b, 0));
    const tg_onnx_data *c = ob_const(b, 0);
    if (!c)
        return TG_ERR_UNSUPPORTED;
    tg_onnx_data d;
    TG_TRY(copy_data(b, c, &d));
    return ob_set_const(b, 0, &d);
}

/* Expand: NumPy broadcasting of x against the shape. The exporter's
 * zero initial states of recurrent layers (a Constant expanded to the
 * batch) are folded; a graph tensor is broadcast by adding zeros, whose
 * gradient sums back over the broadcast dims. */
static tg_status map_expand(onnx_builder *b)
{
    tg_shape s;
    TG_TRY(ob_shape(b, 0, &s));
    const tg_onnx_data *to = ob_const(b, 1);
    if (!to)
        return TG_ERR_UNSUPPORTED;
    if (!to->i || to->ndim != 1 || to->n > TG_MAX_DIMS)
        return ob_fail(b, TG_ERR_UNSUPPORTED, "the shape must be 1-D integers, at most %d",
                       TG_MAX_DIMS);
    int nd = (int)to->n > s.ndim ? (int)to->n : s.ndim;
    int64_t dim[TG_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        int ds = d - (nd - s.ndim), dt = d - (nd - (int)to->n);
        int64_t a = ds >= 0 ? s.dim[ds] : 1, t = dt >= 0 ? to->i[dt] : 1;
        if (a != t && a != 1 && t != 1)
            return ob_fail(b, TG_ERR_SHAPE, "dimension %d of size %lld cannot expand to %lld", d,
                           (long long)a, (long long)t);
        dim[d] = a == 1 ? t : a;
    }
    tg_shape o = tg_shape_of(nd, dim);
    if (!ob_is_foldable(b, 0)) {
        tg_tensor *x = ob_tensor(b, 0);
        if (!x)
            return TG_ERR_UNSUPPORTED;
        if (tg_shape_equal(o, s))
            return ob_set(b, 0, x);
        return ob_set(b, 0, tg_add(b->g, x, tg_constant(b->g, o, 0.0f)));
    }
    const tg_onnx_data *x = ob_const(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, x->f != NULL, nd, dim, &d));
    d.elem_type = x->elem_type;
    for (int64_t k = 0; k < d.n; k++) {
        /* the source index: each output coordinate, 0 where x has size 1 */
        int64_t rem = k, src = 0, stride = 1;
        for (int dd = nd - 1; dd >= 0; dd--) {
            int64_t c = rem % dim[dd], ds = dd - (nd - s.ndim);
            rem /= dim[dd];
            if (ds < 0)
                continue;
            src += (s.dim[ds] == 1 ? 0 : c) * stride;
            stride *= s.dim[ds];
        }
        if (d.f)
            d.f[k] = x->f[src];
        else
            d.i[k] = x->i[src];
    }
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
    {"Cast", map_cast, "to"},
    {"ConstantOfShape", map_constant_of_shape, "value"},
    {"Range", map_range, ""},
    {"Identity", map_identity, ""},
    {"Expand", map_expand, ""},
};
const int tg_onnx_fold_op_count = (int)(sizeof tg_onnx_fold_ops / sizeof tg_onnx_fold_ops[0]);
