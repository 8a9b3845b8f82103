/* onnx/onnx_loop.c - ONNX Loop in the one form the importer takes:
 * nn.EmbeddingBag's export (torch 1.13, modes sum, mean and max, with
 * offsets or a 2-D input, with per_sample_weights), built as one op.
 *
 * The exporter writes the bags as a Loop over the bag count whose body
 * slices the indices between offsets[i] and ends[i], gathers those rows
 * of the table, optionally multiplies them by the same slice of the
 * per-sample weights, and reduces them (ReduceSum, ReduceMean, ReduceMax
 * over axis 0). Each iteration's slice has its own length, known only at
 * run time, which a static graph cannot hold, so a general Loop is not
 * built (nor unrolled). Instead the body is matched node by node against
 * that pattern, and the whole Loop becomes
 *
 *   rows = table[indices]                                   [L, E]
 *   in[b, i] = offsets[b] <= i < ends[b]                    [B, L]
 *   sum: (in * weights) @ rows; mean: in @ rows / count; max: the
 *   maximum over i of rows where in, else -inf
 *
 * whose gradients are the gather's, the matmul's and the max's. A bag with
 * no index gives zeros, as PyTorch's EmbeddingBag does (ONNX's ReduceMean
 * and ReduceMax of nothing would give NaN and -inf). Anything else in a
 * body is refused naming the node that does not fit.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"

#include <math.h>
#include <string.h>

typedef enum {
    V_ITER,  /* the iteration number */
    V_COND,  /* the loop condition */
    V_CONST, /* a Constant: c is its value when it is one integer */
    V_BOUND, /* outer[iter] (unsqueezed or not): a bag's start or end */
    V_BAG,   /* outer[lo[iter]:hi[iter]]: a bag's indices or weights */
    V_COL,   /* a bag's weights unsqueezed to a column */
    V_ROWS,  /* table[bag], times the weights when weights is set */
    V_OUT,   /* the rows reduced over axis 0 by mode */
} bag_kind;

typedef struct bag_val {
    const char *name;
    bag_kind kind;
    const char *outer, *lo, *hi, *table, *weights;
    int64_t c;
    int mode; /* 0 sum, 1 mean, 2 max */
} bag_val;

#define BAG_MAX_VALS 64
#define NOT_ONE_INT INT64_MIN

typedef struct bag_match {
    onnx_builder *b; /* the enclosing graph's values */
    bag_val v[BAG_MAX_VALS];
    int n;
} bag_match;

static bag_val *lookup(bag_match *m, const char *name)
{
    for (int k = 0; k < m->n; k++)
        if (!strcmp(m->v[k].name, name))
            return &m->v[k];
    return NULL;
}

static const Onnx__AttributeProto *node_attr(const Onnx__NodeProto *n, const char *name)
{
    for (size_t k = 0; k < n->n_attribute; k++)
        if (n->attribute[k]->name && !strcmp(n->attribute[k]->name, name))
            return n->attribute[k];
    return NULL;
}

/* A Constant's value as one integer (NOT_ONE_INT otherwise). */
static int64_t constant_int(const Onnx__NodeProto *n)
{
    const Onnx__AttributeProto *a = node_attr(n, "value");
    tg_onnx_data d;
    if (!a || !a->t || tg_onnx_data_decode(a->t, NULL, 0, "a Loop body constant", &d) != TG_OK)
        return NOT_ONE_INT;
    int64_t c = d.i && d.n == 1 ? d.i[0] : NOT_ONE_INT;
    tg_onnx_data_free(&d);
    return c;
}

/* Input k of n is the one integer c: a Constant of the body or a
 * constant of the enclosing graph (the exporter puts some there), or the
 * single value of attribute attr when the input is absent (the older
 * opsets' axes). */
static bool is_int(bag_match *m, const Onnx__NodeProto *n, size_t k, const char *attr, int64_t c)
{
    if (k < n->n_input && n->input[k][0]) {
        const bag_val *v = lookup(m, n->input[k]);
        if (v)
            return v->kind == V_CONST && v->c == c;
        ob_value *o = ob_find(m->b, n->input[k]);
        const tg_onnx_data *d = o && o->known && !o->t ? &o->c : NULL;
        return d && d->i && d->n == 1 && d->i[0] == c;
    }
    const Onnx__AttributeProto *a = attr ? node_attr(n, attr) : NULL;
    return a && a->n_ints == 1 && a->ints[0] == c;
}

