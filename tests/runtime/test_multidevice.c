/* tests/runtime/test_multidevice.c - the semantics of running over several
 * devices, proved against one device: sharded and pipelined execution give
 * bit-identical weights (zb-h1's and zb-h2's split backward as 1f1b's whole one), replicas match a
 * larger batch and stay identical, device iterations equal separate runs, stash depths hold, bad
 * configurations fail at compile time, and a failing step stops every device.
 * TG_TEST_LABELS: threads */
#include "tg_test.h"
#include "tg_test_train.h"

#include "core/alloc.h"
#include "core/error.h"
#include "runtime/session_state.h"
#include "tilegraph/models.h"

#include <string.h>

enum { BATCH = 4, PIXELS = 784 };

typedef tg_test_model trainer;

static tg_options *options(const char *const *kv)
{
    tg_options *o = tg_options_create();
    tg_options_set(o, "threadsPerDevice", "1");
    tg_options_set(o, "randomSeed", "3");
    tg_test_options_set(o, kv);
    return o;
}

static tg_status make(trainer *t, int batch, const tg_optimizer *opt, const char *const *kv)
{
    memset(t, 0, sizeof *t);
    TG_TRY(tg_model_graph_create(tg_model_find("mnist-pipeline"), batch, opt, &t->mg));
    tg_options *o = options(kv);
    tg_status s = tg_session_create(t->mg.graph, o, &t->s);
    tg_options_destroy(o);
    return s;
}

static void destroy(trainer *t)
{
    tg_test_model_destroy(t);
}

/* Run `runs` host steps, feeding consecutive samples. */
static void train(trainer *t, int runs)
{
    int64_t n = tg_session_samples_per_run(t->s, t->mg.images);
    float *img = tg_malloc((size_t)n * PIXELS * sizeof(float));
    int32_t *lab = tg_malloc((size_t)n * sizeof(int32_t));
    for (int r = 0; r < runs; r++) {
        tg_test_samples(r * n, n, img, lab);
        TG_CHECK_OK(tg_session_write(t->s, t->mg.images, img, (size_t)n * PIXELS * sizeof(float)));
        TG_CHECK_OK(tg_session_write(t->s, t->mg.labels, lab, (size_t)n * sizeof(int32_t)));
        TG_CHECK_OK(tg_session_run(t->s));
    }
    tg_free(img);
    tg_free(lab);
}

/* Largest difference between the parameters of two sessions (replica 0). */
static double max_param_diff(const trainer *a, const trainer *b, bool *identical)
{
    const tg_graph *g = a->mg.graph;
    double worst = 0;
    *identical = true;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *p = g->nodes[i];
        if (p->op != TG_OP_PARAM)
            continue;
        const tg_tensor *q = tg_graph_find(b->mg.graph, p->name);
        const float *x = tg_session_data(a->s, p), *y = tg_session_data(b->s, q);
        *identical &= memcmp(x, y, tg_nbytes(p)) == 0;
        for (int64_t k = 0; k < tg_numel(p); k++) {
            double d = fabs((double)x[k] - y[k]) / (1.0 + fabs((double)y[k]));
            if (d > worst)
                worst = d;
        }
    }
    return worst;
}

static void test_sharded_is_bit_identical_to_one_device(void)
{
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    trainer one, four;
    TG_CHECK_OK(make(&one, BATCH, &opt, NULL));
    TG_CHECK_OK(make(&four, BATCH, &opt, (const char *[]){"executionStrategy", "sharded", NULL}));
    if (one.s && four.s) {
        TG_CHECK(tg_session_program(four.s)->n_devices == 4);
        /* the public counts the CLI prints agree with the program */
        TG_CHECK(tg_session_devices(four.s) == 4 && tg_session_replicas(four.s) == 1);
        TG_CHECK(tg_session_devices(one.s) == 1 && tg_session_replicas(one.s) == 1);
        train(&one, 3);
        train(&four, 3);
        bool same;
        max_param_diff(&one, &four, &same);
        TG_CHECK(same);
    }
    destroy(&one);
    destroy(&four);
}

