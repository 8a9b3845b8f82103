/* tests/compile/test_predict.c - the public predictions (tilegraph/predict.h)
 * on mnist-pipeline's four blocks, at the fixed default rates
 * (TILEGRAPH_CALIBRATION=off, so no timing is measured): a split's stages
 * add up to the whole model, costs grow with the batch but no faster than
 * its FLOPs, a pipelined step takes at least every micro-batch's pass
 * through its slowest stage, the automatic split is one of the splits, each
 * schedule stashes what docs give for it, and bad input is named. */
#include "tg_test.h"

#include "compile/pipeline.h"
#include "tilegraph/models.h"
#include "tilegraph/optim.h"
#include "tilegraph/predict.h"

#include <stdlib.h>
#include <string.h>

enum { MICRO = 4 };

static tg_model_graph mnist(int batch)
{
    tg_model_graph mg = {0};
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), batch, &opt, &mg));
    return mg;
}

static tg_options *options(const char *schedule)
{
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "executionStrategy", "pipelined"));
    TG_CHECK_OK(tg_options_set(o, "pipelineSchedule", schedule));
    TG_CHECK_OK(tg_options_set_int(o, "Training.gradientAccumulation", MICRO));
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    return o;
}

static double sum(const double *v, int n)
{
    double s = 0;
    for (int k = 0; k < n; k++)
        s += v[k];
    return s;
}

