/* runtime/verify_ref.c - the whole graph run by the reference kernels,
 * streamed (runtime/verify_ref.h).
 *
 * The plan: the graph's creation order (a topological order) with each
 * weight update moved up to just after the last node it must follow: the
 * producers of its inputs and every other reader of the weight and state it
 * rewrites. Only updates that nothing reads, whose rewritten leaves nothing
 * else rewrites and whose read leaves nothing rewrites, are moved: their
 * results are then the same wherever they run between those nodes. Then,
 * per storage (a node's own buffer; a view shares its root's), the position
 * of its last reader in that order: the double is freed there.
 */
#include "runtime/verify_ref.h"

#include "core/alloc.h"
#include "core/error.h"
#include "graph/init.h"
#include "graph/optim_params.h"
#include "ops/op.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

struct tg_ref_plan {
    const tg_graph *g;
    int n;
    int *order;      /* node ids in the order run */
    int *last;       /* per storage root: the position of its last reader */
    int *free_first; /* per position: the first root whose last reader it is */
    int *free_next;  /* per root: the next root freed at the same position */
    bool clip;       /* an update clips the gradients: updates stay at the end */
    int64_t peak;
};

static int root_of(const tg_tensor *t)
{
    while (t->flags & TG_NODE_ALIAS)
        t = t->in[0];
    return t->id;
}

static bool is_leaf(const tg_tensor *t)
{
    return t->n_in == 0;
}

static int64_t doubles(const tg_tensor *t)
{
    return (tg_numel(t) > 0 ? tg_numel(t) : 1) * (int64_t)sizeof(double);
}

void tg_ref_plan_destroy(tg_ref_plan *p)
{
    if (!p)
        return;
    tg_free(p->order);
    tg_free(p->last);
    tg_free(p->free_first);
    tg_free(p->free_next);
    tg_free(p);
}

const int *tg_ref_plan_order(const tg_ref_plan *p, int *n)
{
    *n = p->n;
    return p->order;
}

int64_t tg_ref_plan_peak_bytes(const tg_ref_plan *p)
{
    return p->peak;
}

/* Per root: how many nodes rewrite it (mutators), the last node that reads
 * it without rewriting it (plain_last), and how many nodes read it at all
 * (readers; a view counts as a reader of its root). */
typedef struct uses {
    int *mutators, *plain_last, *readers;
} uses;

static void count_uses(const tg_graph *g, uses *u)
{
    for (int i = 0; i < g->n_nodes; i++)
        u->plain_last[i] = -1;
    for (int j = 0; j < g->n_nodes; j++) {
        const tg_tensor *t = g->nodes[j];
        for (int k = 0; k < t->n_in; k++) {
            int r = root_of(t->in[k]);
            u->readers[r]++;
            if (k < t->n_mutated)
                u->mutators[r]++;
            else if (j > u->plain_last[r])
                u->plain_last[r] = j;
        }
    }
}

/* Where update u may run: after this node id, or -1 when it stays. */
static int hoist_after(const tg_graph *g, const uses *u, const tg_tensor *t)
{
    if (t->n_mutated == 0 || u->readers[t->id] > 0)
        return -1;
    int after = -1;
    for (int k = 0; k < t->n_in; k++) {
        const tg_tensor *x = g->nodes[root_of(t->in[k])];
        bool rewritten = k < t->n_mutated;
        if (rewritten && !is_leaf(x))
            return -1;
        if (is_leaf(x) && u->mutators[x->id] != (rewritten ? 1 : 0))
            return -1; /* another node rewrites it (or u rewrites it twice) */
        int must_follow = is_leaf(x) ? -1 : x->id;
        if (rewritten && u->plain_last[x->id] > must_follow)
            must_follow = u->plain_last[x->id];
        if (must_follow > after)
            after = must_follow;
    }
    return after < t->id ? after : -1;
}

