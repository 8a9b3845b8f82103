/* runtime/evaluate.c - a model's figures on a test set (tilegraph/evaluate.h):
 * the scoring of returned outputs against labels and the loop over a
 * loader's steps, with an MPI job's turn-taking. Moved here from the
 * command (tools/train_util.c), so that the command, the Python package and
 * the benchmarks report the same figures from one loop. */
#include "tilegraph/evaluate.h"

#include "tilegraph/dist.h"

#include "core/alloc.h"
#include "core/error.h"

#include <math.h>
#include <string.h>

/* -log softmax(scores)[label], in double. */
static double row_nll(const float *scores, int n, int label)
{
    double max = scores[0], sum = 0;
    for (int c = 1; c < n; c++)
        max = scores[c] > max ? scores[c] : max;
    for (int c = 0; c < n; c++)
        sum += exp((double)scores[c] - max);
    return log(sum) + max - (double)scores[label];
}

/* The class of the largest of n scores `stride` apart (the first of equals). */
static int argmax_strided(const float *v, int n, int64_t stride)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i * stride] > v[best * stride])
            best = i;
    return best;
}

/* One prediction against its label; a label outside the classes is not
 * scored. A segmentation's row is a pixel, its class scores `stride`
 * apart, and counts towards the IoU. */
static void score_row(tg_eval_tally *t, int64_t classes, const float *scores, int64_t stride,
                      int32_t label, bool nll)
{
    if (label < 0 || label >= classes)
        return;
    int pred = argmax_strided(scores, (int)classes, stride);
    t->correct += pred == label;
    if (nll)
        t->nll += row_nll(scores, (int)classes, label);
    if (t->truth) {
        t->truth[label]++;
        t->predicted[pred]++;
        t->both[label] += pred == label;
    }
    t->scored++;
}

void tg_eval_score(const tg_session *s, const tg_tensor *output, const float *scores,
                   const int32_t *labels, int64_t count, bool nll, tg_eval_tally *t)
{
    tg_shape out = tg_tensor_shape(output);
    /* [N, classes], [N, S, classes], or a segmentation's [N, classes, H, W] */
    bool segment = out.ndim == 4;
    int64_t batch = out.dim[0], classes = segment ? out.dim[1] : out.dim[out.ndim - 1];
    int64_t rows = tg_shape_numel(out) / batch / classes; /* positions or pixels */
    /* a row's scores: classes apart rows (segmentation), or one after another */
    int64_t stride = segment ? rows : 1, row_step = segment ? 1 : classes;
    int64_t n_scores = tg_session_output_count(s, output);
    for (int64_t k = 0; k < n_scores; k++) {
        int64_t h = tg_session_output_index(s, output, k);
        for (int64_t i = 0; h >= 0 && i < batch; i++) {
            int64_t sample = h * batch + i;
            if (sample >= count)
                continue; /* padding of a short final step */
            const float *row = scores + (k * batch + i) * rows * classes;
            for (int64_t r = 0; r < rows; r++)
                score_row(t, classes, row + r * row_step, stride, labels[sample * rows + r], nll);
        }
    }
}

double tg_eval_mean_iou(const int64_t *truth, const int64_t *predicted, const int64_t *both,
                        int classes, double *iou)
{
    double sum = 0;
    int counted = 0;
    for (int c = 0; c < classes; c++) {
        int64_t uni = truth[c] + predicted[c] - both[c];
        double v = uni > 0 ? (double)both[c] / (double)uni : NAN;
        if (iou)
            iou[c] = v;
        if (uni > 0)
            sum += v, counted++;
    }
    return counted ? sum / counted : NAN;
}

/* The host buffers of one run: the input as the loader hands it out, the
 * labels and every returned copy of the scores. */
typedef struct eval_buffers {
    int64_t samples, per_sample, rows, n_scores, classes;
    void *input;
    size_t input_bytes;
    int32_t *labels;
    float *scores;
    size_t score_bytes;
} eval_buffers;

static tg_status buffers_init(eval_buffers *b, const tg_session *s, const tg_eval_io *io)
{
    memset(b, 0, sizeof *b);
    tg_shape in = tg_tensor_shape(io->input), out = tg_tensor_shape(io->output);
    int64_t batch = in.dim[0];
    b->samples = tg_session_samples_per_run(s, io->input);
    b->per_sample = tg_shape_numel(in) / batch;
    b->classes = out.ndim == 4 ? out.dim[1] : out.dim[out.ndim - 1];
    b->rows = tg_shape_numel(out) / batch / b->classes;
    b->n_scores = tg_session_output_count(s, io->output);
    tg_dtype dt = tg_tensor_dtype(io->input);
    size_t elem = dt == TG_U8 ? 1 : dt == TG_I32 ? sizeof(int32_t) : sizeof(float);
    b->input_bytes = (size_t)(b->samples * b->per_sample) * elem;
    b->score_bytes = (size_t)(b->n_scores * batch * b->rows * b->classes) * sizeof(float);
    b->input = tg_calloc(1, b->input_bytes ? b->input_bytes : 1);
    b->labels = tg_calloc((size_t)(b->samples * b->rows) + 1, sizeof(int32_t));
    b->scores = tg_malloc(b->score_bytes ? b->score_bytes : 1);
    if (!b->input || !b->labels || !b->scores)
        return tg_error(TG_ERR_NOMEM, "evaluate: out of memory for the host buffers");
    return TG_OK;
}

static void buffers_free(eval_buffers *b)
{
    tg_free(b->input);
    tg_free(b->labels);
    tg_free(b->scores);
}

/* The loader as a source: the batch in the input tensor's type. */
typedef struct loader_source {
    tg_loader *loader;
    tg_dtype dtype;
} loader_source;

