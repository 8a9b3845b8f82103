/* tools/cmd_train.c - `tilegraph train`: train a model from the zoo on
 * Fashion-MNIST (or MNIST) and report test accuracy and throughput.
 *
 * The loop is the whole training step, top to bottom: load a batch, write it
 * to the device, run the compiled program (forward, backward, update), read
 * the loss and predictions back.
 */
#include "cli.h"
#include "device_flags.h"
#include "optim_flags.h"
#include "save_lock.h"
#include "train_config.h"
#include "train_exchange.h"
#include "train_util.h"

#include "analyse/analyse.h"
#include "tilegraph/checkpoint.h"
#include "tilegraph/dist.h"
#include "tilegraph/files.h"
#include "tilegraph/models.h"
#include "tilegraph/session.h"
#include "tilegraph/trace.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct train_args {
    const char *model, *save, *load, *target;
    const char *checkpoint_every, *resume; /* docs/reliability.md */
    int64_t return_period;                 /* --output-return-period; -1: not given */
    int64_t epochs, batch, eval_batch, seed, train_limit, test_limit, max_steps;
    bool json, quiet, allow_non_finite, resume_weights_only;
    optim_args opt;
    device_args dev;
    data_args data;
    /* --checkpoint-every, parsed: every N host steps, or every N epochs */
    int64_t every_steps, every_epochs;
    /* a language model: tokens per sample and what a token is ("byte",
     * "char"), for the perplexity and bits per token of the epoch lines */
    int seq_len;
    const char *unit;
    char *vocab; /* the checkpoint's record of the tokens: "byte", or "char:" and code points */
    char config[TRAIN_CONFIG_CAP]; /* the training configuration, for the checkpoint */
} train_args;

/* A language model trains for enough epochs that gpt-tiny on GPL-3 passes
 * 2.5 bits per byte; the optimizer's defaults are optim_task_defaults'. */
#define LM_EPOCHS 20
#define LM_EPOCHS_TEXT "20"

static void task_defaults(train_args *a, bool lm)
{
    if (a->epochs < 0)
        a->epochs = lm ? LM_EPOCHS : 1;
    optim_task_defaults(&a->opt, lm);
}

static int parse_args(train_args *a, int argc, char **argv)
{
    *a = (train_args){.model = "fashion-basic",
                      .epochs = -1, /* not given: task_defaults */
                      .batch = 16,
                      .eval_batch = 500,
                      .return_period = -1};
    optim_args_defaults(&a->opt);
    device_args_defaults(&a->dev);
    data_args_defaults(&a->data);
    char target_help[160];
    cli_flag flags[96] = {
        /* room for the data and device flags appended below */
        {"--model", CLI_STRING, &a->model, "NAME",
         "model from the zoo (tilegraph models) or an ONNX file (FILE.onnx)", 1, 0, NULL},
        {"--epochs", CLI_INT, &a->epochs, "N", "passes over the training set", 1, 10000,
         "1; language models " LM_EPOCHS_TEXT},
        {"--batch-size", CLI_INT, &a->batch, "N", "samples per micro-batch", 1, 65536, NULL},
        {"--eval-batch-size", CLI_INT, &a->eval_batch, "N", "samples per evaluation step", 1, 65536,
         NULL},
        {tg_options_flag("randomSeed"), CLI_INT, &a->seed, "N",
         "random seed (initialisation, shuffling, dropout)", 0, 9e18, NULL},
        {"--train-limit", CLI_INT, &a->train_limit, "N",
         "use only the first N training samples (0: all)", 0, 1e9, NULL},
        {"--test-limit", CLI_INT, &a->test_limit, "N", "use only the first N test samples (0: all)",
         0, 1e9, NULL},
        {"--load", CLI_STRING, &a->load, "FILE", "start from this checkpoint (.safetensors)", 1, 0,
         NULL},
        {"--save", CLI_STRING, &a->save, "FILE", "write a checkpoint here at the end", 1, 0, NULL},
        {"--checkpoint-every", CLI_STRING, &a->checkpoint_every, "N|Ne",
         "also write --save every N host steps (Ne: every N epochs), and when stopped by a signal",
         1, 0, NULL},
        {"--resume", CLI_STRING, &a->resume, "FILE",
         "continue the run that wrote this checkpoint, bit for bit (same flags)", 1, 0, NULL},
        {"--max-steps", CLI_INT, &a->max_steps, "N",
         "stop once the run has done N host steps in all (those before --resume count), as "
         "Ctrl-C would but exit 0 (0: no limit)",
         0, 9e18, NULL},
        {"--resume-weights-only", CLI_BOOL, &a->resume_weights_only, NULL,
         "--resume a run under another optimizer, schedule or precision: its weights and "
         "position, not its optimizer state (which starts afresh)",
         1, 0, NULL},
        {"--allow-non-finite", CLI_BOOL, &a->allow_non_finite, NULL,
         "--load/--resume: accept a checkpoint holding NaN or infinity", 1, 0, NULL},
        {"--json", CLI_BOOL, &a->json, NULL, "print one JSON object per epoch instead of text", 1,
         0, NULL},
        {"--quiet", CLI_BOOL, &a->quiet, NULL, "no progress bars", 1, 0, NULL},
        {tg_options_flag("target"), CLI_STRING, &a->target, "NAME",
         cli_target_help(target_help, sizeof target_help), 1, 0, "cpu"},
        {tg_options_flag("outputReturnPeriod"), CLI_INT, &a->return_period, "N",
         "--output-mode everyN: return every N-th iteration's outputs", 1, 1e6, NULL},
    };
    int n = 0;
    while (flags[n].name)
        n++;
    n += optim_flags(&a->opt, flags + n);
    n += data_flags(&a->data, flags + n);
    n += device_flags(&a->dev, flags + n, (int)(sizeof flags / sizeof flags[0]) - n);
    cli_command cmd = {
        "train",
        "Train a model from the zoo and report its test accuracy.",
        "tilegraph train [--model NAME] [--epochs N] [--batch-size N] [options]",
        "--batch-size is the micro-batch: one host step takes batch x "
        "gradient-accumulation x device-iterations x replicas samples.\n\n"
        "Examples:\n"
        "  tilegraph train --model fashion-basic --optimizer sgd --lr 0.05 "
        "--batch-size 16 --epochs 5\n"
        "  tilegraph train --model mnist-pipeline --strategy pipelined --batch-size 40 "
        "--gradient-accumulation 10 --device-iterations 10 --optimizer adamw --lr 0.001",
        flags,
        n};
    int r = cli_parse(&cmd, argc, argv);
    a->dev.seed = a->seed;
    return r;
}

