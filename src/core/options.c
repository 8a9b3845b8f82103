/* core/options.c - the option table and validated key/value storage.
 *
 * One table lists every option with its type, default, limits and purpose;
 * everything else (parsing, errors, --help, docs) is derived from it.
 */
#include "tilegraph/options.h"

#include "tilegraph/devices.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* OPT_NAMES: a comma-separated list of names, none empty; with `values`,
 * each one of them ("*" among them for "every"). A name that would select
 * nothing is refused rather than silently ignored. OPT_TARGET: the name of a
 * target, not empty; whether it is registered is checked when compiling
 * (tg_target_check, tilegraph/devices.h), where the config meets the
 * targets: core sits below target/ and calls nothing of it, and adding a
 * target does not touch this table.
 * OPT_GROUPS: groups of names, "B1,B2|B3,B4": groups separated by single
 * bars, names by single commas, none empty (as OPT_NAMES refuses "a,,b",
 * so stages and phases refuse "B1||B2" rather than read it as "B1|B2"). */
typedef enum {
    OPT_INT,
    OPT_FLOAT,
    OPT_BOOL,
    OPT_ENUM,
    OPT_STRING,
    OPT_NAMES,
    OPT_GROUPS,
    OPT_TARGET
} opt_type;

/* flag: the `tilegraph` command-line flag that sets the option ("--replicas"),
 * or the flag and the value that does ("--offload weights"); NULL when only
 * --options FILE and --engine-option KEY=VALUE set it. arg: the flag's
 * placeholder ("N"), NULL for a flag that takes no value and sets "true". The
 * commands generate their flags from this row (tools/device_flags.c: name,
 * placeholder, help, default and an integer's range), messages quote it, and
 * docs/options.md shows it, so a flag is spelt in this one place. */
typedef struct {
    const char *key;
    const char *flag;
    const char *arg; /* the flag's placeholder in --help ("N"); NULL: the flag takes no value */
    opt_type type;
    const char *def;
    double min, max;    /* OPT_INT, OPT_FLOAT */
    const char *values; /* OPT_ENUM, OPT_NAMES: "a|b|c" */
    const char *help;
} opt_spec;

