/* tests/runtime/test_precision.c - half-precision storage and loss scaling:
 * the plan stores what the precision options say (and halves), training in
 * f16 and bf16 follows f32, dynamic loss scaling skips an overflowing update
 * and recovers, an overflow without loss scaling is an error naming the step
 * and the parameter, and half-precision runs keep the multi-device
 * guarantees (pipelined = one device, replicas identical).
 * TG_TEST_LABELS: threads isa */
#include "tg_test.h"

#include "core/process.h"
#include "tg_test_train.h"

#include "core/alloc.h"
#include "core/error.h"
#include "runtime/session_internal.h"
#include "tilegraph/checkpoint.h"
#include "tilegraph/verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { BATCH = 8 };

static tg_optimizer adamw(void)
{
    return tg_optimizer_adamw(0.002f);
}

static const tg_buffer *buffer_of(const tg_session *s, const char *name)
{
    const tg_program *p = tg_session_program(s);
    const tg_tensor *t = tg_graph_find(tg_session_graph(s), name);
    TG_CHECK(t != NULL);
    return t && p->home[t->id] >= 0 ? &p->buffers[p->home[t->id]] : NULL;
}

static void test_plan_stores_half(void)
{
    tg_optimizer opt = adamw();
    tg_test_model f32, f16, mixed;
    tg_test_train(&f32, BATCH, &opt,
                  (const char *const[]){"Training.gradientAccumulation", "2", NULL}, 0, 1, NULL);
    tg_test_train(&f16, BATCH, &opt,
                  (const char *const[]){"Training.gradientAccumulation", "2", "precision", "16.16",
                                        "firstOrderMomentumAccumType", "f16", NULL},
                  0, 1, NULL);
    tg_test_train(&mixed, BATCH, &opt,
                  (const char *const[]){"Training.gradientAccumulation", "2", "precision", "16.32",
                                        "accumType", "f32", NULL},
                  0, 1, NULL);
    const tg_program *a = tg_session_program(f32.s), *b = tg_session_program(f16.s);
    /* weights halve (to within the 64-byte alignment of each buffer) */
    size_t wa = a->devices[0].region_bytes[TG_REGION_PARAM],
           wb = b->devices[0].region_bytes[TG_REGION_PARAM];
    TG_CHECK(wb < wa * 0.52 && wb > wa * 0.45);
    TG_CHECK(b->devices[0].region_bytes[TG_REGION_ACCUMULATOR] <
             a->devices[0].region_bytes[TG_REGION_ACCUMULATOR] * 0.52);
    TG_CHECK(b->devices[0].region_bytes[TG_REGION_INPUT] <
             a->devices[0].region_bytes[TG_REGION_INPUT]);
    const tg_buffer *w = buffer_of(f16.s, "layer1/conv/weight");
    TG_CHECK(w && w->dtype == TG_F16);
    const tg_buffer *m1 = buffer_of(f16.s, "layer1/conv/weight/exp_avg");
    const tg_buffer *m2 = buffer_of(f16.s, "layer1/conv/weight/exp_avg_sq");
    TG_CHECK(m1 && m1->dtype == TG_F16);
    TG_CHECK(m2 && m2->dtype == TG_F32); /* the default: the second moment needs the range */
    /* mixed: f16 input stream, f32 model, f32 accumulators */
    const tg_program *c = tg_session_program(mixed.s);
    TG_CHECK(buffer_of(mixed.s, "layer1/conv/weight")->dtype == TG_F32);
    TG_CHECK(c->buffers[c->devices[0].inputs[0]].dtype == TG_F16 ||
             c->buffers[c->devices[0].inputs[1]].dtype == TG_F16);
    TG_CHECK(c->devices[0].region_bytes[TG_REGION_ACCUMULATOR] ==
             a->devices[0].region_bytes[TG_REGION_ACCUMULATOR]);
    /* the API still speaks f32: reading a weight converts it */
    const tg_tensor *wt = tg_graph_find(f16.mg.graph, "layer1/conv/weight");
    float v[4];
    TG_CHECK(tg_session_read(f16.s, wt, v, sizeof v) != TG_OK); /* wrong size */
    float *all = malloc(tg_nbytes(wt));
    TG_CHECK_OK(tg_session_read(f16.s, wt, all, tg_nbytes(wt)));
    const uint16_t *h = tg_session_data(f16.s, wt);
    TG_CHECK(all[0] == tg_f16_to_f32(h[0]) && all[7] == tg_f16_to_f32(h[7]));
    free(all);
    tg_test_model_destroy(&f32);
    tg_test_model_destroy(&f16);
    tg_test_model_destroy(&mixed);
}

