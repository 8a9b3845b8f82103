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
    a->replicas = a->accumulation = a->iterations = -1;
    a->devices = a->threads = a->eval_iterations = a->memory = -1;
}

/* One device flag: the option it sets (key; NULL for a flag of the command's
 * own) and how the command reads it. The flag's name is the option table's
 * `flag` column (tg_options_flag), so that it is spelt in one place; `name`
 * is given only for a flag of no option and for a second spelling. */
typedef enum {
    DEV_SET,      /* set from the value given, if given */
    DEV_TRAINING, /* the same, but not for an evaluation session */
    DEV_UPDATE,   /* the same, training only and after outputMode (accumulation, iterations) */
    DEV_OWN,      /* read by device_options' own code (outputMode, --offload, --profile) */
    DEV_UNLISTED, /* set from the value, but not a flag here (--seed: the commands' own help) */
} dev_when;

typedef struct dev_flag {
    const char *key;
    dev_when when;
    const char *bool_value; /* CLI_BOOL: the option's value when the flag is given */
    cli_flag flag;
} dev_flag;

#define DEV_FLAGS_MAX 40

/* The rows, pointing into a (read-only to device_options). */
static int dev_rows(device_args *a, dev_flag *r)
{
    const dev_flag rows[] = {
        {"executionStrategy",
         DEV_SET,
         NULL,
         {NULL, CLI_STRING, &a->strategy, "KIND", "single, pipelined, sharded or phased", 1, 0,
          "phased with --phases, pipelined with --split, --stages or --devices > 1, else single"}},
        {"phases",
         DEV_SET,
         NULL,
         {NULL, CLI_STRING, &a->phases, "SPEC",
          "phased: blocks per phase, run one after another: \"B1|B2|B3|B4\", on device 0, over "
          "--devices in order, or \"B3@1\" on the device named (with --offload weights each "
          "phase's weights are streamed in for it)",
          1, 0, NULL}},
        {"phasedExecutionType",
         DEV_SET,
         NULL,
         {NULL, CLI_STRING, &a->phased_type, "TYPE",
          "phased: SingleIPU (each phase on one device, as --phases places it) or ParallelIPU "
          "(phases alternating over two devices: one loads its next phase while the other "
          "computes)",
          1, 0, NULL}},
        {"stages",
         DEV_SET,
         NULL,
         {NULL, CLI_STRING, &a->stages, "SPEC",
          "blocks per stage: \"B1,B2|B3,B4\", a block from one of its ops on as BLOCK:OP "
          "(\"B1,B2|B2:layer2/relu,B3\"), or auto (the cost model's best over --devices)",
          1, 0, NULL}},
        {"split",
         DEV_SET,
         NULL,
         {NULL, CLI_STRING, &a->split, "LAYERS",
          "start new blocks at these layers: \"layer3.8\", or auto (the best layer boundaries)", 1,
          0, NULL}},
        {"pipelineSchedule",
         DEV_SET,
         NULL,
         {NULL, CLI_STRING, &a->schedule, "KIND",
          "pipeline schedule: grouped, interleaved, gpipe, 1f1b, zb-h1 or zb-h2", 1, 0, NULL}},
        {"replicationFactor",
         DEV_SET,
         NULL,
         {NULL, CLI_INT, &a->replicas, "N", "replicationFactor (data parallel copies)", 1, 64,
          NULL}},
        {"Training.gradientAccumulation",
         DEV_UPDATE,
         NULL,
         {NULL, CLI_INT, &a->accumulation, "N", "micro-batches per weight update", 1, 1e6, NULL}},
        {"deviceIterations",
         DEV_UPDATE,
         NULL,
         {NULL, CLI_INT, &a->iterations, "N", "weight updates per host step", 1, 1e6, NULL}},
        {NULL,
         DEV_OWN,
         NULL,
         {"--eval-device-iterations", CLI_INT, &a->eval_iterations, "N",
          "batches per host step when evaluating", 1, 1e6, "1, or 10 on several devices"}},
        {"outputMode",
         DEV_OWN,
         NULL,
         {NULL, CLI_STRING, &a->output_mode, "MODE", "all, sum, final or everyN", 1, 0,
          "all, so every loss is shown"}},
        {"devices",
         DEV_SET,
         NULL,
         {NULL, CLI_INT, &a->devices, "N", "devices available", 1, TG_MAX_DEVICES,
          "one per stage"}},
        {"threadsPerDevice",
         DEV_SET,
         NULL,
         {NULL, CLI_INT, &a->threads, "N",
          "threads each device computes with (0: the usable cores shared over the devices; "
          "threadsPerDevice -1 in --options: the free ones)",
          0, 1024, NULL}},
        {NULL,
         DEV_OWN,
         NULL,
         {"--threads", CLI_INT, &a->threads, "N", "the same as --threads-per-device", 0, 1024,
          NULL}},
        {"memoryPerDevice",
         DEV_SET,
         NULL,
         {NULL, CLI_INT, &a->memory, "BYTES", "device capacity (0: unlimited)", 0, 9e18, NULL}},
        {"randomSeed", DEV_UNLISTED, NULL, {NULL, CLI_INT, &a->seed, "N", "", 0, 9e18, NULL}},
        {NULL,
         DEV_OWN,
         NULL,
         {"--options", CLI_STRING, &a->options_file, "FILE",
          "read options from a JSON file ({\"replicationFactor\": 2, ...})", 1, 0, NULL}},
        {NULL,
         DEV_OWN,
         NULL,
         {"--engine-option", CLI_LIST, a->engine_options, "KEY=VALUE[,...]",
          "set options by name: debug.allowOutOfMemory=true,autoReport.all=true (may be "
          "repeated)",
          1, 0, NULL}},
        {NULL,
         DEV_OWN,
         NULL,
         {"--offload-optimiser", CLI_BOOL, &a->offload_optimizer, NULL,
          "keep optimizer state in host memory (TensorLocations.optimizer.onChip=false)", 1, 0,
          NULL}},
        {NULL,
         DEV_OWN,
         NULL,
         {"--offload-optimizer", CLI_BOOL, &a->offload_optimizer, NULL, "the same", 1, 0, NULL}},
        {NULL,
         DEV_OWN,
         NULL,
         {"--offload", CLI_STRING, &a->offload, "KINDS",
          "keep these in host streaming memory, streamed in around the steps that use them: "
          "weights, activations, accumulators, optimizer, or all (comma-separated; "
          "TensorLocations.<kind>.onChip=false, docs/memory-locations.md)",
          1, 0, NULL}},
        {NULL,
         DEV_OWN,
         NULL,
         {"--shard", CLI_STRING, &a->shard, "KINDS",
          "with replicas: replicated tensor sharding of weights, optimizer (comma-separated): "
          "each replica keeps 1/replicas of each tensor of at least "
          "TensorLocations.<kind>.minElementsForReplicatedTensorSharding elements (8192)",
          1, 0, NULL}},
        {"precision",
         DEV_SET,
         NULL,
         {NULL, CLI_STRING, &a->precision, "IN.MODEL",
          "storage types: 32.32, 16.32, 16.16, bf16.32, bf16.bf16, 32.16 or 32.bf16 (kernels "
          "compute in f32)",
          1, 0, NULL}},
        {"lossScaling",
         DEV_SET,
         NULL,
         {NULL, CLI_STRING, &a->loss_scaling, "KIND",
          "none, static or dynamic: scale the loss, skip updates whose gradients overflow", 1, 0,
          NULL}},
        {"lossScalingFactor",
         DEV_SET,
         NULL,
         {NULL, CLI_STRING, &a->loss_scale, "F", "the (starting) loss scale", 1, 0, "1024"}},
        {"accumType",
         DEV_SET,
         NULL,
         {NULL, CLI_STRING, &a->accum_type, "TYPE",
          "gradient accumulators: auto (the model's type), f32, f16 or bf16", 1, 0, NULL}},
        {"firstOrderMomentumAccumType",
         DEV_SET,
         NULL,
         {NULL, CLI_STRING, &a->first_moment, "TYPE",
          "Adam's exp_avg, SGD's momentum: f32, f16 or bf16", 1, 0, NULL}},
        {"secondOrderMomentumAccumType",
         DEV_SET,
         NULL,
         {NULL, CLI_STRING, &a->second_moment, "TYPE", "Adam's exp_avg_sq: f32, f16 or bf16", 1, 0,
          NULL}},
        {"Precision.enableStochasticRounding",
         DEV_SET,
         "true",
         {NULL, CLI_BOOL, &a->stochastic_rounding, NULL,
          "round half-precision weight updates stochastically (bf16 ones do by default)", 1, 0,
          NULL}},
        {"Precision.enableStochasticRounding",
         DEV_SET,
         "false",
         {"--no-stochastic-rounding", CLI_BOOL, &a->round_to_nearest, NULL,
          "round bf16 weight updates to nearest as f16 ones (faster, loses updates below half "
          "a step)",
          1, 0, NULL}},
        {"autoReport.all",
         DEV_OWN,
         NULL,
         {NULL, CLI_BOOL, &a->profile, NULL, "write graph and execution profiles (autoReport.all)",
          1, 0, NULL}},
        {"autoReport.directory",
         DEV_OWN,
         NULL,
         {NULL, CLI_STRING, &a->profile_dir, "DIR",
          "where profiles go: DIR/training, DIR/inference", 1, 0, "./profile"}},
        {"enableExecutableCaching",
         DEV_SET,
         NULL,
         {NULL, CLI_STRING, &a->executable_cache, "DIR",
          "enableExecutableCaching: load compiled programs from DIR, compile and store the "
          "missing",
          1, 0, NULL}},
        /* the file holds one program: train's, not that of its evaluation session */
        {"executableFile",
         DEV_TRAINING,
         NULL,
         {NULL, CLI_STRING, &a->executable, "FILE",
          "executableFile: load the compiled program from FILE (compile --save-executable); "
          "compiled again with a warning when it does not match",
          1, 0, NULL}},
    };
    int n = (int)(sizeof rows / sizeof rows[0]);
    _Static_assert(sizeof rows / sizeof rows[0] <= DEV_FLAGS_MAX, "raise DEV_FLAGS_MAX");
    for (int i = 0; i < n; i++) {
        r[i] = rows[i];
        if (!r[i].flag.name)
            r[i].flag.name = tg_options_flag(r[i].key);
    }
    return n;
}

