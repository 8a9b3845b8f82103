/* onnx/onnx_fold_logic.c - broadcasting ops that fold on constants and are
 * graph ops on tensors: the comparisons (Equal, Less, Greater, ...), logic
 * (And, Or, Xor, Not), Where, Expand and Tile, and the NumPy broadcast
 * helpers (ob_bcast_shape, ob_bcast_at) other mappers fold with.
 *
 * torch's x.expand(n, -1, -1), as in torchvision's VisionTransformer,
 * exports as Equal and Where over the shape it asks for, then Expand.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"
#include "core/check.h"

#include <stdio.h>
#include <string.h>

/* ---- broadcasting: Equal, Where, Expand, Tile ------------------------------ */

static tg_shape data_shape(const tg_onnx_data *d)
{
    return tg_shape_of(d->ndim, d->dim);
}

/* The NumPy broadcast of n shapes. */
tg_status ob_bcast_shape(onnx_builder *b, int n, const tg_shape *in, tg_shape *out)
{
    int nd = 0;
    for (int k = 0; k < n; k++)
        nd = in[k].ndim > nd ? in[k].ndim : nd;
    *out = tg_shape_of(0, NULL);
    out->ndim = nd;
    for (int d = 0; d < nd; d++) {
        int64_t v = 1;
        for (int k = 0; k < n; k++) {
            int at = d - (nd - in[k].ndim);
            int64_t e = at >= 0 ? in[k].dim[at] : 1;
            if (e != 1 && v != 1 && e != v) {
                char sa[96], sb[96];
                return ob_fail(b, TG_ERR_SHAPE, "cannot broadcast %s with %s",
                               tg_shape_str(in[0], sa, sizeof sa),
                               tg_shape_str(in[k], sb, sizeof sb));
            }
            v = e != 1 ? e : v;
        }
        out->dim[d] = v;
    }
    return TG_OK;
}

/* The element of `in` (broadcast to `out`) at out's flat index k. */
int64_t ob_bcast_at(tg_shape out, tg_shape in, int64_t k)
{
    int64_t off = 0, stride = 1;
    for (int d = out.ndim - 1; d >= 0; d--) {
        int64_t i = k % out.dim[d];
        k /= out.dim[d];
        int at = d - (out.ndim - in.ndim);
        if (at >= 0) {
            off += (in.dim[at] == 1 ? 0 : i) * stride;
            stride *= in.dim[at];
        }
    }
    return off;
}

/* Comparisons and logic: folded on constants (the exporter's test of a
 * shape against -1), graph ops otherwise (masks built from the inputs).
 * Booleans are i32 0/1 in the graph. */
typedef enum { CMP_EQ, CMP_LT, CMP_LE, CMP_GT, CMP_GE, LOGIC_AND, LOGIC_OR, LOGIC_XOR } cmp_kind;

static bool cmp_one(cmp_kind k, double x, double y)
{
    switch (k) {
    case CMP_EQ:
        return x == y;
    case CMP_LT:
        return x < y;
    case CMP_LE:
        return x <= y;
    case CMP_GT:
        return x > y;
    case CMP_GE:
        return x >= y;
    case LOGIC_AND:
        return x != 0 && y != 0;
    case LOGIC_OR:
        return x != 0 || y != 0;
    case LOGIC_XOR:
        return (x != 0) != (y != 0);
    default:
        TG_UNREACHABLE("comparison kind", k);
    }
}

static tg_status compare_runtime(onnx_builder *b, cmp_kind k)
{
    static tg_tensor *(*const fn[])(tg_graph *, tg_tensor *, tg_tensor *) = {
        tg_equal,         tg_less,        tg_less_equal, tg_greater,
        tg_greater_equal, tg_logical_and, tg_logical_or, tg_logical_xor};
    tg_tensor *x = ob_typed_tensor(b, 0);
    tg_tensor *y = x ? ob_typed_tensor(b, 1) : NULL;
    return y ? ob_set(b, 0, fn[k](b->g, x, y)) : TG_ERR_INVALID_ARG;
}

static tg_status compare(onnx_builder *b, cmp_kind k)
{
    TG_TRY(ob_legacy_broadcast(b));
    if (!ob_is_foldable(b, 0) || !ob_is_foldable(b, 1))
        return compare_runtime(b, k);
    const tg_onnx_data *x = ob_const(b, 0), *y = x ? ob_const(b, 1) : NULL;
    if (!y)
        return TG_ERR_UNSUPPORTED;
    tg_shape o, in[2] = {data_shape(x), data_shape(y)};
    TG_TRY(ob_bcast_shape(b, 2, in, &o));
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, false, o.ndim, o.dim, &d));
    d.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    for (int64_t i = 0; i < d.n; i++)
        d.i[i] =
            cmp_one(k, ob_get(x, ob_bcast_at(o, in[0], i)), ob_get(y, ob_bcast_at(o, in[1], i)));
    return ob_set_const(b, 0, &d);
}

