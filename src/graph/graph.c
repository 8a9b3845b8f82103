/* graph/graph.c - the graph: nodes, names, scopes, blocks, sticky errors. */
#include "graph/node.h"

#include "core/alloc.h"
#include "core/error.h"
#include "graph/op_rules.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *tg_role_name(tg_role r)
{
    static const char *const names[TG_ROLE_COUNT] = {
        "activation", "input", "param", "state", "constant", "gradient", "update",
    };
    return (unsigned)r < TG_ROLE_COUNT ? names[r] : "?";
}

tg_graph *tg_graph_create(void)
{
    tg_graph *g = tg_calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->arena = tg_arena_create(256 * 1024);
    if (!g->arena) {
        tg_free(g);
        return NULL;
    }
    g->current_block = -1;
    g->training = true;
    return g;
}

void tg_graph_destroy(tg_graph *g)
{
    if (!g)
        return;
    tg_free(g->nodes);
    tg_free(g->blocks);
    tg_free(g->names);
    tg_free(g->error);
    tg_arena_destroy(g->arena);
    tg_free(g);
}

tg_status tg_graph_status(const tg_graph *g)
{
    return g ? g->status : TG_ERR_INVALID_ARG;
}

const char *tg_graph_error(const tg_graph *g)
{
    return g && g->error ? g->error : "";
}

void tg_graph_set_training(tg_graph *g, bool training)
{
    g->training = training;
}
bool tg_graph_training(const tg_graph *g)
{
    return g->training;
}
int tg_graph_tensor_count(const tg_graph *g)
{
    return g->n_nodes;
}

tg_tensor *tg_graph_tensor(const tg_graph *g, int index)
{
    return index >= 0 && index < g->n_nodes ? g->nodes[index] : NULL;
}

tg_tensor *tg_graph_fail(tg_graph *g, tg_status s, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tg_error(s, "%s", msg);
    if (g && g->status == TG_OK) {
        g->status = s;
        g->error = tg_strdup(msg);
    }
    return NULL;
}

/* ---- names ------------------------------------------------------------------ */

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int names_grow(tg_graph *g)
{
    int cap = g->names_cap ? g->names_cap * 2 : 256;
    tg_tensor **slots = tg_calloc((size_t)cap, sizeof *slots);
    if (!slots)
        return 0;
    for (int i = 0; i < g->names_cap; i++) {
        tg_tensor *t = g->names[i];
        if (!t)
            continue;
        uint64_t j = name_hash(t->name) & (uint64_t)(cap - 1);
        while (slots[j])
            j = (j + 1) & (uint64_t)(cap - 1);
        slots[j] = t;
    }
    tg_free(g->names);
    g->names = slots;
    g->names_cap = cap;
    return 1;
}

tg_tensor *tg_graph_find(const tg_graph *g, const char *name)
{
    if (!g || !name || !g->names_cap)
        return NULL;
    uint64_t mask = (uint64_t)g->names_cap - 1, j = name_hash(name) & mask;
    for (; g->names[j]; j = (j + 1) & mask)
        if (strcmp(g->names[j]->name, name) == 0)
            return g->names[j];
    return NULL;
}

/* Add t (named) to the table, growing it to stay at most half full. */
static int names_insert(tg_graph *g, tg_tensor *t)
{
    if ((g->names_used + 1) * 2 > g->names_cap && !names_grow(g))
        return 0;
    uint64_t mask = (uint64_t)g->names_cap - 1, j = name_hash(t->name) & mask;
    while (g->names[j])
        j = (j + 1) & mask;
    g->names[j] = t;
    g->names_used++;
    return 1;
}

/* Remove t from the table. Linear probing: the entries after the hole
 * that would not be found across it are moved back (Knuth's algorithm R),
 * so a rename costs a few probes, not a rebuild. */
static void names_remove(tg_graph *g, const tg_tensor *t)
{
    if (!g->names_cap || !t->name)
        return;
    uint64_t mask = (uint64_t)g->names_cap - 1, i = name_hash(t->name) & mask;
    while (g->names[i] && g->names[i] != t)
        i = (i + 1) & mask;
    if (!g->names[i])
        return;
    g->names[i] = NULL;
    g->names_used--;
    for (uint64_t j = (i + 1) & mask; g->names[j]; j = (j + 1) & mask) {
        uint64_t home = name_hash(g->names[j]->name) & mask;
        /* move back unless its home lies cyclically in (i, j] */
        bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            g->names[i] = g->names[j];
            g->names[j] = NULL;
            i = j;
        }
    }
}

