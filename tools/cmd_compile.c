/* tools/cmd_compile.c - `tilegraph compile`: compile a model for the devices
 * and print the plan, without running anything: per device the planned
 * memory by category, the peak of live activations, the stash depth, and the
 * FLOPs per micro-batch. "Will it fit" is answered here, in milliseconds. */
#include "cli.h"
#include "device_flags.h"
#include "optim_flags.h"

#include "tilegraph/devices.h"
#include "tilegraph/models.h"
#include "tilegraph/plan.h"
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
    if (target &&
        (tg_target_check(target) != TG_OK || tg_options_set(o, "target", target) != TG_OK)) {
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

/* The flags of `tilegraph compile`. */
typedef struct compile_args {
    const char *model, *input, *stem, *target, *target_desc, *save_exe, *loss, *freeze;
    int64_t batch, classes, epochs, train_limit, return_period;
    bool inference, json, insights, eight_bit;
    device_args dev;
    optim_args oa;
    tg_report_prediction_args pa;
} compile_args;

/* Parse argv into a: 0, 1 after --help, -1 on an error (printed). */
static int compile_parse(compile_args *a, int argc, char **argv)
{
    *a = (compile_args){.model = CLI_DEFAULT_MODEL,
                        .batch = CLI_DEFAULT_BATCH,
                        .epochs = -1, /* not given: train's default for the task */
                        .return_period = -1};
    device_args_defaults(&a->dev);
    optim_args_defaults(&a->oa);
    char target_help[160];
    cli_flag flags[96] = {
        {"--model", CLI_STRING, &a->model, "NAME",
         "model from the zoo, or an ONNX file (FILE.onnx)", 1, 0, NULL},
        {"--batch-size", CLI_INT, &a->batch, "N", "samples per micro-batch", 1, 1e6, NULL},
        {"--inference", CLI_BOOL, &a->inference, NULL, "compile the inference program", 1, 0, NULL},
        {"--eight-bit-io", CLI_BOOL, &a->eight_bit, NULL,
         "u8 images in the host stream, normalised on the device", 1, 0, NULL},
        {"--json", CLI_BOOL, &a->json, NULL, "print JSON for scripts", 1, 0, NULL},
        {"--input", CLI_STRING, &a->input, "CxHxW", "input image shape (models that take any)", 1,
         0, NULL},
        {"--classes", CLI_INT, &a->classes, "N", "class count (models that take any)", 1, 1e6,
         NULL},
        {"--stem", CLI_STRING, &a->stem, "KIND",
         "ResNets: imagenet (7x7/2 conv + pool), cifar (3x3/1) or auto (by image size)", 1, 0,
         NULL},
        {tg_options_flag("target"), CLI_STRING, &a->target, "NAME",
         cli_target_help(target_help, sizeof target_help), 1, 0, NULL},
        {tg_options_flag("targetDescription"), CLI_STRING, &a->target_desc, "FILE",
         "with --target mk2 (a target that takes one): a JSON file describing another tile "
         "processor",
         1, 0, NULL},
        {"--insights", CLI_BOOL, &a->insights, NULL,
         "quantify memory remedies (shown anyway when over or near capacity)", 1, 0, NULL},
        {"--compare-stages", CLI_STRING, &a->pa.compare, "SPEC",
         "predict this split (\"B1|B2,B3,B4\" or split points \"layer2.0,layer4.0\") beside the "
         "best one the cost model finds",
         1, 0, NULL},
        {"--compare-schedules", CLI_BOOL, &a->pa.schedules, NULL,
         "predict every pipeline schedule over the split: host step, bubble, busy, stash", 1, 0,
         NULL},
        {"--save-executable", CLI_STRING, &a->save_exe, "FILE",
         "write the compiled program to FILE, for train --executable (docs/executable-cache.md)", 1,
         0, NULL},
        /* what train takes to size a learning rate schedule */
        {"--epochs", CLI_INT, &a->epochs, "N", "cosine schedule: the epochs train runs", 1, 10000,
         "1; language models 20"},
        {"--train-limit", CLI_INT, &a->train_limit, "N",
         "step or cosine schedule, warm-up: the training samples of an epoch (as train's)", 0, 1e9,
         NULL},
        {tg_options_flag("randomSeed"), CLI_INT, device_int(&a->dev, "randomSeed"), "N",
         "random seed (randomSeed: dropout, rounding)", 0, 9e18, NULL},
        {tg_options_flag("outputReturnPeriod"), CLI_INT, &a->return_period, "N",
         "--output-mode everyN: return every N-th iteration's outputs", 1, 1e6, NULL},
        {"--loss", CLI_STRING, &a->loss, "KIND",
         "ONNX models: the loss appended to the logits, cross-entropy or mse", 1, 0,
         "cross-entropy"},
        {"--freeze", CLI_STRING, &a->freeze, "REGEX",
         "ONNX models: keep the float initializers whose names match fixed (as train's)", 1, 0,
         NULL},
    };
    int n = 20;
    n += optim_flags(&a->oa, flags + n);
    n += device_flags(&a->dev, flags + n, (int)(sizeof flags / sizeof flags[0]) - n);
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
    return cli_parse(&cmd, argc, argv);
}

/* The model of --model, with its input (--input, --classes, --stem,
 * --eight-bit-io) and train's task defaults; the exit code on a failure
 * (printed), else 0. */
static int compile_model(compile_args *a, const tg_model_spec **m, tg_model_input *in)
{
    tg_model_loss loss_kind;
    if (tg_model_loss_parse(a->loss ? a->loss : "cross-entropy", &loss_kind) != TG_OK) {
        fprintf(stderr, "tilegraph compile: --loss '%s' is not cross-entropy or mse\n", a->loss);
        return 2;
    }
    if (tg_model_open(a->model, loss_kind, m) != TG_OK) {
        fprintf(stderr, "tilegraph compile: %s\n", tg_error_message());
        return 1;
    }
    if (a->freeze && tg_model_set_freeze(*m, a->freeze) != TG_OK) {
        fprintf(stderr, "tilegraph compile: --freeze: %s\n", tg_error_message());
        return 2;
    }
    if (a->loss && !(*m)->onnx) { /* a zoo model brings its own: --loss would be ignored */
        fprintf(stderr,
                "tilegraph compile: --loss applies to ONNX models (the loss appended to their "
                "logits); %s brings its own loss: drop --loss\n",
                (*m)->name);
        return 2;
    }
    bool lm = tg_model_task_tokens((*m)->task);
    optim_task_defaults(&a->oa, lm);
    if (a->epochs < 0)
        a->epochs = lm ? 20 : 1;
    *in = tg_model_default_input(*m);
    if (a->input && tg_model_input_parse(a->input, in) != TG_OK) {
        fprintf(stderr, "tilegraph compile: --input: %s\n", tg_error_message());
        return 2;
    }
    if (a->classes > 0)
        in->classes = (int)a->classes;
    in->eight_bit = a->eight_bit;
    if (a->stem && tg_model_stem_parse(a->stem, in) != TG_OK) {
        fprintf(stderr, "tilegraph compile: --stem: %s\n", tg_error_message());
        return 2;
    }
    return 0;
}

/* The options of the device flags, --target and --output-return-period, and
 * train's optimizer (training only); the exit code on a failure (printed). */
static int compile_options(const compile_args *a, tg_options **o, tg_optimizer *opt)
{
    memset(opt, 0, sizeof *opt);
    if (!(*o = device_options(&a->dev, "compile", a->inference)))
        return 1;
    if (apply_target(*o, a->target, a->target_desc) != 0 ||
        device_return_period(*o, "compile", a->return_period) != 0)
        return 2;
    if (!a->inference && make_optimizer(&a->oa, *o, a->batch, a->epochs, a->train_limit, opt) != 0)
        return 2;
    return 0;
}

/* What a compile made, for printing it. */
typedef struct compile_result {
    const tg_model_spec *m;
    tg_model_input in;
    tg_optimizer opt;
    tg_options *o;
    tg_options *over; /* o allowing out of memory, for the re-planned remedies */
    tg_model_graph mg;
    tg_compiled *p;
    tg_status s;
    double ms;
    tg_compiled_facts facts;
    tg_what_if_plan remedies; /* the remedies printed */
    bool have_remedies;
} compile_result;

/* The remedies of `m`, each the model compiled again with one change; kept
 * for the graph profile. */
static void print_remedies(const tg_what_if_model *m, compile_result *c)
{
    c->have_remedies = tg_program_what_if(c->p, m, &c->remedies) == TG_OK;
    if (c->have_remedies)
        tg_what_if_print(&c->remedies, stdout);
}

/* The plan (text or JSON), the predictions and the remedies, or the failure
 * with the remedies re-planned when it does not fit; the exit code. */
static int compile_print(compile_args *a, compile_result *c)
{
    const tg_optimizer *opt = a->inference ? NULL : &c->opt;
    if (c->s == TG_ERR_CAPACITY && !a->json) {
        /* the remedies are what a user needs most when it does not fit:
         * plan it again allowing the overflow, and quantify them */
        fprintf(stderr, "tilegraph compile: out of memory: %s\n", tg_error_message());
        c->over = tg_options_clone(c->o);
        if (c->over && tg_options_set(c->over, "debug.allowOutOfMemory", "true") == TG_OK &&
            tg_compiled_create(c->mg.graph, c->over, &c->p) == TG_OK) {
            tg_what_if_model im = {c->m, &c->in, opt, (int)a->batch, c->over};
            print_remedies(&im, c);
        }
        return 1;
    }
    if (c->s != TG_OK) {
        fprintf(stderr, "tilegraph compile: %s%s\n",
                c->s == TG_ERR_CAPACITY ? "out of memory: " : "", tg_error_message());
        return 1;
    }
    if (c->facts.threads_warning[0])
        fprintf(stderr, "tilegraph: warning: %s\n", c->facts.threads_warning);
    if (a->json)
        return tg_report_plan_json(c->p, c->m->name, c->ms, c->o, &a->pa, stdout);
    int status = 0;
    tg_report_plan_text(c->p, c->m->name, c->ms, stdout);
    if (a->pa.wanted && c->facts.n_devices > 1)
        status =
            tg_report_predictions(c->mg.graph, c->o, c->p, &a->pa, c->facts.auto_stages, stdout);
    if (a->insights || tg_what_if_wanted(c->p)) {
        tg_what_if_model im = {c->m, &c->in, opt, (int)a->batch, c->o};
        print_remedies(&im, c);
    }
    return status;
}

/* --profile, --profile-dir: the plan (the over-capacity one, if it was
 * re-planned) as a graph profile with its remedies; 0 or 1. */
static int compile_write_profile(const compile_args *a, compile_result *c)
{
    tg_compiled_facts_get(c->p, &c->facts);
    const char *dir = c->facts.report_dir;
    if (tg_compiled_write_profile(dir, c->p, c->have_remedies ? &c->remedies : NULL) != TG_OK) {
        fprintf(stderr, "tilegraph compile: %s\n", tg_error_message());
        return 1;
    }
    if (!a->json)
        fprintf(stderr, "graph profile: %s/%s/profile.sqlite (%d remedies)\n", dir,
                a->inference ? "inference" : "training", c->have_remedies ? c->remedies.n : 0);
    return 0;
}

int cmd_compile(int argc, char **argv)
{
    compile_args a;
    int r = compile_parse(&a, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;
    compile_result c = {0};
    int status = compile_model(&a, &c.m, &c.in);
    if (status == 0)
        status = compile_options(&a, &c.o, &c.opt);
    if (status != 0) {
        tg_options_destroy(c.o);
        tg_model_close(c.m);
        return status;
    }
    a.pa.batch = a.batch;
    double t0 = cli_now();
    c.s = tg_model_graph_create_ex(c.m, (int)a.batch, a.inference ? NULL : &c.opt, &c.in, &c.mg);
    double graph_ms = (cli_now() - t0) * 1e3;
    if (c.s == TG_OK)
        c.s = tg_compiled_create_cached(c.mg.graph, c.o, &c.p);
    c.ms = (cli_now() - t0) * 1e3;
    if (c.s == TG_OK && a.save_exe && tg_compiled_save(c.p, a.save_exe) != TG_OK) {
        tg_compiled_destroy(c.p); /* its message is printed below */
        c.p = NULL;
        c.s = TG_ERR_IO;
    }
    /* stages or split auto: the split chosen is shown beside the predictions */
    if (c.s == TG_OK)
        tg_compiled_facts_get(c.p, &c.facts);
    const char *cache = c.facts.cache == TG_COMPILED_UNCACHED ? NULL
                        : c.facts.cache == TG_COMPILED_LOADED ? "loaded from the executable cache"
                                                              : "compiled";
    a.pa.wanted = c.facts.auto_stages || a.pa.compare || a.pa.schedules;
    if (c.s == TG_OK && cache)
        fprintf(stderr, "tilegraph compile: program %s in %.1f ms (graph built in %.1f ms)\n",
                cache, c.ms - graph_ms, graph_ms);
    status = compile_print(&a, &c);
    /* PopVision's graph profile is written at compile time: so is ours */
    char b1[32], b2[32];
    bool profile = device_given(&a.dev, "autoReport.all", b1, sizeof b1) ||
                   device_given(&a.dev, "autoReport.directory", b2, sizeof b2);
    if (profile && c.p && compile_write_profile(&a, &c) != 0)
        status = 1;
    tg_options_destroy(c.over);
    tg_compiled_destroy(c.p);
    tg_model_graph_destroy(&c.mg);
    tg_options_destroy(c.o);
    tg_model_close(c.m);
    return status;
}
