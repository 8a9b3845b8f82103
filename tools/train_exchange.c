/* tools/train_exchange.c - the gradient exchange's share of a host step,
 * per epoch, and the instances' agreement on the training loop
 * (train_exchange.h). */
#include "train_exchange.h"

#include <stdlib.h>
#include <string.h>

tg_status train_exchange_begin(train_exchange *x, const tg_session *s)
{
    memset(x, 0, sizeof *x);
    if (!tg_dist_active())
        return TG_OK;
    x->devices = tg_session_devices(s);
    x->start = calloc((size_t)x->devices, sizeof *x->start);
    if (!x->start)
        return tg_error_set(TG_ERR_NOMEM, "train: out of memory for %d devices' exchange figures",
                            x->devices);
    for (int d = 0; d < x->devices; d++)
        x->start[d] = tg_session_exchange_times(s, d);
    return TG_OK;
}

static double spent(const tg_exchange_times *t)
{
    return t->during_backward + t->after_backward + t->summing;
}

/* This epoch's times of the device that spent the most in the exchange
 * (the devices of a pipeline exchange at the same time, each on its thread). */
static tg_exchange_times busiest(const train_exchange *x, const tg_session *s)
{
    tg_exchange_times most = {0};
    for (int d = 0; d < x->devices; d++) {
        tg_exchange_times now = tg_session_exchange_times(s, d), a = x->start[d];
        tg_exchange_times e = {now.updates - a.updates, now.during_backward - a.during_backward,
                               now.after_backward - a.after_backward, now.imbalance - a.imbalance,
                               now.summing - a.summing};
        if (spent(&e) > spent(&most))
            most = e;
    }
    return most;
}

tg_status train_exchange_end(train_exchange *x, const tg_session *s, int64_t steps, double seconds,
                             exchange_share *out)
{
    memset(out, 0, sizeof *out);
    if (!tg_dist_active() || !x->start)
        return TG_OK;
    tg_exchange_times e = busiest(x, s);
    free(x->start);
    x->start = NULL;
    double per = steps > 0 ? 1e3 / (double)steps : 0; /* seconds in all -> ms a step */
    double v[6] = {seconds * per,     e.during_backward * per, e.after_backward * per,
                   e.imbalance * per, e.summing * per,         x->step_totals * per};
    tg_status st = tg_dist_sum_f64(v, 6);
    if (st != TG_OK)
        return st;
    for (int k = 0; k < 6; k++)
        v[k] /= (double)tg_dist_instances();
    *out = (exchange_share){v[0], v[1], v[2], v[3], v[4], v[5], 0, 0};
    double all = v[1] + v[2] + v[4] + v[5];
    out->pct = v[0] > 0 ? 100.0 * all / v[0] : 0;
    out->pct_transfer = v[0] > 0 ? 100.0 * (all - v[3]) / v[0] : 0;
    return TG_OK;
}

void train_exchange_print(FILE *f, const exchange_share *e)
{
    fprintf(f,
            "  exchange with instances: %.3f ms of a %.3f ms host step (%.1f%%; %.1f%% without "
            "waiting for slower instances): %.3f ms in MPI during the backward, %.3f after it "
            "(%.3f of it waiting for a slower instance), %.3f summing, %.3f the step's loss and "
            "stop sums (the instances' mean)\n",
            e->during_backward + e->after_backward + e->summing + e->step_totals, e->host_step,
            e->pct, e->pct_transfer, e->during_backward, e->after_backward, e->imbalance,
            e->summing, e->step_totals);
}

tg_status train_agree_loop(const train_loop_shape *l)
{
    static const char *const names[] = {
        "--epochs",
        "--max-steps",
        "--checkpoint-every in host steps",
        "--checkpoint-every in epochs",
        "training samples (--train-limit, or the training set's size)",
        "test samples (--test-limit, or the test set's size)",
        "host steps per epoch",
        "samples per host step",
        "--batch-size",
        "--eval-batch-size",
        "--seed",
        "epoch to start at (--resume's checkpoint)",
        "host step to start at (--resume's checkpoint)",
    };
    const int64_t v[] = {
        l->epochs,       l->max_steps,       l->every_steps,      l->every_epochs, l->train_samples,
        l->test_samples, l->steps_per_epoch, l->samples_per_step, l->batch,        l->eval_batch,
        l->seed,         l->start_epoch,     l->start_step};
    _Static_assert(sizeof names / sizeof *names == sizeof v / sizeof *v, "a name per value");
    static const char *const advice = "every instance must be given the same training flags and "
                                      "data (the same data set on every host)";
    static const char *const text_names[] = {
        "--model",
        "training set",
        "test set",
        "--optimizer",
        "--lr-schedule",
        "--lr",
        "--momentum",
        "--weight-decay",
        "--lr-gamma",
        "--lr-min",
        "--lr-warmup-epochs",
        "--max-grad-norm",
        "--lr-step-epochs",
        "--nesterov",
        "--no-bias-correction",
        "--save (instance 0 writes the file, but every instance takes part in saving)",
    };
    enum { N_TEXT = sizeof text_names / sizeof *text_names };
    const double d[] = {l->lr,     l->momentum,      l->weight_decay,  l->gamma,
                        l->min_lr, l->warmup_epochs, l->max_grad_norm, (double)l->step_epochs};
    char num[sizeof d / sizeof *d][40]; /* as the flags were written, to 9 figures */
    for (size_t i = 0; i < sizeof d / sizeof *d; i++)
        snprintf(num[i], sizeof num[i], "%.9g", d[i]);
    const char *texts[N_TEXT] = {l->model ? l->model : "",
                                 l->train_data ? l->train_data : "",
                                 l->test_data ? l->test_data : "",
                                 l->optimizer ? l->optimizer : "",
                                 l->schedule ? l->schedule : "",
                                 num[0],
                                 num[1],
                                 num[2],
                                 num[3],
                                 num[4],
                                 num[5],
                                 num[6],
                                 num[7],
                                 l->nesterov ? "on" : "off",
                                 l->no_bias_correction ? "on" : "off",
                                 l->save ? "given" : "not given"};
    /* the numbers first: a --checkpoint-every given to one instance (with
     * its --save) is named as that, not as the --save */
    tg_status st = tg_dist_agree_values(names, v, (int)(sizeof v / sizeof *v), advice);
    if (st != TG_OK)
        return st;
    return tg_dist_agree_texts(text_names, texts, N_TEXT, advice);
}