/* "N" host steps or "Ne" epochs, N >= 1. */
static int parse_every(const char *text, int64_t *steps, int64_t *epochs)
{
    char *end = NULL;
    errno = 0;
    long long n = strtoll(text, &end, 10);
    bool epochs_unit = end && *end == 'e' && end[1] == '\0';
    if (errno || end == text || n < 1 || (*end && !epochs_unit) || text[0] == '-' ||
        text[0] == '+' || text[0] == ' ')
        return -1;
    *(epochs_unit ? epochs : steps) = n;
    return 0;
}

/* Flags that cannot apply are errors, not ignored. */
static int check_args(train_args *a)
{
    const char *bad = NULL;
    if (a->checkpoint_every && parse_every(a->checkpoint_every, &a->every_steps, &a->every_epochs))
        bad = "--checkpoint-every takes N (host steps) or Ne (epochs), N >= 1: 500 or 2e";
    else if (a->checkpoint_every && !a->save)
        bad = "--checkpoint-every needs --save FILE: the checkpoint is written there";
    else if (a->resume && a->load)
        bad = "--resume and --load both give the starting weights: use one (--resume also "
              "continues the step count and the data position)";
    else if (a->resume_weights_only && !a->resume)
        bad = "--resume-weights-only applies to --resume FILE (--load takes weights only "
              "anyway)";
    if (bad) {
        fprintf(stderr, "tilegraph train: %s\n", bad);
        return -1;
    }
    return 0;
}

/* Outputs are checked before any work: a missing directory or read-only
 * mount found after an hour of training would lose the hour. */
static int probe_outputs(const train_args *a)
{
    tg_status st = TG_OK;
    if (a->save)
        st = tg_probe_writable("--save", a->save);
    if (st == TG_OK && a->dev.profile_dir)
        st = tg_probe_writable_dir("--profile-dir", a->dev.profile_dir);
    else if (st == TG_OK && a->dev.profile)
        st = tg_probe_writable_dir("--profile", "./profile");
    const char *trace_dir = tg_trace_directory();
    if (st == TG_OK && trace_dir)
        st = tg_probe_writable_dir("host trace directory", trace_dir);
    if (st != TG_OK) {
        fprintf(stderr, "tilegraph train: %s (nothing was trained)\n", tg_error_message());
        return -1;
    }
    return 0;
}

/* --target and --output-return-period: the options target and
 * outputReturnPeriod, over --engine-option and --options. A return period
 * without --output-mode everyN would be ignored, so it is an error. */
static int apply_train_options(const train_args *a, tg_options *o)
{
    if (a->target && tg_options_set(o, "target", a->target) != TG_OK) {
        fprintf(stderr, "tilegraph train: --target: %s\n", tg_error_message());
        return -1;
    }
    return device_return_period(o, "train", a->return_period);
}

typedef struct epoch_stats {
    double loss_sum, seconds;
    int64_t correct, scored, losses, seen, steps;
    int64_t skipped;         /* updates skipped for overflowing gradients (loss scaling) */
    float loss_scale;        /* at the end of the epoch */
    const char *auto_stages; /* the split --stages/--split auto chose, "" if given */
    train_exchange exchange; /* in an MPI job: the gradient exchange's times */
    exchange_share share;    /* and its share of the host step, once the epoch ended */
} epoch_stats;

/* Where the run is: the next host step is `step` of epoch `epoch`, and
 * `done` host steps ran in this process. */
typedef struct train_pos {
    int64_t epoch, step, done;
    int64_t per_step; /* samples per host step, recorded for --resume */
    int stop;         /* the signal that stopped the run, -1 for --max-steps, 0 none */
    int job_signal;   /* in an MPI job: the stop signal the instances agreed on, 0 none */
    const char *model;
} train_pos;

/* The checkpoint of --save, with the loader position for --resume. */
static tg_status save_checkpoint(const train_args *a, tg_session *s, const char *model,
                                 const train_pos *pos)
{
    char epoch[32], step[32], seed[32], per[32];
    snprintf(epoch, sizeof epoch, "%lld", (long long)pos->epoch);
    snprintf(step, sizeof step, "%lld", (long long)pos->step);
    snprintf(seed, sizeof seed, "%lld", (long long)a->seed);
    snprintf(per, sizeof per, "%lld", (long long)pos->per_step);
    const char *kv[] = {"train_epoch",
                        epoch,
                        "train_epoch_step",
                        step,
                        "train_seed",
                        seed,
                        "train_samples_per_step",
                        per,
                        TRAIN_CONFIG_KEY,
                        a->config,
                        "text_tokens",
                        a->vocab};
    /* in an MPI job every instance holds the same weights (checked here, on
     * all of them) and instance 0 writes them */
    CLI_TRY(tg_dist_sync(s));
    if (tg_dist_instance() != 0)
        return TG_OK;
    return tg_checkpoint_save_meta(s, a->save, model, kv, a->vocab ? 6 : 5);
}

