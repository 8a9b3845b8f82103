/* tests/compile/test_precision.c - the storage type of every value under
 * each precision INPUT.MODEL (32.32, 16.32, 16.16, bf16.*, 32.16): inputs
 * in the input type; weights, activations and gradients in the model type;
 * accumulators and moments in their own; scalars, integers, running
 * statistics as built; an alias as its root. The option readers: accumType
 * auto, loss scaling, which settings check gradients for overflow, and the
 * message for a precision that is not INPUT.MODEL.
 * TG_TEST_LABELS: isa */
#include "tg_test.h"

#include "compile/precision.h"
#include "core/alloc.h"
#include "tilegraph/optim.h"

#include <string.h>

typedef struct {
    tg_graph *g;
    tg_tensor *x, *x_flat, *labels, *w, *h, *stats, *loss;
    const tg_tensor *exp_avg, *exp_avg_sq;
} net;

/* x [4,2,3] flattened (an alias), linear, batch norm with running
 * statistics, cross entropy; AdamW, so each weight has two moments. */
static net build_net(void)
{
    net n;
    tg_graph *g = n.g = tg_graph_create();
    n.x = tg_input(g, "x", TG_F32, tg_shape3(4, 2, 3));
    n.labels = tg_input(g, "labels", TG_I32, tg_shape1(4));
    n.x_flat = tg_reshape(g, n.x, tg_shape2(4, 6));
    n.w = tg_param(g, "w", tg_shape2(5, 6), (tg_init){TG_INIT_FAN_IN_UNIFORM, 6, 0});
    tg_tensor *gamma = tg_param(g, "gamma", tg_shape1(5), (tg_init){TG_INIT_ONES, 0, 0});
    n.stats = tg_state(g, "running", tg_shape2(2, 5), (tg_init){TG_INIT_NORM_STATS, 0, 0});
    n.h = tg_linear(g, n.x_flat, n.w, NULL);
    tg_tensor *y = tg_batch_norm(g, n.h, gamma, NULL, n.stats, 1e-5f);
    n.loss = tg_cross_entropy(g, y, n.labels);
    tg_tensor_mark_output(n.loss);
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    TG_CHECK_OK(tg_graph_backward(g, n.loss));
    TG_CHECK_OK(tg_graph_add_optimizer(g, &opt));
    TG_CHECK_OK(tg_graph_status(g));
    n.exp_avg = n.exp_avg_sq = NULL;
    for (int i = 0; i < g->n_nodes; i++)
        if (tg_is_weight_update(g->nodes[i]) && g->nodes[i]->in[0] == n.w) {
            n.exp_avg = g->nodes[i]->in[1];
            n.exp_avg_sq = g->nodes[i]->in[2];
        }
    TG_CHECK(n.exp_avg && n.exp_avg_sq);
    return n;
}

static tg_precision read_with(const char *const *kv)
{
    tg_options *o = tg_options_create();
    tg_test_options_set(o, kv);
    tg_precision pr;
    memset(&pr, 0xff, sizeof pr);
    tg_config c;
    TG_CHECK_OK(tg_config_read(o, &c));
    TG_CHECK_OK(tg_precision_read(&c, &pr));
    tg_config_free(&c);
    tg_options_destroy(o);
    return pr;
}

static void test_read_each_precision(void)
{
    const struct {
        const char *text;
        tg_dtype input, model;
        bool checks;
    } cases[] = {
        {"32.32", TG_F32, TG_F32, false},      {"16.32", TG_F16, TG_F32, false},
        {"16.16", TG_F16, TG_F16, true},       {"bf16.32", TG_BF16, TG_F32, false},
        {"bf16.bf16", TG_BF16, TG_BF16, true}, {"32.16", TG_F32, TG_F16, true},
        {"32.bf16", TG_F32, TG_BF16, true},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tg_precision pr = read_with((const char *[]){"precision", cases[k].text, NULL});
        TG_CHECK(pr.input == cases[k].input && pr.model == cases[k].model);
        /* accumType auto follows the model; the moments stay f32 */
        TG_CHECK(pr.accum == cases[k].model);
        TG_CHECK(pr.first_moment == TG_F32 && pr.second_moment == TG_F32);
        TG_CHECK(pr.loss_scaling == TG_LOSS_SCALING_NONE && pr.loss_scale == 1.0f);
        /* stochastic rounding auto: on for bf16 weights only */
        TG_CHECK(pr.stochastic_rounding == (cases[k].model == TG_BF16));
        /* half inputs alone cannot overflow a gradient */
        if (tg_precision_checks_overflow(&pr) != cases[k].checks)
            tg_test_fail(__FILE__, __LINE__, "%s: checks overflow %d", cases[k].text,
                         !cases[k].checks);
    }
}

