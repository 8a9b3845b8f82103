/* tests/ops/test_dropout.c - DROPOUT: masks reproducible for the same
 * (seed, step), different for another step, seed or layer; kept fraction
 * close to 1 - p; survivors scaled by 1 / (1 - p); backward regenerates the
 * forward mask; identity (no node) in inference mode; bad p rejected; the
 * vectorised mask (AVX2) equals the scalar one and the reference kernel's
 * over a long tensor.
 * TG_TEST_LABELS: isa */
#include "backend/backend.h"
#include "tg_test.h"

#include "ops/op.h"
#include "ops/random.h"
#include "backend/cpu/simd.h"
#include "runtime/interp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Run one DROPOUT node's fast kernel on x. */
static void drop(const tg_tensor *node, const float *x, float *out, uint64_t seed, int64_t step,
                 int threads)
{
    tg_pool *pool = tg_pool_create(threads);
    tg_kernel_args a = {
        .node = node, .in = {(void *)x}, .out = out, .pool = pool, .seed = seed, .step = step};
    tg_backend_cpu.kernel(TG_OP_DROPOUT)->forward(&a);
    tg_pool_destroy(pool);
}

enum { N = 100000 };

static void test_mask(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(N));
    tg_tensor *d1 = tg_dropout(g, x, 0.3f), *d2 = tg_dropout(g, x, 0.3f);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(d1 != x && d1->op == TG_OP_DROPOUT && tg_dropout_salt(d1) != tg_dropout_salt(d2));
    float *xv = malloc(N * sizeof(float)), *a = malloc(N * sizeof(float)),
          *b = malloc(N * sizeof(float));
    for (int k = 0; k < N; k++)
        xv[k] = 1.0f + (float)(k % 7); /* never 0, so a zero output means dropped */

    drop(d1, xv, a, 42, 3, 1);
    int kept = 0;
    for (int k = 0; k < N; k++) {
        if (a[k] != 0) {
            kept++;
            TG_CHECK_NEAR(a[k], xv[k] / 0.7f, 1e-6 * xv[k]);
        }
    }
    /* 1 - p = 0.7; the binomial standard deviation is 0.0014 */
    TG_CHECK_NEAR((double)kept / N, 0.7, 0.01);

    /* same (seed, step), 2 threads: the same mask bit for bit */
    drop(d1, xv, b, 42, 3, 2);
    TG_CHECK(memcmp(a, b, N * sizeof(float)) == 0);

    /* another step, another seed, another layer: different masks, each
     * agreeing with the first on about p^2 + (1-p)^2 = 58% of elements */
    int64_t steps[3] = {4, 3, 3};
    uint64_t seeds[3] = {42, 43, 42};
    const tg_tensor *nodes[3] = {d1, d1, d2};
    for (int v = 0; v < 3; v++) {
        drop(nodes[v], xv, b, seeds[v], steps[v], 2);
        int same = 0, kept_b = 0;
        for (int k = 0; k < N; k++) {
            same += (a[k] != 0) == (b[k] != 0);
            kept_b += b[k] != 0;
        }
        TG_CHECK_NEAR((double)same / N, 0.58, 0.01);
        TG_CHECK_NEAR((double)kept_b / N, 0.7, 0.01);
    }
    free(xv);
    free(a);
    free(b);
    tg_graph_destroy(g);
}

/* The gradient is a DROPOUT node on dy with the forward's salt: it drops
 * exactly the forward's elements and scales the rest the same way. */
static void test_backward_mask(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *w = tg_param(g, "w", tg_shape1(1000), (tg_init){TG_INIT_ONES, 0, 0});
    tg_tensor *d = tg_dropout(g, w, 0.5f);
    tg_tensor *loss = tg_reduce_sum(g, d, 1u, false);
    TG_CHECK_OK(tg_graph_backward(g, loss));
    tg_tensor *dw = tg_tensor_grad(w);
    TG_CHECK(dw != NULL && dw->op == TG_OP_DROPOUT && tg_dropout_salt(dw) == tg_dropout_salt(d));
    tg_interp *ip = NULL;
    TG_CHECK_OK(tg_interp_create(g, 5, &ip));
    for (int64_t step = 0; step < 2; step++) {
        TG_CHECK_OK(tg_interp_run(ip, step));
        const double *fwd = tg_interp_data(ip, d), *grad = tg_interp_data(ip, dw);
        int kept = 0;
        for (int k = 0; k < 1000; k++) {
            TG_CHECK(fwd[k] == grad[k]); /* w = 1, dy = 1: both are mask * 2 */
            TG_CHECK(fwd[k] == 0 || fwd[k] == 2);
            kept += fwd[k] != 0;
        }
        TG_CHECK(kept > 400 && kept < 600);
    }
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
}

typedef struct {
    tg_shape shape;
    float p;
} drop_case;

