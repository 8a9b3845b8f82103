/* tests/runtime/test_session_ops.c - the ops the ONNX importer needs (math
 * ops, leaky_relu, clip, pow, maximum/minimum, pad, asymmetric conv, general
 * pooling, strided slices) trained through the engine: a small CNN made of
 * all of them follows the reference interpreter step by step at 1 and 2
 * threads and on the mk2 target, and trains in half precision (16.16) as
 * in f32, through the staging.
 * TG_TEST_LABELS: threads */
#include "tg_test.h"

#include "runtime/interp.h"
#include "runtime/session_internal.h"
#include "tilegraph/optim.h"
#include "tilegraph/session.h"

#include <string.h>

enum { BATCH = 4, C = 2, H = 9, W = 10, CLASSES = 3 };

typedef struct {
    tg_tensor *x, *labels, *loss;
} net;

static tg_tensor *param(tg_graph *g, const char *name, tg_shape s, double fan_in)
{
    return tg_param(g, name, s, (tg_init){TG_INIT_FAN_IN_UNIFORM, fan_in, 0});
}

/* gelu(x) spelled the way the ONNX exporter writes it: x * 0.5 * (1 + erf(x / sqrt 2)) */
static tg_tensor *gelu_pattern(tg_graph *g, tg_tensor *x)
{
    tg_tensor *e = tg_erf(g, tg_scale(g, x, 0.70710678f, 0.0f));
    return tg_mul(g, x, tg_scale(g, e, 0.5f, 0.5f));
}

/* ONNX's decomposed layer norm over the last axis: (x - mean) / sqrt(var + eps). */
static tg_tensor *layer_norm_pattern(tg_graph *g, tg_tensor *x)
{
    unsigned last = 1u << (tg_tensor_shape(x).ndim - 1);
    tg_tensor *d = tg_sub(g, x, tg_reduce_mean(g, x, last, true));
    tg_tensor *var =
        tg_reduce_mean(g, tg_pow(g, d, tg_constant(g, tg_shape_of(0, NULL), 2.0f)), last, true);
    return tg_div(g, d, tg_sqrt(g, tg_scale(g, var, 1.0f, 1e-5f)));
}

static tg_graph *build(net *m, const tg_optimizer *opt)
{
    tg_graph *g = tg_graph_create();
    m->x = tg_input(g, "x", TG_F32, tg_shape4(BATCH, C, H, W));
    m->labels = tg_input(g, "labels", TG_I32, tg_shape1(BATCH));
    tg_tensor *w = param(g, "conv.weight", tg_shape4(4, C, 3, 3), C * 9);
    tg_tensor *h = tg_conv2d_ex(g, m->x, w, param(g, "conv.bias", tg_shape1(4), C * 9),
                                (tg_conv2d_params){2, 2, 0, 1, 1, 1, 1}, 1, 0); /* SAME_UPPER */
    h = tg_leaky_relu(g, h, 0.1f);
    h = tg_pad(g, h, (int64_t[]){0, 0, 1, 1, 0, 0, 1, 0}, TG_PAD_REFLECT, 0.0f);
    h = tg_maxpool2d_ex(g, h, (tg_pool2d_params){2, 2, 1, 2, 0, 0, 0, 1, 2, 1, true, true});
    h = tg_avgpool2d_ex(g, h, (tg_pool2d_params){2, 2, 1, 1, 1, 0, 0, 1, 1, 1, true, false});
    h = tg_clip(g, h, -1.0f, 6.0f);
    h = tg_slice_ex(g, h, 3, -1, INT64_MIN, -2); /* every other column, reversed */
    h = tg_flatten(g, h, 1);
    int64_t feat = tg_tensor_shape(h).dim[1];
    h = tg_linear(g, h, param(g, "fc1.weight", tg_shape2(8, feat), (double)feat),
                  param(g, "fc1.bias", tg_shape1(8), (double)feat));
    h = layer_norm_pattern(g, gelu_pattern(g, h));
    /* the remaining math ops, kept in their domains: exp, log(1 + |h|), 1 / (1 + h^2) */
    tg_tensor *one = tg_constant(g, tg_shape_of(0, NULL), 1.0f);
    tg_tensor *sq = tg_mul(g, h, h);
    h = tg_add(g, tg_log(g, tg_add(g, tg_abs(g, h), one)), tg_reciprocal(g, tg_add(g, sq, one)));
    h = tg_maximum(g, tg_minimum(g, h, tg_exp(g, tg_neg(g, h))), tg_scale(g, h, 0.5f, -0.2f));
    tg_tensor *logits = tg_linear(g, h, param(g, "fc2.weight", tg_shape2(CLASSES, 8), 8), NULL);
    m->loss = tg_cross_entropy(g, logits, m->labels);
    tg_tensor_mark_output(m->loss);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK_OK(tg_graph_backward(g, m->loss));
    TG_CHECK_OK(tg_graph_add_optimizer(g, opt));
    return g;
}

