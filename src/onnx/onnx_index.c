/* onnx/onnx_index.c - the index and mask ops exporters emit around token
 * models: Trilu (causal masks), CumSum (position ids from a padding mask),
 * ArgMax and ArgMin (predictions), OneHot, Mod, GatherElements, and the
 * masks of values: Hardmax, IsNaN, IsInf, EyeLike.
 *
 * Each folds when its input is known at import (a constant or a buffer),
 * and otherwise is built from graph ops that already have kernels,
 * reference kernels and gradients, so nothing here needs a kernel of its
 * own:
 *   Trilu(x)      where(constant mask, x, 0)
 *   CumSum(x)     x times a constant triangular matrix along the axis
 *   ArgMax(x)     the smallest index i with x[i] == max(x) (reduce, compare, where, reduce)
 *   OneHot(i)     where(i == arange(depth), on, off)
 *   Hardmax(x)    arange == ArgMax(x) (the first index of the maximum), as f32
 *   IsNaN(x)      not(x == x); IsInf(x): x == +inf, x == -inf or either
 * Integers go through f32 in these (exact within 2^24: indices, positions,
 * lengths); the results are i32 where ONNX's are integers.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A scalar integer input (k of Trilu, axis of CumSum, depth of OneHot). */
static tg_status scalar_int(onnx_builder *b, int i, int64_t dflt, int64_t *out)
{
    *out = dflt;
    if (!ob_has_input(b, i))
        return TG_OK;
    const tg_onnx_data *d = ob_const(b, i);
    if (!d)
        return TG_ERR_UNSUPPORTED;
    if (d->n != 1)
        return ob_fail(b, TG_ERR_INVALID_ARG, "input %d must be one value, not %lld", i,
                       (long long)d->n);
    *out = (int64_t)llround(ob_get(d, 0));
    return TG_OK;
}

/* x as an f32 graph tensor (integers widened exactly). */
static tg_tensor *as_f32(onnx_builder *b, int i)
{
    tg_tensor *t = ob_typed_tensor(b, i);
    return t ? tg_cast(b->g, t, TG_F32) : NULL;
}

/* An f32 constant of `shape` with values v (doubles). */
static tg_tensor *f32_constant(onnx_builder *b, tg_shape shape, const double *v)
{
    int64_t n = tg_shape_numel(shape);
    float *f = tg_malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!f) {
        ob_fail(b, TG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int64_t k = 0; k < n; k++)
        f[k] = (float)v[k];
    tg_tensor *t = tg_constant_data(b->g, "constant", shape, f);
    tg_free(f);
    return t;
}

tg_tensor *ob_ramp_along(onnx_builder *b, int ndim, int axis, int64_t len)
{
    double *ramp = tg_malloc((size_t)len * sizeof *ramp);
    if (!ramp) {
        ob_fail(b, TG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < len; i++)
        ramp[i] = (double)i;
    tg_shape rs = tg_shape_of(0, NULL);
    rs.ndim = ndim;
    for (int a = 0; a < ndim; a++)
        rs.dim[a] = a == axis ? len : 1;
    tg_tensor *t = f32_constant(b, rs, ramp);
    tg_free(ramp);
    return t;
}

/* ---- Trilu ------------------------------------------------------------------- */

static bool trilu_keeps(bool upper, int64_t k, int64_t row, int64_t col)
{
    return upper ? col - row >= k : col - row <= k;
}

static tg_status map_trilu(onnx_builder *b)
{
    tg_shape s;
    TG_TRY(ob_shape(b, 0, &s));
    int64_t k = 0;
    TG_TRY(scalar_int(b, 1, 0, &k));
    bool upper = ob_attr_int(b, "upper", 1) != 0;
    if (s.ndim < 2)
        return ob_fail(b, TG_ERR_SHAPE, "Trilu takes at least 2 dimensions, not %d", s.ndim);
    int64_t rows = s.dim[s.ndim - 2], cols = s.dim[s.ndim - 1];
    if (ob_is_foldable(b, 0)) {
        const tg_onnx_data *x = ob_const(b, 0);
        if (!x)
            return TG_ERR_UNSUPPORTED;
        tg_onnx_data d;
        TG_TRY(ob_data_new(b, x->f != NULL, x->ndim, x->dim, &d));
        d.elem_type = x->elem_type;
        for (int64_t e = 0; e < d.n; e++) {
            int64_t col = e % cols, row = (e / cols) % rows;
            ob_put(&d, e, trilu_keeps(upper, k, row, col) ? ob_get(x, e) : 0);
        }
        return ob_set_const(b, 0, &d);
    }
    tg_tensor *x = ob_typed_tensor(b, 0);
    if (!x)
        return TG_ERR_INVALID_ARG;
    if (rows * cols > ((int64_t)1 << 26))
        return ob_fail(b, TG_ERR_UNSUPPORTED, "a Trilu mask of %lld x %lld", (long long)rows,
                       (long long)cols);
    int64_t *mask = tg_malloc((size_t)(rows * cols) * sizeof *mask);
    if (!mask)
        return ob_fail(b, TG_ERR_NOMEM, "out of memory");
    for (int64_t e = 0; e < rows * cols; e++)
        mask[e] = trilu_keeps(upper, k, e / cols, e % cols);
    tg_tensor *m = ob_int_constant(b, "the Trilu mask", tg_shape2(rows, cols), mask);
    tg_free(mask);
    tg_tensor *zero =
        tg_cast(b->g, tg_constant(b->g, tg_shape_of(0, NULL), 0.0f), tg_tensor_dtype(x));
    return ob_set(b, 0, m ? tg_where(b->g, m, x, zero) : NULL);
}

/* ---- CumSum ------------------------------------------------------------------- */

/* Whether input element i adds into output element j. */
static bool cumsum_adds(bool exclusive, bool reverse, int64_t i, int64_t j)
{
    return reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j);
}