static tg_tensor *build_drop(tg_graph *g, void *ctx)
{
    const drop_case *c = ctx;
    tg_tensor *x = tg_param(g, "x", c->shape, (tg_init){TG_INIT_UNIFORM, -1, 1});
    return tg_dropout(g, tg_scale(g, x, 2.0f, 0.0f), c->p);
}

static void test_gradcheck_kernels(void)
{
    drop_case c = {tg_shape2(6, 7), 0.4f};
    tg_check_opts train = {.training = true};
    tg_gradcheck("dropout", build_drop, &c, train);
    for (int threads = 1; threads <= 2; threads++) {
        c.shape = tg_shape2(6, 7);
        tg_check_kernels("dropout", build_drop, &c, threads, 1e-5, train);
        c.shape = tg_shape2(300, 200);
        tg_check_kernels("dropout large", build_drop, &c, threads, 1e-3, train);
    }
}

static void test_inference_identity(void)
{
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, false);
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(4, 5));
    int before = tg_graph_tensor_count(g);
    TG_CHECK(tg_dropout(g, x, 0.5f) == x);
    TG_CHECK(tg_graph_tensor_count(g) == before);
    tg_graph_set_training(g, true);
    TG_CHECK(tg_dropout(g, x, 0.0f) == x); /* p = 0 drops nothing */
    TG_CHECK(tg_graph_tensor_count(g) == before);
    TG_CHECK_OK(tg_graph_status(g));
    tg_graph_destroy(g);

    /* The same model built twice draws the same masks: the salt comes from
     * the node's name, not from the order of graph creation. */
    int64_t salts[2];
    for (int k = 0; k < 2; k++) {
        g = tg_graph_create();
        if (k)
            tg_input(g, "unrelated", TG_F32, tg_shape1(3));
        tg_scope_push(g, "block1");
        x = tg_input(g, "x", TG_F32, tg_shape2(4, 5));
        salts[k] = tg_dropout_salt(tg_dropout(g, x, 0.5f));
        tg_graph_destroy(g);
    }
    TG_CHECK(salts[0] == salts[1]);
}

static void test_bad_p(void)
{
    const float bad[] = {1.0f, -0.1f, 1.5f, NAN};
    for (int train = 0; train <= 1; train++)
        for (int k = 0; k < 4; k++) {
            tg_graph *g = tg_graph_create();
            tg_graph_set_training(g, train);
            tg_scope_push(g, "head");
            tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(4));
            TG_CHECK(tg_dropout(g, x, bad[k]) == NULL);
            TG_CHECK(tg_graph_status(g) == TG_ERR_INVALID_ARG);
            TG_CHECK(strstr(tg_graph_error(g), "head/dropout: p = ") != NULL);
            TG_CHECK(strstr(tg_graph_error(g), "is outside [0, 1)") != NULL);
            tg_graph_destroy(g);
        }
}

/* Every SIMD level and the double reference draw the same mask over a
 * long tensor (the AVX2 loop's 8 lanes and its scalar tail, N % 8 != 0). */
static void test_levels_and_reference_agree(void)
{
    enum { L = 100003 };
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(L));
    tg_tensor *d = tg_dropout(g, x, 0.1f);
    TG_CHECK_OK(tg_graph_status(g));
    float *xv = malloc(L * sizeof(float)), *a = malloc(L * sizeof(float)),
          *b = malloc(L * sizeof(float));
    double *xd = malloc(L * sizeof(double)), *r = malloc(L * sizeof(double));
    for (int k = 0; k < L; k++)
        xd[k] = xv[k] = 1.0f + (float)(k % 5);
    tg_simd_level best = tg_simd_level_get();
    drop(d, xv, a, 7, 2, 1);
    tg_simd_cap(TG_SIMD_BASE);
    drop(d, xv, b, 7, 2, 1);
    tg_simd_cap(best);
    TG_CHECK(memcmp(a, b, L * sizeof(float)) == 0);
    tg_ref_args ra = {.node = d, .in = {xd}, .out = r, .step = 2, .seed = 7};
    tg_op_get(TG_OP_DROPOUT)->reference(&ra);
    int differ = 0, kept = 0;
    for (int k = 0; k < L; k++) {
        differ += (a[k] != 0) != (r[k] != 0) || fabs(a[k] - r[k]) > 1e-6 * r[k];
        kept += a[k] != 0;
    }
    TG_CHECK(differ == 0);
    TG_CHECK_NEAR((double)kept / L, 0.9, 0.005);
    free(xv);
    free(a);
    free(b);
    free(xd);
    free(r);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_mask);
    TG_RUN(test_backward_mask);
    TG_RUN(test_gradcheck_kernels);
    TG_RUN(test_inference_identity);
    TG_RUN(test_bad_p);
    TG_RUN(test_levels_and_reference_agree);
    return tg_test_finish();
}