/* A Gather along axis 0 (the default). */
static bool axis0(const Onnx__NodeProto *n)
{
    const Onnx__AttributeProto *a = node_attr(n, "axis");
    return n->n_input == 2 && (!a || a->i == 0);
}

static bag_kind kind_of(bag_match *m, const Onnx__NodeProto *n, size_t k, bag_val **out)
{
    *out = k < n->n_input ? lookup(m, n->input[k]) : NULL;
    return *out ? (*out)->kind : (bag_kind)-1;
}

/* The value node n makes from the values before it, in *r; false when n
 * is not a step of the pattern. */
static bool step(bag_match *m, const Onnx__NodeProto *n, bag_val *r)
{
    const char *op = n->op_type;
    bag_val *a, *c;
    bag_kind ka = kind_of(m, n, 0, &a), kc = kind_of(m, n, 1, &c);
    if (!strcmp(op, "Constant")) {
        r->kind = V_CONST;
        r->c = constant_int(n);
        return true;
    }
    /* the condition passed on, or the constant true the exporter casts */
    if ((!strcmp(op, "Cast") || !strcmp(op, "Identity")) &&
        (ka == V_COND || is_int(m, n, 0, NULL, 1)))
        return r->kind = V_COND, true;
    if (!strcmp(op, "Gather") && axis0(n) && !a && kc == V_ITER)
        return r->kind = V_BOUND, r->outer = n->input[0], true;
    if (!strcmp(op, "Unsqueeze") && ka == V_BOUND && is_int(m, n, 1, "axes", 0))
        return *r = *a, true;
    if (!strcmp(op, "Unsqueeze") && ka == V_BAG && is_int(m, n, 1, "axes", 1))
        return *r = *a, r->kind = V_COL, true;
    if (!strcmp(op, "Slice") && n->n_input >= 4 && !a && kc == V_BOUND &&
        is_int(m, n, 3, NULL, 0) && (n->n_input < 5 || is_int(m, n, 4, NULL, 1))) {
        bag_val *e = lookup(m, n->input[2]);
        if (!e || e->kind != V_BOUND)
            return false;
        return r->kind = V_BAG, r->outer = n->input[0], r->lo = c->outer, r->hi = e->outer, true;
    }
    if (!strcmp(op, "Gather") && axis0(n) && !a && kc == V_BAG)
        return *r = *c, r->kind = V_ROWS, r->table = n->input[0], true;
    if (!strcmp(op, "Mul") && ((ka == V_ROWS && kc == V_COL) || (ka == V_COL && kc == V_ROWS))) {
        bag_val *rows = ka == V_ROWS ? a : c, *col = ka == V_ROWS ? c : a;
        if (rows->weights || strcmp(rows->lo, col->lo) || strcmp(rows->hi, col->hi))
            return false;
        return *r = *rows, r->weights = col->outer, true;
    }
    const Onnx__AttributeProto *keep = node_attr(n, "keepdims");
    int mode = !strcmp(op, "ReduceSum")    ? 0
               : !strcmp(op, "ReduceMean") ? 1
               : !strcmp(op, "ReduceMax")  ? 2
                                           : -1;
    if (mode >= 0 && ka == V_ROWS && keep && keep->i == 0 && is_int(m, n, 1, "axes", 0) &&
        !(mode > 0 && n->n_input > 1) && !(mode == 2 && a->weights))
        return *r = *a, r->kind = V_OUT, r->mode = mode, true;
    return false;
}

