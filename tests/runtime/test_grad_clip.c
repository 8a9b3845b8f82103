/* tests/runtime/test_grad_clip.c - max_grad_norm in the engine, and the
 * optimizer settings that interact with placement (LAMB, bias correction):
 * clipping by the global norm gives the step torch.nn.utils.clip_grad_norm_
 * gives (an SGD step of norm lr * max_grad_norm) on one device, pipelined
 * over 2 devices, sharded over 4 and with loss scaling; one device and a
 * pipeline agree to the bit; replicas stay identical and match a larger
 * batch; with replicated tensor sharding AdamW clips bit-identically and
 * LAMB is refused by name.
 * TG_TEST_LABELS: threads */
#include "tg_test.h"
#include "tg_test_train.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/rng.h"
#include "runtime/session_state.h"
#include "tilegraph/models.h"

#include <math.h>
#include <string.h>

enum { BATCH = 4, PIXELS = 784 };

typedef tg_test_model trainer;

static tg_status make(trainer *t, int batch, const tg_optimizer *opt, const char *const *kv)
{
    return tg_test_model_create(t, batch, opt, kv, 3);
}

static void destroy(trainer *t)
{
    tg_test_model_destroy(t);
}

/* Run `runs` host steps on deterministic data (sample i seeded by i). */
static void train(trainer *t, int runs)
{
    int64_t n = tg_session_samples_per_run(t->s, t->mg.images);
    float *img = tg_malloc((size_t)n * PIXELS * sizeof(float));
    int32_t *lab = tg_malloc((size_t)n * sizeof(int32_t));
    for (int r = 0; r < runs; r++) {
        for (int64_t i = 0; i < n; i++) {
            tg_rng g;
            tg_rng_seed(&g, (uint64_t)(r * n + i));
            for (int k = 0; k < PIXELS; k++)
                img[i * PIXELS + k] = (float)(2.0 * tg_rng_uniform(&g) - 1.0);
            lab[i] = (int32_t)tg_rng_below(&g, 10);
        }
        TG_CHECK_OK(tg_session_write(t->s, t->mg.images, img, (size_t)n * PIXELS * sizeof(float)));
        TG_CHECK_OK(tg_session_write(t->s, t->mg.labels, lab, (size_t)n * sizeof(int32_t)));
        TG_CHECK_OK(tg_session_run(t->s));
    }
    tg_free(img);
    tg_free(lab);
}

/* All parameters of replica `r`, concatenated, as f32 (caller frees).
 * Replica 0 is read through tg_session_read, which converts half-precision
 * storage; other replicas are read raw (f32 configurations only). */
static float *params(const trainer *t, int r, int64_t *count)
{
    const tg_graph *g = t->mg.graph;
    int64_t n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == TG_OP_PARAM)
            n += tg_numel(g->nodes[i]);
    float *all = tg_malloc((size_t)n * sizeof(float));
    int64_t at = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *p = g->nodes[i];
        if (p->op != TG_OP_PARAM)
            continue;
        if (r == 0)
            TG_CHECK_OK(tg_session_read(t->s, p, all + at, tg_nbytes(p)));
        else
            memcpy(all + at, tg_session_replica_data(t->s, r, p), tg_nbytes(p));
        at += tg_numel(p);
    }
    *count = n;
    return all;
}

static double distance(const float *a, const float *b, int64_t n)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(sum);
}

/* One SGD step (no momentum, no decay) with clipping moves the weights by
 * exactly lr * clipped gradient: a step of global norm lr * max_grad_norm
 * when the gradients' norm is larger, on every placement. */
static void test_clipped_step_has_the_clipped_norm(void)
{
    static const char *const configs[][9] = {
        {NULL},
        {"executionStrategy", "pipelined", "stages", "B1,B2|B3,B4", "Training.gradientAccumulation",
         "4", NULL},
        {"executionStrategy", "sharded", NULL},
        {"lossScaling", "static", "lossScalingFactor", "1024", NULL},
        {"replicationFactor", "2", NULL},
    };
    const float lr = 0.5f, max_norm = 0.01f;
    for (int k = 0; k < 5; k++) {
        tg_optimizer opt = tg_optimizer_sgd(lr, 0.0f);
        opt.max_grad_norm = max_norm;
        trainer t;
        TG_CHECK_OK(make(&t, BATCH, &opt, configs[k][0] ? configs[k] : NULL));
        if (t.s) {
            int64_t n;
            float *before = params(&t, 0, &n);
            train(&t, 1);
            float *after = params(&t, 0, &n);
            double step = distance(before, after, n);
            if (fabs(step - lr * max_norm) > 1e-4 * lr * max_norm)
                tg_test_fail(__FILE__, __LINE__, "config %d: the step's norm is %.9g, want %.9g", k,
                             step, (double)lr * max_norm);
            tg_free(before);
            tg_free(after);
        }
        destroy(&t);
    }
}

