/* tests/runtime/test_prefetch.c - host streams filled ahead
 * (runtime/prefetch.c): training and inference with
 * defaultPrefetchBufferingDepth 3 give bit-identical weights and outputs to
 * depth 1 (one device; a pipeline of four with replicas and each thread
 * mode), the memory plan holds depth - 1 more slots of each host-stream
 * input and nothing else, and a failing step with the host-stream threads
 * running stops without hanging.
 * TG_TEST_LABELS: threads */
#include "tg_test.h"
#include "tg_test_train.h"

#include "core/alloc.h"
#include "core/error.h"
#include "runtime/session_state.h"
#include "tilegraph/models.h"

#include <math.h>
#include <string.h>

enum { BATCH = 4, PIXELS = 784 };

typedef tg_test_model trainer;

static tg_status make(trainer *t, const tg_optimizer *opt, const char *const *kv)
{
    return tg_test_model_create(t, BATCH, opt, kv, 5);
}

static void destroy(trainer *t)
{
    tg_test_model_destroy(t);
}

/* One host step on samples [first, first + n); `poison` >= 0 puts a NaN
 * in that micro-batch. Returns the run's status. */
static tg_status step(trainer *t, int64_t first, int64_t poison)
{
    int64_t n = tg_session_samples_per_run(t->s, t->mg.images);
    float *img = tg_malloc((size_t)n * PIXELS * sizeof(float));
    int32_t *lab = tg_malloc((size_t)n * sizeof(int32_t));
    tg_test_samples(first, n, img, lab);
    if (poison >= 0)
        img[poison * BATCH * PIXELS + 7] = NAN;
    TG_CHECK_OK(tg_session_write(t->s, t->mg.images, img, (size_t)n * PIXELS * sizeof(float)));
    if (t->mg.labels && tg_session_data(t->s, t->mg.labels))
        TG_CHECK_OK(tg_session_write(t->s, t->mg.labels, lab, (size_t)n * sizeof(int32_t)));
    tg_status s = tg_session_run(t->s);
    tg_free(img);
    tg_free(lab);
    return s;
}

static bool same_params(const trainer *a, const trainer *b)
{
    const tg_graph *g = a->mg.graph;
    bool same = true;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *p = g->nodes[i];
        if (p->op != TG_OP_PARAM)
            continue;
        const tg_tensor *q = tg_graph_find(b->mg.graph, p->name);
        same &= memcmp(tg_session_data(a->s, p), tg_session_data(b->s, q), tg_nbytes(p)) == 0;
    }
    return same;
}

/* Train 3 host steps with the options kv plus depth 1, and again with
 * depth 3: the weights are the same bits. */
static void expect_same_training(const char *const *kv, const char *mode)
{
    const char *base[16] = {0}, *ahead[20] = {0};
    int n = 0;
    for (; kv[n]; n++)
        base[n] = ahead[n] = kv[n];
    const char *extra[] = {"defaultPrefetchBufferingDepth",
                           "3",
                           "streamCallbacks.multiThreadMode",
                           mode,
                           "streamCallbacks.numWorkerThreads",
                           "1",
                           NULL};
    for (int k = 0; extra[k]; k++)
        ahead[n + k] = extra[k];
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    trainer one, three;
    TG_CHECK_OK(make(&one, &opt, base));
    TG_CHECK_OK(make(&three, &opt, ahead));
    for (int r = 0; r < 3 && one.s && three.s; r++) {
        int64_t n_run = tg_session_samples_per_run(one.s, one.mg.images);
        TG_CHECK_OK(step(&one, r * n_run, -1));
        TG_CHECK_OK(step(&three, r * n_run, -1));
    }
    if (one.s && three.s && !same_params(&one, &three))
        tg_test_fail(__FILE__, __LINE__, "depth 3 (%s) trained other weights than depth 1 with %s",
                     mode, kv[0]);
    destroy(&one);
    destroy(&three);
}

static void test_depth_3_trains_the_same_weights(void)
{
    expect_same_training(
        (const char *[]){"Training.gradientAccumulation", "4", "deviceIterations", "2", NULL},
        "none");
    expect_same_training((const char *[]){"executionStrategy", "pipelined", "pipelineSchedule",
                                          "1f1b", "Training.gradientAccumulation", "6",
                                          "replicationFactor", "2", NULL},
                         "dedicated");
    expect_same_training((const char *[]){"executionStrategy", "pipelined", "pipelineSchedule",
                                          "zb-h1", "Training.gradientAccumulation", "6", NULL},
                         "collaborative");
}

