/* tests/core/test_config.c - the options read once (core/config.c): the
 * defaults, values as set, "auto" resolved, a combination refused by name,
 * tg_config_set keeping the config whole on a bad value, copies that
 * outlive their source, and the public summary agreeing with a session. */
#include "tg_test.h"

#include "core/config.h"
#include "core/error.h"
#include "tilegraph/models.h"
#include "tilegraph/session.h"

#include <stdlib.h>
#include <string.h>

static void test_defaults(void)
{
    tg_config c;
    TG_CHECK_OK(tg_config_read(NULL, &c));
    TG_CHECK(c.seed == 0);
    TG_CHECK(!strcmp(c.target.name, "cpu") && !*c.target.description);
    TG_CHECK(c.threads.per_device == 0 && c.threads.host_instances == 1);
    TG_CHECK(!strcmp(c.pipeline.asked_strategy, "auto"));
    TG_CHECK(!strcmp(c.pipeline.strategy, "single")); /* nothing divides the model */
    TG_CHECK(!strcmp(c.pipeline.schedule, "grouped"));
    TG_CHECK(!c.pipeline.auto_stages && c.pipeline.devices == 0);
    TG_CHECK(c.pipeline.replicas == 1 && c.pipeline.accumulation == 1);
    TG_CHECK(c.pipeline.device_iterations == 1 && c.distributed.instances == 1);
    TG_CHECK_NEAR(c.pipeline.memory_margin, 0.1, 0);
    TG_CHECK(!strcmp(c.output.mode, "default") && c.output.period == 1);
    TG_CHECK(c.memory.per_device == 0);
    TG_CHECK_NEAR(c.memory.available_proportion, 0.6, 0);
    TG_CHECK(!c.memory.location[TG_TENSOR_OPTIMIZER].off_chip &&
             !c.memory.location[TG_TENSOR_OPTIMIZER].sharded);
    TG_CHECK(!c.recompute.pipeline);
    TG_CHECK(!strcmp(c.precision.precision, "32.32") && !strcmp(c.precision.accum, "auto"));
    TG_CHECK(!strcmp(c.precision.loss_scaling, "none"));
    TG_CHECK_NEAR(c.precision.loss_scale, 1024, 0);
    TG_CHECK(c.precision.growth_interval == 200 && c.precision.stochastic_rounding == -1);
    TG_CHECK(!c.report.graph && !c.report.execution && c.report.flops);
    TG_CHECK(!strcmp(c.report.directory, "./report") && c.report.run_count == 2);
    TG_CHECK(!c.trace.enable && !strcmp(c.trace.channels, "*"));
    TG_CHECK(c.monitor && c.debug.check_nan && !c.debug.allow_out_of_memory);
    TG_CHECK(!*c.executable.cache_dir && !*c.executable.file);
    tg_config_free(&c);
}

static void test_values(void)
{
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "target", "mk2"));
    TG_CHECK_OK(tg_options_set(o, "split", "auto"));
    TG_CHECK_OK(tg_options_set_int(o, "devices", 3));
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 2));
    TG_CHECK_OK(tg_options_set_int(o, "memoryPerDevice", 1 << 20));
    TG_CHECK_OK(tg_options_set(o, "recomputation", "pipeline"));
    TG_CHECK_OK(tg_options_set(o, "autoReport.outputExecutionProfile", "true"));
    TG_CHECK_OK(tg_options_set(o, "TensorLocations.optimizer.onChip", "false"));
    TG_CHECK_OK(tg_options_set(o, "lossScalingFactor", "512"));
    tg_config c;
    TG_CHECK_OK(tg_config_read(o, &c));
    tg_options_destroy(o); /* the config keeps its own copy */
    TG_CHECK(!strcmp(c.target.name, "mk2") && c.threads.per_device == 2 && c.pipeline.devices == 3);
    TG_CHECK(!strcmp(c.pipeline.strategy, "pipelined")); /* auto: split and devices divide */
    TG_CHECK(c.pipeline.auto_stages && !strcmp(c.pipeline.split, "auto"));
    TG_CHECK(c.memory.per_device == 1 << 20 && c.memory.location[TG_TENSOR_OPTIMIZER].off_chip);
    TG_CHECK(c.recompute.pipeline && c.report.execution && !c.report.graph);
    TG_CHECK_NEAR(c.precision.loss_scale, 512, 0);
    /* every option's text, as the hashes and the profile list them */
    for (int i = 0; i < tg_options_count(); i++)
        if (!strcmp(tg_options_key(i), "split"))
            TG_CHECK(!strcmp(tg_config_text(&c, i), "auto"));
    TG_CHECK(tg_config_text(&c, tg_options_count()) == NULL);
    tg_config_free(&c);
}

