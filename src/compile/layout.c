/* compile/layout.c - the blocked-layout pass (compile/layout.h): groups of
 * tensors that must share a layout, found with a union-find over the
 * operands of the ops that tie them. */
#include "backend/backend.h"
#include "compile/layout.h"

#include "core/alloc.h"
#include "core/error.h"
#include "backend/cpu/blocked.h"
#include "ops/conv.h"

#include <stdlib.h>
#include <string.h>

/* How an op relates to the layout of its 4-D operands. The default is
 * OP_PLAIN: an op the pass does not know to handle nChw16c (and every node
 * that reinterprets its input's bytes, such as a reshape or flatten, which
 * has no step of its own) keeps its operands in NCHW. */
typedef enum op_kind {
    OP_PLAIN, /* reads and writes NCHW only, or views the bytes as NCHW */
    OP_CONV,  /* a oneDNN convolution: each operand in either layout */
    OP_TIED,  /* a kernel with a blocked variant: all operands in one layout */
} op_kind;

typedef struct layout_pass {
    const tg_program *p;
    int *parent;  /* union-find over node ids */
    bool *bad;    /* per node, then per root: cannot be blocked */
    bool *wanted; /* per node, then per root: a convolution reads or writes it */
} layout_pass;

bool tg_layout_test_ignore_views = false;

static bool is_4d(const tg_tensor *t)
{
    return t->shape.ndim == 4;
}

/* A 1x1 map with whole channel blocks: the same bytes in both layouts. */
static bool is_neutral(const tg_tensor *t)
{
    return is_4d(t) && t->shape.dim[2] * t->shape.dim[3] == 1 &&
           t->shape.dim[1] % TG_CHANNEL_BLOCK == 0;
}

static bool is_step(const tg_program *p, const tg_tensor *t)
{
    return p->device_of[t->id] >= 0 && t->n_in > 0 && !(t->flags & TG_NODE_ALIAS);
}

/* A value the pass may keep blocked as far as the value itself goes: a
 * whole-channel-block activation computed by a step, not read by the host. */
static bool may_block(const tg_program *p, const tg_tensor *t)
{
    return is_4d(t) && t->shape.dim[1] % TG_CHANNEL_BLOCK == 0 && is_step(p, t) &&
           t->role == TG_ROLE_ACTIVATION && !(t->flags & TG_NODE_OUTPUT) && p->home[t->id] >= 0;
}

/* What the op's definition says of its layout (tg_op_layout_of): an op that
 * says nothing is plain. */
static op_kind kind_of(const tg_program *p, const tg_tensor *t)
{
    if (!is_step(p, t)) /* an alias views its input's bytes in NCHW order */
        return OP_PLAIN;
    switch (tg_op_layout_of(t, p->plan_threads, !p->training)) {
    case TG_LAYOUT_OWN:
        return OP_CONV;
    case TG_LAYOUT_TIED:
        return OP_TIED;
    default:
        return OP_PLAIN;
    }
}

static int find(int *parent, int x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

static void unite(int *parent, int a, int b)
{
    a = find(parent, a), b = find(parent, b);
    if (a != b)
        parent[a < b ? b : a] = a < b ? a : b;
}

/* Record what op t asks of its 4-D operands (inputs and its own value). */
static void visit_op(layout_pass *lp, const tg_tensor *t)
{
    op_kind kind = kind_of(lp->p, t);
    int first = -1;
    for (int k = -1; k < t->n_in; k++) {
        const tg_tensor *v = k < 0 ? t : t->in[k];
        if (!is_4d(v) || is_neutral(v))
            continue;
        if (kind == OP_PLAIN)
            lp->bad[v->id] = true;
        else if (kind == OP_CONV)
            lp->wanted[v->id] = true;
        else if (first < 0)
            first = v->id;
        else
            unite(lp->parent, first, v->id);
    }
}

static void run_pass(layout_pass *lp, uint8_t *layout)
{
    const tg_program *p = lp->p;
    const tg_graph *g = p->graph;
    int n = g->n_nodes;
    for (int i = 0; i < n; i++)
        lp->parent[i] = i;
    for (int i = 0; i < n; i++) {
        const tg_tensor *t = g->nodes[i];
        /* steps, and the views no step runs (they read NCHW) */
        if (is_step(p, t) || (t->n_in > 0 && !tg_layout_test_ignore_views))
            visit_op(lp, t);
        if (is_4d(t) && !is_neutral(t) && !may_block(p, t))
            lp->bad[i] = true;
    }
    for (int i = 0; i < n; i++) {
        int r = find(lp->parent, i);
        lp->bad[r] |= lp->bad[i];
        lp->wanted[r] |= lp->wanted[i];
    }
    for (int i = 0; i < n; i++) {
        const tg_tensor *t = g->nodes[i];
        int r = find(lp->parent, i);
        if (is_4d(t) && !is_neutral(t) && !lp->bad[r] && lp->wanted[r])
            layout[i] |= TG_LAYOUT_BLOCKED;
    }
    /* a tied op runs blocked when its operands are (they agree: one group) */
    for (int i = 0; i < n; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!is_step(p, t) || kind_of(p, t) != OP_TIED)
            continue;
        for (int k = -1; k < t->n_in; k++) {
            const tg_tensor *v = k < 0 ? t : t->in[k];
            if (layout[v->id] & TG_LAYOUT_BLOCKED)
                layout[i] |= TG_LAYOUT_OP_BLOCKED;
        }
    }
}

static bool layout_off(void)
{
    const char *e = getenv("TG_LAYOUT");
    return e && strcmp(e, "plain") == 0;
}

tg_status tg_layout_assign(tg_program *p)
{
    int n = p->graph->n_nodes;
    tg_free(p->layout);
    p->layout = tg_calloc((size_t)n + 1, 1);
    if (!p->layout)
        return tg_error(TG_ERR_NOMEM, "compile: out of memory");
    if (!p->plan_kernels || layout_off())
        return TG_OK;
    layout_pass lp = {p, tg_malloc(((size_t)n + 1) * sizeof(int)), tg_calloc((size_t)n + 1, 1),
                      tg_calloc((size_t)n + 1, 1)};
    tg_status s = TG_OK;
    if (lp.parent && lp.bad && lp.wanted)
        run_pass(&lp, p->layout);
    else
        s = tg_error(TG_ERR_NOMEM, "compile: out of memory");
    tg_free(lp.parent);
    tg_free(lp.bad);
    tg_free(lp.wanted);
    return s;
}

bool tg_layout_reads_blocked(const tg_program *p, const tg_tensor *t)
{
    return (p->layout && (p->layout[t->id] & TG_LAYOUT_BLOCKED)) ||
           (p->plan_kernels && p->layout && is_neutral(t) && !layout_off());
}

void tg_layout_counts(const tg_program *p, int *tensors, int *ops)
{
    *tensors = *ops = 0;
    for (int i = 0; p->layout && i < p->graph->n_nodes; i++) {
        *tensors += (p->layout[i] & TG_LAYOUT_BLOCKED) != 0;
        *ops += (p->layout[i] & TG_LAYOUT_OP_BLOCKED) != 0;
    }
}
