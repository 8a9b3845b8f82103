/* onnx/onnx_build.c - appending a loaded ONNX model to a graph: the value
 * table, scopes from PyTorch node names, attribute access, and the dispatch
 * of each node to its op mapping (onnx_ops_*.c, onnx_fold.c).
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- failures ------------------------------------------------------------ */

tg_status ob_fail(onnx_builder *b, tg_status s, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const Onnx__NodeProto *n = b->node;
    if (!n)
        return tg_error(s, "%s: %s", b->m->path, msg);
    return tg_error(s, "%s: node '%s' (%s): %s", b->m->path, n->name ? n->name : "", n->op_type,
                    msg);
}

/* ---- values -------------------------------------------------------------- */

static ob_value *find(const onnx_builder *b, const char *name)
{
    int k = tg_onnx_names_get(&b->index, name);
    return k >= 0 ? &b->vals[k] : NULL;
}

ob_value *ob_find(const onnx_builder *b, const char *name)
{
    return find(b, name);
}

static ob_value *add_value(onnx_builder *b, const char *name)
{
    ob_value *v = find(b, name);
    if (v)
        return v;
    v = &b->vals[b->n_vals];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->init = -1;
    tg_onnx_names_put(&b->index, name, b->n_vals++);
    return v;
}

bool ob_has_input(const onnx_builder *b, int i)
{
    return i < (int)b->node->n_input && b->node->input[i][0];
}

static ob_value *input_value(onnx_builder *b, int i)
{
    if (!ob_has_input(b, i)) {
        ob_fail(b, TG_ERR_FORMAT, "input %d is missing", i);
        return NULL;
    }
    return find(b, b->node->input[i]);
}

static tg_status decode_init(onnx_builder *b, ob_value *v)
{
    if (v->init < 0 || v->c.f || v->c.i)
        return TG_OK;
    const tg_onnx_model *m = b->m;
    char what[512];
    snprintf(what, sizeof what, "%s: initializer %s", m->path, v->name);
    return tg_onnx_data_decode(m->graph->initializer[v->init], m->external[v->init],
                               m->external_size[v->init], what, &v->c);
}

const tg_onnx_data *ob_value_const(onnx_builder *b, ob_value *v)
{
    if (!v || v->t || !v->known || decode_init(b, v) != TG_OK)
        return NULL;
    return v->c.f || v->c.i ? &v->c : NULL;
}

int ob_initializer(const onnx_builder *b, int i)
{
    if (!ob_has_input(b, i))
        return -1;
    const ob_value *v = find(b, b->node->input[i]);
    return v && !v->t ? v->init : -1;
}

bool ob_is_const(onnx_builder *b, int i)
{
    const ob_value *v = ob_has_input(b, i) ? find(b, b->node->input[i]) : NULL;
    return v && !v->t;
}

bool ob_is_foldable(onnx_builder *b, int i)
{
    if (!ob_is_const(b, i))
        return false;
    if (ob_initializer(b, i) < 0)
        return true;
    const tg_onnx_data *d = ob_const(b, i);
    return d && !d->f;
}

tg_status ob_value_in(onnx_builder *b, int i, const tg_onnx_data **c, tg_tensor **t, tg_shape *s)
{
    bool folded = ob_is_foldable(b, i);
    *c = folded ? ob_const(b, i) : NULL;
    *t = folded ? NULL : ob_tensor(b, i);
    if (!*t && !*c)
        return TG_ERR_UNSUPPORTED;
    *s = *t ? tg_tensor_shape(*t) : tg_shape_of((*c)->ndim, (*c)->dim);
    return TG_OK;
}

const tg_onnx_data *ob_const(onnx_builder *b, int i)
{
    ob_value *v = input_value(b, i);
    if (!v)
        return NULL;
    if (v->t) {
        ob_fail(b, TG_ERR_UNSUPPORTED,
                "input %d ('%s') must be known at import (a constant or "
                "computed from shapes) but depends on the model's inputs",
                i, v->name);
        return NULL;
    }
    return decode_init(b, v) == TG_OK ? &v->c : NULL;
}

static tg_shape data_shape(const tg_onnx_data *d)
{
    return tg_shape_of(d->ndim, d->dim);
}

tg_tensor *ob_param(onnx_builder *b, const char *name, tg_shape shape, const float *data,
                    bool state)
{
    /* parameters keep the file's names, outside the node's scope */
    if (b->scope[0])
        tg_scope_pop(b->g);
    tg_tensor *t =
        state ? tg_state_data(b->g, name, shape, data) : tg_param_data(b->g, name, shape, data);
    if (b->scope[0])
        tg_scope_push(b->g, b->scope);
    return t;
}