/* A host step's loss sum and accuracy counts, and whether this instance
 * was asked to stop, summed over the instances of an MPI job so that the
 * progress and the epoch's figures are the job's, as one process of R
 * replicas reports. The sum travels while the next host step runs
 * (tg_dist_sum_f64_start): that step meets the other instances in its
 * gradient exchange anyway, and a blocking sum would make them meet twice
 * a step (docs/distributed.md, "Measuring"). The figures and the stop
 * agreement come a host step later; in one process, at once. */
enum { STEP_TOTALS = 6 };
typedef struct job_totals {
    /* loss sum, losses, correct, scored, instances signalled, their signals' sum */
    double v[STEP_TOTALS];
    bool pending; /* v is being summed */
} job_totals;

/* The step's totals, once summed: into the epoch's figures and, when any
 * instance was asked to stop, the signal every instance stops on (its own,
 * else the one the others got: mpirun sends them all the same). */
static tg_status totals_finish(job_totals *t, epoch_stats *st, train_pos *pos)
{
    if (!t->pending)
        return TG_OK;
    double t0 = cli_now();
    CLI_TRY(tg_dist_sum_f64_finish());
    st->exchange.step_totals += cli_now() - t0;
    t->pending = false;
    st->loss_sum += t->v[0];
    st->losses += (int64_t)t->v[1];
    st->correct += (int64_t)t->v[2];
    st->scored += (int64_t)t->v[3];
    int sig = cli_stop_signal();
    if (t->v[4] > 0)
        pos->job_signal = sig ? sig : (int)(t->v[5] / t->v[4] + 0.5);
    return TG_OK;
}

/* After a host step: the last step's totals finished, this one's started. */
static tg_status totals_next(job_totals *t, const step_buffers *b, epoch_stats *st, train_pos *pos)
{
    CLI_TRY(totals_finish(t, st, pos));
    int sig = cli_stop_signal();
    double v[STEP_TOTALS] = {b->loss_sum,       (double)b->losses_count, (double)b->correct,
                             (double)b->scored, sig ? 1.0 : 0.0,         (double)sig};
    memcpy(t->v, v, sizeof v);
    t->pending = true;
    if (!tg_dist_active())
        return totals_finish(t, st, pos);
    double t0 = cli_now();
    CLI_TRY(tg_dist_sum_f64_start(t->v, STEP_TOTALS));
    st->exchange.step_totals += cli_now() - t0;
    return TG_OK;
}

/* Stop here? A signal, or --max-steps reached. */
static bool should_stop(const train_args *a, train_pos *pos)
{
    /* in an MPI job only the signal the instances agreed on (job_totals): a
     * signal seen by one alone stops nobody yet */
    int sig = tg_dist_active() ? pos->job_signal : cli_stop_signal();
    if (sig) {
        pos->stop = sig;
        cli_stop_agreed(sig);
    } else if (a->max_steps && pos->done >= a->max_steps)
        pos->stop = -1;
    return pos->stop != 0;
}

/* The training loop's series for the profile (one row each per host step;
 * nothing when no profile is written): samples/s of this step, its mean
 * loss (in an MPI job, of this instance's replicas), and the loader's queue
 * depth after it. */
static void record_counters(tg_session *s, tg_loader *loader, const step_buffers *b, int64_t count,
                            double seconds)
{
    tg_session_record_counter(s, "samples/s", seconds > 0 ? (double)count / seconds : NAN);
    tg_session_record_counter(s, "loss",
                              b->losses_count ? b->loss_sum / (double)b->losses_count : NAN);
    tg_session_record_counter(s, "loader queue depth", (double)tg_loader_queue_depth(loader));
}

/* The progress line's figures so far. */
static void format_status(const epoch_stats *st, double seconds, char *status, size_t cap)
{
    char acc[24] = "n/a";
    if (st->scored)
        snprintf(acc, sizeof acc, "%5.2f%%", 100.0 * (double)st->correct / (double)st->scored);
    snprintf(status, cap, "loss %.4f | acc %s | %.0f samples/s",
             st->loss_sum / (double)(st->losses ? st->losses : 1), acc,
             (double)st->seen / (seconds > 0 ? seconds : 1e-9));
}

/* One epoch of training from host step pos->step; returns TG_OK or the
 * first failure. Stops early, at a host-step boundary, when should_stop. */
static tg_status train_epoch(const train_args *a, tg_session *s, const tg_model_graph *mg,
                             tg_loader *loader, train_pos *pos, step_buffers *b, epoch_stats *st)
{
    cli_progress bar;
    char label[32], status[160] = "";
    int64_t epoch = pos->epoch;
    snprintf(label, sizeof label, "epoch %lld/%lld", (long long)epoch + 1, (long long)a->epochs);
    memset(st, 0, sizeof *st);
    int64_t skipped_before = tg_session_skipped_updates(s);
    tg_loader_start_epoch(loader, epoch);
    int64_t steps = tg_loader_steps_per_epoch(loader);
    /* A resumed run skips the steps its checkpoint had done: the order of an
     * epoch depends on (seed, epoch) only, so this lands on the same samples. */
    for (int64_t k = 0; k < pos->step; k++) {
        int64_t count = 0;
        CLI_TRY(load_step(loader, b, &count));
    }
    CLI_TRY(train_exchange_begin(&st->exchange, s));
    cli_progress_start(&bar, label, steps, !a->quiet && !a->json);
    bar.done = pos->step; /* a resumed epoch starts where its checkpoint stopped */
    double t0 = cli_now();
    job_totals totals = {{0}, false};
    for (int64_t k = pos->step; k < steps && !should_stop(a, pos); k++) {
        int64_t count = 0;
        CLI_TRY(load_step(loader, b, &count));
        double step_t0 = cli_now();
        CLI_TRY(run_step(s, mg, b, count));
        CLI_TRY(totals_next(&totals, b, st, pos));
        record_counters(s, loader, b, count, cli_now() - step_t0);
        pos->step = k + 1;
        pos->done++;
        st->seen +=
            count * tg_dist_instances(); /* the job's samples: every instance took as many */
        st->steps++;
        format_status(st, cli_now() - t0, status, sizeof status);
        cli_progress_update(&bar, k + 1, status);
        if (a->every_steps && pos->done % a->every_steps == 0)
            CLI_TRY(save_checkpoint(a, s, pos->model, pos));
    }
    CLI_TRY(totals_finish(&totals, st, pos)); /* the last host step's */
    st->seconds = cli_now() - t0;
    format_status(st, st->seconds, status, sizeof status);
    CLI_TRY(train_exchange_end(&st->exchange, s, st->steps, st->seconds, &st->share));
    st->skipped = tg_session_skipped_updates(s) - skipped_before;
    st->loss_scale = tg_session_loss_scale(s);
    st->auto_stages = tg_session_auto_stages(s, NULL);
    cli_progress_finish(&bar, status);
    return TG_OK;
}