static tg_status map_equal(onnx_builder *b)
{
    return compare(b, CMP_EQ);
}
static tg_status map_less(onnx_builder *b)
{
    return compare(b, CMP_LT);
}
static tg_status map_less_equal(onnx_builder *b)
{
    return compare(b, CMP_LE);
}
static tg_status map_greater(onnx_builder *b)
{
    return compare(b, CMP_GT);
}
static tg_status map_greater_equal(onnx_builder *b)
{
    return compare(b, CMP_GE);
}
static tg_status map_and(onnx_builder *b)
{
    return compare(b, LOGIC_AND);
}
static tg_status map_or(onnx_builder *b)
{
    return compare(b, LOGIC_OR);
}
static tg_status map_xor(onnx_builder *b)
{
    return compare(b, LOGIC_XOR);
}

static tg_status map_not(onnx_builder *b)
{
    if (!ob_is_foldable(b, 0)) {
        tg_tensor *x = ob_typed_tensor(b, 0);
        return x ? ob_set(b, 0, tg_logical_not(b->g, x)) : TG_ERR_INVALID_ARG;
    }
    const tg_onnx_data *x = ob_const(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, false, x->ndim, x->dim, &d));
    d.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    for (int64_t i = 0; i < d.n; i++)
        d.i[i] = ob_get(x, i) == 0;
    return ob_set_const(b, 0, &d);
}

/* x broadcast to shape o, of either type. EXPAND copies f32; an i32 tensor
 * (a boolean key-padding mask broadcast over heads) is picked by a true
 * condition of shape o instead, which broadcasts it exactly. */
static tg_tensor *expand_typed(onnx_builder *b, tg_tensor *x, tg_shape o)
{
    if (!x || tg_tensor_dtype(x) != TG_I32)
        return x ? tg_expand(b->g, x, o) : NULL;
    tg_shape ones = o;
    for (int d = 0; d < o.ndim; d++)
        ones.dim[d] = 1;
    tg_tensor *cond = tg_cast(b->g, tg_expand(b->g, tg_constant(b->g, ones, 1.0f), o), TG_I32);
    return tg_where(b->g, cond, x, x);
}

/* Where as a graph op: cond i32, x and y of one type. */
static tg_status where_runtime(onnx_builder *b)
{
    tg_tensor *c = ob_typed_tensor(b, 0);
    tg_tensor *x = c ? ob_typed_tensor(b, 1) : NULL;
    tg_tensor *y = x ? ob_typed_tensor(b, 2) : NULL;
    return y ? ob_set(b, 0, tg_where(b->g, c, x, y)) : TG_ERR_INVALID_ARG;
}

/* Where with a condition known at import: folded when x and y are too; a
 * condition that is all true (all false) is x (y) expanded to the broadcast
 * shape; any other is the graph op. */
static tg_status map_where(onnx_builder *b)
{
    if (!ob_is_const(b, 0))
        return where_runtime(b);
    const tg_onnx_data *c = ob_const(b, 0);
    if (!c)
        return TG_ERR_UNSUPPORTED;
    tg_shape o, in[3] = {data_shape(c)};
    TG_TRY(ob_shape(b, 1, &in[1]));
    TG_TRY(ob_shape(b, 2, &in[2]));
    TG_TRY(ob_bcast_shape(b, 3, in, &o));
    if (ob_is_foldable(b, 1) && ob_is_foldable(b, 2)) {
        const tg_onnx_data *x = ob_const(b, 1), *y = x ? ob_const(b, 2) : NULL;
        if (!y)
            return TG_ERR_UNSUPPORTED;
        tg_onnx_data d;
        TG_TRY(ob_data_new(b, x->f || y->f, o.ndim, o.dim, &d));
        d.elem_type = x->elem_type;
        for (int64_t k = 0; k < d.n; k++) {
            bool pick_x = ob_get(c, ob_bcast_at(o, in[0], k)) != 0;
            double v =
                pick_x ? ob_get(x, ob_bcast_at(o, in[1], k)) : ob_get(y, ob_bcast_at(o, in[2], k));
            ob_put(&d, k, v);
        }
        return ob_set_const(b, 0, &d);
    }
    int64_t n_true = 0;
    for (int64_t k = 0; k < c->n; k++)
        n_true += ob_get(c, k) != 0;
    if (n_true != 0 && n_true != c->n)
        return where_runtime(b);
    tg_tensor *t = ob_typed_tensor(b, n_true ? 1 : 2);
    return ob_set(b, 0, expand_typed(b, t, o));
}

/* Expand: x broadcast with the shape given (both ways, as ONNX says: a 1
 * in the shape keeps x's dim). */