/* Give t the name `base`, or base.1, base.2, ... if taken. The node that
 * holds `base` remembers the next suffix to try, so n nodes of one name
 * cost n lookups, not n^2 / 2 (an exported model's thousands of "Relu"). */
static int assign_name(tg_graph *g, tg_tensor *t, const char *base)
{
    const char *name = base;
    char buf[512];
    tg_tensor *holder = tg_graph_find(g, base);
    int k = holder && holder->name_next > 1 ? holder->name_next : 1;
    for (; tg_graph_find(g, name); k++) {
        snprintf(buf, sizeof buf, "%s.%d", base, k);
        name = buf;
    }
    if (holder)
        holder->name_next = k;
    t->name = tg_arena_strdup(g->arena, name);
    return t->name && names_insert(g, t);
}

static void scoped_name(const tg_graph *g, const char *leaf, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < g->scope_depth && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s/", g->scope[i]);
    if (used < cap)
        snprintf(buf + used, cap - used, "%s", leaf);
}

void tg_graph_rename(tg_graph *g, tg_tensor *t, const char *name)
{
    if (!g || !t || !name)
        return;
    names_remove(g, t);
    t->name = NULL;
    char full[512];
    scoped_name(g, name, full, sizeof full);
    if (!assign_name(g, t, full))
        tg_graph_fail(g, TG_ERR_NOMEM, "%s: out of memory", full);
}

/* ---- scopes and blocks --------------------------------------------------- */

void tg_scope_push(tg_graph *g, const char *name)
{
    if (g->scope_depth >= TG_MAX_SCOPE_DEPTH) {
        tg_graph_fail(g, TG_ERR_INVALID_ARG, "scope '%s': scopes nested deeper than %d", name,
                      TG_MAX_SCOPE_DEPTH);
        return;
    }
    const char *copy = tg_arena_strdup(g->arena, name ? name : "");
    if (!copy) {
        tg_graph_fail(g, TG_ERR_NOMEM, "scope '%s': out of memory", name);
        return;
    }
    g->scope[g->scope_depth++] = copy;
}

void tg_scope_pop(tg_graph *g)
{
    if (g->scope_depth > 0)
        g->scope_depth--;
}

void tg_block_begin_on(tg_graph *g, const char *name, int device_id)
{
    for (int i = 0; i < g->n_blocks; i++)
        if (strcmp(g->blocks[i].name, name) == 0) {
            g->current_block = i;
            if (device_id >= 0)
                g->blocks[i].device_id = device_id;
            return;
        }
    if (g->n_blocks == g->cap_blocks) {
        int cap = g->cap_blocks ? g->cap_blocks * 2 : 8;
        tg_block_info *b = tg_realloc(g->blocks, (size_t)cap * sizeof *b);
        if (!b) {
            tg_graph_fail(g, TG_ERR_NOMEM, "block '%s': out of memory", name);
            return;
        }
        g->blocks = b;
        g->cap_blocks = cap;
    }
    g->blocks[g->n_blocks].name = tg_arena_strdup(g->arena, name);
    g->blocks[g->n_blocks].device_id = device_id;
    g->current_block = g->n_blocks++;
}

void tg_block_begin(tg_graph *g, const char *name)
{
    tg_block_begin_on(g, name, -1);
}

void tg_block_end(tg_graph *g)
{
    g->current_block = -1;
}

/* ---- nodes ------------------------------------------------------------------ */

static tg_tensor *append_node(tg_graph *g)
{
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 256;
        tg_tensor **nodes = tg_realloc(g->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes)
            return NULL;
        g->nodes = nodes;
        g->cap_nodes = cap;
    }
    tg_tensor *t = tg_arena_alloc(g->arena, sizeof *t);
    if (!t)
        return NULL;
    t->id = g->n_nodes;
    t->block = g->current_block;
    g->nodes[g->n_nodes++] = t;
    return t;
}

