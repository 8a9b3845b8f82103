/* tools/train_util.h - what train and infer share: the model and data they
 * work on, session set-up, evaluation on the test set. */
#ifndef TG_TOOLS_TRAIN_UTIL_H
#define TG_TOOLS_TRAIN_UTIL_H

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

tg_status train_session_create(tg_graph *g, int64_t seed, int64_t threads, tg_session **out);

/* Accuracy (percent) of the weights of `trained` on the test set. */
tg_status evaluate(train_context *ctx, const tg_session *trained, int64_t batch, int64_t threads,
                   bool progress, double *accuracy);

/* Samples whose highest score is the label. */
int64_t tg_count_correct(const float *scores, const int32_t *labels, int64_t n, int classes);
int tg_argmax(const float *v, int n);

void print_setup(const train_context *ctx, const tg_session *s, int64_t batch,
                 int64_t steps_per_epoch);

#endif