/* A language model's loss (nats per token) as perplexity and bits per token. */
static double perplexity(double loss)
{
    return exp(loss);
}
static double bits(double loss)
{
    return loss / log(2.0);
}

/* Through the JSON writer: a NaN loss (debug.checkNaN off) prints null,
 * never the `nan` that is not JSON, and the model name is escaped. A
 * language model's record adds its perplexities, bits per token (per byte
 * or per character, as token_unit says) and tokens per second. */
static void print_epoch_json(const train_args *a, int64_t epoch, const epoch_stats *st,
                             double train_acc, const eval_result *test, double sps)
{
    double test_acc = test->accuracy, loss = st->loss_sum / (double)(st->losses ? st->losses : 1);
    const tg_an_field lm[] = {
        {"token_unit", TG_AN_FIELD_STRING, a->unit, 0, 0},
        {"seq_len", TG_AN_FIELD_INT, NULL, a->seq_len, 0},
        {"train_perplexity", TG_AN_FIELD_NUMBER, NULL, 0, perplexity(loss)},
        {"train_bits_per_token", TG_AN_FIELD_NUMBER, NULL, 0, bits(loss)},
        {"test_loss", TG_AN_FIELD_NUMBER, NULL, 0, test->loss},
        {"test_perplexity", TG_AN_FIELD_NUMBER, NULL, 0, perplexity(test->loss)},
        {"test_bits_per_token", TG_AN_FIELD_NUMBER, NULL, 0, bits(test->loss)},
        {"tokens_per_s", TG_AN_FIELD_NUMBER, NULL, 0, sps * a->seq_len},
    };
    const tg_an_field f[] = {
        {"model", TG_AN_FIELD_STRING, a->model, 0, 0},
        {"epoch", TG_AN_FIELD_INT, NULL, epoch + 1, 0},
        {"train_loss", TG_AN_FIELD_NUMBER, NULL, 0,
         st->loss_sum / (double)(st->losses ? st->losses : 1)},
        /* NaN (null): the output mode returns no predictions */
        {"train_accuracy", TG_AN_FIELD_NUMBER, NULL, 0, train_acc},
        {"test_accuracy", TG_AN_FIELD_NUMBER, NULL, 0, test_acc},
        {"samples_per_s", TG_AN_FIELD_NUMBER, NULL, 0, sps},
        {"seconds", TG_AN_FIELD_NUMBER, NULL, 0, st->seconds},
        {"loss_scale", TG_AN_FIELD_NUMBER, NULL, 0, st->loss_scale},
        {"skipped_updates", TG_AN_FIELD_INT, NULL, st->skipped, 0},
        {"auto_stages", TG_AN_FIELD_STRING, st->auto_stages, 0, 0},
        /* an MPI job's gradient exchange, ms per host step (train_exchange.h) */
        {"host_step_ms", TG_AN_FIELD_NUMBER, NULL, 0, st->share.host_step},
        {"exchange_pct_of_host_step", TG_AN_FIELD_NUMBER, NULL, 0, st->share.pct},
        {"exchange_without_imbalance_pct", TG_AN_FIELD_NUMBER, NULL, 0, st->share.pct_transfer},
        {"exchange_during_backward_ms", TG_AN_FIELD_NUMBER, NULL, 0, st->share.during_backward},
        {"exchange_after_backward_ms", TG_AN_FIELD_NUMBER, NULL, 0, st->share.after_backward},
        {"exchange_imbalance_ms", TG_AN_FIELD_NUMBER, NULL, 0, st->share.imbalance},
        {"exchange_summing_ms", TG_AN_FIELD_NUMBER, NULL, 0, st->share.summing},
        {"exchange_step_totals_ms", TG_AN_FIELD_NUMBER, NULL, 0, st->share.step_totals},
    };
    enum { N_F = sizeof f / sizeof f[0], N_LM = sizeof lm / sizeof lm[0], N_BASE = 10 };
    tg_an_field all[N_F + N_LM + 1 + EVAL_MAX_IOU_CLASSES];
    char iou_names[EVAL_MAX_IOU_CLASSES][64];
    int n = 0;
    for (int i = 0; i < N_BASE; i++)
        all[n++] = f[i];
    for (int i = 0; a->unit && i < N_LM; i++)
        all[n++] = lm[i];
    if (!isnan(test->mean_iou)) { /* segmentation: test_accuracy is per pixel */
        all[n++] = (tg_an_field){"test_mean_iou", TG_AN_FIELD_NUMBER, NULL, 0, test->mean_iou};
        for (int c = 0; c < test->iou_classes; c++) {
            snprintf(iou_names[c], sizeof iou_names[c], "test_iou_%s", test->iou_name[c]);
            all[n++] = (tg_an_field){iou_names[c], TG_AN_FIELD_NUMBER, NULL, 0, test->iou[c]};
        }
    }
    for (int i = N_BASE; tg_dist_active() && i < N_F; i++)
        all[n++] = f[i];
    tg_an_print_record(stdout, all, n);
}

