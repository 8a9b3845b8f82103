/* tests/ops/test_random.c - RANDOM_UNIFORM (ops/random.c): the fast kernel
 * draws the reference's values, they are uniform in [low, high) (or normal
 * of a mean and scale), new for each step, micro-batch and replica and
 * node, the same for the same key, and a product with them differentiates
 * as by a constant. */
#include "backend/backend.h"
#include "tg_test.h"

#include "ops/op.h"
#include "runtime/interp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static tg_tensor *build_product(tg_graph *g, void *ctx)
{
    (void)ctx;
    tg_tensor *x = tg_param(g, "x", tg_shape2(6, 7), (tg_init){TG_INIT_UNIFORM, -2, 2});
    return tg_mul(g, x, tg_random_uniform_like(g, x, -1.5f, 0.5f));
}

static tg_tensor *build_big(tg_graph *g, void *ctx)
{
    (void)ctx;
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(300, 200));
    return tg_random_uniform_like(g, x, 2.0f, 5.0f);
}

static tg_tensor *build_normal(tg_graph *g, void *ctx)
{
    (void)ctx;
    tg_tensor *x = tg_param(g, "x", tg_shape2(30, 20), (tg_init){TG_INIT_UNIFORM, -2, 2});
    return tg_mul(g, x, tg_random_normal_like(g, x, 0.5f, 2.0f));
}

static void test_kernels_and_gradient(void)
{
    for (int threads = 1; threads <= 2; threads++)
        tg_check_kernels("random normal product", build_normal, NULL, threads, 1e-5,
                         (tg_check_opts){0});
    tg_gradcheck("random normal product", build_normal, NULL, (tg_check_opts){0});
    for (int threads = 1; threads <= 2; threads++) {
        tg_check_kernels("random product", build_product, NULL, threads, 1e-6, (tg_check_opts){0});
        tg_check_kernels("random large", build_big, NULL, threads, 1e-6, (tg_check_opts){0});
    }
    /* the draws do not depend on x: the gradient of x * u is u */
    tg_gradcheck("random product", build_product, NULL, (tg_check_opts){0});
}

/* Draws of the fast kernel for (seed, step, stream) into out[n]. */
static void draw(const tg_tensor *t, uint64_t seed, int64_t step, uint64_t stream, float *out,
                 tg_pool *pool)
{
    tg_kernel_args a = {
        .node = t, .out = out, .pool = pool, .seed = seed, .step = step, .stream = stream};
    tg_backend_cpu.kernel(TG_OP_RANDOM_UNIFORM)->forward(&a);
}

static void test_distribution_and_keys(void)
{
    enum { N = 60000 };
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(N));
    tg_tensor *r1 = tg_random_uniform_like(g, x, 2.0f, 5.0f);
    tg_tensor *r2 = tg_random_uniform_like(g, x, 2.0f, 5.0f);
    TG_CHECK_OK(tg_graph_status(g));
    float *a = malloc(4 * N * sizeof *a), *b = a + N, *c = b + N, *d = c + N;
    tg_pool *pool = tg_pool_create(2);
    draw(r1, 7, 3, 0, a, pool);
    double sum = 0, sq = 0, lo = 1e9, hi = -1e9;
    for (int k = 0; k < N; k++) {
        sum += a[k], sq += (a[k] - 3.5) * (a[k] - 3.5);
        lo = a[k] < lo ? a[k] : lo, hi = a[k] > hi ? a[k] : hi;
    }
    /* mean 3.5, variance 9/12; the sample mean's spread is 0.0035 */
    TG_CHECK(lo >= 2.0 && hi < 5.0 && lo < 2.001 && hi > 4.999);
    TG_CHECK_NEAR(sum / N, 3.5, 0.02);
    TG_CHECK_NEAR(sq / N, 0.75, 0.02);
    draw(r1, 7, 3, 0, b, pool); /* the same key: the same draws, on any thread count */
    TG_CHECK(memcmp(a, b, N * sizeof *a) == 0);
    int same_step = 0, same_stream = 0, same_node = 0;
    draw(r1, 7, 4, 0, b, pool);
    draw(r1, 7, 3, 1, c, pool);
    draw(r2, 7, 3, 0, d, pool);
    for (int k = 0; k < N; k++)
        same_step += a[k] == b[k], same_stream += a[k] == c[k], same_node += a[k] == d[k];
    /* 24-bit draws: a few coincide by chance */
    TG_CHECK(same_step < 20 && same_stream < 20 && same_node < 20);
    /* the reference draws micro-batch 0's values */
    double *ref = malloc(N * sizeof *ref);
    tg_ref_args r = {.node = r1, .out = ref, .seed = 7, .step = 3};
    tg_op_get(TG_OP_RANDOM_UNIFORM)->reference(&r);
    int off = 0;
    for (int k = 0; k < N; k++)
        off += !(fabs(ref[k] - a[k]) <= 4.8e-7);
    TG_CHECK(off == 0);
    free(ref);
    free(a);
    tg_pool_destroy(pool);
    /* bounds refused by name */
    TG_CHECK(tg_random_uniform_like(g, x, 1.0f, 0.0f) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "bounds [1, 0): give finite low <= high") != NULL);
    tg_graph_destroy(g);
}

/* Normal draws: mean and standard deviation, tails, the reference's values,
 * and bad parameters refused by name. */
static void test_normal(void)
{
    enum { N = 100000 };
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(N));
    tg_tensor *r = tg_random_normal_like(g, x, 1.5f, 0.5f);
    TG_CHECK_OK(tg_graph_status(g));
    float *a = malloc(N * sizeof *a);
    tg_pool *pool = tg_pool_create(2);
    draw(r, 11, 2, 0, a, pool);
    double sum = 0, sq = 0, beyond2 = 0, far = 0;
    for (int k = 0; k < N; k++) {
        double z = (a[k] - 1.5) / 0.5;
        sum += a[k], sq += z * z, beyond2 += fabs(z) > 2, far = fmax(far, fabs(z));
    }
    /* the sample mean's spread is 0.0016, the variance's 0.0045 */
    TG_CHECK_NEAR(sum / N, 1.5, 0.01);
    TG_CHECK_NEAR(sq / N, 1.0, 0.025);
    TG_CHECK_NEAR(beyond2 / N, 0.0455, 0.004); /* P(|z| > 2) */
    TG_CHECK(far > 3.5 && far <= 5.8);
    double *ref = malloc(N * sizeof *ref);
    tg_ref_args ra = {.node = r, .out = ref, .seed = 11, .step = 2};
    tg_op_get(TG_OP_RANDOM_UNIFORM)->reference(&ra);
    double worst = 0;
    for (int k = 0; k < N; k++)
        worst = fmax(worst, fabs(ref[k] - a[k]));
    TG_CHECK(worst < 2e-6);
    free(ref);
    free(a);
    tg_pool_destroy(pool);
    TG_CHECK(tg_random_normal_like(g, x, 0.0f, -1.0f) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "normal of mean 0 and scale -1: give finite ones") != NULL);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_normal);
    TG_RUN(test_kernels_and_gradient);
    TG_RUN(test_distribution_and_keys);
    return tg_test_finish();
}