static const opt_spec option_table[] = {
    {"randomSeed", "--seed", "N", OPT_INT, "0", 0, 9.2e18, NULL,
     "seed for parameter initialisation, shuffling and dropout"},
    {"target", "--target", "NAME", OPT_TARGET, "cpu", 0, 0, NULL,
     "the device type to compile for: cpu, or a simulated tile processor such as mk2 "
     "(`tilegraph devices` lists the targets; docs/targets.md)"},
    {"targetDescription", "--target-description", "FILE", OPT_STRING, "", 0, 0, NULL,
     "target mk2 (a target that takes a description): a JSON file describing another tile "
     "processor (docs/targets.md); empty: the target's own numbers"},
    {"threadsPerDevice", "--threads-per-device", "N", OPT_INT, "0", -1, 1024, NULL,
     "threads each device computes with (0: the cores this process may use, shared among all "
     "devices and replicas, so a run's bits do not depend on the machine's load; -1: the "
     "cores free at compile time, shared the same way; see docs/multi-device.md, Threads)"},
    {"debug.checkNaN", NULL, NULL, OPT_BOOL, "true", 0, 0, NULL,
     "after every micro-batch, fail with a message naming the output if a scalar output "
     "(a loss) is NaN or infinite"},
    {"executionStrategy", "--strategy", "KIND", OPT_ENUM, "auto", 0, 0,
     "auto|single|pipelined|sharded|phased",
     "single: the whole model on one device; pipelined: stages on devices, all busy once the "
     "pipeline is full; sharded: stages on devices, one micro-batch at a time; phased: the "
     "phases of the model one after another on one device, each with its own memory (with "
     "TensorLocations off chip, its weights streamed in for it); auto: phased when phases are "
     "given, pipelined when split, stages or devices > 1 say how to divide the model, else "
     "single"},
    {"phases", "--phases", "SPEC", OPT_GROUPS, "", 0, 0, NULL,
     "executionStrategy phased: blocks grouped into phases, run in this order: \"B1|B2|B3|B4\" "
     "or \"B1,B2|B3,B4\"; \"B3@1\" puts a phase on device 1; \"auto\": the compiler chooses the "
     "phases' devices (up to devices) and the TensorLocations off chip, the fitting plan with the "
     "fewest copies (docs/memory-locations.md)"},
    {"phasedExecutionType", "--phased-execution-type", "TYPE", OPT_ENUM, "SingleIPU", 0, 0,
     "SingleIPU|ParallelIPU",
     "executionStrategy phased: SingleIPU runs each phase on one device (device 0, the one it "
     "names, or spread in order over devices); ParallelIPU alternates the phases over two "
     "devices, even ones on device 0, odd ones on device 1, so one device loads its next "
     "phase's weights while the other computes (docs/memory-locations.md)"},
    {"pipelineSchedule", "--schedule", "KIND", OPT_ENUM, "grouped", 0, 0,
     "grouped|interleaved|gpipe|1f1b|zb-h1|zb-h2",
     "order of forward and backward passes of the micro-batches on each device (pipelined); "
     "zb-h1 and zb-h2 split each backward into the input gradient, sent at once, and the "
     "weight gradient, run after it (zb-h2: later, with more micro-batches in flight)"},
    {"stages", "--stages", "SPEC", OPT_GROUPS, "", 0, 0, NULL,
     "blocks grouped into stages, stage i on device i: \"B1,B2|B3,B4\" (empty: one stage per "
     "block), a block from one of its ops on as BLOCK:OP (\"B1,B2|B2:layer2/relu,B3\"), a "
     "stage whose first convolution's input gradient the stage before computes as <BLOCK "
     "(\"B1|<B2,B3\"); \"auto\": the cost model's best split over devices, inside a block "
     "or handing an input gradient back where that balances (docs/multi-device.md); when none "
     "fits, the compile error names the phased plan that would"},
    {"split", "--split", "LAYERS", OPT_NAMES, "", 0, 0, NULL,
     "start a new block at each named layer, like BeginBlock: \"layer3.8\" or \"layer2,layer4\"; "
     "\"auto\": the cost model's best split at layer boundaries over devices"},
    {"devices", "--devices", "N", OPT_INT, "0", 0, TG_MAX_DEVICES, NULL,
     "devices available (0: one per stage)"},
    {"autoStages.memoryMargin", NULL, NULL, OPT_FLOAT, "0.1", 0, 0.9, NULL,
     "stages auto / split auto: the share of memoryPerDevice the memory estimate leaves free for "
     "what the memory plan adds (raised by 0.1 and the search run again when a chosen split does "
     "not fit the plan)"},
    {"memoryPerDevice", "--memory-per-device", "BYTES", OPT_INT, "0", 0, 9.2e18, NULL,
     "device memory capacity in bytes (0: unlimited); a plan that does not fit fails to compile"},
    {"replicationFactor", "--replicas", "N", OPT_INT, "1", 1, 64, NULL,
     "replicas of the whole model; gradients are averaged across them before each update"},
    {"distributed.instances", NULL, NULL, OPT_INT, "1", 1, 64, NULL,
     "instances of an MPI job that share replicationFactor: set by the session under mpirun "
     "(each instance then runs replicationFactor / instances replicas; docs/distributed.md), "
     "not by users"},
    {"distributed.gradientBucketBytes", NULL, NULL, OPT_INT, "262144", 0, 2147483647, NULL,
     "in an MPI job of one replica per instance (and device): the gradients go to the other "
     "instances in buckets of about this many bytes, each as soon as the backward has finished "
     "it, overlapping the rest of the backward (docs/distributed.md); 0: all at once after the "
     "backward. Results are the same bit for bit"},
    {"distributed.gradientWireType", NULL, NULL, OPT_ENUM, "float32", 0, 0, "float32|bfloat16",
     "in an MPI job: the type f32 gradients travel to the other instances in. bfloat16 halves "
     "the bytes on the wire (as PyTorch DDP's bf16_compress_hook); every instance, its own "
     "included, rounds its f32 gradient sums to bf16 before the exchange and the sum over the "
     "replicas is then taken in f32, so the result differs from float32's in the last bits "
     "(docs/distributed.md gives the error measured); float32 trains bit for bit as one process"},
    {"Training.gradientAccumulation", "--gradient-accumulation", "N", OPT_INT, "1", 1, 1e6, NULL,
     "micro-batches whose gradients are averaged into one weight update"},
    {"deviceIterations", "--device-iterations", "N", OPT_INT, "1", 1, 1e6, NULL,
     "weight updates (or inference batches) the devices run per host call"},
    {"outputMode", "--output-mode", "MODE", OPT_ENUM, "default", 0, 0,
     "default|all|sum|final|everyN",
     "which micro-batches' outputs come back to the host: all, their sum, the final one or every "
     "N-th (outputReturnPeriod); \"default\" is final when training, all for inference"},
    {"outputReturnPeriod", "--output-return-period", "N", OPT_INT, "1", 1, 1e6, NULL,
     "outputMode everyN: return every N-th iteration"},
    {"recomputation", "--recomputation", "KIND", OPT_ENUM, "none", 0, 0, "none|pipeline",
     "pipeline: each device keeps only its inputs and recomputation checkpoints for the backward "
     "pass and recomputes the other activations there (less stash, more compute)"},
    {"precision", "--precision", "IN.MODEL", OPT_ENUM, "32.32", 0, 0,
     "32.32|16.32|16.16|bf16.32|bf16.bf16|32.16|32.bf16",
     "storage types INPUT.MODEL: host-stream inputs, then weights, activations and gradients "
     "(kernels compute in f32 either way)"},
    {"accumType", "--accum-type", "TYPE", OPT_ENUM, "auto", 0, 0, "auto|f32|f16|bf16",
     "gradient accumulators' type (auto: the model's type)"},
    {"firstOrderMomentumAccumType", "--first-moment-type", "TYPE", OPT_ENUM, "f32", 0, 0,
     "f32|f16|bf16", "Adam's exp_avg and SGD's momentum buffer"},
    {"secondOrderMomentumAccumType", "--second-moment-type", "TYPE", OPT_ENUM, "f32", 0, 0,
     "f32|f16|bf16", "Adam's exp_avg_sq"},
    {"Precision.enableStochasticRounding", "--stochastic-rounding", NULL, OPT_ENUM, "auto", 0, 0,
     "auto|true|false|1|0",
     "round half-precision weight and optimizer-state updates stochastically, so updates "
     "smaller than half an ulp still move the weights on average (auto: when the update writes "
     "bf16 values, weights or optimizer state; f16 ones round to nearest as in PopTorch)"},
    {"lossScaling", "--loss-scaling", "KIND", OPT_ENUM, "none", 0, 0, "none|static|dynamic",
     "multiply the loss by lossScalingFactor before the backward pass and divide the gradients "
     "before the update; an update whose gradients overflow is skipped, and dynamic halves the "
     "factor then and doubles it after lossScalingGrowthInterval good updates"},
    {"lossScalingFactor", "--loss-scale", "F", OPT_FLOAT, "1024", 1e-30, 1e30, NULL,
     "the loss scale (static), or the starting one (dynamic)"},
    {"lossScalingGrowthInterval", NULL, NULL, OPT_INT, "200", 1, 1e9, NULL,
     "dynamic loss scaling: good updates in a row before the scale doubles"},
    {"numIOTiles", NULL, NULL, OPT_INT, "0", 0, 1 << 20, NULL,
     "tiled targets (mk2; ignored on cpu): tiles per device reserved for I/O, so that the next "
     "micro-batch's stream copy, and the streamed copies of off-chip tensors (TensorLocations), "
     "run while the other tiles compute; they must hold a micro-batch of the host-stream inputs "
     "per slot, and what room is left bounds how far ahead a copy starts (docs/targets.md)"},
    {"defaultPrefetchBufferingDepth", NULL, NULL, OPT_INT, "1", 1, 64, NULL,
     "micro-batches of host-stream input each device's buffers hold beyond those in flight, plus "
     "one; above 1 a host-stream thread fills the next ones while a device computes "
     "(docs/data.md, Host streams)"},
    {"availableMemoryProportion", NULL, NULL, OPT_FLOAT, "0.6", 0.001, 1, NULL,
     "the share of a device's memory one step's kernel scratch (im2col and the like) may take; "
     "a kernel over it is planned for one thread, which needs less (only with a capacity: "
     "memoryPerDevice or a tiled target)"},
    {"TensorLocations.optimizer.onChip", "--offload optimizer", NULL, OPT_BOOL, "true", 0, 0, NULL,
     "false: keep optimizer state in host memory and stream it in for each weight update "
     "(less device memory, more host traffic)"},
    {"TensorLocations.weight.onChip", "--offload weights", NULL, OPT_BOOL, "true", 0, 0, NULL,
     "false: keep the weights in host memory (streaming memory) and stream each in before the "
     "steps of a forward, backward or update pass that read it, and the updated one back "
     "(docs/memory-locations.md)"},
    {"TensorLocations.activation.onChip", "--offload activations", NULL, OPT_BOOL, "true", 0, 0,
     NULL,
     "false: activations kept from a micro-batch's forward pass to its backward pass are "
     "streamed to host memory after their last forward use and back before their first "
     "backward use"},
    {"TensorLocations.accumulator.onChip", "--offload accumulators", NULL, OPT_BOOL, "true", 0, 0,
     NULL,
     "false: gradient accumulators live in host memory: each micro-batch's gradients are added "
     "there and the sums streamed in for the weight update"},
    {"TensorLocations.weight.minElementsForOffChip", NULL, NULL, OPT_INT, "2", 0, 9.2e18, NULL,
     "with TensorLocations.weight.onChip=false: weights of fewer elements stay on the device"},
    {"TensorLocations.activation.minElementsForOffChip", NULL, NULL, OPT_INT, "2", 0, 9.2e18, NULL,
     "with TensorLocations.activation.onChip=false: activations of fewer elements stay on the "
     "device"},
    {"TensorLocations.accumulator.minElementsForOffChip", NULL, NULL, OPT_INT, "2", 0, 9.2e18, NULL,
     "with TensorLocations.accumulator.onChip=false: accumulators of fewer elements stay on the "
     "device"},
    {"TensorLocations.optimizer.minElementsForOffChip", NULL, NULL, OPT_INT, "2", 0, 9.2e18, NULL,
     "with TensorLocations.optimizer.onChip=false: optimizer state of fewer elements stays on "
     "the device"},
    {"TensorLocations.weight.minElementsForReplicatedTensorSharding", NULL, NULL, OPT_INT, "8192",
     0, 9.2e18, NULL,
     "with TensorLocations.weight.replicatedTensorSharding: weights of fewer elements are kept "
     "whole on every replica"},
    {"TensorLocations.weight.replicatedTensorSharding", "--shard weights", NULL, OPT_BOOL, "false",
     0, 0, NULL,
     "with replicas: each replica keeps 1/replicationFactor of every weight (and its optimizer "
     "state), all-gathers the whole weight into a buffer live for each pass that reads it and "
     "updates its share from the reduce-scattered gradient (ZeRO-3; less memory, a gather per "
     "pass; ignored with one replica; docs/memory-locations.md)"},
    {"TensorLocations.ioSchedule", NULL, NULL, OPT_ENUM, "onDemand", 0, 0, "onDemand|preload",
     "how the copies of tensors kept off chip run: onDemand: on the device's own thread when "
     "its step comes; preload: on an I/O thread per device, each step's loads while the steps "
     "before it compute (TensorLocations.preloadSteps) and its stores while the next one does, "
     "so a copy holds device memory over those steps too: time for memory"},
    {"TensorLocations.preloadSteps", NULL, NULL, OPT_INT, "4", 1, 64, NULL,
     "with TensorLocations.ioSchedule preload: how many steps ahead a step's loads start"},
    {"TensorLocations.optimizer.minElementsForReplicatedTensorSharding", NULL, NULL, OPT_INT,
     "8192", 0, 9.2e18, NULL,
     "with TensorLocations.optimizer.replicatedTensorSharding: optimizer state of fewer "
     "elements is kept whole on every replica"},
    /* engine options: also read from TILEGRAPH_ENGINE_OPTIONS, like POPLAR_ENGINE_OPTIONS */
    {"TensorLocations.optimizer.replicatedTensorSharding", "--shard optimizer", NULL, OPT_BOOL,
     "false", 0, 0, NULL,
     "with replicas: each replica keeps 1/replicationFactor of the optimizer state, updates that "
     "share of the weights and sends it to the others (less memory, an all-gather per update)"},
    {"autoReport.all", "--profile", NULL, OPT_BOOL, "false", 0, 0, NULL,
     "write the graph and the execution profile of every compiled program"},
    {"autoReport.outputGraphProfile", NULL, NULL, OPT_BOOL, "false", 0, 0, NULL,
     "write the graph profile (memory plan, liveness, program tree)"},
    {"autoReport.outputExecutionProfile", NULL, NULL, OPT_BOOL, "false", 0, 0, NULL,
     "write the execution profile (the timed steps of the first runs)"},
    {"autoReport.directory", "--profile-dir", "DIR", OPT_STRING, "./report", 0, 0, NULL,
     "where profiles go: DIR/training/profile.sqlite, DIR/inference/profile.sqlite"},
    {"autoReport.executionProfileProgramRunCount", NULL, NULL, OPT_INT, "2", 1, 1e6, NULL,
     "host steps whose execution is recorded (the first N), so profiles stay small"},
    {"profiler.includeFlopEstimates", NULL, NULL, OPT_BOOL, "true", 0, 0, NULL,
     "record FLOP counts per op and per executed step"},
    {"trace.enable", NULL, NULL, OPT_BOOL, "false", 0, 0, NULL,
     "record the host trace (as TILEGRAPH_TRACE does), from the first session created with it"},
    {"trace.directory", NULL, NULL, OPT_STRING, ".", 0, 0, NULL, "where the host trace files go"},
    {"trace.channels", NULL, NULL, OPT_NAMES, "*", 0, 0, "compile|engine|data|comms|*",
     "channels to record, comma-separated (compile, engine, data, comms), or *"},
    {"monitor.enable", NULL, NULL, OPT_BOOL, "true", 0, 0, NULL,
     "keep this process's record in the registry `tilegraph monitor` lists (docs/monitor.md); "
     "TILEGRAPH_MONITOR=0 also turns it off"},
    {"streamCallbacks.multiThreadMode", NULL, NULL, OPT_ENUM, "none", 0, 0,
     "none|collaborative|dedicated",
     "with defaultPrefetchBufferingDepth above 1, the threads that fill the host streams: none, "
     "one for every device and replica; collaborative, streamCallbacks.numWorkerThreads of them; "
     "dedicated, one per device and replica that streams inputs"},
    {"streamCallbacks.numWorkerThreads", NULL, NULL, OPT_INT, "0", 0, 64, NULL,
     "multiThreadMode collaborative: the host-stream threads (0: one per device and replica that "
     "streams inputs)"},
    {"enableExecutableCaching", "--executable-cache", "DIR", OPT_STRING, "", 0, 0, NULL,
     "a directory of compiled programs keyed by graph, options, target and version: a hit is "
     "loaded instead of compiled (docs/executable-cache.md); empty: off"},
    {"executableFile", "--executable", "FILE", OPT_STRING, "", 0, 0, NULL,
     "a compiled program file: loaded when it matches the graph and options, else compiled "
     "and written there (docs/executable-cache.md); empty: off"},
    {"debug.allowOutOfMemory", NULL, NULL, OPT_BOOL, "false", 0, 0, NULL,
     "compile a plan that does not fit the device memory anyway, so it can be looked at"},
    {"debug.verifyAgainstReference", NULL, NULL, OPT_BOOL, "false", 0, 0, NULL,
     "check the first run tensor by tensor against the reference (every fast path off: "
     "double-precision reference kernels, NCHW) and fail it naming the first tensor beyond "
     "tolerance (docs/numerics.md)"},
    {"debug.verifyTolerance", NULL, NULL, OPT_FLOAT, "32", 1e-3, 1e9, NULL,
     "factor on the tolerances of debug.verifyAgainstReference and `tilegraph check`: "
     "factor x magnitude x (2^-24 x sqrt(reduction length) + the storage type's roundoff)"},
};