static void test_pipelined_matches_accumulation_on_one_device(void)
{
    static const char *schedules[] = {"grouped", "interleaved", "gpipe", "1f1b", "zb-h1"};
    tg_optimizer opt = tg_optimizer_sgd(0.05f, 0.9f);
    trainer one;
    TG_CHECK_OK(
        make(&one, BATCH, &opt, (const char *[]){"Training.gradientAccumulation", "6", NULL}));
    if (one.s)
        train(&one, 2);
    for (int k = 0; k < 5 && one.s; k++) {
        trainer pipe;
        TG_CHECK_OK(
            make(&pipe, BATCH, &opt,
                 (const char *[]){"executionStrategy", "pipelined", "pipelineSchedule",
                                  schedules[k], "Training.gradientAccumulation", "6", NULL}));
        if (pipe.s) {
            train(&pipe, 2);
            bool same;
            double diff = max_param_diff(&one, &pipe, &same);
            if (!same)
                tg_test_fail(__FILE__, __LINE__, "%s: weights differ (max %.3g)", schedules[k],
                             diff);
            /* the engine never held more micro-batches than the plan has slots */
            const tg_program *p = tg_session_program(pipe.s);
            for (int d = 0; d < p->n_devices; d++) {
                TG_CHECK(tg_session_max_in_flight(pipe.s, d) <= p->devices[d].stash_depth);
                TG_CHECK(tg_session_max_in_flight(pipe.s, d) == p->schedule.stash_depth[d]);
            }
        }
        destroy(&pipe);
    }
    destroy(&one);
}

/* One device, accumulation 6, two host steps: what the splits below must
 * give to the bit. */
static void train_reference(trainer *one, const tg_optimizer *opt)
{
    TG_CHECK_OK(
        make(one, BATCH, opt, (const char *[]){"Training.gradientAccumulation", "6", NULL}));
    if (one->s)
        train(one, 2);
}

/* Train two as one was trained; fail naming `what` unless the weights are
 * the same to the bit. */
static void expect_reference_weights(const trainer *one, trainer *two, const char *what)
{
    train(two, 2);
    bool same;
    double diff = max_param_diff(one, two, &same);
    if (!same)
        tg_test_fail(__FILE__, __LINE__, "%s: weights differ (max %.3g)", what, diff);
}

/* Stages that begin inside a block ("B2:layer2/maxpool2d": block B2 from its
 * max-pool on, as --stages auto may choose): pipelined and sharded give the
 * weights one device gives, to the bit, and the block's ops really are on
 * two devices. */
static void test_stages_inside_a_block_are_bit_identical(void)
{
    static const char *strategies[] = {"pipelined", "sharded"};
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    trainer one;
    train_reference(&one, &opt);
    for (int k = 0; k < 2 && one.s; k++) {
        trainer two;
        TG_CHECK_OK(make(&two, BATCH, &opt,
                         (const char *[]){"executionStrategy", strategies[k], "stages",
                                          "B1,B2|B2:layer2/maxpool2d,B3,B4",
                                          "Training.gradientAccumulation", "6", NULL}));
        if (two.s) {
            const tg_program *p = tg_session_program(two.s);
            const tg_tensor *pool = tg_graph_find(two.mg.graph, "layer2/maxpool2d");
            const tg_tensor *conv = tg_graph_find(two.mg.graph, "layer2/conv/weight");
            TG_CHECK(p->n_devices == 2 && pool && conv);
            TG_CHECK(pool && p->device_of[pool->id] == 1);
            TG_CHECK(conv && p->device_of[conv->id] == 0);
            expect_reference_weights(&one, &two, strategies[k]);
        }
        destroy(&two);
    }
    destroy(&one);
}

