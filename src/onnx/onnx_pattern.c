/* onnx/onnx_pattern.c - recognising multi-node patterns the PyTorch
 * exporter emits for one module, so they build as the one op they are.
 *
 * GELU (nn.GELU, exported before opset 20) arrives as
 *     Div(x, sqrt(2)) -> Erf -> Add(., 1) -> Mul(x, .) -> Mul(., 0.5)
 * and becomes tg_gelu(x): one kernel instead of five, and one activation
 * kept for the backward pass instead of four. Anything that does not match
 * exactly (another constant, an intermediate used elsewhere) is left to the
 * node-by-node mapping, which computes the same function.
 */
#include "onnx/onnx_build.h"

#include <math.h>
#include <string.h>

/* The one node that reads `name`, or -1 (none, several, or a graph output). */
static int sole_consumer(const onnx_builder *b, const char *name)
{
    const Onnx__GraphProto *g = b->m->graph;
    for (size_t k = 0; k < g->n_output; k++)
        if (!strcmp(g->output[k]->name, name))
            return -1;
    int found = -1;
    for (size_t k = 0; k < g->n_node; k++)
        for (size_t i = 0; i < g->node[k]->n_input; i++)
            if (!strcmp(g->node[k]->input[i], name)) {
                if (found >= 0 && found != (int)k)
                    return -1;
                found = (int)k;
            }
    return found;
}

/* A Constant node's scalar that the walk has not reached yet (the exporter
 * places GELU's 0.5 after the Div that starts the pattern). */
static bool later_constant(const onnx_builder *b, const char *name, double *out)
{
    const Onnx__GraphProto *g = b->m->graph;
    for (size_t k = 0; k < g->n_node; k++) {
        const Onnx__NodeProto *n = g->node[k];
        if (n->n_output < 1 || strcmp(n->output[0], name) || strcmp(n->op_type, "Constant"))
            continue;
        for (size_t a = 0; a < n->n_attribute; a++) {
            const Onnx__AttributeProto *at = n->attribute[a];
            if (!strcmp(at->name, "value_float") && at->has_f) {
                *out = at->f;
                return true;
            }
            if (!strcmp(at->name, "value") && at->t) {
                tg_onnx_data d;
                if (tg_onnx_data_decode(at->t, NULL, 0, "Constant", &d) != TG_OK)
                    return false;
                bool one = d.n == 1 && d.f;
                if (one)
                    *out = d.f[0];
                tg_onnx_data_free(&d);
                return one;
            }
        }
    }
    return false;
}

/* Whether `name` is a constant scalar within 1e-5 of v. */
static bool const_near(onnx_builder *b, const char *name, double v)
{
    ob_value *val = ob_find(b, name);
    const tg_onnx_data *d = val && val->known ? ob_value_const(b, val) : NULL;
    double x;
    if (d && d->n == 1)
        x = d->f ? d->f[0] : (double)d->i[0];
    else if (!val || val->known || !later_constant(b, name, &x))
        return false;
    return fabs(x - v) <= 1e-5 * fabs(v);
}

/* Node k is `op` with two inputs, one of them `name`: the other input. */
static const char *other_input(const Onnx__NodeProto *n, const char *op, const char *name)
{
    if (strcmp(n->op_type, op) || n->n_input != 2 || n->n_output < 1)
        return NULL;
    if (!strcmp(n->input[0], name))
        return n->input[1];
    return !strcmp(n->input[1], name) ? n->input[0] : NULL;
}

bool ob_match_gelu(onnx_builder *b, int k, bool *skip)
{
    const Onnx__NodeProto *const *node = (const Onnx__NodeProto *const *)b->m->graph->node;
    const Onnx__NodeProto *div = node[k];
    if (strcmp(div->op_type, "Div") || div->n_input != 2 ||
        !const_near(b, div->input[1], sqrt(2.0)))
        return false;
    const char *x = div->input[0];
    int e = sole_consumer(b, div->output[0]);
    if (e < 0 || strcmp(node[e]->op_type, "Erf") || node[e]->n_output < 1)
        return false;
    int a = sole_consumer(b, node[e]->output[0]);
    const char *one = a >= 0 ? other_input(node[a], "Add", node[e]->output[0]) : NULL;
    if (!one || !const_near(b, one, 1.0))
        return false;
    int m1 = sole_consumer(b, node[a]->output[0]);
    const char *mx = m1 >= 0 ? other_input(node[m1], "Mul", node[a]->output[0]) : NULL;
    if (!mx || strcmp(mx, x))
        return false;
    int m2 = sole_consumer(b, node[m1]->output[0]);
    const char *half = m2 >= 0 ? other_input(node[m2], "Mul", node[m1]->output[0]) : NULL;
    if (!half || !const_near(b, half, 0.5))
        return false;
    ob_value *in = ob_find(b, x), *out = ob_find(b, node[m2]->output[0]);
    if (!in || !in->t || !out)
        return false; /* a constant x: leave it to folding */
    /* the GELU takes the last node's scope */
    ob_enter(b, node[m2]);
    out->t = tg_gelu(b->g, in->t);
    ob_leave(b);
    out->known = true;
    skip[e] = skip[a] = skip[m1] = skip[m2] = true;
    return true;
}