/* Mean absolute difference of the parameters of a and b (read as f32). */
static double weight_distance(const tg_test_model *a, const tg_test_model *b)
{
    double sum = 0;
    int64_t n = 0;
    const tg_graph *g = a->mg.graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->op != TG_OP_PARAM)
            continue;
        const tg_tensor *u = tg_graph_find(b->mg.graph, t->name);
        float *x = malloc(tg_nbytes(t)), *y = malloc(tg_nbytes(t));
        TG_CHECK_OK(tg_session_read(a->s, t, x, tg_nbytes(t)));
        TG_CHECK_OK(tg_session_read(b->s, u, y, tg_nbytes(t)));
        for (int64_t k = 0; k < tg_numel(t); k++)
            sum += fabs((double)x[k] - (double)y[k]);
        n += tg_numel(t);
        free(x);
        free(y);
    }
    return sum / (double)n;
}

static void test_half_training_follows_f32(void)
{
    tg_optimizer opt = adamw();
    tg_test_model init, f32, f16, bf16;
    tg_test_train(&init, BATCH, &opt, NULL, 0, 7, NULL);
    tg_test_train(&f32, BATCH, &opt, NULL, 20, 7, NULL);
    tg_test_train(&f16, BATCH, &opt,
                  (const char *const[]){"precision", "16.16", "lossScaling", "dynamic", NULL}, 20,
                  7, NULL);
    tg_test_train(&bf16, BATCH, &opt, (const char *const[]){"precision", "bf16.bf16", NULL}, 20, 7,
                  NULL);
    double moved = weight_distance(&init, &f32);
    double d16 = weight_distance(&f32, &f16), db16 = weight_distance(&f32, &bf16);
    printf("  f32 moved %.3g per weight; f16 is %.3g from f32, bf16 %.3g\n", moved, d16, db16);
    TG_CHECK(moved > 1e-4);
    TG_CHECK(d16 < 0.25 * moved); /* rounding, not a different trajectory */
    TG_CHECK(db16 < 0.5 * moved);
    TG_CHECK(tg_session_skipped_updates(f16.s) == 0);
    tg_test_model_destroy(&init);
    tg_test_model_destroy(&f32);
    tg_test_model_destroy(&f16);
    tg_test_model_destroy(&bf16);
}

/* Element-wise steps and SGD/Adam updates stage their half-precision
 * operands a chunk at a time (runtime/staging.c): the same bits as staging
 * whole tensors, with dynamic loss scaling (the gradient unscaled while
 * staged) and stochastic rounding of the updates (keyed by element index). */
static void test_chunked_staging_matches_whole(void)
{
    const char *const kv[] = {
        "precision", "16.16", "lossScaling", "dynamic", "Precision.enableStochasticRounding",
        "true",      NULL};
    const char *const kv_bf16[] = {"precision", "bf16.bf16", NULL};
    const char *const *cases[] = {kv, kv_bf16};
    for (int c = 0; c < 2; c++) {
        tg_optimizer opt = c ? tg_optimizer_sgd(0.05f, 0.9f) : adamw();
        tg_test_model chunked, whole;
        tg_test_train(&chunked, BATCH, &opt, cases[c], 6, 7, NULL);
        tg_process_set_whole_staging(1);
        tg_test_train(&whole, BATCH, &opt, cases[c], 6, 7, NULL);
        tg_process_set_whole_staging(0);
        TG_CHECK(tg_test_same_weights(&chunked, &whole, true));
        /* and the chunked program plans no staging scratch for them */
        TG_CHECK(tg_session_arena_bytes(chunked.s) < tg_session_arena_bytes(whole.s));
        tg_test_model_destroy(&chunked);
        tg_test_model_destroy(&whole);
    }
}