static bool clips(const tg_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (tg_is_weight_update(g->nodes[i]) &&
            tg_optim_params_get(&g->nodes[i]->p).max_grad_norm > 0)
            return true;
    return false;
}

/* The order: creation order, each movable update right after its node. */
static tg_status make_order(tg_ref_plan *p, const uses *u)
{
    const tg_graph *g = p->g;
    int n = g->n_nodes, at = 0;
    int *after = tg_malloc((size_t)(n + 1) * sizeof(int));
    int *first = tg_malloc((size_t)(n + 1) * sizeof(int));
    int *next = tg_malloc((size_t)(n + 1) * sizeof(int));
    tg_status st = after && first && next ? TG_OK : tg_error(TG_ERR_NOMEM, "verify: out of memory");
    for (int i = 0; st == TG_OK && i < n; i++)
        first[i] = next[i] = -1;
    for (int i = n - 1; st == TG_OK && i >= 0; i--) {
        after[i] = p->clip ? -1 : hoist_after(g, u, g->nodes[i]);
        if (after[i] >= 0) {
            next[i] = first[after[i]];
            first[after[i]] = i;
        }
    }
    for (int i = 0; st == TG_OK && i < n; i++) {
        if (after[i] < 0)
            p->order[at++] = i;
        for (int h = first[i]; h >= 0; h = next[h])
            p->order[at++] = h;
    }
    tg_free(after);
    tg_free(first);
    tg_free(next);
    return st;
}

/* Each root's last reader's position, the roots freed at each position and
 * the most bytes held at once. */
static void make_lifetimes(tg_ref_plan *p, const uses *u)
{
    const tg_graph *g = p->g;
    int *pos = p->free_next; /* borrowed: a node's position, until the chains are made */
    for (int at = 0; at < p->n; at++)
        pos[p->order[at]] = at;
    /* a leaf's own position is no use of it: the movable updates may come
     * long before (the optimizer's state is created after the backward) */
    for (int i = 0; i < p->n; i++)
        p->last[i] = is_leaf(g->nodes[i]) ? -1 : pos[i];
    for (int i = 0; i < p->n; i++) {
        const tg_tensor *t = g->nodes[i];
        for (int k = 0; k < t->n_in; k++) {
            int r = root_of(t->in[k]);
            if (pos[i] > p->last[r])
                p->last[r] = pos[i];
        }
    }
    for (int i = 0; i < p->n; i++)
        if (p->last[i] < 0)
            p->last[i] = pos[i];
    for (int at = 0; at < p->n; at++)
        p->free_first[at] = -1;
    for (int r = 0; r < p->n; r++) {
        p->free_next[r] = p->free_first[p->last[r]];
        p->free_first[p->last[r]] = r;
    }
    int64_t held = 0;
    p->peak = 0;
    for (int at = 0; at < p->n; at++) {
        const tg_tensor *t = g->nodes[p->order[at]];
        int64_t converted = 0;
        if (!is_leaf(t) && !(t->flags & TG_NODE_ALIAS))
            held += doubles(t);
        for (int k = 0; k < t->n_in && !(t->flags & TG_NODE_ALIAS); k++) {
            const tg_tensor *x = g->nodes[root_of(t->in[k])];
            if (is_leaf(x) && k < t->n_mutated)
                held += doubles(x); /* at most once a leaf: one node rewrites it */
            else if (is_leaf(x))
                converted += doubles(x);
        }
        if (held + converted > p->peak)
            p->peak = held + converted;
        for (int r = p->free_first[at]; r >= 0; r = p->free_next[r]) {
            if (!is_leaf(g->nodes[r]) || u->mutators[r] > 0)
                held -= doubles(g->nodes[r]);
        }
    }
}

