/* tools/cmd_compile.c - `tilegraph compile`: compile a model for the devices
 * and print the plan, without running anything: per device the planned
 * memory by category, the peak of live activations, the stash depth, and the
 * FLOPs per micro-batch. "Will it fit" is answered here, in milliseconds. */
#include "cli.h"
#include "device_flags.h"
#include "optim_flags.h"

#include "report/plan.h"
#include "report/remedies.h"
#include "tilegraph/devices.h"
#include "tilegraph/models.h"
#include "tilegraph/predict.h"
#include "tilegraph/program.h"

#include <stdio.h>
#include <string.h>

/* --target-description describes a tile processor: with any other target
 * it would be ignored, so it is an error (the target may come from --target,
 * --options or --engine-option). */
static int check_target_description(const tg_options *o, const char *target_desc)
{
    tg_options_summary sum;
    if (!target_desc)
        return 0;
    if (tg_options_summarize(o, 1, &sum) != TG_OK) {
        fprintf(stderr, "tilegraph compile: %s\n", tg_error_message());
        return -1;
    }
    /* the targets that take a description, asked of each: "mk2" */
    char takers[160] = "";
    size_t used = 0;
    for (int i = 0; i < tg_target_count(); i++) {
        tg_target_info t;
        if (tg_target_info_get(i, &t) != TG_OK || !t.takes_description)
            continue;
        if (!strcmp(t.name, sum.target))
            return 0;
        if (used < sizeof takers)
            used += (size_t)snprintf(takers + used, sizeof takers - used, "%s%s",
                                     used ? " or " : "", t.name);
    }
    fprintf(stderr,
            "tilegraph compile: --target-description describes a tile processor and applies "
            "with --target %s only (the target is '%s'): add --target %s\n",
            takers, *sum.target ? sum.target : "cpu", takers);
    return -1;
}

/* train's optimizer: a schedule that counts weight updates per epoch needs
 * the epoch's length, which train knows from its data and compile from
 * --train-limit (train drops the last partial host step of an epoch). */
static int make_optimizer(const optim_args *oa, const tg_options *o, int64_t batch, int64_t epochs,
                          int64_t train_limit, tg_optimizer *opt)
{
    int64_t updates = 1;
    if (optim_needs_epoch_length(oa)) {
        tg_options_summary sum;
        if (tg_options_summarize(o, batch, &sum) != TG_OK) {
            fprintf(stderr, "tilegraph compile: %s\n", tg_error_message());
            return -1;
        }
        if (train_limit <= 0) {
            fprintf(stderr,
                    "tilegraph compile: --lr-schedule %s%s counts weight updates per epoch: give "
                    "--train-limit N, the training samples of train's epoch (60000 for "
                    "Fashion-MNIST)\n",
                    oa->schedule, oa->warmup_epochs > 0 ? " with --lr-warmup-epochs" : "");
            return -1;
        }
        updates =
            train_limit / sum.samples_per_step * sum.samples_per_step / sum.samples_per_update;
        if (updates < 1)
            updates = 1;
    }
    return optim_make(oa, "compile", epochs, updates, opt);
}

/* --target and --target-description into the options; prints the error. */
static int apply_target(tg_options *o, const char *target, const char *target_desc)
{
    if (target && tg_options_set(o, "target", target) != TG_OK) {
        fprintf(stderr, "tilegraph compile: %s\n", tg_error_message());
        return -1;
    }
    if (check_target_description(o, target_desc) != 0)
        return -1;
    if (target_desc && tg_options_set(o, "targetDescription", target_desc) != TG_OK) {
        fprintf(stderr, "tilegraph compile: %s\n", tg_error_message());
        return -1;
    }
    return 0;
}

