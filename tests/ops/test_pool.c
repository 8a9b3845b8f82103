/* tests/ops/test_pool.c - max and average pooling: gradients, fast kernels
 * against the reference, hand-checked values, and bad shapes. */
#include "tg_test.h"

#include "runtime/interp.h"

#include <string.h>

typedef struct {
    int n, c, h, w, k, s, p;
    bool max, global;
} pool_case;

static tg_tensor *build(tg_graph *g, void *ctx)
{
    const pool_case *pc = ctx;
    tg_tensor *x = tg_param(g, "x", tg_shape4(pc->n, pc->c, pc->h, pc->w),
                            (tg_init){TG_INIT_UNIFORM, -1, 1});
    if (pc->global)
        return tg_global_avgpool(g, x);
    return pc->max ? tg_maxpool2d(g, x, pc->k, pc->s, pc->p) : tg_avgpool2d(g, x, pc->k, pc->s, pc->p);
}

static const pool_case cases[] = {
    {2, 3, 8, 8, 2, 2, 0, true, false},  {2, 3, 7, 9, 3, 2, 1, true, false},
    {2, 3, 7, 9, 2, 2, 0, true, false}, /* 2x2 windows leave the last row and column out */
    {1, 2, 6, 6, 3, 1, 1, true, false},  {2, 3, 8, 8, 2, 2, 0, false, false},
    {2, 2, 7, 5, 3, 2, 1, false, false}, {2, 4, 5, 7, 0, 0, 0, false, true},
    {40, 10, 24, 24, 2, 2, 0, true, false},
};

static void test_gradients(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] - 1; i++) {
        char label[64];
        snprintf(label, sizeof label, "pool case %zu", i);
        tg_gradcheck(label, build, (void *)&cases[i], (tg_check_opts){0});
    }
}

static void test_fast_matches_reference(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int threads = 1; threads <= 2; threads++) {
            char label[64];
            snprintf(label, sizeof label, "pool case %zu", i);
            tg_check_kernels(label, build, (void *)&cases[i], threads, 1e-5, (tg_check_opts){0});
        }
}

static void test_values(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(1, 1, 2, 4));
    tg_tensor *mx = tg_maxpool2d(g, x, 2, 2, 0), *av = tg_avgpool2d(g, x, 2, 2, 0);
    tg_tensor *gl = tg_global_avgpool(g, x);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(tg_shape_equal(tg_tensor_shape(mx), tg_shape4(1, 1, 1, 2)));
    TG_CHECK(tg_shape_equal(tg_tensor_shape(gl), tg_shape4(1, 1, 1, 1)));
    tg_interp *ip = NULL;
    TG_CHECK_OK(tg_interp_create(g, 0, &ip));
    const double v[8] = {1, 5, -2, 0, 3, 2, 7, 7};
    memcpy(tg_interp_data(ip, x), v, sizeof v);
    TG_CHECK_OK(tg_interp_run(ip, 0));
    TG_CHECK(tg_interp_data(ip, mx)[0] == 5 && tg_interp_data(ip, mx)[1] == 7);
    TG_CHECK_NEAR(tg_interp_data(ip, av)[0], 11.0 / 4, 1e-12);
    TG_CHECK_NEAR(tg_interp_data(ip, av)[1], 12.0 / 4, 1e-12);
    TG_CHECK_NEAR(tg_interp_data(ip, gl)[0], 23.0 / 8, 1e-12);
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
}

static void test_bad_shapes(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape3(1, 4, 4));
    TG_CHECK(tg_maxpool2d(g, x, 2, 2, 0) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "[N, C, H, W]") != NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape4(1, 1, 3, 3));
    TG_CHECK(tg_maxpool2d(g, x, 5, 1, 0) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "does not fit") != NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape4(1, 1, 8, 8));
    TG_CHECK(tg_avgpool2d(g, x, 2, 2, 2) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "more than half") != NULL);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_gradients);
    TG_RUN(test_fast_matches_reference);
    TG_RUN(test_values);
    TG_RUN(test_bad_shapes);
    return tg_test_finish();
}
