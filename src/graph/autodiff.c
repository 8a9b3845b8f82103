/* graph/autodiff.c - reverse-mode differentiation by appending ops.
 *
 * Walks the nodes from the loss back to the leaves (creation order reversed
 * is a valid reverse topological order) and asks each op's gradient rule to
 * append the ops computing its inputs' gradients. Contributions to the same
 * tensor are summed with add ops in the order they arrive (consumers in
 * reverse creation order), so a gradient is the same sum on every build.
 * Only tensors that lie between a parameter and the loss get gradients, so
 * no work is spent on, say, the gradient of the input images. Backward ops
 * inherit the block of the op they derive from, so a pipeline stage holds
 * both passes of its layers.
 *
 * Slices of one tensor are joined, not summed. A slice's gradient is its dy
 * placed in zeros of the input's size (slice_bwd). A tensor cut into T
 * pieces (an unrolled recurrent layer's projected inputs, attention's
 * heads, split and chunk) would so take T full-size tensors and T - 1
 * full-size adds: O(T^2) bytes. Instead the pieces wait in a run (disjoint
 * ranges along one axis that arrived one after another). The run ends when
 * a contribution arrives that does not fit it (another kind, an overlapping
 * range, another axis) or when the walk reaches the tensor; it is then
 * concatenated (concats of at most TG_MAX_INPUTS inputs, in a tree), the
 * zeros of each gap carried by a neighbouring piece's own slice_bwd, and
 * added to the sum as one contribution. The sum is the same, bit for bit
 * but for the sign of zeros: each element of a run holds exactly one
 * piece's value, where the padded tensors added that value and exact zeros
 * (x + 0 == x; only -0 + 0 gives +0). A run of one piece is the slice_bwd
 * the slice's rule makes, so graphs with single slices are as before.
 * Strided slices (slice_step) go through their own rule and are summed.
 */
#include "graph/autodiff.h"

#include "core/alloc.h"
#include "core/error.h"
#include "graph/op_rules.h"
#include "graph/shape_params.h"

#include <string.h>

/* A slice's gradient dy, not yet placed: it belongs at the range
 * [start, end) along the slice's axis of slice->in[0] (graph/shape_params.h). */
typedef struct slice_piece {
    tg_tensor *slice;
    tg_tensor *dy;
} slice_piece;

/* Pieces of one tensor's gradient waiting to be joined: non-empty, pairwise
 * disjoint, along one axis, in arrival order. */
typedef struct piece_run {
    slice_piece *piece;
    int n, cap;
} piece_run;

typedef struct {
    bool *depends_on_param; /* a parameter is upstream */
    bool *reaches_loss;     /* the loss is downstream */
    tg_tensor **grad;       /* the sum of the contributions added so far */
    piece_run *run;         /* per tensor: slice gradients not yet in grad */
    bool pad_slices;        /* tg_autodiff_opts.pad_slices */
} autodiff_state;

static void mark_paths(const tg_graph *g, const tg_tensor *loss, autodiff_state *st)
{
    for (int i = 0; i <= loss->id; i++) {
        const tg_tensor *t = g->nodes[i];
        bool dep = t->op == TG_OP_PARAM;
        for (int k = 0; k < t->n_in && !dep; k++)
            dep = st->depends_on_param[t->in[k]->id];
        st->depends_on_param[i] = dep && t->n_mutated == 0;
    }
    st->reaches_loss[loss->id] = true;
    for (int i = loss->id; i >= 0; i--) {
        const tg_tensor *t = g->nodes[i];
        if (!st->reaches_loss[i])
            continue;
        for (int k = 0; k < t->n_in; k++)
            st->reaches_loss[t->in[k]->id] = true;
    }
}

static bool wants_grad(const autodiff_state *st, const tg_tensor *t)
{
    return st->depends_on_param[t->id] && st->reaches_loss[t->id] &&
           (t->dtype == TG_F32 || t->dtype == TG_F16 || t->dtype == TG_BF16);
}

/* ---- where backward ops go ------------------------------------------------ */