/* The most elements one tensor may have: 2^36 (256 GiB of f32) is beyond any
 * machine this plans for, and keeps every size and offset computed from a
 * shape far from overflow (a declared [1, 1, 2^40, 1] input would otherwise
 * reach the kernels' shape rules and loops). */
#define TG_MAX_TENSOR_ELEMENTS ((int64_t)1 << 36)

static bool size_fits(tg_shape s)
{
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) {
        if (s.dim[i] < 0 || (s.dim[i] > 0 && n > TG_MAX_TENSOR_ELEMENTS / s.dim[i]))
            return false;
        n *= s.dim[i];
    }
    return true;
}

static tg_tensor *size_fail(tg_graph *g, const char *name, tg_shape s)
{
    char buf[160];
    return tg_graph_fail(g, TG_ERR_SHAPE,
                         "%s: shape %s has more than 2^36 elements, beyond what a device can hold "
                         "(check the model's declared sizes)",
                         name, tg_shape_str(s, buf, sizeof buf));
}

tg_tensor *tg_node_create(tg_graph *g, tg_op op, int n_in, tg_tensor *const *in,
                          const tg_node_params *p)
{
    if (!g || g->status != TG_OK)
        return NULL;
    tg_infer_rule infer = tg_op_infer_rule(op);
    char full[512];
    scoped_name(g, tg_op_name(op), full, sizeof full);
    if (n_in < 0 || n_in > TG_MAX_INPUTS)
        return tg_graph_fail(g, TG_ERR_INVALID_ARG, "%s: %d inputs (at most %d)", full, n_in,
                             TG_MAX_INPUTS);
    for (int i = 0; i < n_in; i++)
        if (!in[i])
            return tg_graph_fail(g, TG_ERR_INVALID_ARG, "%s: input %d is missing", full, i);
    tg_tensor tmp = {0};
    tmp.op = op;
    tmp.n_in = n_in;
    tmp.dtype = TG_F32;
    tmp.block = g->current_block;
    for (int i = 0; i < n_in; i++)
        tmp.in[i] = in[i];
    if (p)
        tmp.p = *p;
    if (infer) {
        tg_error_clear();
        tg_status s = infer(&tmp);
        if (s != TG_OK)
            return tg_graph_fail(g, s, "%s: %s", full, tg_error_message());
    }
    if (tg_op_aliases_input(op))
        tmp.flags |= TG_NODE_ALIAS;
    if (!size_fits(tmp.shape))
        return size_fail(g, full, tmp.shape);
    tg_tensor *t = append_node(g);
    if (!t)
        return tg_graph_fail(g, TG_ERR_NOMEM, "%s: out of memory", full);
    int id = t->id;
    *t = tmp;
    t->id = id;
    if (!assign_name(g, t, full))
        return tg_graph_fail(g, TG_ERR_NOMEM, "%s: out of memory", full);
    return t;
}

static tg_tensor *make_leaf(tg_graph *g, tg_op op, tg_role role, const char *name, tg_dtype dtype,
                            tg_shape shape, tg_init init)
{
    if (!g || g->status != TG_OK)
        return NULL;
    char full[512];
    scoped_name(g, name ? name : tg_op_name(op), full, sizeof full);
    if (shape.ndim < 0 || shape.ndim > TG_MAX_DIMS)
        return tg_graph_fail(g, TG_ERR_SHAPE, "%s: %d dimensions (at most %d)", full, shape.ndim,
                             TG_MAX_DIMS);
    for (int i = 0; i < shape.ndim; i++)
        if (shape.dim[i] < 0)
            return tg_graph_fail(g, TG_ERR_SHAPE, "%s: dimension %d is negative (%lld)", full, i,
                                 (long long)shape.dim[i]);
    if (!size_fits(shape))
        return size_fail(g, full, shape);
    if ((unsigned)dtype >= TG_DTYPE_COUNT)
        return tg_graph_fail(g, TG_ERR_DTYPE, "%s: unknown dtype %d", full, (int)dtype);
    tg_tensor *t = append_node(g);
    if (!t)
        return tg_graph_fail(g, TG_ERR_NOMEM, "%s: out of memory", full);
    t->op = op;
    t->role = role;
    t->dtype = dtype;
    t->shape = shape;
    t->init = init;
    if (!assign_name(g, t, full))
        return tg_graph_fail(g, TG_ERR_NOMEM, "%s: out of memory", full);
    return t;
}