/* A float initializer's little-endian raw bytes, used in place when they
 * are float-aligned, so the weights are copied once (into the graph) rather
 * than decoded first: the bulk of a ResNet-50 import. */
static const float *raw_floats(const onnx_builder *b, const ob_value *v, tg_shape *shape)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const tg_onnx_model *m = b->m;
    const Onnx__TensorProto *t = m->graph->initializer[v->init];
    const uint8_t *raw = m->external[v->init] ? m->external[v->init]
                         : t->has_raw_data    ? t->raw_data.data
                                              : NULL;
    size_t len = m->external[v->init] ? m->external_size[v->init] : t->raw_data.len;
    if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || !raw || t->n_dims > TG_MAX_DIMS ||
        (uintptr_t)raw % _Alignof(float) != 0)
        return NULL;
    *shape = tg_shape_of((int)t->n_dims, t->dims);
    /* the loader checked the size; a zero-element tensor takes the slow path */
    return tg_shape_numel(*shape) > 0 && len == (size_t)tg_shape_numel(*shape) * sizeof(float)
               ? (const float *)(const void *)raw
               : NULL;
#else
    (void)b;
    (void)v;
    (void)shape;
    return NULL;
#endif
}

tg_tensor *ob_tensor(onnx_builder *b, int i)
{
    ob_value *v = input_value(b, i);
    if (!v || v->t)
        return v ? v->t : NULL;
    tg_shape raw_shape;
    const float *raw = v->init >= 0 && !v->c.f && !v->c.i ? raw_floats(b, v, &raw_shape) : NULL;
    if (raw) {
        v->t = ob_param(b, v->name, raw_shape, raw, ob_init_frozen(b, v->init));
        return v->t;
    }
    if (decode_init(b, v) != TG_OK)
        return NULL;
    if (!v->c.f) {
        ob_fail(b, TG_ERR_UNSUPPORTED,
                "input %d ('%s') is a %s constant where this op takes a float tensor", i, v->name,
                tg_onnx_elem_name(v->c.elem_type));
        return NULL;
    }
    /* a float initializer is a weight (trainable, named as in the file;
     * state if frozen); other constants (Constant nodes, folded values) are
     * constants */
    v->t = v->init >= 0
               ? ob_param(b, v->name, data_shape(&v->c), v->c.f, ob_init_frozen(b, v->init))
               : tg_constant_data(b->g, "constant", data_shape(&v->c), v->c.f);
    return v->t;
}

tg_tensor *ob_named_tensor(onnx_builder *b, const char *name, bool typed)
{
    ob_value *v = find(b, name);
    if (!v || (!v->known && v->init < 0)) {
        ob_fail(b, TG_ERR_FORMAT, "the subgraph reads '%s', which no earlier node produces", name);
        return NULL;
    }
    /* as input 0 of a node like the current one: the same conversions and
     * messages as ob_tensor / ob_typed_tensor */
    const Onnx__NodeProto *real = b->node;
    Onnx__NodeProto as_input = *real;
    char *in[1] = {(char *)name};
    as_input.n_input = 1;
    as_input.input = in;
    b->node = &as_input;
    tg_tensor *t = typed ? ob_typed_tensor(b, 0) : ob_tensor(b, 0);
    b->node = real;
    return t;
}

tg_tensor *ob_int_constant(onnx_builder *b, const char *what, tg_shape shape, const int64_t *v)
{
    /* i32 values through an f32 constant: exact up to 2^24, which every
     * index, mask and position id is; larger ones are refused */
    const int64_t limit = (int64_t)1 << 24, n = tg_shape_numel(shape);
    float *f = tg_malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!f) {
        ob_fail(b, TG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int64_t k = 0; k < n; k++) {
        if (v[k] > limit || v[k] < -limit) {
            tg_free(f);
            ob_fail(b, TG_ERR_UNSUPPORTED,
                    "%s holds %lld; integer constants that reach the graph are taken up to 2^24 "
                    "in magnitude",
                    what, (long long)v[k]);
            return NULL;
        }
        f[k] = (float)v[k];
    }
    tg_tensor *c = tg_constant_data(b->g, "constant", shape, f);
    tg_free(f);
    return tg_cast(b->g, c, TG_I32);
}