#define N_OPTIONS ((int)(sizeof option_table / sizeof option_table[0]))

struct tg_options {
    char *values[N_OPTIONS];
};

int tg_options_count(void)
{
    return N_OPTIONS;
}
const char *tg_options_key(int i)
{
    return i >= 0 && i < N_OPTIONS ? option_table[i].key : NULL;
}
const char *tg_options_default(int i)
{
    return i >= 0 && i < N_OPTIONS ? option_table[i].def : NULL;
}
const char *tg_options_description(int i)
{
    return i >= 0 && i < N_OPTIONS ? option_table[i].help : NULL;
}

static int find_option(const char *key)
{
    for (int i = 0; key && i < N_OPTIONS; i++)
        if (strcmp(option_table[i].key, key) == 0)
            return i;
    return -1;
}

tg_options *tg_options_create(void)
{
    return tg_calloc(1, sizeof(tg_options));
}

void tg_options_destroy(tg_options *o)
{
    if (!o)
        return;
    for (int i = 0; i < N_OPTIONS; i++)
        tg_free(o->values[i]);
    tg_free(o);
}

tg_options *tg_options_clone(const tg_options *o)
{
    tg_options *c = tg_options_create();
    for (int i = 0; c && o && i < N_OPTIONS; i++)
        if (o->values[i] && !(c->values[i] = tg_strdup(o->values[i]))) {
            tg_options_destroy(c);
            return NULL;
        }
    return c;
}

