/* graph/optim.c - optimizer settings, learning-rate schedules and building
 * the optimizer into the graph.
 *
 * tg_graph_add_optimizer gives every parameter with a gradient its state
 * tensors (zero-initialised, named "<param>/<state>" as PyTorch names them)
 * and one update node that rewrites the parameter and its state in place:
 *
 *     SGD_UPDATE(param, [momentum_buffer,] grad)
 *     ADAM_UPDATE(param, exp_avg, exp_avg_sq, grad)    (Adam, AdamW, LAMB)
 *
 * The mutated inputs come first (node->n_mutated of them, set by the op's
 * shape rule); the settings travel in the node params (graph/optim_params.h).
 * Each update is placed in the block of the parameter's gradient, so a
 * pipeline stage updates the weights it computed the gradients of.
 * max_grad_norm travels in every update's params too, but the clipping is
 * the engine's (it needs every parameter's gradient: runtime/engine.c).
 */
#include "graph/node.h"

#include "core/error.h"
#include "graph/optim_params.h"
#include "tilegraph/optim.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- settings ------------------------------------------------------------------ */

static tg_optimizer base(tg_optimizer_kind kind, float lr)
{
    tg_optimizer o = {0};
    o.kind = kind;
    o.bias_correction = true;
    o.lr = (tg_lr_schedule){.kind = TG_LR_CONSTANT,
                            .lr = lr,
                            .step_size = 1,
                            .gamma = 0.1f,
                            .total_steps = 1,
                            .min_lr = 0.0f};
    return o;
}

tg_optimizer tg_optimizer_sgd(float lr, float momentum)
{
    tg_optimizer o = base(TG_OPT_SGD, lr);
    o.momentum = momentum;
    return o;
}

tg_optimizer tg_optimizer_adam(float lr)
{
    tg_optimizer o = base(TG_OPT_ADAM, lr);
    o.beta1 = 0.9f;
    o.beta2 = 0.999f;
    o.eps = 1e-8f;
    return o;
}

tg_optimizer tg_optimizer_adamw(float lr)
{
    tg_optimizer o = tg_optimizer_adam(lr);
    o.kind = TG_OPT_ADAMW;
    o.weight_decay = 0.01f;
    return o;
}

tg_optimizer tg_optimizer_lamb(float lr)
{
    tg_optimizer o = tg_optimizer_adamw(lr);
    o.kind = TG_OPT_LAMB;
    return o;
}

static double base_lr(const tg_lr_schedule *s, int64_t step)
{
    switch (s->kind) {
    case TG_LR_CONSTANT:
        break;
    case TG_LR_STEP:
        if (s->step_size > 0)
            return (double)s->lr * pow((double)s->gamma, (double)(step / s->step_size));
        break;
    case TG_LR_COSINE:
        if (s->total_steps > 0) {
            const double pi = 3.14159265358979323846;
            double t = (double)(step < s->total_steps ? step : s->total_steps);
            double lo = s->min_lr, hi = s->lr;
            return lo + (hi - lo) * (1.0 + cos(pi * t / (double)s->total_steps)) / 2.0;
        }
        break;
    }
    return s->lr;
}

float tg_lr_at(const tg_lr_schedule *s, int64_t step)
{
    if (!s)
        return 0.0f;
    if (step < 0)
        step = 0;
    double lr = base_lr(s, step);
    if (s->warmup_steps > 0 && step < s->warmup_steps)
        lr *= (double)(step + 1) / (double)s->warmup_steps;
    return (float)lr;
}

static const char *const kind_names[] = {"sgd", "adam", "adamw", "lamb"};
#define N_KINDS (int)(sizeof kind_names / sizeof kind_names[0])

tg_status tg_optimizer_parse(const char *name, tg_optimizer_kind *out)
{
    for (int k = 0; name && k < N_KINDS; k++) {
        const char *a = name, *b = kind_names[k];
        while (*a && tolower((unsigned char)*a) == *b)
            a++, b++;
        if (!*a && !*b) {
            *out = (tg_optimizer_kind)k;
            return TG_OK;
        }
    }
    return tg_error(TG_ERR_INVALID_ARG, "optimizer '%s': expected sgd, adam, adamw or lamb",
                    name ? name : "(null)");
}

const char *tg_optimizer_name(tg_optimizer_kind k)
{
    return (unsigned)k < (unsigned)N_KINDS ? kind_names[k] : "?";
}

/* Written so that NaN fails every range test. */
static bool in_range(double x, double lo, double hi, bool hi_open)
{
    return x >= lo && (hi_open ? x < hi : x <= hi);
}