tg_tensor *ob_typed_tensor(onnx_builder *b, int i)
{
    ob_value *v = input_value(b, i);
    if (!v || v->t)
        return v ? v->t : NULL;
    if (decode_init(b, v) != TG_OK)
        return NULL;
    if (v->c.f)
        return ob_tensor(b, i);
    char what[160];
    snprintf(what, sizeof what, "input %d ('%s')", i, v->name);
    return ob_int_constant(b, what, data_shape(&v->c), v->c.i);
}

static tg_status output_value(onnx_builder *b, int k, ob_value **out)
{
    if (k >= (int)b->node->n_output || !b->node->output[k][0]) {
        *out = NULL; /* an unused optional output */
        return TG_OK;
    }
    *out = find(b, b->node->output[k]);
    return TG_OK;
}

tg_status ob_set(onnx_builder *b, int k, tg_tensor *t)
{
    /* without a graph error, the helper that returned NULL has already
     * recorded what went wrong */
    if (!t)
        return tg_graph_status(b->g) != TG_OK
                   ? ob_fail(b, tg_graph_status(b->g), "%s", tg_graph_error(b->g))
                   : TG_ERR_UNSUPPORTED;
    ob_value *v;
    TG_TRY(output_value(b, k, &v));
    if (v) {
        v->t = t;
        v->known = true;
    }
    return TG_OK;
}

tg_status ob_set_initializer(onnx_builder *b, int k, int init)
{
    ob_value *v;
    TG_TRY(output_value(b, k, &v));
    if (v) {
        v->init = init;
        v->known = true;
    }
    return TG_OK;
}

tg_status ob_set_const(onnx_builder *b, int k, tg_onnx_data *d)
{
    ob_value *v;
    TG_TRY(output_value(b, k, &v));
    if (!v) {
        tg_onnx_data_free(d);
        return TG_OK;
    }
    v->c = *d;
    v->known = true;
    memset(d, 0, sizeof *d);
    return TG_OK;
}

int ob_opset(const onnx_builder *b)
{
    return b->m->opset;
}

tg_status ob_attr_in_opsets(onnx_builder *b, const char *name, int from, int until)
{
    if (!ob_attr(b, name) || (ob_opset(b) >= from && ob_opset(b) < until))
        return TG_OK;
    char range[64];
    if (from <= 1)
        snprintf(range, sizeof range, "before opset %d", until);
    else
        snprintf(range, sizeof range, "from opset %d", from);
    return ob_fail(b, TG_ERR_INVALID_ARG,
                   "attribute '%s' belongs to %s %s, and this model is opset %d (re-export it, "
                   "or correct its opset_import)",
                   name, b->node->op_type, range, ob_opset(b));
}

tg_status ob_legacy_broadcast(onnx_builder *b)
{
    TG_TRY(ob_attr_in_opsets(b, "broadcast", 1, 7));
    TG_TRY(ob_attr_in_opsets(b, "axis", 1, 7));
    if (ob_opset(b) >= 7 || b->node->n_input < 2)
        return TG_OK;
    tg_shape a, c;
    TG_TRY(ob_shape(b, 0, &a));
    TG_TRY(ob_shape(b, 1, &c));
    if (!ob_attr_int(b, "broadcast", 0)) {
        if (!tg_shape_equal(a, c))
            return ob_fail(b, TG_ERR_SHAPE,
                           "inputs of different shapes without broadcast=1 (opset %d broadcasts "
                           "only when asked)",
                           ob_opset(b));
        return TG_OK;
    }
    int64_t axis = ob_attr_int(b, "axis", a.ndim - c.ndim);
    axis = axis < 0 ? axis + a.ndim : axis;
    if (axis != a.ndim - c.ndim)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "broadcast with axis %lld aligns B's %d dims away from A's last ones (opset "
                       "%d's legacy broadcast; only the trailing alignment NumPy's rule shares is "
                       "implemented)",
                       (long long)ob_attr_int(b, "axis", 0), c.ndim, ob_opset(b));
    return TG_OK;
}

/* ---- attributes ---------------------------------------------------------- */

const Onnx__AttributeProto *ob_attr(const onnx_builder *b, const char *name)
{
    for (size_t k = 0; k < b->node->n_attribute; k++)
        if (b->node->attribute[k]->name && !strcmp(b->node->attribute[k]->name, name))
            return b->node->attribute[k];
    return NULL;
}

