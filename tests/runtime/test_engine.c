/* tests/runtime/test_engine.c - the engine's device threads: they live as
 * long as the session (the same threads run every host step), give the
 * weights the former thread-per-step way gives to the bit, survive a failed
 * step (the next step's result is a fresh session's), and a session is
 * destroyed cleanly whether its threads never started, ran, or just failed.
 * TG_TEST_LABELS: threads quick */
#include "tg_test.h"

#include "core/alloc.h"
#include "core/rng.h"
#include "runtime/device_threads.h"
#include "runtime/session_state.h"
#include "tilegraph/models.h"

#include <math.h>
#include <string.h>

enum { BATCH = 4, PIXELS = 784 };

/* Two pipelined devices, two replicas, accumulation over 4 micro-batches:
 * every kind of meeting between device threads (transfers, the all-reduce,
 * the barriers) happens in each step. */
static const char *const PIPELINED[] = {"executionStrategy",
                                        "pipelined",
                                        "replicationFactor",
                                        "2",
                                        "Training.gradientAccumulation",
                                        "4",
                                        NULL};

typedef struct {
    tg_model_graph mg;
    tg_session *s;
} trainer;

static void make(trainer *t, const char *const *kv)
{
    memset(t, 0, sizeof *t);
    tg_optimizer opt = tg_optimizer_adam(0.01f);
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), BATCH, &opt, &t->mg));
    tg_options *o = tg_options_create();
    tg_options_set(o, "threadsPerDevice", "1");
    tg_options_set(o, "randomSeed", "5");
    tg_test_options_set(o, kv);
    TG_CHECK_OK(tg_session_create(t->mg.graph, o, &t->s));
    tg_options_destroy(o);
}

static void destroy(trainer *t)
{
    tg_session_destroy(t->s);
    tg_model_graph_destroy(&t->mg);
}

/* Write run r's samples (deterministic); a NaN in micro-batch 2 if asked. */
static void feed(trainer *t, int r, bool poison)
{
    int64_t n = tg_session_samples_per_run(t->s, t->mg.images);
    float *img = tg_malloc((size_t)n * PIXELS * sizeof(float));
    int32_t *lab = tg_malloc((size_t)n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++) {
        tg_rng g;
        tg_rng_seed(&g, (uint64_t)(r * n + i));
        for (int k = 0; k < PIXELS; k++)
            img[i * PIXELS + k] = (float)(2.0 * tg_rng_uniform(&g) - 1.0);
        lab[i] = (int32_t)tg_rng_below(&g, 10);
    }
    if (poison)
        img[2 * BATCH * PIXELS + 7] = NAN;
    TG_CHECK_OK(tg_session_write(t->s, t->mg.images, img, (size_t)n * PIXELS * sizeof(float)));
    TG_CHECK_OK(tg_session_write(t->s, t->mg.labels, lab, (size_t)n * sizeof(int32_t)));
    tg_free(img);
    tg_free(lab);
}

static void train(trainer *t, int first, int runs)
{
    for (int r = first; r < first + runs; r++) {
        feed(t, r, false);
        TG_CHECK_OK(tg_session_run(t->s));
    }
}

/* Whether every parameter of a and b holds the same bits (replica 0). */
static bool same_weights(const trainer *a, const trainer *b)
{
    const tg_graph *g = a->mg.graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *p = g->nodes[i];
        if (p->op != TG_OP_PARAM)
            continue;
        const void *x = tg_session_data(a->s, p);
        const void *y = tg_session_data(b->s, tg_graph_find(b->mg.graph, p->name));
        if (!x || !y || memcmp(x, y, tg_nbytes(p)) != 0)
            return false;
    }
    return true;
}