static tg_status fold_cumsum(onnx_builder *b, const tg_onnx_data *x, int axis, bool ex, bool rev)
{
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, x->f != NULL, x->ndim, x->dim, &d));
    d.elem_type = x->elem_type;
    int64_t len = x->dim[axis], inner = 1;
    for (int a = axis + 1; a < x->ndim; a++)
        inner *= x->dim[a];
    for (int64_t e = 0; e < d.n; e++) {
        int64_t j = (e / inner) % len, base = e - j * inner;
        double sum = 0;
        for (int64_t i = 0; i < len; i++)
            if (cumsum_adds(ex, rev, i, j))
                sum += ob_get(x, base + i * inner);
        ob_put(&d, e, sum);
    }
    return ob_set_const(b, 0, &d);
}

static tg_status map_cumsum(onnx_builder *b)
{
    tg_shape s;
    TG_TRY(ob_shape(b, 0, &s));
    int64_t a = 0;
    TG_TRY(scalar_int(b, 1, 0, &a));
    int axis = 0;
    TG_TRY(ob_axis(b, a, s.ndim, &axis));
    bool ex = ob_attr_int(b, "exclusive", 0) != 0, rev = ob_attr_int(b, "reverse", 0) != 0;
    if (ob_is_foldable(b, 0)) {
        const tg_onnx_data *x = ob_const(b, 0);
        return x ? fold_cumsum(b, x, axis, ex, rev) : TG_ERR_UNSUPPORTED;
    }
    tg_tensor *raw = ob_typed_tensor(b, 0);
    tg_tensor *x = raw ? tg_cast(b->g, raw, TG_F32) : NULL;
    int64_t len = s.dim[axis];
    if (!x || len > 8192)
        return x ? ob_fail(b, TG_ERR_UNSUPPORTED, "a CumSum over %lld elements (at most 8192)",
                           (long long)len)
                 : TG_ERR_INVALID_ARG;
    /* y[.., j] = sum_i x[.., i] T[i, j] along the last axis: move the axis there */
    int perm[TG_MAX_DIMS];
    for (int d = 0; d < s.ndim; d++)
        perm[d] = d;
    perm[axis] = s.ndim - 1;
    perm[s.ndim - 1] = axis;
    bool moved = axis != s.ndim - 1;
    double *t = tg_malloc((size_t)(len * len) * sizeof *t);
    if (!t)
        return ob_fail(b, TG_ERR_NOMEM, "out of memory");
    for (int64_t e = 0; e < len * len; e++)
        t[e] = cumsum_adds(ex, rev, e / len, e % len);
    tg_tensor *tri = f32_constant(b, tg_shape2(len, len), t);
    tg_free(t);
    tg_tensor *xt = moved ? tg_transpose(b->g, x, perm) : x;
    /* a vector is one row of the product */
    xt = s.ndim == 1 ? tg_reshape(b->g, xt, tg_shape2(1, len)) : xt;
    tg_tensor *y = tri ? tg_matmul(b->g, xt, tri, false, false) : NULL;
    y = y && moved ? tg_transpose(b->g, y, perm) : y;
    y = y && s.ndim == 1 ? tg_reshape(b->g, y, s) : y;
    return ob_set(b, 0, y ? tg_cast(b->g, y, tg_tensor_dtype(raw)) : NULL);
}