tg_status tg_ref_plan_create(const tg_graph *g, tg_ref_plan **out)
{
    *out = NULL;
    int n = g->n_nodes;
    tg_ref_plan *p = tg_calloc(1, sizeof *p);
    uses u = {tg_calloc((size_t)n + 1, sizeof(int)), tg_calloc((size_t)n + 1, sizeof(int)),
              tg_calloc((size_t)n + 1, sizeof(int))};
    if (p) {
        p->g = g, p->n = n;
        p->order = tg_malloc(((size_t)n + 1) * sizeof(int));
        p->last = tg_malloc(((size_t)n + 1) * sizeof(int));
        p->free_first = tg_malloc(((size_t)n + 1) * sizeof(int));
        p->free_next = tg_malloc(((size_t)n + 1) * sizeof(int));
    }
    tg_status st = p && p->order && p->last && p->free_first && p->free_next && u.mutators &&
                           u.plain_last && u.readers
                       ? TG_OK
                       : tg_error(TG_ERR_NOMEM, "verify: out of memory planning the reference run");
    if (st == TG_OK) {
        count_uses(g, &u);
        p->clip = clips(g);
        st = make_order(p, &u);
    }
    if (st == TG_OK)
        make_lifetimes(p, &u);
    tg_free(u.mutators);
    tg_free(u.plain_last);
    tg_free(u.readers);
    if (st != TG_OK) {
        tg_ref_plan_destroy(p);
        return st;
    }
    *out = p;
    return TG_OK;
}

/* ---- the run ------------------------------------------------------------------ */

typedef struct run {
    const tg_ref_plan *p;
    const tg_ref_visit *v;
    double **val;           /* per root: its double while it lives */
    unsigned char *leaf_in; /* per leaf: val holds its rewritten copy */
    uint64_t seed, stream;
    int64_t step;
    bool computing, clipped;
    char *why;
    size_t cap;
} run;

/* Leaf t as the run began into out: the caller's copy, or as the
 * interpreter starts it (initialisers; inputs zero). */
static bool leaf_value(run *r, const tg_tensor *t, double *out)
{
    int64_t n = tg_numel(t);
    if (r->v->leaf && r->v->leaf(r->v->ctx, t, out))
        return true;
    memset(out, 0, (size_t)(n ? n : 1) * sizeof(double));
    if (t->op != TG_OP_PARAM && t->op != TG_OP_STATE && t->op != TG_OP_CONSTANT)
        return true;
    float *tmp = tg_malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!tmp)
        return false;
    tg_init_fill_f32(t, r->seed, tmp);
    for (int64_t k = 0; k < n; k++)
        out[k] = tmp[k];
    tg_free(tmp);
    return true;
}

static void stop(run *r, const char *fmt, const char *a, const char *b)
{
    if (!r->computing)
        return;
    r->computing = false;
    snprintf(r->why, r->cap, fmt, a, b);
    for (int i = 0; i < r->p->n; i++) {
        tg_free(r->val[i]);
        r->val[i] = NULL;
    }
}

/* clip_grad_norm_ over every update's gradient, as the interpreter does
 * before the first update (the plan keeps the updates last then). */
static void clip_gradients(run *r, float max_norm)
{
    const tg_graph *g = r->p->g;
    double total = 0;
    for (int pass = 0; pass < 2; pass++) {
        float factor = pass ? tg_grad_clip_factor(sqrt(total), max_norm) : 1.0f;
        for (int i = 0; i < g->n_nodes && (pass == 0 || factor < 1.0f); i++) {
            const tg_tensor *u = g->nodes[i];
            double *x = tg_is_weight_update(u) ? r->val[root_of(u->in[u->n_in - 1])] : NULL;
            for (int64_t k = 0; x && k < tg_numel(u->in[0]); k++) {
                if (pass == 0)
                    total += x[k] * x[k];
                else
                    x[k] *= factor;
            }
        }
    }
}

/* Input k of t for its reference kernel: a node's double, a rewritten
 * leaf's copy (made on its first rewrite), or the leaf converted into
 * *tmp. NULL: out of memory. */