int cmd_compile(int argc, char **argv)
{
    const char *model = "mnist-pipeline", *input = NULL, *stem = NULL;
    const char *target = NULL, *target_desc = NULL, *save_exe = NULL;
    int64_t batch = 40, classes = 0, epochs = -1, train_limit = 0, return_period = -1;
    const char *loss = NULL;
    bool inference = false, json = false, insights = false, eight_bit = false;
    device_args dev;
    optim_args oa;
    tg_report_prediction_args pa = {0};
    device_args_defaults(&dev);
    optim_args_defaults(&oa);
    char target_help[160];
    cli_flag flags[64] = {
        {"--model", CLI_STRING, &model, "NAME", "model from the zoo, or an ONNX file (FILE.onnx)",
         1, 0, NULL},
        {"--batch-size", CLI_INT, &batch, "N", "samples per micro-batch", 1, 1e6, NULL},
        {"--inference", CLI_BOOL, &inference, NULL, "compile the inference program", 1, 0, NULL},
        {"--eight-bit-io", CLI_BOOL, &eight_bit, NULL,
         "u8 images in the host stream, normalised on the device", 1, 0, NULL},
        {"--json", CLI_BOOL, &json, NULL, "print JSON for scripts", 1, 0, NULL},
        {"--input", CLI_STRING, &input, "CxHxW", "input image shape (models that take any)", 1, 0,
         NULL},
        {"--classes", CLI_INT, &classes, "N", "class count (models that take any)", 1, 1e6, NULL},
        {"--stem", CLI_STRING, &stem, "KIND",
         "ResNets: imagenet (7x7/2 conv + pool), cifar (3x3/1) or auto (by image size)", 1, 0,
         NULL},
        {tg_options_flag("target"), CLI_STRING, &target, "NAME",
         cli_target_help(target_help, sizeof target_help), 1, 0, NULL},
        {tg_options_flag("targetDescription"), CLI_STRING, &target_desc, "FILE",
         "with --target mk2 (a target that takes one): a JSON file describing another tile "
         "processor",
         1, 0, NULL},
        {"--insights", CLI_BOOL, &insights, NULL,
         "quantify memory remedies (shown anyway when over or near capacity)", 1, 0, NULL},
        {"--compare-stages", CLI_STRING, &pa.compare, "SPEC",
         "predict this split (\"B1|B2,B3,B4\" or split points \"layer2.0,layer4.0\") beside the "
         "best one the cost model finds",
         1, 0, NULL},
        {"--compare-schedules", CLI_BOOL, &pa.schedules, NULL,
         "predict every pipeline schedule over the split: host step, bubble, busy, stash", 1, 0,
         NULL},
        {"--save-executable", CLI_STRING, &save_exe, "FILE",
         "write the compiled program to FILE, for train --executable (docs/executable-cache.md)", 1,
         0, NULL},
        /* what train takes to size a learning rate schedule */
        {"--epochs", CLI_INT, &epochs, "N", "cosine schedule: the epochs train runs", 1, 10000,
         "1; language models 20"},
        {"--train-limit", CLI_INT, &train_limit, "N",
         "step or cosine schedule, warm-up: the training samples of an epoch (as train's)", 0, 1e9,
         NULL},
        {tg_options_flag("randomSeed"), CLI_INT, &dev.seed, "N",
         "random seed (randomSeed: dropout, rounding)", 0, 9e18, NULL},
        {tg_options_flag("outputReturnPeriod"), CLI_INT, &return_period, "N",
         "--output-mode everyN: return every N-th iteration's outputs", 1, 1e6, NULL},
        {"--loss", CLI_STRING, &loss, "KIND",
         "ONNX models: the loss appended to the logits, cross-entropy or mse", 1, 0,
         "cross-entropy"},
    };
    int n = 19;
    n += optim_flags(&oa, flags + n);
    n += device_flags(&dev, flags + n, (int)(sizeof flags / sizeof flags[0]) - n);
    cli_command cmd = {"compile",
                       "Compile a model for the devices and print its memory plan.",
                       "tilegraph compile --model NAME [--batch-size N] [device options]",
                       "Nothing runs: this shows what a run would hold on each device.\n"
                       "The training flags are train's, with train's defaults: the program of "
                       "`compile --save-executable`\nis the one `train --executable` loads when "
                       "both are given the same flags.\n"
                       "With --profile or --profile-dir DIR the plan is written as a graph "
                       "profile\n(DIR/training/profile.sqlite) with the remedies printed, for "
                       "`tilegraph analyse`\nand `tilegraph report`; a plan out of memory is "
                       "written as re-planned.\n"
                       "With --stages auto (or --split auto) the cost model chooses the split "
                       "over --devices N and\nits predicted stage times are shown; "
                       "--compare-stages and --compare-schedules add predictions.\n"
                       "Example:\n  tilegraph compile --model mnist-pipeline --strategy pipelined "
                       "--gradient-accumulation 10\n"
                       "  tilegraph compile --model mnist-pipeline --stages auto --devices 2 "
                       "--gradient-accumulation 16 --compare-stages \"B1,B2|B3,B4\" "
                       "--compare-schedules",
                       flags,
                       n};
    int r = cli_parse(&cmd, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;
    /* PopVision's graph profile is written at compile time: so is ours */
    bool profile = dev.profile || dev.profile_dir;
    const tg_model_spec *m = NULL;
    tg_model_loss loss_kind;
    if (tg_model_loss_parse(loss ? loss : "cross-entropy", &loss_kind) != TG_OK) {
        fprintf(stderr, "tilegraph compile: --loss '%s' is not cross-entropy or mse\n", loss);
        return 2;
    }
    if (tg_model_open(model, loss_kind, &m) != TG_OK) {
        fprintf(stderr, "tilegraph compile: %s\n", tg_error_message());
        return 1;
    }
    if (loss && !m->onnx) { /* a zoo model brings its own: --loss would be ignored */
        fprintf(stderr,
                "tilegraph compile: --loss applies to ONNX models (the loss appended to their "
                "logits); %s brings its own loss: drop --loss\n",
                m->name);
        tg_model_close(m);
        return 2;
    }
    bool lm = tg_model_task_tokens(m->task);
    optim_task_defaults(&oa, lm);
    if (epochs < 0)
        epochs = lm ? 20 : 1;
    tg_model_input in = tg_model_default_input(m);
    if (input && tg_model_input_parse(input, &in) != TG_OK) {
        fprintf(stderr, "tilegraph compile: --input: %s\n", tg_error_message());
        tg_model_close(m);
        return 2;
    }
    if (classes > 0)
        in.classes = (int)classes;
    in.eight_bit = eight_bit;
    if (stem && tg_model_stem_parse(stem, &in) != TG_OK) {
        fprintf(stderr, "tilegraph compile: --stem: %s\n", tg_error_message());
        tg_model_close(m);
        return 2;
    }
    tg_options *o = device_options(&dev, "compile", inference);
    if (!o) {
        tg_model_close(m);
        return 1;
    }
    if (apply_target(o, target, target_desc) != 0 ||
        device_return_period(o, "compile", return_period) != 0) {
        tg_options_destroy(o);
        tg_model_close(m);
        return 2;
    }
    tg_optimizer opt;
    memset(&opt, 0, sizeof opt);
    if (!inference && make_optimizer(&oa, o, batch, epochs, train_limit, &opt) != 0) {
        tg_options_destroy(o);
        tg_model_close(m);
        return 2;
    }
    pa.batch = batch;
    tg_model_graph mg;
    tg_compiled *p = NULL;
    double t0 = cli_now();
    tg_status s = tg_model_graph_create_ex(m, (int)batch, inference ? NULL : &opt, &in, &mg);
    double graph_ms = (cli_now() - t0) * 1e3;
    if (s == TG_OK)
        s = tg_compiled_create_cached(mg.graph, o, &p);
    double ms = (cli_now() - t0) * 1e3;
    if (s == TG_OK && save_exe && tg_compiled_save(p, save_exe) != TG_OK) {
        tg_compiled_destroy(p); /* its message is printed below */
        p = NULL;
        s = TG_ERR_IO;
    }
    /* stages or split auto: the split chosen is shown beside the predictions */
    tg_compiled_facts facts = {0};
    if (s == TG_OK)
        tg_compiled_facts_get(p, &facts);
    const char *cache = facts.cache == TG_COMPILED_UNCACHED ? NULL
                        : facts.cache == TG_COMPILED_LOADED ? "loaded from the executable cache"
                                                            : "compiled";
    pa.wanted = facts.auto_stages || pa.compare || pa.schedules;
    if (s == TG_OK && cache)
        fprintf(stderr, "tilegraph compile: program %s in %.1f ms (graph built in %.1f ms)\n",
                cache, ms - graph_ms, graph_ms);
    int status = 0;
    tg_report_remedy rows[TG_REPORT_MAX_REMEDIES];
    int n_rows = 0;
    tg_options *over = NULL;
    if (s == TG_ERR_CAPACITY && !json) {
        /* the remedies are what a user needs most when it does not fit:
         * plan it again allowing the overflow, and quantify them */
        fprintf(stderr, "tilegraph compile: out of memory: %s\n", tg_error_message());
        status = 1;
        over = tg_options_clone(o);
        if (over && tg_options_set(over, "debug.allowOutOfMemory", "true") == TG_OK &&
            tg_compiled_create(mg.graph, over, &p) == TG_OK) {
            tg_report_insight_model im = {m, &in, inference ? NULL : &opt, (int)batch, over};
            tg_report_insights(&im, p, stdout, rows, &n_rows);
        }
    } else if (s != TG_OK) {
        fprintf(stderr, "tilegraph compile: %s%s\n", s == TG_ERR_CAPACITY ? "out of memory: " : "",
                tg_error_message());
        status = 1;
    } else if (json) {
        if (facts.threads_warning[0])
            fprintf(stderr, "tilegraph: warning: %s\n", facts.threads_warning);
        status = tg_report_plan_json(p, m->name, ms, o, &pa, stdout);
    } else {
        if (facts.threads_warning[0])
            fprintf(stderr, "tilegraph: warning: %s\n", facts.threads_warning);
        tg_report_plan_text(p, m->name, ms, stdout);
        if (pa.wanted && facts.n_devices > 1)
            status = tg_report_predictions(mg.graph, o, p, &pa, facts.auto_stages, stdout);
        if (insights || tg_report_insights_wanted(p)) {
            tg_report_insight_model im = {m, &in, inference ? NULL : &opt, (int)batch, o};
            tg_report_insights(&im, p, stdout, rows, &n_rows);
        }
    }
    if (profile && p) {
        tg_compiled_facts_get(p, &facts); /* the over-capacity plan's, if it was re-planned */
        const char *dir = facts.report_dir;
        if (tg_report_write_graph_profile(dir, p, rows, n_rows) != TG_OK) {
            fprintf(stderr, "tilegraph compile: %s\n", tg_error_message());
            status = 1;
        } else if (!json) {
            fprintf(stderr, "graph profile: %s/%s/profile.sqlite (%d remedies)\n", dir,
                    inference ? "inference" : "training", n_rows);
        }
    }
    tg_options_destroy(over);
    tg_compiled_destroy(p);
    tg_model_graph_destroy(&mg);
    tg_options_destroy(o);
    tg_model_close(m);
    return status;
}