/* Whether every weight update of s reads its operands in place (none staged). */
static bool updates_native(const tg_session *s)
{
    const tg_program *p = tg_session_program(s);
    int updates = 0;
    for (int d = 0; d < p->n_devices; d++)
        for (int k = 0; k < p->devices[d].n_steps[TG_PHASE_UPDATE]; k++) {
            const tg_step *st = &p->devices[d].steps[TG_PHASE_UPDATE][k];
            if (!tg_is_weight_update(p->graph->nodes[st->node]))
                continue;
            updates++;
            if (st->staged || !tg_step_reads_native(p, st))
                return false;
        }
    return updates > 0;
}

/* In bf16.bf16 SGD (momentum, nesterov, decay), Adam and AdamW read and
 * write their bf16 operands in place (ops/optim.c): the same bits as
 * staging them whole, with the momentum in bf16 or f32, dynamic loss
 * scaling (the gradient unscaled) and stochastic rounding, on 1 and 2
 * threads per device. */
static void test_native_updates_match_staged(void)
{
    tg_optimizer sgd = tg_optimizer_sgd(0.05f, 0.9f), adam = tg_optimizer_adam(0.002f);
    sgd.nesterov = true;
    sgd.weight_decay = 0.01f;
    adam.weight_decay = 0.01f;
    const tg_optimizer opts[] = {sgd, adam, adamw()};
    for (int c = 0; c < 3; c++)
        for (int threads = 1; threads <= 2; threads++) {
            const char *const kv[] = {"precision",
                                      "bf16.bf16",
                                      "lossScaling",
                                      "dynamic",
                                      "Precision.enableStochasticRounding",
                                      "true",
                                      "firstOrderMomentumAccumType",
                                      c == 1 ? "f32" : "bf16",
                                      "threadsPerDevice",
                                      threads == 1 ? "1" : "2",
                                      NULL};
            tg_test_model native, whole;
            tg_test_train(&native, BATCH, &opts[c], kv, 4, 7, NULL);
            tg_process_set_whole_staging(1);
            tg_test_train(&whole, BATCH, &opts[c], kv, 4, 7, NULL);
            tg_process_set_whole_staging(0);
            TG_CHECK(updates_native(native.s));
            TG_CHECK(tg_test_same_weights(&native, &whole, true));
            tg_test_model_destroy(&native);
            tg_test_model_destroy(&whole);
        }
}

/* x [2, 5, D] times w, then layer norm with gamma and beta, then one
 * without: the norms' operands are activations stored in bf16 under
 * 32.bf16. The output of a run from fixed data and weights into out. */
static tg_session *layer_norm_session(tg_graph *g, int D, int threads, bool whole, float *out,
                                      int64_t *n_out)
{
    tg_graph_set_training(g, false);
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape3(2, 5, D));
    tg_tensor *w = tg_param(g, "w", tg_shape2(D, D), (tg_init){TG_INIT_FAN_IN_UNIFORM, D, 0});
    tg_tensor *gamma = tg_param(g, "gamma", tg_shape1(D), (tg_init){TG_INIT_FAN_IN_UNIFORM, 1, 0});
    tg_tensor *beta = tg_param(g, "beta", tg_shape1(D), (tg_init){TG_INIT_FAN_IN_UNIFORM, 1, 0});
    tg_tensor *h = tg_matmul(g, x, w, false, false);
    tg_tensor *y =
        tg_layer_norm(g, tg_layer_norm(g, h, 1, gamma, beta, 1e-5f), 1, NULL, NULL, 1e-5f);
    tg_tensor_mark_output(y);
    TG_CHECK_OK(tg_graph_status(g));
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "precision", "32.bf16"));
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", threads));
    TG_CHECK_OK(tg_options_set_int(o, "randomSeed", 3));
    tg_process_set_whole_staging(whole);
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    tg_options_destroy(o);
    int64_t n = 2 * 5 * D;
    float *xv = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        xv[i] = (float)((i * 2654435761u) % 1000) / 250.0f - 2.0f + (i % D == 3 ? 40.0f : 0.0f);
    TG_CHECK_OK(tg_session_write(s, x, xv, (size_t)n * sizeof(float)));
    TG_CHECK_OK(tg_session_verify_next_run(s));
    TG_CHECK_OK(tg_session_run(s));
    TG_CHECK_OK(tg_session_read(s, y, out, (size_t)n * sizeof(float)));
    tg_process_set_whole_staging(0); /* the run reads it too */
    *n_out = n;
    free(xv);
    return s;
}

