/* tests/runtime/test_evaluate.c - tg_evaluate (tilegraph/evaluate.h): the
 * accuracy of a session over a loader counts every sample once, the padding
 * of a short final step never, and agrees with the step-by-step loop a
 * caller would write; the mean IoU of hand-made counts; a source of
 * batches of the caller's (tg_evaluate_source, the Python package's way in)
 * gives tg_evaluate's figures, and its failure ends the evaluation with its
 * status and message.
 * TG_TEST_LABELS: quick */
#include "tg_test.h"

#include "tilegraph/evaluate.h"
#include "tilegraph/options.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 16
#define SAMPLES 50 /* three whole steps and one of 2 samples */

/* A linear classifier of synthetic 3x32x32 images into 10 classes. */
static tg_graph *classifier(tg_init init, tg_eval_io *io)
{
    tg_graph *g = tg_graph_create();
    io->input = tg_input(g, "x", TG_F32, tg_shape4(BATCH, 3, 32, 32));
    io->labels = NULL;
    tg_tensor *w = tg_param(g, "w", tg_shape2(10, 3 * 32 * 32), init);
    io->output = tg_linear(g, tg_reshape(g, io->input, tg_shape2(BATCH, 3 * 32 * 32)), w, NULL);
    tg_tensor_mark_output(io->output);
    TG_CHECK_OK(tg_graph_status(g));
    return g;
}

static tg_loader *test_loader(const tg_dataset *ds)
{
    tg_loader_config lc = tg_loader_defaults(ds, BATCH);
    lc.shuffle = false;
    lc.drop_last = false;
    tg_loader *l = NULL;
    TG_CHECK_OK(tg_loader_create(ds, &lc, &l));
    return l;
}

static tg_session *session(tg_graph *g)
{
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "threadsPerDevice", "1"));
    TG_CHECK_OK(tg_options_set(o, "monitor.enable", "false"));
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    tg_options_destroy(o);
    return s;
}

/* Zero weights score every class alike: the prediction is class 0 (the
 * first of equals) for every sample, so the accuracy is the share of the
 * samples labelled 0, padding left out. */
static void test_all_equal_scores(void)
{
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_open("synthetic", NULL, TG_SPLIT_TEST, SAMPLES, &ds));
    if (!ds)
        return;
    tg_eval_io io;
    tg_graph *g = classifier((tg_init){TG_INIT_ZEROS, 0, 0}, &io);
    tg_session *s = session(g);
    tg_loader *l = test_loader(ds);
    int zeros = 0;
    for (int64_t i = 0; i < SAMPLES; i++)
        zeros += tg_dataset_label(ds, i) == 0;
    tg_eval_result r;
    TG_CHECK_OK(tg_evaluate(s, &io, l, NULL, NULL, &r));
    TG_CHECK(r.scored == SAMPLES);
    TG_CHECK_NEAR(r.accuracy, 100.0 * zeros / SAMPLES, 1e-12);
    TG_CHECK(isnan(r.loss) && isnan(r.mean_iou) && r.iou_classes == 0);
    tg_loader_destroy(l);
    tg_session_destroy(s);
    tg_graph_destroy(g);
    tg_dataset_destroy(ds);
}

static int steps_seen;
static void count_steps(void *user, int64_t done, int64_t total)
{
    (void)user;
    steps_seen = done == steps_seen + 1 && total == 4 ? (int)done : -1;
}

/* A source of the caller's: the loader's batches, failing at step fail_at. */
typedef struct {
    tg_loader *loader;
    int steps, fail_at;
} my_source;

static tg_status my_next(void *user, void *input, int32_t *labels, int64_t *count)
{
    my_source *m = user;
    if (m->steps++ == m->fail_at)
        return tg_error_set(TG_ERR_IO, "my source: batch %d unreadable", m->fail_at);
    return tg_loader_next(m->loader, input, labels, count);
}

