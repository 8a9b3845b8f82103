/* ops/optim_params.h - how an optimizer's settings are stored in the params
 * of its update nodes (SGD_UPDATE, ADAM_UPDATE), shared by the builder
 * (graph/optim.c) and the kernels (ops/optim.c) so the layout lives in one
 * place. Each update node carries the whole tg_optimizer, so a kernel needs
 * nothing but its node and the session's step counter.
 */
#ifndef TG_OPS_OPTIM_PARAMS_H
#define TG_OPS_OPTIM_PARAMS_H

#include "graph/node.h"
#include "tilegraph/optim.h"

enum {
    TG_OPTP_KIND = 0,        /* i: tg_optimizer_kind */
    TG_OPTP_LR_KIND = 1,     /* i: tg_lr_kind */
    TG_OPTP_STEP_SIZE = 2,   /* i */
    TG_OPTP_TOTAL_STEPS = 3, /* i */
    TG_OPTP_NESTEROV = 4,    /* i: 0 or 1 */
    TG_OPTP_WARMUP = 5,      /* i: warm-up updates */
};

enum {
    TG_OPTP_LR = 0,           /* f */
    TG_OPTP_GAMMA = 1,        /* f */
    TG_OPTP_MIN_LR = 2,       /* f */
    TG_OPTP_WEIGHT_DECAY = 3, /* f */
    TG_OPTP_MOMENTUM = 4,     /* f: SGD momentum, Adam beta1 */
    TG_OPTP_DAMPENING = 5,    /* f: SGD dampening, Adam beta2 */
    TG_OPTP_EPS = 6,          /* f */
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
    if (sgd) {
        o.momentum = p->f[TG_OPTP_MOMENTUM];
        o.dampening = p->f[TG_OPTP_DAMPENING];
        o.nesterov = p->i[TG_OPTP_NESTEROV] != 0;
    } else {
        o.beta1 = p->f[TG_OPTP_MOMENTUM];
        o.beta2 = p->f[TG_OPTP_DAMPENING];
        o.eps = p->f[TG_OPTP_EPS];
    }
    return o;
}

#endif