int64_t ob_attr_int(const onnx_builder *b, const char *name, int64_t dflt)
{
    const Onnx__AttributeProto *a = ob_attr(b, name);
    return a && a->has_i ? a->i : dflt;
}

float ob_attr_float(const onnx_builder *b, const char *name, float dflt)
{
    const Onnx__AttributeProto *a = ob_attr(b, name);
    return a && a->has_f ? a->f : dflt;
}

const int64_t *ob_attr_ints(const onnx_builder *b, const char *name, int *n)
{
    const Onnx__AttributeProto *a = ob_attr(b, name);
    *n = a ? (int)a->n_ints : 0;
    return a && a->n_ints ? a->ints : NULL;
}

const float *ob_attr_floats(const onnx_builder *b, const char *name, int *n)
{
    const Onnx__AttributeProto *a = ob_attr(b, name);
    *n = a ? (int)a->n_floats : 0;
    return a && a->n_floats ? a->floats : NULL;
}

const char *ob_attr_string(const onnx_builder *b, const char *name, char *buf, size_t cap)
{
    const Onnx__AttributeProto *a = ob_attr(b, name);
    if (!a || !a->has_s)
        return "";
    snprintf(buf, cap, "%.*s", (int)a->s.len, (const char *)a->s.data);
    return buf;
}

/* ---- op table ------------------------------------------------------------ */

/* Every op table, in the order the supported list names them. */
static const struct {
    const ob_op *ops;
    const int *count;
} op_tables[] = {{tg_onnx_conv_ops, &tg_onnx_conv_op_count},
                 {tg_onnx_elementwise_ops, &tg_onnx_elementwise_op_count},
                 {tg_onnx_norm_ops, &tg_onnx_norm_op_count},
                 {tg_onnx_shape_ops, &tg_onnx_shape_op_count},
                 {tg_onnx_loss_ops, &tg_onnx_loss_op_count},
                 {tg_onnx_fold_ops, &tg_onnx_fold_op_count},
                 {tg_onnx_fold_logic_ops, &tg_onnx_fold_logic_op_count},
                 {tg_onnx_index_ops, &tg_onnx_index_op_count},
                 {tg_onnx_resize_ops, &tg_onnx_resize_op_count},
                 {tg_onnx_random_ops, &tg_onnx_random_op_count},
                 {tg_onnx_scatter_ops, &tg_onnx_scatter_op_count},
                 {tg_onnx_reduce_ops, &tg_onnx_reduce_op_count},
                 {tg_onnx_loop_ops, &tg_onnx_loop_op_count}};
#define N_OP_TABLES (int)(sizeof op_tables / sizeof op_tables[0])

const ob_op *ob_find_op(const char *op_type)
{
    for (int t = 0; t < N_OP_TABLES; t++)
        for (int k = 0; k < *op_tables[t].count; k++)
            if (!strcmp(op_tables[t].ops[k].op_type, op_type))
                return &op_tables[t].ops[k];
    return NULL;
}

const char *tg_onnx_supported_ops(void)
{
    static _Thread_local char list[4096]; /* built once per thread: no lock needed */
    if (list[0])
        return list;
    size_t used = 0;
    for (int t = 0; t < N_OP_TABLES; t++)
        for (int k = 0; k < *op_tables[t].count && used < sizeof list; k++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "",
                                     op_tables[t].ops[k].op_type);
    return list;
}

static bool is_default_domain(const Onnx__NodeProto *n)
{
    return !n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx");
}

tg_status tg_onnx_check_ops(const tg_onnx_model *m)
{
    char list[2048] = "";
    size_t used = 0;
    int missing = 0;
    const Onnx__GraphProto *g = m->graph;
    for (size_t k = 0; k < g->n_node; k++) {
        const Onnx__NodeProto *n = g->node[k];
        if (is_default_domain(n) && ob_find_op(n->op_type))
            continue;
        bool seen = false; /* list each op type once */
        for (size_t j = 0; j < k && !seen; j++)
            seen = !strcmp(g->node[j]->op_type, n->op_type) &&
                   !(is_default_domain(g->node[j]) && ob_find_op(g->node[j]->op_type));
        if (seen)
            continue;
        missing++;
        if (used < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s%s%s (node '%s')",
                                     missing > 1 ? ", " : "", is_default_domain(n) ? "" : n->domain,
                                     is_default_domain(n) ? "" : ".", n->op_type,
                                     n->name ? n->name : "");
    }
    if (!missing)
        return TG_OK;
    return tg_error(TG_ERR_UNSUPPORTED, "%s: %d unsupported op type%s: %s. Supported: %s", m->path,
                    missing, missing == 1 ? "" : "s", list, tg_onnx_supported_ops());
}