int tg_options_name_distance(const char *a, size_t n, const char *b)
{
    size_t m = strlen(b);
    if (n > 63 || m > 63)
        return 99;
    int row[64];
    for (size_t j = 0; j <= m; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[m];
}

/* The part of a key after its last dot ("onChip" of "TensorLocations.weight.onChip"). */
static const char *last_part(const char *key)
{
    const char *dot = strrchr(key, '.');
    return dot ? dot + 1 : key;
}

/* The option named most like key (a misspelling), or NULL. The table is
 * too long to list whole in one message: `tilegraph options` lists it.
 * First the one option whose last part is key's (a prefix put where none
 * belongs, TensorLocations.numIOTiles, or one left out,
 * gradientAccumulation), then the nearest by edit distance. */
static const char *nearest_key(const char *key)
{
    const char *same = NULL;
    int n_same = 0;
    for (int i = 0; key && i < N_OPTIONS; i++)
        if (strcmp(last_part(key), last_part(option_table[i].key)) == 0)
            same = option_table[i].key, n_same++;
    if (n_same == 1)
        return same;
    const char *best = NULL;
    int len = key ? (int)strlen(key) : 0, best_d = (len / 3 > 2 ? len / 3 : 2) + 1;
    for (int i = 0; key && i < N_OPTIONS; i++) {
        int d = tg_options_name_distance(key, strlen(key), option_table[i].key);
        if (d < best_d)
            best_d = d, best = option_table[i].key;
    }
    return best;
}

static tg_status unknown_key(const char *key)
{
    const char *near = nearest_key(key);
    char hint[160] = "";
    if (near)
        snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    char list[2048];
    size_t used = 0;
    list[0] = '\0';
    for (int i = 0; i < N_OPTIONS && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 option_table[i].key);
    return tg_error(TG_ERR_CONFIG, "unknown option '%s'%s; `tilegraph options` lists them all: %s",
                    key ? key : "(null)", hint, list);
}

static int enum_has(const char *values, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = values; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0)
            return 1;
        p = bar ? bar + 1 : NULL;
    }
    return 0;
}