/* The layer norm steps of s that read bf16 in place (not staged). */
static int norms_in_place(const tg_session *s)
{
    const tg_program *p = tg_session_program(s);
    const tg_device_program *dp = &p->devices[0];
    int n = 0;
    for (int k = 0; k < dp->n_steps[TG_PHASE_FORWARD]; k++) {
        const tg_step *st = &dp->steps[TG_PHASE_FORWARD][k];
        tg_op op = p->graph->nodes[st->node]->op;
        if (op == TG_OP_NORM_STATS || op == TG_OP_NORM_APPLY)
            n += !st->staged && tg_step_reads_native(p, st);
    }
    return n;
}

/* A bf16 inference program's layer norms (statistics and normalisation)
 * read and write their bf16 operands in place, a row at a time: the same
 * bits as staging them whole through f32, no staging, every row within
 * `check`'s tolerance; on 1 and 2 threads; a row longer than the kernel's
 * stack holds (4100) is staged as before. */
static void test_layer_norm_bf16_in_place(void)
{
    static const int dims[] = {48, 50, 768, 4100}; /* 50: a tail after the 16-wide steps */
    for (int d = 0; d < 4; d++)
        for (int threads = 1; threads <= (d < 3 ? 2 : 1); threads++) {
            int D = dims[d];
            float *a = malloc((size_t)10 * D * sizeof(float)),
                  *b = malloc((size_t)10 * D * sizeof(float));
            int64_t n = 0;
            tg_graph *g1 = tg_graph_create(), *g2 = tg_graph_create();
            tg_session *native = layer_norm_session(g1, D, threads, false, a, &n);
            tg_session *whole = layer_norm_session(g2, D, threads, true, b, &n);
            int in_place = norms_in_place(native);
            if (in_place != (D <= 4096 ? 4 : 0))
                tg_test_fail(__FILE__, __LINE__, "D %d, %d threads: %d norm steps in place", D,
                             threads, in_place);
            TG_CHECK(norms_in_place(whole) == 0);
            if (memcmp(a, b, (size_t)n * sizeof(float)) != 0)
                tg_test_fail(__FILE__, __LINE__, "D %d, %d threads: in place differs from staged",
                             D, threads);
            const tg_verify_report *r = tg_session_verify_report(native);
            for (int i = 0; r && i < tg_verify_rows(r); i++)
                if (tg_verify_row_at(r, i)->verdict != TG_VERIFY_OK)
                    tg_test_fail(__FILE__, __LINE__, "D %d: %s not within tolerance: %s", D,
                                 tg_verify_row_at(r, i)->name, tg_verify_row_at(r, i)->note);
            TG_CHECK(r != NULL);
            tg_session_destroy(native);
            tg_session_destroy(whole);
            tg_graph_destroy(g1), tg_graph_destroy(g2);
            free(a), free(b);
        }
}

/* One host step of data: uniform images, or `poison` everywhere if non-zero. */
static tg_status step(tg_test_model *c, float poison, uint64_t seed)
{
    int64_t n = tg_session_samples_per_run(c->s, c->mg.images);
    float *img = malloc((size_t)n * 784 * sizeof(float));
    int32_t *lab = malloc((size_t)n * sizeof(int32_t));
    for (int64_t i = 0; i < n * 784; i++)
        img[i] = poison != 0 ? poison : (float)((i * 2654435761u + seed) % 1000) / 1000.0f;
    for (int64_t i = 0; i < n; i++)
        lab[i] = (int32_t)((i + seed) % 10);
    TG_CHECK_OK(tg_session_write(c->s, c->mg.images, img, (size_t)n * 784 * sizeof(float)));
    TG_CHECK_OK(tg_session_write(c->s, c->mg.labels, lab, (size_t)n * sizeof(int32_t)));
    free(img);
    free(lab);
    return tg_session_run(c->s);
}