/* Whether `name` appears in the comma-separated list. */
static bool in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, name, n))
            return true;
        p = end ? end + 1 : NULL;
    }
    return false;
}

/* ---- scopes -------------------------------------------------------------- */

/* "/layer3/layer3.0/conv1/Conv" -> scope "layer3/0/conv1", leaf "Conv": the
 * exporter writes each enclosing module's name, each either the full dotted
 * path ("layer3.0") or the attribute name ("conv1"); joined as a module path
 * with '/' for '.', the ops sit where --split layer3.0 looks. */
/* The length of the longest tail of path (whole components: "layer3" or
 * "model.layer3" of "m.model.layer3") that the part p[0, len) extends with
 * a '.' ("layer3.0"), 0 if none: the exporter names a module by its dotted
 * path below the module that holds it, not from the root. */
static size_t tail_extended(const char *path, const char *p, size_t len)
{
    size_t have = strlen(path);
    for (size_t start = 0; start < have; start++) {
        if (start > 0 && path[start - 1] != '.')
            continue;
        size_t tail = have - start;
        if (len > tail && !strncmp(p, path + start, tail) && p[tail] == '.')
            return tail;
    }
    return 0;
}

static void node_scope(onnx_builder *b, const Onnx__NodeProto *n)
{
    char path[512] = "";
    const char *name = n->name && *n->name ? n->name : n->op_type;
    const char *last = strrchr(name, '/');
    snprintf(b->leaf, sizeof b->leaf, "%s", last ? last + 1 : name);
    if (!b->leaf[0])
        snprintf(b->leaf, sizeof b->leaf, "%s", n->op_type);
    for (const char *p = name; last && p < last;) {
        if (*p == '/') {
            p++;
            continue;
        }
        const char *end = strchr(p, '/');
        size_t len = (size_t)(end - p), have = strlen(path), tail = tail_extended(path, p, len);
        if (tail)
            snprintf(path + have - tail, sizeof path - (have - tail), "%.*s", (int)len, p);
        else
            snprintf(path + have, sizeof path - have, "%s%.*s", have ? "." : "", (int)len, p);
        p = end;
    }
    for (char *c = path; *c; c++)
        if (*c == '.')
            *c = '/';
    snprintf(b->scope, sizeof b->scope, "%s", path);
}

/* ---- building ------------------------------------------------------------ */

/* A tensor the caller made for input `name` (the model zoo's images):
 * the same shape, or the same elements per sample, reshaped. */
static tg_status given_input(onnx_builder *b, tg_tensor *t, const char *name, tg_shape want,
                             tg_tensor **out)
{
    tg_shape have = tg_tensor_shape(t);
    char hs[96], ws[96];
    if (tg_shape_equal(have, want)) {
        *out = t;
        return TG_OK;
    }
    if (tg_tensor_dtype(t) != TG_F32 || tg_shape_numel(have) != tg_shape_numel(want) ||
        have.dim[0] != want.dim[0])
        return ob_fail(b, TG_ERR_SHAPE, "input '%s' is %s but the data gives %s", name,
                       tg_shape_str(want, ws, sizeof ws), tg_shape_str(have, hs, sizeof hs));
    *out = tg_reshape(b->g, t, want);
    return TG_OK;
}

/* A bound input: a constant like any folded value. */
static tg_status bind_data(onnx_builder *b, int i, const tg_onnx_data *d, tg_onnx_outputs *out)
{
    tg_onnx_value v = tg_onnx_input(b->m, i);
    ob_value *val = find(b, v.name);
    TG_TRY(ob_data_new(b, d->f != NULL, d->ndim, d->dim, &val->c));
    if (d->f)
        memcpy(val->c.f, d->f, (size_t)d->n * sizeof(float));
    else
        memcpy(val->c.i, d->i, (size_t)d->n * sizeof(int64_t));
    val->c.elem_type = d->elem_type;
    val->known = true;
    out->inputs[out->n_inputs++] = NULL;
    return TG_OK;
}

static tg_status bind_input(onnx_builder *b, int i, tg_onnx_outputs *out)
{
    return bind_data(b, i, b->bound[i], out);
}

/* An integer input whose values the caller gives (cfg->constants), with the
 * input's shape, the batch dimension filled in. */
