/* tools/device_flags.c - command-line flags for multi-device execution. */
#include "device_flags.h"

#include "tilegraph/devices.h"
#include "tilegraph/files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void device_args_defaults(device_args *a)
{
    memset(a, 0, sizeof *a);
    for (int i = 0; i < DEVICE_OPTIONS_MAX; i++)
        a->ints[i] = DEVICE_UNSET;
    a->eval_iterations = -1;
}

/* When device_options sets an option given by its flag. Not a column of the
 * option table: these say how the command builds its two sessions (training
 * and evaluation), not what the option is; every other option is DEV_SET. */
typedef enum {
    DEV_SET,      /* set from the value given, if given, in either session */
    DEV_TRAINING, /* the same, but not for an evaluation session */
    DEV_UPDATE,   /* the same, training only and after outputMode */
    DEV_OWN,      /* read by device_options' own code */
} dev_when;

static const struct {
    const char *key;
    dev_when when;
} dev_roles[] = {
    {"Training.gradientAccumulation", DEV_UPDATE},
    {"deviceIterations", DEV_UPDATE},
    /* the file holds one program: train's, not that of its evaluation session */
    {"executableFile", DEV_TRAINING},
    {"outputMode", DEV_OWN},           /* "all" unless given: every loss is shown */
    {"autoReport.all", DEV_OWN},       /* with --profile-dir too */
    {"autoReport.directory", DEV_OWN}, /* ./profile */
};

/* Options a command lists the flag of itself, with its own help (the
 * targets registered, what the seed seeds there) or not at all. */
static const char *const own_flags[] = {"randomSeed", "target", "targetDescription",
                                        "outputReturnPeriod"};

/* Options only a training program reads (an update, a loss, an optimizer):
 * their flags' help begins with CLI_TRAINING, so a command that runs
 * inference programs leaves them out of its --help and refuses them
 * (cli_parse_inference). */
static const char *const training_only[] = {"Training.gradientAccumulation",
                                            "outputMode",
                                            "lossScaling",
                                            "lossScalingFactor",
                                            "accumType",
                                            "firstOrderMomentumAccumType",
                                            "secondOrderMomentumAccumType",
                                            "Precision.enableStochasticRounding"};

static bool is_training_only(const char *key)
{
    for (size_t i = 0; i < sizeof training_only / sizeof training_only[0]; i++)
        if (!strcmp(training_only[i], key))
            return true;
    return false;
}

/* The default --help shows where the command's is not the library's. */
static const struct {
    const char *key, *def;
} command_defaults[] = {
    {"outputMode", "all, so every loss is shown"},
    {"autoReport.directory", "./profile"},
};

static dev_when role(const char *key)
{
    for (size_t i = 0; i < sizeof dev_roles / sizeof dev_roles[0]; i++)
        if (!strcmp(dev_roles[i].key, key))
            return dev_roles[i].when;
    return DEV_SET;
}

static bool listed_by_command(const char *key)
{
    for (size_t i = 0; i < sizeof own_flags / sizeof own_flags[0]; i++)
        if (!strcmp(own_flags[i], key))
            return true;
    return false;
}

static int option_count(void)
{
    int n = tg_options_count();
    if (n > DEVICE_OPTIONS_MAX) {
        fprintf(stderr,
                "tilegraph: internal error: %d options, room for %d: raise "
                "DEVICE_OPTIONS_MAX (tools/device_flags.h)\n",
                n, DEVICE_OPTIONS_MAX);
        abort();
    }
    return n;
}

static int option_index(const char *key)
{
    for (int i = 0; i < option_count(); i++)
        if (!strcmp(tg_options_key(i), key))
            return i;
    fprintf(stderr, "tilegraph: internal error: no option '%s'\n", key);
    abort();
}

