/* compile/precision.c - storage types from the precision options. */
#include "compile/precision.h"

#include "core/convert.h"
#include "core/error.h"

#include <stdio.h>
#include <string.h>

/* "32", "16" or "bf16" */
static int part_dtype(const char *s, size_t n)
{
    if (n == 2 && !strncmp(s, "32", 2))
        return TG_F32;
    if (n == 2 && !strncmp(s, "16", 2))
        return TG_F16;
    if (n == 4 && !strncmp(s, "bf16", 4))
        return TG_BF16;
    return -1;
}

/* v is one of the option table's values ("auto", "f32", "f16", "bf16"). */
static tg_dtype type_option(const char *v, tg_dtype if_auto)
{
    tg_dtype t = if_auto;
    if (strcmp(v, "auto"))
        (void)tg_dtype_parse(v, &t); /* the table allows only types it knows */
    return t;
}

/* Precision.enableStochasticRounding. auto: on when the update writes bf16
 * (weights or optimizer state). bf16 keeps 8 significant bits, so an update
 * below half a step of its weight is lost when rounded to nearest: ResNet-18
 * in bf16.bf16 trained to 0.72 points below fp32 at 25,600 samples (the
 * mean of 3 seeds), and to 0.26 with stochastic rounding, at 2-3% of a
 * ResNet-50 step's time (docs/precision.md). PopTorch's default is off, but the IPU has no bf16:
 * there it concerns f16 weights, which keep PopTorch's default here, so that
 * a PopTorch script's 16.16 trains the same way. */
static bool stochastic_rounding(int asked, const tg_precision *pr)
{
    if (asked >= 0)
        return asked;
    return pr->model == TG_BF16 || pr->first_moment == TG_BF16 || pr->second_moment == TG_BF16;
}

tg_status tg_precision_read(const tg_config *c, tg_precision *out)
{
    const char *v = c->precision.precision;
    const char *dot = strchr(v, '.');
    int in = dot ? part_dtype(v, (size_t)(dot - v)) : -1;
    int model = dot ? part_dtype(dot + 1, strlen(dot + 1)) : -1;
    if (in < 0 || model < 0)
        return tg_error(TG_ERR_CONFIG,
                        "option 'precision': '%s' is not INPUT.MODEL with each of "
                        "32, 16 or bf16 (32.32, 16.32, 16.16, bf16.bf16)",
                        v);
    out->input = (tg_dtype)in;
    out->model = (tg_dtype)model;
    out->accum = type_option(c->precision.accum, out->model);
    out->first_moment = type_option(c->precision.first_moment, TG_F32);
    out->second_moment = type_option(c->precision.second_moment, TG_F32);
    out->stochastic_rounding = stochastic_rounding(c->precision.stochastic_rounding, out);
    const char *ls = c->precision.loss_scaling;
    out->loss_scaling = !strcmp(ls, "dynamic")  ? TG_LOSS_SCALING_DYNAMIC
                        : !strcmp(ls, "static") ? TG_LOSS_SCALING_STATIC
                                                : TG_LOSS_SCALING_NONE;
    out->loss_scale =
        out->loss_scaling == TG_LOSS_SCALING_NONE ? 1.0f : (float)c->precision.loss_scale;
    out->growth_interval = c->precision.growth_interval;
    return TG_OK;
}

bool tg_precision_checks_overflow(const tg_precision *pr)
{
    return pr->model != TG_F32 || pr->accum != TG_F32 || pr->first_moment != TG_F32 ||
           pr->second_moment != TG_F32 || pr->loss_scaling != TG_LOSS_SCALING_NONE;
}

static tg_dtype default_storage(const tg_tensor *t, const tg_precision *pr)
{
    if (t->dtype != TG_F32 || tg_numel(t) <= 1)
        return t->dtype; /* integers, bytes, and scalars such as losses */
    switch (t->role) {
    case TG_ROLE_INPUT:
        return pr->input;
    case TG_ROLE_PARAM:
    case TG_ROLE_ACTIVATION:
    case TG_ROLE_GRADIENT:
        return pr->model;
    default:
        return t->dtype; /* constants, running statistics; moments below */
    }
}

void tg_precision_assign(const tg_graph *g, const tg_precision *pr, tg_dtype *storage)
{
    for (int i = 0; i < g->n_nodes; i++)
        storage[i] = default_storage(g->nodes[i], pr);
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *u = g->nodes[i];
        if (!tg_is_weight_update(u) || u->n_mutated < 2)
            continue; /* no state */
        /* SGD(param, momentum, grad), ADAM(param, exp_avg, exp_avg_sq, grad):
         * the mutated inputs after the parameter are its moments in order */
        storage[u->in[1]->id] = pr->first_moment;
        if (u->n_mutated > 2)
            storage[u->in[2]->id] = pr->second_moment;
    }
    /* an alias is stored as its root */
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->flags & TG_NODE_ALIAS)
            storage[i] = storage[g->nodes[i]->in[0]->id];
}

/* "32", "16" or "bf16": the precision option's spelling of a storage type */
static const char *part_name(tg_dtype t)
{
    return t == TG_F16 ? "16" : t == TG_BF16 ? "bf16" : "32";
}

const char *tg_precision_describe(const tg_precision *pr, char *buf, size_t cap)
{
    bool half_state = pr->model != TG_F32 || pr->accum != TG_F32 || pr->first_moment != TG_F32 ||
                      pr->second_moment != TG_F32;
    const char *scaling = pr->loss_scaling == TG_LOSS_SCALING_DYNAMIC  ? "dynamic loss scaling"
                          : pr->loss_scaling == TG_LOSS_SCALING_STATIC ? "static loss scaling"
                                                                       : "no loss scaling";
    snprintf(buf, cap, "%s.%s (accumulators %s, moments %s %s)%s, %s", part_name(pr->input),
             part_name(pr->model), tg_dtype_name(pr->accum), tg_dtype_name(pr->first_moment),
             tg_dtype_name(pr->second_moment),
             !half_state               ? ""
             : pr->stochastic_rounding ? ", half updates rounded stochastically"
                                       : ", half updates rounded to nearest",
             scaling);
    return buf;
}