/* ", test mean IoU 0.712 (background 0.98, disc 0.61, ...)" */
static void iou_text(const eval_result *test, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, ", test mean IoU %.3f (", test->mean_iou);
    for (int c = 0; c < test->iou_classes && n < cap; c++)
        n += (size_t)snprintf(buf + n, cap - n, isnan(test->iou[c]) ? "%s%s n/a" : "%s%s %.3f",
                              c ? ", " : "", test->iou_name[c], test->iou[c]);
    if (n < cap)
        snprintf(buf + n, cap - n, ")");
}

/* The train accuracy needs every sample's prediction: an output mode that
 * returns only sums or the last iteration scores nothing, and says so
 * rather than print 0%. */
static void print_epoch(const train_args *a, int64_t epoch, const epoch_stats *st,
                        const eval_result *test)
{
    double test_acc = test->accuracy;
    double sps = st->seconds > 0 ? (double)st->seen / st->seconds : 0.0;
    double loss = st->loss_sum / (double)(st->losses ? st->losses : 1);
    double train_acc = st->scored ? 100.0 * (double)st->correct / (double)st->scored : NAN;
    if (a->json) {
        print_epoch_json(a, epoch, st, train_acc, test, sps);
    } else if (a->unit) {
        char t[32];
        printf("epoch %lld: train loss %.4f (perplexity %.2f, %.3f bits/%s), test loss %.4f "
               "(perplexity %.2f, %.3f bits/%s), test accuracy %.2f%%, %.0f samples/s, %.0f "
               "tokens/s (%s)\n",
               (long long)epoch + 1, loss, perplexity(loss), bits(loss), a->unit, test->loss,
               perplexity(test->loss), bits(test->loss), a->unit, test_acc, sps, sps * a->seq_len,
               cli_duration(st->seconds, t, sizeof t));
        if (tg_dist_active())
            train_exchange_print(stdout, &st->share);
    } else {
        char t[32], acc[96], iou[96 + 40 * EVAL_MAX_IOU_CLASSES] = "";
        if (st->scored)
            snprintf(acc, sizeof acc, "%.2f%%", train_acc);
        else
            snprintf(acc, sizeof acc, "not available (the output mode returns no predictions)");
        bool segment = !isnan(test->mean_iou);
        if (segment)
            iou_text(test, iou, sizeof iou);
        printf("epoch %lld: train loss %.4f, train %saccuracy %s, test %saccuracy %.2f%%%s, "
               "%.0f samples/s (%s)\n",
               (long long)epoch + 1, loss, segment ? "pixel " : "", acc, segment ? "pixel " : "",
               test_acc, iou, sps, cli_duration(st->seconds, t, sizeof t));
        if (tg_dist_active())
            train_exchange_print(stdout, &st->share);
        if (a->dev.loss_scaling || st->skipped)
            printf("  loss scale %g, %lld update%s skipped for overflowing gradients\n",
                   (double)st->loss_scale, (long long)st->skipped, st->skipped == 1 ? "" : "s");
    }
    fflush(stdout);
}

/* A text data set's tokens as the checkpoint records them: "byte", or
 * "char:" and the vocabulary's code points in decimal ("char:10,32,33"),
 * token i being the i-th: a model's weights mean nothing under another
 * numbering. Malloc'd; NULL when out of memory. */
static char *vocab_record(const tg_dataset *ds)
{
    tg_text_tokens kind;
    const int32_t *cps;
    int v = tg_dataset_vocab(ds, &kind, &cps);
    size_t cap = 8 + (size_t)v * 8;
    char *r = malloc(cap);
    if (!r)
        return NULL;
    if (kind != TG_TOKENS_CHAR) {
        snprintf(r, cap, "byte");
        return r;
    }
    size_t used = (size_t)snprintf(r, cap, "char:");
    for (int i = 0; i < v; i++)
        used += (size_t)snprintf(r + used, cap - used, "%s%d", i ? "," : "", (int)cps[i]);
    return r;
}

/* --load/--resume of a language model: the checkpoint's tokens must be this
 * run's (a checkpoint without the record, from the API, is taken as it is). */
static int check_vocab(const char *path, const char *vocab)
{
    size_t cap = strlen(vocab) + (1 << 20); /* room for any record to show */
    char *had = malloc(cap);
    if (!had)
        return -1;
    int r = 0;
    tg_status st = tg_checkpoint_read_meta(path, "text_tokens", had, cap);
    if (st == TG_OK && strcmp(had, vocab)) {
        fprintf(stderr,
                "tilegraph train: %s was trained on other tokens (%.40s%s) than this data "
                "gives (%.40s%s): give the same --tokens and a text with the same characters\n",
                path, had, strlen(had) > 40 ? "..." : "", vocab, strlen(vocab) > 40 ? "..." : "");
        r = -1;
    }
    free(had);
    return r;
}

/* --resume: where the checkpoint's run stopped. Its seed and host-step size
 * must be this run's, or the data order would differ. */