/* Option i's flag as the table gives it, writing into a's slot for it. */
static cli_flag option_flag(device_args *a, int i)
{
    const char *key = tg_options_key(i), *arg = tg_options_flag_arg(i);
    cli_flag f = {
        tg_options_flag(key), CLI_STRING, &a->texts[i], arg, tg_options_description(i), 1, 0, NULL};
    const char *values = arg ? tg_options_values(i) : NULL;
    const char *mark = is_training_only(key) ? CLI_TRAINING : "";
    size_t room = sizeof a->help_text - a->help_used;
    int len = values ? snprintf(a->help_text + a->help_used, room, "%s%s (one of %s)", mark, f.help,
                                values)
              : *mark ? snprintf(a->help_text + a->help_used, room, "%s%s", mark, f.help)
                      : -1;
    if (len >= 0 && (size_t)len < room) { /* else the help alone: still right, less complete */
        f.help = a->help_text + a->help_used;
        a->help_used += (size_t)len + 1;
    }
    const char *def = tg_options_default(i);
    f.def = def && *def ? def : NULL;
    for (size_t k = 0; k < sizeof command_defaults / sizeof command_defaults[0]; k++)
        if (!strcmp(command_defaults[k].key, key))
            f.def = command_defaults[k].def;
    if (!arg) {
        f.type = CLI_BOOL;
        f.value = &a->switches[i];
        f.def = NULL;
    } else if (tg_options_int_range(i, &f.min, &f.max)) {
        f.type = CLI_INT;
        f.value = &a->ints[i];
    }
    return f;
}

int64_t *device_int(device_args *a, const char *key)
{
    int i = option_index(key);
    double min, max;
    if (!tg_options_int_range(i, &min, &max)) {
        fprintf(stderr, "tilegraph: internal error: option '%s' is not an integer\n", key);
        abort();
    }
    return &a->ints[i];
}

const char **device_text(device_args *a, const char *key)
{
    int i = option_index(key);
    double min, max;
    if (tg_options_int_range(i, &min, &max) || !tg_options_flag_arg(i)) {
        fprintf(stderr, "tilegraph: internal error: option '%s' is not set by text\n", key);
        abort();
    }
    return &a->texts[i];
}

/* The value given to option i's flag, as option text; NULL if not given. */
static const char *given(const device_args *a, int i, char *buf, size_t cap)
{
    if (a->ints[i] != DEVICE_UNSET) {
        snprintf(buf, cap, "%lld", (long long)a->ints[i]);
        return buf;
    }
    return a->switches[i] ? "true" : a->texts[i];
}

const char *device_given(const device_args *a, const char *key, char *buf, size_t cap)
{
    return given(a, option_index(key), buf, cap);
}

/* A command's table too short dropped its last device flags without a word
 * (compile lost --executable): a build error in all but name, so every run
 * of that command says it. */
static void add(cli_flag *f, int cap, int *n, cli_flag flag)
{
    if (*n == cap) {
        fprintf(stderr,
                "tilegraph: internal error: the command's flag table has room for %d device "
                "flags, not '%s' and the rest\n",
                cap, flag.name);
        abort();
    }
    f[(*n)++] = flag;
}

int device_flags(device_args *a, cli_flag *f, int cap)
{
    int n = 0, threads = option_index("threadsPerDevice");
    for (int i = 0; i < option_count(); i++) {
        const char *key = tg_options_key(i), *flag = tg_options_flag(key);
        /* "--offload weights": a value of the command's own --offload */
        if (flag && !strchr(flag, ' ') && !listed_by_command(key))
            add(f, cap, &n, option_flag(a, i));
    }
    cli_flag threads_alias = option_flag(a, threads);
    threads_alias.name = "--threads";
    threads_alias.help = "the same as --threads-per-device";
    const cli_flag own[] = {
        {"--eval-device-iterations", CLI_INT, &a->eval_iterations, "N",
         "batches per host step when evaluating", 1, 1e6, "1, or 10 on several devices"},
        threads_alias,
        {"--options", CLI_STRING, &a->options_file, "FILE",
         "read options from a JSON file ({\"replicationFactor\": 2, ...})", 1, 0, NULL},
        {"--engine-option", CLI_LIST, a->engine_options, "KEY=VALUE[,...]",
         "set options by name: debug.allowOutOfMemory=true,autoReport.all=true (may be "
         "repeated)",
         1, 0, NULL},
        {"--offload-optimiser", CLI_BOOL, &a->offload_optimizer, NULL,
         CLI_TRAINING "keep optimizer state in host memory "
                      "(TensorLocations.optimizer.onChip=false)",
         1, 0, NULL},
        {"--offload-optimizer", CLI_BOOL, &a->offload_optimizer, NULL, CLI_TRAINING "the same", 1,
         0, NULL},
        {"--offload", CLI_STRING, &a->offload, "KINDS",
         "keep these in host streaming memory, streamed in around the steps that use them: "
         "weights, activations, accumulators, optimizer, or all (comma-separated; "
         "TensorLocations.<kind>.onChip=false, docs/memory-locations.md)",
         1, 0, NULL},
        {"--shard", CLI_STRING, &a->shard, "KINDS",
         "with replicas: replicated tensor sharding of weights, optimizer (comma-separated): "
         "each replica keeps 1/replicas of each tensor of at least "
         "TensorLocations.<kind>.minElementsForReplicatedTensorSharding elements (8192)",
         1, 0, NULL},
        {"--no-stochastic-rounding", CLI_BOOL, &a->round_to_nearest, NULL,
         CLI_TRAINING "round bf16 weight updates to nearest as f16 ones (faster, loses updates "
                      "below half a step)",
         1, 0, NULL},
    };
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        add(f, cap, &n, own[i]);
    return n;
}