/* The body matched against the pattern: its bag output in *out. */
static tg_status match_body(onnx_builder *b, const Onnx__GraphProto *body, bag_match *m,
                            const bag_val **out)
{
    if (body->n_input != 2 || body->n_output != 2)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "a body with %zu inputs and %zu outputs (only nn.EmbeddingBag's "
                       "export is taken: the iteration and condition in, the condition and one "
                       "bag out; a general Loop is not supported)",
                       body->n_input, body->n_output);
    m->b = b;
    m->n = 0;
    m->v[m->n++] = (bag_val){.name = body->input[0]->name, .kind = V_ITER};
    m->v[m->n++] = (bag_val){.name = body->input[1]->name, .kind = V_COND};
    for (size_t k = 0; k < body->n_node; k++) {
        const Onnx__NodeProto *n = body->node[k];
        bag_val r = {0};
        if (n->n_output != 1 || m->n == BAG_MAX_VALS || !step(m, n, &r))
            return ob_fail(b, TG_ERR_UNSUPPORTED,
                           "body node %zu (%s '%s') is not a step of nn.EmbeddingBag's "
                           "export, the only Loop taken (a general Loop is not supported: each "
                           "iteration's sizes are known only at run time); a fixed-size form "
                           "such as nn.Embedding and a sum over a padded bag dimension imports",
                           k, n->op_type, n->name ? n->name : "");
        r.name = n->output[0];
        m->v[m->n++] = r;
    }
    const bag_val *cond = lookup(m, body->output[0]->name);
    *out = lookup(m, body->output[1]->name);
    if (!cond || cond->kind != V_COND || !*out || (*out)->kind != V_OUT)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "the body's outputs are not the condition and a reduced bag "
                       "(nn.EmbeddingBag's export, the only Loop taken)");
    return TG_OK;
}

/* A constant [1, L] of 0, 1, ..., L - 1. */
static tg_tensor *positions(onnx_builder *b, int64_t len)
{
    float *v = tg_malloc((size_t)(len ? len : 1) * sizeof *v);
    if (!v) {
        ob_fail(b, TG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < len; i++)
        v[i] = (float)i;
    tg_tensor *t = tg_constant_data(b->g, "bag positions", tg_shape2(1, len), v);
    tg_free(v);
    return t;
}

/* An outer 1-D integer tensor's first count values as f32 [count, 1]. */
static tg_tensor *bounds(onnx_builder *b, const char *name, int64_t count)
{
    tg_tensor *t = ob_named_tensor(b, name, true);
    if (!t)
        return NULL;
    tg_shape s = tg_tensor_shape(t);
    if (s.ndim != 1 || s.dim[0] < count || tg_tensor_dtype(t) != TG_I32) {
        ob_fail(b, TG_ERR_UNSUPPORTED, "the bag bounds '%s' are not %lld integers", name,
                (long long)count);
        return NULL;
    }
    t = tg_slice(b->g, tg_cast(b->g, t, TG_F32), 0, 0, count);
    return tg_reshape(b->g, t, tg_shape2(count, 1));
}

/* max: the largest row of each bag, [M, L, E] rows where in, else -inf. */
static tg_tensor *bag_max(onnx_builder *b, tg_tensor *in, tg_tensor *rows, tg_tensor *count)
{
    tg_graph *g = b->g;
    tg_shape is = tg_tensor_shape(in), rs = tg_tensor_shape(rows);
    if (is.dim[0] * rs.dim[0] * rs.dim[1] > ((int64_t)1 << 26)) {
        ob_fail(
            b, TG_ERR_UNSUPPORTED,
            "nn.EmbeddingBag mode 'max' over %lld bags of %lld indices of %lld-wide rows selects "
            "from more than 2^26 elements (use mode 'sum' or 'mean', or smaller batches)",
            (long long)is.dim[0], (long long)rs.dim[0], (long long)rs.dim[1]);
        return NULL;
    }
    tg_tensor *sel =
        tg_where(g, tg_reshape(g, in, tg_shape_of(3, (int64_t[]){is.dim[0], is.dim[1], 1})),
                 tg_reshape(g, rows, tg_shape_of(3, (int64_t[]){1, rs.dim[0], rs.dim[1]})),
                 tg_constant(g, tg_shape_of(0, NULL), -INFINITY));
    tg_tensor *zero = tg_constant(g, tg_shape_of(0, NULL), 0.0f);
    return tg_where(g, tg_greater(g, count, zero), tg_reduce_max(g, sel, 1u << 1, false), zero);
}

/* The bags as one op into *y (NULL: a graph op failed, which the graph's
 * status names); non-OK after ob_fail. */
static tg_status build_bags(onnx_builder *b, const bag_val *o, int64_t count, tg_tensor **y)
{
    tg_graph *g = b->g;
    tg_tensor *ids = ob_named_tensor(b, o->outer, true);
    tg_tensor *table = ids ? ob_named_tensor(b, o->table, false) : NULL;
    tg_tensor *lo = table ? bounds(b, o->lo, count) : NULL;
    tg_tensor *hi = lo ? bounds(b, o->hi, count) : NULL;
    if (!hi)
        return TG_ERR_UNSUPPORTED;
    tg_shape ts = tg_tensor_shape(table), is = tg_tensor_shape(ids);
    if (ts.ndim != 2 || is.ndim != 1 || tg_tensor_dtype(ids) != TG_I32) {
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "nn.EmbeddingBag's table must be 2-D and its indices 1-D integers");
    }
    tg_tensor *rows = tg_tensor_is_param(table) ? tg_embedding(g, table, ids)
                                                : tg_gather(g, table, ids, 0); /* [L, E] */
    tg_tensor *pos = positions(b, is.dim[0]);
    if (!pos)
        return TG_ERR_NOMEM;
    tg_tensor *in = tg_logical_and(g, tg_greater_equal(g, pos, lo), tg_less(g, pos, hi));
    tg_tensor *mask = tg_cast(g, in, TG_F32); /* [M, L] */
    tg_tensor *n = tg_reduce_sum(g, mask, 1u << 1, true);
    if (o->mode == 2) {
        *y = bag_max(b, in, rows, n);
        return *y || tg_graph_status(g) != TG_OK ? TG_OK : TG_ERR_UNSUPPORTED;
    }
    if (o->weights) {
        tg_tensor *w = ob_named_tensor(b, o->weights, false);
        if (!w)
            return TG_ERR_UNSUPPORTED;
        mask = tg_mul(g, mask, tg_reshape(g, w, tg_shape2(1, is.dim[0])));
    }
    *y = tg_matmul(g, mask, rows, false, false);
    if (o->mode == 1)
        *y = tg_div(g, *y, tg_maximum(g, n, tg_constant(g, tg_shape_of(0, NULL), 1.0f)));
    return TG_OK;
}