static void test_depth_3_infers_the_same_outputs(void)
{
    trainer a, b;
    const char *kv[] = {"executionStrategy", "pipelined", "deviceIterations", "5", NULL};
    const char *kv3[] = {"executionStrategy",
                         "pipelined",
                         "deviceIterations",
                         "5",
                         "defaultPrefetchBufferingDepth",
                         "3",
                         NULL};
    TG_CHECK_OK(make(&a, NULL, kv));
    TG_CHECK_OK(make(&b, NULL, kv3));
    if (a.s && b.s) {
        float out1[5 * BATCH * 10], out3[5 * BATCH * 10];
        TG_CHECK_OK(step(&a, 0, -1));
        TG_CHECK_OK(step(&b, 0, -1));
        TG_CHECK_OK(tg_session_read(a.s, a.mg.output, out1, sizeof out1));
        TG_CHECK_OK(tg_session_read(b.s, b.mg.output, out3, sizeof out3));
        TG_CHECK(memcmp(out1, out3, sizeof out1) == 0);
    }
    destroy(&a);
    destroy(&b);
}

/* Depth 3: every host-stream input buffer has the stash depth + 2 slots,
 * and the arena grows by exactly those slots. */
static void test_plan_holds_the_prefetched_slots(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.0f);
    trainer one, three;
    const char *kv[] = {"executionStrategy", "pipelined", "Training.gradientAccumulation", "8",
                        NULL};
    const char *kv3[] = {"executionStrategy",
                         "pipelined",
                         "Training.gradientAccumulation",
                         "8",
                         "defaultPrefetchBufferingDepth",
                         "3",
                         NULL};
    TG_CHECK_OK(make(&one, &opt, kv));
    TG_CHECK_OK(make(&three, &opt, kv3));
    const tg_program *p1 = one.s ? tg_session_program(one.s) : NULL;
    const tg_program *p3 = three.s ? tg_session_program(three.s) : NULL;
    for (int d = 0; p1 && p3 && d < p3->n_devices; d++) {
        const tg_device_program *dp = &p3->devices[d];
        size_t more = 0;
        for (int k = 0; k < dp->n_inputs; k++) {
            const tg_buffer *b = &p3->buffers[dp->inputs[k]];
            TG_CHECK(b->slots == dp->stash_depth + 2);
            more += 2 * b->stride;
        }
        TG_CHECK(dp->arena_bytes == p1->devices[d].arena_bytes + more);
    }
    destroy(&one);
    destroy(&three);
}

/* A NaN in micro-batch 2 while the host-stream threads fill ahead: the
 * step fails naming it, nothing hangs, and the next step runs. */
static void test_failing_step_with_prefetch(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.0f);
    trainer t;
    TG_CHECK_OK(
        make(&t, &opt,
             (const char *[]){"executionStrategy", "pipelined", "Training.gradientAccumulation",
                              "8", "defaultPrefetchBufferingDepth", "4", NULL}));
    if (t.s) {
        TG_CHECK(step(&t, 0, 2) == TG_ERR_NUMERIC);
        TG_CHECK(strstr(tg_error_message(), "micro-batch 2") != NULL);
        TG_CHECK_OK(step(&t, 0, -1));
    }
    destroy(&t);
}

static void test_bad_depth(void)
{
    tg_options *o = tg_options_create();
    TG_CHECK(tg_options_set(o, "defaultPrefetchBufferingDepth", "0") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "defaultPrefetchBufferingDepth") != NULL);
    TG_CHECK(tg_options_set(o, "streamCallbacks.multiThreadMode", "many") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "collaborative") != NULL);
    tg_options_destroy(o);
}

int main(void)
{
    TG_RUN(test_depth_3_trains_the_same_weights);
    TG_RUN(test_depth_3_infers_the_same_outputs);
    TG_RUN(test_plan_holds_the_prefetched_slots);
    TG_RUN(test_failing_step_with_prefetch);
    TG_RUN(test_bad_depth);
    return tg_test_finish();
}