/* The whole file as a string; NULL after recording why (a directory or a
 * FIFO is refused before it is read: "--options DIR" must not parse as an
 * empty document, a FIFO must not hang). */
static char *read_text(const char *path)
{
    FILE *f;
    if (tg_fopen_regular(path, &f) != TG_OK)
        return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = (len + 4096 + 1) * 2;
            char *nb = cap > ((size_t)1 << 24) ? NULL : realloc(buf, cap);
            if (!nb) {
                tg_error_set(TG_ERR_CONFIG, "'%s' is over 16 MB: not an options file", path);
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, 4096, f);
        len += n;
        if (n < 4096)
            break;
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    /* a NUL would end the text where it stands, and the rest be ignored */
    if (buf && strlen(buf) != len) {
        tg_error_set(TG_ERR_CONFIG,
                     "'%s' holds a NUL byte at offset %zu: an options file is JSON text; "
                     "the rest would be ignored",
                     path, strlen(buf));
        free(buf);
        return NULL;
    }
    return buf;
}

/* Option "target" names a registered target: asked when it is given, as the
 * library asks only when compiling (tg_target_check). */
static tg_status set_checked(tg_options *o, const char *key, const char *value)
{
    tg_status s = !strcmp(key, "target") && value ? tg_target_check(value) : TG_OK;
    return s == TG_OK ? tg_options_set(o, key, value) : s;
}

static bool set(tg_options *o, const char *command, const char *key, const char *value)
{
    if (set_checked(o, key, value) == TG_OK)
        return true;
    fprintf(stderr, "tilegraph %s: %s\n", command, tg_error_message());
    return false;
}

static bool set_int(tg_options *o, const char *command, const char *key, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    return v < 0 || set(o, command, key, buf);
}

/* k names kind, in the singular or the plural and, for the optimizer, in
 * either spelling: "weight", "weights"; "optimizer", "optimisers" (the
 * README's --offload-optimiser spells it so, PopTorch's API "Optimizer"). */
static bool names_kind(const char *k, const char *kind)
{
    char word[64];
    snprintf(word, sizeof word, "%s", k);
    if (!strncmp(word, "optimis", 7))
        word[6] = 'z';
    size_t n = strlen(word), m = strlen(kind);
    if (n && word[n - 1] == 's' && !(m && kind[m - 1] == 's'))
        word[--n] = '\0'; /* "optimizers" */
    return !strncmp(word, kind, n) && (!kind[n] || (kind[n] == 's' && !kind[n + 1]));
}

/* Whether a comma list has an empty item ("weights,", ",a", "a,,b"). */
static bool empty_item(const char *list)
{
    size_t n = strlen(list);
    return n == 0 || list[0] == ',' || list[n - 1] == ',' || strstr(list, ",,") != NULL;
}