static int resume_position(const train_args *a, int64_t per_step, int64_t steps_per_epoch,
                           train_pos *pos)
{
    const char *keys[] = {"train_epoch", "train_epoch_step", "train_seed",
                          "train_samples_per_step"};
    int64_t v[4];
    for (int i = 0; i < 4; i++) {
        char buf[32], *end = NULL;
        if (tg_checkpoint_read_meta(a->resume, keys[i], buf, sizeof buf) != TG_OK) {
            fprintf(stderr,
                    "tilegraph train: --resume: %s (only a checkpoint written by train "
                    "--save can be resumed; use --load to start from its weights)\n",
                    tg_error_message());
            return -1;
        }
        errno = 0;
        v[i] = strtoll(buf, &end, 10);
        if (errno || !*buf || *end || v[i] < 0) {
            fprintf(stderr,
                    "tilegraph train: --resume %s: metadata '%s' is '%s', not a "
                    "non-negative integer\n",
                    a->resume, keys[i], buf);
            return -1;
        }
    }
    if (v[2] != a->seed || v[3] != per_step) {
        fprintf(stderr,
                "tilegraph train: --resume %s: the run used --seed %lld and %lld samples "
                "per host step, this one --seed %lld and %lld; give the same --seed, "
                "--batch-size, --gradient-accumulation, --device-iterations and "
                "--replicas to continue it\n",
                a->resume, (long long)v[2], (long long)v[3], (long long)a->seed,
                (long long)per_step);
        return -1;
    }
    if (v[1] > steps_per_epoch) {
        fprintf(stderr,
                "tilegraph train: --resume %s: stopped at host step %lld of an epoch, "
                "but an epoch has %lld here: is --data or --train-limit different?\n",
                a->resume, (long long)v[1], (long long)steps_per_epoch);
        return -1;
    }
    pos->epoch = v[0];
    pos->step = v[1];
    /* --max-steps and --checkpoint-every N count the run's host steps in
     * all, as a Trainer's global step does: those before the resume too */
    pos->done = v[0] * steps_per_epoch + v[1];
    return 0;
}

/* --resume of a run already at (or past) --epochs: nothing is trained; the
 * loaded weights are evaluated and reported. */
static void say_nothing_to_train(const train_args *a, const train_pos *pos)
{
    if (a->json)
        return; /* print_resumed_json's record says it */
    printf("nothing left to train: %s is at the end of epoch %lld and --epochs is %lld; "
           "evaluating its weights (a larger --epochs trains on)\n",
           a->resume, (long long)pos->epoch, (long long)a->epochs);
    fflush(stdout);
}

static void print_resumed_json(const train_args *a, const train_pos *pos, const eval_result *test)
{
    const tg_an_field f[] = {
        {"model", TG_AN_FIELD_STRING, a->model, 0, 0},
        {"epoch", TG_AN_FIELD_INT, NULL, pos->epoch, 0},
        {"trained_steps", TG_AN_FIELD_INT, NULL, 0, 0},
        {"nothing_to_train", TG_AN_FIELD_STRING, "the checkpoint is at --epochs already", 0, 0},
        {"test_accuracy", TG_AN_FIELD_NUMBER, NULL, 0, test->accuracy},
        {"test_loss", TG_AN_FIELD_NUMBER, NULL, 0, test->loss},
    };
    tg_an_print_record(stdout, f, (int)(sizeof f / sizeof f[0]) - (a->unit ? 0 : 1));
}

/* Profiles are closed (and renamed into place) after the checkpoint is safe;
 * a profile failure is reported once and makes the exit code non-zero.
 * Returns a bit per profile that failed: 1 training, 2 inference. */
static int finish_profiles(tg_session *train, tg_session *eval)
{
    int failed = 0;
    tg_session *list[2] = {train, eval};
    for (int i = 0; i < 2; i++)
        if (tg_session_finish_profile(list[i]) != TG_OK) {
            fprintf(stderr,
                    "tilegraph train: %s (the profile was not written; the checkpoint "
                    "is not affected)\n",
                    tg_error_message());
            failed |= 1 << i;
        }
    return failed;
}

/* The "profiles:" line names the profiles written, never one that failed
 * (its error is on stderr already). */
static void print_profiles(const train_args *a, const char *job_dir, int failed)
{
    const char *dir = a->dev.profile_dir ? a->dev.profile_dir : "./profile";
    if (!a->dev.profile && !a->dev.profile_dir)
        return;
    if (tg_dist_active()) {
        if (!failed)
            printf("profiles: one per instance in %s/instance-0 .. instance-%d "
                   "(tilegraph analyse %s instances)\n",
                   job_dir, tg_dist_instances() - 1, job_dir);
        return;
    }
    if (failed == 3)
        return;
    printf("profiles: ");
    if (!(failed & 1))
        printf("%s/training/profile.sqlite%s", dir, failed ? "" : ", ");
    if (!(failed & 2))
        printf("%s/inference/profile.sqlite", dir);
    printf("\n");
}

static void explain_failure(const train_args *a, tg_status st)
{
    fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
    if (st == TG_ERR_NUMERIC)
        fprintf(stderr,
                "tilegraph train: the run diverged; try a lower --lr, --loss-scaling "
                "dynamic or --lr-warmup-epochs%s\n",
                a->every_steps || a->every_epochs
                    ? ", and --resume the last checkpoint (it holds the weights before this step)"
                    : "; --checkpoint-every keeps the weights of long runs");
}

/* In an MPI job: instance 0 alone prints (the others' stdout goes nowhere;
 * their errors still reach stderr), and each instance profiles into its own
 * DIR/instance-K. */
static int join_as_instance(train_args *a, char *dir, size_t cap)
{
    if (!tg_dist_active())
        return 0;
    int k = tg_dist_instance();
    if (k > 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "tilegraph train: instance %d: cannot silence stdout\n", k);
        return 1;
    }
    if (a->dev.profile || a->dev.profile_dir) {
        snprintf(dir, cap, "%s/instance-%d", a->dev.profile_dir ? a->dev.profile_dir : "./profile",
                 k);
        a->dev.profile_dir = dir;
    }
    return 0;
}

