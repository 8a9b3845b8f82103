/* compile/program.c - compile a graph into a program: schedule, then plan. */
#include "compile/program.h"

#include "core/alloc.h"
#include "core/error.h"
#include "ops/op.h"

/* Leaves live in the region of their role; computed values are activations. */
static tg_region region_of(const tg_tensor *t)
{
    if (t->n_in > 0)
        return TG_REGION_ACTIVATION;
    switch (t->role) {
    case TG_ROLE_PARAM:
        return TG_REGION_PARAM;
    case TG_ROLE_STATE:
        return TG_REGION_STATE;
    case TG_ROLE_CONSTANT:
        return TG_REGION_CONSTANT;
    default:
        return TG_REGION_INPUT;
    }
}

static bool runs_as_step(const tg_tensor *t)
{
    return t->n_in > 0 && !(t->flags & TG_NODE_ALIAS);
}

static tg_status make_buffers(tg_program *p, const int *order, int n_order)
{
    const tg_graph *g = p->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        p->root[i] = (t->flags & TG_NODE_ALIAS) ? p->root[t->in[0]->id] : i;
        p->buffers[i] = (tg_buffer){TG_REGION_NONE, 0, 0, -1, -1};
    }
    for (int k = 0; k < n_order; k++) {
        const tg_tensor *t = g->nodes[order[k]];
        if (p->root[t->id] != t->id || tg_nbytes(t) == 0)
            continue;
        tg_buffer *b = &p->buffers[t->id];
        b->bytes = tg_nbytes(t);
        b->region = region_of(t);
    }
    /* Leaves that nothing needs still keep their storage: a parameter is part
     * of the model (and of checkpoints) even when this program does not read it. */
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->n_in == 0 && t->role != TG_ROLE_INPUT && p->buffers[i].region == TG_REGION_NONE &&
            tg_nbytes(t) > 0) {
            p->buffers[i].bytes = tg_nbytes(t);
            p->buffers[i].region = region_of(t);
        }
    }
    for (int k = 0; k < n_order; k++) {
        const tg_tensor *t = g->nodes[order[k]];
        if (!runs_as_step(t))
            continue;
        const tg_op_def *def = tg_op_get(t->op);
        if (!def || !def->forward)
            return tg_error(TG_ERR_UNSUPPORTED, "%s: op '%s' has no kernel", t->name,
                            tg_op_name(t->op));
        tg_step *st = &p->steps[p->n_steps++];
        st->node = t->id;
        st->scratch_bytes = def->scratch ? def->scratch(t, p->n_threads) : 0;
        st->scratch_offset = 0;
        if (def->flops)
            p->flops += def->flops(t);
    }
    return TG_OK;
}

tg_status tg_program_compile(const tg_graph *g, int n_threads, tg_program **out)
{
    *out = NULL;
    if (!g)
        return tg_error(TG_ERR_INVALID_ARG, "compile: no graph");
    if (g->status != TG_OK)
        return tg_error(g->status, "compile: the graph has an error: %s", g->error);
    tg_program *p = tg_calloc(1, sizeof *p);
    if (!p)
        return tg_error(TG_ERR_NOMEM, "compile: out of memory");
    p->graph = g;
    p->n_threads = n_threads < 1 ? 1 : n_threads;
    int *order = NULL, n_order = 0;
    tg_status s = tg_schedule(g, &order, &n_order);
    if (s == TG_OK) {
        p->steps = tg_calloc((size_t)n_order + 1, sizeof *p->steps);
        p->buffers = tg_calloc((size_t)g->n_nodes + 1, sizeof *p->buffers);
        p->root = tg_calloc((size_t)g->n_nodes + 1, sizeof *p->root);
        if (!p->steps || !p->buffers || !p->root)
            s = tg_error(TG_ERR_NOMEM, "compile: out of memory");
    }
    if (s == TG_OK)
        s = make_buffers(p, order, n_order);
    if (s == TG_OK)
        s = tg_memplan(p);
    tg_free(order);
    if (s != TG_OK) {
        tg_program_destroy(p);
        return s;
    }
    *out = p;
    return TG_OK;
}

void tg_program_destroy(tg_program *p)
{
    if (!p)
        return;
    tg_free(p->steps);
    tg_free(p->buffers);
    tg_free(p->root);
    tg_free(p);
}
