/* tilegraph/optim.h - optimizers and learning-rate schedules.
 *
 * An optimizer is built into the graph like everything else: after
 * tg_graph_backward, tg_graph_add_optimizer appends, for every parameter with
 * a gradient, the state tensors it needs and one update op that rewrites the
 * parameter in place. The update ops read the session's update counter
 * (`step`, the number of updates already done), from which the schedule gives
 * the learning rate and Adam its bias correction. Semantics follow PyTorch's
 * torch.optim.SGD, Adam and AdamW exactly, so results are comparable.
 *
 * State tensors are named after the parameter the way PyTorch names optimizer
 * state: "<param>/momentum_buffer", "<param>/exp_avg", "<param>/exp_avg_sq".
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

typedef enum tg_optimizer_kind { TG_OPT_SGD, TG_OPT_ADAM, TG_OPT_ADAMW } tg_optimizer_kind;

typedef struct tg_optimizer {
    tg_optimizer_kind kind;
    tg_lr_schedule lr;
    float weight_decay; /* SGD/Adam: added to the gradient; AdamW: decoupled */
    /* SGD */
    float momentum, dampening;
    bool nesterov;
    /* Adam, AdamW */
    float beta1, beta2, eps;
} tg_optimizer;

/* PyTorch's defaults: SGD(momentum=0), Adam(betas=(0.9, 0.999), eps=1e-8),
 * AdamW(the same, weight_decay=0.01). Constant learning rate. */
TG_API tg_optimizer tg_optimizer_sgd(float lr, float momentum);
TG_API tg_optimizer tg_optimizer_adam(float lr);
TG_API tg_optimizer tg_optimizer_adamw(float lr);

/* Learning rate for the update with index `step` (0 for the first). */
TG_API float tg_lr_at(const tg_lr_schedule *s, int64_t step);
/* "sgd", "adam", "adamw" -> kind; -1 if unknown. */
TG_API int tg_optimizer_parse(const char *name);
TG_API const char *tg_optimizer_name(tg_optimizer_kind k);

/* Check the settings (a clear error naming a bad one: negative lr, momentum
 * outside [0, 1), nesterov without momentum, betas outside [0, 1), ...). */
TG_API tg_status tg_optimizer_validate(const tg_optimizer *opt);

/* Append state and update ops for every parameter that has a gradient. */
TG_API tg_status tg_graph_add_optimizer(tg_graph *g, const tg_optimizer *opt);

#ifdef __cplusplus
}
#endif
#endif