static void test_source_of_the_callers(void)
{
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_open("synthetic", NULL, TG_SPLIT_TEST, SAMPLES, &ds));
    if (!ds)
        return;
    tg_eval_io io;
    tg_graph *g = classifier((tg_init){TG_INIT_FAN_IN_UNIFORM, 3 * 32 * 32, 0}, &io);
    tg_session *s = session(g);
    tg_loader *l = test_loader(ds);
    tg_eval_result want, got;
    TG_CHECK_OK(tg_evaluate(s, &io, l, NULL, NULL, &want));
    tg_loader_destroy(l);
    my_source m = {test_loader(ds), 0, -1};
    tg_eval_source src = {tg_loader_steps_per_epoch(m.loader), my_next, &m, false};
    TG_CHECK_OK(tg_evaluate_source(s, &io, &src, NULL, NULL, &got));
    TG_CHECK(got.scored == SAMPLES && got.scored == want.scored && m.steps == 4);
    TG_CHECK(got.accuracy == want.accuracy);
    tg_loader_destroy(m.loader);
    /* the source's failure is the evaluation's, with its message */
    m = (my_source){test_loader(ds), 0, 2};
    src.user = &m;
    TG_CHECK(tg_evaluate_source(s, &io, &src, NULL, NULL, &got) == TG_ERR_IO);
    TG_CHECK(strstr(tg_error_message(), "batch 2 unreadable") != NULL);
    TG_CHECK(m.steps == 3);
    src.next = NULL;
    TG_CHECK(tg_evaluate_source(s, &io, &src, NULL, NULL, &got) == TG_ERR_INVALID_ARG);
    tg_loader_destroy(m.loader);
    tg_session_destroy(s);
    tg_graph_destroy(g);
    tg_dataset_destroy(ds);
}

/* Random weights: the same figures as the loop a caller would write. */
static void test_agrees_with_a_loop(void)
{
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_open("synthetic", NULL, TG_SPLIT_TEST, SAMPLES, &ds));
    if (!ds)
        return;
    tg_eval_io io;
    tg_graph *g = classifier((tg_init){TG_INIT_FAN_IN_UNIFORM, 3 * 32 * 32, 0}, &io);
    tg_session *s = session(g);
    tg_loader *l = test_loader(ds);
    static float x[BATCH * 3 * 32 * 32], scores[BATCH * 10];
    int32_t y[BATCH];
    int64_t correct = 0, scored = 0, n = 0;
    while (tg_loader_next(l, x, y, &n) == TG_OK && n > 0) {
        TG_CHECK_OK(tg_session_write(s, io.input, x, sizeof x));
        TG_CHECK_OK(tg_session_run(s));
        TG_CHECK_OK(tg_session_read(s, io.output, scores, sizeof scores));
        for (int64_t i = 0; i < n; i++) {
            int best = 0;
            for (int c = 1; c < 10; c++)
                best = scores[i * 10 + c] > scores[i * 10 + best] ? c : best;
            correct += best == y[i];
            scored++;
        }
    }
    tg_loader_destroy(l);
    l = test_loader(ds);
    tg_eval_result r;
    steps_seen = 0;
    TG_CHECK_OK(tg_evaluate(s, &io, l, count_steps, NULL, &r));
    TG_CHECK(scored == SAMPLES && r.scored == scored);
    TG_CHECK_NEAR(r.accuracy, 100.0 * (double)correct / (double)scored, 1e-12);
    TG_CHECK(steps_seen == 4);
    /* a loader at the end of its epoch has no steps left to score */
    TG_CHECK(tg_evaluate(NULL, &io, l, NULL, NULL, &r) == TG_ERR_INVALID_ARG);
    tg_loader_destroy(l);
    tg_session_destroy(s);
    tg_graph_destroy(g);
    tg_dataset_destroy(ds);
}

static void test_mean_iou(void)
{
    /* class 0: 1 of 2 labelled and 1 predicted; class 1: 1 of 1 and 2; class 2: none */
    int64_t truth[3] = {2, 1, 0}, predicted[3] = {1, 2, 0}, both[3] = {1, 1, 0};
    double iou[3];
    TG_CHECK_NEAR(tg_eval_mean_iou(truth, predicted, both, 3, iou), 0.5, 1e-15);
    TG_CHECK_NEAR(iou[0], 0.5, 1e-15);
    TG_CHECK_NEAR(iou[1], 0.5, 1e-15);
    TG_CHECK(isnan(iou[2]));
    TG_CHECK(isnan(tg_eval_mean_iou(truth + 2, predicted + 2, both + 2, 1, NULL)));
}

int main(void)
{
    TG_RUN(test_all_equal_scores);
    TG_RUN(test_agrees_with_a_loop);
    TG_RUN(test_source_of_the_callers);
    TG_RUN(test_mean_iou);
    return tg_test_finish();
}