/* ---- ArgMax, ArgMin ------------------------------------------------------------ */

static tg_status fold_arg(onnx_builder *b, const tg_onnx_data *x, int axis, bool keep, bool max,
                          bool last)
{
    int64_t dims[TG_MAX_DIMS];
    int nd = 0;
    for (int a = 0; a < x->ndim; a++)
        if (a != axis || keep)
            dims[nd++] = a == axis ? 1 : x->dim[a];
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, false, nd, dims, &d));
    int64_t len = x->dim[axis], inner = 1;
    for (int a = axis + 1; a < x->ndim; a++)
        inner *= x->dim[a];
    for (int64_t o = 0; o < d.n; o++) {
        int64_t base = (o / inner) * len * inner + o % inner, best = 0;
        for (int64_t i = 1; i < len; i++) {
            double v = ob_get(x, base + i * inner), w = ob_get(x, base + best * inner);
            if (max ? (v > w || (last && v == w)) : (v < w || (last && v == w)))
                best = i;
        }
        d.i[o] = best;
    }
    return ob_set_const(b, 0, &d);
}

/* The first (or last) index where x reaches its maximum (minimum) along the
 * axis: reduce, compare, pick the indices that match, reduce them. */
static tg_status arg_runtime(onnx_builder *b, tg_shape s, int axis, bool keep, bool max, bool last)
{
    tg_tensor *x = as_f32(b, 0);
    if (!x)
        return TG_ERR_INVALID_ARG;
    unsigned mask = 1u << axis;
    tg_tensor *ext = max ? tg_reduce_max(b->g, x, mask, true) : tg_reduce_min(b->g, x, mask, true);
    tg_tensor *hit = tg_equal(b->g, x, ext);
    int64_t len = s.dim[axis];
    tg_tensor *idx = ob_ramp_along(b, s.ndim, axis, len);
    tg_tensor *none = tg_constant(b->g, tg_shape_of(0, NULL), last ? -1.0f : (float)len);
    tg_tensor *cand = idx ? tg_where(b->g, hit, idx, none) : NULL;
    tg_tensor *r =
        last ? tg_reduce_max(b->g, cand, mask, keep) : tg_reduce_min(b->g, cand, mask, keep);
    return ob_set(b, 0, r ? tg_cast(b->g, r, TG_I32) : NULL);
}

static tg_status arg(onnx_builder *b, bool max)
{
    tg_shape s;
    TG_TRY(ob_shape(b, 0, &s));
    int axis = 0;
    TG_TRY(ob_axis(b, ob_attr_int(b, "axis", 0), s.ndim, &axis));
    bool keep = ob_attr_int(b, "keepdims", 1) != 0;
    bool last = ob_attr_int(b, "select_last_index", 0) != 0;
    if (s.dim[axis] < 1)
        return ob_fail(b, TG_ERR_SHAPE, "an arg reduction over an empty axis");
    if (!ob_is_foldable(b, 0))
        return arg_runtime(b, s, axis, keep, max, last);
    const tg_onnx_data *x = ob_const(b, 0);
    return x ? fold_arg(b, x, axis, keep, max, last) : TG_ERR_UNSUPPORTED;
}

static tg_status map_argmax(onnx_builder *b)
{
    return arg(b, true);
}

static tg_status map_argmin(onnx_builder *b)
{
    return arg(b, false);
}

/* ---- OneHot ------------------------------------------------------------------- */

