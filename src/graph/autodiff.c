/* graph/autodiff.c - reverse-mode differentiation by appending ops.
 *
 * Walks the nodes from the loss back to the leaves (creation order reversed
 * is a valid reverse topological order) and asks each op's gradient rule to
 * append the ops computing its inputs' gradients. Contributions to the same
 * tensor are summed with add ops. Only tensors that lie between a parameter
 * and the loss get gradients, so no work is spent on, say, the gradient of
 * the input images. Backward ops inherit the block of the op they derive
 * from, so a pipeline stage holds both passes of its layers.
 */
#include "graph/node.h"

#include "core/alloc.h"
#include "core/error.h"
#include "graph/op_rules.h"

#include <string.h>

typedef struct {
    bool *depends_on_param; /* a parameter is upstream */
    bool *reaches_loss;     /* the loss is downstream */
    tg_tensor **grad;
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

/* Run one op's gradient rule with the scope set to the op's name and its block. */
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
    if (!backward)
        return tg_error(TG_ERR_UNSUPPORTED, "%s: op '%s' has no gradient rule", t->name,
                        tg_op_name(t->op));

    int saved_depth = g->scope_depth, saved_block = g->current_block;
    const char *saved_scope0 = g->scope[0];
    g->scope[0] = t->name;
    g->scope_depth = 1;
    g->current_block = t->block;
    int first_new = g->n_nodes;

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
        st->grad[x->id] = st->grad[x->id] ? tg_add(g, st->grad[x->id], din[k]) : din[k];
    }
    if (s == TG_OK && g->status != TG_OK)
        s = tg_error(g->status, "%s", g->error);
    for (int i = first_new; i < g->n_nodes; i++) {
        g->nodes[i]->flags |= TG_NODE_BACKWARD;
        if (!g->nodes[i]->forward_of)
            g->nodes[i]->forward_of = t;
    }
    g->scope[0] = saved_scope0;
    g->scope_depth = saved_depth;
    g->current_block = saved_block;
    return s;
}

tg_status tg_graph_backward(tg_graph *g, tg_tensor *loss)
{
    if (!g || g->status != TG_OK)
        return g ? tg_error(g->status, "%s", g->error)
                 : tg_error(TG_ERR_INVALID_ARG, "backward: no graph");
    if (!loss)
        return tg_error(TG_ERR_INVALID_ARG, "backward: no loss tensor");
    if (tg_numel(loss) != 1 || loss->dtype != TG_F32)
        return tg_error(TG_ERR_SHAPE, "backward: loss '%s' must be an f32 scalar", loss->name);

    int n = loss->id + 1;
    autodiff_state st;
    st.depends_on_param = tg_calloc((size_t)n, sizeof(bool));
    st.reaches_loss = tg_calloc((size_t)n, sizeof(bool));
    /* grads of nodes created during the walk are never looked up, but the
     * array must cover every id the walk can touch: the forward part. */
    st.grad = tg_calloc((size_t)n, sizeof(tg_tensor *));
    tg_status s = TG_OK;
    if (!st.depends_on_param || !st.reaches_loss || !st.grad) {
        s = tg_error(TG_ERR_NOMEM, "backward: out of memory");
        goto done;
    }
    mark_paths(g, loss, &st);

    int saved_depth = g->scope_depth;
    g->scope_depth = 0;
    g->scope[0] = NULL;
    tg_block_info none = {0};
    (void)none;
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

    for (int i = loss->id; i >= 0 && s == TG_OK; i--) {
        tg_tensor *t = g->nodes[i];
        if (st.grad[i] && t->n_in > 0)
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
    tg_free(st.depends_on_param);
    tg_free(st.reaches_loss);
    tg_free(st.grad);
    return s;
}
