/* tests/ops/test_pad.c - PAD and PAD_BWD: constant, reflect and edge
 * padding, negative pads (crop), gradients (first and second order) against
 * finite differences, fast kernels against the reference, values and
 * gradients from PyTorch, and bad arguments. */
#include "backend/backend.h"
#include "tg_test.h"

#include "ops/op.h"
#include "runtime/interp.h"

#include <string.h>

typedef struct {
    tg_shape shape;
    tg_pad_mode mode;
    int64_t pads[2 * TG_MAX_DIMS];
    bool second; /* differentiate PAD_BWD: pad's gradient, built from a parameter dy */
} pad_case;

static tg_tensor *build_pad(tg_graph *g, void *ctx)
{
    const pad_case *c = ctx;
    /* second order: x only gives pad_bwd its params, so it is an input */
    tg_tensor *x = c->second ? tg_input(g, "x", TG_F32, c->shape)
                             : tg_param(g, "x", c->shape, (tg_init){TG_INIT_UNIFORM, -1, 1});
    tg_tensor *y = tg_pad(g, x, c->pads, c->mode, 0.25f);
    if (!c->second || !y)
        return y;
    /* pad_bwd(dy) with dy a parameter of the padded shape */
    tg_tensor *dy = tg_param(g, "dy", y->shape, (tg_init){TG_INIT_UNIFORM, -1, 1});
    return tg_node_create(g, TG_OP_PAD_BWD, 1, &dy, &y->p);
}

static const pad_case cases[] = {
    {{4, {2, 3, 5, 4}}, TG_PAD_CONSTANT, {0, 0, 1, 2, 0, 0, 2, 1}, false},
    {{4, {2, 3, 5, 4}}, TG_PAD_CONSTANT, {0, 1, -1, 2, 1, -1, 2, -2}, false}, /* crop and pad */
    {{4, {2, 3, 5, 4}}, TG_PAD_REFLECT, {0, 0, 2, 3, 0, 0, 4, 1}, false},
    {{4, {2, 3, 5, 4}}, TG_PAD_REFLECT, {1, 0, 1, -1, 0, 2, 2, 3}, false}, /* every axis */
    {{4, {2, 3, 5, 4}}, TG_PAD_EDGE, {0, 0, 3, 1, 0, 0, 0, 5}, false},
    {{3, {3, 1, 4}}, TG_PAD_EDGE, {2, 1, -1, 0, 2, 2}, false},
    {{1, {6}}, TG_PAD_REFLECT, {5, 2}, false},
    {{2, {3, 4}}, TG_PAD_CONSTANT, {0, 0, 0, 0}, false},
    {{2, {3, 1}}, TG_PAD_CONSTANT, {0, 4, 0, -2}, false}, /* the only column is cropped */
    {{2, {3, 2}}, TG_PAD_REFLECT, {0, -2, 0, 1}, false},  /* crop past the input, reflect */
    {{4, {8, 16, 20, 20}}, TG_PAD_REFLECT, {0, 0, 3, 3, 0, 0, 3, 3}, false}, /* pool path */
    {{4, {8, 16, 20, 20}}, TG_PAD_EDGE, {1, 0, 1, 1, 0, 0, 1, 1}, false},    /* one bwd unit */
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

static void test_gradients_and_kernels(void)
{
    for (int i = 0; i < N_CASES; i++)
        for (int second = 0; second <= 1; second++) {
            pad_case c = cases[i];
            c.second = second;
            char label[64];
            snprintf(label, sizeof label, "pad case %d%s", i, second ? " second order" : "");
            tg_gradcheck(label, build_pad, &c, (tg_check_opts){.max_elems = 64});
            for (int threads = 1; threads <= 2; threads++)
                tg_check_kernels(label, build_pad, &c, threads, 1e-5, (tg_check_opts){0});
        }
}

/* x [1, 3, 4] = 1.5 k - 4; F.pad(x, ...) and the gradient of sum(y * (1, 2,
 * ...)) from PyTorch 1.13 (float64): reflect (2, 3), replicate (3, 1),
 * constant (1, -2) with value 0.5. */
static void test_torch_values(void)
{
    static const struct {
        tg_pad_mode mode;
        int64_t pads[6];
        int w;
        double y[27], dx[12];
    } want[] = {
        {TG_PAD_REFLECT,
         {0, 0, 2, 0, 0, 3},
         9,
         {-1.0, -2.5, -4.0, -2.5, -1.0, 0.5, -1.0, -2.5, -4.0, 5.0,  3.5,  2.0, 3.5, 5.0,
          6.5,  5.0,  3.5,  2.0,  11.0, 9.5, 8.0,  9.5,  11.0, 12.5, 11.0, 9.5, 8.0},
         {12, 14, 13, 6, 30, 41, 40, 15, 48, 68, 67, 24}},
        {TG_PAD_EDGE,
         {0, 0, 3, 0, 0, 1},
         8,
         {-4.0, -4.0, -4.0, -4.0, -2.5, -1.0, 0.5, 0.5, 2.0, 2.0,  2.0,  2.0,
          3.5,  5.0,  6.5,  6.5,  8.0,  8.0,  8.0, 8.0, 9.5, 11.0, 12.5, 12.5},
         {10, 5, 6, 15, 42, 13, 14, 31, 74, 21, 22, 47}},
        {TG_PAD_CONSTANT,
         {0, 0, 1, 0, 0, -2},
         3,
         {0.5, -4.0, -2.5, 0.5, 2.0, 3.5, 0.5, 8.0, 9.5},
         {2, 3, 0, 0, 5, 6, 0, 0, 8, 9, 0, 0}},
    };
    for (int c = 0; c < 3; c++) {
        tg_graph *g = tg_graph_create();
        tg_tensor *x = tg_param(g, "x", tg_shape3(1, 3, 4), (tg_init){TG_INIT_ZEROS, 0, 0});
        tg_tensor *y = tg_pad(g, x, want[c].pads, want[c].mode, 0.5f);
        TG_CHECK_OK(tg_graph_status(g));
        if (!y) {
            tg_graph_destroy(g);
            continue;
        }
        TG_CHECK(tg_shape_equal(y->shape, tg_shape3(1, 3, want[c].w)));
        tg_tensor *r = tg_input(g, "r", TG_F32, y->shape);
        TG_CHECK_OK(tg_graph_backward(g, tg_reduce_sum(g, tg_mul(g, y, r), 7, false)));
        tg_interp *ip = NULL;
        TG_CHECK_OK(tg_interp_create(g, 1, &ip));
        for (int k = 0; k < 12; k++)
            tg_interp_data(ip, x)[k] = 1.5 * k - 4;
        int n = 3 * want[c].w;
        for (int k = 0; k < n; k++)
            tg_interp_data(ip, r)[k] = k + 1;
        TG_CHECK_OK(tg_interp_run(ip, 0));
        for (int k = 0; k < n; k++)
            TG_CHECK_NEAR(tg_interp_data(ip, y)[k], want[c].y[k], 1e-12);
        for (int k = 0; k < 12; k++)
            TG_CHECK_NEAR(tg_interp_data(ip, tg_tensor_grad(x))[k], want[c].dx[k], 1e-12);
        /* the fast kernel gives the same values (exact: it only copies) */
        float xf[12], out[27];
        for (int k = 0; k < 12; k++)
            xf[k] = (float)(1.5 * k - 4);
        tg_kernel_args a = {.node = y, .in = {xf}, .out = out};
        tg_backend_cpu.kernel(TG_OP_PAD)->forward(&a);
        for (int k = 0; k < n; k++)
            TG_CHECK_NEAR(out[k], want[c].y[k], 0);
        tg_interp_destroy(ip);
        tg_graph_destroy(g);
    }
}

static const char *pad_error(tg_shape s, const int64_t *pads, tg_pad_mode mode)
{
    static char msg[512];
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, s);
    tg_tensor *y = tg_pad(g, x, pads, mode, 0);
    snprintf(msg, sizeof msg, "%s", y ? "(built)" : tg_graph_error(g));
    tg_graph_destroy(g);
    return msg;
}

