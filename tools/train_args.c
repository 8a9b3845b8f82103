/* tools/train_args.c - `tilegraph train`'s flags: the table (with the
 * optimizer's, the data's and the devices' flags appended), the checks of
 * flags that cannot apply, the outputs probed before any work, and the
 * options the command's own flags set. */
#include "train_cmd.h"

#include "tilegraph/devices.h"
#include "tilegraph/files.h"
#include "tilegraph/trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A language model trains for enough epochs that gpt-tiny on GPL-3 passes
 * 2.5 bits per byte; the optimizer's defaults are optim_task_defaults'. */
#define LM_EPOCHS 20
#define LM_EPOCHS_TEXT "20"

void train_task_defaults(train_args *a, bool lm)
{
    if (a->epochs < 0)
        a->epochs = lm ? LM_EPOCHS : 1;
    optim_task_defaults(&a->opt, lm);
}

int train_parse_args(train_args *a, int argc, char **argv)
{
    *a = (train_args){.model = CLI_DEFAULT_MODEL,
                      .epochs = -1, /* not given: task_defaults */
                      .batch = CLI_DEFAULT_BATCH,
                      .eval_batch = 500,
                      .return_period = -1};
    optim_args_defaults(&a->opt);
    device_args_defaults(&a->dev);
    data_args_defaults(&a->data);
    char target_help[160];
    cli_flag flags[96] = {
        /* room for the data and device flags appended below */
        {"--model", CLI_STRING, &a->model, "NAME",
         "model from the zoo (tilegraph models) or an ONNX file (FILE.onnx)", 1, 0, NULL},
        {"--epochs", CLI_INT, &a->epochs, "N", "passes over the training set", 1, 10000,
         "1; language models " LM_EPOCHS_TEXT},
        {"--batch-size", CLI_INT, &a->batch, "N", "samples per micro-batch", 1, 65536, NULL},
        {"--eval-batch-size", CLI_INT, &a->eval_batch, "N", "samples per evaluation step", 1, 65536,
         NULL},
        {tg_options_flag("randomSeed"), CLI_INT, &a->seed, "N",
         "random seed (initialisation, shuffling, dropout)", 0, 9e18, NULL},
        {"--train-limit", CLI_INT, &a->train_limit, "N",
         "use only the first N training samples (0: all)", 0, 1e9, NULL},
        {"--test-limit", CLI_INT, &a->test_limit, "N", "use only the first N test samples (0: all)",
         0, 1e9, NULL},
        {"--load", CLI_STRING, &a->load, "FILE", "start from this checkpoint (.safetensors)", 1, 0,
         NULL},
        {"--save", CLI_STRING, &a->save, "FILE", "write a checkpoint here at the end", 1, 0, NULL},
        {"--checkpoint-every", CLI_STRING, &a->checkpoint_every, "N|Ne",
         "also write --save every N host steps (Ne: every N epochs), and when stopped by a signal",
         1, 0, NULL},
        {"--resume", CLI_STRING, &a->resume, "FILE",
         "continue the run that wrote this checkpoint, bit for bit (same flags)", 1, 0, NULL},
        {"--max-steps", CLI_INT, &a->max_steps, "N",
         "stop once the run has done N host steps in all (those before --resume count), as "
         "Ctrl-C would but exit 0 (0: no limit)",
         0, 9e18, NULL},
        {"--resume-weights-only", CLI_BOOL, &a->resume_weights_only, NULL,
         "--resume a run under another optimizer, schedule or precision: its weights and "
         "position, not its optimizer state (which starts afresh)",
         1, 0, NULL},
        {"--allow-non-finite", CLI_BOOL, &a->allow_non_finite, NULL,
         "--load/--resume: accept a checkpoint holding NaN or infinity", 1, 0, NULL},
        {"--json", CLI_BOOL, &a->json, NULL, "print one JSON object per epoch instead of text", 1,
         0, NULL},
        {"--quiet", CLI_BOOL, &a->quiet, NULL, "no progress bars", 1, 0, NULL},
        {tg_options_flag("target"), CLI_STRING, &a->target, "NAME",
         cli_target_help(target_help, sizeof target_help), 1, 0, "cpu"},
        {tg_options_flag("outputReturnPeriod"), CLI_INT, &a->return_period, "N",
         "--output-mode everyN: return every N-th iteration's outputs", 1, 1e6, NULL},
    };
    int n = 0;
    while (flags[n].name)
        n++;
    n += optim_flags(&a->opt, flags + n);
    n += data_flags(&a->data, flags + n);
    n += device_flags(&a->dev, flags + n, (int)(sizeof flags / sizeof flags[0]) - n);
    cli_command cmd = {
        "train",
        "Train a model from the zoo and report its test accuracy.",
        "tilegraph train [--model NAME] [--epochs N] [--batch-size N] [options]",
        "--batch-size is the micro-batch: one host step takes batch x "
        "gradient-accumulation x device-iterations x replicas samples.\n\n"
        "Examples:\n"
        "  tilegraph train --model fashion-basic --optimizer sgd --lr 0.05 "
        "--batch-size 16 --epochs 5\n"
        "  tilegraph train --model mnist-pipeline --strategy pipelined --batch-size 40 "
        "--gradient-accumulation 10 --device-iterations 10 --optimizer adamw --lr 0.001",
        flags,
        n};
    int r = cli_parse(&cmd, argc, argv);
    *device_int(&a->dev, "randomSeed") = a->seed;
    return r;
}

