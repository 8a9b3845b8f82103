/* tools/cmd_train.c - `tilegraph train`: train a model from the zoo on
 * Fashion-MNIST (or MNIST) and report test accuracy and throughput.
 *
 * The loop is the whole training step, top to bottom: load a batch, write it
 * to the device, run the compiled program (forward, backward, update), read
 * the loss and predictions back.
 */
#include "cli.h"
#include "device_flags.h"
#include "train_util.h"

#include "tilegraph/checkpoint.h"
#include "tilegraph/models.h"
#include "tilegraph/session.h"

#include "core/alloc.h"
#include "core/error.h"
#include "data/loader.h"

#include <math.h>
#include <string.h>

typedef struct train_args {
    const char *model, *optimizer, *schedule, *save, *load;
    int64_t epochs, batch, eval_batch, seed, train_limit, test_limit, step_epochs;
    double warmup_epochs;
    double lr, momentum, weight_decay, gamma, min_lr;
    double max_grad_norm;
    bool nesterov, no_bias_correction, json, quiet;
    device_args dev;
    data_args data;
} train_args;

static int parse_args(train_args *a, int argc, char **argv)
{
    *a = (train_args){.model = "fashion-basic", .optimizer = "sgd",
                      .schedule = "constant", .epochs = 1, .batch = 16, .eval_batch = 500,
                      .lr = 0.05, .weight_decay = -1, .gamma = 0.1, .step_epochs = 1};
    device_args_defaults(&a->dev);
    data_args_defaults(&a->data);
    cli_flag flags[64] = {
        {"--model", CLI_STRING, &a->model, "NAME", "model from the zoo (tilegraph models) or an ONNX file (FILE.onnx)", 1, 0},
        {"--epochs", CLI_INT, &a->epochs, "N", "passes over the training set", 1, 10000},
        {"--batch-size", CLI_INT, &a->batch, "N", "samples per micro-batch", 1, 65536},
        {"--eval-batch-size", CLI_INT, &a->eval_batch, "N", "samples per evaluation step", 1, 65536},
        {"--optimizer", CLI_STRING, &a->optimizer, "NAME", "sgd, adam, adamw or lamb", 1, 0},
        {"--lr", CLI_FLOAT, &a->lr, "X", "learning rate", 0, 1e3},
        {"--momentum", CLI_FLOAT, &a->momentum, "X", "SGD momentum", 0, 0.999999},
        {"--nesterov", CLI_BOOL, &a->nesterov, NULL, "Nesterov momentum (SGD)", 1, 0},
        {"--weight-decay", CLI_FLOAT, &a->weight_decay, "X",
         "weight decay (default: 0, AdamW and LAMB 0.01)", -1, 1e3},
        {"--max-grad-norm", CLI_FLOAT, &a->max_grad_norm, "X",
         "clip the gradients by their global norm, as clip_grad_norm_ (0: off)", 0, 1e30},
        {"--no-bias-correction", CLI_BOOL, &a->no_bias_correction, NULL,
         "Adam, AdamW, LAMB: no 1 - beta^t division of the moments", 1, 0},
        {"--lr-schedule", CLI_STRING, &a->schedule, "KIND", "constant, step or cosine", 1, 0},
        {"--lr-step-epochs", CLI_INT, &a->step_epochs, "N", "step schedule: epochs between decays", 1, 10000},
        {"--lr-gamma", CLI_FLOAT, &a->gamma, "X", "step schedule: decay factor", 0, 1},
        {"--lr-min", CLI_FLOAT, &a->min_lr, "X", "cosine schedule: final learning rate", 0, 1e3},
        {"--lr-warmup-epochs", CLI_FLOAT, &a->warmup_epochs, "X",
         "raise the rate linearly over the first X epochs", 0, 1e4},
        {"--seed", CLI_INT, &a->seed, "N", "random seed (initialisation, shuffling, dropout)", 0, 9e18},
        {"--train-limit", CLI_INT, &a->train_limit, "N", "use only the first N training samples (0: all)", 0, 1e9},
        {"--test-limit", CLI_INT, &a->test_limit, "N", "use only the first N test samples (0: all)", 0, 1e9},
        {"--load", CLI_STRING, &a->load, "FILE", "start from this checkpoint (.safetensors)", 1, 0},
        {"--save", CLI_STRING, &a->save, "FILE", "write a checkpoint here at the end", 1, 0},
        {"--json", CLI_BOOL, &a->json, NULL, "print one JSON object per epoch instead of text", 1, 0},
        {"--quiet", CLI_BOOL, &a->quiet, NULL, "no progress bars", 1, 0},
    };
    int n = 0;
    while (flags[n].name)
        n++;
    n += data_flags(&a->data, flags + n);
    n += device_flags(&a->dev, flags + n);
    cli_command cmd = {"train", "Train a model from the zoo and report its test accuracy.",
                       "tilegraph train [--model NAME] [--epochs N] [--batch-size N] [options]",
                       "--batch-size is the micro-batch: one host step takes batch x "
                       "gradient-accumulation x device-iterations x replicas samples.\n\n"
                       "Examples:\n"
                       "  tilegraph train --model fashion-basic --optimizer sgd --lr 0.05 "
                       "--batch-size 16 --epochs 5\n"
                       "  tilegraph train --model mnist-pipeline --strategy pipelined --batch-size 40 "
                       "--gradient-accumulation 10 --device-iterations 10 --optimizer adamw --lr 0.001",
                       flags, n};
    int r = cli_parse(&cmd, argc, argv);
    a->dev.seed = a->seed;
    return r;
}

