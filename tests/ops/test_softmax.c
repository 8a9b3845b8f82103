/* tests/ops/test_softmax.c - SOFTMAX, LOG_SOFTMAX and their _BWD ops:
 * gradients (first and second order), fast kernels against the reference on
 * every axis, exact values, stability with huge logits, build errors.
 * TG_TEST_LABELS: quick isa */
#include "backend/backend.h"
#include "tg_test.h"

#include "ops/op.h"
#include "ops/unary.h"
#include "runtime/interp.h"

#include <string.h>

typedef struct {
    bool log;
    tg_shape shape;
    int axis;
    bool second; /* differentiate the _BWD op (dy and x are parameters) */
} sm_case;

static tg_tensor *build_sm(tg_graph *g, void *ctx)
{
    const sm_case *c = ctx;
    tg_init u = {TG_INIT_UNIFORM, -2, 2};
    tg_tensor *x = tg_param(g, "x", c->shape, u);
    tg_tensor *y = c->log ? tg_log_softmax(g, x, c->axis) : tg_softmax(g, x, c->axis);
    if (!c->second)
        return y;
    /* y stays a true (log-)softmax as x moves, as it is in a real backward */
    tg_tensor *dy = tg_param(g, "dy", c->shape, u);
    tg_node_params p = {0};
    tg_softmax_set_axis(&p, c->axis);
    return tg_node_create(g, c->log ? TG_OP_LOG_SOFTMAX_BWD : TG_OP_SOFTMAX_BWD, 2,
                          (tg_tensor *[]){dy, y}, &p);
}

static void test_gradcheck(void)
{
    for (int log = 0; log <= 1; log++)
        for (int second = 0; second <= 1; second++)
            for (int axis = -1; axis < 3; axis++) {
                sm_case c = {log, tg_shape3(2, 3, 4), axis, second};
                char label[64];
                snprintf(label, sizeof label, "%s%s axis %d", log ? "log_softmax" : "softmax",
                         second ? " second order" : "", axis);
                tg_gradcheck(label, build_sm, &c, (tg_check_opts){0});
            }
}

static void test_kernels(void)
{
    for (int log = 0; log <= 1; log++)
        for (int second = 0; second <= 1; second++)
            for (int axis = 0; axis < 3; axis++)
                for (int threads = 1; threads <= 2; threads++) {
                    sm_case c = {log, tg_shape3(3, 5, 7), axis, second};
                    char label[64];
                    snprintf(label, sizeof label, "%s%s axis %d", log ? "log_softmax" : "softmax",
                             second ? " second order" : "", axis);
                    tg_check_kernels(label, build_sm, &c, threads, 1e-5, (tg_check_opts){0});
                    /* large: the pool path, classes on the last and a middle axis */
                    c.shape = tg_shape3(64, 10, 60);
                    tg_check_kernels(label, build_sm, &c, threads, 1e-3, (tg_check_opts){0});
                }
}

/* Hand-computed: softmax([1, 2, 3]) and the same shifted by 1000 (naive exp
 * would overflow); log_softmax([0, 0]) = log(1/2). */
static void test_values(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(3, 3));
    tg_tensor *s = tg_softmax(g, x, -1), *l = tg_log_softmax(g, x, 1);
    tg_tensor *s0 = tg_softmax(g, x, 0);
    TG_CHECK_OK(tg_graph_status(g));
    const float v[9] = {1, 2, 3, 1001, 1002, 1003, 0, 0, -1e30f};
    const double e = exp(1.0), z = 1 + e + e * e;
    const double want_s[3] = {1 / z, e / z, e * e / z};
    float out[9];
    for (int threads = 1; threads <= 2; threads++) {
        tg_pool *pool = tg_pool_create(threads);
        tg_kernel_args a = {.node = s, .in = {(void *)v}, .out = out, .pool = pool};
        tg_backend_cpu.kernel(s->op)->forward(&a);
        for (int r = 0; r < 2; r++)
            for (int k = 0; k < 3; k++)
                TG_CHECK_NEAR(out[r * 3 + k], want_s[k], 1e-7);
        TG_CHECK_NEAR(out[6], 0.5, 1e-7);
        TG_CHECK_NEAR(out[8], 0, 0);
        a.node = l;
        tg_backend_cpu.kernel(l->op)->forward(&a);
        for (int r = 0; r < 2; r++)
            for (int k = 0; k < 3; k++)
                TG_CHECK_NEAR(out[r * 3 + k], log(want_s[k]), 1e-6);
        TG_CHECK_NEAR(out[6], -log(2.0), 1e-7);
        a.node = s0; /* down the columns: column 0 is (1, 1001, 0) */
        tg_backend_cpu.kernel(s0->op)->forward(&a);
        TG_CHECK_NEAR(out[3], 1, 1e-7);
        TG_CHECK_NEAR(out[0], exp(-1000.0), 1e-30);
        tg_pool_destroy(pool);
    }
    TG_CHECK(tg_softmax_axis(s0) == 0 && tg_softmax_axis(s) == 1);
    tg_graph_destroy(g);
}

static void test_errors(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(2, 3));
    TG_CHECK(tg_softmax(g, x, 2) == NULL);
    TG_CHECK(tg_graph_status(g) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_graph_error(g), "softmax: axis 2 out of range for [2, 3]") != NULL);
    tg_graph_destroy(g);

    g = tg_graph_create();
    x = tg_input(g, "x", TG_I32, tg_shape2(2, 3));
    TG_CHECK(tg_log_softmax(g, x, -1) == NULL);
    TG_CHECK(tg_graph_status(g) == TG_ERR_DTYPE);
    TG_CHECK(strstr(tg_graph_error(g), "log_softmax: input 'x' is i32") != NULL);
    tg_graph_destroy(g);

    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape2(2, 3));
    tg_tensor *y = tg_input(g, "y", TG_F32, tg_shape2(3, 2));
    TG_CHECK(tg_node_create(g, TG_OP_SOFTMAX_BWD, 2, (tg_tensor *[]){x, y}, NULL) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "dy [2, 3] and y [3, 2] differ") != NULL);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_values);
    TG_RUN(test_errors);
    TG_RUN(test_gradcheck);
    TG_RUN(test_kernels);
    return tg_test_finish();
}