static void test_dynamic_scaling_skips_and_recovers(void)
{
    tg_optimizer opt = adamw();
    tg_test_model c, before;
    const char *const kv[] = {"precision",
                              "16.16",
                              "lossScaling",
                              "dynamic",
                              "lossScalingFactor",
                              "1024",
                              "lossScalingGrowthInterval",
                              "3",
                              "debug.checkNaN",
                              "false",
                              NULL};
    tg_test_train(&c, BATCH, &opt, kv, 0, 1, NULL);
    tg_test_train(&before, BATCH, &opt, kv, 0, 1, NULL);
    for (int k = 0; k < 2; k++) {
        TG_CHECK_OK(step(&c, 0, (uint64_t)k));
        TG_CHECK_OK(step(&before, 0, (uint64_t)k));
    }
    TG_CHECK(tg_session_loss_scale(c.s) == 1024.0f);
    /* an infinite input: every gradient is NaN; the update is skipped */
    TG_CHECK_OK(step(&c, INFINITY, 9));
    TG_CHECK(tg_session_skipped_updates(c.s) == 1);
    TG_CHECK(tg_session_loss_scale(c.s) == 512.0f);
    TG_CHECK(tg_test_same_weights(&c, &before, true)); /* weights and moments untouched */
    /* then training goes on, and the scale grows back after 3 good updates */
    for (int k = 0; k < 3; k++)
        TG_CHECK_OK(step(&c, 0, (uint64_t)(10 + k)));
    TG_CHECK(tg_session_skipped_updates(c.s) == 1);
    TG_CHECK(tg_session_loss_scale(c.s) == 1024.0f);
    TG_CHECK(!tg_test_same_weights(&c, &before, false));
    tg_test_model_destroy(&c);
    tg_test_model_destroy(&before);
}

static void test_scale_too_high_comes_down(void)
{
    tg_optimizer opt = adamw();
    tg_test_model c;
    /* 2^40: every scaled gradient overflows f16 until the scale has halved
     * about 25 times; the run must recover and train */
    const char *const kv[] = {
        "precision",        "16.16", "lossScaling", "dynamic", "lossScalingFactor", "1099511627776",
        "deviceIterations", "10",    NULL};
    tg_test_train(&c, BATCH, &opt, kv, 6, 3, NULL);
    int64_t skipped = tg_session_skipped_updates(c.s);
    float scale = tg_session_loss_scale(c.s);
    printf("  skipped %lld of 60 updates, scale now %g\n", (long long)skipped, (double)scale);
    TG_CHECK(skipped >= 10 && skipped <= 40);
    TG_CHECK(scale < 1e9f && scale >= 1.0f);
    tg_test_model_destroy(&c);
}

static void test_static_scaling_keeps_factor(void)
{
    tg_optimizer opt = adamw();
    tg_test_model c;
    const char *const kv[] = {
        "precision", "16.16",          "lossScaling", "static", "lossScalingFactor",
        "1000",      "debug.checkNaN", "false",       NULL};
    tg_test_train(&c, BATCH, &opt, kv, 2, 3, NULL);
    TG_CHECK_OK(step(&c, INFINITY, 1));
    TG_CHECK(tg_session_skipped_updates(c.s) == 1);
    TG_CHECK(tg_session_loss_scale(c.s) == 1000.0f);
    tg_test_model_destroy(&c);
}

/* y = x * w, loss = mean(y): the gradient of w is x / n, which overflows f16
 * for x = 1e6 while the forward values (x * 1e-3) do not. */
static void test_overflow_without_scaling_names_the_parameter(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(4));
    tg_tensor *w = tg_param(g, "w", tg_shape1(4), (tg_init){TG_INIT_CONSTANT, 1e-3, 0});
    tg_tensor *loss = tg_reduce_mean(g, tg_mul(g, x, w), 1u, false);
    TG_CHECK_OK(tg_graph_backward(g, loss));
    tg_optimizer sgd = tg_optimizer_sgd(1e-9f, 0);
    TG_CHECK_OK(tg_graph_add_optimizer(g, &sgd));
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "precision", "32.16"));
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    float big[4] = {1e6f, 1e6f, 1e6f, 1e6f}, small[4] = {1, 2, 3, 4};
    TG_CHECK_OK(tg_session_write(s, x, small, sizeof small));
    TG_CHECK_OK(tg_session_run(s));
    TG_CHECK_OK(tg_session_write(s, x, big, sizeof big));
    TG_CHECK(tg_session_run(s) == TG_ERR_NUMERIC);
    const char *msg = tg_error_message();
    TG_CHECK(strstr(msg, "step 1") != NULL);
    TG_CHECK(strstr(msg, "'w'") != NULL);
    TG_CHECK(strstr(msg, "loss scaling") != NULL);
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_graph_destroy(g);
}