static void test_bad_args(void)
{
    tg_shape s = tg_shape2(3, 4);
    TG_CHECK(strstr(pad_error(s, (int64_t[]){0, 4, 0, 0}, TG_PAD_REFLECT),
                    "pad: reflect padding 4 before and 0 after axis 1 of length 4") != NULL);
    TG_CHECK(strstr(pad_error(s, (int64_t[]){0, -3, 0, -1}, TG_PAD_CONSTANT),
                    "padding -3 before and -1 after axis 1 of length 4 leaves nothing") != NULL);
    TG_CHECK(strstr(pad_error(s, (int64_t[]){0, 0, 0, 0}, (tg_pad_mode)7),
                    "mode 7 is not TG_PAD_CONSTANT") != NULL);
    TG_CHECK(strstr(pad_error(s, NULL, TG_PAD_EDGE), "pad: no pads given for 'x'") != NULL);
    TG_CHECK(strcmp(pad_error(s, (int64_t[]){0, 3, 0, 3}, TG_PAD_REFLECT), "(built)") == 0);
    tg_graph *g = tg_graph_create();
    tg_tensor *l = tg_input(g, "labels", TG_I32, tg_shape1(4));
    TG_CHECK(tg_pad(g, l, (int64_t[]){1, 1}, TG_PAD_CONSTANT, 0) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "input 'labels' is i32") != NULL);
    TG_CHECK(tg_pad(g, NULL, (int64_t[]){1, 1}, TG_PAD_CONSTANT, 0) == NULL);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_torch_values);
    TG_RUN(test_bad_args);
    TG_RUN(test_gradients_and_kernels);
    return tg_test_finish();
}
