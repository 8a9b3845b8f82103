/* tests/ops/test_norm.c - batch, group and layer normalisation: the whole
 * composition (statistics op + normalise op + their gradient ops) against
 * finite differences, fast kernels against the double reference at 1 and 2
 * threads, running statistics checked by hand, and shape errors.
 * TG_TEST_LABELS: quick isa */
#include "backend/backend.h"
#include "tg_test.h"

#include "ops/op.h"
#include "runtime/interp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const tg_init U11 = {TG_INIT_UNIFORM, -1, 1};

enum { BN, GN, LN };

typedef struct norm_case {
    int kind;
    int ndim;
    int64_t dims[4];
    int arg; /* groups (GN) or normalised dims (LN) */
    bool gamma, beta;
    bool running; /* BN: with running statistics */
} norm_case;

static tg_shape case_shape(const norm_case *c)
{
    return tg_shape_of(c->ndim, c->dims);
}

static tg_tensor *build_norm(tg_graph *g, void *ctx)
{
    const norm_case *c = ctx;
    tg_shape xs = case_shape(c);
    tg_tensor *x = tg_param(g, "x", xs, U11);
    tg_shape ps = tg_shape1(xs.dim[1]);
    if (c->kind == LN) {
        ps = tg_shape_of(0, NULL);
        for (int d = xs.ndim - c->arg; d < xs.ndim; d++)
            ps.dim[ps.ndim++] = xs.dim[d];
    }
    /* gamma away from 1 and beta away from 0 so both matter */
    tg_tensor *gamma =
        c->gamma ? tg_param(g, "gamma", ps, (tg_init){TG_INIT_UNIFORM, 0.5, 1.5}) : NULL;
    tg_tensor *beta = c->beta ? tg_param(g, "beta", ps, U11) : NULL;
    switch (c->kind) {
    case BN: {
        tg_tensor *run = NULL;
        if (c->running)
            run = tg_state(g, "running_stats", tg_shape2(2, xs.dim[1]),
                           (tg_init){TG_INIT_UNIFORM, 0.2, 0.9});
        return tg_batch_norm(g, x, gamma, beta, run, 1e-5f);
    }
    case GN:
        return tg_group_norm(g, x, c->arg, gamma, beta, 1e-5f);
    default:
        return tg_layer_norm(g, x, c->arg, gamma, beta, 1e-5f);
    }
}

static const norm_case cases[] = {
    {BN, 4, {3, 2, 2, 3}, 0, true, true, true},  {BN, 4, {2, 3, 3, 2}, 0, false, false, false},
    {BN, 2, {5, 3}, 0, true, false, true},       {BN, 3, {2, 4, 3}, 0, false, true, true},
    {GN, 4, {2, 4, 2, 3}, 2, true, true, false}, {GN, 4, {2, 6, 3, 1}, 3, false, false, false},
    {GN, 3, {3, 4, 2}, 1, true, true, false},    /* one group: layer norm over C, S */
    {GN, 4, {2, 4, 2, 2}, 4, true, true, false}, /* instance norm */
    {LN, 2, {4, 5}, 1, true, true, false},       {LN, 3, {2, 3, 4}, 2, true, true, false},
    {LN, 3, {3, 2, 5}, 1, false, false, false},  {LN, 2, {3, 6}, 1, true, false, false},
};
#define N_CASES (sizeof cases / sizeof *cases)

static void test_gradcheck_training(void)
{
    tg_check_opts o = {0};
    o.training = true;
    o.tol = 1e-5;
    for (size_t i = 0; i < N_CASES; i++) {
        char label[64];
        snprintf(label, sizeof label, "norm case %zu (training)", i);
        TG_CHECK(tg_gradcheck(label, build_norm, (void *)&cases[i], o));
    }
}

/* Inference-mode batch norm normalises with the running statistics. */
static void test_gradcheck_inference(void)
{
    tg_check_opts o = {0};
    o.tol = 1e-5;
    for (size_t i = 0; i < N_CASES; i++) {
        if (cases[i].kind != BN || !cases[i].running)
            continue;
        TG_CHECK(tg_gradcheck("batch norm (inference)", build_norm, (void *)&cases[i], o));
        TG_CHECK(
            tg_check_kernels("batch norm (inference)", build_norm, (void *)&cases[i], 2, 1e-4, o));
    }
}