static void test_read_types_and_loss_scaling(void)
{
    tg_precision pr = read_with((const char *[]){
        "accumType", "f16", "firstOrderMomentumAccumType", "bf16", "secondOrderMomentumAccumType",
        "f16", "Precision.enableStochasticRounding", "true", NULL});
    TG_CHECK(pr.input == TG_F32 && pr.model == TG_F32 && pr.accum == TG_F16);
    TG_CHECK(pr.first_moment == TG_BF16 && pr.second_moment == TG_F16);
    TG_CHECK(pr.stochastic_rounding && tg_precision_checks_overflow(&pr));
    pr = read_with((const char *[]){"lossScaling", "static", "lossScalingFactor", "512", NULL});
    TG_CHECK(pr.loss_scaling == TG_LOSS_SCALING_STATIC && pr.loss_scale == 512.0f);
    TG_CHECK(tg_precision_checks_overflow(&pr)); /* a scaled loss can overflow in f32 too */
    pr = read_with((const char *[]){"lossScaling", "dynamic", "lossScalingFactor", "64",
                                    "lossScalingGrowthInterval", "100", NULL});
    TG_CHECK(pr.loss_scaling == TG_LOSS_SCALING_DYNAMIC && pr.loss_scale == 64.0f);
    TG_CHECK(pr.growth_interval == 100);
    /* auto rounds stochastically when the update writes bf16 state; an
     * explicit value wins either way */
    pr = read_with((const char *[]){"firstOrderMomentumAccumType", "bf16", NULL});
    TG_CHECK(pr.model == TG_F32 && pr.stochastic_rounding);
    pr = read_with((const char *[]){"secondOrderMomentumAccumType", "f16", NULL});
    TG_CHECK(!pr.stochastic_rounding);
    pr = read_with((const char *[]){"precision", "bf16.bf16", "Precision.enableStochasticRounding",
                                    "false", NULL});
    TG_CHECK(!pr.stochastic_rounding);
    pr = read_with(
        (const char *[]){"precision", "16.16", "Precision.enableStochasticRounding", "true", NULL});
    TG_CHECK(pr.stochastic_rounding);
    /* 1 and 0, as every boolean option takes them */
    pr = read_with(
        (const char *[]){"precision", "16.16", "Precision.enableStochasticRounding", "1", NULL});
    TG_CHECK(pr.stochastic_rounding);
    pr = read_with((const char *[]){"precision", "bf16.bf16", "Precision.enableStochasticRounding",
                                    "0", NULL});
    TG_CHECK(!pr.stochastic_rounding);
    /* without loss scaling the factor is not applied */
    pr = read_with((const char *[]){"lossScalingFactor", "512", NULL});
    TG_CHECK(pr.loss_scaling == TG_LOSS_SCALING_NONE && pr.loss_scale == 1.0f);
}

#define CHECK_LINE(got, want)                                                                      \
    do {                                                                                           \
        const char *got_ = (got);                                                                  \
        if (strcmp(got_, want))                                                                    \
            tg_test_fail(__FILE__, __LINE__, "\"%s\", want \"%s\"", got_, want);                   \
    } while (0)

