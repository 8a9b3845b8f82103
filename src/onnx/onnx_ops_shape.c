/* onnx/onnx_ops_shape.c - ONNX shape and reduction ops (Flatten,
 * Transpose, Slice, Split, ReduceMean/Sum/Max/Min, Pad) mapped onto the
 * graph builder.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- shapes and reductions ----------------------------------------------- */

static tg_status map_flatten(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    tg_shape s = tg_tensor_shape(x);
    int64_t a = ob_attr_int(b, "axis", 1);
    if (a < -s.ndim || a > s.ndim)
        return ob_fail(b, TG_ERR_INVALID_ARG, "axis %lld is out of range for %d dims", (long long)a,
                       s.ndim);
    int axis = (int)(a < 0 ? a + s.ndim : a);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < s.ndim; d++)
        *(d < axis ? &outer : &inner) *= s.dim[d];
    return ob_set(b, 0, tg_reshape(b->g, x, tg_shape2(outer, inner)));
}

/* Transpose of a constant: F.pad's exporter reverses its integer pads as
 * Reshape [-1, 2] -> Slice -> Transpose -> Reshape [-1] (Swin's padding to
 * whole windows), all known at import. */
static tg_status fold_transpose(onnx_builder *b, const int *perm)
{
    const tg_onnx_data *x = ob_const(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    int64_t dims[TG_MAX_DIMS], in_stride[TG_MAX_DIMS];
    int64_t st = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        in_stride[d] = st;
        st *= x->dim[d];
    }
    for (int d = 0; d < x->ndim; d++)
        dims[d] = x->dim[perm[d]];
    tg_onnx_data o;
    TG_TRY(ob_data_new(b, x->f != NULL, x->ndim, dims, &o));
    o.elem_type = x->elem_type;
    for (int64_t k = 0; k < o.n; k++) {
        int64_t rest = k, src = 0;
        for (int d = x->ndim - 1; d >= 0; d--) {
            src += rest % dims[d] * in_stride[perm[d]];
            rest /= dims[d];
        }
        ob_copy_at(&o, k, x, src);
    }
    return ob_set_const(b, 0, &o);
}

static tg_status map_transpose(onnx_builder *b)
{
    tg_shape s;
    TG_TRY(ob_shape(b, 0, &s));
    int nd = s.ndim, n, perm[TG_MAX_DIMS];
    const int64_t *p = ob_attr_ints(b, "perm", &n);
    if (p && n != nd)
        return ob_fail(b, TG_ERR_INVALID_ARG, "perm has %d values for %d dims", n, nd);
    bool seen[TG_MAX_DIMS] = {false};
    for (int d = 0; d < nd; d++) {
        int64_t v = p ? p[d] : nd - 1 - d;
        if (v < 0 || v >= nd || seen[v])
            return ob_fail(b, TG_ERR_INVALID_ARG,
                           "perm must name each of the %d dims once (value %d is %lld)", nd, d,
                           (long long)v);
        seen[v] = true;
        perm[d] = (int)v;
    }
    if (ob_is_foldable(b, 0))
        return fold_transpose(b, perm);
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    return ob_set(b, 0, tg_transpose(b->g, x, perm));
}

/* ONNX's first element and count of a slice of n elements along one axis. */
static void slice_range(int64_t n, int64_t lo, int64_t hi, int64_t step, int64_t *first,
                        int64_t *count)
{
    lo = lo < 0 ? lo + n : lo;
    hi = hi < 0 ? hi + n : hi;
    if (step > 0) {
        lo = lo < 0 ? 0 : lo > n ? n : lo;
        hi = hi < 0 ? 0 : hi > n ? n : hi;
        *count = hi > lo ? (hi - lo + step - 1) / step : 0;
    } else {
        lo = lo < 0 ? -1 : lo > n - 1 ? n - 1 : lo;
        hi = hi < -1 ? -1 : hi > n - 1 ? n - 1 : hi;
        *count = lo > hi ? (lo - hi - step - 1) / -step : 0;
    }
    *first = lo;
}

/* Slice of a constant (position ids sliced to the sequence length): folded
 * into output `out` of the node. */