static tg_status map_one_hot(onnx_builder *b)
{
    tg_shape s;
    TG_TRY(ob_shape(b, 0, &s));
    int64_t depth = 0;
    TG_TRY(scalar_int(b, 1, 0, &depth));
    const tg_onnx_data *v = ob_const(b, 2);
    if (!v)
        return TG_ERR_UNSUPPORTED;
    if (v->n != 2 || depth < 1 || depth > (1 << 24) || s.ndim + 1 > TG_MAX_DIMS)
        return ob_fail(b, TG_ERR_INVALID_ARG,
                       "OneHot takes a depth of at least 1 and two values (off, on); got depth "
                       "%lld and %lld values",
                       (long long)depth, (long long)v->n);
    int axis = 0;
    TG_TRY(ob_axis(b, ob_attr_int(b, "axis", -1), s.ndim + 1, &axis));
    tg_shape os = tg_shape_of(0, NULL), is = os;
    os.ndim = is.ndim = s.ndim + 1;
    for (int a = 0, k = 0; a < os.ndim; a++) {
        os.dim[a] = a == axis ? depth : s.dim[k];
        is.dim[a] = a == axis ? 1 : s.dim[k];
        k += a != axis;
    }
    if (ob_is_foldable(b, 0)) {
        const tg_onnx_data *x = ob_const(b, 0);
        if (!x)
            return TG_ERR_UNSUPPORTED;
        tg_onnx_data d;
        TG_TRY(ob_data_new(b, v->f != NULL, os.ndim, os.dim, &d));
        d.elem_type = v->elem_type;
        int64_t inner = 1;
        for (int a = axis + 1; a < os.ndim; a++)
            inner *= os.dim[a];
        for (int64_t e = 0; e < d.n; e++) {
            int64_t j = (e / inner) % depth, src = (e / (inner * depth)) * inner + e % inner;
            int64_t i = (int64_t)ob_get(x, src);
            i = i < 0 ? i + depth : i;
            ob_put(&d, e, ob_get(v, i == j));
        }
        return ob_set_const(b, 0, &d);
    }
    tg_tensor *x = as_f32(b, 0);
    if (!x)
        return TG_ERR_INVALID_ARG;
    /* negative indices count from the end, as ONNX says */
    tg_tensor *zero = tg_constant(b->g, tg_shape_of(0, NULL), 0.0f);
    tg_tensor *d = tg_constant(b->g, tg_shape_of(0, NULL), (float)depth);
    x = tg_where(b->g, tg_less(b->g, x, zero), tg_add(b->g, x, d), x);
    tg_tensor *r = ob_ramp_along(b, os.ndim, axis, depth);
    tg_tensor *hit = r ? tg_equal(b->g, tg_reshape(b->g, x, is), r) : NULL;
    tg_tensor *on = tg_constant(b->g, tg_shape_of(0, NULL), (float)ob_get(v, 1));
    tg_tensor *off = tg_constant(b->g, tg_shape_of(0, NULL), (float)ob_get(v, 0));
    tg_tensor *y = hit ? tg_where(b->g, hit, on, off) : NULL;
    return ob_set(b, 0, y && !v->f ? tg_cast(b->g, y, TG_I32) : y);
}

/* ---- Mod ------------------------------------------------------------------------ */

/* Mod of graph tensors: x - y * floor(x / y) (Python's %, the divisor's
 * sign), or with fmod=1 x - y * trunc(x / y) (C's fmod, the dividend's).
 * Integers go through f32, exact while |x| < 2^24 (a quotient just below an
 * integer is then at least 1/|y| from it, more than its rounding). floor's
 * gradient is 0, so x's is 1 and y's -floor(x / y), as the definition says.
 * Hugging Face's GPT2ForSequenceClassification takes the last token's
 * index modulo the sequence length this way. */
static tg_status map_mod_graph(onnx_builder *b)
{
    tg_tensor *x = ob_typed_tensor(b, 0), *y = x ? ob_typed_tensor(b, 1) : NULL;
    if (!y)
        return TG_ERR_UNSUPPORTED;
    bool ix = tg_tensor_dtype(x) == TG_I32, iy = tg_tensor_dtype(y) == TG_I32;
    if (ix != iy)
        return ob_fail(b, TG_ERR_DTYPE, "one operand is an integer tensor and the other f32");
    tg_graph *g = b->g;
    if (ix) {
        x = tg_cast(g, x, TG_F32);
        y = tg_cast(g, y, TG_F32);
    }
    tg_tensor *q = tg_div(g, x, y), *t = tg_floor(g, q);
    if (ob_attr_int(b, "fmod", 0) != 0) { /* toward zero: -floor(-q) below zero */
        tg_tensor *zero = tg_constant(g, tg_shape_of(0, NULL), 0.0f);
        t = tg_where(g, tg_less(g, q, zero), tg_neg(g, tg_floor(g, tg_neg(g, q))), t);
    }
    tg_tensor *r = tg_sub(g, x, tg_mul(g, y, t));
    return ob_set(b, 0, ix && r ? tg_cast(g, r, TG_I32) : r);
}