/* A stage handing its convolution's input gradient back ("B1|<B2,B3,B4":
 * B2's conv2d_bwd_data on device 0, its weight updated on device 1 and
 * copied to device 0 with each micro-batch's gradient): pipelined, sharded
 * and a zero-bubble schedule give the weights one device gives, to the
 * bit, and the gradient really runs on device 0. */
static void test_handed_back_input_gradient_is_bit_identical(void)
{
    static const char *strategies[] = {"pipelined", "sharded", "pipelined"};
    static const char *schedules[] = {"1f1b", "", "zb-h1"};
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    trainer one;
    train_reference(&one, &opt);
    for (int k = 0; k < 3 && one.s; k++) {
        trainer two;
        const char *kv[] = {"executionStrategy",
                            strategies[k],
                            "stages",
                            "B1|<B2,B3,B4",
                            "Training.gradientAccumulation",
                            "6",
                            "pipelineSchedule",
                            schedules[k],
                            NULL};
        if (!schedules[k][0])
            kv[6] = NULL; /* sharded: no schedule */
        TG_CHECK_OK(make(&two, BATCH, &opt, kv));
        if (two.s) {
            const tg_program *p = tg_session_program(two.s);
            const tg_graph *g = two.mg.graph;
            const tg_tensor *w = tg_graph_find(g, "layer2/conv/weight");
            int moved = 0;
            for (int i = 0; i < g->n_nodes; i++)
                if (g->nodes[i]->op == TG_OP_CONV2D_BWD_DATA && g->nodes[i]->forward_of &&
                    g->nodes[i]->forward_of->in[1] == w)
                    moved += p->device_of[i] == 0;
            TG_CHECK(p->n_devices == 2 && w && p->device_of[w->id] == 1 && moved == 1);
            expect_reference_weights(&one, &two, kv[6] ? kv[7] : strategies[k]);
        }
        destroy(&two);
    }
    destroy(&one);
}

/* zb-h1 and zb-h2 run each backward as B (input gradient) then W (weight
 * gradient): on 2 and 4 devices, with SGD and AdamW, a few updates give
 * the weights 1f1b gives to the bit, the backward is really split (a later
 * stage has both B and W steps) and no device holds more micro-batches
 * than its slots. */
static void train_pair(const char *schedule, const char *stages, const tg_optimizer *opt,
                       int want_devices)
{
    trainer ref, zb;
    const char *kv[] = {
        "executionStrategy", "pipelined", "stages", stages, "Training.gradientAccumulation", "8",
        "pipelineSchedule",  "1f1b",      NULL};
    TG_CHECK_OK(make(&ref, BATCH, opt, kv));
    kv[7] = schedule;
    TG_CHECK_OK(make(&zb, BATCH, opt, kv));
    if (ref.s && zb.s) {
        const tg_program *p = tg_session_program(zb.s);
        TG_CHECK(p->n_devices == want_devices && tg_pipe_schedule_splits(&p->schedule));
        const tg_device_program *last = &p->devices[p->n_devices - 1];
        TG_CHECK(last->input_grad_steps > 0 &&
                 last->input_grad_steps < last->n_steps[TG_PHASE_BACKWARD]);
        train(&ref, 3);
        train(&zb, 3);
        bool same;
        double diff = max_param_diff(&ref, &zb, &same);
        if (!same)
            tg_test_fail(__FILE__, __LINE__, "%s over %s: weights differ from 1f1b (max %.3g)",
                         schedule, stages, diff);
        for (int d = 0; d < p->n_devices; d++)
            TG_CHECK(tg_session_max_in_flight(zb.s, d) == p->schedule.stash_depth[d] &&
                     p->schedule.stash_depth[d] <= p->devices[d].stash_depth);
    }
    destroy(&ref);
    destroy(&zb);
}

/* zb-h2 runs other passes between a B and its W, so what W reads from B
 * lives in slots: a plan that shared it with the next forward would give
 * other weights. */