/* An MPI job's instance loads only its replicas' samples of each host step:
 * per device iteration, the chunk of its R/N replicas (docs/distributed.md). */
static void split_for_instance(tg_loader_config *lc, int64_t replicas, int64_t per_update)
{
    int N = tg_dist_instances();
    if (N < 2 || replicas % N)
        return; /* N not dividing R: the session refuses it, naming both */
    lc->split_parts = N;
    lc->split_index = tg_dist_instance();
    lc->split_chunk = per_update / N;
}

int cmd_train(int argc, char **argv)
{
    train_args a;
    int r = parse_args(&a, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;
    if (check_args(&a) != 0)
        return 2;
    char instance_dir[1024];
    const char *job_profile_dir = a.dev.profile_dir ? a.dev.profile_dir : "./profile";
    if (join_as_instance(&a, instance_dir, sizeof instance_dir) != 0)
        return 1;
    if (probe_outputs(&a) != 0)
        return 1;
    /* instance 0 of an MPI job writes the checkpoint, so it alone locks it */
    save_lock lock = {-1, ""};
    if (a.save && tg_dist_instance() == 0 && save_lock_take(&lock, "train", a.save) != 0)
        return 1;
    cli_stop_at_step_boundaries();
    train_context ctx;
    if (train_context_open(&ctx, a.model, &a.data, a.train_limit, a.test_limit) != 0) {
        save_lock_release(&lock);
        return 1;
    }
    task_defaults(&a, ctx.text);
    if (ctx.text) {
        tg_text_tokens kind = TG_TOKENS_BYTE;
        tg_dataset_vocab(ctx.test, &kind, NULL);
        a.unit = kind == TG_TOKENS_CHAR ? "char" : "byte";
        a.seq_len = ctx.input.seq_len;
        if (!(a.vocab = vocab_record(ctx.test))) {
            fprintf(stderr, "tilegraph train: out of memory\n");
            train_context_close(&ctx);
            save_lock_release(&lock);
            return 1;
        }
    }
    int status = 1;
    tg_optimizer opt;
    tg_loader *loader = NULL;
    tg_model_graph mg = {0};
    tg_session *s = NULL;
    step_buffers b = {0};
    train_pos pos = {0};
    pos.model = ctx.model->name;
    tg_options *o = device_options(&a.dev, "train", false);
    if (!o || apply_train_options(&a, o) != 0)
        goto done;
    /* a host step's samples, as the session will take them: the loader and
     * the learning rate schedule (which counts weight updates) need them
     * before the session exists */
    tg_options_summary sum;
    if (tg_options_summarize(o, a.batch, &sum) != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        goto done;
    }
    int64_t per_update = sum.samples_per_update, per_step = sum.samples_per_step;
    pos.per_step = per_step;
    tg_loader_config lc;
    tg_status ls = loader_config(&ctx, ctx.train, per_step, true, &lc);
    lc.seed = (uint64_t)a.seed;
    split_for_instance(&lc, sum.replicas, per_update);
    if (ls == TG_OK)
        ls = tg_loader_create(ctx.train, &lc, &loader);
    if (ls != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        goto done;
    }
    int64_t steps_per_epoch = tg_loader_steps_per_epoch(loader);
    if (a.resume && resume_position(&a, per_step, steps_per_epoch, &pos) != 0)
        goto done;
    train_loop_shape shape = {a.epochs,
                              a.max_steps,
                              a.every_steps,
                              a.every_epochs,
                              tg_dataset_describe(ctx.train).samples,
                              ctx.test ? tg_dataset_describe(ctx.test).samples : 0,
                              steps_per_epoch,
                              per_step,
                              a.batch,
                              a.eval_batch,
                              a.seed,
                              pos.epoch,
                              pos.step,
                              ctx.model->name,
                              tg_dataset_describe(ctx.train).name,
                              ctx.test ? tg_dataset_describe(ctx.test).name : "",
                              a.opt.optimizer,
                              a.opt.schedule,
                              a.opt.lr,
                              a.opt.momentum,
                              a.opt.weight_decay,
                              a.opt.gamma,
                              a.opt.min_lr,
                              a.opt.warmup_epochs,
                              a.opt.max_grad_norm,
                              a.opt.step_epochs,
                              a.opt.nesterov,
                              a.opt.no_bias_correction};
    if (train_agree_loop(&shape) != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        goto done;
    }
    int64_t updates_per_epoch = steps_per_epoch * per_step / per_update;
    if (optim_make(&a.opt, "train", a.epochs, updates_per_epoch, &opt) != 0)
        goto done;
    train_config_text(&opt, &sum, a.epochs, a.opt.warmup_epochs, a.opt.step_epochs, a.config,
                      sizeof a.config);
    /* a run with nothing left to train only evaluates: its flags do not matter */
    unsigned load_flags = a.allow_non_finite ? TG_CHECKPOINT_ALLOW_NON_FINITE : 0;
    if (a.resume && pos.epoch < a.epochs &&
        train_config_check_resume(a.resume, a.config, a.resume_weights_only, &load_flags) != 0)
        goto done;
    double compile_start = cli_now();
    if (tg_model_graph_create_ex(ctx.model, (int)a.batch, &opt, &ctx.input, &mg) != TG_OK ||
        tg_session_create(mg.graph, o, &s) != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        goto done;
    }
    /* PopTorch's line, so a user sees that and how long the graph compiled
     * (the graph, its passes and the plans: all before the first step) */
    if (!a.json) {
        char t[32];
        printf("Graph compilation: 100%% (%s)\n",
               cli_duration(cli_now() - compile_start, t, sizeof t));
    }
    /* The evaluation program is compiled now, not after the first epoch:
     * one that cannot fit fails before any training (docs/reliability.md). */
    tg_status es = evaluate_prepare(&ctx, &a.dev, a.eval_batch);
    if (es != TG_OK) {
        /* the memory hint only where memory was what failed */
        fprintf(stderr, "tilegraph train: evaluation: %s (nothing was trained%s)\n",
                tg_error_message(),
                es == TG_ERR_CAPACITY || es == TG_ERR_NOMEM
                    ? "; a smaller --eval-batch-size needs less memory"
                    : "");
        goto done;
    }
    const char *start = a.resume ? a.resume : a.load;
    if (start && a.vocab && check_vocab(start, a.vocab) != 0)
        goto done;
    if (start && tg_checkpoint_load_ex(s, start, ctx.model->name, load_flags) != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        goto done;
    }
    if (step_buffers_init(&b, s, &mg) != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        goto done;
    }
    if (!a.json) {
        print_setup(&ctx, s, a.batch, steps_per_epoch);
        if (a.dev.threads <= 0) /* the rule: docs/multi-device.md, Threads */
            printf("threads: %d per device, the default from the cores free at compile time "
                   "(--threads N fixes it)\n",
                   tg_session_threads(s));
        fflush(stdout); /* before the progress lines on stderr */
    }
    double total_seconds = 0;
    eval_result test = {0, NAN, 0, NAN, 0, {0}, {0}};
    int64_t total_samples = 0;
    bool saved = false;     /* --save holds the weights at pos */
    bool evaluated = false; /* test holds the weights' figures */
    if (pos.epoch >= a.epochs)
        say_nothing_to_train(&a, &pos);
    for (; pos.epoch < a.epochs && !pos.stop; pos.epoch++, pos.step = 0) {
        epoch_stats st;
        saved = false;
        tg_status ts = train_epoch(&a, s, &mg, loader, &pos, &b, &st);
        if (ts == TG_OK && pos.step < steps_per_epoch)
            break;       /* stopped inside the epoch: the position stays there */
        if (ts == TG_OK) /* an MPI job's instances end each epoch with the same weights */
            ts = tg_dist_check_weights(s);
        if (ts != TG_OK) {
            explain_failure(&a, ts);
            goto done;
        }
        /* The weights the epoch trained are written before its evaluation,
         * which can fail: the final --save after the last epoch, the
         * --checkpoint-every Ne ones after theirs. */
        train_pos next = pos;
        next.epoch++, next.step = 0;
        if (a.save &&
            (next.epoch >= a.epochs || (a.every_epochs && next.epoch % a.every_epochs == 0))) {
            if (save_checkpoint(&a, s, ctx.model->name, &next) != TG_OK) {
                fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
                goto done;
            }
            saved = true;
        }
        ts = evaluate(&ctx, s, &a.dev, a.eval_batch, !a.quiet && !a.json, &test);
        if (ts != TG_OK) {
            explain_failure(&a, ts);
            if (saved)
                fprintf(stderr,
                        "tilegraph train: the weights of epoch %lld were saved to %s before "
                        "the evaluation failed\n",
                        (long long)next.epoch, a.save);
            goto done;
        }
        evaluated = true;
        total_seconds += st.seconds;
        total_samples += st.seen;
        print_epoch(&a, pos.epoch, &st, &test);
        if (!pos.stop)
            should_stop(&a, &pos);
    }
    if (pos.stop && pos.step >= steps_per_epoch)
        pos.epoch++, pos.step = 0; /* stopped at an epoch's end: resume at the next */
    if (a.save && !saved && save_checkpoint(&a, s, ctx.model->name, &pos) != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        goto done;
    }
    /* a resumed run that had nothing left to train reports the weights it
     * loaded, not an accuracy it never measured */
    if (!evaluated && !pos.stop) {
        es = evaluate(&ctx, s, &a.dev, a.eval_batch, !a.quiet && !a.json, &test);
        if (es != TG_OK) {
            explain_failure(&a, es);
            goto done;
        }
        if (a.json)
            print_resumed_json(&a, &pos, &test);
    }
    int profile_failed = finish_profiles(s, ctx.eval_session);
    if (pos.stop) {
        if (tg_dist_instance() == 0) /* every instance of a job stopped at this step */
            fprintf(stderr, "tilegraph train: stopped %s at epoch %lld, host step %lld%s%s\n",
                    pos.stop > 0 ? "by a signal" : "by --max-steps", (long long)pos.epoch + 1,
                    (long long)pos.step, a.save ? "; continue with --resume " : "",
                    a.save ? a.save : "");
        status = pos.stop > 0 ? cli_signal_exit_code(pos.stop) : profile_failed != 0;
        goto done;
    }
    if (!a.json) {
        print_profiles(&a, job_profile_dir, profile_failed);
        if (a.unit)
            printf("test: loss %.4f, perplexity %.2f, %.3f bits/%s, accuracy %.2f%%\n", test.loss,
                   perplexity(test.loss), bits(test.loss), a.unit, test.accuracy);
        else if (!isnan(test.mean_iou))
            printf("test pixel accuracy: %.2f%%, mean IoU: %.3f\n", test.accuracy, test.mean_iou);
        else
            printf("test accuracy: %.2f%%\n", test.accuracy);
        if (total_seconds > 0)
            printf("training: %.0f samples/s\n", (double)total_samples / total_seconds);
        if (a.save)
            printf("saved: %s\n", a.save);
    }
    status = profile_failed != 0;
done:
    step_buffers_free(&b);
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    tg_loader_destroy(loader);
    tg_options_destroy(o);
    train_context_close(&ctx);
    free(a.vocab);
    save_lock_release(&lock);
    return status;
}
