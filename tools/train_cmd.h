/* tools/train_cmd.h - the parts of `tilegraph train`: its flags and their
 * checks (train_args.c), the run (cmd_train.c) and what it prints
 * (train_print.c). Only these three files include it. */
#ifndef TG_TOOLS_TRAIN_CMD_H
#define TG_TOOLS_TRAIN_CMD_H

#include "cli.h"
#include "device_flags.h"
#include "optim_flags.h"
#include "train_config.h"
#include "train_exchange.h"
#include "train_util.h"

typedef struct train_args {
    const char *model, *save, *load, *target;
    const char *checkpoint_every, *resume; /* docs/reliability.md */
    int64_t return_period;                 /* --output-return-period; -1: not given */
    int64_t epochs, batch, eval_batch, seed, train_limit, test_limit, max_steps;
    bool json, quiet, allow_non_finite, resume_weights_only;
    optim_args opt;
    device_args dev;
    data_args data;
    /* --checkpoint-every, parsed: every N host steps, or every N epochs */
    int64_t every_steps, every_epochs;
    /* a language model: tokens per sample and what a token is ("byte",
     * "char"), for the perplexity and bits per token of the epoch lines */
    int seq_len;
    const char *unit;
    char *vocab; /* the checkpoint's record of the tokens: "byte", or "char:" and code points */
    char text_hash[48];            /* the text's tokens hashed, which --resume must find the same */
    char config[TRAIN_CONFIG_CAP]; /* the training configuration, for the checkpoint */
} train_args;

typedef struct epoch_stats {
    double loss_sum, seconds;
    int64_t correct, scored, losses, seen, steps;
    int64_t skipped;         /* updates skipped for overflowing gradients (loss scaling) */
    float loss_scale;        /* at the end of the epoch */
    const char *auto_stages; /* the split --stages/--split auto chose, "" if given */
    train_exchange exchange; /* in an MPI job: the gradient exchange's times */
    exchange_share share;    /* and its share of the host step, once the epoch ended */
} epoch_stats;

/* Where the run is: the next host step is `step` of epoch `epoch`, and
 * `done` host steps ran in this process. */
typedef struct train_pos {
    int64_t epoch, step, done;
    int64_t per_step; /* samples per host step, recorded for --resume */
    int stop;         /* the signal that stopped the run, -1 for --max-steps, 0 none */
    int job_signal;   /* in an MPI job: the stop signal the instances agreed on, 0 none */
    const char *model;
} train_pos;

/* ---- train_args.c: the flags ------------------------------------------------ */

/* Parse argv into a (its defaults first): 0, 1 after --help, -1 on an error
 * (printed). */
int train_parse_args(train_args *a, int argc, char **argv);
/* Flags that cannot apply (or combine) are errors, printed: -1. */
int train_check_args(train_args *a);
/* The defaults that depend on the task: a language model (lm) or not. */
void train_task_defaults(train_args *a, bool lm);
/* Outputs (--save, the profile and trace directories) writable, or -1 after
 * printing why: checked before any work. */
int train_probe_outputs(const train_args *a);
/* Inputs (--load, --resume) readable, or -1 after printing why: checked
 * before the data are read and the model compiled. */
int train_probe_inputs(const train_args *a);
/* --target and --output-return-period onto o; -1 after printing the error. */
int train_apply_options(const train_args *a, tg_options *o);

/* ---- train_print.c: what the run prints ------------------------------------- */

void train_print_epoch(const train_args *a, int64_t epoch, const epoch_stats *st,
                       const eval_result *test);
void train_say_nothing_left(const train_args *a, const train_pos *pos);
void train_print_resumed_json(const train_args *a, const train_pos *pos, const eval_result *test);
void train_print_profiles(const train_args *a, const char *job_dir, int failed);
/* The run's last lines: the test figures, the training throughput, --save. */
void train_print_result(const train_args *a, const eval_result *test, int64_t samples,
                        double seconds);
/* A failed step or evaluation, with what to try when the run diverged. */
void train_explain_failure(const train_args *a, tg_status st);

#endif