static void test_zero_bubble_is_bit_identical_to_1f1b(void)
{
    tg_optimizer sgd = tg_optimizer_sgd(0.05f, 0.9f), adamw = tg_optimizer_adamw(0.01f);
    for (int k = 0; k < 2; k++) {
        const char *schedule = k ? "zb-h2" : "zb-h1";
        train_pair(schedule, "B1,B2|B3,B4", &sgd, 2);
        train_pair(schedule, "B1|B2|B3|B4", &adamw, 4);
    }
}

static void test_replicas_match_a_larger_batch_and_stay_identical(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.0f);
    trainer big, two;
    TG_CHECK_OK(make(&big, 2 * BATCH, &opt, NULL));
    TG_CHECK_OK(make(&two, BATCH, &opt, (const char *[]){"replicationFactor", "2", NULL}));
    if (big.s && two.s) {
        TG_CHECK(tg_session_replicas(two.s) == 2 && tg_session_devices(two.s) == 1);
        TG_CHECK(tg_session_replicas(big.s) == 1);
        for (int step = 0; step < 3; step++) {
            train(&big, 1);
            train(&two, 1);
            const tg_graph *g = two.mg.graph;
            for (int i = 0; i < g->n_nodes; i++) {
                const tg_tensor *p = g->nodes[i];
                if (p->op == TG_OP_PARAM)
                    TG_CHECK(memcmp(tg_session_replica_data(two.s, 0, p),
                                    tg_session_replica_data(two.s, 1, p), tg_nbytes(p)) == 0);
            }
        }
        bool same;
        double diff = max_param_diff(&big, &two, &same);
        TG_CHECK(diff <= 1e-5);
    }
    destroy(&big);
    destroy(&two);
}

static void test_device_iterations_equal_separate_runs(void)
{
    tg_optimizer opt = tg_optimizer_adam(0.01f);
    trainer once, thrice;
    TG_CHECK_OK(
        make(&once, BATCH, &opt,
             (const char *[]){"executionStrategy", "pipelined", "Training.gradientAccumulation",
                              "4", "deviceIterations", "3", NULL}));
    TG_CHECK_OK(make(&thrice, BATCH, &opt,
                     (const char *[]){"executionStrategy", "pipelined",
                                      "Training.gradientAccumulation", "4", NULL}));
    if (once.s && thrice.s) {
        train(&once, 1);
        train(&thrice, 3);
        bool same;
        max_param_diff(&once, &thrice, &same);
        TG_CHECK(same);
        TG_CHECK(tg_session_step(once.s) == 3 && tg_session_step(thrice.s) == 3);
    }
    destroy(&once);
    destroy(&thrice);
}

static void test_output_modes(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.0f, 0.0f); /* lr 0: the loss stays comparable */
    trainer all, fin, sum;
    const char *base[] = {"Training.gradientAccumulation",
                          "3",
                          "deviceIterations",
                          "2",
                          "replicationFactor",
                          "2",
                          "outputMode",
                          NULL,
                          NULL};
    base[7] = "all";
    TG_CHECK_OK(make(&all, BATCH, &opt, base));
    base[7] = "final";
    TG_CHECK_OK(make(&fin, BATCH, &opt, base));
    base[7] = "sum";
    TG_CHECK_OK(make(&sum, BATCH, &opt, base));
    if (all.s && fin.s && sum.s) {
        train(&all, 1);
        train(&fin, 1);
        train(&sum, 1);
        TG_CHECK(tg_session_output_count(all.s, all.mg.loss) == 12);
        TG_CHECK(tg_session_output_count(fin.s, fin.mg.loss) == 2);
        float l_all[12], l_fin[2], l_sum[2], wrong[3];
        TG_CHECK_OK(tg_session_read(all.s, all.mg.loss, l_all, sizeof l_all));
        TG_CHECK_OK(tg_session_read(fin.s, fin.mg.loss, l_fin, sizeof l_fin));
        TG_CHECK_OK(tg_session_read(sum.s, sum.mg.loss, l_sum, sizeof l_sum));
        TG_CHECK(tg_session_read(fin.s, fin.mg.loss, wrong, sizeof wrong) == TG_ERR_INVALID_ARG);
        /* order: [iteration][replica][micro-batch] */
        for (int r = 0; r < 2; r++) {
            TG_CHECK(l_fin[r] == l_all[(1 * 2 + r) * 3 + 2]);
            double s = 0;
            for (int it = 0; it < 2; it++)
                for (int j = 0; j < 3; j++)
                    s += l_all[(it * 2 + r) * 3 + j];
            TG_CHECK_NEAR(l_sum[r], s, 1e-4);
        }
    }
    destroy(&all);
    destroy(&fin);
    destroy(&sum);
}