int device_flags(device_args *a, cli_flag *f, int cap)
{
    dev_flag rows[DEV_FLAGS_MAX];
    int n = dev_rows(a, rows), listed = 0;
    for (int i = 0; i < n; i++) {
        if (rows[i].when == DEV_UNLISTED)
            continue;
        /* a command's flag array too short dropped its last device flags
         * without a word (compile lost --executable): a build error in all
         * but name, so every run of that command says it */
        if (listed == cap) {
            fprintf(stderr,
                    "tilegraph: internal error: the command's flag table has room for %d "
                    "device flags, not '%s' and the rest\n",
                    cap, rows[i].flag.name);
            abort();
        }
        f[listed++] = rows[i].flag;
    }
    return listed;
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

static bool set(tg_options *o, const char *command, const char *key, const char *value)
{
    if (tg_options_set(o, key, value) == TG_OK)
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

/* The value given for row r as option text, or NULL when the flag was not given. */
static const char *row_value(const dev_flag *r, char *buf, size_t cap)
{
    switch (r->flag.type) {
    case CLI_INT: {
        int64_t v = *(const int64_t *)r->flag.value;
        if (v < 0)
            return NULL;
        snprintf(buf, cap, "%lld", (long long)v);
        return buf;
    }
    case CLI_STRING:
        return *(const char *const *)r->flag.value;
    case CLI_BOOL:
        return *(const bool *)r->flag.value ? r->bool_value : NULL;
    case CLI_FLOAT:
    case CLI_LIST:
        break;
    }
    return NULL;
}

/* Set the options of the flags given: those set as they are read (update =
 * false), or the update's, set last (update = true); an evaluation session
 * (inference) takes neither the update's nor the training-only ones. */
static bool set_rows(tg_options *o, const device_args *a, const char *command, bool inference,
                     bool update)
{
    dev_flag rows[DEV_FLAGS_MAX];
    int n = dev_rows((device_args *)a, rows); /* read only */
    for (int i = 0; i < n; i++) {
        dev_when w = rows[i].when;
        if (w == DEV_OWN || (w == DEV_UPDATE) != update ||
            (inference && w != DEV_SET && w != DEV_UNLISTED))
            continue;
        char buf[32];
        const char *v = row_value(&rows[i], buf, sizeof buf);
        if (v && !set(o, command, rows[i].key, v))
            return false;
    }
    return true;
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
        }
        free(text);
    }
    if (a->stochastic_rounding && a->round_to_nearest) {
        fprintf(stderr,
                "tilegraph %s: --stochastic-rounding and --no-stochastic-rounding contradict each "
                "other: give one\n",
                command);
        ok = false;
    }
    ok = ok && set_rows(o, a, command, inference, false);
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
    if (a->profile || a->profile_dir) {
        ok = ok && set(o, command, "autoReport.all", "true");
        ok = ok &&
             set(o, command, "autoReport.directory", a->profile_dir ? a->profile_dir : "./profile");
    }
    /* how the options read so far run (the output mode and the strategy) */
    tg_options_summary sum = {0};
    if (ok && tg_options_summarize(o, 1, &sum) != TG_OK) {
        fprintf(stderr, "tilegraph %s: %s\n", command, tg_error_message());
        ok = false;
    }
    /* the command shows every micro-batch's loss and accuracy unless told otherwise */
    if (ok && !a->output_mode && !strcmp(sum.output_mode, "default"))
        ok = set(o, command, "outputMode", "all");
    ok = ok && (!a->output_mode || set(o, command, "outputMode", a->output_mode));
    if (inference) {
        int64_t iters = a->eval_iterations;
        if (iters < 0)
            iters = strcmp(sum.strategy, "single") ? 10 : 1;
        ok = ok && set(o, command, "Training.gradientAccumulation", "1");
        ok = ok && set_int(o, command, "deviceIterations", iters);
        ok = ok && set(o, command, "outputMode", "all");
    } else {
        ok = ok && set_rows(o, a, command, inference, true);
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