static void test_refused_by_name(void)
{
    tg_options *o = tg_options_create();
    /* one bad value never reaches a config: the table refuses it, named */
    TG_CHECK(tg_options_set(o, "replicationFactor", "0") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "replicationFactor") != NULL);
    /* off chip and sharded at once, refused until both could be (issue 31) */
    TG_CHECK_OK(tg_options_set(o, "TensorLocations.optimizer.onChip", "false"));
    TG_CHECK_OK(tg_options_set(o, "TensorLocations.optimizer.replicatedTensorSharding", "true"));
    tg_config c;
    TG_CHECK_OK(tg_config_read(o, &c));
    TG_CHECK(c.memory.location[TG_TENSOR_OPTIMIZER].off_chip &&
             c.memory.location[TG_TENSOR_OPTIMIZER].sharded);
    tg_config_free(&c);
    tg_options_destroy(o);
}

static void test_set_and_copy(void)
{
    tg_config c, copy;
    TG_CHECK_OK(tg_config_read(NULL, &c));
    c.threads.host_instances = 4; /* not an option: kept across a set */
    TG_CHECK_OK(tg_config_set(&c, "replicationFactor", "2"));
    TG_CHECK(c.pipeline.replicas == 2 && c.threads.host_instances == 4);
    /* a bad value leaves the config as it was, and names the option */
    TG_CHECK(tg_config_set(&c, "deviceIterations", "many") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "deviceIterations") != NULL);
    TG_CHECK(c.pipeline.device_iterations == 1 && c.pipeline.replicas == 2);
    TG_CHECK(tg_config_set(&c, "TensorLocations.optimizer.onChip", "false") == TG_OK);
    TG_CHECK(tg_config_set(&c, "TensorLocations.weight.replicatedTensorSharding", "true") == TG_OK);
    TG_CHECK(c.memory.location[TG_TENSOR_WEIGHT].sharded &&
             c.memory.location[TG_TENSOR_OPTIMIZER].off_chip);
    TG_CHECK_OK(tg_config_set(&c, "autoStages.memoryMargin", "0.30"));
    TG_CHECK_OK(tg_config_copy(&c, &copy));
    tg_config_free(&c);
    TG_CHECK(copy.pipeline.replicas == 2 && copy.threads.host_instances == 4);
    TG_CHECK_NEAR(copy.pipeline.memory_margin, 0.3, 1e-12);
    TG_CHECK(copy.memory.location[TG_TENSOR_OPTIMIZER].off_chip &&
             !strcmp(copy.target.name, "cpu"));
    tg_config_free(&copy);
    tg_config_free(&copy); /* freeing twice is harmless */
}

/* The public summary (for a loader before the session exists) agrees with
 * the session compiled from the same options. */
static void test_summary_agrees_with_session(void)
{
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set_int(o, "Training.gradientAccumulation", 2));
    TG_CHECK_OK(tg_options_set_int(o, "deviceIterations", 3));
    TG_CHECK_OK(tg_options_set_int(o, "replicationFactor", 2));
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    TG_CHECK_OK(tg_options_set(o, "monitor.enable", "false"));
    tg_options_summary sum;
    TG_CHECK_OK(tg_options_summarize(o, 4, &sum));
    TG_CHECK(sum.replicas == 2 && sum.samples_per_update == 4 * 2 * 2);
    TG_CHECK(sum.samples_per_step == 4 * 2 * 2 * 3);
    TG_CHECK(!strcmp(sum.strategy, "single") && !strcmp(sum.output_mode, "default"));
    tg_optimizer opt = tg_optimizer_sgd(0.01f, 0.0f);
    tg_model_graph mg;
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), 4, &opt, &mg));
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(mg.graph, o, &s));
    if (s)
        TG_CHECK(tg_session_samples_per_step(s) == sum.samples_per_step);
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    /* an inference program pipelines its device iterations as micro-batches
     * (accumulation 1): the same count, from the same one product */
    TG_CHECK_OK(tg_options_set_int(o, "Training.gradientAccumulation", 1));
    TG_CHECK_OK(tg_options_summarize(o, 4, &sum));
    TG_CHECK(sum.samples_per_step == 4 * 2 * 3);
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), 4, NULL, &mg));
    s = NULL;
    TG_CHECK_OK(tg_session_create(mg.graph, o, &s));
    if (s)
        TG_CHECK(tg_session_samples_per_step(s) == sum.samples_per_step);
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    tg_options_destroy(o);
}

int main(void)
{
    unsetenv("TILEGRAPH_ENGINE_OPTIONS");
    unsetenv("POPLAR_ENGINE_OPTIONS");
    TG_RUN(test_defaults);
    TG_RUN(test_values);
    TG_RUN(test_refused_by_name);
    TG_RUN(test_set_and_copy);
    TG_RUN(test_summary_agrees_with_session);
    return tg_test_finish();
}