tg_status tg_optimizer_validate(const tg_optimizer *o)
{
    if (!o)
        return tg_error(TG_ERR_INVALID_ARG, "optimizer: no settings given");
    if ((unsigned)o->kind > TG_OPT_LAMB)
        return tg_error(TG_ERR_CONFIG, "optimizer: unknown kind %d (sgd, adam, adamw or lamb)",
                        (int)o->kind);
    const char *name = tg_optimizer_name(o->kind);
    const tg_lr_schedule *s = &o->lr;
    if (!in_range(s->lr, 0, INFINITY, true))
        return tg_error(TG_ERR_CONFIG,
                        "optimizer %s: learning rate lr = %g must be >= 0 and finite", name, s->lr);
    switch (s->kind) {
    case TG_LR_CONSTANT:
        break;
    case TG_LR_STEP:
        if (s->step_size < 1)
            return tg_error(TG_ERR_CONFIG,
                            "optimizer %s: step lr schedule: step_size = %lld must be at least 1",
                            name, (long long)s->step_size);
        if (!in_range(s->gamma, 0, INFINITY, true))
            return tg_error(TG_ERR_CONFIG,
                            "optimizer %s: step lr schedule: gamma = %g must be >= 0 and finite",
                            name, s->gamma);
        break;
    case TG_LR_COSINE:
        if (s->total_steps < 1)
            return tg_error(
                TG_ERR_CONFIG,
                "optimizer %s: cosine lr schedule: total_steps = %lld must be at least 1", name,
                (long long)s->total_steps);
        if (!in_range(s->min_lr, 0, INFINITY, true))
            return tg_error(TG_ERR_CONFIG,
                            "optimizer %s: cosine lr schedule: min_lr = %g must be >= 0 and finite",
                            name, s->min_lr);
        break;
    default:
        return tg_error(TG_ERR_CONFIG,
                        "optimizer %s: unknown lr schedule kind %d (constant, step or cosine)",
                        name, (int)s->kind);
    }
    if (s->warmup_steps < 0)
        return tg_error(TG_ERR_CONFIG, "optimizer %s: warmup_steps = %lld must not be negative",
                        name, (long long)s->warmup_steps);
    if (!in_range(o->weight_decay, 0, INFINITY, true))
        return tg_error(TG_ERR_CONFIG, "optimizer %s: weight_decay = %g must be >= 0 and finite",
                        name, o->weight_decay);
    /* inf is allowed: it means off, as in PyTorch */
    if (!in_range(o->max_grad_norm, 0, INFINITY, false))
        return tg_error(TG_ERR_CONFIG,
                        "optimizer %s: max_grad_norm = %g must be >= 0 (0 or inf: no clipping)",
                        name, o->max_grad_norm);
    if (!in_range(o->max_weight_norm, 0, INFINITY, false))
        return tg_error(TG_ERR_CONFIG,
                        "optimizer %s: max_weight_norm = %g must be >= 0 (0 or inf: no clipping)",
                        name, o->max_weight_norm);
    if (o->max_weight_norm != 0 && o->kind != TG_OPT_LAMB)
        return tg_error(TG_ERR_CONFIG,
                        "optimizer %s: max_weight_norm = %g applies to lamb only; leave it 0", name,
                        o->max_weight_norm);
    if (o->kind == TG_OPT_SGD) {
        if (!in_range(o->momentum, 0, 1, true))
            return tg_error(TG_ERR_CONFIG, "optimizer sgd: momentum = %g is outside [0, 1)",
                            o->momentum);
        if (!in_range(o->dampening, 0, 1, false))
            return tg_error(TG_ERR_CONFIG, "optimizer sgd: dampening = %g is outside [0, 1]",
                            o->dampening);
        if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
            return tg_error(TG_ERR_CONFIG,
                            "optimizer sgd: nesterov needs momentum > 0 and dampening = 0 "
                            "(momentum = %g, dampening = %g)",
                            o->momentum, o->dampening);
    } else {
        if (!in_range(o->beta1, 0, 1, true))
            return tg_error(TG_ERR_CONFIG, "optimizer %s: beta1 = %g is outside [0, 1)", name,
                            o->beta1);
        if (!in_range(o->beta2, 0, 1, true))
            return tg_error(TG_ERR_CONFIG, "optimizer %s: beta2 = %g is outside [0, 1)", name,
                            o->beta2);
        if (!in_range(o->eps, 0, INFINITY, true))
            return tg_error(TG_ERR_CONFIG, "optimizer %s: eps = %g must be >= 0 and finite", name,
                            o->eps);
    }
    return TG_OK;
}

/* ---- building ------------------------------------------------------------------ */

static tg_tensor *make_state(tg_graph *g, const tg_tensor *param, const char *what)
{
    char name[512];
    snprintf(name, sizeof name, "%s/%s", param->name, what);
    return tg_state(g, name, param->shape, (tg_init){TG_INIT_ZEROS, 0, 0});
}

