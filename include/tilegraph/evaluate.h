/* tilegraph/evaluate.h - a model's figures on a test set: accuracy, loss
 * and, for a segmentation model, the intersection over union, from an
 * inference session run over a loader.
 *
 *     tg_eval_result r;
 *     tg_evaluate(s, &(tg_eval_io){images, labels, logits}, loader, NULL, NULL, &r);
 *     printf("%.2f%%\n", r.accuracy);
 *
 * The command's evaluation (train's test accuracy, infer's scoring), the
 * Python package and the benchmarks all evaluate here, so they report the
 * same figures for the same weights. In an MPI job (tilegraph/dist.h) the
 * instances take turns at the loader's steps and add up their counts:
 * every sample is scored once, as in one process.
 */
#ifndef TILEGRAPH_EVALUATE_H
#define TILEGRAPH_EVALUATE_H

#include "tilegraph/export.h"

#include "tilegraph/data.h"
#include "tilegraph/graph.h"
#include "tilegraph/session.h"
#include "tilegraph/status.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Classes whose IoU a result keeps one by one (the mean covers all). */
#define TG_EVAL_MAX_IOU_CLASSES 32

/* The tensors of an evaluation: the host-stream input (f32 images, u8
 * images or i32 token ids, as the loader hands them out), the labels
 * ([N], [N, S] for a language model, [N, H, W] for a segmentation; NULL
 * when the graph reads none) and the scores returned: [N, classes],
 * [N, S, classes] or a segmentation's [N, classes, H, W]. */
typedef struct tg_eval_io {
    tg_tensor *input, *labels, *output;
} tg_eval_io;

/* The counts of scored predictions, added up over runs. */
typedef struct tg_eval_tally {
    int64_t correct, scored;
    double nll;      /* with nll: -log softmax(scores)[label] summed, in double */
    int64_t classes; /* segmentation: entries of truth, predicted, both */
    int64_t *truth, *predicted,
        *both; /* segmentation: pixels labelled, predicted, both per class */
} tg_eval_tally;

/* Add one run's returned scores (all the output's copies, as tg_session_read
 * gives them) against the labels of its `samples` samples; only the first
 * `count` are real (the rest pad a short final step). A label outside the
 * classes (a masked language model's unmasked positions) is not scored. */
TG_API void tg_eval_score(const tg_session *s, const tg_tensor *output, const float *scores,
                          const int32_t *labels, int64_t count, bool nll, tg_eval_tally *t);

/* The mean IoU over the classes labelled or predicted (NaN when none),
 * each class's into iou[] (NaN when its union is empty) when iou is given. */
TG_API double tg_eval_mean_iou(const int64_t *truth, const int64_t *predicted, const int64_t *both,
                               int classes, double *iou);

/* What tg_evaluate measures: the accuracy (percent) of the predictions (a
 * language model's every scored token, a segmentation's every pixel), a
 * language model's mean cross-entropy of the scored tokens (nats; NaN for
 * other tasks) and a segmentation's IoU per class and mean (NaN for other
 * tasks). */
typedef struct tg_eval_result {
    double accuracy, loss;
    int64_t scored;
    double mean_iou;
    int iou_classes; /* entries of iou: the classes, at most TG_EVAL_MAX_IOU_CLASSES */
    double iou[TG_EVAL_MAX_IOU_CLASSES];
} tg_eval_result;

/* Run s over every step of the loader (from where it stands to the end of
 * its epoch) and score the output against the labels. progress, if given,
 * is called after each step with the steps done and in all. */
TG_API tg_status tg_evaluate(tg_session *s, const tg_eval_io *io, tg_loader *loader,
                             void (*progress)(void *user, int64_t done, int64_t total), void *user,
                             tg_eval_result *out);

/* A source of batches other than a tg_loader (the Python package's
 * DataLoader): next fills one run's input (the input tensor's type, every
 * sample of the run) and its labels, and sets *count to the real samples
 * (the rest pad a short final step); a status other than TG_OK ends the
 * evaluation with it. steps: the runs in all. own_share: in an MPI job each
 * instance's source gives its own share of the test set (a distributed
 * loader), so every instance scores all its steps; otherwise every instance
 * sees the same steps and they take turns, as tg_evaluate's loader does. */
typedef tg_status (*tg_eval_next_fn)(void *user, void *input, int32_t *labels, int64_t *count);
typedef struct tg_eval_source {
    int64_t steps;
    tg_eval_next_fn next;
    void *user;
    bool own_share;
} tg_eval_source;

/* tg_evaluate over such a source: the same scoring, counts and result. */
TG_API tg_status tg_evaluate_source(tg_session *s, const tg_eval_io *io, const tg_eval_source *src,
                                    void (*progress)(void *user, int64_t done, int64_t total),
                                    void *user, tg_eval_result *out);

#ifdef __cplusplus
}
#endif
#endif