/* A generous max_grad_norm never binds: the weights equal unclipped ones
 * exactly (the factor is 1 and nothing is multiplied). */
static void test_loose_clip_changes_nothing(void)
{
    tg_optimizer opt = tg_optimizer_adamw(0.01f), loose = opt;
    loose.max_grad_norm = 1e6f;
    trainer a, b;
    TG_CHECK_OK(make(&a, BATCH, &opt, NULL));
    TG_CHECK_OK(make(&b, BATCH, &loose, NULL));
    if (a.s && b.s) {
        train(&a, 3);
        train(&b, 3);
        int64_t n;
        float *x = params(&a, 0, &n), *y = params(&b, 0, &n);
        TG_CHECK(memcmp(x, y, (size_t)n * sizeof(float)) == 0);
        tg_free(x);
        tg_free(y);
    }
    destroy(&a);
    destroy(&b);
}

/* The global norm is added in graph order whatever the placement, so one
 * device and a 2-device pipeline (same accumulation) agree to the bit, for
 * AdamW and for LAMB, with and without bias correction. */
static void test_pipeline_is_bit_identical_to_one_device(void)
{
    tg_optimizer opts[3] = {tg_optimizer_adamw(0.01f), tg_optimizer_lamb(0.01f),
                            tg_optimizer_lamb(0.01f)};
    opts[2].bias_correction = false;
    opts[2].max_weight_norm = 2.0f;
    for (int k = 0; k < 3; k++) {
        opts[k].max_grad_norm = 0.05f;
        trainer one, pipe;
        TG_CHECK_OK(make(&one, BATCH, &opts[k],
                         (const char *[]){"Training.gradientAccumulation", "4", NULL}));
        TG_CHECK_OK(make(&pipe, BATCH, &opts[k],
                         (const char *[]){"executionStrategy", "pipelined", "stages", "B1,B2|B3,B4",
                                          "Training.gradientAccumulation", "4", NULL}));
        if (one.s && pipe.s) {
            TG_CHECK(tg_session_program(pipe.s)->n_devices == 2);
            train(&one, 3);
            train(&pipe, 3);
            int64_t n;
            float *x = params(&one, 0, &n), *y = params(&pipe, 0, &n);
            if (memcmp(x, y, (size_t)n * sizeof(float)) != 0)
                tg_test_fail(__FILE__, __LINE__, "%s: weights differ (distance %.3g)",
                             tg_optimizer_name(opts[k].kind), distance(x, y, n));
            tg_free(x);
            tg_free(y);
        }
        destroy(&one);
        destroy(&pipe);
    }
}

/* Two replicas clip identically (their weights stay equal to the bit) and
 * match one replica with twice the batch (SGD: linear in the gradient, so the
 * difference is the all-reduce's rounding only; Adam would amplify it). */
static void test_replicas_agree_and_match_a_larger_batch(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.9f);
    opt.max_grad_norm = 0.05f;
    trainer big, two;
    TG_CHECK_OK(make(&big, 2 * BATCH, &opt, NULL));
    TG_CHECK_OK(make(&two, BATCH, &opt, (const char *[]){"replicationFactor", "2", NULL}));
    if (big.s && two.s) {
        train(&big, 3);
        train(&two, 3);
        int64_t n;
        float *r0 = params(&two, 0, &n), *r1 = params(&two, 1, &n), *b = params(&big, 0, &n);
        TG_CHECK(memcmp(r0, r1, (size_t)n * sizeof(float)) == 0);
        double worst = 0;
        for (int64_t i = 0; i < n; i++)
            worst = fmax(worst, fabs((double)r0[i] - b[i]) / (1.0 + fabs((double)b[i])));
        if (worst > 1e-5)
            tg_test_fail(__FILE__, __LINE__, "replicas vs a larger batch: %.3g", worst);
        tg_free(r0);
        tg_free(r1);
        tg_free(b);
    }
    destroy(&big);
    destroy(&two);
}

/* LAMB's trust ratio needs each weight's whole norm: sharding its state over
 * replicas is a configuration error naming the optimizer and the way out. */