/* An OPT_NAMES value: "" (none) or names separated by single commas. */
static tg_status check_names(const opt_spec *s, const char *v)
{
    if (!*v)
        return TG_OK;
    for (const char *p = v;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0)
            return tg_error(TG_ERR_CONFIG,
                            "option '%s': '%s' has an empty name (a comma at the start, the end "
                            "or doubled): give names separated by single commas",
                            s->key, v);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        if (s->values && !enum_has(s->values, name))
            return tg_error(TG_ERR_CONFIG,
                            "option '%s': '%s' is not one of %s; it would select nothing", s->key,
                            name, s->values);
        if (!comma)
            return TG_OK;
        p = comma + 1;
    }
}

/* An OPT_GROUPS value: "" (none) or groups of names ("B1,B2|B3@1"). */
static tg_status check_groups(const opt_spec *s, const char *v)
{
    if (!*v)
        return TG_OK;
    for (const char *p = v;; p++) {
        const char *end = p + strcspn(p, ",|");
        if (end == p)
            return tg_error(TG_ERR_CONFIG,
                            "option '%s': '%s' has an empty name or group (a comma or bar at the "
                            "start, the end or doubled): give names separated by single commas, "
                            "groups by single bars (\"B1,B2|B3,B4\")",
                            s->key, v);
        if (!*end)
            return TG_OK;
        p = end;
    }
}

