/* tilegraph/optim.h - optimizers and learning-rate schedules.
 *
 * An optimizer is built into the graph like everything else: after
 * tg_graph_backward, tg_graph_add_optimizer appends, for every parameter with
 * a gradient, the state tensors it needs and one update op that rewrites the
 * parameter in place. The update ops read the session's update counter
 * (`step`, the number of updates already done), from which the schedule gives
 * the learning rate and Adam its bias correction. Semantics follow PyTorch's
 * torch.optim.SGD, Adam and AdamW exactly, so results are comparable; LAMB
 * follows poptorch.optim.LAMB (PyTorch has none), and bias_correction and
 * max_grad_norm mean what they mean in poptorch.optim.
 *
 * State tensors are named after the parameter the way PyTorch names optimizer
 * state: "<param>/momentum_buffer", "<param>/exp_avg", "<param>/exp_avg_sq"
 * (LAMB keeps Adam's two moments under Adam's names).
 */
#ifndef TILEGRAPH_OPTIM_H
#define TILEGRAPH_OPTIM_H

#include "tilegraph/export.h"

#include "tilegraph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tg_lr_kind {
    TG_LR_CONSTANT, /* lr */
    TG_LR_STEP,     /* lr * gamma^floor(step / step_size) */
    TG_LR_COSINE,   /* min_lr + (lr - min_lr) * (1 + cos(pi * min(step, total) / total)) / 2 */
} tg_lr_kind;
/* (Each kind may be preceded by a linear warm-up: warmup_steps below.) */

typedef struct tg_lr_schedule {
    tg_lr_kind kind;
    float lr;
    int64_t step_size;   /* TG_LR_STEP: updates between decays */
    float gamma;         /* TG_LR_STEP: decay factor */
    int64_t total_steps; /* TG_LR_COSINE: updates over which to anneal */
    float min_lr;        /* TG_LR_COSINE: final learning rate */
    /* Any kind: over the first warmup_steps updates the rate rises linearly,
     * scaled by (step + 1) / warmup_steps (0: no warm-up). */
    int64_t warmup_steps;
} tg_lr_schedule;

typedef enum tg_optimizer_kind {
    TG_OPT_SGD,
    TG_OPT_ADAM,
    TG_OPT_ADAMW,
    /* Adam's moments, then a per-parameter trust ratio (poptorch.optim.LAMB):
     *   r = m_hat / (sqrt(v_hat) + eps) + weight_decay * w
     *   w -= lr * (||w|| / ||r||) * r     (ratio 1 when either norm is 0) */
    TG_OPT_LAMB,
} tg_optimizer_kind;

typedef struct tg_optimizer {
    tg_optimizer_kind kind;
    tg_lr_schedule lr;
    float weight_decay; /* SGD/Adam: added to the gradient; AdamW: decoupled */
    /* SGD */
    float momentum, dampening;
    bool nesterov;
    /* Adam, AdamW, LAMB */
    float beta1, beta2, eps;
    /* Divide the moments by 1 - beta^t (PyTorch's Adam always does). The
     * constructors set it; a zero-initialised struct has it off. */
    bool bias_correction;
    /* LAMB: ||w|| in the trust ratio is clipped to this (0 or inf: no clip). */
    float max_weight_norm;
    /* Any kind: before the updates, scale every gradient by
     * max_grad_norm / (total_norm + 1e-6) when that is below 1, total_norm
     * being the norm over ALL parameters' gradients (after the replicas'
     * all-reduce and the loss-scale unscale, over every pipeline stage) as
     * torch.nn.utils.clip_grad_norm_. 0 or inf: off. */
    float max_grad_norm;
} tg_optimizer;

/* PyTorch's defaults: SGD(momentum=0), Adam(betas=(0.9, 0.999), eps=1e-8),
 * AdamW(the same, weight_decay=0.01); PopTorch's LAMB(betas=(0.9, 0.999),
 * eps=1e-8, weight_decay=0.01). Bias correction on, no clipping, constant
 * learning rate. */
TG_API tg_optimizer tg_optimizer_sgd(float lr, float momentum);
TG_API tg_optimizer tg_optimizer_adam(float lr);
TG_API tg_optimizer tg_optimizer_adamw(float lr);
TG_API tg_optimizer tg_optimizer_lamb(float lr);

/* Learning rate for the update with index `step` (0 for the first). */
TG_API float tg_lr_at(const tg_lr_schedule *s, int64_t step);
/* "sgd", "adam", "adamw", "lamb" (any case) into *out; TG_ERR_INVALID_ARG,
 * naming them, for anything else (*out unchanged). */
TG_API tg_status tg_optimizer_parse(const char *name, tg_optimizer_kind *out);
TG_API const char *tg_optimizer_name(tg_optimizer_kind k);

/* Check the settings (a clear error naming a bad one: negative lr, momentum
 * outside [0, 1), nesterov without momentum, betas outside [0, 1), a
 * negative or NaN max_grad_norm, max_weight_norm on another kind than LAMB). */
TG_API tg_status tg_optimizer_validate(const tg_optimizer *opt);

/* Append state and update ops for every parameter that has a gradient. */
TG_API tg_status tg_graph_add_optimizer(tg_graph *g, const tg_optimizer *opt);

/* The same with settings per parameter, as PyTorch's parameter groups:
 * parameter names[i] (its graph name) is updated with opts[group[i]], a
 * parameter with a gradient that no name lists with opts[0]. The groups may
 * differ in anything an update carries (lr and its schedule, weight_decay,
 * momentum, dampening, nesterov, betas, eps, bias_correction,
 * max_weight_norm); the kind and max_grad_norm (clipping is over every
 * gradient at once) must be the same in all. A name that is not a
 * parameter, or a group index out of range, fails naming it; a listed
 * parameter without a gradient (unused by the loss) gets no update. */
TG_API tg_status tg_graph_add_optimizer_groups(tg_graph *g, const tg_optimizer *opts, int n_opts,
                                               const char *const *names, const int *group,
                                               int n_names);

#ifdef __cplusplus
}
#endif
#endif