static tg_status bind_constant(onnx_builder *b, int i, tg_shape s, tg_onnx_outputs *out)
{
    tg_onnx_value v = tg_onnx_input(b->m, i);
    if (strcmp(v.dtype, "int64") && strcmp(v.dtype, "int32"))
        return ob_fail(b, TG_ERR_DTYPE, "input '%s' is %s: only integer inputs are fixed", v.name,
                       v.dtype);
    tg_onnx_data d = {.elem_type = !strcmp(v.dtype, "int64") ? ONNX__TENSOR_PROTO__DATA_TYPE__INT64
                                                             : ONNX__TENSOR_PROTO__DATA_TYPE__INT32,
                      .ndim = s.ndim};
    memcpy(d.dim, s.dim, sizeof s.dim);
    d.n = tg_shape_numel(s);
    d.i = (int64_t *)b->cfg->constants[i]; /* only read */
    return bind_data(b, i, &d, out);
}

static bool fixed_by_caller(const onnx_builder *b, int i)
{
    return b->cfg->constants && i < b->cfg->n_constants && b->cfg->constants[i];
}

static tg_status make_input(onnx_builder *b, int i, tg_onnx_outputs *out)
{
    if (b->bound && b->bound[i])
        return bind_input(b, i, out);
    tg_onnx_value v = tg_onnx_input(b->m, i);
    if (v.ndim < 0)
        return ob_fail(b, TG_ERR_UNSUPPORTED, "input '%s' has no declared shape", v.name);
    tg_shape s = tg_shape_of(v.ndim, v.dim);
    for (int d = 0; d < v.ndim; d++) {
        if (v.dim[d] >= 0)
            continue;
        if (d > 0 || b->cfg->batch <= 0)
            return ob_fail(b, TG_ERR_UNSUPPORTED,
                           "input '%s': dimension %d is dynamic; only a "
                           "dynamic first (batch) dimension is taken, from the batch size",
                           v.name, d);
        s.dim[d] = b->cfg->batch;
    }
    if (fixed_by_caller(b, i))
        return bind_constant(b, i, s, out);
    tg_dtype dt;
    /* float64 and float16 inputs are f32 tensors: the device has no f64
     * (nor does an accelerator without it), and f16 converts exactly; the
     * model's description says so (tg_onnx_reduced_note names them) */
    if (!strcmp(v.dtype, "float") || tg_onnx_computed_in_f32(v.dtype))
        dt = TG_F32;
    else if (!strcmp(v.dtype, "int64") || !strcmp(v.dtype, "int32"))
        dt = TG_I32;
    else if (!strcmp(v.dtype, "bool"))
        dt = TG_I32; /* 0/1, as the graph keeps bools (Cast, Not, Where: "not zero") */
    else if (!strcmp(v.dtype, "uint8"))
        dt = TG_U8; /* 8-bit images: a Cast to float follows (map_cast) */
    else
        return ob_fail(b, TG_ERR_DTYPE,
                       "input '%s' is %s (float, double, float16, int64, int32, bool and uint8 "
                       "inputs are taken)",
                       v.name, v.dtype);
    tg_tensor *t = NULL;
    if (b->cfg->inputs && i < b->cfg->n_inputs)
        TG_TRY(given_input(b, b->cfg->inputs[i], v.name, s, &t));
    else
        t = tg_input(b->g, v.name, dt, s);
    ob_value *val = find(b, v.name);
    val->t = t;
    val->known = true;
    if (out->n_inputs < TG_ONNX_MAX_IO)
        out->inputs[out->n_inputs++] = t;
    return t ? TG_OK : ob_fail(b, tg_graph_status(b->g), "%s", tg_graph_error(b->g));
}

bool ob_output_used(const onnx_builder *b, int k)
{
    const Onnx__NodeProto *n = b->node;
    if ((size_t)k >= n->n_output || !n->output[k][0])
        return false;
    const char *name = n->output[k];
    const Onnx__GraphProto *g = b->m->graph;
    for (size_t i = 0; i < g->n_output; i++)
        if (!strcmp(g->output[i]->name, name))
            return true;
    for (size_t j = 0; j < g->n_node; j++)
        for (size_t i = 0; i < g->node[j]->n_input; i++)
            if (!strcmp(g->node[j]->input[i], name))
                return true;
    return false;
}

void ob_enter(onnx_builder *b, const Onnx__NodeProto *n)
{
    b->node = n;
    node_scope(b, n);
    if (b->scope[0])
        tg_scope_push(b->g, b->scope);
}