static int make_optimizer(const train_args *a, int64_t steps_per_epoch, tg_optimizer *opt)
{
    int kind = tg_optimizer_parse(a->optimizer);
    if (kind < 0) {
        fprintf(stderr, "tilegraph train: unknown optimizer '%s' (sgd, adam, adamw or lamb)\n",
                a->optimizer);
        return -1;
    }
    *opt = kind == TG_OPT_SGD     ? tg_optimizer_sgd((float)a->lr, (float)a->momentum)
           : kind == TG_OPT_ADAM  ? tg_optimizer_adam((float)a->lr)
           : kind == TG_OPT_ADAMW ? tg_optimizer_adamw((float)a->lr)
                                  : tg_optimizer_lamb((float)a->lr);
    opt->nesterov = a->nesterov;
    opt->max_grad_norm = (float)a->max_grad_norm;
    if (a->no_bias_correction && kind == TG_OPT_SGD) {
        fprintf(stderr, "tilegraph train: --no-bias-correction applies to adam, adamw and lamb, "
                        "not to sgd\n");
        return -1;
    }
    opt->bias_correction = !a->no_bias_correction;
    if (a->weight_decay >= 0)
        opt->weight_decay = (float)a->weight_decay;
    if (!strcmp(a->schedule, "step")) {
        opt->lr.kind = TG_LR_STEP;
        opt->lr.step_size = a->step_epochs * steps_per_epoch;
        opt->lr.gamma = (float)a->gamma;
    } else if (!strcmp(a->schedule, "cosine")) {
        opt->lr.kind = TG_LR_COSINE;
        opt->lr.total_steps = a->epochs * steps_per_epoch;
        opt->lr.min_lr = (float)a->min_lr;
    } else if (strcmp(a->schedule, "constant")) {
        fprintf(stderr, "tilegraph train: unknown --lr-schedule '%s' (constant, step or cosine)\n",
                a->schedule);
        return -1;
    }
    opt->lr.warmup_steps = (int64_t)(a->warmup_epochs * (double)steps_per_epoch);
    if (tg_optimizer_validate(opt) != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        return -1;
    }
    return 0;
}

typedef struct epoch_stats {
    double loss_sum, seconds;
    int64_t correct, scored, losses, seen, steps;
    int64_t skipped;   /* updates skipped for overflowing gradients (loss scaling) */
    float loss_scale;  /* at the end of the epoch */
} epoch_stats;

/* One epoch of training; returns TG_OK or the first failure. */
static tg_status train_epoch(const train_args *a, tg_session *s, const tg_model_graph *mg,
                             tg_loader *loader, int64_t epoch, step_buffers *b, epoch_stats *st)
{
    cli_progress bar;
    char label[32], status[160] = "";
    snprintf(label, sizeof label, "epoch %lld/%lld", (long long)epoch + 1, (long long)a->epochs);
    memset(st, 0, sizeof *st);
    int64_t skipped_before = tg_session_skipped_updates(s);
    tg_loader_start_epoch(loader, epoch);
    int64_t steps = tg_loader_steps_per_epoch(loader);
    cli_progress_start(&bar, label, steps, !a->quiet && !a->json);
    double t0 = cli_now();
    for (int64_t k = 0; k < steps; k++) {
        int64_t count = 0;
        TG_TRY(load_step(loader, b, &count));
        TG_TRY(run_step(s, mg, b, count));
        st->correct += b->correct;
        st->scored += b->scored;
        st->loss_sum += b->loss_sum;
        st->losses += b->losses_count;
        st->seen += count;
        st->steps++;
        double dt = cli_now() - t0;
        snprintf(status, sizeof status, "loss %.4f | acc %5.2f%% | %.0f samples/s",
                 st->loss_sum / (double)(st->losses ? st->losses : 1),
                 100.0 * (double)st->correct / (double)(st->scored ? st->scored : 1),
                 (double)st->seen / (dt > 0 ? dt : 1e-9));
        cli_progress_update(&bar, k + 1, status);
    }
    st->seconds = cli_now() - t0;
    st->skipped = tg_session_skipped_updates(s) - skipped_before;
    st->loss_scale = tg_session_loss_scale(s);
    cli_progress_finish(&bar, status);
    return TG_OK;
}

