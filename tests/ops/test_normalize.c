/* tests/ops/test_normalize.c - 8-bit input normalised on the device: values,
 * fast against reference, bad statistics, and training that is
 * bit-identical to normalising on the host with a quarter of the bytes. */
#include "tg_test.h"

#include "core/rng.h"
#include "runtime/interp.h"
#include "runtime/session_internal.h"
#include "tilegraph/models.h"

#include <stdlib.h>
#include <string.h>

static tg_tensor *build(tg_graph *g, void *ctx)
{
    (void)ctx;
    const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, std[3] = {0.247f, 0.2435f, 0.2616f};
    tg_tensor *x = tg_input(g, "x", TG_U8, tg_shape4(2, 3, 5, 7));
    tg_tensor *w = tg_param(g, "w", tg_shape4(2, 3, 5, 7), (tg_init){TG_INIT_UNIFORM, -1, 1});
    return tg_mul(g, tg_normalize_u8(g, x, mean, std), w); /* a parameter, so the graph trains */
}

static void test_kernel_and_values(void)
{
    for (int threads = 1; threads <= 2; threads++)
        tg_check_kernels("normalize_u8", build, NULL, threads, 1e-6,
                         (tg_check_opts){.int_range = 256});
    tg_graph *g = tg_graph_create();
    const float mean[1] = {0.5f}, std[1] = {0.25f};
    tg_tensor *x = tg_input(g, "x", TG_U8, tg_shape4(1, 1, 1, 3));
    tg_tensor *y = tg_normalize_u8(g, x, mean, std);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(tg_tensor_dtype(y) == TG_F32);
    tg_interp *ip = NULL;
    TG_CHECK_OK(tg_interp_create(g, 0, &ip));
    double *xv = tg_interp_data(ip, x);
    xv[0] = 0, xv[1] = 255, xv[2] = 51;
    TG_CHECK_OK(tg_interp_run(ip, 0));
    TG_CHECK_NEAR(tg_interp_data(ip, y)[0], -2.0, 1e-12);
    TG_CHECK_NEAR(tg_interp_data(ip, y)[1], 2.0, 1e-12);
    TG_CHECK_NEAR(tg_interp_data(ip, y)[2], (0.2 - 0.5) / 0.25, 1e-12);
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
}

static void test_bad_inputs(void)
{
    tg_graph *g = tg_graph_create();
    const float mean[4] = {0}, std[4] = {1, 1, 0, 1};
    TG_CHECK(tg_normalize_u8(g, tg_input(g, "f", TG_F32, tg_shape4(1, 1, 2, 2)), mean, std) ==
             NULL);
    TG_CHECK(strstr(tg_graph_error(g), "u8") != NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    TG_CHECK(tg_normalize_u8(g, tg_input(g, "x", TG_U8, tg_shape4(1, 3, 2, 2)), mean, std) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "standard deviation") != NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    TG_CHECK(tg_normalize_u8(g, tg_input(g, "x", TG_U8, tg_shape4(1, 5, 2, 2)), mean, std) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "at most 4") != NULL);
    tg_graph_destroy(g);
}

/* Training on 8-bit input equals training on host-normalised input. */
static void test_training_is_bit_identical(void)
{
    enum { B = 8, PX = 784 };
    const tg_model_spec *m = tg_model_find("mnist-pipeline");
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    tg_model_input in32 = tg_model_default_input(m), in8 = in32;
    in8.eight_bit = true;
    tg_model_graph a, b;
    TG_CHECK_OK(tg_model_graph_create_ex(m, B, &opt, &in32, &a));
    TG_CHECK_OK(tg_model_graph_create_ex(m, B, &opt, &in8, &b));
    TG_CHECK(tg_tensor_dtype(b.images) == TG_U8);
    tg_session *sa = NULL, *sb = NULL;
    TG_CHECK_OK(tg_session_create(a.graph, NULL, &sa));
    TG_CHECK_OK(tg_session_create(b.graph, NULL, &sb));
    uint8_t px[B * PX];
    float img[B * PX];
    int32_t lab[B];
    tg_rng r;
    tg_rng_seed(&r, 2);
    for (int step = 0; sa && sb && step < 3; step++) {
        for (int i = 0; i < B * PX; i++) {
            px[i] = (uint8_t)tg_rng_below(&r, 256);
            img[i] = (float)(((double)px[i] / 255.0 - m->mean) / m->std); /* the loader's formula */
        }
        for (int i = 0; i < B; i++)
            lab[i] = (int32_t)tg_rng_below(&r, 10);
        TG_CHECK_OK(tg_session_write(sa, a.images, img, sizeof img));
        TG_CHECK_OK(tg_session_write(sb, b.images, px, sizeof px));
        TG_CHECK_OK(tg_session_write(sa, a.labels, lab, sizeof lab));
        TG_CHECK_OK(tg_session_write(sb, b.labels, lab, sizeof lab));
        TG_CHECK_OK(tg_session_run(sa));
        TG_CHECK_OK(tg_session_run(sb));
    }
    for (int i = 0; sa && sb && i < tg_graph_tensor_count(a.graph); i++) {
        const tg_tensor *t = tg_graph_tensor(a.graph, i);
        if (t->op == TG_OP_PARAM)
            TG_CHECK(memcmp(tg_session_data(sa, t),
                            tg_session_data(sb, tg_graph_find(b.graph, t->name)),
                            tg_nbytes(t)) == 0);
    }
    /* the host stream of images is a quarter of the bytes */
    TG_CHECK(tg_nbytes(b.images) * 4 == tg_nbytes(a.images));
    tg_session_destroy(sa);
    tg_session_destroy(sb);
    tg_model_graph_destroy(&a);
    tg_model_graph_destroy(&b);
}

int main(void)
{
    TG_RUN(test_kernel_and_values);
    TG_RUN(test_bad_inputs);
    TG_RUN(test_training_is_bit_identical);
    return tg_test_finish();
}