static void test_half_pipelined_matches_one_device(void)
{
    tg_optimizer opt = adamw();
    tg_test_model one, piped, reps;
    const char *const base[] = {"precision",
                                "16.16",
                                "Training.gradientAccumulation",
                                "4",
                                "Precision.enableStochasticRounding",
                                "true",
                                NULL};
    const char *const pipe[] = {"precision",
                                "16.16",
                                "Training.gradientAccumulation",
                                "4",
                                "Precision.enableStochasticRounding",
                                "true",
                                "executionStrategy",
                                "pipelined",
                                NULL};
    const char *const rep[] = {
        "precision", "bf16.bf16", "replicationFactor", "2", "Precision.enableStochasticRounding",
        "true",      NULL};
    tg_test_train(&one, BATCH, &opt, base, 3, 5, NULL);
    tg_test_train(&piped, BATCH, &opt, pipe, 3, 5, NULL);
    TG_CHECK(tg_test_same_weights(&one, &piped, true));
    tg_test_train(&reps, BATCH, &opt, rep, 3, 5, NULL);
    const tg_graph *g = reps.mg.graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->op == TG_OP_PARAM)
            TG_CHECK(memcmp(tg_session_replica_data(reps.s, 0, t),
                            tg_session_replica_data(reps.s, 1, t), (size_t)tg_numel(t) * 2) == 0);
    }
    tg_test_model_destroy(&one);
    tg_test_model_destroy(&piped);
    tg_test_model_destroy(&reps);
}

static void test_checkpoint_keeps_storage_type(void)
{
    tg_optimizer opt = adamw();
    tg_test_model h, f;
    tg_test_train(&h, BATCH, &opt, (const char *const[]){"precision", "16.16", NULL}, 2, 5, NULL);
    tg_test_train(&f, BATCH, &opt, NULL, 0, 5, NULL);
    char path[] = "/tmp/tg_precision_ckpt_XXXXXX";
    int fd = mkstemp(path);
    TG_CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    TG_CHECK_OK(tg_checkpoint_save(h.s, path, "mnist-pipeline"));
    /* an f32 session loads the f16 checkpoint, converting exactly */
    TG_CHECK_OK(tg_checkpoint_load(f.s, path, "mnist-pipeline"));
    const tg_tensor *w = tg_graph_find(h.mg.graph, "layer3/weight");
    TG_CHECK(w != NULL);
    if (w) {
        const uint16_t *hw = tg_session_data(h.s, w);
        const float *fw = tg_session_data(f.s, tg_graph_find(f.mg.graph, "layer3/weight"));
        TG_CHECK(fw[0] == tg_f16_to_f32(hw[0]) && fw[100] == tg_f16_to_f32(hw[100]));
    }
    remove(path);
    tg_test_model_destroy(&h);
    tg_test_model_destroy(&f);
}

int main(void)
{
    TG_RUN(test_plan_stores_half);
    TG_RUN(test_half_training_follows_f32);
    TG_RUN(test_chunked_staging_matches_whole);
    TG_RUN(test_native_updates_match_staged);
    TG_RUN(test_layer_norm_bf16_in_place);
    TG_RUN(test_dynamic_scaling_skips_and_recovers);
    TG_RUN(test_scale_too_high_comes_down);
    TG_RUN(test_static_scaling_keeps_factor);
    TG_RUN(test_overflow_without_scaling_names_the_parameter);
    TG_RUN(test_half_pipelined_matches_one_device);
    TG_RUN(test_checkpoint_keeps_storage_type);
    return tg_test_finish();
}
