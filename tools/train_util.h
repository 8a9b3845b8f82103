/* tools/train_util.h - what train and infer share: the model and data they
 * work on, the buffers of one host step and running it, and evaluation on
 * the test set. */
#ifndef TG_TOOLS_TRAIN_UTIL_H
#define TG_TOOLS_TRAIN_UTIL_H

#include "device_flags.h"

#include "tilegraph/models.h"
#include "tilegraph/session.h"

#include "data/dataset.h"

#include <stdbool.h>

typedef struct train_context {
    const tg_model_spec *model;
    tg_dataset *train, *test; /* train is NULL when only testing */
    /* the evaluation graph and session, made on first use */
    tg_model_graph eval_graph;
    tg_session *eval_session;
    int64_t eval_batch;
} train_context;

/* Find the model and load the data (train_limit < 0: no training split).
 * Prints the error and returns -1 on failure. */
int train_context_open(train_context *ctx, const char *model, const char *dataset,
                       const char *dir, int64_t train_limit, int64_t test_limit);
void train_context_close(train_context *ctx);

/* Host buffers for one run of a session, and what the last run returned. */
typedef struct step_buffers {
    int64_t samples, batch, classes;
    float *images, *scores, *losses;
    int32_t *labels;
    int64_t n_scores, n_losses; /* copies returned per run (outputMode) */
    /* results of the last run_step */
    double loss_sum;
    int64_t losses_count; /* micro-batches the returned losses cover */
    int64_t correct, scored;
} step_buffers;

tg_status step_buffers_init(step_buffers *b, const tg_session *s, const tg_model_graph *mg,
                            const tg_model_spec *m);
void step_buffers_free(step_buffers *b);

/* Write the step's samples (the first `count` are real, the rest padding),
 * run, and score the returned outputs against the labels. */
tg_status run_step(tg_session *s, const tg_model_graph *mg, step_buffers *b, int64_t count);

/* Accuracy (percent) of the weights of `trained` on the test set, run with
 * the same device settings (accumulation 1). */
tg_status evaluate(train_context *ctx, const tg_session *trained, const device_args *dev,
                   int64_t batch, bool progress, double *accuracy);

int tg_argmax(const float *v, int n);

void print_setup(const train_context *ctx, const tg_session *s, int64_t batch,
                 int64_t steps_per_epoch);

#endif