/* State and update node for one parameter; NULL (graph error set) on failure. */
static tg_tensor *add_update(tg_graph *g, const tg_optimizer *o, const tg_node_params *p,
                             tg_tensor *param)
{
    tg_tensor *in[4];
    int n = 0;
    tg_op op;
    in[n++] = param;
    if (o->kind == TG_OPT_SGD) {
        op = TG_OP_SGD_UPDATE;
        if (o->momentum != 0)
            in[n++] = make_state(g, param, "momentum_buffer");
    } else {
        op = TG_OP_ADAM_UPDATE;
        in[n++] = make_state(g, param, "exp_avg");
        in[n++] = make_state(g, param, "exp_avg_sq");
    }
    in[n++] = param->grad;
    tg_tensor *u = tg_node_create(g, op, n, in, p);
    if (!u)
        return NULL;
    u->role = TG_ROLE_UPDATE;
    u->flags |= TG_NODE_OPTIMIZER;
    char name[512];
    snprintf(name, sizeof name, "%s/update", param->name);
    tg_graph_rename(g, u, name);
    return g->status == TG_OK ? u : NULL;
}

/* Every group valid, of one kind and one max_grad_norm; every name a
 * parameter and every group index in range. */
static tg_status check_groups(tg_graph *g, const tg_optimizer *opts, int n_opts,
                              const char *const *names, const int *group, int n_names)
{
    if (!opts || n_opts < 1 || (n_names > 0 && (!names || !group)))
        return tg_error(TG_ERR_INVALID_ARG, "add optimizer: no settings given");
    for (int k = 0; k < n_opts; k++) {
        TG_TRY(tg_optimizer_validate(&opts[k]));
        if (opts[k].kind != opts[0].kind)
            return tg_error(TG_ERR_INVALID_ARG,
                            "add optimizer: group %d is %s but group 0 is %s; one optimizer "
                            "updates every group",
                            k, tg_optimizer_name(opts[k].kind), tg_optimizer_name(opts[0].kind));
        if (!(opts[k].max_grad_norm == opts[0].max_grad_norm))
            return tg_error(TG_ERR_INVALID_ARG,
                            "add optimizer: group %d clips at max_grad_norm %g but group 0 at %g; "
                            "clipping is over every gradient at once: give every group the same",
                            k, (double)opts[k].max_grad_norm, (double)opts[0].max_grad_norm);
    }
    for (int i = 0; i < n_names; i++) {
        const tg_tensor *t = names[i] ? tg_graph_find(g, names[i]) : NULL;
        if (!t || t->op != TG_OP_PARAM)
            return tg_error(TG_ERR_NOT_FOUND, "add optimizer: '%s' (entry %d) is not a parameter",
                            names[i] ? names[i] : "(null)", i);
        if (group[i] < 0 || group[i] >= n_opts)
            return tg_error(TG_ERR_INVALID_ARG,
                            "add optimizer: '%s' is in group %d, but there are %d groups", names[i],
                            group[i], n_opts);
    }
    return TG_OK;
}

/* The group of parameter t: the entry naming it, else 0. */
static int group_of(const tg_tensor *t, const char *const *names, const int *group, int n_names)
{
    for (int i = 0; i < n_names; i++)
        if (!strcmp(names[i], t->name))
            return group[i];
    return 0;
}

tg_status tg_graph_add_optimizer(tg_graph *g, const tg_optimizer *opt)
{
    return tg_graph_add_optimizer_groups(g, opt, 1, NULL, NULL, 0);
}

tg_status tg_graph_add_optimizer_groups(tg_graph *g, const tg_optimizer *opts, int n_opts,
                                        const char *const *names, const int *group, int n_names)
{
    if (!g)
        return tg_error(TG_ERR_INVALID_ARG, "add optimizer: no graph given");
    if (g->status != TG_OK)
        return tg_error(g->status, "add optimizer: the graph has an earlier error: %s",
                        tg_graph_error(g));
    tg_status s = check_groups(g, opts, n_opts, names, group, n_names);
    if (s != TG_OK) {
        tg_graph_fail(g, s, "%s", tg_error_message());
        return s;
    }
    int n = g->n_nodes, with_grad = 0;
    for (int i = 0; i < n; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->flags & TG_NODE_OPTIMIZER) {
            tg_graph_fail(g, TG_ERR_INVALID_ARG,
                          "add optimizer: the graph already has an optimizer ('%s')", t->name);
            return g->status;
        }
        with_grad += t->op == TG_OP_PARAM && t->grad;
    }
    if (!with_grad) {
        tg_graph_fail(g, TG_ERR_INVALID_ARG,
                      "add optimizer: no parameter has a gradient (call tg_graph_backward first)");
        return g->status;
    }
    /* Parameter names are already full names: build outside any user scope. */
    int saved_depth = g->scope_depth, saved_block = g->current_block;
    g->scope_depth = 0;
    for (int i = 0; i < n && g->status == TG_OK; i++) {
        tg_tensor *t = g->nodes[i];
        if (t->op != TG_OP_PARAM || !t->grad)
            continue;
        const tg_optimizer *o = &opts[group_of(t, names, group, n_names)];
        tg_node_params p = tg_optim_params_put(o);
        g->current_block = t->grad->block;
        add_update(g, o, &p, t);
    }
    g->scope_depth = saved_depth;
    g->current_block = saved_block;
    return g->status;
}