static void fill(float *x, int32_t *y, int step)
{
    for (int i = 0; i < BATCH * C * H * W; i++)
        x[i] = (float)((i * 37 + step * 11) % 23) / 7.0f - 1.5f;
    for (int i = 0; i < BATCH; i++)
        y[i] = (i + step) % CLASSES;
}

static void matches_interpreter(int threads, const char *target)
{
    net m;
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.9f);
    tg_graph *g = build(&m, &opt);
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", threads);
    tg_options_set_int(o, "randomSeed", 3);
    TG_CHECK_OK(tg_options_set(o, "target", target));
    tg_session *s = NULL;
    tg_interp *ip = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    TG_CHECK_OK(tg_interp_create(g, 3, &ip));
    static float x[BATCH * C * H * W];
    int32_t y[BATCH];
    for (int step = 0; s && ip && step < 4; step++) {
        fill(x, y, step);
        TG_CHECK_OK(tg_session_write(s, m.x, x, sizeof x));
        TG_CHECK_OK(tg_session_write(s, m.labels, y, sizeof y));
        for (int i = 0; i < BATCH * C * H * W; i++)
            tg_interp_data(ip, m.x)[i] = x[i];
        for (int i = 0; i < BATCH; i++)
            tg_interp_data(ip, m.labels)[i] = y[i];
        TG_CHECK_OK(tg_session_run(s));
        TG_CHECK_OK(tg_interp_run(ip, step));
        float loss = 0;
        TG_CHECK_OK(tg_session_read(s, m.loss, &loss, sizeof loss));
        TG_CHECK_NEAR(loss, tg_interp_data(ip, m.loss)[0], 1e-4);
    }
    TG_CHECK_PARAMS_MATCH(g, s, ip);
    tg_interp_destroy(ip);
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_graph_destroy(g);
}

static void test_engine_matches_reference(void)
{
    matches_interpreter(1, "cpu");
    matches_interpreter(2, "cpu");
    matches_interpreter(1, "mk2"); /* tile mapping and the cycle model see every new op */
}

/* Losses of 30 SGD steps on one fixed batch with the given precision. */
static void train_fixed_batch(const char *precision, float *losses)
{
    net m;
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.9f);
    tg_graph *g = build(&m, &opt);
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "precision", precision));
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    static float x[BATCH * C * H * W];
    int32_t y[BATCH];
    fill(x, y, 0);
    for (int step = 0; s && step < 30; step++) {
        TG_CHECK_OK(tg_session_write(s, m.x, x, sizeof x));
        TG_CHECK_OK(tg_session_write(s, m.labels, y, sizeof y));
        TG_CHECK_OK(tg_session_run(s));
        TG_CHECK_OK(tg_session_read(s, m.loss, &losses[step], sizeof *losses));
    }
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_graph_destroy(g);
}

/* Half-precision storage: every new op runs through the f32 staging and
 * training follows the f32 run to half precision's accuracy. */
static void test_half_precision_trains(void)
{
    float full[30] = {0}, half[30] = {0};
    train_fixed_batch("32.32", full);
    train_fixed_batch("16.16", half);
    printf("    loss f32 %.4f -> %.4f, f16 %.4f -> %.4f\n", full[0], full[29], half[0], half[29]);
    TG_CHECK(full[29] < 0.95f * full[0]);
    for (int k = 0; k < 30; k++)
        TG_CHECK_NEAR(half[k], full[k], 2e-2 * fabs(full[k]));
}

int main(void)
{
    TG_RUN(test_engine_matches_reference);
    TG_RUN(test_half_precision_trains);
    return tg_test_finish();
}