tg_tensor *tg_input(tg_graph *g, const char *name, tg_dtype dtype, tg_shape shape)
{
    return make_leaf(g, TG_OP_INPUT, TG_ROLE_INPUT, name, dtype, shape,
                     (tg_init){TG_INIT_ZEROS, 0, 0});
}

tg_tensor *tg_param(tg_graph *g, const char *name, tg_shape shape, tg_init init)
{
    return make_leaf(g, TG_OP_PARAM, TG_ROLE_PARAM, name, TG_F32, shape, init);
}

tg_tensor *tg_state(tg_graph *g, const char *name, tg_shape shape, tg_init init)
{
    return make_leaf(g, TG_OP_STATE, TG_ROLE_STATE, name, TG_F32, shape, init);
}

tg_tensor *tg_constant(tg_graph *g, tg_shape shape, float value)
{
    return make_leaf(g, TG_OP_CONSTANT, TG_ROLE_CONSTANT, "constant", TG_F32, shape,
                     (tg_init){TG_INIT_CONSTANT, value, 0});
}

/* A leaf whose initial values are a copy of `data`, kept in the graph's arena
 * so the caller's buffer (an ONNX file's initializer) can go away. */
static tg_tensor *make_data_leaf(tg_graph *g, tg_op op, tg_role role, const char *name,
                                 tg_shape shape, const float *data)
{
    if (!g || g->status != TG_OK)
        return NULL;
    if (!data)
        return tg_graph_fail(g, TG_ERR_INVALID_ARG, "%s: no data given", name ? name : "leaf");
    tg_tensor *t = make_leaf(g, op, role, name, TG_F32, shape, (tg_init){TG_INIT_DATA, 0, 0});
    if (!t)
        return NULL;
    size_t bytes = (size_t)tg_shape_numel(shape) * sizeof(float);
    float *copy = tg_arena_alloc(g->arena, bytes ? bytes : 1);
    if (!copy)
        return tg_graph_fail(g, TG_ERR_NOMEM, "%s: out of memory for %zu bytes of data", t->name,
                             bytes);
    memcpy(copy, data, bytes);
    t->init_data = copy;
    return t;
}

tg_tensor *tg_param_data(tg_graph *g, const char *name, tg_shape shape, const float *data)
{
    return make_data_leaf(g, TG_OP_PARAM, TG_ROLE_PARAM, name, shape, data);
}

tg_tensor *tg_state_data(tg_graph *g, const char *name, tg_shape shape, const float *data)
{
    return make_data_leaf(g, TG_OP_STATE, TG_ROLE_STATE, name, shape, data);
}

tg_tensor *tg_constant_data(tg_graph *g, const char *name, tg_shape shape, const float *data)
{
    return make_data_leaf(g, TG_OP_CONSTANT, TG_ROLE_CONSTANT, name ? name : "constant", shape,
                          data);
}

/* ---- tensor accessors ----------------------------------------------------- */

tg_shape tg_tensor_shape(const tg_tensor *t)
{
    return t ? t->shape : tg_shape_of(0, NULL);
}
tg_dtype tg_tensor_dtype(const tg_tensor *t)
{
    return t ? t->dtype : TG_F32;
}
const char *tg_tensor_name(const tg_tensor *t)
{
    return t ? t->name : "";
}
bool tg_tensor_is_param(const tg_tensor *t)
{
    return t && t->role == TG_ROLE_PARAM;
}
bool tg_tensor_is_view(const tg_tensor *t)
{
    return t && (t->flags & TG_NODE_ALIAS);
}
int tg_tensor_id(const tg_tensor *t)
{
    return t ? t->id : -1;
}
tg_tensor *tg_tensor_grad(const tg_tensor *t)
{
    return t ? t->grad : NULL;
}

tg_tensor *tg_recomputation_checkpoint(tg_graph *g, tg_tensor *t)
{
    (void)g;
    if (t)
        t->flags |= TG_NODE_CHECKPOINT;
    return t;
}

void tg_tensor_mark_output(tg_tensor *t)
{
    if (t)
        t->flags |= TG_NODE_OUTPUT;
}