static tg_status fold_slice(onnx_builder *b, int out, const tg_onnx_data *x, const tg_onnx_data *st,
                            const tg_onnx_data *en, const tg_onnx_data *ax, const tg_onnx_data *sp)
{
    int64_t first[TG_MAX_DIMS], step[TG_MAX_DIMS], count[TG_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        first[d] = 0, step[d] = 1, count[d] = x->dim[d];
    for (int64_t k = 0; k < st->n; k++) {
        int axis = 0;
        TG_TRY(ob_axis(b, ax ? ax->i[k] : k, x->ndim, &axis));
        step[axis] = sp ? sp->i[k] : 1;
        if (step[axis] == 0)
            return ob_fail(b, TG_ERR_INVALID_ARG, "step 0 on axis %d", axis);
        slice_range(x->dim[axis], st->i[k], en->i[k], step[axis], &first[axis], &count[axis]);
    }
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, x->f != NULL, x->ndim, count, &d));
    d.elem_type = x->elem_type;
    for (int64_t o = 0; o < d.n; o++) {
        int64_t src = 0, rest = o;
        int64_t mul = 1;
        for (int dd = x->ndim - 1; dd >= 0; dd--) {
            int64_t i = rest % count[dd];
            rest /= count[dd];
            src += (first[dd] + i * step[dd]) * mul;
            mul *= x->dim[dd];
        }
        ob_copy_at(&d, o, x, src);
    }
    return ob_set_const(b, out, &d);
}

/* Slice before opset 10: starts, ends and axes as attributes (no steps),
 * viewed as the constants the inputs give later (read-only). */
static tg_status slice_attrs(onnx_builder *b, tg_onnx_data *st, tg_onnx_data *en, tg_onnx_data *ax)
{
    int n[3];
    const int64_t *v[3] = {ob_attr_ints(b, "starts", &n[0]), ob_attr_ints(b, "ends", &n[1]),
                           ob_attr_ints(b, "axes", &n[2])};
    tg_onnx_data *d[3] = {st, en, ax};
    if (!v[0] || !v[1])
        return ob_fail(b, TG_ERR_FORMAT, "starts and ends attributes are required (opset %d)",
                       ob_opset(b));
    for (int k = 0; k < 3; k++) {
        memset(d[k], 0, sizeof *d[k]);
        d[k]->ndim = 1;
        d[k]->n = d[k]->dim[0] = n[k];
        d[k]->i = (int64_t *)(uintptr_t)v[k];
    }
    return TG_OK;
}

static tg_status map_slice(onnx_builder *b)
{
    for (int k = 0; k < 3; k++)
        TG_TRY(ob_attr_in_opsets(b, (const char *[]){"starts", "ends", "axes"}[k], 1, 10));
    tg_onnx_data old[3];
    const tg_onnx_data *st, *en, *ax = NULL, *sp = NULL;
    if (ob_opset(b) < 10) {
        TG_TRY(slice_attrs(b, &old[0], &old[1], &old[2]));
        st = &old[0], en = &old[1], ax = old[2].i ? &old[2] : NULL;
    } else {
        st = ob_const(b, 1), en = st ? ob_const(b, 2) : NULL;
        ax = en && ob_has_input(b, 3) ? ob_const(b, 3) : NULL;
        sp = en && ob_has_input(b, 4) ? ob_const(b, 4) : NULL;
        if (!en || (ob_has_input(b, 3) && !ax) || (ob_has_input(b, 4) && !sp))
            return TG_ERR_UNSUPPORTED;
    }
    if (!st->i || !en->i || st->n != en->n || (ax && ax->n != st->n) || (sp && sp->n != st->n))
        return ob_fail(b, TG_ERR_FORMAT,
                       "starts, ends, axes and steps must be integer lists of "
                       "one length");
    const tg_onnx_data *xc;
    tg_tensor *x;
    tg_shape s;
    TG_TRY(ob_value_in(b, 0, &xc, &x, &s));
    if (xc)
        return fold_slice(b, 0, xc, st, en, ax, sp);
    tg_tensor *y = x;
    for (int64_t k = 0; k < st->n; k++) {
        int axis = 0;
        TG_TRY(ob_axis(b, ax ? ax->i[k] : k, s.ndim, &axis));
        if (sp && sp->i[k] == 0)
            return ob_fail(b, TG_ERR_INVALID_ARG, "step 0 on axis %d", axis);
        if (sp && sp->i[k] != 1) {
            /* tg_slice_ex reads start and end as ONNX does */
            y = tg_slice_ex(b->g, y, axis, st->i[k], en->i[k], sp->i[k]);
            continue;
        }
        int64_t n = s.dim[axis], lo = st->i[k], hi = en->i[k];
        lo = lo < 0 ? lo + n : lo;
        hi = hi < 0 ? hi + n : hi;
        lo = lo < 0 ? 0 : lo > n ? n : lo;
        hi = hi < lo ? lo : hi > n ? n : hi;
        /* the slice kernels are not written for empty tensors */
        if (hi == lo)
            return ob_fail(b, TG_ERR_UNSUPPORTED, "the slice of axis %d is empty", axis);
        if (lo != 0 || hi != n)
            y = tg_slice(b->g, y, axis, lo, hi);
    }
    return ob_set(b, 0, y);
}