static void test_kernels(void)
{
    tg_check_opts o = {0};
    o.training = true;
    for (size_t i = 0; i < N_CASES; i++)
        for (int t = 1; t <= 2; t++)
            TG_CHECK(tg_check_kernels("norm small", build_norm, (void *)&cases[i], t, 1e-4, o));
    static const norm_case big[] = {
        {BN, 4, {40, 20, 8, 8}, 0, true, true, true}, {BN, 4, {8, 64, 16, 16}, 0, true, true, true},
        {GN, 4, {4, 32, 8, 8}, 8, true, true, false}, {LN, 2, {40, 256}, 1, true, true, false},
        {LN, 3, {4, 17, 96}, 1, true, true, false},
    };
    for (size_t i = 0; i < sizeof big / sizeof *big; i++)
        for (int t = 1; t <= 2; t++)
            TG_CHECK(tg_check_kernels("norm big", build_norm, (void *)&big[i], t, 1e-4, o));
}

/* x [4, 1]: 1, 2, 3, 6 -> mean 3, biased var 3.5, unbiased 14/3. PyTorch's
 * BatchNorm1d(1) after one training step: running mean 0.3, running var
 * 0.9 + 0.1 * 14/3; after a second step with the same batch:
 * mean 0.9 * 0.3 + 0.3 = 0.57, var 0.9 * v1 + 0.1 * 14/3. */
/* Another momentum (mnasnet's 0.0003, ONNX's 0.9997): x as above, one step
 * from mean 0, var 1: mean m * 3, var (1 - m) + m * 14/3. Momenta outside
 * [0, 1] are refused naming the value. */
static void test_running_stats_momentum(void)
{
    const float momenta[3] = {0.0003f, 0.5f, 1.0f};
    for (int k = 0; k < 3; k++) {
        tg_graph *g = tg_graph_create();
        tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(4, 1));
        tg_tensor *run =
            tg_state(g, "running_stats", tg_shape2(2, 1), (tg_init){TG_INIT_NORM_STATS, 0, 0});
        tg_tensor *y = tg_batch_norm_ex(g, x, NULL, NULL, run, 1e-5f, momenta[k]);
        TG_CHECK_OK(tg_graph_status(g));
        tg_tensor *upd = NULL;
        for (int i = 0; i < tg_graph_tensor_count(g); i++)
            if (tg_graph_tensor(g, i)->op == TG_OP_RUNNING_STATS_UPDATE)
                upd = tg_graph_tensor(g, i);
        TG_CHECK(y && upd);
        if (!upd) {
            tg_graph_destroy(g);
            continue;
        }
        double m = momenta[k];
        tg_interp *ip = NULL;
        TG_CHECK_OK(tg_interp_create(g, 1, &ip));
        double *xd = tg_interp_data(ip, x), *rd = tg_interp_data(ip, run);
        xd[0] = 1, xd[1] = 2, xd[2] = 3, xd[3] = 6;
        TG_CHECK_OK(tg_interp_run(ip, 0));
        TG_CHECK_NEAR(rd[0], 3 * m, 1e-12);
        TG_CHECK_NEAR(rd[1], (1 - m) + m * 14.0 / 3.0, 1e-12);
        float S[2] = {3.0f, 3.5f}, R[2] = {0.0f, 1.0f};
        tg_kernel_args u = {.node = upd, .in = {R, S}, .out = NULL};
        tg_backend_cpu.kernel(TG_OP_RUNNING_STATS_UPDATE)->forward(&u);
        TG_CHECK_NEAR(R[0], 3 * m, 1e-7);
        TG_CHECK_NEAR(R[1], (1 - m) + m * 14.0 / 3.0, 1e-6);
        tg_interp_destroy(ip);
        tg_graph_destroy(g);
    }
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(4, 1));
    tg_tensor *run =
        tg_state(g, "running_stats", tg_shape2(2, 1), (tg_init){TG_INIT_NORM_STATS, 0, 0});
    TG_CHECK(tg_batch_norm_ex(g, x, NULL, NULL, run, 1e-5f, 1.5f) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "batch_norm: momentum 1.5 is outside [0, 1]") != NULL);
    tg_graph_destroy(g);
}

