/* onnx/onnx_pattern.c - recognising multi-node patterns the PyTorch
 * exporter emits for one module, so they build as the one op they are.
 *
 * GELU (nn.GELU, exported before opset 20) arrives as
 *     Div(x, sqrt(2)) -> Erf -> Add(., 1) -> Mul(x, .) -> Mul(., 0.5)
 * and becomes tg_gelu(x): one kernel instead of five, and one activation
 * kept for the backward pass instead of four. Its tanh form
 * (gelu(approximate='tanh')) arrives as
 *     Mul(x, x) -> Mul(x, .) -> Mul(0.044715, .) -> Add(x, .)
 *     -> Mul(sqrt(2/pi), .) -> Tanh -> Add(1, .) -> Mul(x, .) -> Mul(0.5, .)
 * and becomes tg_gelu_tanh(x).
 *
 * LayerNorm (nn.LayerNorm, exported before opset 17, which has
 * LayerNormalization) arrives as
 *     m = ReduceMean(x); d = Sub(x, m); v = ReduceMean(Pow(d, 2));
 *     y = Div(d, Sqrt(Add(v, eps))); [Mul(y, gamma)]; [Add(., beta)]
 * over the last dims, and becomes tg_layer_norm: one fused kernel with its
 * statistics kept for the backward pass, instead of nine ops and their
 * activations (BERT has two per layer).
 *
 * Anything that does not match exactly (another constant, an intermediate
 * used elsewhere, other axes) is left to the node-by-node mapping, which
 * computes the same function.
 */
#include "onnx/onnx_build.h"

#include <math.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

int ob_sole_consumer(const onnx_builder *b, const char *name)
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

/* The value of `name` when it is a constant scalar. */
static bool const_scalar(onnx_builder *b, const char *name, double *x)
{
    ob_value *val = ob_find(b, name);
    const tg_onnx_data *d = val && val->known ? ob_value_const(b, val) : NULL;
    if (d && d->n == 1) {
        *x = d->f ? d->f[0] : (double)d->i[0];
        return true;
    }
    return val && !val->known && later_constant(b, name, x);
}