/* The sizes of Split's outputs along an axis of n: the `split` input (opset
 * 13) or attribute (opset 11), else equal parts, one per output. */
static tg_status split_sizes(onnx_builder *b, int64_t n, int outputs, int64_t *size)
{
    const int64_t *sz = NULL;
    int m = 0;
    if (ob_has_input(b, 1)) {
        const tg_onnx_data *d = ob_const(b, 1);
        if (!d)
            return TG_ERR_UNSUPPORTED;
        if (!d->i)
            return ob_fail(b, TG_ERR_FORMAT, "split must be a list of integers");
        sz = d->i, m = (int)d->n;
    } else {
        sz = ob_attr_ints(b, "split", &m);
    }
    int64_t parts = ob_attr_int(b, "num_outputs", 0);
    if (!sz && ob_attr(b, "num_outputs")) {
        /* opset 18: parts of ceil(n / num_outputs), the last one smaller */
        if (parts != outputs)
            return ob_fail(b, TG_ERR_INVALID_ARG, "num_outputs is %lld for %d outputs",
                           (long long)parts, outputs);
        int64_t each = (n + parts - 1) / parts;
        for (int k = 0; k < outputs; k++) {
            int64_t left = n - each * k;
            size[k] = left < each ? left : each;
            if (size[k] <= 0)
                return ob_fail(b, TG_ERR_UNSUPPORTED, "output %d of the split is empty", k);
        }
        return TG_OK;
    }
    if (!sz) {
        if (n % outputs)
            return ob_fail(b, TG_ERR_INVALID_ARG,
                           "%lld elements do not split into %d equal parts (give split sizes)",
                           (long long)n, outputs);
        for (int k = 0; k < outputs; k++)
            size[k] = n / outputs;
        return TG_OK;
    }
    if (m != outputs)
        return ob_fail(b, TG_ERR_INVALID_ARG, "split has %d sizes for %d outputs", m, outputs);
    int64_t total = 0;
    for (int k = 0; k < outputs; k++) {
        if (sz[k] < 0)
            return ob_fail(b, TG_ERR_INVALID_ARG, "split size %lld is negative", (long long)sz[k]);
        /* the slice kernels are not written for empty tensors */
        if (sz[k] == 0)
            return ob_fail(b, TG_ERR_UNSUPPORTED, "output %d of the split is empty", k);
        size[k] = sz[k];
        total += sz[k];
    }
    if (total != n)
        return ob_fail(b, TG_ERR_INVALID_ARG, "split sizes add up to %lld, the axis has %lld",
                       (long long)total, (long long)n);
    return TG_OK;
}

/* Split (HF's `logits.split(1, dim=-1)`): one slice per output; a foldable
 * constant is split at import. */
static tg_status map_split(onnx_builder *b)
{
    TG_TRY(ob_attr_in_opsets(b, "split", 1, 13));
    TG_TRY(ob_attr_in_opsets(b, "num_outputs", 18, 1 << 30));
    int outputs = (int)b->node->n_output;
    if (outputs < 1 || outputs > 4096)
        return ob_fail(b, TG_ERR_FORMAT, "Split has %d outputs", outputs);
    const tg_onnx_data *xc;
    tg_tensor *x;
    tg_shape s;
    TG_TRY(ob_value_in(b, 0, &xc, &x, &s));
    int axis = 0;
    TG_TRY(ob_axis(b, ob_attr_int(b, "axis", 0), s.ndim, &axis));
    int64_t *size = tg_malloc((size_t)outputs * sizeof *size);
    if (!size)
        return ob_fail(b, TG_ERR_NOMEM, "no memory for %d split sizes", outputs);
    tg_status st = split_sizes(b, s.dim[axis], outputs, size);
    int64_t lo = 0;
    for (int k = 0; k < outputs && st == TG_OK; lo += size[k], k++) {
        if (!b->node->output[k][0])
            continue;
        if (xc) {
            int64_t a = axis, from = lo, to = lo + size[k];
            tg_onnx_data ax = {.n = 1, .i = &a}, st0 = {.n = 1, .i = &from},
                         en = {.n = 1, .i = &to};
            st = fold_slice(b, k, xc, &st0, &en, &ax, NULL);
        } else {
            tg_tensor *y = size[k] == s.dim[axis] ? x : tg_slice(b->g, x, axis, lo, lo + size[k]);
            st = ob_set(b, k, y);
        }
    }
    tg_free(size);
    return st;
}