/* A target's name: whether it is registered is asked where the config meets
 * the targets (tg_target_check, when compiling), as core sits below them. */
static tg_status check_target(const opt_spec *s, const char *v)
{
    if (*v)
        return TG_OK;
    return tg_error(TG_ERR_CONFIG,
                    "option '%s': an empty name is not a target (`tilegraph devices` lists them)",
                    s->key);
}

static tg_status check_value(const opt_spec *s, const char *v)
{
    char *end = NULL;
    errno = 0;
    switch (s->type) {
    case OPT_INT: {
        long long x = strtoll(v, &end, 10);
        if (*v && (*end || errno)) {
            /* 1e23 or 99999999999999999999: a number, but out of range or
             * written as a float; say which rather than "not an integer". */
            char *fend = NULL;
            double d = strtod(v, &fend);
            if (fend != v && !*fend && isfinite(d) && d == floor(d))
                return tg_error(TG_ERR_CONFIG, "option '%s': %s is outside [%.0f, %.0f]", s->key, v,
                                s->min, s->max);
        }
        if (!*v || *end || errno)
            return tg_error(TG_ERR_CONFIG, "option '%s': '%s' is not an integer", s->key, v);
        if ((double)x < s->min || (double)x > s->max)
            return tg_error(TG_ERR_CONFIG, "option '%s': %lld is outside [%.0f, %.0f]", s->key, x,
                            s->min, s->max);
        return TG_OK;
    }
    case OPT_FLOAT: {
        double x = strtod(v, &end);
        /* ERANGE on underflow (1e-320) still parses a number: judge it by the range */
        if (*v && !*end && errno == ERANGE && fabs(x) < 1.0)
            errno = 0;
        if (!*v || *end || errno)
            return tg_error(TG_ERR_CONFIG, "option '%s': '%s' is not a number", s->key, v);
        if (!(x >= s->min && x <= s->max)) /* NaN fails both */
            return tg_error(TG_ERR_CONFIG, "option '%s': %s is outside [%g, %g]", s->key, v, s->min,
                            s->max);
        return TG_OK;
    }
    case OPT_BOOL:
        if (strcmp(v, "true") && strcmp(v, "false") && strcmp(v, "1") && strcmp(v, "0"))
            return tg_error(TG_ERR_CONFIG, "option '%s': '%s' is not true or false", s->key, v);
        return TG_OK;
    case OPT_STRING:
        return TG_OK;
    case OPT_NAMES:
        return check_names(s, v);
    case OPT_GROUPS:
        return check_groups(s, v);
    case OPT_TARGET:
        return check_target(s, v);
    case OPT_ENUM:
        if (!enum_has(s->values, v))
            return tg_error(TG_ERR_CONFIG, "option '%s': '%s' is not one of %s", s->key, v,
                            s->values);
        return TG_OK;
    }
    return TG_OK;
}

