/* tests/runtime/test_session.c - the engine runs what the reference
 * interpreter computes, allocates nothing per run, and reports misuse.
 * Creating a session and running a step with each of their allocations
 * failed in turn returns TG_ERR_NOMEM with a message and leaks nothing.
 * TG_TEST_LABELS: threads quick */
#include "tg_test.h"

#include "core/alloc.h"
#include "core/error.h"
#include "runtime/interp.h"
#include "runtime/session_internal.h"
#include "tilegraph/optim.h"

#include <string.h>

typedef struct {
    tg_tensor *x, *labels, *logits, *loss;
} mlp;

/* A two-layer MLP with a cross-entropy loss; with `blocks`, a block per
 * layer (B1, B2) to pipeline over two devices. */
static tg_graph *build_mlp_ex(mlp *m, int batch, const tg_optimizer *opt, bool blocks)
{
    tg_graph *g = tg_graph_create();
    m->x = tg_input(g, "x", TG_F32, tg_shape2(batch, 12));
    m->labels = tg_input(g, "labels", TG_I32, tg_shape1(batch));
    if (blocks)
        tg_block_begin(g, "B1");
    tg_tensor *w1 = tg_param(g, "w1", tg_shape2(16, 12), (tg_init){TG_INIT_FAN_IN_UNIFORM, 12, 0});
    tg_tensor *b1 = tg_param(g, "b1", tg_shape1(16), (tg_init){TG_INIT_FAN_IN_UNIFORM, 12, 0});
    tg_tensor *h = tg_relu(g, tg_linear(g, m->x, w1, b1));
    if (blocks)
        tg_block_begin(g, "B2");
    tg_tensor *w2 = tg_param(g, "w2", tg_shape2(5, 16), (tg_init){TG_INIT_FAN_IN_UNIFORM, 16, 0});
    m->logits = tg_linear(g, h, w2, NULL);
    m->loss = tg_cross_entropy(g, m->logits, m->labels);
    if (blocks)
        tg_block_end(g);
    tg_tensor_mark_output(m->logits);
    tg_tensor_mark_output(m->loss);
    if (opt) {
        TG_CHECK_OK(tg_graph_backward(g, m->loss));
        TG_CHECK_OK(tg_graph_add_optimizer(g, opt));
    }
    TG_CHECK_OK(tg_graph_status(g));
    return g;
}

static tg_graph *build_mlp(mlp *m, int batch, const tg_optimizer *opt)
{
    return build_mlp_ex(m, batch, opt, false);
}

static void fill(float *x, int32_t *y, int batch, int step)
{
    for (int i = 0; i < batch * 12; i++)
        x[i] = (float)((i * 37 + step * 11) % 19) / 9.0f - 1.0f;
    for (int i = 0; i < batch; i++)
        y[i] = (i * 3 + step) % 5;
}

static void train_matches_interpreter(const tg_optimizer *opt, int threads)
{
    enum { BATCH = 8 };
    mlp m;
    tg_graph *g = build_mlp(&m, BATCH, opt);
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", threads);
    tg_options_set_int(o, "randomSeed", 5);
    tg_session *s = NULL;
    tg_interp *ip = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    TG_CHECK_OK(tg_interp_create(g, 5, &ip));
    float x[BATCH * 12];
    int32_t y[BATCH];
    for (int step = 0; s && ip && step < 4; step++) {
        fill(x, y, BATCH, step);
        TG_CHECK_OK(tg_session_write(s, m.x, x, sizeof x));
        TG_CHECK_OK(tg_session_write(s, m.labels, y, sizeof y));
        double *dx = tg_interp_data(ip, m.x), *dy = tg_interp_data(ip, m.labels);
        for (int i = 0; i < BATCH * 12; i++)
            dx[i] = x[i];
        for (int i = 0; i < BATCH; i++)
            dy[i] = y[i];
        TG_CHECK_OK(tg_session_run(s));
        TG_CHECK_OK(tg_interp_run(ip, step));
        float loss = 0;
        TG_CHECK_OK(tg_session_read(s, m.loss, &loss, sizeof loss));
        TG_CHECK_NEAR(loss, tg_interp_data(ip, m.loss)[0], 1e-4);
    }
    TG_CHECK(tg_session_step(s) == 4);
    /* after four updates every parameter agrees with the double reference */
    TG_CHECK_PARAMS_MATCH(g, s, ip);
    tg_interp_destroy(ip);
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_graph_destroy(g);
}

static void test_sgd_momentum_matches_reference(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.9f);
    train_matches_interpreter(&opt, 1);
    train_matches_interpreter(&opt, 2);
}

static void test_adamw_matches_reference(void)
{
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    train_matches_interpreter(&opt, 1);
    train_matches_interpreter(&opt, 2);
}

/* LAMB, bias correction off and clipping by the global norm, against the
 * double-precision interpreter (which clips independently of the engine). */
