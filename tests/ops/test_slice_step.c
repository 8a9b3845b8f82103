/* tests/ops/test_slice_step.c - tg_slice_ex: SLICE_STEP and SLICE_STEP_BWD
 * with positive and negative steps on every axis, ONNX's reading of start
 * and end (negative indices, clamping), gradients (first and second order)
 * against finite differences, fast kernels against the reference, values
 * checked against Python's slicing, and bad arguments. */
#include "backend/backend.h"
#include "tg_test.h"

#include "ops/op.h"
#include "ops/shape.h"
#include "runtime/interp.h"

#include <string.h>

typedef struct {
    tg_shape shape;
    int axis;
    int64_t start, end, step;
    bool second; /* differentiate SLICE_STEP_BWD (dy a parameter) */
} step_case;

static tg_tensor *build_step(tg_graph *g, void *ctx)
{
    const step_case *c = ctx;
    tg_init u = {TG_INIT_UNIFORM, -1, 1};
    tg_tensor *x = c->second ? tg_input(g, "x", TG_F32, c->shape) : tg_param(g, "x", c->shape, u);
    tg_tensor *y = tg_slice_ex(g, x, c->axis, c->start, c->end, c->step);
    if (!c->second || !y)
        return y;
    tg_tensor *dy = tg_param(g, "dy", y->shape, u);
    tg_node_params p = y->p;
    tg_slice_step_set_len(&p, c->shape.dim[tg_slice_step_axis(y)]);
    return tg_node_create(g, TG_OP_SLICE_STEP_BWD, 1, &dy, &p);
}

static const step_case cases[] = {
    {{3, {4, 7, 5}}, 1, 1, 7, 2, false},
    {{3, {4, 7, 5}}, 1, -1, INT64_MIN, -1, false}, /* reverse: x[:, ::-1] */
    {{3, {4, 7, 5}}, -1, 4, 0, -3, false},
    {{3, {4, 7, 5}}, 0, 0, 100, 3, false},
    {{2, {9, 3}}, 0, -2, -9, -2, false},
    {{1, {10}}, 0, 1, INT64_MAX, 4, false},
    {{4, {8, 16, 20, 20}}, 2, 19, -100, -2, false}, /* pool path */
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

static void test_gradients_and_kernels(void)
{
    for (int i = 0; i < N_CASES; i++)
        for (int second = 0; second <= 1; second++) {
            step_case c = cases[i];
            c.second = second;
            char label[64];
            snprintf(label, sizeof label, "slice_ex case %d%s", i, second ? " second order" : "");
            tg_gradcheck(label, build_step, &c, (tg_check_opts){0});
            for (int threads = 1; threads <= 2; threads++)
                tg_check_kernels(label, build_step, &c, threads, 1e-6, (tg_check_opts){0});
        }
}

/* x = 0..9; the rows Python's list(range(10))[start:end:step] gives (ONNX
 * reads start and end the same way). */
static void test_values(void)
{
    static const struct {
        int64_t start, end, step;
        int n;
        double want[10];
    } v[] = {
        {1, 8, 3, 3, {1, 4, 7}},           {-1, INT64_MIN, -1, 10, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}},
        {8, 2, -2, 3, {8, 6, 4}},          {-3, -100, -4, 2, {7, 3}},
        {100, 5, -3, 2, {9, 6}},           {2, 5, 1, 3, {2, 3, 4}}, /* step 1: a plain slice */
        {3, INT64_MAX, INT64_MAX, 1, {3}}, {-2, INT64_MIN, INT64_MIN, 1, {8}},
    };
    for (size_t c = 0; c < sizeof v / sizeof v[0]; c++) {
        tg_graph *g = tg_graph_create();
        tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(10));
        tg_tensor *y = tg_slice_ex(g, x, 0, v[c].start, v[c].end, v[c].step);
        TG_CHECK_OK(tg_graph_status(g));
        if (!y) {
            tg_graph_destroy(g);
            continue;
        }
        TG_CHECK(y->op == (v[c].step == 1 ? TG_OP_SLICE : TG_OP_SLICE_STEP));
        TG_CHECK(tg_shape_equal(y->shape, tg_shape1(v[c].n)));
        tg_interp *ip = NULL;
        TG_CHECK_OK(tg_interp_create(g, 1, &ip));
        for (int k = 0; k < 10; k++)
            tg_interp_data(ip, x)[k] = k;
        TG_CHECK_OK(tg_interp_run(ip, 0));
        float xf[10], out[10];
        for (int k = 0; k < 10; k++)
            xf[k] = (float)k;
        tg_kernel_args a = {.node = y, .in = {xf}, .out = out};
        tg_backend_cpu.kernel(y->op)->forward(&a);
        for (int k = 0; k < v[c].n; k++) {
            TG_CHECK_NEAR(tg_interp_data(ip, y)[k], v[c].want[k], 0);
            TG_CHECK_NEAR(out[k], v[c].want[k], 0);
        }
        tg_interp_destroy(ip);
        tg_graph_destroy(g);
    }
}

static void test_bad_args(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(3, 4));
    TG_CHECK(tg_slice_ex(g, x, 1, 0, 4, 0) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "slice: step 0 along axis 1 of 'x'") != NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape2(3, 4));
    TG_CHECK(tg_slice_ex(g, x, 2, 0, 4, 1) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "slice: axis 2 out of range for 'x' with 2 dimensions"));
    tg_graph_destroy(g);
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape2(3, 4));
    TG_CHECK(tg_slice_ex(g, x, 1, 3, 1, 2) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "slice: [3:1:2] selects nothing from axis 1 (length 4)"));
    TG_CHECK(tg_slice_ex(g, NULL, 0, 0, 1, 2) == NULL);
    tg_graph_destroy(g);
    /* a hand-made node that reads past the axis is refused by the shape rule */
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape1(5));
    tg_node_params p = {.i = {0, 1, 2, 3}}; /* rows 1, 3, 5 */
    TG_CHECK(tg_node_create(g, TG_OP_SLICE_STEP, 1, &x, &p) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "3 rows from 1 by step 2 do not fit axis 0 of length 5"));
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_values);
    TG_RUN(test_bad_args);
    TG_RUN(test_gradients_and_kernels);
    return tg_test_finish();
}