void ob_leave(onnx_builder *b)
{
    if (b->scope[0])
        tg_scope_pop(b->g);
    b->scope[0] = '\0';
}

static tg_status map_node(onnx_builder *b, const Onnx__NodeProto *n)
{
    b->node = n;
    const ob_op *op = is_default_domain(n) ? ob_find_op(n->op_type) : NULL;
    if (!op)
        return ob_fail(b, TG_ERR_UNSUPPORTED, "op type %s is not supported (supported: %s)",
                       n->op_type, tg_onnx_supported_ops());
    for (size_t k = 0; k < n->n_attribute; k++)
        if (!in_list(op->attrs, n->attribute[k]->name))
            return ob_fail(b, TG_ERR_UNSUPPORTED, "attribute '%s' is not supported (%s takes: %s)",
                           n->attribute[k]->name, n->op_type, op->attrs[0] ? op->attrs : "none");
    ob_enter(b, n);
    tg_status s = op->map(b);
    ob_leave(b);
    if (s != TG_OK)
        return s;
    if (tg_graph_status(b->g) != TG_OK)
        return ob_fail(b, tg_graph_status(b->g), "%s", tg_graph_error(b->g));
    return TG_OK;
}

/* Outputs a mapping did not produce may only be unused (BatchNormalization's
 * training statistics, Dropout's mask): check at first use. */
static tg_status check_inputs_known(onnx_builder *b, const Onnx__NodeProto *n)
{
    for (size_t i = 0; i < n->n_input; i++) {
        const ob_value *v = n->input[i][0] ? find(b, n->input[i]) : NULL;
        if (v && !v->known && v->init < 0) {
            b->node = n;
            return ob_fail(b, TG_ERR_UNSUPPORTED,
                           "input '%s' is an output the importer does not "
                           "produce (an optional output such as a mask or batch statistics)",
                           v->name);
        }
    }
    return TG_OK;
}

/* A graph output known at import (shape arithmetic, a constant): the graph
 * computes in f32, so integers are given as floats. */
static tg_status constant_output(onnx_builder *b, ob_value *v, tg_tensor **out)
{
    if (decode_init(b, v) != TG_OK)
        return TG_ERR_FORMAT;
    if (!v->c.f && !v->c.i)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "graph output '%s' is an optional output the "
                       "importer does not produce (batch or layer norm statistics, a mask)",
                       v->name);
    float *f = v->c.f;
    if (!f) {
        f = tg_malloc((size_t)(v->c.n ? v->c.n : 1) * sizeof(float));
        if (!f)
            return ob_fail(b, TG_ERR_NOMEM, "out of memory");
        for (int64_t k = 0; k < v->c.n; k++)
            f[k] = (float)v->c.i[k];
    }
    *out = tg_constant_data(b->g, "constant", data_shape(&v->c), f);
    if (f != v->c.f)
        tg_free(f);
    return TG_OK;
}

/* Whether output `name` comes (through Identity, Dropout, Cast) from a view
 * op or straight from an input or initializer. */