static void test_stages_add_up_to_the_model(void)
{
    tg_model_graph mg = mnist(8);
    tg_options *o = options("1f1b");
    tg_split_prediction one, two;
    TG_CHECK_OK(tg_predict_split(mg.graph, o, 1, "B1,B2,B3,B4", &one));
    TG_CHECK_OK(tg_predict_split(mg.graph, o, 2, "B1,B2|B3,B4", &two));
    TG_CHECK(one.n_stages == 1 && two.n_stages == 2 && two.blocks);
    TG_CHECK(strcmp(two.spec, "B1,B2|B3,B4") == 0 && two.micro_batches == MICRO);
    TG_CHECK(!two.calibrated && !two.cycle_model && two.fits);
    /* the same ops, divided: forward and backward sum to the single stage's */
    TG_CHECK_NEAR(sum(two.forward, 2), one.forward[0], 1e-9 * one.forward[0]);
    TG_CHECK_NEAR(sum(two.backward, 2), one.backward[0], 1e-9 * one.backward[0]);
    TG_CHECK(one.forward[0] > 0 && one.backward[0] > 0);
    /* one stage sends nothing; stage 0 sends activations, stage 1 gradients */
    TG_CHECK(one.copies[0] == 0 && two.copies[0] > 0 && two.copies[1] > 0);
    for (int k = 0; k < 2; k++) {
        TG_CHECK(two.stage_seconds[k] >= two.forward[k] + two.backward[k] + two.copies[k]);
        /* no schedule finishes before every micro-batch has passed each stage */
        TG_CHECK(two.step_seconds >= MICRO * (two.forward[k] + two.backward[k]));
        TG_CHECK(two.busy[k] > 0 && two.busy[k] <= 1);
        TG_CHECK(two.memory_bytes[k] > 0);
    }
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

/* Twice the batch is twice the FLOPs of every op, while weights, per-op
 * overheads and the update stay: the prediction grows, by at most 2x. */
static void test_costs_follow_the_batch(void)
{
    tg_model_graph small = mnist(8), large = mnist(16);
    tg_options *o = options("1f1b");
    tg_split_prediction a, b;
    TG_CHECK_OK(tg_predict_split(small.graph, o, 2, "B1,B2|B3,B4", &a));
    TG_CHECK_OK(tg_predict_split(large.graph, o, 2, "B1,B2|B3,B4", &b));
    for (int k = 0; k < 2; k++) {
        TG_CHECK(b.forward[k] > a.forward[k] && b.forward[k] <= 2 * a.forward[k]);
        TG_CHECK(b.backward[k] > a.backward[k] && b.backward[k] <= 2 * a.backward[k]);
        TG_CHECK(b.copies[k] > a.copies[k] && b.copies[k] <= 2 * a.copies[k]);
        TG_CHECK(b.memory_bytes[k] > a.memory_bytes[k]);
    }
    TG_CHECK(b.step_seconds > a.step_seconds && b.step_seconds <= 2 * a.step_seconds);
    tg_options_destroy(o);
    tg_model_graph_destroy(&small);
    tg_model_graph_destroy(&large);
}

static void test_auto_is_one_of_the_splits(void)
{
    tg_model_graph mg = mnist(8);
    tg_options *o = options("1f1b");
    /* "<B2": B2's convolution's input gradient on the stage before */
    const char *splits[] = {"B1|B2,B3,B4", "B1,B2|B3,B4", "B1,B2,B3|B4", "B1|<B2,B3,B4"};
    tg_split_prediction best, sp;
    TG_CHECK_OK(tg_predict_split(mg.graph, o, 2, "auto", &best));
    int found = -1;
    double slowest_best = best.stage_seconds[0] > best.stage_seconds[1] ? best.stage_seconds[0]
                                                                        : best.stage_seconds[1];
    for (int k = 0; k < 4; k++) {
        TG_CHECK_OK(tg_predict_split(mg.graph, o, 2, splits[k], &sp));
        if (strcmp(sp.spec, best.spec) == 0) {
            found = k;
            TG_CHECK_NEAR(sp.step_seconds, best.step_seconds, 1e-12);
        }
        /* no split has a faster slowest stage than the one chosen */
        TG_CHECK(slowest_best <= (sp.stage_seconds[0] > sp.stage_seconds[1] ? sp.stage_seconds[0]
                                                                            : sp.stage_seconds[1]));
    }
    if (found < 0)
        tg_test_fail(__FILE__, __LINE__, "auto chose \"%s\"", best.spec);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

/* Stash depths over N = 2 devices and m = 4 micro-batches, as
 * compile/pipeline.h gives them (capped at m): grouped 2(N-d)+1,
 * interleaved N-d+1, 1f1b N-d, gpipe m, sharded 1. */
static void test_every_schedule(void)
{
    tg_model_graph mg = mnist(8);
    tg_options *o = options("1f1b");
    tg_schedule_prediction s[TG_SCHEDULE_COUNT + 1];
    int n = 0;
    TG_CHECK_OK(tg_predict_schedules(mg.graph, o, 2, "B1,B2|B3,B4", s, TG_SCHEDULE_COUNT + 1, &n));
    TG_CHECK(n == TG_SCHEDULE_COUNT);
    const struct {
        const char *name;
        int stash[2];
    } want[] = {{"grouped", {4, 3}}, {"interleaved", {3, 2}}, {"gpipe", {4, 4}}, {"1f1b", {2, 1}},
                {"sharded", {1, 1}}, {"zb-h1", {2, 1}}, /* 1f1b's stash: W runs right after its B */
                {"zb-h2", {3, 2}}};                     /* 2N-d-1 micro-batches wait for their W */
    for (int k = 0; k < n && k < TG_SCHEDULE_COUNT; k++) {
        TG_CHECK(strcmp(s[k].name, tg_schedule_name((tg_schedule_kind)k)) == 0);
        for (size_t w = 0; w < sizeof want / sizeof want[0]; w++)
            if (strcmp(s[k].name, want[w].name) == 0)
                for (int d = 0; d < 2; d++)
                    if (s[k].peak_stash[d] != want[w].stash[d])
                        tg_test_fail(__FILE__, __LINE__, "%s stashes %d on device %d, not %d",
                                     s[k].name, s[k].peak_stash[d], d, want[w].stash[d]);
        TG_CHECK(s[k].step_seconds > 0 && s[k].bubble >= 0 && s[k].bubble < 1);
        TG_CHECK(s[k].peak_stash_bytes[0] > 0);
    }
    /* sharded runs one micro-batch at a time: no faster than any other */
    for (int k = 0; k < n; k++)
        TG_CHECK(s[TG_SCHEDULE_SHARDED].step_seconds >= s[k].step_seconds - 1e-15);
    /* a cap: only the first entries */
    TG_CHECK_OK(tg_predict_schedules(mg.graph, o, 2, "B1,B2|B3,B4", s, 2, &n));
    TG_CHECK(n == 2);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

static void test_errors_name_the_fault(void)
{
    tg_model_graph mg = mnist(8);
    tg_options *o = options("1f1b");
    tg_split_prediction sp;
    TG_CHECK(tg_predict_split(NULL, o, 2, "auto", &sp) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_error_message(), "no graph") != NULL);
    TG_CHECK(tg_predict_split(mg.graph, o, 2, "B1,B2|B9", &sp) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "B9") != NULL);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

int main(void)
{
    setenv("TILEGRAPH_CALIBRATION", "off", 1);
    TG_RUN(test_stages_add_up_to_the_model);
    TG_RUN(test_costs_follow_the_batch);
    TG_RUN(test_auto_is_one_of_the_splits);
    TG_RUN(test_every_schedule);
    TG_RUN(test_errors_name_the_fault);
    return tg_test_finish();
}