/* "N" host steps or "Ne" epochs, N >= 1. */
static int parse_every(const char *text, int64_t *steps, int64_t *epochs)
{
    char *end = NULL;
    errno = 0;
    long long n = strtoll(text, &end, 10);
    bool epochs_unit = end && *end == 'e' && end[1] == '\0';
    if (errno || end == text || n < 1 || (*end && !epochs_unit) || text[0] == '-' ||
        text[0] == '+' || text[0] == ' ')
        return -1;
    *(epochs_unit ? epochs : steps) = n;
    return 0;
}

/* Flags that cannot apply are errors, not ignored. */
int train_check_args(train_args *a)
{
    const char *bad = NULL;
    if (a->checkpoint_every && parse_every(a->checkpoint_every, &a->every_steps, &a->every_epochs))
        bad = "--checkpoint-every takes N (host steps) or Ne (epochs), N >= 1: 500 or 2e";
    else if (a->checkpoint_every && !a->save)
        bad = "--checkpoint-every needs --save FILE: the checkpoint is written there";
    else if (a->resume && a->load)
        bad = "--resume and --load both give the starting weights: use one (--resume also "
              "continues the step count and the data position)";
    else if (a->resume_weights_only && !a->resume)
        bad = "--resume-weights-only applies to --resume FILE (--load takes weights only "
              "anyway)";
    if (bad) {
        fprintf(stderr, "tilegraph train: %s\n", bad);
        return -1;
    }
    return 0;
}

/* Outputs are checked before any work: a missing directory or read-only
 * mount found after an hour of training would lose the hour. */
int train_probe_outputs(const train_args *a)
{
    tg_status st = TG_OK;
    if (a->save)
        st = tg_probe_writable("--save", a->save);
    char b1[32], b2[32];
    const char *profile_dir = device_given(&a->dev, "autoReport.directory", b1, sizeof b1);
    if (st == TG_OK && profile_dir)
        st = tg_probe_writable_dir("--profile-dir", profile_dir);
    else if (st == TG_OK && device_given(&a->dev, "autoReport.all", b2, sizeof b2))
        st = tg_probe_writable_dir("--profile", "./profile");
    const char *trace_dir = tg_trace_directory();
    if (st == TG_OK && trace_dir)
        st = tg_probe_writable_dir("host trace directory", trace_dir);
    if (st != TG_OK) {
        fprintf(stderr, "tilegraph train: %s (nothing was trained)\n", tg_error_message());
        return -1;
    }
    return 0;
}

/* The checkpoints the run starts from (--load, --resume) can be opened:
 * checked before the data are read and the model compiled (which take
 * seconds to minutes for a large model), not after (issue 46, row 15). */
int train_probe_inputs(const train_args *a)
{
    const char *what[2] = {"--load", "--resume"}, *path[2] = {a->load, a->resume};
    for (int i = 0; i < 2; i++) {
        FILE *f = NULL;
        if (!path[i])
            continue;
        if (tg_fopen_regular(path[i], &f) != TG_OK) {
            fprintf(stderr, "tilegraph train: %s: %s (nothing was trained)\n", what[i],
                    tg_error_message());
            return -1;
        }
        fclose(f);
    }
    return 0;
}

/* --target and --output-return-period: the options target and
 * outputReturnPeriod, over --engine-option and --options. A return period
 * without --output-mode everyN would be ignored, so it is an error. */
int train_apply_options(const train_args *a, tg_options *o)
{
    if (a->target &&
        (tg_target_check(a->target) != TG_OK || tg_options_set(o, "target", a->target) != TG_OK)) {
        fprintf(stderr, "tilegraph train: --target: %s\n", tg_error_message());
        return -1;
    }
    return device_return_period(o, "train", a->return_period);
}