static tg_status map_mod(onnx_builder *b)
{
    if (!ob_is_foldable(b, 0) || !ob_is_foldable(b, 1))
        return map_mod_graph(b);
    const tg_onnx_data *x = ob_const(b, 0), *y = x ? ob_const(b, 1) : NULL;
    if (!y)
        return TG_ERR_UNSUPPORTED;
    if (x->n != y->n && y->n != 1)
        return ob_fail(b, TG_ERR_UNSUPPORTED, "Mod of %lld by %lld values (same or one)",
                       (long long)x->n, (long long)y->n);
    bool fmod_c = ob_attr_int(b, "fmod", 0) != 0;
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, x->f != NULL, x->ndim, x->dim, &d));
    d.elem_type = x->elem_type;
    for (int64_t k = 0; k < d.n; k++) {
        double u = ob_get(x, k), w = ob_get(y, y->n == 1 ? 0 : k);
        if (w == 0 && !d.f) {
            tg_onnx_data_free(&d);
            return ob_fail(b, TG_ERR_NUMERIC, "integer Mod by zero");
        }
        double r = fmod(u, w);
        if (!fmod_c && r != 0 && (r < 0) != (w < 0))
            r += w; /* the sign of the divisor, as Python's % */
        ob_put(&d, k, r);
    }
    return ob_set_const(b, 0, &d);
}

/* ---- GatherElements -------------------------------------------------------- */

/* The flat offset into data of element k of an index tensor of shape `is`,
 * leaving out the axis (whose index is added times stride). */
static int64_t elements_base(tg_shape ds, tg_shape is, int axis, int64_t k)
{
    int64_t off = 0, stride = 1;
    for (int d = is.ndim - 1; d >= 0; d--) {
        int64_t i = k % is.dim[d];
        k /= is.dim[d];
        off += (d == axis ? 0 : i) * stride;
        stride *= ds.dim[d];
    }
    return off;
}

static int64_t axis_stride(tg_shape ds, int axis)
{
    int64_t stride = 1;
    for (int d = axis + 1; d < ds.ndim; d++)
        stride *= ds.dim[d];
    return stride;
}

/* The flat offsets of indices computed in the graph: each index first
 * gathered from 0..dim-1 (a constant named for the axis), which wraps a
 * negative one and, for one outside [-dim, dim), stops the run naming the
 * indices, the value and its position (gather's check): offsets from
 * unchecked indices would read a neighbouring row's elements. Then
 * base + index * stride, in f32 (exact within 2^24). */
tg_tensor *ob_element_offsets(onnx_builder *b, tg_shape ds, tg_shape is, int axis)
{
    tg_tensor *i = ob_typed_tensor(b, 1);
    int64_t n = tg_shape_numel(is), dim = ds.dim[axis];
    int64_t *ramp = tg_malloc((size_t)dim * sizeof *ramp);
    double *base = tg_malloc((size_t)(n ? n : 1) * sizeof *base);
    tg_tensor *along = NULL, *c = NULL;
    if (ramp && base) {
        for (int64_t k = 0; k < dim; k++)
            ramp[k] = k;
        for (int64_t k = 0; k < n; k++)
            base[k] = (double)elements_base(ds, is, axis, k);
        along = ob_int_constant(b, "the axis", tg_shape_of(1, &dim), ramp);
        c = f32_constant(b, is, base);
    } else {
        ob_fail(b, TG_ERR_NOMEM, "out of memory");
    }
    tg_free(ramp);
    tg_free(base);
    if (!i || !along || !c)
        return NULL;
    /* named so that the check's message reads "GatherElements 'n' (gather):
     * indices 'i' hold 7 at [0, 1]: 'axis 1 of x' has 5 entries, ..." */
    char name[192];
    snprintf(name, sizeof name, "axis %d of %s", axis, b->node->input[0]);
    tg_graph_rename(b->g, along, name);
    if (tg_tensor_dtype(i) != TG_I32)
        i = tg_cast(b->g, i, TG_I32);
    tg_tensor *checked = tg_gather(b->g, along, i, 0);
    if (checked) {
        snprintf(name, sizeof name, "%s %s", b->node->op_type, b->node->name);
        tg_graph_rename(b->g, checked, name);
    }
    tg_tensor *wrapped = tg_cast(b->g, checked, TG_F32);
    tg_tensor *off = tg_add(b->g, tg_scale(b->g, wrapped, (float)axis_stride(ds, axis), 0.0f), c);
    return tg_cast(b->g, off, TG_I32);
}

