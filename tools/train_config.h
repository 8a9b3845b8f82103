/* tools/train_config.h - the training configuration a checkpoint records
 * (safetensors metadata "train_config") and `train --resume` compares: the
 * optimizer, its learning rate and schedule, and the precision and loss
 * scaling. A run continued under another one would not be the run it
 * claims to continue (Adam started from zero moments at step 100 has the
 * wrong bias correction; bf16 weights read as 32.32 train another model). */
#ifndef TG_TOOLS_TRAIN_CONFIG_H
#define TG_TOOLS_TRAIN_CONFIG_H

#include "tilegraph/optim.h"
#include "tilegraph/options.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TRAIN_CONFIG_KEY "train_config"
#define TRAIN_CONFIG_CAP 1024

/* The configuration as "--flag=value;--flag=value", each entry named by the
 * flag that sets it (so a refusal names what to give); only the entries
 * that apply (--lr-gamma with a step schedule, --loss-scale with loss
 * scaling). `epochs` enters for a cosine schedule, whose length it is. */
void train_config_text(const tg_optimizer *opt, const tg_options_summary *sum, int64_t epochs,
                       double warmup_epochs, int64_t step_epochs, char *buf, size_t cap);

/* Compare a checkpoint's recorded configuration `had` with this run's
 * `now`. Returns the number of differences and writes them, "--optimizer
 * sgd there, adam here; ..." into diff. */
int train_config_diff(const char *had, const char *now, char *diff, size_t cap);

/* --resume PATH: its recorded configuration must be `config`; with
 * weights_only another one is accepted, said, and *flags gains
 * TG_CHECKPOINT_WEIGHTS_ONLY. A checkpoint without the record is taken as
 * it is, with a note. Returns 0, or -1 after printing the differences. */
int train_config_check_resume(const char *path, const char *config, bool weights_only,
                              unsigned *flags);

#endif