/* the line the training summary prints (tg_session_precision) */
static void test_describe(void)
{
    char buf[160];
    tg_precision pr = read_with((const char *[]){NULL});
    CHECK_LINE(tg_precision_describe(&pr, buf, sizeof buf),
               "32.32 (accumulators f32, moments f32 f32), no loss scaling");
    pr = read_with((const char *[]){"precision", "bf16.bf16", NULL});
    CHECK_LINE(tg_precision_describe(&pr, buf, sizeof buf),
               "bf16.bf16 (accumulators bf16, moments f32 f32), half updates rounded "
               "stochastically, no loss scaling");
    pr = read_with((const char *[]){"precision", "16.32", "firstOrderMomentumAccumType", "f16",
                                    "lossScaling", "dynamic", NULL});
    CHECK_LINE(tg_precision_describe(&pr, buf, sizeof buf),
               "16.32 (accumulators f32, moments f16 f32), half updates rounded to nearest, "
               "dynamic loss scaling");
    /* truncated to the room given, still terminated */
    CHECK_LINE(tg_precision_describe(&pr, buf, 6), "16.32");
}

static void test_bad_precision_is_refused(void)
{
    const char *bad[] = {"16", "32.8", "fp16.fp16", "16.16.16", ""};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        tg_options *o = tg_options_create();
        tg_status s = tg_options_set(o, "precision", bad[k]);
        char want[64];
        snprintf(want, sizeof want, "option 'precision': '%s' is not one of", bad[k]);
        if (s != TG_ERR_CONFIG || !strstr(tg_error_message(), want) ||
            !strstr(tg_error_message(), "16.16"))
            tg_test_fail(__FILE__, __LINE__, "'%s': %s, \"%s\"", bad[k], tg_status_name(s),
                         tg_error_message());
        /* the option keeps its value; reading it still gives f32 */
        tg_precision pr;
        tg_config c;
        TG_CHECK_OK(tg_config_read(o, &c));
        TG_CHECK_OK(tg_precision_read(&c, &pr));
        TG_CHECK(pr.input == TG_F32 && pr.model == TG_F32);
        tg_config_free(&c);
        tg_options_destroy(o);
    }
}

/* storage[] under the precision options kv. */
static tg_dtype *assign(const net *n, const char *const *kv)
{
    tg_precision pr = read_with(kv);
    tg_dtype *storage = tg_calloc((size_t)n->g->n_nodes, sizeof *storage);
    tg_precision_assign(n->g, &pr, storage);
    return storage;
}

static void test_storage_per_value(void)
{
    net n = build_net();
    const struct {
        const char *text;
        tg_dtype input, model;
    } cases[] = {
        {"32.32", TG_F32, TG_F32},
        {"16.32", TG_F16, TG_F32},
        {"16.16", TG_F16, TG_F16},
        {"bf16.bf16", TG_BF16, TG_BF16},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tg_dtype *st = assign(&n, (const char *[]){"precision", cases[k].text, NULL});
        tg_dtype in = cases[k].input, model = cases[k].model;
        TG_CHECK(st[n.x->id] == in);
        TG_CHECK(st[n.x_flat->id] == in); /* an alias of the input is stored as the input */
        TG_CHECK(st[n.labels->id] == TG_I32);
        TG_CHECK(st[n.w->id] == model && st[n.h->id] == model);
        TG_CHECK(n.w->grad && st[n.w->grad->id] == model);
        TG_CHECK(st[n.stats->id] == TG_F32);   /* running statistics as built */
        TG_CHECK(st[n.loss->id] == TG_F32);    /* a scalar */
        TG_CHECK(st[n.exp_avg->id] == TG_F32); /* the moments' own types */
        TG_CHECK(st[n.exp_avg_sq->id] == TG_F32);
        tg_free(st);
    }
    tg_dtype *st =
        assign(&n, (const char *[]){"precision", "16.16", "firstOrderMomentumAccumType", "f16",
                                    "secondOrderMomentumAccumType", "bf16", NULL});
    TG_CHECK(st[n.exp_avg->id] == TG_F16 && st[n.exp_avg_sq->id] == TG_BF16);
    TG_CHECK(st[n.w->id] == TG_F16);
    tg_free(st);
    tg_graph_destroy(n.g);
}

int main(void)
{
    TG_RUN(test_read_each_precision);
    TG_RUN(test_read_types_and_loss_scaling);
    TG_RUN(test_describe);
    TG_RUN(test_bad_precision_is_refused);
    TG_RUN(test_storage_per_value);
    return tg_test_finish();
}