/* Backward ops made on behalf of forward op `of` are named in its scope, sit
 * in its block and are marked as derived from it. Scopes nest: ops made
 * for another op inside keep that op's marks. */
typedef struct op_scope {
    tg_tensor *of;
    const char *scope0;
    int depth, block, first_new;
} op_scope;

static op_scope scope_enter(tg_graph *g, tg_tensor *of)
{
    op_scope s = {of, g->scope[0], g->scope_depth, g->current_block, g->n_nodes};
    g->scope[0] = of->name;
    g->scope_depth = 1;
    g->current_block = of->block;
    return s;
}

static void scope_leave(tg_graph *g, const op_scope *s)
{
    for (int i = s->first_new; i < g->n_nodes; i++) {
        g->nodes[i]->flags |= TG_NODE_BACKWARD;
        if (!g->nodes[i]->forward_of)
            g->nodes[i]->forward_of = s->of;
    }
    g->scope[0] = s->scope0;
    g->scope_depth = s->depth;
    g->current_block = s->block;
}

/* ---- accumulating contributions ------------------------------------------- */

static int64_t piece_start(const slice_piece *p)
{
    return tg_slice_start(p->slice);
}
static int64_t piece_end(const slice_piece *p)
{
    return tg_slice_end(p->slice);
}

/* Gradients of one tensor add up. The node is made here, as tg_add makes
 * it, and not by calling ops' builder: the graph layer calls nothing above
 * it (scripts/check_layers.sh checks the symbols). */
static void sum_in(tg_graph *g, autodiff_state *st, tg_tensor *x, tg_tensor *d)
{
    tg_tensor *acc = st->grad[x->id];
    st->grad[x->id] = acc ? tg_node_create(g, TG_OP_ADD, 2, (tg_tensor *[]){acc, d}, NULL) : d;
}

/* dy in zeros: [before, before + width) of before + width + after along axis. */
static tg_tensor *place(tg_graph *g, tg_tensor *dy, int axis, int64_t before, int64_t after)
{
    tg_node_params p = {0};
    int64_t width = dy->shape.dim[axis];
    tg_slice_set_axis(&p, axis);
    tg_slice_set_start(&p, before);
    tg_slice_set_end(&p, before + width);
    tg_slice_set_len(&p, before + width + after);
    return tg_node_create(g, TG_OP_SLICE_BWD, 1, &dy, &p);
}

/* A CONCAT of 2..TG_MAX_INPUTS items, as tg_concat makes it. */
static tg_tensor *concat_node(tg_graph *g, tg_tensor **items, int n, int axis)
{
    tg_node_params p = {0};
    tg_concat_set_axis(&p, axis);
    return tg_node_create(g, TG_OP_CONCAT, n, items, &p);
}

/* One tensor from n >= 1 items in order along axis: concats of at most

 * TG_MAX_INPUTS inputs, level by level (each level copies the data once).
 * Overwrites items. */
static tg_tensor *concat_tree(tg_graph *g, tg_tensor **items, int n, int axis)
{
    while (n > 1) {
        int m = 0;
        for (int k = 0; k < n; k += TG_MAX_INPUTS) {
            int c = n - k < TG_MAX_INPUTS ? n - k : TG_MAX_INPUTS;
            items[m++] = c == 1 ? items[k] : concat_node(g, items + k, c, axis);
        }
        n = m;
    }
    return items[0];
}

/* End x's run: its pieces, sorted by range, become one tensor of x's shape,
 * added to x's sum. Made where the last piece's padded add used to be: in
 * the scope and block of the run's last slice. */
