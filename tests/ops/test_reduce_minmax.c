/* tests/ops/test_reduce_minmax.c - REDUCE_MAX, REDUCE_MIN and
 * REDUCE_MINMAX_BWD: gradients (first and second order) against finite
 * differences, fast kernels against the reference, PyTorch's values and
 * gradients with ties and NaN, and bad arguments. */
#include "backend/backend.h"
#include "tg_test.h"

#include "ops/op.h"
#include "runtime/interp.h"

#include <string.h>

typedef struct {
    tg_shape shape;
    unsigned mask;
    bool keepdim, min, second;
} red_case;

static tg_tensor *build(tg_graph *g, void *ctx)
{
    const red_case *c = ctx;
    tg_init u = {TG_INIT_UNIFORM, -1, 1};
    tg_tensor *x = c->second ? tg_input(g, "x", TG_F32, c->shape) : tg_param(g, "x", c->shape, u);
    tg_tensor *y = c->min ? tg_reduce_min(g, x, c->mask, c->keepdim)
                          : tg_reduce_max(g, x, c->mask, c->keepdim);
    if (!c->second || !y)
        return y;
    /* the backward op with dy a parameter: dy and y in the keep shape */
    tg_shape ks = c->shape;
    for (int d = 0; d < ks.ndim; d++)
        if (c->mask & (1u << d))
            ks.dim[d] = 1;
    tg_tensor *dy = tg_param(g, "dy", ks, u);
    tg_node_params p = {.i = {c->mask}};
    return tg_node_create(g, TG_OP_REDUCE_MINMAX_BWD, 3,
                          (tg_tensor *[]){dy, x, tg_reshape(g, y, ks)}, &p);
}

static const red_case cases[] = {
    {{3, {3, 4, 5}}, 2, false, false, false},      {{3, {3, 4, 5}}, 5, true, true, false},
    {{3, {3, 4, 5}}, 7, false, false, false},      {{2, {6, 1}}, 1, true, true, false},
    {{4, {4, 8, 9, 17}}, 12, false, false, false}, /* a global max pool */
};

static void test_gradients_and_kernels(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int second = 0; second <= 1; second++) {
            red_case c = cases[i];
            c.second = second;
            char label[64];
            snprintf(label, sizeof label, "reduce case %zu%s", i, second ? " second order" : "");
            tg_gradcheck(label, build, &c, (tg_check_opts){0});
            for (int threads = 1; threads <= 2; threads++)
                tg_check_kernels(label, build, &c, threads, 1e-6, (tg_check_opts){0});
        }
}

/* torch.amax(x, 1) and torch.amin(x, 0) of one 3x4 matrix with ties and a
 * NaN, and the gradient of sum(y * (1, 2, ...)), from PyTorch 1.13. */
static void test_torch_values(void)
{
    const double xv[12] = {1, 3, 3, -2, 0, NAN, 5, 5, -1, -1, -1, -4};
    const double want_max[3] = {3, NAN, -1}, want_min[4] = {-1, NAN, -1, -4};
    const double dmax[12] = {0, 0.5, 0.5, 0, NAN, NAN, NAN, NAN, 1, 1, 1, 0};
    const double dmin[12] = {0, NAN, 0, 0, 0, NAN, 0, 0, 1, NAN, 3, 4};
    for (int m = 0; m < 2; m++) {
        tg_graph *g = tg_graph_create();
        tg_tensor *x = tg_param(g, "x", tg_shape2(3, 4), (tg_init){TG_INIT_ZEROS, 0, 0});
        tg_tensor *y = m ? tg_reduce_min(g, x, 1, false) : tg_reduce_max(g, x, 2, false);
        tg_tensor *r = tg_input(g, "r", TG_F32, tg_tensor_shape(y));
        TG_CHECK_OK(tg_graph_backward(g, tg_reduce_sum(g, tg_mul(g, y, r), 1, false)));
        tg_interp *ip = NULL;
        TG_CHECK_OK(tg_interp_create(g, 1, &ip));
        memcpy(tg_interp_data(ip, x), xv, sizeof xv);
        int n = m ? 4 : 3;
        for (int k = 0; k < n; k++)
            tg_interp_data(ip, r)[k] = k + 1;
        TG_CHECK_OK(tg_interp_run(ip, 0));
        const double *want = m ? want_min : want_max, *dwant = m ? dmin : dmax;
        float xf[12], out[4];
        for (int k = 0; k < 12; k++)
            xf[k] = (float)xv[k];
        tg_kernel_args a = {.node = y, .in = {xf}, .out = out};
        tg_backend_cpu.kernel(y->op)->forward(&a);
        for (int k = 0; k < n; k++) {
            double got = tg_interp_data(ip, y)[k];
            TG_CHECK(isnan(want[k]) ? isnan(got) && isnan(out[k])
                                    : got == want[k] && out[k] == want[k]);
        }
        for (int k = 0; k < 12; k++) {
            double got = tg_interp_data(ip, tg_tensor_grad(x))[k];
            TG_CHECK(isnan(dwant[k]) ? isnan(got) : fabs(got - dwant[k]) < 1e-12);
        }
        tg_interp_destroy(ip);
        tg_graph_destroy(g);
    }
}

static void test_bad_args(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(3, 4));
    TG_CHECK(tg_reduce_max(g, x, 4, false) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "reduce_max: axes mask 0x4 must name at least one axis, "
                                       "and only axes of [3, 4]") != NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape2(3, 4));
    TG_CHECK(tg_reduce_min(g, x, 0, true) == NULL);
    TG_CHECK(tg_graph_status(g) == TG_ERR_INVALID_ARG);
    tg_tensor *l = tg_input(g, "labels", TG_I32, tg_shape1(3));
    TG_CHECK(tg_reduce_max(g, l, 1, false) == NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    l = tg_input(g, "labels", TG_I32, tg_shape1(3));
    TG_CHECK(tg_reduce_max(g, l, 1, false) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "input 'labels' is i32") != NULL);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_torch_values);
    TG_RUN(test_bad_args);
    TG_RUN(test_gradients_and_kernels);
    return tg_test_finish();
}