tg_status tg_options_set(tg_options *o, const char *key, const char *value)
{
    int i = find_option(key);
    if (i < 0)
        return unknown_key(key);
    if (!value)
        return tg_error(TG_ERR_CONFIG, "option '%s': no value", key);
    TG_TRY(check_value(&option_table[i], value));
    char *copy = tg_strdup(value);
    if (!copy)
        return tg_error(TG_ERR_NOMEM, "option '%s': out of memory", key);
    tg_free(o->values[i]);
    o->values[i] = copy;
    return TG_OK;
}

tg_status tg_options_set_int(tg_options *o, const char *key, int64_t value)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)value);
    return tg_options_set(o, key, buf);
}

static const char *value_of(const tg_options *o, const char *key)
{
    int i = find_option(key);
    if (i < 0)
        return NULL;
    return o && o->values[i] ? o->values[i] : option_table[i].def;
}

int64_t tg_options_get_int(const tg_options *o, const char *key)
{
    const char *v = value_of(o, key);
    if (!v)
        return 0;
    if (!strcmp(v, "true"))
        return 1;
    if (!strcmp(v, "false"))
        return 0;
    return strtoll(v, NULL, 10);
}

double tg_options_get_float(const tg_options *o, const char *key)
{
    const char *v = value_of(o, key);
    return v ? strtod(v, NULL) : 0.0;
}

const char *tg_options_get_string(const tg_options *o, const char *key)
{
    const char *v = value_of(o, key);
    return v ? v : "";
}

/* The shortest %g text that reads back as v ("1e+23", not
 * "9.9999999999999992e+22"), so messages quote what the user wrote. */
static void shortest(char *buf, size_t cap, double v)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