static void test_pipelined_inference_matches_one_device(void)
{
    const tg_model_spec *m = tg_model_find("mnist-pipeline");
    tg_model_graph a, b;
    TG_CHECK_OK(tg_model_graph_create(m, BATCH, NULL, &a));
    TG_CHECK_OK(tg_model_graph_create(m, BATCH, NULL, &b));
    tg_options *o1 = options((const char *[]){"deviceIterations", "5", NULL});
    tg_options *o4 =
        options((const char *[]){"executionStrategy", "pipelined", "deviceIterations", "5", NULL});
    tg_session *s1 = NULL, *s4 = NULL;
    TG_CHECK_OK(tg_session_create(a.graph, o1, &s1));
    TG_CHECK_OK(tg_session_create(b.graph, o4, &s4));
    if (s1 && s4) {
        float img[5 * BATCH * PIXELS], out1[5 * BATCH * 10], out4[5 * BATCH * 10];
        int32_t lab[5 * BATCH];
        tg_test_samples(0, 5 * BATCH, img, lab);
        TG_CHECK_OK(tg_session_write(s1, a.images, img, sizeof img));
        TG_CHECK_OK(tg_session_write(s4, b.images, img, sizeof img));
        TG_CHECK_OK(tg_session_run(s1));
        TG_CHECK_OK(tg_session_run(s4));
        TG_CHECK_OK(tg_session_read(s1, a.output, out1, sizeof out1));
        TG_CHECK_OK(tg_session_read(s4, b.output, out4, sizeof out4));
        TG_CHECK(memcmp(out1, out4, sizeof out1) == 0);
    }
    tg_session_destroy(s1);
    tg_session_destroy(s4);
    tg_options_destroy(o1);
    tg_options_destroy(o4);
    tg_model_graph_destroy(&a);
    tg_model_graph_destroy(&b);
}

static void expect_compile_error(const char *const *kv, const char *text)
{
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.0f);
    trainer t;
    tg_status s = make(&t, BATCH, &opt, kv);
    if (s == TG_OK || !strstr(tg_error_message(), text))
        tg_test_fail(__FILE__, __LINE__, "expected an error with '%s', got %s: %s", text,
                     tg_status_name(s), tg_error_message());
    destroy(&t);
}

static void test_bad_configurations(void)
{
    expect_compile_error((const char *[]){"executionStrategy", "pipelined", "stages", "B1,B2|B3",
                                          "Training.gradientAccumulation", "4", NULL},
                         "block 'B4' is in no stage");
    expect_compile_error((const char *[]){"executionStrategy", "pipelined", "stages", "B3,B4|B1,B2",
                                          "Training.gradientAccumulation", "4", NULL},
                         "runs against the data flow");
    expect_compile_error(
        (const char *[]){"executionStrategy", "pipelined", "stages", "B1|B9", NULL},
        "names block 'B9'");
    expect_compile_error((const char *[]){"executionStrategy", "sharded", "devices", "2", NULL},
                         "only 2 devices");
    expect_compile_error((const char *[]){"executionStrategy", "pipelined",
                                          "Training.gradientAccumulation", "2", NULL},
                         "at least 4");
    expect_compile_error((const char *[]){"executionStrategy", "pipelined", "split", "layer9",
                                          "Training.gradientAccumulation", "4", NULL},
                         "matches no op");
    tg_options *o = tg_options_create();
    TG_CHECK(tg_options_set(o, "executionStrategy", "diagonal") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "single|pipelined|sharded") != NULL);
    tg_options_destroy(o);
}

