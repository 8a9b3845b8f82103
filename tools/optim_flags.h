/* tools/optim_flags.h - the optimizer and learning-rate flags, shared by
 * `train` and `compile`: one table, so the two commands take the same flags
 * with the same defaults, and a program `compile --save-executable` writes
 * is the one `train --executable` builds (the optimizer's settings are part
 * of the graph, docs/executable-cache.md). */
#ifndef TG_TOOLS_OPTIM_FLAGS_H
#define TG_TOOLS_OPTIM_FLAGS_H

#include "cli.h"

#include "tilegraph/optim.h"

typedef struct optim_args {
    const char *optimizer, *schedule; /* NULL optimizer: the task's default */
    double lr, momentum, weight_decay, gamma, min_lr, warmup_epochs, max_grad_norm;
    int64_t step_epochs;
    bool nesterov, no_bias_correction;
} optim_args;

void optim_args_defaults(optim_args *a);

/* Fill `flags` (room for OPTIM_FLAG_COUNT) with flags that write into a. */
#define OPTIM_FLAG_COUNT 12
int optim_flags(optim_args *a, cli_flag *flags);

/* What a run that does not say trains with: the image tutorials' SGD, and
 * for a language model Adam at a rate a small transformer takes without
 * collapsing onto the unigram distribution (3e-3 does, on gpt-tiny). */
void optim_task_defaults(optim_args *a, bool language_model);

/* The optimizer these flags describe, for `epochs` epochs of
 * updates_per_epoch weight updates (the step and cosine schedules and the
 * warm-up count updates). Prints the error ("tilegraph COMMAND: ...") and
 * returns -1 on a bad combination. */
int optim_make(const optim_args *a, const char *command, int64_t epochs, int64_t updates_per_epoch,
               tg_optimizer *opt);

/* Whether the learning rate depends on the length of an epoch. */
bool optim_needs_epoch_length(const optim_args *a);

#endif