bool tg_options_is_engine(const char *key)
{
    static const char *const prefixes[] = {"autoReport.", "profiler.", "trace.",
                                           "debug.",      "monitor.",  "streamCallbacks."};
    for (size_t i = 0; key && i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(key, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

const char *tg_options_flag(const char *key)
{
    int i = find_option(key);
    return i < 0 ? NULL : option_table[i].flag;
}

const char *tg_options_flag_arg(int i)
{
    return i >= 0 && i < N_OPTIONS ? option_table[i].arg : NULL;
}

const char *tg_options_values(int i)
{
    return i >= 0 && i < N_OPTIONS && option_table[i].type == OPT_ENUM ? option_table[i].values
                                                                       : NULL;
}

bool tg_options_int_range(int i, double *min, double *max)
{
    if (i < 0 || i >= N_OPTIONS || option_table[i].type != OPT_INT)
        return false;
    *min = option_table[i].min;
    *max = option_table[i].max;
    return true;
}

/* Options text as a JSON object (anything else is refused, naming source). */
static tg_status parse_options_object(tg_arena *arena, const char *json, const char *source,
                                      tg_json **root)
{
    tg_status s = tg_json_parse(arena, json, strlen(json), source, root);
    if (s == TG_OK && (*root)->type != TG_JSON_OBJECT)
        s = tg_error(TG_ERR_CONFIG, "%s: options must be a JSON object, not %s", source,
                     tg_json_type_name((*root)->type));
    return s;
}

/* Set every key of the parsed object `root` on o, in order; stops at the
 * first bad one (earlier keys stay set: callers wanting all or nothing apply
 * it to a clone). */
static tg_status apply_options_object(tg_options *o, const tg_json *root, const char *source)
{
    tg_status s = TG_OK;
    for (size_t i = 0; s == TG_OK && i < root->count; i++) {
        const char *key = root->keys[i];
        const tg_json *v = root->items[i];
        char buf[64];
        const char *text = NULL;
        if (strlen(key) != root->key_lens[i] ||
            (v->type == TG_JSON_STRING && strlen(v->string) != v->len))
            return tg_error(TG_ERR_CONFIG,
                            "%s:%d:%d: option '%s': its string holds a NUL character (\\u0000), "
                            "which would cut it short: options are text without NUL",
                            source, v->line, v->col, key);
        if (v->type == TG_JSON_STRING) {
            text = v->string;
        } else if (v->type == TG_JSON_NUMBER) {
            if (v->is_int)
                snprintf(buf, sizeof buf, "%lld", (long long)v->integer);
            else
                shortest(buf, sizeof buf, v->number);
            text = buf;
        } else if (v->type == TG_JSON_BOOL) {
            text = v->boolean ? "true" : "false";
        } else {
            return tg_error(TG_ERR_CONFIG,
                            "%s:%d:%d: option '%s' must be a string, number or boolean", source,
                            v->line, v->col, key);
        }
        s = tg_options_set(o, key, text);
        if (s != TG_OK)
            tg_error_prefix(s, "%s", source);
    }
    return s;
}

/* Why a key of the engine-options text that is not an engine option is
 * refused: the engine does not see these, since the command sized its loader
 * and schedule from the program's own options, so taking them here would
 * silently train on something else. */
static tg_status not_an_engine_option(const char *key, const char *source)
{
    if (find_option(key) < 0)
        return tg_error_prefix(unknown_key(key), "%s", source);
    const char *flag = tg_options_flag(key);
    const char *what = "is not an engine option (only autoReport.*, profiler.*, trace.*, debug.* "
                       "and monitor.* are read from here)";
    if (flag)
        return tg_error(TG_ERR_CONFIG, "%s: '%s' %s; set it with %s or in --options FILE", source,
                        key, what, flag);
    return tg_error(TG_ERR_CONFIG,
                    "%s: '%s' %s; set it with --options FILE or --engine-option %s=VALUE", source,
                    key, what, key);
}

tg_status tg_options_set_engine_json(tg_options *o, const char *json, const char *source)
{
    tg_arena *arena = tg_arena_create(16 * 1024);
    if (!arena)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", source);
    tg_json *root = NULL;
    tg_options *c = NULL;
    tg_status s = parse_options_object(arena, json, source, &root);
    for (size_t i = 0; s == TG_OK && i < root->count; i++)
        if (!tg_options_is_engine(root->keys[i]))
            s = not_an_engine_option(root->keys[i], source);
    /* All or nothing: a bad value after good ones must not half-apply. */
    if (s == TG_OK && !(c = tg_options_clone(o)))
        s = tg_error(TG_ERR_NOMEM, "%s: out of memory", source);
    if (s == TG_OK && (s = apply_options_object(c, root, source)) == TG_OK)
        for (int i = 0; i < N_OPTIONS; i++) {
            char *t = o->values[i];
            o->values[i] = c->values[i];
            c->values[i] = t;
        }
    tg_options_destroy(c);
    tg_arena_destroy(arena);
    return s;
}

tg_status tg_options_set_json(tg_options *o, const char *json, const char *source)
{
    tg_arena *arena = tg_arena_create(16 * 1024);
    if (!arena)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", source);
    tg_json *root = NULL;
    tg_status s = parse_options_object(arena, json, source, &root);
    if (s == TG_OK)
        s = apply_options_object(o, root, source);
    tg_arena_destroy(arena);
    return s;
}