static tg_status load(void *user, void *input, int32_t *labels, int64_t *count)
{
    const loader_source *l = user;
    switch (l->dtype) {
    case TG_I32:
        return tg_loader_next_tokens(l->loader, input, labels, count);
    case TG_U8:
        return tg_loader_next_u8(l->loader, input, labels, count);
    default:
        return tg_loader_next(l->loader, input, labels, count);
    }
}

static tg_status run(tg_session *s, const tg_eval_io *io, eval_buffers *b)
{
    TG_TRY(tg_session_write(s, io->input, b->input, b->input_bytes));
    if (io->labels)
        TG_TRY(tg_session_write(s, io->labels, b->labels,
                                (size_t)(b->samples * b->rows) * sizeof(int32_t)));
    TG_TRY(tg_session_run(s));
    return tg_session_read(s, io->output, b->scores, b->score_bytes);
}

/* The result from the job's summed counts: [correct, scored, then a
 * segmentation's truth, predicted and both per class], and a language
 * model's summed cross-entropy (NULL for other tasks). */
static void result_of(const int64_t *counts, const double *nll, int64_t classes, bool segment,
                      tg_eval_result *out)
{
    int64_t correct = counts[0], scored = counts[1];
    out->accuracy = scored ? 100.0 * (double)correct / (double)scored : 0.0;
    out->loss = nll && scored ? *nll / (double)scored : NAN;
    out->scored = scored;
    out->mean_iou = NAN;
    out->iou_classes = 0;
    if (!segment)
        return;
    int n = (int)classes;
    double few[TG_EVAL_MAX_IOU_CLASSES];
    double *all = n <= TG_EVAL_MAX_IOU_CLASSES ? few : tg_malloc((size_t)n * sizeof *all);
    if (!all)
        return; /* the mean is NaN: said, not guessed */
    out->mean_iou = tg_eval_mean_iou(counts + 2, counts + 2 + n, counts + 2 + 2 * n, n, all);
    int keep = n < TG_EVAL_MAX_IOU_CLASSES ? n : TG_EVAL_MAX_IOU_CLASSES;
    for (int c = 0; c < keep; c++)
        out->iou[c] = all[c];
    out->iou_classes = keep;
    if (all != few)
        tg_free(all);
}

tg_status tg_evaluate_source(tg_session *s, const tg_eval_io *io, const tg_eval_source *src,
                             void (*progress)(void *user, int64_t done, int64_t total), void *user,
                             tg_eval_result *out)
{
    memset(out, 0, sizeof *out);
    out->loss = out->mean_iou = NAN;
    if (!s || !io || !io->input || !io->output || !src || !src->next || src->steps < 0)
        return tg_error(TG_ERR_INVALID_ARG, "tg_evaluate: give a session, its input and output "
                                            "tensors and a loader (or a source of batches)");
    eval_buffers b;
    tg_status st = buffers_init(&b, s, io);
    bool segment = tg_tensor_shape(io->output).ndim == 4,
         nll = tg_tensor_dtype(io->input) == TG_I32;
    int64_t steps = src->steps, classes = b.classes;
    /* correct, scored, then a segmentation's truth, predicted and both per class */
    int n_counts = 2 + (segment ? 3 * (int)classes : 0);
    int64_t *counts = tg_calloc((size_t)n_counts, sizeof *counts);
    if (!counts && st == TG_OK)
        st = tg_error(TG_ERR_NOMEM, "evaluate: out of memory for the counts");
    double nll_sum = 0;
    /* an MPI job's instances take turns at the steps (or each scores its
     * own share) and add up their counts: every sample is scored once, as
     * in one process */
    int N = src->own_share ? 1 : tg_dist_instances(), me = src->own_share ? 0 : tg_dist_instance();
    for (int64_t k = 0; st == TG_OK && k < steps; k++) {
        int64_t count = 0;
        st = src->next(src->user, b.input, b.labels, &count);
        if (k % N != me)
            continue;
        if (st == TG_OK)
            st = run(s, io, &b);
        if (st == TG_OK) {
            tg_eval_tally t = {.classes = classes};
            if (segment)
                t.truth = counts + 2, t.predicted = counts + 2 + classes,
                t.both = counts + 2 + 2 * classes;
            tg_eval_score(s, io->output, b.scores, b.labels, count, nll, &t);
            counts[0] += t.correct;
            counts[1] += t.scored;
            nll_sum += t.nll;
        }
        if (progress)
            progress(user, k + 1, steps);
    }
    if (st == TG_OK)
        st = tg_dist_sum_i64(counts, n_counts);
    if (st == TG_OK && tg_dist_active())
        st = tg_dist_sum_f64(&nll_sum, 1);
    if (st == TG_OK)
        result_of(counts, nll ? &nll_sum : NULL, classes, segment, out);
    tg_free(counts);
    buffers_free(&b);
    return st;
}

tg_status tg_evaluate(tg_session *s, const tg_eval_io *io, tg_loader *loader,
                      void (*progress)(void *user, int64_t done, int64_t total), void *user,
                      tg_eval_result *out)
{
    if (!loader || !io || !io->input) {
        memset(out, 0, sizeof *out);
        out->loss = out->mean_iou = NAN;
        return tg_error(TG_ERR_INVALID_ARG,
                        "tg_evaluate: give a session, its input and output tensors and a loader");
    }
    loader_source l = {loader, tg_tensor_dtype(io->input)};
    tg_eval_source src = {tg_loader_steps_per_epoch(loader), load, &l, false};
    return tg_evaluate_source(s, io, &src, progress, user, out);
}