static double *input_of(run *r, const tg_tensor *t, int k, double **tmp)
{
    const tg_tensor *x = r->p->g->nodes[root_of(t->in[k])];
    if (!is_leaf(x) || r->leaf_in[x->id])
        return r->val[x->id];
    double *d = tg_malloc((size_t)doubles(x));
    if (!d || !leaf_value(r, x, d)) {
        tg_free(d);
        return NULL;
    }
    if (k < t->n_mutated) {
        r->val[x->id] = d;
        r->leaf_in[x->id] = 1;
    } else {
        *tmp = d;
    }
    return d;
}

/* Node t by its reference kernel into a new double; NULL when the run
 * cannot go on (r->computing is then false). */
static double *compute(run *r, const tg_tensor *t)
{
    const tg_op_def *def = tg_op_get(t->op);
    if (!def || !def->reference) {
        stop(r, "no reference run: %s: op '%s' has no reference kernel", t->name,
             tg_op_name(t->op));
        return NULL;
    }
    if (r->p->clip && !r->clipped && tg_is_weight_update(t)) {
        r->clipped = true;
        clip_gradients(r, tg_optim_params_get(&t->p).max_grad_norm);
    }
    double *tmp[TG_MAX_INPUTS] = {0};
    tg_ref_args a = {.node = t, .step = r->step, .seed = r->seed, .stream = r->stream};
    a.out = tg_calloc((size_t)doubles(t) / sizeof(double), sizeof(double));
    bool ok = a.out != NULL;
    for (int k = 0; ok && k < t->n_in; k++)
        ok = (a.in[k] = input_of(r, t, k, &tmp[k])) != NULL;
    if (ok)
        def->reference(&a);
    for (int k = 0; k < t->n_in; k++)
        tg_free(tmp[k]);
    if (!ok) {
        tg_free(a.out);
        stop(r, "no reference run: out of memory for '%s'%s", t->name, "");
        return NULL;
    }
    r->val[t->id] = a.out;
    return a.out;
}

static void release(run *r, int at)
{
    const tg_graph *g = r->p->g;
    for (int x = r->p->free_first[at]; x >= 0; x = r->p->free_next[x]) {
        if (r->leaf_in[x] && r->val[x] && r->v->settled)
            r->v->settled(r->v->ctx, g->nodes[x], r->val[x]);
        tg_free(r->val[x]);
        r->val[x] = NULL;
    }
}

tg_status tg_ref_plan_run(const tg_ref_plan *p, const tg_ref_visit *v, bool compute_it,
                          uint64_t seed, uint64_t stream, int64_t step, char *why, size_t cap)
{
    const tg_graph *g = p->g;
    run r = {.p = p, .v = v, .seed = seed, .stream = stream, .step = step, .why = why, .cap = cap};
    why[0] = 0;
    r.val = tg_calloc((size_t)p->n + 1, sizeof(double *));
    r.leaf_in = tg_calloc((size_t)p->n + 1, 1);
    if (!r.val || !r.leaf_in) {
        tg_free(r.val), tg_free(r.leaf_in);
        return tg_error(TG_ERR_NOMEM, "verify: out of memory");
    }
    r.computing = compute_it;
    tg_status st = TG_OK;
    for (int at = 0; at < p->n && st == TG_OK; at++) {
        const tg_tensor *t = g->nodes[p->order[at]];
        const double *ref = NULL;
        double *view = NULL; /* a view of a leaf: the leaf converted */
        if (!is_leaf(t) && r.computing && (t->flags & TG_NODE_ALIAS)) {
            ref = r.val[root_of(t)];
            if (!ref && is_leaf(g->nodes[root_of(t)]))
                ref = input_of(&r, t, 0, &view);
        } else if (!is_leaf(t) && r.computing)
            ref = compute(&r, t);
        if (!is_leaf(t))
            st = v->node(v->ctx, t, at, ref);
        tg_free(view);
        release(&r, at);
    }
    for (int i = 0; i < p->n; i++)
        tg_free(r.val[i]);
    tg_free(r.val);
    tg_free(r.leaf_in);
    return st;
}