static bool output_needs_copy(const tg_onnx_model *m, const char *name)
{
    static const char *const views[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"};
    static const char *const through[] = {"Identity", "Dropout", "Cast"};
    const Onnx__GraphProto *g = m->graph;
    for (int hops = 0; hops < 64; hops++) {
        const Onnx__NodeProto *p = NULL;
        for (size_t k = 0; k < g->n_node && !p; k++)
            for (size_t o = 0; o < g->node[k]->n_output && !p; o++)
                if (!strcmp(g->node[k]->output[o], name))
                    p = g->node[k];
        if (!p || p->n_input == 0)
            return true; /* an input, an initializer or a constant */
        for (int i = 0; i < 4; i++)
            if (!strcmp(p->op_type, views[i]))
                return true;
        bool pass = false;
        for (int i = 0; i < 3; i++)
            pass |= !strcmp(p->op_type, through[i]);
        if (!pass)
            return false;
        name = p->input[0];
    }
    return true;
}

static tg_status build_all(onnx_builder *b, tg_onnx_outputs *out)
{
    const Onnx__GraphProto *g = b->m->graph;
    for (size_t k = 0; k < g->n_initializer; k++) {
        ob_value *v = add_value(b, g->initializer[k]->name);
        v->init = (int)k;
        v->known = true;
    }
    for (size_t k = 0; k < g->n_input; k++)
        add_value(b, g->input[k]->name);
    for (size_t k = 0; k < g->n_node; k++)
        for (size_t o = 0; o < g->node[k]->n_output; o++)
            if (g->node[k]->output[o][0])
                add_value(b, g->node[k]->output[o]);
    TG_TRY(tg_onnx_check_ops(b->m));
    for (int i = 0; i < b->m->n_inputs; i++)
        TG_TRY(make_input(b, i, out));
    bool *skip = tg_calloc(g->n_node + 1, sizeof *skip);
    if (!skip)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", b->m->path);
    tg_status s = TG_OK;
    for (size_t k = 0; k < g->n_node && s == TG_OK; k++) {
        if (skip[k])
            continue; /* covered by a pattern */
        s = check_inputs_known(b, g->node[k]);
        if (s == TG_OK && !ob_match_gelu(b, (int)k, skip) &&
            !ob_match_layer_norm(b, (int)k, skip) && !ob_match_gelu_tanh(b, (int)k, skip) &&
            !ob_match_silu(b, (int)k, skip))
            s = map_node(b, g->node[k]);
        if (s == TG_OK && tg_graph_status(b->g) != TG_OK)
            s = ob_fail(b, tg_graph_status(b->g), "%s", tg_graph_error(b->g));
    }
    tg_free(skip);
    TG_TRY(s);
    b->node = NULL;
    for (size_t k = 0; k < g->n_output; k++) {
        ob_value *v = find(b, g->output[k]->name);
        tg_tensor *t = v->t;
        if (!t)
            TG_TRY(constant_output(b, v, &t));
        /* a view or a leaf has no output buffer of its own: copy it */
        bool is_input = false;
        for (int i = 0; i < out->n_inputs; i++)
            is_input |= out->inputs[i] == t;
        if (is_input || v->init >= 0 || tg_tensor_is_view(t) || output_needs_copy(b->m, v->name))
            t = tg_tensor_dtype(t) == TG_I32 /* through f32: exact, integers being within 2^24 */
                    ? tg_cast(b->g, tg_cast(b->g, t, TG_F32), TG_I32)
                    : tg_scale(b->g, t, 1.0f, 0.0f);
        if (!t)
            return ob_fail(b, tg_graph_status(b->g), "%s", tg_graph_error(b->g));
        tg_tensor_mark_output(t);
        if (out->n_outputs < TG_ONNX_MAX_IO)
            out->outputs[out->n_outputs++] = t;
    }
    return TG_OK;
}

tg_status tg_onnx_build(const tg_onnx_model *m, tg_graph *g, const tg_onnx_build_config *c,
                        tg_onnx_outputs *out)
{
    return tg_onnx_build_bound(m, g, c, NULL, out);
}

tg_status tg_onnx_build_bound(const tg_onnx_model *m, tg_graph *g, const tg_onnx_build_config *c,
                              const tg_onnx_data *const *bound, tg_onnx_outputs *out)
{
    if (!m || !g || !out)
        return tg_error(TG_ERR_INVALID_ARG, "tg_onnx_build: no model, graph or output given");
    memset(out, 0, sizeof *out);
    tg_onnx_build_config dflt = {0};
    onnx_builder b = {.m = m, .g = g, .cfg = c ? c : &dflt, .bound = bound};
    const Onnx__GraphProto *gp = m->graph;
    size_t n = gp->n_initializer + gp->n_input + 1;
    for (size_t k = 0; k < gp->n_node; k++)
        n += gp->node[k]->n_output;
    if (m->n_inputs > TG_ONNX_MAX_IO || gp->n_output > TG_ONNX_MAX_IO)
        return tg_error(TG_ERR_UNSUPPORTED, "%s: %d inputs and %zu outputs (at most %d each)",
                        m->path, m->n_inputs, gp->n_output, TG_ONNX_MAX_IO);
    b.vals = tg_calloc(n, sizeof *b.vals);
    if (!b.vals || !tg_onnx_names_init(&b.index, n)) {
        tg_free(b.vals);
        tg_onnx_names_free(&b.index);
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", m->path);
    }
    tg_status s = ob_frozen_init(&b);
    if (s == TG_OK)
        s = build_all(&b, out);
    ob_frozen_free(&b);
    for (int k = 0; k < b.n_vals; k++)
        tg_onnx_data_free(&b.vals[k].c);
    tg_free(b.vals);
    tg_onnx_names_free(&b.index);
    return s;
}