static tg_status map_loop(onnx_builder *b)
{
    const Onnx__AttributeProto *body = ob_attr(b, "body");
    if (!body || !body->g)
        return ob_fail(b, TG_ERR_FORMAT, "Loop has no body graph");
    if (b->node->n_input != 2 || b->node->n_output != 1)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "%zu inputs and %zu outputs (only nn.EmbeddingBag's export is "
                       "taken: a trip count, a condition, one output; a general Loop with "
                       "carried values is not supported)",
                       b->node->n_input, b->node->n_output);
    const tg_onnx_data *trips = ob_const(b, 0), *cond = trips ? ob_const(b, 1) : NULL;
    if (!cond)
        return TG_ERR_UNSUPPORTED;
    if (!trips->i || trips->n != 1 || trips->i[0] < 0 || !cond->i || cond->n != 1 || !cond->i[0])
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "the trip count must be a known count and the condition true "
                       "(nn.EmbeddingBag's export, the only Loop taken)");
    bag_match *m = tg_malloc(sizeof *m);
    if (!m)
        return ob_fail(b, TG_ERR_NOMEM, "out of memory");
    const bag_val *o = NULL;
    tg_status s = match_body(b, body->g, m, &o);
    tg_tensor *y = NULL;
    if (s == TG_OK)
        s = build_bags(b, o, trips->i[0], &y);
    tg_free(m);
    TG_TRY(s);
    return ob_set(b, 0, y);
}

const ob_op tg_onnx_loop_ops[] = {
    {"Loop", map_loop, "body"},
};
const int tg_onnx_loop_op_count = (int)(sizeof tg_onnx_loop_ops / sizeof tg_onnx_loop_ops[0]);
