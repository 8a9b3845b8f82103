/* tools/device_flags.c - command-line flags for multi-device execution. */
#include "device_flags.h"

#include "tilegraph/devices.h"
#include "tilegraph/files.h"

#include <stdlib.h>
#include <string.h>

void device_args_defaults(device_args *a)
{
    memset(a, 0, sizeof *a);
    a->replicas = a->accumulation = a->iterations = -1;
    a->devices = a->threads = a->eval_iterations = a->memory = -1;
}

int device_flags(device_args *a, cli_flag *f)
{
    cli_flag list[DEVICE_FLAG_COUNT] = {
        {"--strategy", CLI_STRING, &a->strategy, "KIND", "single, pipelined, sharded or phased", 1,
         0, "phased with --phases, pipelined with --split, --stages or --devices > 1, else single"},
        {"--phases", CLI_STRING, &a->phases, "SPEC",
         "phased: blocks per phase, run one after another on one device: \"B1|B2|B3|B4\" "
         "(with --offload weights each phase's weights are streamed in for it)",
         1, 0, NULL},
        {"--stages", CLI_STRING, &a->stages, "SPEC",
         "blocks per stage: \"B1,B2|B3,B4\", or auto (the cost model's best over --devices)", 1, 0,
         NULL},
        {"--split", CLI_STRING, &a->split, "LAYERS",
         "start new blocks at these layers: \"layer3.8\", or auto (the best layer boundaries)", 1,
         0, NULL},
        {"--schedule", CLI_STRING, &a->schedule, "KIND",
         "pipeline schedule: grouped, interleaved, gpipe, 1f1b, zb-h1 or zb-h2", 1, 0, NULL},
        {"--replicas", CLI_INT, &a->replicas, "N", "replicationFactor (data parallel copies)", 1,
         64, NULL},
        {"--gradient-accumulation", CLI_INT, &a->accumulation, "N",
         "micro-batches per weight update", 1, 1e6, NULL},
        {"--device-iterations", CLI_INT, &a->iterations, "N", "weight updates per host step", 1,
         1e6, NULL},
        {"--eval-device-iterations", CLI_INT, &a->eval_iterations, "N",
         "batches per host step when evaluating", 1, 1e6, "1, or 10 on several devices"},
        {"--output-mode", CLI_STRING, &a->output_mode, "MODE", "all, sum, final or everyN", 1, 0,
         "all, so every loss is shown"},
        {"--devices", CLI_INT, &a->devices, "N", "devices available", 1, TG_MAX_DEVICES,
         "one per stage"},
        {"--threads-per-device", CLI_INT, &a->threads, "N",
         "threads each device computes with (0: the free cores shared over the devices)", 0, 1024,
         NULL},
        {"--threads", CLI_INT, &a->threads, "N", "the same as --threads-per-device", 0, 1024, NULL},
        {"--memory-per-device", CLI_INT, &a->memory, "BYTES", "device capacity (0: unlimited)", 0,
         9e18, NULL},
        {"--options", CLI_STRING, &a->options_file, "FILE",
         "read options from a JSON file ({\"replicationFactor\": 2, ...})", 1, 0, NULL},
        {"--engine-option", CLI_LIST, a->engine_options, "KEY=VALUE[,...]",
         "set options by name: debug.allowOutOfMemory=true,autoReport.all=true (may be repeated)",
         1, 0, NULL},
        {"--offload-optimiser", CLI_BOOL, &a->offload_optimizer, NULL,
         "keep optimizer state in host memory (TensorLocations.optimizer.onChip=false)", 1, 0,
         NULL},
        {"--offload-optimizer", CLI_BOOL, &a->offload_optimizer, NULL, "the same", 1, 0, NULL},
        {"--offload", CLI_STRING, &a->offload, "KINDS",
         "keep these in host streaming memory, streamed in around the steps that use them: "
         "weights, activations, accumulators, optimizer, or all (comma-separated; "
         "TensorLocations.<kind>.onChip=false, docs/memory-locations.md)",
         1, 0, NULL},
        {"--shard", CLI_STRING, &a->shard, "KINDS",
         "with replicas: replicated tensor sharding of weights, optimizer (comma-separated): each "
         "replica keeps 1/replicas of each tensor of at least "
         "TensorLocations.<kind>.minElementsForReplicatedTensorSharding elements (8192)",
         1, 0, NULL},
        {"--precision", CLI_STRING, &a->precision, "IN.MODEL",
         "storage types: 32.32, 16.32, 16.16, bf16.32, bf16.bf16, 32.16 or 32.bf16 (kernels "
         "compute in f32)",
         1, 0, NULL},
        {"--loss-scaling", CLI_STRING, &a->loss_scaling, "KIND",
         "none, static or dynamic: scale the loss, skip updates whose gradients overflow", 1, 0,
         NULL},
        {"--loss-scale", CLI_STRING, &a->loss_scale, "F", "the (starting) loss scale", 1, 0,
         "1024"},
        {"--accum-type", CLI_STRING, &a->accum_type, "TYPE",
         "gradient accumulators: auto (the model's type), f32, f16 or bf16", 1, 0, NULL},
        {"--first-moment-type", CLI_STRING, &a->first_moment, "TYPE",
         "Adam's exp_avg, SGD's momentum: f32, f16 or bf16", 1, 0, NULL},
        {"--second-moment-type", CLI_STRING, &a->second_moment, "TYPE",
         "Adam's exp_avg_sq: f32, f16 or bf16", 1, 0, NULL},
        {"--stochastic-rounding", CLI_BOOL, &a->stochastic_rounding, NULL,
         "round half-precision weight updates stochastically (bf16 ones do by default)", 1, 0,
         NULL},
        {"--no-stochastic-rounding", CLI_BOOL, &a->round_to_nearest, NULL,
         "round bf16 weight updates to nearest as f16 ones (faster, loses updates below half "
         "a step)",
         1, 0, NULL},
        {"--profile", CLI_BOOL, &a->profile, NULL,
         "write graph and execution profiles (autoReport.all)", 1, 0, NULL},
        {"--profile-dir", CLI_STRING, &a->profile_dir, "DIR",
         "where profiles go: DIR/training, DIR/inference", 1, 0, "./profile"},
        {"--executable-cache", CLI_STRING, &a->executable_cache, "DIR",
         "enableExecutableCaching: load compiled programs from DIR, compile and store the missing",
         1, 0, NULL},
        {"--executable", CLI_STRING, &a->executable, "FILE",
         "executableFile: load the compiled program from FILE (compile --save-executable); "
         "compiled again with a warning when it does not match",
         1, 0, NULL},
    };
    memcpy(f, list, sizeof list);
    return DEVICE_FLAG_COUNT;
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

/* --shard KINDS: TensorLocations.<kind>.replicatedTensorSharding=true. */
static bool set_shard(tg_options *o, const char *command, const char *list)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    bool any = false;
    for (char *k = strtok_r(buf, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
        const char *kind = !strcmp(k, "weights") || !strcmp(k, "weight") ? "weight"
                           : !strcmp(k, "optimizer")                     ? "optimizer"
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

/* --offload KINDS: each kind's TensorLocations.<kind>.onChip=false. */
static bool set_offload(tg_options *o, const char *command, const char *list)
{
    static const char *const kinds[][2] = {{"weights", "weight"},
                                           {"activations", "activation"},
                                           {"accumulators", "accumulator"},
                                           {"optimizer", "optimizer"}};
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    bool any = false;
    for (char *k = strtok_r(buf, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
        bool all = !strcmp(k, "all"), found = all;
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
            if (!all && strcmp(k, kinds[i][0]) && strcmp(k, kinds[i][1]))
                continue;
            char key[80];
            snprintf(key, sizeof key, "TensorLocations.%s.onChip", kinds[i][1]);
            if (!set(o, command, key, "false"))
                return false;
            found = true;
        }
        if (!found) {
            fprintf(stderr,
                    "tilegraph %s: --offload: '%s' is not a kind of tensor; give weights, "
                    "activations, accumulators, optimizer or all, separated by commas\n",
                    command, k);
            return false;
        }
        any = true;
    }
    if (!any)
        fprintf(stderr,
                "tilegraph %s: --offload: name the kinds of tensor to offload: weights, "
                "activations, accumulators, optimizer or all\n",
                command);
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
    ok = ok && (!a->strategy || set(o, command, "executionStrategy", a->strategy));
    ok = ok && (!a->stages || set(o, command, "stages", a->stages));
    ok = ok && (!a->phases || set(o, command, "phases", a->phases));
    ok = ok && (!a->split || set(o, command, "split", a->split));
    ok = ok && (!a->schedule || set(o, command, "pipelineSchedule", a->schedule));
    ok = ok && set_int(o, command, "replicationFactor", a->replicas);
    ok = ok && set_int(o, command, "devices", a->devices);
    ok = ok && set_int(o, command, "threadsPerDevice", a->threads);
    ok = ok && set_int(o, command, "memoryPerDevice", a->memory);
    ok = ok && set_int(o, command, "randomSeed", a->seed);
    ok = ok && (!a->precision || set(o, command, "precision", a->precision));
    ok = ok && (!a->loss_scaling || set(o, command, "lossScaling", a->loss_scaling));
    ok = ok && (!a->loss_scale || set(o, command, "lossScalingFactor", a->loss_scale));
    ok = ok && (!a->accum_type || set(o, command, "accumType", a->accum_type));
    ok =
        ok && (!a->first_moment || set(o, command, "firstOrderMomentumAccumType", a->first_moment));
    ok = ok &&
         (!a->second_moment || set(o, command, "secondOrderMomentumAccumType", a->second_moment));
    if (a->stochastic_rounding && a->round_to_nearest) {
        fprintf(stderr,
                "tilegraph %s: --stochastic-rounding and --no-stochastic-rounding contradict each "
                "other: give one\n",
                command);
        ok = false;
    }
    ok = ok &&
         (!a->stochastic_rounding || set(o, command, "Precision.enableStochasticRounding", "true"));
    ok = ok &&
         (!a->round_to_nearest || set(o, command, "Precision.enableStochasticRounding", "false"));
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
    ok = ok &&
         (!a->executable_cache || set(o, command, "enableExecutableCaching", a->executable_cache));
    /* the file holds one program: train's, not that of its evaluation session */
    ok = ok && (!a->executable || inference || set(o, command, "executableFile", a->executable));
    if (a->offload_optimizer)
        ok = ok && set(o, command, "TensorLocations.optimizer.onChip", "false");
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
        ok = ok && set_int(o, command, "Training.gradientAccumulation", a->accumulation);
        ok = ok && set_int(o, command, "deviceIterations", a->iterations);
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
