/* tools/device_flags.h - the flags that say how a model runs on devices,
 * shared by the commands that train, infer and compile. They set the
 * PopTorch-named options (docs/options.md); --options FILE reads the same
 * options from JSON, and flags given on the command line win over it. */
#ifndef TG_TOOLS_DEVICE_FLAGS_H
#define TG_TOOLS_DEVICE_FLAGS_H

#include "cli.h"

#include "tilegraph/options.h"

typedef struct device_args {
    const char *strategy, *stages, *split, *schedule, *output_mode, *options_file, *profile_dir;
    const char *executable_cache, *executable; /* enableExecutableCaching, executableFile */
    const char *phases;                        /* executionStrategy phased: "B1|B2|B3" */
    const char *phased_type;                   /* phasedExecutionType: SingleIPU, ParallelIPU */
    const char *offload; /* "weights,activations,...": TensorLocations.<kind>.onChip=false */
    const char *shard;   /* "weights,optimizer": TensorLocations.<kind>.replicatedTensorSharding */
    char engine_options[CLI_LIST_CAP]; /* "key=value,key=value", from every --engine-option */
    /* precision (compile/precision.h) */
    const char *precision, *loss_scaling, *loss_scale, *accum_type, *first_moment, *second_moment;
    bool profile, offload_optimizer, stochastic_rounding, round_to_nearest;
    int64_t replicas, accumulation, iterations, devices, threads, eval_iterations, seed;
    int64_t memory;
} device_args;

/* Fill `flags` (room for cap) with flags that write into a; returns their
 * number (those that fit: a command's table too small loses the last ones,
 * which tests/tools would find unknown). Each flag that sets an option takes its
 * name from the option table (tg_options_flag). */
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

#endif