static tg_tensor *gather_elements_runtime(onnx_builder *b, tg_tensor *flat, tg_shape ds,
                                          tg_shape is, int axis)
{
    tg_tensor *off = ob_element_offsets(b, ds, is, axis);
    return off ? tg_gather(b->g, flat, off, 0) : NULL;
}

/* GatherElements(data, indices, axis): out[.., i, ..] = data[.., indices[.., i,
 * ..], ..]. Built as tg_gather of the flattened data at flat offsets (so the
 * gradient is Gather's scatter-add): constant indices give a constant of
 * offsets, checked here; indices computed in the graph are checked along
 * the axis as the run goes (ob_element_offsets). */
static tg_status map_gather_elements(onnx_builder *b)
{
    tg_shape ds, is;
    TG_TRY(ob_shape(b, 0, &ds));
    TG_TRY(ob_shape(b, 1, &is));
    int axis = 0;
    TG_TRY(ob_axis(b, ob_attr_int(b, "axis", 0), ds.ndim, &axis));
    if (is.ndim != ds.ndim)
        return ob_fail(b, TG_ERR_SHAPE, "indices have %d dims, data %d (they must agree)", is.ndim,
                       ds.ndim);
    for (int d = 0; d < ds.ndim; d++)
        if (d != axis && is.dim[d] > ds.dim[d])
            return ob_fail(b, TG_ERR_SHAPE, "indices dim %d is %lld, beyond data's %lld", d,
                           (long long)is.dim[d], (long long)ds.dim[d]);
    if (tg_shape_numel(ds) > ((int64_t)1 << 24))
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "data of %lld elements (offsets are exact up to 2^24)",
                       (long long)tg_shape_numel(ds));
    int64_t n = tg_shape_numel(is), dim = ds.dim[axis], stride = axis_stride(ds, axis);
    tg_tensor *x = ob_typed_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    tg_tensor *flat = tg_reshape(b->g, x, tg_shape_of(1, (int64_t[]){tg_shape_numel(ds)}));
    if (ob_is_const(b, 1)) {
        const tg_onnx_data *idx = ob_const(b, 1);
        if (!idx)
            return TG_ERR_UNSUPPORTED;
        if (!idx->i)
            return ob_fail(b, TG_ERR_FORMAT, "indices must be integers");
        int64_t *off = tg_malloc((size_t)(n ? n : 1) * sizeof *off);
        if (!off)
            return ob_fail(b, TG_ERR_NOMEM, "out of memory");
        for (int64_t k = 0; k < n; k++) {
            int64_t i = idx->i[k] < 0 ? idx->i[k] + dim : idx->i[k];
            if (i < 0 || i >= dim) {
                tg_free(off);
                return ob_fail(b, TG_ERR_INVALID_ARG,
                               "index %lld is out of range for axis %d of size %lld",
                               (long long)idx->i[k], axis, (long long)dim);
            }
            off[k] = elements_base(ds, is, axis, k) + i * stride;
        }
        tg_tensor *t = ob_int_constant(b, "the element offsets", is, off);
        tg_free(off);
        return t ? ob_set(b, 0, tg_gather(b->g, flat, t, 0)) : TG_ERR_UNSUPPORTED;
    }
    return ob_set(b, 0, gather_elements_runtime(b, flat, ds, is, axis));
}

/* ---- Hardmax, IsNaN, IsInf, EyeLike ------------------------------------------------ */

/* 1 at the first index of the maximum along the axis, 0 elsewhere; before
 * opset 13 over the input flattened to 2-D at `axis` (default 1). Its
 * gradient is 0 (a cast of a comparison). */