static void test_threads_live_as_long_as_the_session(void)
{
    trainer t;
    make(&t, PIPELINED);
    if (!t.s)
        return;
    int n = t.s->program->replicas * t.s->program->n_devices;
    TG_CHECK(n > 1 && n <= 8);
    TG_CHECK(!tg_device_threads_started(t.s->device_threads)); /* by the first run, not create */
    train(&t, 0, 1);
    TG_CHECK(tg_device_threads_started(t.s->device_threads));
    pthread_t ids[8];
    for (int i = 0; tg_device_threads_started(t.s->device_threads) && i < n && i < 8; i++)
        ids[i] = tg_device_threads_id(t.s->device_threads, i);
    train(&t, 1, 3);
    TG_CHECK(tg_device_threads_steps(t.s->device_threads) ==
             4); /* every step went to the parked threads */
    for (int i = 0; tg_device_threads_started(t.s->device_threads) && i < n && i < 8; i++)
        TG_CHECK(pthread_equal(ids[i], tg_device_threads_id(t.s->device_threads, i)));
    TG_CHECK(tg_device_threads_running(t.s->device_threads) == 0);
    destroy(&t);
}

static void test_same_bits_as_a_thread_per_step(void)
{
    trainer parked, per_step;
    make(&parked, PIPELINED);
    make(&per_step, PIPELINED);
    if (parked.s && per_step.s) {
        tg_engine_set_per_step_threads(per_step.s, true);
        train(&parked, 0, 3);
        train(&per_step, 0, 3);
        TG_CHECK(!tg_device_threads_started(per_step.s->device_threads));
        TG_CHECK(same_weights(&parked, &per_step));
        TG_CHECK(tg_session_step(parked.s) == tg_session_step(per_step.s));
        /* turning it on between runs stops the parked threads */
        tg_engine_set_per_step_threads(parked.s, true);
        TG_CHECK(!tg_device_threads_started(parked.s->device_threads));
        train(&parked, 3, 1);
        train(&per_step, 3, 1);
        TG_CHECK(same_weights(&parked, &per_step));
    }
    destroy(&parked);
    destroy(&per_step);
}

static void test_a_failed_step_leaves_the_threads_usable(void)
{
    trainer failed, fresh;
    make(&failed, PIPELINED);
    make(&fresh, PIPELINED);
    if (failed.s && fresh.s) {
        feed(&failed, 0, true);
        TG_CHECK(tg_session_run(failed.s) == TG_ERR_NUMERIC);
        TG_CHECK(strstr(tg_error_message(), "micro-batch 2") != NULL);
        TG_CHECK(tg_device_threads_running(failed.s->device_threads) == 0);
        TG_CHECK(tg_session_step(failed.s) == 0);
        /* the failed step updated nothing and left no one at a barrier */
        train(&failed, 0, 2);
        train(&fresh, 0, 2);
        TG_CHECK(same_weights(&failed, &fresh));
    }
    destroy(&failed);
    destroy(&fresh);
}

static void test_destroy_at_any_point(void)
{
    trainer never_ran, just_failed;
    make(&never_ran, PIPELINED);
    destroy(&never_ran); /* no threads to stop */
    make(&just_failed, PIPELINED);
    if (just_failed.s) {
        feed(&just_failed, 0, true);
        TG_CHECK(tg_session_run(just_failed.s) == TG_ERR_NUMERIC);
        TG_CHECK(tg_device_threads_started(just_failed.s->device_threads));
    }
    destroy(&just_failed); /* parked after the failure: joins without a hang */
}

/* One device of one replica keeps running on the caller's thread. */
static void test_one_device_starts_no_thread(void)
{
    trainer t;
    make(&t, (const char *const[]){"Training.gradientAccumulation", "4", NULL});
    if (t.s) {
        train(&t, 0, 2);
        TG_CHECK(!tg_device_threads_started(t.s->device_threads) &&
                 tg_device_threads_steps(t.s->device_threads) == 0);
    }
    destroy(&t);
}

int main(void)
{
    TG_RUN(test_threads_live_as_long_as_the_session);
    TG_RUN(test_same_bits_as_a_thread_per_step);
    TG_RUN(test_a_failed_step_leaves_the_threads_usable);
    TG_RUN(test_destroy_at_any_point);
    TG_RUN(test_one_device_starts_no_thread);
    return tg_test_finish();
}