static void test_running_stats(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(4, 1));
    tg_scope_push(g, "bn");
    tg_tensor *run =
        tg_state(g, "running_stats", tg_shape2(2, 1), (tg_init){TG_INIT_NORM_STATS, 0, 0});
    tg_scope_pop(g);
    tg_tensor *y = tg_batch_norm(g, x, NULL, NULL, run, 1e-5f);
    TG_CHECK_OK(tg_graph_status(g));
    tg_tensor *upd = NULL;
    for (int i = 0; i < tg_graph_tensor_count(g); i++)
        if (tg_graph_tensor(g, i)->op == TG_OP_RUNNING_STATS_UPDATE)
            upd = tg_graph_tensor(g, i);
    TG_CHECK(upd != NULL);
    if (!upd || !y) {
        tg_graph_destroy(g);
        return;
    }
    TG_CHECK(upd->n_mutated == 1 && upd->role == TG_ROLE_UPDATE && upd->in[0] == run);
    TG_CHECK(upd->shape.ndim == 1 && upd->shape.dim[0] == 0);
    tg_interp *ip = NULL;
    TG_CHECK_OK(tg_interp_create(g, 1, &ip));
    double *xd = tg_interp_data(ip, x);
    xd[0] = 1, xd[1] = 2, xd[2] = 3, xd[3] = 6;
    double *rd = tg_interp_data(ip, run);
    TG_CHECK_NEAR(rd[0], 0.0, 0);
    TG_CHECK_NEAR(rd[1], 1.0, 0);
    TG_CHECK_OK(tg_interp_run(ip, 0));
    double v1 = 0.9 + 0.1 * 14.0 / 3.0;
    TG_CHECK_NEAR(rd[0], 0.3, 1e-7);
    TG_CHECK_NEAR(rd[1], v1, 1e-7);
    double *yd = tg_interp_data(ip, y);
    TG_CHECK_NEAR(yd[3], 3.0 / sqrt(3.5 + 1e-5), 1e-6); /* normalised with batch stats */
    TG_CHECK_OK(tg_interp_run(ip, 1));
    TG_CHECK_NEAR(rd[0], 0.57, 1e-6);
    TG_CHECK_NEAR(rd[1], 0.9 * v1 + 0.1 * 14.0 / 3.0, 1e-6);

    /* the fast kernels give the same: stats, then the update in place */
    float X[4] = {1, 2, 3, 6}, S[2], R[2] = {0.0f, 1.0f};
    tg_tensor *stats = upd->in[1];
    tg_kernel_args a = {.node = stats, .in = {X}, .out = S};
    tg_backend_cpu.kernel(TG_OP_NORM_STATS)->forward(&a);
    TG_CHECK_NEAR(S[0], 3.0, 1e-6);
    TG_CHECK_NEAR(S[1], 3.5, 1e-6);
    tg_kernel_args u = {.node = upd, .in = {R, S}, .out = NULL};
    tg_backend_cpu.kernel(TG_OP_RUNNING_STATS_UPDATE)->forward(&u);
    TG_CHECK_NEAR(R[0], 0.3, 1e-6);
    TG_CHECK_NEAR(R[1], v1, 1e-6);
    tg_interp_destroy(ip);
    tg_graph_destroy(g);

    /* inference mode reads the running statistics and updates nothing */
    g = tg_graph_create();
    tg_graph_set_training(g, false);
    x = tg_input(g, "x", TG_F32, tg_shape2(4, 1));
    run = tg_state(g, "running_stats", tg_shape2(2, 1), (tg_init){TG_INIT_NORM_STATS, 0, 0});
    y = tg_batch_norm(g, x, NULL, NULL, run, 1e-5f);
    TG_CHECK(y && y->op == TG_OP_NORM_APPLY && y->in[1] == run);
    for (int i = 0; i < tg_graph_tensor_count(g); i++)
        TG_CHECK(tg_graph_tensor(g, i)->op != TG_OP_RUNNING_STATS_UPDATE);
    TG_CHECK_OK(tg_interp_create(g, 1, &ip));
    xd = tg_interp_data(ip, x);
    xd[0] = 1, xd[1] = 2, xd[2] = 3, xd[3] = 6;
    TG_CHECK_OK(tg_interp_run(ip, 0));
    TG_CHECK_NEAR(tg_interp_data(ip, y)[3], 6.0 / sqrt(1.0 + 1e-5), 1e-6);
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
}

/* Batch norm over 2 values: the variance is about eps, so d(var) reaches
 * float's range (ResNet-101 at 16 x 16, issue 46) while dx = 2 d(var)
 * (x - mean) / n is finite; 2 * d(var) alone overflowed. */
static void test_stats_bwd_near_float_max(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_param(g, "x", tg_shape2(2, 1), U11); /* a gradient flows into x */
    tg_tensor *run =
        tg_state(g, "running_stats", tg_shape2(2, 1), (tg_init){TG_INIT_NORM_STATS, 0, 0});
    tg_tensor *y = tg_batch_norm(g, x, NULL, NULL, run, 1e-5f);
    tg_tensor *loss = tg_reduce_sum(g, y, 3u, false);
    TG_CHECK_OK(tg_graph_backward(g, loss));
    const tg_tensor *bwd = NULL;
    for (int i = 0; i < tg_graph_tensor_count(g); i++)
        if (tg_graph_tensor(g, i)->op == TG_OP_NORM_STATS_BWD)
            bwd = tg_graph_tensor(g, i);
    TG_CHECK(bwd != NULL);
    if (bwd) {
        float ds[2] = {0.0f, 3e38f}, X[2] = {1.0f, 1.001f}, st[2] = {1.0005f, 2.5e-7f}, dx[2];
        tg_kernel_args a = {.node = bwd, .in = {ds, X, st}, .out = dx};
        tg_backend_cpu.kernel(TG_OP_NORM_STATS_BWD)->forward(&a);
        for (int i = 0; i < 2; i++) {
            double want = 3e38 * ((double)X[i] - 1.0005); /* 2 / n is 1 */
            TG_CHECK(isfinite(dx[i]));
            TG_CHECK_NEAR(dx[i] / want, 1.0, 1e-3);
        }
    }
    tg_graph_destroy(g);
}

