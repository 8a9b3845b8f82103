/* tools/optim_flags.c - the optimizer and learning-rate flags of `train`
 * and `compile` (optim_flags.h). */
#include "optim_flags.h"

#include <string.h>

#define LM_LR 1e-3
#define LM_LR_TEXT "0.001"
#define IMAGE_LR 0.05

void optim_args_defaults(optim_args *a)
{
    memset(a, 0, sizeof *a);
    a->schedule = "constant";
    a->lr = -1; /* not given: optim_task_defaults */
    a->weight_decay = -1;
    a->gamma = 0.1;
    a->step_epochs = 1;
}

int optim_flags(optim_args *a, cli_flag *f)
{
    cli_flag list[OPTIM_FLAG_COUNT] = {
        {"--optimizer", CLI_STRING, &a->optimizer, "NAME", "sgd, adam, adamw or lamb", 1, 0,
         "sgd; language models adam"},
        {"--lr", CLI_FLOAT, &a->lr, "X", "learning rate", 0, 1e3,
         "0.05; language models " LM_LR_TEXT},
        {"--momentum", CLI_FLOAT, &a->momentum, "X", "SGD momentum", 0, 0.999999, NULL},
        {"--nesterov", CLI_BOOL, &a->nesterov, NULL, "Nesterov momentum (SGD)", 1, 0, NULL},
        {"--weight-decay", CLI_FLOAT, &a->weight_decay, "X", "weight decay", -1, 1e3,
         "0; AdamW and LAMB 0.01"},
        {"--max-grad-norm", CLI_FLOAT, &a->max_grad_norm, "X",
         "clip the gradients by their global norm, as clip_grad_norm_ (0: off)", 0, 1e30, NULL},
        {"--no-bias-correction", CLI_BOOL, &a->no_bias_correction, NULL,
         "Adam, AdamW, LAMB: no 1 - beta^t division of the moments", 1, 0, NULL},
        {"--lr-schedule", CLI_STRING, &a->schedule, "KIND", "constant, step or cosine", 1, 0, NULL},
        {"--lr-step-epochs", CLI_INT, &a->step_epochs, "N", "step schedule: epochs between decays",
         1, 10000, NULL},
        {"--lr-gamma", CLI_FLOAT, &a->gamma, "X", "step schedule: decay factor", 0, 1, NULL},
        {"--lr-min", CLI_FLOAT, &a->min_lr, "X", "cosine schedule: final learning rate", 0, 1e3,
         NULL},
        {"--lr-warmup-epochs", CLI_FLOAT, &a->warmup_epochs, "X",
         "raise the rate linearly over the first X epochs", 0, 1e4, NULL},
    };
    memcpy(f, list, sizeof list);
    return OPTIM_FLAG_COUNT;
}

void optim_task_defaults(optim_args *a, bool lm)
{
    if (a->lr < 0)
        a->lr = lm ? LM_LR : IMAGE_LR;
    if (!a->optimizer)
        a->optimizer = lm ? "adam" : "sgd";
}

bool optim_needs_epoch_length(const optim_args *a)
{
    return strcmp(a->schedule, "constant") != 0 || a->warmup_epochs > 0;
}

int optim_make(const optim_args *a, const char *command, int64_t epochs, int64_t updates_per_epoch,
               tg_optimizer *opt)
{
    tg_optimizer_kind kind;
    if (tg_optimizer_parse(a->optimizer, &kind) != TG_OK) {
        fprintf(stderr, "tilegraph %s: unknown optimizer '%s' (sgd, adam, adamw or lamb)\n",
                command, a->optimizer);
        return -1;
    }
    *opt = cli_optimizer(kind, (float)a->lr, (float)a->momentum);
    opt->nesterov = a->nesterov;
    opt->max_grad_norm = (float)a->max_grad_norm;
    if (a->no_bias_correction && kind == TG_OPT_SGD) {
        fprintf(stderr,
                "tilegraph %s: --no-bias-correction applies to adam, adamw and lamb, "
                "not to sgd\n",
                command);
        return -1;
    }
    opt->bias_correction = !a->no_bias_correction;
    if (a->weight_decay >= 0)
        opt->weight_decay = (float)a->weight_decay;
    if (!strcmp(a->schedule, "step")) {
        opt->lr.kind = TG_LR_STEP;
        opt->lr.step_size = a->step_epochs * updates_per_epoch;
        opt->lr.gamma = (float)a->gamma;
    } else if (!strcmp(a->schedule, "cosine")) {
        opt->lr.kind = TG_LR_COSINE;
        opt->lr.total_steps = epochs * updates_per_epoch;
        opt->lr.min_lr = (float)a->min_lr;
    } else if (strcmp(a->schedule, "constant")) {
        fprintf(stderr, "tilegraph %s: unknown --lr-schedule '%s' (constant, step or cosine)\n",
                command, a->schedule);
        return -1;
    }
    opt->lr.warmup_steps = (int64_t)(a->warmup_epochs * (double)updates_per_epoch);
    if (tg_optimizer_validate(opt) != TG_OK) {
        fprintf(stderr, "tilegraph %s: %s\n", command, tg_error_message());
        return -1;
    }
    return 0;
}
