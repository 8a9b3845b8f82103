/* runtime/interp.c - double-precision reference interpreter.
 *
 * It also clips the gradients by their global norm (max_grad_norm) the way
 * the engine does, in double, so the engine's clipping has an independent
 * check: before the first optimizer update runs, every gradient is known. */
#include "runtime/interp.h"

#include "core/alloc.h"
#include "core/error.h"
#include "graph/init.h"
#include "ops/op.h"
#include "graph/optim_params.h"

#include <math.h>

#include <string.h>

struct tg_interp {
    const tg_graph *g;
    uint64_t seed, stream;
    double **data;
};

tg_status tg_interp_create(const tg_graph *g, uint64_t seed, tg_interp **out)
{
    *out = NULL;
    tg_interp *ip = tg_calloc(1, sizeof *ip);
    if (!ip || !(ip->data = tg_calloc((size_t)g->n_nodes, sizeof(double *)))) {
        tg_free(ip);
        return tg_error(TG_ERR_NOMEM, "interpreter: out of memory");
    }
    ip->g = g;
    ip->seed = seed;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        int64_t n = tg_numel(t);
        if (t->flags & TG_NODE_ALIAS) {
            ip->data[i] = ip->data[t->in[0]->id];
            continue;
        }
        ip->data[i] = tg_calloc((size_t)(n ? n : 1), sizeof(double));
        if (!ip->data[i]) {
            tg_interp_destroy(ip);
            return tg_error(TG_ERR_NOMEM, "interpreter: out of memory for '%s'", t->name);
        }
        if (t->op == TG_OP_PARAM || t->op == TG_OP_STATE || t->op == TG_OP_CONSTANT) {
            float *tmp = tg_malloc((size_t)(n ? n : 1) * sizeof(float));
            if (!tmp) {
                tg_interp_destroy(ip);
                return tg_error(TG_ERR_NOMEM, "interpreter: out of memory for '%s'", t->name);
            }
            tg_init_fill_f32(t, seed, tmp);
            for (int64_t k = 0; k < n; k++)
                ip->data[i][k] = tmp[k];
            tg_free(tmp);
        }
    }
    *out = ip;
    return TG_OK;
}

void tg_interp_destroy(tg_interp *ip)
{
    if (!ip)
        return;
    for (int i = 0; ip->data && i < ip->g->n_nodes; i++)
        if (!(ip->g->nodes[i]->flags & TG_NODE_ALIAS))
            tg_free(ip->data[i]);
    tg_free(ip->data);
    tg_free(ip);
}

double *tg_interp_data(tg_interp *ip, const tg_tensor *t)
{
    return ip->data[t->id];
}

/* clip_grad_norm_ over every update's gradient (the graph's optimizer
 * appends all updates after the backward pass, so all are computed). */
static void clip_gradients(tg_interp *ip, float max_norm)
{
    const tg_graph *g = ip->g;
    double total = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *u = g->nodes[i];
        if (!tg_is_weight_update(u))
            continue;
        const double *x = ip->data[u->in[u->n_in - 1]->id];
        for (int64_t k = 0; k < tg_numel(u->in[0]); k++)
            total += x[k] * x[k];
    }
    float factor = tg_grad_clip_factor(sqrt(total), max_norm);
    for (int i = 0; i < g->n_nodes && factor < 1.0f; i++) {
        const tg_tensor *u = g->nodes[i];
        if (!tg_is_weight_update(u))
            continue;
        double *x = ip->data[u->in[u->n_in - 1]->id];
        for (int64_t k = 0; k < tg_numel(u->in[0]); k++)
            x[k] *= factor;
    }
}

void tg_interp_set_stream(tg_interp *ip, uint64_t stream)
{
    ip->stream = stream;
}

tg_status tg_interp_run(tg_interp *ip, int64_t step)
{
    const tg_graph *g = ip->g;
    bool clipped = false;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->n_in == 0)
            continue;
        if (!clipped && tg_is_weight_update(t)) {
            clipped = true;
            clip_gradients(ip, tg_optim_params_get(&t->p).max_grad_norm);
        }
        const tg_op_def *def = tg_op_get(t->op);
        if (t->flags & TG_NODE_ALIAS)
            continue; /* shares its input's buffer */
        if (!def || !def->reference)
            return tg_error(TG_ERR_UNSUPPORTED, "%s: op '%s' has no reference kernel", t->name,
                            tg_op_name(t->op));
        tg_ref_args a = {
            .node = t, .out = ip->data[i], .step = step, .seed = ip->seed, .stream = ip->stream};
        for (int k = 0; k < t->n_in; k++)
            a.in[k] = ip->data[t->in[k]->id];
        def->reference(&a);
    }
    return TG_OK;
}