static tg_status join_run(tg_graph *g, autodiff_state *st, tg_tensor *x)
{
    piece_run *r = &st->run[x->id];
    if (r->n == 0)
        return TG_OK;
    slice_piece *pc = r->piece;
    op_scope sc = scope_enter(g, pc[r->n - 1].slice);
    for (int k = 1; k < r->n; k++) /* usually in order already, or reversed */
        for (int j = k; j > 0 && piece_start(&pc[j]) < piece_start(&pc[j - 1]); j--) {
            slice_piece tmp = pc[j];
            pc[j] = pc[j - 1];
            pc[j - 1] = tmp;
        }
    int axis = (int)tg_slice_axis(pc[0].slice);
    int64_t len = x->shape.dim[axis];
    tg_tensor **items = tg_malloc((size_t)r->n * sizeof *items);
    if (!items) {
        scope_leave(g, &sc);
        return tg_error(TG_ERR_NOMEM, "%s: out of memory joining %d slice gradients", x->name,
                        r->n);
    }
    for (int k = 0; k < r->n; k++) {
        int64_t before = piece_start(&pc[k]) - (k ? piece_end(&pc[k - 1]) : 0);
        int64_t after = k == r->n - 1 ? len - piece_end(&pc[k]) : 0;
        /* one piece alone is always placed: the slice's own slice_bwd */
        items[k] =
            before || after || r->n == 1 ? place(g, pc[k].dy, axis, before, after) : pc[k].dy;
    }
    sum_in(g, st, x, concat_tree(g, items, r->n, axis));
    tg_free(items);
    scope_leave(g, &sc);
    r->n = 0;
    return g->status == TG_OK ? TG_OK : tg_error(g->status, "%s", g->error);
}

/* Whether slice's range joins x's run: along the run's axis and disjoint
 * from every piece (overlaps are summed, in arrival order). */
static bool fits_run(const piece_run *r, const tg_tensor *slice)
{
    if (r->n > 0 && tg_slice_axis(r->piece[0].slice) != tg_slice_axis(slice))
        return false;
    for (int k = 0; k < r->n; k++)
        if (tg_slice_start(slice) < piece_end(&r->piece[k]) &&
            piece_start(&r->piece[k]) < tg_slice_end(slice))
            return false;
    return true;
}

static tg_status add_piece(tg_graph *g, autodiff_state *st, tg_tensor *slice, tg_tensor *dy)
{
    tg_tensor *x = slice->in[0];
    piece_run *r = &st->run[x->id];
    if (!fits_run(r, slice))
        TG_TRY(join_run(g, st, x));
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 8;
        slice_piece *grown = tg_realloc(r->piece, (size_t)cap * sizeof *grown);
        if (!grown)
            return tg_error(TG_ERR_NOMEM, "%s: out of memory for %d slice gradients", x->name, cap);
        r->piece = grown;
        r->cap = cap;
    }
    r->piece[r->n++] = (slice_piece){slice, dy};
    return TG_OK;
}

/* A non-empty slice of a tensor that wants a gradient: its dy joins a run.
 * Autodiff names SLICE itself, not a property of the op table: joining the
 * gradients of a tensor's slices into one concat is how this pass builds
 * the backward graph for that op (as each op's gradient rule builds its
 * own), not something another op could declare. */
static bool joins_slices(const autodiff_state *st, const tg_tensor *t)
{
    return !st->pad_slices && t->op == TG_OP_SLICE && tg_slice_end(t) > tg_slice_start(t);
}

/* ---- the walk --------------------------------------------------------------- */

/* Run one op's gradient rule in the op's scope and block. */
static tg_status backward_one(tg_graph *g, tg_tensor *t, autodiff_state *st)
{
    tg_backward_rule backward = tg_op_backward_rule(t->op);
    bool need[TG_MAX_INPUTS] = {0};
    tg_tensor *din[TG_MAX_INPUTS] = {0};
    bool any = false;
    for (int k = 0; k < t->n_in; k++)
        any |= need[k] = wants_grad(st, t->in[k]);
    if (!any)
        return TG_OK;
    if (joins_slices(st, t))
        return add_piece(g, st, t, st->grad[t->id]);
    if (!backward)
        return tg_error(TG_ERR_UNSUPPORTED, "%s: op '%s' has no gradient rule", t->name,
                        tg_op_name(t->op));

    op_scope sc = scope_enter(g, t);
    tg_status s = backward(g, t, st->grad[t->id], need, din);
    for (int k = 0; s == TG_OK && k < t->n_in; k++) {
        tg_tensor *x = t->in[k];
        if (!need[k] || !din[k])
            continue;
        if (!tg_shape_equal(din[k]->shape, x->shape)) {
            char a[64], b[64];
            s = tg_error(TG_ERR_INTERNAL, "%s: gradient of input %d has shape %s, expected %s",
                         t->name, k, tg_shape_str(din[k]->shape, a, sizeof a),
                         tg_shape_str(x->shape, b, sizeof b));
            break;
        }
        s = join_run(g, st, x); /* the run's pieces arrived first */
        if (s == TG_OK)
            sum_in(g, st, x, din[k]);
    }
    if (s == TG_OK && g->status != TG_OK)
        s = tg_error(g->status, "%s", g->error);
    scope_leave(g, &sc);
    return s;
}

