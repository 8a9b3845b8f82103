/* tools/device_flags.h - the flags that say how a model runs on devices,
 * shared by the commands that train, infer and compile. They set the
 * PopTorch-named options (docs/options.md); --options FILE reads the same
 * options from JSON, and flags given on the command line win over it. */
#ifndef TG_TOOLS_DEVICE_FLAGS_H
#define TG_TOOLS_DEVICE_FLAGS_H

#include "cli.h"

#include "tilegraph/options.h"

/* Room for the option table (tg_options_count(); device_flags aborts,
 * naming this, if the table outgrows it). */
#define DEVICE_OPTIONS_MAX 96
/* An integer flag not given (threadsPerDevice takes -1). */
#define DEVICE_UNSET INT64_MIN

/* What the device flags were given. The flags of options are generated
 * from the option table (core/options.c: name, placeholder, help, default,
 * an integer's range), one per row with a flag, and fill these slots by the
 * option's index; device_options sets each given one. The rest are the
 * commands' own flags, which set several options or none. */
typedef struct device_args {
    int64_t ints[DEVICE_OPTIONS_MAX];      /* integer options; DEVICE_UNSET: not given */
    const char *texts[DEVICE_OPTIONS_MAX]; /* other options, as text; NULL: not given */
    bool switches[DEVICE_OPTIONS_MAX];     /* flags that take no value (--profile): "true" */
    const char *options_file;              /* --options FILE */
    const char *offload; /* "weights,activations,...": TensorLocations.<kind>.onChip=false */
    const char *shard;   /* "weights,optimizer": TensorLocations.<kind>.replicatedTensorSharding */
    char engine_options[CLI_LIST_CAP]; /* "key=value,key=value", from every --engine-option */
    bool offload_optimizer, round_to_nearest; /* --offload-optimizer, --no-stochastic-rounding */
    int64_t eval_iterations;                  /* --eval-device-iterations; -1: not given */
    char help_text[8192]; /* the flags' help with a set's values: "... (one of a|b|c)" */
    size_t help_used;
} device_args;

/* Fill `flags` (room for cap) with flags that write into a; returns their
 * number (a command's table too small for them is an internal error, said
 * on every run). Options whose flag a command lists itself (--seed, --target,
 * --target-description, --output-return-period) are not among them. */
int device_flags(device_args *a, cli_flag *flags, int cap);
void device_args_defaults(device_args *a);

/* The options for training (inference = false) or evaluation; NULL after
 * printing the error. Evaluation runs with accumulation 1 and
 * --eval-device-iterations. */
tg_options *device_options(const device_args *a, const char *command, bool inference);

/* --output-return-period (train, compile): the option outputReturnPeriod,
 * which only --output-mode everyN reads, so without it the flag is an error.
 * period < 0: not given. Prints the error and returns -1. */
int device_return_period(tg_options *o, const char *command, int64_t period);

/* The slot of integer option `key` (a command's own --seed writes there),
 * that of an option set by text (an MPI instance's own profile directory);
 * the value given to option `key`'s flag as option text, or NULL when not
 * given (buf: room for an integer's text). An unknown key, or one of the
 * other kind, is an internal error (abort, naming it). */
int64_t *device_int(device_args *a, const char *key);
const char **device_text(device_args *a, const char *key);
const char *device_given(const device_args *a, const char *key, char *buf, size_t cap);

#endif
