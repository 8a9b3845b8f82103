/* tools/cli.h - shared pieces of the `tilegraph` command: flag tables,
 * progress bars, number formatting, and the subcommands' entry points. */
#ifndef TG_TOOLS_CLI_H
#define TG_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tilegraph/optim.h"
#include "tilegraph/status.h"

/* Evaluate a call returning tg_status and return it from the caller on
 * failure (its message stays in tg_error_message()). */
#define CLI_TRY(expr)                                                                              \
    do {                                                                                           \
        tg_status cli_try_s_ = (expr);                                                             \
        if (cli_try_s_ != TG_OK)                                                                   \
            return cli_try_s_;                                                                     \
    } while (0)

/* ---- flags ------------------------------------------------------------------- */

/* CLI_LIST: a flag that may be given several times; each value is appended,
 * comma-separated, to a char[CLI_LIST_CAP] buffer. */
typedef enum { CLI_INT, CLI_FLOAT, CLI_STRING, CLI_BOOL, CLI_LIST } cli_type;
#define CLI_LIST_CAP 2048

typedef struct cli_flag {
    const char *name; /* "--epochs" */
    cli_type type;
    void *value;     /* int64_t*, double*, const char**, bool*, char[CLI_LIST_CAP] */
    const char *arg; /* placeholder in help: "N" */
    const char *help;
    double min, max; /* CLI_INT / CLI_FLOAT limits (min > max: none) */
    /* The default as --help shows it, when the value's own does not say it
     * (a negative or NULL value meaning "decided later"): "0.05; language
     * models 0.001". Help texts never write "(default ...)" themselves:
     * cli_print_help adds it, once, from here or from the value. */
    const char *def;
} cli_flag;

/* The help of a flag only a training program reads (an update, a loss, an
 * optimizer, augmentation) begins with CLI_TRAINING: CLI_TRAINING "micro-
 * batches per weight update". A command that builds inference programs
 * only parses with cli_parse_inference, which leaves such flags out of its
 * --help and refuses one given by name: the flag table says it once. */
#define CLI_TRAINING "training: "
bool cli_flag_training_only(const cli_flag *f);

typedef struct cli_command {
    const char *name;    /* "train" */
    const char *summary; /* one line */
    const char *usage;   /* "tilegraph train [options]" */
    const char *details; /* paragraph after the flags, or NULL */
    cli_flag *flags;
    int n_flags;
} cli_command;

/* Parse argv (after the subcommand name). Returns 0 on success, 1 if --help
 * was printed, -1 on an error (printed to stderr, naming the flag). */
int cli_parse(const cli_command *cmd, int argc, char **argv);
/* cli_parse for a command that runs inference programs only: its --help
 * lists no training-only flag (CLI_TRAINING) and one given is an error. */
int cli_parse_inference(const cli_command *cmd, int argc, char **argv);
void cli_print_help(const cli_command *cmd, FILE *out);

/* The optimizer of `kind` (tg_optimizer_parse: sgd, adam, adamw, lamb) at
 * learning rate lr; momentum is SGD's. */
tg_optimizer cli_optimizer(int kind, float lr, float momentum);

/* The help of a --target flag, from the registered targets: "cpu, mk2 or
 * tiny (`tilegraph devices` describes them)"; returns buf. */
char *cli_target_help(char *buf, size_t cap);

/* ---- output ------------------------------------------------------------------ */

/* "1.5 KiB", "12.0 MiB" */
char *cli_bytes(double bytes, char *buf, size_t cap);
/* "850 ns", "12.3 ms", "4.50 s", "2 min 05 s" */
char *cli_duration(double seconds, char *buf, size_t cap);
double cli_now(void);
/* s as a JSON string on stdout, quotes and backslashes escaped and control
 * characters as \u00XX (model names, CPU models and messages come from
 * outside). */
void cli_json_string(const char *s);

typedef struct cli_progress {
    const char *label;
    int64_t total, done;
    double start, last_draw;
    bool tty, enabled;
    char status[160];
} cli_progress;

void cli_progress_start(cli_progress *p, const char *label, int64_t total, bool enabled);
/* Advance to `done` and show `status` ("loss 0.41 | acc 86.2% | 9.1k samples/s"). */
void cli_progress_update(cli_progress *p, int64_t done, const char *status);
/* Draw the last line at the count reached (not at the total: a stopped run
 * did not get there). */
void cli_progress_finish(cli_progress *p, const char *status);

/* ---- stopping on a signal ------------------------------------------------------- */

/* The signal (SIGINT or SIGTERM) that asked the command to stop, or 0. A
 * command that calls cli_stop_at_step_boundaries() polls this at each host
 * step and stops cleanly (checkpoint, profiles, trace); any other command
 * and a second signal end the process as the signal normally does. */
int cli_stop_signal(void);
void cli_stop_at_step_boundaries(void);
/* In an MPI job, another instance's stop signal that this one stops for too
 * (so that it ends as stopped, not as failed). */
void cli_stop_agreed(int sig);
/* The exit code for a stop by signal `sig`: 128 + sig (130, 143). */
int cli_signal_exit_code(int sig);

/* ---- defaults ------------------------------------------------------------------ */

/* train's model and micro-batch when not given, which compile and infer
 * take too: a program `compile --save-executable` writes with its defaults
 * is the one `train --executable` loads with its own (issue 46 row 19). */
#define CLI_DEFAULT_MODEL "fashion-basic"
#define CLI_DEFAULT_BATCH 16

/* ---- subcommands ---------------------------------------------------------------- */

int cmd_train(int argc, char **argv);
int cmd_infer(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_options(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_analyse(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_monitor(int argc, char **argv);
int cmd_run(int argc, char **argv);

#endif