static void print_epoch(const train_args *a, int64_t epoch, const epoch_stats *st, double test_acc)
{
    double sps = (double)st->seen / st->seconds;
    if (a->json) {
        printf("{\"model\":\"%s\",\"epoch\":%lld,\"train_loss\":%.6f,\"train_accuracy\":%.4f,"
               "\"test_accuracy\":%.4f,\"samples_per_s\":%.1f,\"seconds\":%.3f,"
               "\"loss_scale\":%g,\"skipped_updates\":%lld}\n",
               a->model, (long long)epoch + 1, st->loss_sum / (double)(st->losses ? st->losses : 1),
               100.0 * (double)st->correct / (double)(st->scored ? st->scored : 1), test_acc, sps,
               st->seconds, (double)st->loss_scale, (long long)st->skipped);
    } else {
        char t[32];
        printf("epoch %lld: train loss %.4f, train accuracy %.2f%%, test accuracy %.2f%%, "
               "%.0f samples/s (%s)\n",
               (long long)epoch + 1, st->loss_sum / (double)(st->losses ? st->losses : 1),
               100.0 * (double)st->correct / (double)(st->scored ? st->scored : 1), test_acc, sps,
               cli_duration(st->seconds, t, sizeof t));
        if (a->dev.loss_scaling || st->skipped)
            printf("  loss scale %g, %lld update%s skipped for overflowing gradients\n",
                   (double)st->loss_scale, (long long)st->skipped, st->skipped == 1 ? "" : "s");
    }
    fflush(stdout);
}

int cmd_train(int argc, char **argv)
{
    train_args a;
    int r = parse_args(&a, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;
    train_context ctx;
    if (train_context_open(&ctx, a.model, &a.data, a.train_limit, a.test_limit) != 0)
        return 1;
    int status = 1;
    tg_optimizer opt;
    tg_loader *loader = NULL;
    tg_model_graph mg = {0};
    tg_session *s = NULL;
    step_buffers b = {0};
    tg_options *o = device_options(&a.dev, "train", false);
    if (!o)
        goto done;
    /* a host step's samples, from the options: the loader and the learning
     * rate schedule (which counts weight updates) need them before the
     * session exists */
    int64_t m = tg_options_get_int(o, "Training.gradientAccumulation");
    int64_t per_update = a.batch * m * tg_options_get_int(o, "replicationFactor");
    int64_t per_step = per_update * tg_options_get_int(o, "deviceIterations");
    tg_loader_config lc;
    tg_status ls = loader_config(&ctx, ctx.train, per_step, true, &lc);
    lc.seed = (uint64_t)a.seed;
    if (ls == TG_OK)
        ls = tg_loader_create(ctx.train, &lc, &loader);
    if (ls != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        goto done;
    }
    int64_t updates_per_epoch = tg_loader_steps_per_epoch(loader) * per_step / per_update;
    if (make_optimizer(&a, updates_per_epoch, &opt) != 0)
        goto done;
    if (tg_model_graph_create_ex(ctx.model, (int)a.batch, &opt, &ctx.input, &mg) != TG_OK ||
        tg_session_create(mg.graph, o, &s) != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        goto done;
    }
    if (a.load && tg_checkpoint_load(s, a.load, ctx.model->name) != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        goto done;
    }
    if (step_buffers_init(&b, s, &mg) != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        goto done;
    }
    if (!a.json)
        print_setup(&ctx, s, a.batch, tg_loader_steps_per_epoch(loader));
    double total_seconds = 0, test_acc = 0;
    int64_t total_samples = 0;
    for (int64_t e = 0; e < a.epochs; e++) {
        epoch_stats st;
        if (train_epoch(&a, s, &mg, loader, e, &b, &st) != TG_OK ||
            evaluate(&ctx, s, &a.dev, a.eval_batch, !a.quiet && !a.json, &test_acc) != TG_OK) {
            fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
            goto done;
        }
        total_seconds += st.seconds;
        total_samples += st.seen;
        print_epoch(&a, e, &st, test_acc);
    }
    if (a.save && tg_checkpoint_save(s, a.save, ctx.model->name) != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        goto done;
    }
    if (!a.json) {
        if (a.dev.profile || a.dev.profile_dir)
            printf("profiles: %s/training/profile.sqlite, %s/inference/profile.sqlite\n",
                   a.dev.profile_dir ? a.dev.profile_dir : "./profile",
                   a.dev.profile_dir ? a.dev.profile_dir : "./profile");
        printf("test accuracy: %.2f%%\n", test_acc);
        printf("training: %.0f samples/s\n", (double)total_samples / total_seconds);
        if (a.save)
            printf("saved: %s\n", a.save);
    }
    status = 0;
done:
    step_buffers_free(&b);
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    tg_loader_destroy(loader);
    tg_options_destroy(o);
    train_context_close(&ctx);
    return status;
}