tg_status ob_reduce_axes(onnx_builder *b, int nd, int axes_input, unsigned *mask, bool *noop)
{
    TG_TRY(ob_attr_in_opsets(b, "axes", 1, axes_input));
    TG_TRY(ob_attr_in_opsets(b, "noop_with_empty_axes", axes_input, 1 << 30));
    if (ob_opset(b) < axes_input && ob_has_input(b, 1))
        return ob_fail(b, TG_ERR_INVALID_ARG, "an axes input, which %s takes from opset %d",
                       b->node->op_type, axes_input);
    int n;
    int64_t axes[TG_MAX_DIMS];
    const int64_t *a = ob_attr_ints(b, "axes", &n);
    if (!a && ob_has_input(b, 1)) {
        const tg_onnx_data *d = ob_const(b, 1);
        if (!d)
            return TG_ERR_UNSUPPORTED;
        a = d->i;
        n = (int)d->n;
    }
    if (n > TG_MAX_DIMS || (n && !a))
        return ob_fail(b, TG_ERR_FORMAT, "axes must be at most %d integers", TG_MAX_DIMS);
    if (n)
        memcpy(axes, a, (size_t)n * sizeof *axes);
    *mask = 0;
    *noop = n == 0 && ob_attr_int(b, "noop_with_empty_axes", 0);
    for (int k = 0; k < n; k++) {
        int ax = 0;
        TG_TRY(ob_axis(b, axes[k], nd, &ax));
        *mask |= 1u << ax;
    }
    if (n == 0)
        *mask = (1u << nd) - 1;
    return TG_OK;
}

/* A reduction over ob_reduce_axes's axes. */
static tg_status reduce(onnx_builder *b, tg_tensor *(*fn)(tg_graph *, tg_tensor *, unsigned, bool),
                        int axes_input)
{
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    unsigned mask;
    bool noop;
    TG_TRY(ob_reduce_axes(b, tg_tensor_shape(x).ndim, axes_input, &mask, &noop));
    if (noop)
        return ob_set(b, 0, x);
    bool keep = ob_attr_int(b, "keepdims", 1) != 0;
    return ob_set(b, 0, fn(b->g, x, mask, keep));
}

static tg_status map_reduce_mean(onnx_builder *b)
{
    return reduce(b, tg_reduce_mean, 18);
}
static tg_status map_reduce_sum(onnx_builder *b)
{
    return reduce(b, tg_reduce_sum, 13);
}

static tg_status map_reduce_max(onnx_builder *b)
{
    return reduce(b, tg_reduce_max, 18);
}
static tg_status map_reduce_min(onnx_builder *b)
{
    return reduce(b, tg_reduce_min, 18);
}

/* Pad's begins and ends per dim of an nd-dim input into full[2 * nd]:
 * the pads attribute before opset 11, the pads input after; from opset 18
 * an axes input says which dims the pads are for (the others get none). */
static tg_status pad_amounts(onnx_builder *b, int nd, int64_t *full)
{
    int n = 0;
    const int64_t *p = NULL;
    if (ob_opset(b) < 11) {
        p = ob_attr_ints(b, "pads", &n);
        if (!p && !ob_attr(b, "pads"))
            return ob_fail(b, TG_ERR_FORMAT, "no pads attribute (opset %d)", ob_opset(b));
    } else {
        const tg_onnx_data *d = ob_const(b, 1);
        if (!d)
            return TG_ERR_UNSUPPORTED;
        if (!d->i && d->n)
            return ob_fail(b, TG_ERR_FORMAT, "pads must be integers");
        p = d->i, n = (int)d->n;
    }
    int axes[TG_MAX_DIMS], n_axes = nd;
    for (int k = 0; k < nd; k++)
        axes[k] = k;
    if (ob_has_input(b, 3)) { /* opset 18 */
        const tg_onnx_data *ax = ob_const(b, 3);
        if (!ax)
            return TG_ERR_UNSUPPORTED;
        if ((!ax->i && ax->n) || ax->n > nd)
            return ob_fail(b, TG_ERR_FORMAT, "axes must be at most %d integers", nd);
        n_axes = (int)ax->n;
        bool seen[TG_MAX_DIMS] = {false};
        for (int k = 0; k < n_axes; k++) {
            TG_TRY(ob_axis(b, ax->i[k], nd, &axes[k]));
            if (seen[axes[k]])
                return ob_fail(b, TG_ERR_INVALID_ARG, "axis %d is given twice", axes[k]);
            seen[axes[k]] = true;
        }
    }
    if (n != 2 * n_axes)
        return ob_fail(b, TG_ERR_FORMAT, "pads has %d values for %d axes (2 per axis)", n, n_axes);
    memset(full, 0, (size_t)(2 * nd) * sizeof *full);
    for (int k = 0; k < n_axes; k++) {
        full[axes[k]] = p[k];
        full[nd + axes[k]] = p[n_axes + k];
    }
    return TG_OK;
}