/* A NaN in one micro-batch stops all four devices with an error, no hang. */
static void test_failing_step_stops_every_device(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.0f);
    trainer t;
    TG_CHECK_OK(make(&t, BATCH, &opt,
                     (const char *[]){"executionStrategy", "pipelined",
                                      "Training.gradientAccumulation", "8", NULL}));
    if (t.s) {
        int64_t n = tg_session_samples_per_run(t.s, t.mg.images);
        float *img = tg_malloc((size_t)n * PIXELS * sizeof(float));
        int32_t *lab = tg_malloc((size_t)n * sizeof(int32_t));
        tg_test_samples(0, n, img, lab);
        img[3 * BATCH * PIXELS + 100] = NAN; /* micro-batch 3 */
        tg_session_write(t.s, t.mg.images, img, (size_t)n * PIXELS * sizeof(float));
        tg_session_write(t.s, t.mg.labels, lab, (size_t)n * sizeof(int32_t));
        TG_CHECK(tg_session_run(t.s) == TG_ERR_NUMERIC);
        TG_CHECK(strstr(tg_error_message(), "micro-batch 3") != NULL);
        /* and the session still works with good data */
        tg_test_samples(0, n, img, lab);
        tg_session_write(t.s, t.mg.images, img, (size_t)n * PIXELS * sizeof(float));
        TG_CHECK_OK(tg_session_run(t.s));
        tg_free(img);
        tg_free(lab);
    }
    destroy(&t);
}

/* What the engine allocates is the planned arenas (plus the host-side
 * streams and bookkeeping), and a run allocates nothing. */
static void test_allocation_is_the_plan(void)
{
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    tg_model_graph mg;
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), BATCH, &opt, &mg));
    tg_options *o =
        options((const char *[]){"executionStrategy", "pipelined", "Training.gradientAccumulation",
                                 "8", "replicationFactor", "2", NULL});
    int64_t before = tg_alloc_live_bytes();
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(mg.graph, o, &s));
    if (s) {
        int64_t held = tg_alloc_live_bytes() - before;
        int64_t streams = tg_session_samples_per_run(s, mg.images) * (784 + 1) * 4 +
                          tg_session_stream_count(s) * (BATCH * 10 + 1) * 4;
        int64_t arenas = (int64_t)tg_session_arena_bytes(s);
        TG_CHECK(held - streams >= arenas);
        TG_CHECK(held - streams <= arenas + arenas / 20);
        train(&(trainer){mg, s}, 1); /* warm */
        int64_t live = tg_alloc_live_bytes();
        train(&(trainer){mg, s}, 2);
        TG_CHECK(tg_alloc_live_bytes() == live);
    }
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

int main(void)
{
    TG_RUN(test_sharded_is_bit_identical_to_one_device);
    TG_RUN(test_pipelined_matches_accumulation_on_one_device);
    TG_RUN(test_zero_bubble_is_bit_identical_to_1f1b);
    TG_RUN(test_stages_inside_a_block_are_bit_identical);
    TG_RUN(test_handed_back_input_gradient_is_bit_identical);
    TG_RUN(test_replicas_match_a_larger_batch_and_stay_identical);
    TG_RUN(test_device_iterations_equal_separate_runs);
    TG_RUN(test_output_modes);
    TG_RUN(test_pipelined_inference_matches_one_device);
    TG_RUN(test_bad_configurations);
    TG_RUN(test_failing_step_stops_every_device);
    TG_RUN(test_allocation_is_the_plan);
    return tg_test_finish();
}
