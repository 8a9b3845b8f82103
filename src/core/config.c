/* core/config.c - the options read once into tg_config (core/config.h).
 *
 * The only file besides core/options.c that looks an option up by its name
 * (scripts/check_options.sh): a new option gets a field here and is read
 * here, and the code that uses it reads the field.
 */
#include "core/config.h"

#include "core/error.h"

#include <stdio.h>
#include <string.h>

static const char *text(const tg_config *c, const char *key)
{
    return tg_options_get_string(c->options, key);
}

static int64_t integer(const tg_config *c, const char *key)
{
    return tg_options_get_int(c->options, key);
}

static bool flag(const tg_config *c, const char *key)
{
    return tg_options_get_int(c->options, key) != 0;
}

/* executionStrategy auto: pipelined when split, stages or devices > 1 say
 * how to divide the model, else single. */
static void read_pipeline(tg_config *c)
{
    c->pipeline.asked_strategy = text(c, "executionStrategy");
    c->pipeline.schedule = text(c, "pipelineSchedule");
    c->pipeline.stages = text(c, "stages");
    c->pipeline.split = text(c, "split");
    c->pipeline.phases = text(c, "phases");
    c->pipeline.phased_type = text(c, "phasedExecutionType");
    c->pipeline.devices = (int)integer(c, "devices");
    c->pipeline.auto_stages =
        !strcmp(c->pipeline.stages, "auto") || !strcmp(c->pipeline.split, "auto");
    bool divided = *c->pipeline.split || *c->pipeline.stages || c->pipeline.devices > 1;
    c->pipeline.strategy = strcmp(c->pipeline.asked_strategy, "auto") ? c->pipeline.asked_strategy
                           : *c->pipeline.phases                      ? "phased"
                           : divided                                  ? "pipelined"
                                                                      : "single";
    c->pipeline.memory_margin = tg_options_get_float(c->options, "autoStages.memoryMargin");
    c->pipeline.replicas = (int)integer(c, "replicationFactor");
    c->pipeline.accumulation = (int)integer(c, "Training.gradientAccumulation");
    c->pipeline.device_iterations = (int)integer(c, "deviceIterations");
    c->distributed.instances = (int)integer(c, "distributed.instances");
    c->distributed.bucket_bytes = integer(c, "distributed.gradientBucketBytes");
    c->distributed.wire_bf16 = !strcmp(text(c, "distributed.gradientWireType"), "bfloat16");
    c->output.mode = text(c, "outputMode");
    c->output.period = (int)integer(c, "outputReturnPeriod");
}

const char *tg_tensor_kind_name(tg_tensor_kind k)
{
    static const char *const names[TG_TENSOR_KINDS] = {"weight", "activation", "accumulator",
                                                       "optimizer"};
    return k >= 0 && k < TG_TENSOR_KINDS ? names[k] : "?";
}

/* TensorLocations.<kind>.*: options a kind does not have keep their
 * defaults (on chip, not sharded). */
static void read_locations(tg_config *c)
{
    for (int k = 0; k < TG_TENSOR_KINDS; k++) {
        tg_tensor_location *l = &c->memory.location[k];
        char key[96];
        const char *name = tg_tensor_kind_name((tg_tensor_kind)k);
        snprintf(key, sizeof key, "TensorLocations.%s.onChip", name);
        l->off_chip = !flag(c, key);
        snprintf(key, sizeof key, "TensorLocations.%s.minElementsForOffChip", name);
        l->min_off_chip = integer(c, key);
        snprintf(key, sizeof key, "TensorLocations.%s.replicatedTensorSharding", name);
        bool shardable = k == TG_TENSOR_OPTIMIZER || k == TG_TENSOR_WEIGHT;
        l->sharded = shardable && flag(c, key);
        snprintf(key, sizeof key, "TensorLocations.%s.minElementsForReplicatedTensorSharding",
                 name);
        l->min_sharded = shardable ? integer(c, key) : 0;
    }
}

static void read_memory_and_precision(tg_config *c)
{
    read_locations(c);
    c->memory.preload = !strcmp(text(c, "TensorLocations.ioSchedule"), "preload");
    c->memory.preload_steps = (int)integer(c, "TensorLocations.preloadSteps");
    c->memory.per_device = integer(c, "memoryPerDevice");
    c->memory.available_proportion = tg_options_get_float(c->options, "availableMemoryProportion");
    c->recompute.pipeline = !strcmp(text(c, "recomputation"), "pipeline");
    c->precision.precision = text(c, "precision");
    c->precision.accum = text(c, "accumType");
    c->precision.first_moment = text(c, "firstOrderMomentumAccumType");
    c->precision.second_moment = text(c, "secondOrderMomentumAccumType");
    const char *sr = "Precision.enableStochasticRounding"; /* auto, or true/false as flags are */
    c->precision.stochastic_rounding = !strcmp(text(c, sr), "auto") ? -1 : flag(c, sr);
    c->precision.loss_scaling = text(c, "lossScaling");
    c->precision.loss_scale = tg_options_get_float(c->options, "lossScalingFactor");
    c->precision.growth_interval = (int)integer(c, "lossScalingGrowthInterval");
}

