/* tools/train_print.c - what `tilegraph train` prints: each epoch's line
 * (or JSON record), the profiles written, the run's result, and failures
 * explained. */
#include "train_cmd.h"

#include "tilegraph/analyse.h"
#include "tilegraph/dist.h"

#include <math.h>
#include <string.h>

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
    const tg_record_field lm[] = {
        {"token_unit", TG_RECORD_STRING, a->unit, 0, 0},
        {"seq_len", TG_RECORD_INT, NULL, a->seq_len, 0},
        {"train_perplexity", TG_RECORD_NUMBER, NULL, 0, perplexity(loss)},
        {"train_bits_per_token", TG_RECORD_NUMBER, NULL, 0, bits(loss)},
        {"test_loss", TG_RECORD_NUMBER, NULL, 0, test->loss},
        {"test_perplexity", TG_RECORD_NUMBER, NULL, 0, perplexity(test->loss)},
        {"test_bits_per_token", TG_RECORD_NUMBER, NULL, 0, bits(test->loss)},
        {"tokens_per_s", TG_RECORD_NUMBER, NULL, 0, sps * a->seq_len},
    };
    const tg_record_field f[] = {
        {"model", TG_RECORD_STRING, a->model, 0, 0},
        {"epoch", TG_RECORD_INT, NULL, epoch + 1, 0},
        {"train_loss", TG_RECORD_NUMBER, NULL, 0,
         st->loss_sum / (double)(st->losses ? st->losses : 1)},
        /* NaN (null): the output mode returns no predictions */
        {"train_accuracy", TG_RECORD_NUMBER, NULL, 0, train_acc},
        {"test_accuracy", TG_RECORD_NUMBER, NULL, 0, test_acc},
        {"samples_per_s", TG_RECORD_NUMBER, NULL, 0, sps},
        {"seconds", TG_RECORD_NUMBER, NULL, 0, st->seconds},
        {"loss_scale", TG_RECORD_NUMBER, NULL, 0, st->loss_scale},
        {"skipped_updates", TG_RECORD_INT, NULL, st->skipped, 0},
        {"auto_stages", TG_RECORD_STRING, st->auto_stages, 0, 0},
        /* an MPI job's gradient exchange, ms per host step (train_exchange.h) */
        {"host_step_ms", TG_RECORD_NUMBER, NULL, 0, st->share.host_step},
        {"exchange_pct_of_host_step", TG_RECORD_NUMBER, NULL, 0, st->share.pct},
        {"exchange_without_imbalance_pct", TG_RECORD_NUMBER, NULL, 0, st->share.pct_transfer},
        {"exchange_during_backward_ms", TG_RECORD_NUMBER, NULL, 0, st->share.during_backward},
        {"exchange_after_backward_ms", TG_RECORD_NUMBER, NULL, 0, st->share.after_backward},
        {"exchange_imbalance_ms", TG_RECORD_NUMBER, NULL, 0, st->share.imbalance},
        {"exchange_summing_ms", TG_RECORD_NUMBER, NULL, 0, st->share.summing},
        {"exchange_step_totals_ms", TG_RECORD_NUMBER, NULL, 0, st->share.step_totals},
    };
    enum { N_F = sizeof f / sizeof f[0], N_LM = sizeof lm / sizeof lm[0], N_BASE = 10 };
    tg_record_field all[N_F + N_LM + 1 + EVAL_MAX_IOU_CLASSES];
    char iou_names[EVAL_MAX_IOU_CLASSES][64];
    int n = 0;
    for (int i = 0; i < N_BASE; i++)
        all[n++] = f[i];
    for (int i = 0; a->unit && i < N_LM; i++)
        all[n++] = lm[i];
    if (!isnan(test->mean_iou)) { /* segmentation: test_accuracy is per pixel */
        all[n++] = (tg_record_field){"test_mean_iou", TG_RECORD_NUMBER, NULL, 0, test->mean_iou};
        for (int c = 0; c < test->iou_classes; c++) {
            snprintf(iou_names[c], sizeof iou_names[c], "test_iou_%s", test->iou_name[c]);
            all[n++] = (tg_record_field){iou_names[c], TG_RECORD_NUMBER, NULL, 0, test->iou[c]};
        }
    }
    for (int i = N_BASE; tg_dist_active() && i < N_F; i++)
        all[n++] = f[i];
    tg_print_record(stdout, all, n);
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
void train_print_epoch(const train_args *a, int64_t epoch, const epoch_stats *st,
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
        char num[32];
        if (device_given(&a->dev, "lossScaling", num, sizeof num) || st->skipped)
            printf("  loss scale %g, %lld update%s skipped for overflowing gradients\n",
                   (double)st->loss_scale, (long long)st->skipped, st->skipped == 1 ? "" : "s");
    }
    fflush(stdout);
}

/* --resume of a run already at (or past) --epochs: nothing is trained; the
 * loaded weights are evaluated and reported. */
void train_say_nothing_left(const train_args *a, const train_pos *pos)
{
    if (a->json)
        return; /* train_print_resumed_json's record says it */
    printf("nothing left to train: %s is at the end of epoch %lld and --epochs is %lld; "
           "evaluating its weights (a larger --epochs trains on)\n",
           a->resume, (long long)pos->epoch, (long long)a->epochs);
    fflush(stdout);
}

void train_print_resumed_json(const train_args *a, const train_pos *pos, const eval_result *test)
{
    const tg_record_field f[] = {
        {"model", TG_RECORD_STRING, a->model, 0, 0},
        {"epoch", TG_RECORD_INT, NULL, pos->epoch, 0},
        {"trained_steps", TG_RECORD_INT, NULL, 0, 0},
        {"nothing_to_train", TG_RECORD_STRING, "the checkpoint is at --epochs already", 0, 0},
        {"test_accuracy", TG_RECORD_NUMBER, NULL, 0, test->accuracy},
        {"test_loss", TG_RECORD_NUMBER, NULL, 0, test->loss},
    };
    tg_print_record(stdout, f, (int)(sizeof f / sizeof f[0]) - (a->unit ? 0 : 1));
}

/* The "profiles:" line names the profiles written, never one that failed
 * (its error is on stderr already). */
void train_print_profiles(const train_args *a, const char *job_dir, int failed)
{
    char b1[32], b2[32];
    const char *given_dir = device_given(&a->dev, "autoReport.directory", b1, sizeof b1);
    const char *dir = given_dir ? given_dir : "./profile";
    if (!given_dir && !device_given(&a->dev, "autoReport.all", b2, sizeof b2))
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

void train_explain_failure(const train_args *a, tg_status st)
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

void train_print_result(const train_args *a, const eval_result *test, int64_t samples,
                        double seconds)
{
    if (a->unit)
        printf("test: loss %.4f, perplexity %.2f, %.3f bits/%s, accuracy %.2f%%\n", test->loss,
               perplexity(test->loss), bits(test->loss), a->unit, test->accuracy);
    else if (!isnan(test->mean_iou))
        printf("test pixel accuracy: %.2f%%, mean IoU: %.3f\n", test->accuracy, test->mean_iou);
    else
        printf("test accuracy: %.2f%%\n", test->accuracy);
    if (seconds > 0)
        printf("training: %.0f samples/s\n", (double)samples / seconds);
    if (a->save)
        printf("saved: %s\n", a->save);
}