/* The value constant padding fills with: the value attribute before opset
 * 11, the constant_value input after. */
static tg_status pad_value(onnx_builder *b, float *value)
{
    *value = ob_attr_float(b, "value", 0.0f);
    if (ob_opset(b) < 11 || !ob_has_input(b, 2))
        return TG_OK;
    const tg_onnx_data *v = ob_const(b, 2);
    if (!v || v->n != 1)
        return v ? ob_fail(b, TG_ERR_FORMAT, "constant_value must be one value")
                 : TG_ERR_UNSUPPORTED;
    *value = v->f ? v->f[0] : (float)v->i[0];
    return TG_OK;
}

static tg_status map_pad(onnx_builder *b)
{
    TG_TRY(ob_attr_in_opsets(b, "pads", 1, 11));
    TG_TRY(ob_attr_in_opsets(b, "value", 1, 11));
    tg_tensor *x = ob_tensor(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    int nd = tg_tensor_shape(x).ndim;
    int64_t pads[2 * TG_MAX_DIMS];
    float value;
    TG_TRY(pad_amounts(b, nd, pads));
    TG_TRY(pad_value(b, &value));
    char buf[32];
    const char *mode = ob_attr_string(b, "mode", buf, sizeof buf);
    tg_pad_mode m;
    if (!mode[0] || !strcmp(mode, "constant"))
        m = TG_PAD_CONSTANT;
    else if (!strcmp(mode, "reflect"))
        m = TG_PAD_REFLECT;
    else if (!strcmp(mode, "edge"))
        m = TG_PAD_EDGE;
    else
        return ob_fail(b, TG_ERR_UNSUPPORTED, "mode '%s' (constant, reflect and edge are)", mode);
    return ob_set(b, 0, tg_pad(b->g, x, pads, m, value));
}

/* ReverseSequence: x and sequence_lens (int64 in the file, i32 here), batch
 * and time axes 1 and 0 by default (ONNX's, its time-major layout). */
static tg_status map_reverse_sequence(onnx_builder *b)
{
    tg_tensor *x = ob_tensor(b, 0), *lens = ob_typed_tensor(b, 1);
    if (!x || !lens)
        return TG_ERR_UNSUPPORTED;
    int nd = tg_tensor_shape(x).ndim, axes[2];
    TG_TRY(ob_axis(b, ob_attr_int(b, "batch_axis", 1), nd, &axes[0]));
    TG_TRY(ob_axis(b, ob_attr_int(b, "time_axis", 0), nd, &axes[1]));
    if (axes[0] > 1 || axes[1] > 1 || axes[0] == axes[1])
        return ob_fail(b, TG_ERR_FORMAT,
                       "batch_axis %d and time_axis %d must be 0 and 1, one each (ONNX's rule)",
                       axes[0], axes[1]);
    return ob_set(b, 0, tg_reverse_sequence(b->g, x, lens, axes[0], axes[1]));
}

const ob_op tg_onnx_shape_ops[] = {
    {"Flatten", map_flatten, "axis"},
    {"Transpose", map_transpose, "perm"},
    {"Slice", map_slice, "axes,ends,starts"},
    {"Split", map_split, "axis,num_outputs,split"},
    {"ReduceMean", map_reduce_mean, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceSum", map_reduce_sum, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceMax", map_reduce_max, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceMin", map_reduce_min, "axes,keepdims,noop_with_empty_axes"},
    {"Pad", map_pad, "mode,pads,value"},
    {"ReverseSequence", map_reverse_sequence, "batch_axis,time_axis"},
};
const int tg_onnx_shape_op_count = (int)(sizeof tg_onnx_shape_ops / sizeof tg_onnx_shape_ops[0]);