static void test_lamb_and_clipping_match_reference(void)
{
    tg_optimizer opts[3] = {tg_optimizer_lamb(0.01f), tg_optimizer_adamw(0.01f),
                            tg_optimizer_sgd(0.2f, 0.9f)};
    opts[0].max_grad_norm = 0.1f;
    opts[0].max_weight_norm = 1.0f;
    opts[1].bias_correction = false;
    opts[1].max_grad_norm = 0.05f;
    opts[2].max_grad_norm = 0.02f;
    for (int k = 0; k < 3; k++) {
        train_matches_interpreter(&opts[k], 1);
        train_matches_interpreter(&opts[k], 2);
    }
}

/* The engine allocates its arena once; a run allocates nothing. */
static void test_run_allocates_nothing(void)
{
    mlp m;
    tg_optimizer opt = tg_optimizer_adam(0.01f);
    tg_graph *g = build_mlp(&m, 8, &opt);
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", 2);
    int64_t before = tg_alloc_live_bytes();
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    int64_t held = tg_alloc_live_bytes() - before;
    /* the arena is all but a few KiB of what the session holds */
    TG_CHECK((size_t)held >= tg_session_arena_bytes(s));
    /* the rest is the compiled program and host streams, a few KiB here */
    TG_CHECK((size_t)held - tg_session_arena_bytes(s) < 64 * 1024);
    tg_alloc_reset_peak();
    int64_t live = tg_alloc_live_bytes();
    for (int i = 0; i < 5; i++)
        TG_CHECK_OK(tg_session_run(s));
    TG_CHECK(tg_alloc_live_bytes() == live);
    TG_CHECK(tg_alloc_peak_bytes() == live);
    tg_session_destroy(s);
    TG_CHECK(tg_alloc_live_bytes() == before);
    tg_options_destroy(o);
    tg_graph_destroy(g);
}

static void test_misuse_is_reported(void)
{
    mlp m;
    tg_graph *g = build_mlp(&m, 4, NULL);
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(g, NULL, &s));
    float small[3];
    TG_CHECK(tg_session_write(s, m.x, small, sizeof small) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_error_message(), "'x'") != NULL);
    /* the hidden layer is an intermediate value: not readable */
    const tg_tensor *hidden = m.logits->in[0];
    float buf[64];
    TG_CHECK(tg_session_read(s, hidden, buf, tg_nbytes(hidden)) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_error_message(), "intermediate") != NULL);
    /* a NaN input makes the loss NaN: the run says so, naming the loss */
    float x[4 * 12];
    int32_t y[4] = {0, 1, 2, 3};
    for (int i = 0; i < 48; i++)
        x[i] = i == 7 ? NAN : 0.5f;
    TG_CHECK_OK(tg_session_write(s, m.x, x, sizeof x));
    TG_CHECK_OK(tg_session_write(s, m.labels, y, sizeof y));
    TG_CHECK(tg_session_run(s) == TG_ERR_NUMERIC);
    TG_CHECK(strstr(tg_error_message(), "cross_entropy") != NULL);
    tg_session_destroy(s);
    tg_graph_destroy(g);
}

/* An inference session takes the trained weights by name. */
static void test_copy_weights_between_sessions(void)
{
    mlp mt, mi;
    tg_optimizer opt = tg_optimizer_sgd(0.5f, 0.0f);
    tg_graph *gt = build_mlp(&mt, 8, &opt), *gi = build_mlp(&mi, 2, NULL);
    tg_session *st = NULL, *si = NULL;
    TG_CHECK_OK(tg_session_create(gt, NULL, &st));
    TG_CHECK_OK(tg_session_create(gi, NULL, &si));
    float x[8 * 12];
    int32_t y[8];
    fill(x, y, 8, 0);
    tg_session_write(st, mt.x, x, sizeof x);
    tg_session_write(st, mt.labels, y, sizeof y);
    TG_CHECK_OK(tg_session_run(st));
    TG_CHECK_OK(tg_session_copy_weights(si, st));
    const tg_tensor *w_t = tg_graph_find(gt, "w1"), *w_i = tg_graph_find(gi, "w1");
    TG_CHECK(memcmp(tg_session_data(st, w_t), tg_session_data(si, w_i), tg_nbytes(w_t)) == 0);
    tg_session_destroy(st);
    tg_session_destroy(si);
    tg_graph_destroy(gt);
    tg_graph_destroy(gi);
}

/* Create, write a step's inputs, run: the first call that does not return TG_OK. */
static tg_status create_and_step(tg_graph *g, const tg_options *o, const mlp *m, tg_session **s)
{
    float x[64 * 12];
    int32_t y[64];
    tg_status st = tg_session_create(g, o, s);
    int64_t n = st == TG_OK ? tg_session_samples_per_run(*s, m->x) : 0;
    if (st == TG_OK && (n < 1 || n > 64))
        return tg_error(TG_ERR_INVALID_ARG, "test: %lld samples per run", (long long)n);
    fill(x, y, (int)n, 0);
    if (st == TG_OK)
        st = tg_session_write(*s, m->x, x, (size_t)n * 12 * sizeof *x);
    if (st == TG_OK)
        st = tg_session_write(*s, m->labels, y, (size_t)n * sizeof *y);
    return st == TG_OK ? tg_session_run(*s) : st;
}