/* --shard KINDS: TensorLocations.<kind>.replicatedTensorSharding=true. */
static bool set_shard(tg_options *o, const char *command, const char *list)
{
    char buf[256];
    if (empty_item(list)) {
        fprintf(stderr,
                "tilegraph %s: --shard '%s' has an empty kind (a comma at the start, the end or "
                "doubled): give weights, optimizer or both, separated by single commas\n",
                command, list);
        return false;
    }
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    bool any = false;
    for (char *k = strtok_r(buf, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
        const char *kind = names_kind(k, "weights")     ? "weight"
                           : names_kind(k, "optimizer") ? "optimizer"
                                                        : NULL;
        if (!kind) {
            fprintf(stderr,
                    "tilegraph %s: --shard: '%s' cannot be sharded; give weights, optimizer or "
                    "both, separated by commas\n",
                    command, k);
            return false;
        }
        char key[80];
        snprintf(key, sizeof key, "TensorLocations.%s.replicatedTensorSharding", kind);
        if (!set(o, command, key, "true"))
            return false;
        any = true;
    }
    if (!any)
        fprintf(stderr, "tilegraph %s: --shard: name the kinds to shard: weights, optimizer\n",
                command);
    return any;
}

/* Set the options of the flags given: those set as they are read (update =
 * false), or the update's, set last (update = true); an evaluation session
 * (inference) takes neither the update's nor the training-only ones. */
static bool set_given(tg_options *o, const device_args *a, const char *command, bool inference,
                      bool update)
{
    for (int i = 0; i < option_count(); i++) {
        dev_when w = role(tg_options_key(i));
        if (w == DEV_OWN || (w == DEV_UPDATE) != update || (inference && w != DEV_SET))
            continue;
        char buf[32];
        const char *v = given(a, i, buf, sizeof buf);
        if (v && !set(o, command, tg_options_key(i), v))
            return false;
    }
    /* --no-stochastic-rounding: the same option's other value */
    return update || !a->round_to_nearest ||
           set(o, command, "Precision.enableStochasticRounding", "false");
}

/* The kind of tensor option `key` offloads: "weights" of the flag "--offload
 * weights" (the option table's flag column); NULL for another option. */
static const char *offload_kind(const char *key)
{
    static const char prefix[] = "--offload ";
    const char *flag = tg_options_flag(key);
    return flag && !strncmp(flag, prefix, sizeof prefix - 1) ? flag + sizeof prefix - 1 : NULL;
}

/* "weights, activations, accumulators, optimizer or all", from the option table. */
static const char *offload_kinds(char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < tg_options_count() && used < cap; i++)
        if (offload_kind(tg_options_key(i)))
            used +=
                (size_t)snprintf(buf + used, cap - used, "%s, ", offload_kind(tg_options_key(i)));
    if (used >= 2 && used < cap)
        snprintf(buf + used - 2, cap - used + 2, " or all");
    return buf;
}

