/* tools/train_exchange.h - an MPI job's gradient exchange with the other
 * instances as a share of the host step, per epoch of `tilegraph train`
 * (docs/distributed.md, "Measuring"): measured inside the run, from the
 * session's own counters (tg_session_exchange_times) and the time of the
 * host step's sum of loss, accuracy and stop signal, so that two processes
 * slowing each other on a shared host do not count as the exchange. And
 * the instances' agreement at start on what shapes the training loop. */
#ifndef TG_TOOLS_TRAIN_EXCHANGE_H
#define TG_TOOLS_TRAIN_EXCHANGE_H

#include "tilegraph/dist.h"

#include <stdio.h>

/* One epoch's figures, milliseconds per host step, the mean of the
 * instances (of each instance's device that spent the most). */
typedef struct exchange_share {
    double host_step, during_backward, after_backward, imbalance, summing, step_totals;
    double pct;          /* of the host step: all of the exchange's parts */
    double pct_transfer; /* the same without the imbalance */
} exchange_share;

typedef struct train_exchange {
    tg_exchange_times *start; /* per device, at the epoch's start */
    int devices;
    double step_totals; /* seconds in the host steps' sums (tg_dist_sum_f64) */
} train_exchange;

/* At an epoch's start: the session's counters so far. */
tg_status train_exchange_begin(train_exchange *x, const tg_session *s);
/* At its end (every instance calls it: the mean is a sum over them): the
 * epoch's `steps` host steps took `seconds` on this instance. Frees x. */
tg_status train_exchange_end(train_exchange *x, const tg_session *s, int64_t steps, double seconds,
                             exchange_share *out);
/* The text line under an epoch's. */
void train_exchange_print(FILE *f, const exchange_share *e);

/* What shapes an MPI job's training loop and its data on each instance:
 * every instance must have the same, or they wait on each other forever
 * (one ends an epoch or the run while another still exchanges). */
typedef struct train_loop_shape {
    int64_t epochs, max_steps, every_steps, every_epochs; /* 0: none */
    int64_t train_samples, test_samples, steps_per_epoch, samples_per_step;
    int64_t batch, eval_batch, seed;
    int64_t start_epoch, start_step; /* --resume's position */
    /* what the run trains on and how: the same model and data set, and the
     * optimizer's flags (which otherwise differ only as the graph's checksum) */
    const char *model, *train_data, *test_data, *optimizer, *schedule;
    double lr, momentum, weight_decay, gamma, min_lr, warmup_epochs, max_grad_norm;
    int64_t step_epochs;
    bool nesterov, no_bias_correction;
    /* --save given: saving checks every instance's weights (a collective),
     * so an instance without it would wait in its evaluation for ever */
    bool save;
} train_loop_shape;

/* Compare it over the instances (all call it, before the session is
 * compiled): an error naming the first flag that differs and both values.
 * TG_OK outside a job. */
tg_status train_agree_loop(const train_loop_shape *l);

#endif