static tg_status map_hardmax(onnx_builder *b)
{
    tg_tensor *x = as_f32(b, 0);
    if (!x)
        return TG_ERR_INVALID_ARG;
    tg_graph *g = b->g;
    tg_shape s = tg_tensor_shape(x), work = s;
    int axis = 0;
    bool old = ob_opset(b) < 13;
    TG_TRY(ob_axis(b, ob_attr_int(b, "axis", old ? 1 : -1), s.ndim, &axis));
    if (old) {
        int64_t outer = 1, inner = 1;
        for (int d = 0; d < s.ndim; d++)
            *(d < axis ? &outer : &inner) *= s.dim[d];
        work = tg_shape2(outer, inner);
        x = tg_reshape(g, x, work);
        axis = 1;
    }
    int64_t len = work.dim[axis];
    unsigned mask = 1u << axis;
    tg_tensor *hit = tg_equal(g, x, tg_reduce_max(g, x, mask, true));
    tg_tensor *idx = ob_ramp_along(b, work.ndim, axis, len);
    tg_tensor *none = tg_constant(g, tg_shape_of(0, NULL), (float)len);
    tg_tensor *first = idx ? tg_reduce_min(g, tg_where(g, hit, idx, none), mask, true) : NULL;
    tg_tensor *y = first ? tg_cast(g, tg_equal(g, idx, first), TG_F32) : NULL;
    return ob_set(b, 0, y && old ? tg_reshape(g, y, s) : y);
}

static tg_status map_is_nan(onnx_builder *b)
{
    tg_tensor *x = as_f32(b, 0);
    return x ? ob_set(b, 0, tg_logical_not(b->g, tg_equal(b->g, x, x))) : TG_ERR_INVALID_ARG;
}

static tg_status map_is_inf(onnx_builder *b)
{
    tg_tensor *x = as_f32(b, 0);
    if (!x)
        return TG_ERR_INVALID_ARG;
    tg_graph *g = b->g;
    bool neg = ob_attr_int(b, "detect_negative", 1) != 0;
    bool pos = ob_attr_int(b, "detect_positive", 1) != 0;
    tg_tensor *p = tg_equal(g, x, tg_constant(g, tg_shape_of(0, NULL), INFINITY));
    tg_tensor *n = tg_equal(g, x, tg_constant(g, tg_shape_of(0, NULL), -INFINITY));
    if (pos && neg)
        return ob_set(b, 0, tg_logical_or(g, p, n));
    if (pos || neg)
        return ob_set(b, 0, pos ? p : n);
    return ob_set(b, 0, tg_logical_and(g, p, n)); /* detects nothing: all false */
}

/* Ones on the k-th diagonal of the input's 2-D shape: a constant. */
static tg_status map_eye_like(onnx_builder *b)
{
    tg_shape s;
    TG_TRY(ob_shape(b, 0, &s));
    if (s.ndim != 2)
        return ob_fail(b, TG_ERR_SHAPE, "the input has %d dims (EyeLike takes 2)", s.ndim);
    int64_t type = ob_attr_int(b, "dtype", 0), k = ob_attr_int(b, "k", 0);
    if (!type) { /* the input's type */
        const ob_value *v = ob_find(b, b->node->input[0]);
        type = v && !v->t ? v->c.elem_type
               : v && v->t && tg_tensor_dtype(v->t) == TG_I32
                   ? ONNX__TENSOR_PROTO__DATA_TYPE__INT32
                   : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    }
    bool is_float = type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
                    type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
                    type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
    if (!is_float && !tg_onnx_elem_size((int)type))
        return ob_fail(b, TG_ERR_UNSUPPORTED, "dtype %s", tg_onnx_elem_name((int)type));
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, is_float, 2, s.dim, &d));
    d.elem_type = (int)type;
    for (int64_t i = 0; i < s.dim[0]; i++)
        for (int64_t j = 0; j < s.dim[1]; j++)
            ob_put(&d, i * s.dim[1] + j, j - i == k ? 1 : 0);
    return ob_set_const(b, 0, &d);
}

const ob_op tg_onnx_index_ops[] = {
    {"Trilu", map_trilu, "upper"},
    {"CumSum", map_cumsum, "exclusive,reverse"},
    {"ArgMax", map_argmax, "axis,keepdims,select_last_index"},
    {"ArgMin", map_argmin, "axis,keepdims,select_last_index"},
    {"OneHot", map_one_hot, "axis"},
    {"Mod", map_mod, "fmod"},
    {"GatherElements", map_gather_elements, "axis"},
    {"Hardmax", map_hardmax, "axis"},
    {"IsNaN", map_is_nan, ""},
    {"IsInf", map_is_inf, "detect_negative,detect_positive"},
    {"EyeLike", map_eye_like, "dtype,k"},
};
const int tg_onnx_index_op_count = (int)(sizeof tg_onnx_index_ops / sizeof tg_onnx_index_ops[0]);