/* Layer norm of [1, 2, 3, 4] with gamma 2, beta 1: mean 2.5, var 1.25. */
static void test_layer_norm_values(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(1, 4));
    tg_tensor *gm = tg_param(g, "g", tg_shape1(4), (tg_init){TG_INIT_CONSTANT, 2, 0});
    tg_tensor *bt = tg_param(g, "b", tg_shape1(4), (tg_init){TG_INIT_CONSTANT, 1, 0});
    tg_tensor *y = tg_layer_norm(g, x, 1, gm, bt, 1e-5f);
    TG_CHECK_OK(tg_graph_status(g));
    float X[4] = {1, 2, 3, 4}, S[2], Y[4], G[4] = {2, 2, 2, 2}, B[4] = {1, 1, 1, 1};
    tg_kernel_args a = {.node = y->in[1], .in = {X}, .out = S};
    tg_backend_cpu.kernel(TG_OP_NORM_STATS)->forward(&a);
    tg_kernel_args b = {.node = y, .in = {X, S, G, B}, .out = Y};
    tg_backend_cpu.kernel(TG_OP_NORM_APPLY)->forward(&b);
    double r = 1.0 / sqrt(1.25 + 1e-5);
    for (int i = 0; i < 4; i++)
        TG_CHECK_NEAR(Y[i], (X[i] - 2.5) * r * 2 + 1, 1e-5);
    tg_graph_destroy(g);
}

static void expect_error(tg_graph *g, tg_tensor *t, const char *a, const char *b)
{
    TG_CHECK(t == NULL);
    const char *msg = tg_graph_error(g);
    TG_CHECK(strstr(msg, a) != NULL && strstr(msg, b) != NULL);
    if (!strstr(msg, a) || !strstr(msg, b))
        fprintf(stderr, "    message was: %s\n", msg);
    tg_graph_destroy(g);
}

static void test_shape_errors(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(2, 6, 3, 3));
    expect_error(g, tg_group_norm(g, x, 4, NULL, NULL, 1e-5f), "norm_stats",
                 "6 channels do not split into 4 groups");
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape4(2, 6, 3, 3));
    tg_tensor *gm = tg_param(g, "gamma", tg_shape1(5), U11);
    expect_error(g, tg_batch_norm(g, x, gm, NULL, NULL, 1e-5f), "norm_apply",
                 "gamma [5] must be [6]");
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape2(4, 8));
    gm = tg_param(g, "gamma", tg_shape1(4), U11);
    expect_error(g, tg_layer_norm(g, x, 1, gm, NULL, 1e-5f), "norm_apply", "[4] must be [8]");
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape2(4, 8));
    expect_error(g, tg_layer_norm(g, x, 3, NULL, NULL, 1e-5f), "norm_stats",
                 "no last 3 dimensions");
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape4(1, 3, 1, 1));
    tg_tensor *run = tg_state(g, "rs", tg_shape2(2, 3), (tg_init){TG_INIT_NORM_STATS, 0, 0});
    tg_batch_norm(g, x, NULL, NULL, run, 1e-5f);
    expect_error(g, NULL, "running_stats_update", "more than 1 value per channel");
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape4(2, 3, 2, 2));
    run = tg_state(g, "rs", tg_shape2(2, 4), (tg_init){TG_INIT_NORM_STATS, 0, 0});
    tg_batch_norm(g, x, NULL, NULL, run, 1e-5f);
    expect_error(g, NULL, "running_stats_update", "[2, 3]");
}

int main(void)
{
    TG_RUN(test_layer_norm_values);
    TG_RUN(test_stats_bwd_near_float_max);
    TG_RUN(test_running_stats);
    TG_RUN(test_running_stats_momentum);
    TG_RUN(test_gradcheck_training);
    TG_RUN(test_gradcheck_inference);
    TG_RUN(test_kernels);
    TG_RUN(test_shape_errors);
    return tg_test_finish();
}