static void test_lamb_with_sharding_is_refused(void)
{
    tg_optimizer opt = tg_optimizer_lamb(0.01f);
    trainer t;
    tg_status s =
        make(&t, BATCH, &opt,
             (const char *[]){"replicationFactor", "2",
                              "TensorLocations.optimizer.replicatedTensorSharding", "true", NULL});
    TG_CHECK(s == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "lamb") != NULL);
    TG_CHECK(strstr(tg_error_message(), "turn sharding off") != NULL);
    destroy(&t);
    /* AdamW shards as before, clipping included: bit-identical to unsharded replicas */
    opt = tg_optimizer_adamw(0.01f);
    opt.max_grad_norm = 0.05f;
    trainer plain;
    TG_CHECK_OK(make(&plain, BATCH, &opt, (const char *[]){"replicationFactor", "2", NULL}));
    TG_CHECK_OK(
        make(&t, BATCH, &opt,
             (const char *[]){"replicationFactor", "2",
                              "TensorLocations.optimizer.replicatedTensorSharding", "true", NULL}));
    if (t.s && plain.s) {
        train(&t, 2);
        train(&plain, 2);
        int64_t n;
        float *x = params(&t, 1, &n), *y = params(&plain, 1, &n);
        TG_CHECK(memcmp(x, y, (size_t)n * sizeof(float)) == 0);
        tg_free(x);
        tg_free(y);
    }
    destroy(&t);
    destroy(&plain);
}

/* LAMB with clipping where the update is staged (half-precision storage,
 * loss scaling) or its state streamed (offload): it trains, the weights stay
 * finite and move, and offloading changes nothing. */
static void test_lamb_staged_and_offloaded(void)
{
    tg_optimizer opt = tg_optimizer_lamb(0.01f);
    opt.max_grad_norm = 0.1f;
    static const char *const configs[][7] = {
        {NULL},
        {"TensorLocations.optimizer.onChip", "false", NULL},
        {"precision", "16.16", "lossScaling", "dynamic", NULL},
    };
    float *first = NULL;
    for (int k = 0; k < 3; k++) {
        trainer t;
        TG_CHECK_OK(make(&t, BATCH, &opt, configs[k][0] ? configs[k] : NULL));
        if (!t.s) {
            destroy(&t);
            continue;
        }
        int64_t n;
        float *before = params(&t, 0, &n);
        train(&t, 3);
        float *after = params(&t, 0, &n);
        bool finite = true;
        for (int64_t i = 0; i < n; i++)
            finite &= isfinite(after[i]) != 0;
        TG_CHECK(finite);
        TG_CHECK(distance(before, after, n) > 1e-3);
        if (k == 0)
            first = after;
        else if (k == 1 && first)
            TG_CHECK(memcmp(first, after, (size_t)n * sizeof(float)) == 0);
        if (k != 0)
            tg_free(after);
        tg_free(before);
        destroy(&t);
    }
    tg_free(first);
}

/* Dynamic loss scaling in f32: powers of two scale exactly, so the weights
 * equal those of a run without loss scaling, also on the updates where the
 * scale grows (the gradients are unscaled by the scale they were made with,
 * not the grown one), and with clipping, which sees unscaled gradients. */
static void test_growing_loss_scale_changes_nothing(void)
{
    for (int clip = 0; clip < 2; clip++) {
        tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.9f);
        opt.max_grad_norm = clip ? 0.05f : 0.0f;
        trainer plain, scaled;
        TG_CHECK_OK(make(&plain, BATCH, &opt, NULL));
        TG_CHECK_OK(make(&scaled, BATCH, &opt,
                         (const char *[]){"lossScaling", "dynamic", "lossScalingFactor", "64",
                                          "lossScalingGrowthInterval", "1", NULL}));
        if (plain.s && scaled.s) {
            train(&plain, 4);
            train(&scaled, 4);
            int64_t n;
            float *x = params(&plain, 0, &n), *y = params(&scaled, 0, &n);
            double worst = 0;
            for (int64_t i = 0; i < n; i++)
                worst = fmax(worst, fabs((double)x[i] - y[i]));
            if (worst > 1e-6)
                tg_test_fail(__FILE__, __LINE__, "clip %d: weights differ by %.3g", clip, worst);
            tg_free(x);
            tg_free(y);
        }
        destroy(&plain);
        destroy(&scaled);
    }
}

int main(void)
{
    TG_RUN(test_clipped_step_has_the_clipped_norm);
    TG_RUN(test_loose_clip_changes_nothing);
    TG_RUN(test_pipeline_is_bit_identical_to_one_device);
    TG_RUN(test_replicas_agree_and_match_a_larger_batch);
    TG_RUN(test_lamb_with_sharding_is_refused);
    TG_RUN(test_lamb_staged_and_offloaded);
    TG_RUN(test_growing_loss_scale_changes_nothing);
    return tg_test_finish();
}