static tg_status map_expand(onnx_builder *b)
{
    tg_shape in[2];
    TG_TRY(ob_shape(b, 0, &in[0]));
    const tg_onnx_data *sh = ob_const(b, 1);
    if (!sh)
        return TG_ERR_UNSUPPORTED;
    if (!sh->i || sh->ndim != 1 || sh->n > TG_MAX_DIMS)
        return ob_fail(b, TG_ERR_UNSUPPORTED, "the shape must be 1-D integers, at most %d",
                       TG_MAX_DIMS);
    for (int64_t k = 0; k < sh->n; k++)
        if (sh->i[k] < 1)
            return ob_fail(b, TG_ERR_UNSUPPORTED, "shape dim %lld is %lld (at least 1)",
                           (long long)k, (long long)sh->i[k]);
    in[1] = tg_shape_of((int)sh->n, sh->i);
    tg_shape o;
    TG_TRY(ob_bcast_shape(b, 2, in, &o));
    if (!ob_is_foldable(b, 0)) {
        return ob_set(b, 0, expand_typed(b, ob_typed_tensor(b, 0), o));
    }
    const tg_onnx_data *x = ob_const(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, x->f != NULL, o.ndim, o.dim, &d));
    d.elem_type = x->elem_type;
    for (int64_t k = 0; k < d.n; k++) {
        int64_t at = ob_bcast_at(o, in[0], k);
        ob_copy_at(&d, k, x, at);
    }
    return ob_set_const(b, 0, &d);
}

/* Tile: on a graph tensor, each repeated axis d is a reshape to [before d,
 * 1, the rest], an expand of the 1 to the repeats and a reshape back with
 * axis d repeated times longer. */
static tg_status map_tile(onnx_builder *b)
{
    tg_shape s;
    TG_TRY(ob_shape(b, 0, &s));
    const tg_onnx_data *r = ob_const(b, 1);
    if (!r)
        return TG_ERR_UNSUPPORTED;
    if (!r->i || r->n != s.ndim)
        return ob_fail(b, TG_ERR_INVALID_ARG, "repeats must be %d integers (one per dim)", s.ndim);
    tg_shape o = s;
    for (int d = 0; d < s.ndim; d++) {
        if (r->i[d] < 1 || r->i[d] > (1 << 20))
            return ob_fail(b, TG_ERR_UNSUPPORTED, "repeats %lld on axis %d (at least 1)",
                           (long long)r->i[d], d);
        o.dim[d] *= r->i[d];
    }
    if (!ob_is_foldable(b, 0)) {
        tg_tensor *y = ob_typed_tensor(b, 0);
        tg_shape cur = s;
        for (int d = 0; y && d < s.ndim; d++) {
            if (r->i[d] == 1)
                continue;
            int64_t before = 1, rest = 1;
            for (int e = 0; e < s.ndim; e++)
                *(e < d ? &before : &rest) *= cur.dim[e];
            tg_shape one = tg_shape_of(3, (int64_t[]){before, 1, rest});
            tg_shape many = tg_shape_of(3, (int64_t[]){before, r->i[d], rest});
            cur.dim[d] *= r->i[d];
            y = tg_reshape(b->g, expand_typed(b, tg_reshape(b->g, y, one), many), cur);
        }
        return ob_set(b, 0, y);
    }
    const tg_onnx_data *x = ob_const(b, 0);
    if (!x)
        return TG_ERR_UNSUPPORTED;
    tg_onnx_data d;
    TG_TRY(ob_data_new(b, x->f != NULL, o.ndim, o.dim, &d));
    d.elem_type = x->elem_type;
    for (int64_t k = 0; k < d.n; k++) {
        int64_t at = 0, rest = k, stride = 1;
        for (int dd = o.ndim - 1; dd >= 0; dd--) {
            at += (rest % o.dim[dd]) % s.dim[dd] * stride;
            rest /= o.dim[dd];
            stride *= s.dim[dd];
        }
        ob_copy_at(&d, k, x, at);
    }
    return ob_set_const(b, 0, &d);
}

const ob_op tg_onnx_fold_logic_ops[] = {
    {"Equal", map_equal, OB_LEGACY_BROADCAST_ATTRS},
    {"Less", map_less, OB_LEGACY_BROADCAST_ATTRS},
    {"LessOrEqual", map_less_equal, ""},
    {"Greater", map_greater, OB_LEGACY_BROADCAST_ATTRS},
    {"GreaterOrEqual", map_greater_equal, ""},
    {"And", map_and, OB_LEGACY_BROADCAST_ATTRS},
    {"Or", map_or, OB_LEGACY_BROADCAST_ATTRS},
    {"Xor", map_xor, OB_LEGACY_BROADCAST_ATTRS},
    {"Not", map_not, ""},
    {"Where", map_where, ""},
    {"Expand", map_expand, ""},
    {"Tile", map_tile, ""},
};
const int tg_onnx_fold_logic_op_count =
    (int)(sizeof tg_onnx_fold_logic_ops / sizeof tg_onnx_fold_logic_ops[0]);
