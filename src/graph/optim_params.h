/* graph/optim_params.h - how an optimizer's settings are stored in the params
 * of its update nodes (SGD_UPDATE, ADAM_UPDATE for Adam, AdamW and LAMB), shared by the builder
 * (graph/optim.c) and the kernels (ops/optim.c) so the layout lives in one
 * place. Each update node carries the whole tg_optimizer, so a kernel needs
 * nothing but its node and the session's step counter.
 */
#ifndef TG_GRAPH_OPTIM_PARAMS_H
#define TG_GRAPH_OPTIM_PARAMS_H

#include "graph/node.h"
#include "tilegraph/optim.h"

#include <math.h>
#include <string.h>

enum {
    TG_OPTP_KIND = 0,        /* i: tg_optimizer_kind */
    TG_OPTP_LR_KIND = 1,     /* i: tg_lr_kind */
    TG_OPTP_STEP_SIZE = 2,   /* i */
    TG_OPTP_TOTAL_STEPS = 3, /* i */
    TG_OPTP_NESTEROV = 4,    /* i: 0 or 1 */
    TG_OPTP_WARMUP = 5,      /* i: warm-up updates */
    TG_OPTP_BIAS_CORR = 6,   /* i: 0 or 1 */
    TG_OPTP_MAX_WNORM = 7,   /* i: LAMB max_weight_norm, a float's bits (the f slots are full) */
};

enum {
    TG_OPTP_LR = 0,           /* f */
    TG_OPTP_GAMMA = 1,        /* f */
    TG_OPTP_MIN_LR = 2,       /* f */
    TG_OPTP_WEIGHT_DECAY = 3, /* f */
    TG_OPTP_MOMENTUM = 4,     /* f: SGD momentum, Adam beta1 */
    TG_OPTP_DAMPENING = 5,    /* f: SGD dampening, Adam beta2 */
    TG_OPTP_EPS = 6,          /* f */
    TG_OPTP_MAX_GNORM = 7,    /* f: max_grad_norm */
};

static inline tg_node_params tg_optim_params_put(const tg_optimizer *o)
{
    tg_node_params p = {{0}, {0}};
    bool sgd = o->kind == TG_OPT_SGD;
    p.i[TG_OPTP_KIND] = o->kind;
    p.i[TG_OPTP_LR_KIND] = o->lr.kind;
    p.i[TG_OPTP_STEP_SIZE] = o->lr.step_size;
    p.i[TG_OPTP_TOTAL_STEPS] = o->lr.total_steps;
    p.i[TG_OPTP_NESTEROV] = sgd && o->nesterov;
    p.i[TG_OPTP_WARMUP] = o->lr.warmup_steps;
    p.f[TG_OPTP_LR] = o->lr.lr;
    p.f[TG_OPTP_GAMMA] = o->lr.gamma;
    p.f[TG_OPTP_MIN_LR] = o->lr.min_lr;
    p.f[TG_OPTP_WEIGHT_DECAY] = o->weight_decay;
    p.f[TG_OPTP_MOMENTUM] = sgd ? o->momentum : o->beta1;
    p.f[TG_OPTP_DAMPENING] = sgd ? o->dampening : o->beta2;
    p.f[TG_OPTP_EPS] = sgd ? 0.0f : o->eps;
    p.f[TG_OPTP_MAX_GNORM] = o->max_grad_norm;
    p.i[TG_OPTP_BIAS_CORR] = !sgd && o->bias_correction;
    uint32_t bits;
    memcpy(&bits, &o->max_weight_norm, sizeof bits);
    p.i[TG_OPTP_MAX_WNORM] = bits;
    return p;
}

static inline tg_optimizer tg_optim_params_get(const tg_node_params *p)
{
    tg_optimizer o = {0};
    o.kind = (tg_optimizer_kind)p->i[TG_OPTP_KIND];
    bool sgd = o.kind == TG_OPT_SGD;
    o.lr.kind = (tg_lr_kind)p->i[TG_OPTP_LR_KIND];
    o.lr.step_size = p->i[TG_OPTP_STEP_SIZE];
    o.lr.total_steps = p->i[TG_OPTP_TOTAL_STEPS];
    o.lr.warmup_steps = p->i[TG_OPTP_WARMUP];
    o.lr.lr = p->f[TG_OPTP_LR];
    o.lr.gamma = p->f[TG_OPTP_GAMMA];
    o.lr.min_lr = p->f[TG_OPTP_MIN_LR];
    o.weight_decay = p->f[TG_OPTP_WEIGHT_DECAY];
    o.max_grad_norm = p->f[TG_OPTP_MAX_GNORM];
    uint32_t bits = (uint32_t)p->i[TG_OPTP_MAX_WNORM];
    memcpy(&o.max_weight_norm, &bits, sizeof bits);
    if (sgd) {
        o.momentum = p->f[TG_OPTP_MOMENTUM];
        o.dampening = p->f[TG_OPTP_DAMPENING];
        o.nesterov = p->i[TG_OPTP_NESTEROV] != 0;
    } else {
        o.beta1 = p->f[TG_OPTP_MOMENTUM];
        o.beta2 = p->f[TG_OPTP_DAMPENING];
        o.eps = p->f[TG_OPTP_EPS];
        o.bias_correction = p->i[TG_OPTP_BIAS_CORR] != 0;
    }
    return o;
}

/* torch.nn.utils.clip_grad_norm_'s factor for the gradients whose global
 * norm is total_norm: max_norm / (total_norm + 1e-6), at most 1; exactly 1
 * when clipping is off (max_norm 0 or inf). */
static inline float tg_grad_clip_factor(double total_norm, float max_norm)
{
    if (!(max_norm > 0) || max_norm == INFINITY)
        return 1.0f;
    double coef = (double)max_norm / (total_norm + 1e-6);
    return coef < 1.0 ? (float)coef : 1.0f;
}

#endif