tg_status tg_graph_backward_opts(tg_graph *g, tg_tensor *loss, const tg_autodiff_opts *o)
{
    if (!g || g->status != TG_OK)
        return g ? tg_error(g->status, "%s", g->error)
                 : tg_error(TG_ERR_INVALID_ARG, "backward: no graph");
    if (!loss)
        return tg_error(TG_ERR_INVALID_ARG, "backward: no loss tensor");
    if (tg_numel(loss) != 1 || loss->dtype != TG_F32)
        return tg_error(TG_ERR_SHAPE, "backward: loss '%s' must be an f32 scalar", loss->name);

    int n = loss->id + 1;
    autodiff_state st = {.pad_slices = o && o->pad_slices};
    st.depends_on_param = tg_calloc((size_t)n, sizeof(bool));
    st.reaches_loss = tg_calloc((size_t)n, sizeof(bool));
    /* grads of nodes created during the walk are never looked up, but the
     * arrays must cover every id the walk can touch: the forward part. */
    st.grad = tg_calloc((size_t)n, sizeof(tg_tensor *));
    st.run = tg_calloc((size_t)n, sizeof(piece_run));
    tg_status s = TG_OK;
    if (!st.depends_on_param || !st.reaches_loss || !st.grad || !st.run) {
        s = tg_error(TG_ERR_NOMEM, "backward: out of memory");
        goto done;
    }
    mark_paths(g, loss, &st);

    int saved_depth = g->scope_depth;
    g->scope_depth = 0;
    g->scope[0] = NULL;
    int saved_block = g->current_block;
    g->current_block = loss->block;
    st.grad[loss->id] = tg_constant(g, loss->shape, 1.0f);
    if (st.grad[loss->id]) {
        tg_graph_rename(g, st.grad[loss->id], "loss_grad_seed");
        st.grad[loss->id]->flags |= TG_NODE_LOSS_SEED;
    }
    g->current_block = saved_block;
    g->scope_depth = saved_depth;
    if (!st.grad[loss->id]) {
        s = tg_error(g->status, "%s", g->error);
        goto done;
    }

    /* Every consumer of node i has a larger id: when the walk reaches i, all
     * of its gradient has arrived. */
    for (int i = loss->id; i >= 0 && s == TG_OK; i--) {
        tg_tensor *t = g->nodes[i];
        s = join_run(g, &st, t);
        if (s == TG_OK && st.grad[i] && t->n_in > 0)
            s = backward_one(g, t, &st);
    }
    for (int i = 0; s == TG_OK && i < n; i++) {
        tg_tensor *t = g->nodes[i];
        if (t->op == TG_OP_PARAM && st.grad[i]) {
            t->grad = st.grad[i];
            if (t->grad->role == TG_ROLE_ACTIVATION)
                t->grad->role = TG_ROLE_GRADIENT;
        }
    }
done:
    for (int i = 0; st.run && i < n; i++)
        tg_free(st.run[i].piece);
    tg_free(st.depends_on_param);
    tg_free(st.reaches_loss);
    tg_free(st.grad);
    tg_free(st.run);
    return s;
}

tg_status tg_graph_backward(tg_graph *g, tg_tensor *loss)
{
    return tg_graph_backward_opts(g, loss, NULL);
}