/* Fail allocation 1, 2, .. N in turn, N being what a clean create and
 * step ask for: each must give TG_ERR_NOMEM with a message saying so, and
 * destroying what was made must free every byte. With `best_effort`, a
 * failure may also leave the session working (TG_OK), in the parts that are
 * optional by design: the monitor's registry record (a warning), removing
 * stale temporary files. */
static void session_fails_cleanly(const char *const *kv, bool best_effort)
{
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    mlp m;
    tg_graph *g = build_mlp_ex(&m, 4, &opt, true);
    tg_options *o = tg_options_create();
    tg_test_options_set(o, kv);
    tg_session *s = NULL;
    TG_CHECK_OK(create_and_step(g, o, &m, &s)); /* warms what is made once per process */
    tg_session_destroy(s);
    int64_t live = tg_alloc_live_bytes(), before = tg_alloc_count();
    s = NULL;
    TG_CHECK_OK(create_and_step(g, o, &m, &s));
    int64_t n_allocs = tg_alloc_count() - before, n_ok = 0;
    tg_session_destroy(s);
    TG_CHECK(n_allocs > 40); /* the compile alone makes more */
    for (int64_t n = 1; n <= n_allocs; n++) {
        s = NULL;
        tg_alloc_fail_after(n);
        tg_status st = create_and_step(g, o, &m, &s);
        tg_alloc_fail_after(0);
        n_ok += st == TG_OK;
        bool expected = st == TG_ERR_NOMEM ? strstr(tg_error_message(), "out of memory") != NULL
                                           : st == TG_OK && best_effort;
        if (!expected)
            tg_test_fail(__FILE__, __LINE__, "allocation %lld of %lld failed: %s, \"%s\"",
                         (long long)n, (long long)n_allocs, tg_status_name(st), tg_error_message());
        tg_session_destroy(s);
        if (tg_alloc_live_bytes() != live)
            tg_test_fail(__FILE__, __LINE__, "allocation %lld failed: %lld bytes leaked",
                         (long long)n, (long long)(tg_alloc_live_bytes() - live));
    }
    printf("  %lld allocations failed in turn, %lld of them without failing the step\n",
           (long long)n_allocs, (long long)n_ok);
    TG_CHECK(n_ok < n_allocs / 4);
    tg_options_destroy(o);
    tg_graph_destroy(g);
}

static void test_allocation_failures(void)
{
    session_fails_cleanly((const char *[]){"threadsPerDevice", "1", "monitor.enable", "0", NULL},
                          false);
    /* two replicas: an all-reduce, a thread per replica */
    session_fails_cleanly((const char *[]){"threadsPerDevice", "1", "replicationFactor", "2",
                                           "monitor.enable", "0", NULL},
                          false);
    /* two threads per device: a pool with a worker thread */
    session_fails_cleanly((const char *[]){"threadsPerDevice", "2", "monitor.enable", "0", NULL},
                          false);
    /* two stages: exchange buffers, flow control, recomputation */
    session_fails_cleanly((const char *[]){"threadsPerDevice", "1", "executionStrategy",
                                           "pipelined", "Training.gradientAccumulation", "4",
                                           "recomputation", "pipeline", "monitor.enable", "0",
                                           NULL},
                          false);
    /* half storage, the loss scale, optimizer state in host memory */
    session_fails_cleanly(
        (const char *[]){"threadsPerDevice", "1", "precision", "16.16", "lossScaling", "dynamic",
                         "TensorLocations.optimizer.onChip", "0", "monitor.enable", "0", NULL},
        false);
    session_fails_cleanly((const char *[]){"threadsPerDevice", "1", "replicationFactor", "2",
                                           "TensorLocations.optimizer.replicatedTensorSharding",
                                           "1", "monitor.enable", "0", NULL},
                          false);
    /* the profile: its files and the recorders of the execution profile
     * (removing a dead process's temporary files is best effort) */
    char dir[] = "/tmp/tg_session_faults_XXXXXX";
    if (TG_MKDTEMP(dir)) {
        session_fails_cleanly((const char *[]){"threadsPerDevice", "1", "autoReport.all", "true",
                                               "autoReport.directory", dir, "monitor.enable", "0",
                                               NULL},
                              true);
        tg_test_remove_dir(dir);
    }
    session_fails_cleanly((const char *[]){"threadsPerDevice", "1", "monitor.enable", "1", NULL},
                          true);
}

int main(void)
{
    TG_RUN(test_sgd_momentum_matches_reference);
    TG_RUN(test_adamw_matches_reference);
    TG_RUN(test_lamb_and_clipping_match_reference);
    TG_RUN(test_run_allocates_nothing);
    TG_RUN(test_misuse_is_reported);
    TG_RUN(test_copy_weights_between_sessions);
    TG_RUN(test_allocation_failures);
    return tg_test_finish();
}