/* Engine options: where reports, traces and programs go. */
static void read_engine(tg_config *c)
{
    bool all = flag(c, "autoReport.all");
    c->report.graph = all || flag(c, "autoReport.outputGraphProfile");
    c->report.execution = all || flag(c, "autoReport.outputExecutionProfile");
    c->report.directory = text(c, "autoReport.directory");
    c->report.run_count = (int)integer(c, "autoReport.executionProfileProgramRunCount");
    c->report.flops = flag(c, "profiler.includeFlopEstimates");
    c->trace.enable = flag(c, "trace.enable");
    c->trace.directory = text(c, "trace.directory");
    c->trace.channels = text(c, "trace.channels");
    c->monitor = flag(c, "monitor.enable");
    c->executable.cache_dir = text(c, "enableExecutableCaching");
    c->executable.file = text(c, "executableFile");
    c->debug.check_nan = flag(c, "debug.checkNaN");
    c->debug.allow_out_of_memory = flag(c, "debug.allowOutOfMemory");
    c->debug.verify = flag(c, "debug.verifyAgainstReference");
    c->debug.verify_tolerance = tg_options_get_float(c->options, "debug.verifyTolerance");
}

/* Host-stream prefetch: multiThreadMode none is one thread for every
 * stream, dedicated one per stream (0), collaborative numWorkerThreads. */
static void read_streams(tg_config *c)
{
    c->streams.prefetch_depth = (int)integer(c, "defaultPrefetchBufferingDepth");
    const char *mode = text(c, "streamCallbacks.multiThreadMode");
    if (!strcmp(mode, "none"))
        c->streams.threads = 1;
    else if (!strcmp(mode, "dedicated"))
        c->streams.threads = 0;
    else
        c->streams.threads = (int)integer(c, "streamCallbacks.numWorkerThreads");
}

/* Every field from c->options (host_instances is not an option: kept). */
static tg_status read_fields(tg_config *c)
{
    c->seed = (uint64_t)integer(c, "randomSeed");
    c->target.name = text(c, "target");
    c->target.description = text(c, "targetDescription");
    c->target.io_tiles = (int)integer(c, "numIOTiles");
    read_streams(c);
    c->threads.per_device = (int)integer(c, "threadsPerDevice");
    read_pipeline(c);
    read_memory_and_precision(c);
    read_engine(c);
    return TG_OK;
}

tg_status tg_config_read(const tg_options *o, tg_config *out)
{
    memset(out, 0, sizeof *out);
    out->options = o ? tg_options_clone(o) : tg_options_create();
    if (!out->options)
        return tg_error(TG_ERR_NOMEM, "options: out of memory");
    out->threads.host_instances = 1;
    tg_status s = read_fields(out);
    if (s != TG_OK)
        tg_config_free(out);
    return s;
}

tg_status tg_config_set(tg_config *c, const char *key, const char *value)
{
    tg_config next = *c;
    next.options = tg_options_clone(c->options);
    if (!next.options)
        return tg_error(TG_ERR_NOMEM, "options: out of memory");
    tg_status s = tg_options_set(next.options, key, value);
    if (s == TG_OK)
        s = read_fields(&next);
    if (s != TG_OK) {
        tg_options_destroy(next.options);
        return s;
    }
    tg_options_destroy(c->options);
    *c = next;
    return TG_OK;
}

tg_status tg_config_copy(const tg_config *src, tg_config *out)
{
    TG_TRY(tg_config_read(src->options, out));
    out->threads.host_instances = src->threads.host_instances;
    out->pipeline.memory_margin = src->pipeline.memory_margin;
    return TG_OK;
}

void tg_config_free(tg_config *c)
{
    if (!c)
        return;
    tg_options_destroy(c->options);
    memset(c, 0, sizeof *c);
}

const char *tg_config_text(const tg_config *c, int index)
{
    const char *key = tg_options_key(index);
    return key ? tg_options_get_string(c->options, key) : NULL;
}

int64_t tg_config_samples_per_update(const tg_config *c, int64_t batch)
{
    return batch * c->pipeline.accumulation * c->pipeline.replicas;
}

int64_t tg_config_samples_per_step(const tg_config *c, int64_t batch)
{
    return tg_config_samples_per_update(c, batch) * c->pipeline.device_iterations;
}

tg_status tg_options_summarize(const tg_options *o, int64_t batch, tg_options_summary *out)
{
    tg_config c;
    memset(out, 0, sizeof *out);
    TG_TRY(tg_config_read(o, &c));
    snprintf(out->strategy, sizeof out->strategy, "%s", c.pipeline.strategy);
    snprintf(out->output_mode, sizeof out->output_mode, "%s", c.output.mode);
    out->replicas = c.pipeline.replicas;
    out->samples_per_update = tg_config_samples_per_update(&c, batch);
    out->samples_per_step = tg_config_samples_per_step(&c, batch);
    snprintf(out->target, sizeof out->target, "%s", c.target.name);
    snprintf(out->precision, sizeof out->precision, "%s", c.precision.precision);
    snprintf(out->accum_type, sizeof out->accum_type, "%s", c.precision.accum);
    snprintf(out->first_moment_type, sizeof out->first_moment_type, "%s", c.precision.first_moment);
    snprintf(out->second_moment_type, sizeof out->second_moment_type, "%s",
             c.precision.second_moment);
    snprintf(out->loss_scaling, sizeof out->loss_scaling, "%s", c.precision.loss_scaling);
    out->loss_scale = c.precision.loss_scale;
    out->stochastic_rounding = c.precision.stochastic_rounding;
    tg_config_free(&c);
    return TG_OK;
}