/* --offload KINDS: each kind's option to false (TensorLocations.<kind>.onChip). */
static bool set_offload(tg_options *o, const char *command, const char *list)
{
    char buf[256], kinds[160];
    if (empty_item(list)) { /* as --split refuses "layer2,", not a list ending in nothing */
        fprintf(stderr,
                "tilegraph %s: --offload '%s' has an empty kind (a comma at the start, the end or "
                "doubled): give %s, separated by single commas\n",
                command, list, offload_kinds(kinds, sizeof kinds));
        return false;
    }
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    bool any = false;
    for (char *k = strtok_r(buf, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
        bool all = !strcmp(k, "all"), found = all;
        for (int i = 0; i < tg_options_count(); i++) {
            const char *key = tg_options_key(i), *kind = offload_kind(key);
            if (!kind || (!all && !names_kind(k, kind)))
                continue;
            if (!set(o, command, key, "false"))
                return false;
            found = true;
        }
        if (!found) {
            fprintf(stderr,
                    "tilegraph %s: --offload: '%s' is not a kind of tensor; give %s, separated by "
                    "commas\n",
                    command, k, offload_kinds(kinds, sizeof kinds));
            return false;
        }
        any = true;
    }
    if (!any)
        fprintf(stderr, "tilegraph %s: --offload: name the kinds of tensor to offload: %s\n",
                command, offload_kinds(kinds, sizeof kinds));
    return any;
}

/* The target an options file names is registered: asked when the file is
 * read, as for --target (the library asks when compiling). */
static bool file_target_known(const tg_options *o, const char *command, const char *file)
{
    tg_options_summary sum;
    if (tg_options_summarize(o, 1, &sum) == TG_OK && tg_target_check(sum.target) == TG_OK)
        return true;
    fprintf(stderr, "tilegraph %s: %s: %s\n", command, file, tg_error_message());
    return false;
}

tg_options *device_options(const device_args *a, const char *command, bool inference)
{
    tg_options *o = tg_options_create();
    if (!o)
        return NULL;
    bool ok = true;
    if (a->options_file) {
        char *text = read_text(a->options_file);
        if (!text) {
            fprintf(stderr, "tilegraph %s: --options: %s\n", command, tg_error_message());
            ok = false;
        } else if (tg_options_set_json(o, text, a->options_file) != TG_OK) {
            fprintf(stderr, "tilegraph %s: %s\n", command, tg_error_message());
            ok = false;
        } else if (!file_target_known(o, command, a->options_file)) {
            ok = false;
        }
        free(text);
    }
    char b1[32], b2[32], b3[32], b4[32];
    const char *profile = device_given(a, "autoReport.all", b1, sizeof b1),
               *profile_dir = device_given(a, "autoReport.directory", b2, sizeof b2),
               *output_mode = device_given(a, "outputMode", b3, sizeof b3);
    if (device_given(a, "Precision.enableStochasticRounding", b4, sizeof b4) &&
        a->round_to_nearest) {
        fprintf(stderr,
                "tilegraph %s: --stochastic-rounding and --no-stochastic-rounding contradict each "
                "other: give one\n",
                command);
        ok = false;
    }
    ok = ok && set_given(o, a, command, inference, false);
    if (ok && a->engine_options[0]) {
        char buf[CLI_LIST_CAP];
        snprintf(buf, sizeof buf, "%s", a->engine_options);
        char *save = NULL;
        for (char *kv = strtok_r(buf, ",", &save); ok && kv; kv = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(kv, '=');
            if (!eq) {
                fprintf(stderr, "tilegraph %s: --engine-option '%s' is not KEY=VALUE\n", command,
                        kv);
                ok = false;
                break;
            }
            *eq = '\0';
            ok = set(o, command, kv, eq + 1);
        }
    }
    ok = ok && (!a->offload_optimizer || set_offload(o, command, "optimizer"));
    ok = ok && (!a->offload || set_offload(o, command, a->offload));
    ok = ok && (!a->shard || set_shard(o, command, a->shard));
    if (profile || profile_dir) {
        ok = ok && set(o, command, "autoReport.all", "true");
        ok = ok && set(o, command, "autoReport.directory", profile_dir ? profile_dir : "./profile");
    }
    /* how the options read so far run (the output mode and the strategy) */
    tg_options_summary sum = {0};
    if (ok && tg_options_summarize(o, 1, &sum) != TG_OK) {
        fprintf(stderr, "tilegraph %s: %s\n", command, tg_error_message());
        ok = false;
    }
    /* the command shows every micro-batch's loss and accuracy unless told otherwise */
    if (ok && !output_mode && !strcmp(sum.output_mode, "default"))
        ok = set(o, command, "outputMode", "all");
    ok = ok && (!output_mode || set(o, command, "outputMode", output_mode));
    if (inference) {
        int64_t iters = a->eval_iterations;
        if (iters < 0)
            iters = strcmp(sum.strategy, "single") ? 10 : 1;
        ok = ok && set(o, command, "Training.gradientAccumulation", "1");
        ok = ok && set_int(o, command, "deviceIterations", iters);
        ok = ok && set(o, command, "outputMode", "all");
    } else {
        ok = ok && set_given(o, a, command, inference, true);
    }
    if (!ok) {
        tg_options_destroy(o);
        return NULL;
    }
    return o;
}

int device_return_period(tg_options *o, const char *command, int64_t period)
{
    if (period < 0)
        return 0;
    tg_options_summary sum;
    if (tg_options_summarize(o, 1, &sum) != TG_OK) {
        fprintf(stderr, "tilegraph %s: %s\n", command, tg_error_message());
        return -1;
    }
    if (strcmp(sum.output_mode, "everyN")) {
        fprintf(stderr,
                "tilegraph %s: --output-return-period applies to --output-mode everyN "
                "only (the output mode is '%s'); add --output-mode everyN\n",
                command, sum.output_mode);
        return -1;
    }
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)period);
    if (tg_options_set(o, "outputReturnPeriod", v) != TG_OK) {
        fprintf(stderr, "tilegraph %s: --output-return-period: %s\n", command, tg_error_message());
        return -1;
    }
    return 0;
}