/* Whether `name` is a constant scalar within 1e-5 of v. */
static bool const_near(onnx_builder *b, const char *name, double v)
{
    double x;
    return const_scalar(b, name, &x) && fabs(x - v) <= 1e-5 * fabs(v);
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
    int e = ob_sole_consumer(b, div->output[0]);
    if (e < 0 || strcmp(node[e]->op_type, "Erf") || node[e]->n_output < 1)
        return false;
    int a = ob_sole_consumer(b, node[e]->output[0]);
    const char *one = a >= 0 ? other_input(node[a], "Add", node[e]->output[0]) : NULL;
    if (!one || !const_near(b, one, 1.0))
        return false;
    int m1 = ob_sole_consumer(b, node[a]->output[0]);
    const char *mx = m1 >= 0 ? other_input(node[m1], "Mul", node[a]->output[0]) : NULL;
    if (!mx || strcmp(mx, x))
        return false;
    int m2 = ob_sole_consumer(b, node[m1]->output[0]);
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

/* ---- LayerNorm ------------------------------------------------------------------ */

/* The nodes that read `name` (up to max of them, in *at); -1 when a graph
 * output is `name` (it must stay). */
static int consumers(const onnx_builder *b, const char *name, int *at, int max)
{
    const Onnx__GraphProto *g = b->m->graph;
    for (size_t k = 0; k < g->n_output; k++)
        if (!strcmp(g->output[k]->name, name))
            return -1;
    int n = 0;
    for (size_t k = 0; k < g->n_node; k++)
        for (size_t i = 0; i < g->node[k]->n_input; i++)
            if (!strcmp(g->node[k]->input[i], name)) {
                if (n < max)
                    at[n] = (int)k;
                n++;
                break;
            }
    return n;
}

/* A ReduceMean over the last `*n` dims of an nd-dim input, keeping them
 * (axes as an attribute, opsets before 18). */
static bool mean_over_last(const Onnx__NodeProto *r, int nd, int *n)
{
    if (strcmp(r->op_type, "ReduceMean") || r->n_input != 1 || r->n_output < 1)
        return false;
    unsigned mask = 0;
    bool has_axes = false;
    for (size_t a = 0; a < r->n_attribute; a++) {
        const Onnx__AttributeProto *at = r->attribute[a];
        if (!strcmp(at->name, "keepdims") && at->i != 1)
            return false;
        if (!strcmp(at->name, "axes")) {
            has_axes = true;
            for (size_t i = 0; i < at->n_ints; i++) {
                int64_t ax = at->ints[i] < 0 ? at->ints[i] + nd : at->ints[i];
                if (ax < 0 || ax >= nd)
                    return false;
                mask |= 1u << ax;
            }
        } else if (strcmp(at->name, "keepdims"))
            return false;
    }
    int c = 0;
    while (c < nd && (mask >> (nd - 1 - c) & 1u))
        c++;
    *n = c;
    return has_axes && c > 0 && mask == ((1u << nd) - 1u) - ((1u << (nd - c)) - 1u);
}

/* The input of node k (Mul or Add) other than `name`, as a tensor of shape
 * `want` (gamma or beta), or NULL. */
static tg_tensor *affine_operand(onnx_builder *b, int k, const char *op, const char *name,
                                 tg_shape want)
{
    const Onnx__NodeProto *n = b->m->graph->node[k];
    const char *other = other_input(n, op, name);
    if (!other)
        return NULL;
    ob_value *v = ob_find(b, other);
    if (!v || (!v->known && v->init < 0))
        return NULL;
    ob_enter(b, n);
    tg_tensor *t = ob_tensor(b, strcmp(n->input[0], other) ? 1 : 0);
    ob_leave(b);
    return t && tg_shape_equal(tg_tensor_shape(t), want) ? t : NULL;
}

bool ob_match_layer_norm(onnx_builder *b, int k, bool *skip)
{
    const Onnx__NodeProto *const *node = (const Onnx__NodeProto *const *)b->m->graph->node;
    const Onnx__NodeProto *m1 = node[k];
    ob_value *xv =
        strcmp(m1->op_type, "ReduceMean") || m1->n_input != 1 ? NULL : ob_find(b, m1->input[0]);
    if (!xv || !xv->t)
        return false;
    const char *x = m1->input[0];
    tg_shape xs = tg_tensor_shape(xv->t);
    int n = 0, n2 = 0;
    if (!mean_over_last(m1, xs.ndim, &n))
        return false;
    int sub = ob_sole_consumer(b, m1->output[0]);
    if (sub < 0 || strcmp(node[sub]->op_type, "Sub") || node[sub]->n_input != 2 ||
        strcmp(node[sub]->input[0], x) || strcmp(node[sub]->input[1], m1->output[0]))
        return false;
    const char *d = node[sub]->output[0];
    int use[2];
    if (consumers(b, d, use, 2) != 2)
        return false;
    int pw = !strcmp(node[use[0]]->op_type, "Pow") ? use[0] : use[1];
    int dv = pw == use[0] ? use[1] : use[0];
    if (strcmp(node[pw]->op_type, "Pow") || node[pw]->n_input != 2 ||
        strcmp(node[pw]->input[0], d) || !const_near(b, node[pw]->input[1], 2.0))
        return false;
    int m2 = ob_sole_consumer(b, node[pw]->output[0]);
    if (m2 < 0 || !mean_over_last(node[m2], xs.ndim, &n2) || n2 != n)
        return false;
    int add = ob_sole_consumer(b, node[m2]->output[0]);
    const char *eps_name = add >= 0 ? other_input(node[add], "Add", node[m2]->output[0]) : NULL;
    double eps;
    if (!eps_name || !const_scalar(b, eps_name, &eps) || !(eps >= 0))
        return false;
    int sq = ob_sole_consumer(b, node[add]->output[0]);
    if (sq < 0 || strcmp(node[sq]->op_type, "Sqrt") ||
        ob_sole_consumer(b, node[sq]->output[0]) != dv)
        return false;
    if (strcmp(node[dv]->op_type, "Div") || node[dv]->n_input != 2 ||
        strcmp(node[dv]->input[0], d) || strcmp(node[dv]->input[1], node[sq]->output[0]))
        return false;
    /* the affine part, when its operands have the normalised dims' shape */
    tg_shape ns = tg_shape_of(0, NULL);
    for (int i = xs.ndim - n; i < xs.ndim; i++)
        ns.dim[ns.ndim++] = xs.dim[i];
    int last = dv, mul = ob_sole_consumer(b, node[dv]->output[0]), badd = -1;
    tg_tensor *gamma = mul >= 0 ? affine_operand(b, mul, "Mul", node[dv]->output[0], ns) : NULL;
    tg_tensor *beta = NULL;
    if (gamma) {
        last = mul;
        badd = ob_sole_consumer(b, node[mul]->output[0]);
        beta = badd >= 0 ? affine_operand(b, badd, "Add", node[mul]->output[0], ns) : NULL;
        if (beta)
            last = badd;
    }
    ob_value *out = ob_find(b, node[last]->output[0]);
    if (!out)
        return false;
    ob_enter(b, node[last]);
    out->t = tg_layer_norm(b->g, xv->t, n, gamma, beta, (float)eps);
    ob_leave(b);
    out->known = true;
    skip[k] = skip[sub] = skip[pw] = skip[m2] = skip[add] = skip[sq] = skip[dv] = true;
    if (gamma)
        skip[mul] = true;
    if (beta)
        skip[badd] = true;
    return true;
}

/* ---- GELU, tanh form ----------------------------------------------------------- */

/* The sole consumer of `name` when it is `op` with `name` as one of two
 * inputs; the other input in *other. -1 otherwise. */
static int next_binary(onnx_builder *b, const char *name, const char *op, const char **other)
{
    int k = ob_sole_consumer(b, name);
    if (k < 0)
        return -1;
    *other = other_input(b->m->graph->node[k], op, name);
    return *other ? k : -1;
}

bool ob_match_gelu_tanh(onnx_builder *b, int k, bool *skip)
{
    const Onnx__NodeProto *const *node = (const Onnx__NodeProto *const *)b->m->graph->node;
    const Onnx__NodeProto *sq = node[k];
    if (strcmp(sq->op_type, "Mul") || sq->n_input != 2 || sq->n_output < 1 ||
        strcmp(sq->input[0], sq->input[1]))
        return false;
    const char *x = sq->input[0], *o;
    int at[8];
    at[0] = next_binary(b, sq->output[0], "Mul", &o); /* x^3 */
    if (at[0] < 0 || strcmp(o, x))
        return false;
    at[1] = next_binary(b, node[at[0]]->output[0], "Mul", &o); /* 0.044715 x^3 */
    if (at[1] < 0 || !const_near(b, o, 0.044715))
        return false;
    at[2] = next_binary(b, node[at[1]]->output[0], "Add", &o); /* x + . */
    if (at[2] < 0 || strcmp(o, x))
        return false;
    at[3] = next_binary(b, node[at[2]]->output[0], "Mul", &o); /* sqrt(2/pi) (.) */
    if (at[3] < 0 || !const_near(b, o, sqrt(2.0 / M_PI)))
        return false;
    at[4] = ob_sole_consumer(b, node[at[3]]->output[0]);
    if (at[4] < 0 || strcmp(node[at[4]]->op_type, "Tanh") || node[at[4]]->n_output < 1)
        return false;
    at[5] = next_binary(b, node[at[4]]->output[0], "Add", &o); /* 1 + tanh */
    if (at[5] < 0 || !const_near(b, o, 1.0))
        return false;
    at[6] = next_binary(b, node[at[5]]->output[0], "Mul", &o); /* x (.) */
    if (at[6] < 0 || strcmp(o, x))
        return false;
    at[7] = next_binary(b, node[at[6]]->output[0], "Mul", &o); /* 0.5 (.) */
    if (at[7] < 0 || !const_near(b, o, 0.5))
        return false;
    ob_value *in = ob_find(b, x), *out = ob_find(b, node[at[7]]->output[0]);
    if (!in || !in->t || !out)
        return false;
    ob_enter(b, node[at[7]]);
    out->t = tg_gelu_tanh(b->g, in->t);
    ob_leave(b);
    out->known = true;
    skip[k] = true;
    for (int i = 0; i < 8; i++)
        skip[at[i]] = true;
    return true;
}
