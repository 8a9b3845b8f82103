/* tests/graph/test_optim.c - optimizer settings, learning-rate schedules,
 * validation messages and the nodes tg_graph_add_optimizer builds.
 *
 * Gradients are plain input nodes assigned to param->grad, as
 * tg_graph_backward would leave them, so these tests need no autodiff.
 */
#include "tg_test.h"

#include "core/error.h"
#include "ops/op.h"
#include "graph/optim_params.h"
#include "tilegraph/optim.h"

#include <string.h>

/* ---- settings ------------------------------------------------------------------------- */

static void test_defaults(void)
{
    tg_optimizer s = tg_optimizer_sgd(0.1f, 0.9f);
    TG_CHECK(s.kind == TG_OPT_SGD && s.lr.kind == TG_LR_CONSTANT && s.lr.lr == 0.1f);
    TG_CHECK(s.momentum == 0.9f && s.dampening == 0 && !s.nesterov && s.weight_decay == 0);
    tg_optimizer a = tg_optimizer_adam(1e-3f);
    TG_CHECK(a.kind == TG_OPT_ADAM && a.lr.lr == 1e-3f && a.weight_decay == 0);
    TG_CHECK(a.beta1 == 0.9f && a.beta2 == 0.999f && a.eps == 1e-8f);
    tg_optimizer w = tg_optimizer_adamw(1e-3f);
    TG_CHECK(w.kind == TG_OPT_ADAMW && w.weight_decay == 0.01f);
    TG_CHECK(w.beta1 == 0.9f && w.beta2 == 0.999f && w.eps == 1e-8f);
    tg_optimizer l = tg_optimizer_lamb(1e-3f);
    TG_CHECK(l.kind == TG_OPT_LAMB && l.weight_decay == 0.01f && l.eps == 1e-8f);
    TG_CHECK(l.beta1 == 0.9f && l.beta2 == 0.999f && l.max_weight_norm == 0);
    /* PyTorch's default: bias correction on, no clipping */
    TG_CHECK(a.bias_correction && w.bias_correction && l.bias_correction);
    TG_CHECK(s.max_grad_norm == 0 && a.max_grad_norm == 0 && l.max_grad_norm == 0);
    TG_CHECK_OK(tg_optimizer_validate(&s));
    TG_CHECK_OK(tg_optimizer_validate(&a));
    TG_CHECK_OK(tg_optimizer_validate(&w));
    TG_CHECK_OK(tg_optimizer_validate(&l));
}

static void test_parse_and_name(void)
{
    tg_optimizer_kind kind = TG_OPT_SGD;
    TG_CHECK(tg_optimizer_parse("adam", &kind) == TG_OK && kind == TG_OPT_ADAM);
    TG_CHECK(tg_optimizer_parse("AdamW", &kind) == TG_OK && kind == TG_OPT_ADAMW);
    TG_CHECK(tg_optimizer_parse("LAMB", &kind) == TG_OK && kind == TG_OPT_LAMB);
    TG_CHECK(tg_optimizer_parse("sgd", &kind) == TG_OK && kind == TG_OPT_SGD);
    /* refused by name, *out unchanged */
    TG_CHECK(tg_optimizer_parse("adamw2", &kind) == TG_ERR_INVALID_ARG && kind == TG_OPT_SGD);
    TG_CHECK(strstr(tg_error_message(), "optimizer 'adamw2': expected sgd, adam, adamw or lamb"));
    TG_CHECK(tg_optimizer_parse("ada", &kind) == TG_ERR_INVALID_ARG);
    TG_CHECK(tg_optimizer_parse("", &kind) == TG_ERR_INVALID_ARG);
    TG_CHECK(tg_optimizer_parse(NULL, &kind) == TG_ERR_INVALID_ARG && kind == TG_OPT_SGD);
    for (int k = TG_OPT_SGD; k <= TG_OPT_LAMB; k++)
        TG_CHECK(tg_optimizer_parse(tg_optimizer_name((tg_optimizer_kind)k), &kind) == TG_OK &&
                 kind == (tg_optimizer_kind)k);
    TG_CHECK(strcmp(tg_optimizer_name((tg_optimizer_kind)7), "?") == 0);
}

/* ---- learning-rate schedules ------------------------------------------------------------ */

static void test_lr_constant(void)
{
    tg_lr_schedule s = tg_optimizer_sgd(0.25f, 0).lr;
    TG_CHECK(tg_lr_at(&s, 0) == 0.25f && tg_lr_at(&s, 1000000) == 0.25f);
}

/* Reference values: torch.optim.lr_scheduler in float64 (PyTorch 1.13,
 * /usr/bin/python3), the lr of param group 0 before update k, for k = 0..10,
 * with hyper-parameters rounded to float32:
 *   StepLR(SGD(lr=0.5), step_size=3, gamma=0.1)
 *   CosineAnnealingLR(SGD(lr=0.1), T_max=10, eta_min=0.01) */
static void test_lr_step(void)
{
    static const double torch_lr[11] = {0.5,
                                        0.5,
                                        0.5,
                                        0.05000000074505806,
                                        0.05000000074505806,
                                        0.05000000074505806,
                                        0.005000000149011613,
                                        0.005000000149011613,
                                        0.005000000149011613,
                                        0.0005000000223517421,
                                        0.0005000000223517421};
    tg_lr_schedule s = {.kind = TG_LR_STEP, .lr = 0.5f, .step_size = 3, .gamma = 0.1f};
    for (int k = 0; k < 11; k++)
        TG_CHECK_NEAR(tg_lr_at(&s, k), torch_lr[k], 1e-7 * torch_lr[k]);
    TG_CHECK(tg_lr_at(&s, -5) == 0.5f); /* no step before the first */
}

static void test_lr_cosine(void)
{
    static const double torch_lr[11] = {
        0.10000000149011612,  0.097797544681462442, 0.091405766073351311, 0.081450337490084901,
        0.068905765644942926, 0.055000000633299351, 0.041094235621655775, 0.028549663776513804,
        0.018594235193247394, 0.012202456585136271, 0.0099999997764825821};
    tg_lr_schedule s = {.kind = TG_LR_COSINE, .lr = 0.1f, .total_steps = 10, .min_lr = 0.01f};
    for (int k = 0; k < 11; k++)
        TG_CHECK_NEAR(tg_lr_at(&s, k), torch_lr[k], 1e-7 * torch_lr[k]);
    /* After total_steps the rate stays at min_lr (PyTorch's would rise again). */
    TG_CHECK(tg_lr_at(&s, 11) == 0.01f && tg_lr_at(&s, 1000) == 0.01f);
    /* Halfway is the mean of lr and min_lr, by hand. */
    TG_CHECK_NEAR(tg_lr_at(&s, 5), (0.1 + 0.01) / 2, 1e-8);
}

/* ---- validation ---------------------------------------------------------------------------- */

static void expect_invalid(tg_optimizer o, const char *needle)
{
    tg_status s = tg_optimizer_validate(&o);
    if (s == TG_OK) {
        tg_test_fail(__FILE__, __LINE__, "settings with bad '%s' accepted", needle);
        return;
    }
    if (!strstr(tg_error_message(), needle))
        tg_test_fail(__FILE__, __LINE__, "message '%s' does not name '%s'", tg_error_message(),
                     needle);
}

static void test_validate(void)
{
    tg_optimizer o = tg_optimizer_sgd(0.1f, 0);
    o.max_grad_norm = -1;
    expect_invalid(o, "max_grad_norm = -1");
    o.max_grad_norm = NAN;
    expect_invalid(o, "max_grad_norm = nan");
    o.max_grad_norm = INFINITY; /* inf: off, as in PyTorch */
    TG_CHECK_OK(tg_optimizer_validate(&o));
    o = tg_optimizer_adamw(0.1f);
    o.max_weight_norm = 2;
    expect_invalid(o, "applies to lamb only");
    o = tg_optimizer_lamb(0.1f);
    o.max_weight_norm = -2;
    expect_invalid(o, "max_weight_norm = -2");
    o.max_weight_norm = 2;
    o.bias_correction = false;
    TG_CHECK_OK(tg_optimizer_validate(&o));
    o = tg_optimizer_sgd(-0.1f, 0);
    expect_invalid(o, "lr = -0.1");
    o = tg_optimizer_sgd(NAN, 0);
    expect_invalid(o, "lr = nan");
    o = tg_optimizer_sgd(0.1f, 1.0f);
    expect_invalid(o, "momentum = 1");
    o = tg_optimizer_sgd(0.1f, -0.5f);
    expect_invalid(o, "momentum = -0.5");
    o = tg_optimizer_sgd(0.1f, 0.5f);
    o.dampening = 2;
    expect_invalid(o, "dampening = 2");
    o = tg_optimizer_sgd(0.1f, 0);
    o.nesterov = true;
    expect_invalid(o, "nesterov needs momentum > 0");
    o = tg_optimizer_sgd(0.1f, 0.9f);
    o.nesterov = true;
    o.dampening = 0.1f;
    expect_invalid(o, "dampening = 0 (momentum = 0.9, dampening = 0.1)");
    o = tg_optimizer_sgd(0.1f, 0.9f);
    o.weight_decay = -1e-4f;
    expect_invalid(o, "weight_decay = -0.0001");
    o = tg_optimizer_adam(1e-3f);
    o.beta1 = 1.0f;
    expect_invalid(o, "optimizer adam: beta1 = 1 is outside [0, 1)");
    o = tg_optimizer_adamw(1e-3f);
    o.beta2 = -0.1f;
    expect_invalid(o, "optimizer adamw: beta2 = -0.1");
    o = tg_optimizer_adam(1e-3f);
    o.eps = -1e-8f;
    expect_invalid(o, "eps = -1e-08");
    o = tg_optimizer_adam(1e-3f);
    o.lr.kind = TG_LR_STEP;
    o.lr.step_size = 0;
    expect_invalid(o, "step lr schedule: step_size = 0 must be at least 1");
    o.lr.step_size = 10;
    o.lr.gamma = -0.5f;
    expect_invalid(o, "gamma = -0.5");
    o = tg_optimizer_adam(1e-3f);
    o.lr.kind = TG_LR_COSINE;
    o.lr.total_steps = 0;
    expect_invalid(o, "cosine lr schedule: total_steps = 0");
    o.lr.total_steps = 100;
    o.lr.min_lr = -1;
    expect_invalid(o, "min_lr = -1");
    o.lr.kind = (tg_lr_kind)9;
    expect_invalid(o, "unknown lr schedule kind 9");
    o = tg_optimizer_adam(1e-3f);
    o.kind = (tg_optimizer_kind)5;
    expect_invalid(o, "unknown kind 5");
    TG_CHECK(tg_optimizer_validate(NULL) != TG_OK);

    /* settings that are valid at the edges */
    o = tg_optimizer_sgd(0, 0);
    o.dampening = 1;
    TG_CHECK_OK(tg_optimizer_validate(&o));
    o = tg_optimizer_adam(0.1f);
    o.beta1 = 0;
    o.eps = 0;
    TG_CHECK_OK(tg_optimizer_validate(&o));
}

/* ---- building -------------------------------------------------------------------------------- */

typedef struct small_graph {
    tg_graph *g;
    tg_tensor *w, *b, *frozen, *gw, *gb;
} small_graph;

/* Parameters "net/fc/weight" (gradient in block "stage1") and "net/fc/bias"
 * (gradient in no block), and "frozen" without a gradient. */
static small_graph make_graph(void)
{
    small_graph s = {.g = tg_graph_create()};
    tg_graph *g = s.g;
    tg_scope_push(g, "net");
    tg_scope_push(g, "fc");
    s.w = tg_param(g, "weight", tg_shape2(3, 4), (tg_init){TG_INIT_UNIFORM, -1, 1});
    s.b = tg_param(g, "bias", tg_shape1(3), (tg_init){TG_INIT_ZEROS, 0, 0});
    tg_scope_pop(g);
    tg_scope_pop(g);
    s.frozen = tg_param(g, "frozen", tg_shape1(2), (tg_init){TG_INIT_ZEROS, 0, 0});
    tg_block_begin(g, "stage0");
    tg_block_begin(g, "stage1");
    s.gw = tg_input(g, "weight_grad", TG_F32, tg_shape2(3, 4));
    tg_block_end(g);
    s.gb = tg_input(g, "bias_grad", TG_F32, tg_shape1(3));
    s.gw->role = s.gb->role = TG_ROLE_GRADIENT;
    s.w->grad = s.gw;
    s.b->grad = s.gb;
    return s;
}

static void check_state(tg_graph *g, const char *name, const tg_tensor *param, int block)
{
    tg_tensor *t = tg_graph_find(g, name);
    TG_CHECK(t != NULL);
    if (!t)
        return;
    TG_CHECK(t->op == TG_OP_STATE && t->role == TG_ROLE_STATE && t->dtype == TG_F32);
    TG_CHECK(tg_shape_equal(t->shape, param->shape));
    TG_CHECK(t->init.kind == TG_INIT_ZEROS);
    TG_CHECK(t->block == block);
}

static tg_tensor *check_update(tg_graph *g, const char *name, tg_op op, const tg_tensor *param,
                               int n_in, int block)
{
    tg_tensor *u = tg_graph_find(g, name);
    TG_CHECK(u != NULL);
    if (!u)
        return NULL;
    TG_CHECK(u->op == op && u->role == TG_ROLE_UPDATE && (u->flags & TG_NODE_OPTIMIZER));
    TG_CHECK(u->n_in == n_in && u->n_mutated == n_in - 1);
    TG_CHECK(u->in[0] == param && u->in[n_in - 1] == param->grad);
    TG_CHECK(tg_numel(u) == 0);
    TG_CHECK(u->block == block);
    return u;
}

static void test_add_sgd_momentum(void)
{
    small_graph s = make_graph();
    tg_graph *g = s.g;
    int stage1 = s.gw->block;
    TG_CHECK(stage1 >= 0 && s.gb->block == -1);
    /* a scope and block open at the call must not leak into the names or placement */
    tg_block_begin(g, "stage0");
    tg_scope_push(g, "user_scope");
    tg_optimizer o = tg_optimizer_sgd(0.05f, 0.9f);
    o.weight_decay = 1e-4f;
    o.nesterov = true;
    o.lr.kind = TG_LR_COSINE;
    o.lr.total_steps = 500;
    o.lr.min_lr = 1e-3f;
    int before = tg_graph_tensor_count(g);
    TG_CHECK_OK(tg_graph_add_optimizer(g, &o));
    TG_CHECK(tg_graph_tensor_count(g) == before + 4); /* two buffers, two updates */
    TG_CHECK(g->scope_depth == 1 && g->current_block == 0);
    tg_scope_pop(g);
    tg_block_end(g);

    check_state(g, "net/fc/weight/momentum_buffer", s.w, stage1);
    check_state(g, "net/fc/bias/momentum_buffer", s.b, -1);
    tg_tensor *u = check_update(g, "net/fc/weight/update", TG_OP_SGD_UPDATE, s.w, 3, stage1);
    if (u) {
        TG_CHECK(u->in[1] == tg_graph_find(g, "net/fc/weight/momentum_buffer"));
        tg_optimizer back = tg_optim_params_get(&u->p);
        TG_CHECK(back.kind == TG_OPT_SGD && back.lr.kind == TG_LR_COSINE);
        TG_CHECK(back.lr.lr == 0.05f && back.lr.total_steps == 500 && back.lr.min_lr == 1e-3f);
        TG_CHECK(back.momentum == 0.9f && back.weight_decay == 1e-4f && back.nesterov);
    }
    check_update(g, "net/fc/bias/update", TG_OP_SGD_UPDATE, s.b, 3, -1);
    TG_CHECK(tg_graph_find(g, "frozen/update") == NULL);
    TG_CHECK(tg_graph_find(g, "frozen/momentum_buffer") == NULL);
    TG_CHECK(tg_graph_find(g, "user_scope/net/fc/weight/update") == NULL);

    /* a second optimizer is refused */
    TG_CHECK(tg_graph_add_optimizer(g, &o) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_graph_error(g), "already has an optimizer") != NULL);
    tg_graph_destroy(g);
}

static void test_add_sgd_plain(void)
{
    small_graph s = make_graph();
    tg_optimizer o = tg_optimizer_sgd(0.1f, 0);
    int before = tg_graph_tensor_count(s.g);
    TG_CHECK_OK(tg_graph_add_optimizer(s.g, &o));
    TG_CHECK(tg_graph_tensor_count(s.g) == before + 2); /* no state without momentum */
    TG_CHECK(tg_graph_find(s.g, "net/fc/weight/momentum_buffer") == NULL);
    check_update(s.g, "net/fc/weight/update", TG_OP_SGD_UPDATE, s.w, 2, s.gw->block);
    check_update(s.g, "net/fc/bias/update", TG_OP_SGD_UPDATE, s.b, 2, -1);
    tg_graph_destroy(s.g);
}

static void test_add_adam(void)
{
    for (int kind = TG_OPT_ADAM; kind <= TG_OPT_LAMB; kind++) {
        small_graph s = make_graph();
        tg_graph *g = s.g;
        tg_optimizer o = kind == TG_OPT_ADAM    ? tg_optimizer_adam(1e-3f)
                         : kind == TG_OPT_ADAMW ? tg_optimizer_adamw(1e-3f)
                                                : tg_optimizer_lamb(1e-3f);
        o.beta2 = 0.98f;
        /* every setting survives the trip through the node params */
        o.bias_correction = kind != TG_OPT_ADAMW;
        o.max_grad_norm = 0.25f * (float)kind;
        o.max_weight_norm = kind == TG_OPT_LAMB ? 3.5f : 0.0f;
        TG_CHECK_OK(tg_graph_add_optimizer(g, &o));
        int stage1 = s.gw->block;
        check_state(g, "net/fc/weight/exp_avg", s.w, stage1);
        check_state(g, "net/fc/weight/exp_avg_sq", s.w, stage1);
        check_state(g, "net/fc/bias/exp_avg", s.b, -1);
        check_state(g, "net/fc/bias/exp_avg_sq", s.b, -1);
        tg_tensor *u = check_update(g, "net/fc/weight/update", TG_OP_ADAM_UPDATE, s.w, 4, stage1);
        if (u) {
            TG_CHECK(u->in[1] == tg_graph_find(g, "net/fc/weight/exp_avg"));
            TG_CHECK(u->in[2] == tg_graph_find(g, "net/fc/weight/exp_avg_sq"));
            tg_optimizer back = tg_optim_params_get(&u->p);
            TG_CHECK((int)back.kind == kind && back.beta1 == 0.9f && back.beta2 == 0.98f);
            TG_CHECK(back.eps == 1e-8f && back.weight_decay == o.weight_decay);
            TG_CHECK(back.bias_correction == o.bias_correction);
            TG_CHECK(back.max_grad_norm == o.max_grad_norm);
            TG_CHECK(back.max_weight_norm == o.max_weight_norm);
        }
        check_update(g, "net/fc/bias/update", TG_OP_ADAM_UPDATE, s.b, 4, -1);
        TG_CHECK(tg_graph_find(g, "frozen/exp_avg") == NULL);
        tg_graph_destroy(g);
    }
}

static void test_add_errors(void)
{
    /* no gradients yet */
    tg_graph *g = tg_graph_create();
    tg_param(g, "w", tg_shape1(3), (tg_init){TG_INIT_ZEROS, 0, 0});
    tg_optimizer o = tg_optimizer_adam(1e-3f);
    TG_CHECK(tg_graph_add_optimizer(g, &o) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_graph_error(g), "tg_graph_backward") != NULL);
    tg_graph_destroy(g);

    /* bad settings: the error names the setting and sticks to the graph */
    small_graph s = make_graph();
    o = tg_optimizer_sgd(0.1f, 0);
    o.nesterov = true;
    TG_CHECK(tg_graph_add_optimizer(s.g, &o) == TG_ERR_CONFIG);
    TG_CHECK(tg_graph_status(s.g) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_graph_error(s.g), "nesterov") != NULL);
    TG_CHECK(tg_graph_find(s.g, "net/fc/weight/update") == NULL);
    /* an earlier error is reported, not built upon */
    o = tg_optimizer_sgd(0.1f, 0);
    TG_CHECK(tg_graph_add_optimizer(s.g, &o) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "earlier error") != NULL);
    tg_graph_destroy(s.g);

    /* a gradient whose shape does not match its parameter */
    s = make_graph();
    s.b->grad = s.gw;
    o = tg_optimizer_sgd(0.1f, 0);
    TG_CHECK(tg_graph_add_optimizer(s.g, &o) == TG_ERR_SHAPE);
    TG_CHECK(strstr(tg_graph_error(s.g), "parameter 'net/fc/bias' is [3]") != NULL);
    tg_graph_destroy(s.g);

    TG_CHECK(tg_graph_add_optimizer(NULL, &o) == TG_ERR_INVALID_ARG);
    g = tg_graph_create();
    TG_CHECK(tg_graph_add_optimizer(g, NULL) != TG_OK);
    tg_graph_destroy(g);
}

/* Parameter groups: each named parameter's update carries its group's
 * settings, the others group 0's; kinds and clipping must agree. */
static void test_add_groups(void)
{
    small_graph s = make_graph();
    tg_optimizer o[2] = {tg_optimizer_sgd(0.1f, 0.9f), tg_optimizer_sgd(0.02f, 0)};
    o[0].weight_decay = 0.01f;
    const char *names[] = {"net/fc/bias"};
    int group[] = {1};
    TG_CHECK_OK(tg_graph_add_optimizer_groups(s.g, o, 2, names, group, 1));
    tg_tensor *uw =
        check_update(s.g, "net/fc/weight/update", TG_OP_SGD_UPDATE, s.w, 3, s.gw->block);
    tg_tensor *ub = check_update(s.g, "net/fc/bias/update", TG_OP_SGD_UPDATE, s.b, 2, -1);
    if (uw && ub) {
        tg_optimizer w = tg_optim_params_get(&uw->p), b = tg_optim_params_get(&ub->p);
        TG_CHECK(w.lr.lr == 0.1f && w.momentum == 0.9f && w.weight_decay == 0.01f);
        TG_CHECK(b.lr.lr == 0.02f && b.momentum == 0 && b.weight_decay == 0);
    }
    TG_CHECK(tg_graph_find(s.g, "net/fc/bias/momentum_buffer") == NULL);
    tg_graph_destroy(s.g);

    struct {
        const char *name;
        int group;
        tg_optimizer second;
        tg_status status;
        const char *says;
    } bad[] = {
        {"net/fc/bias", 1, tg_optimizer_adam(0.1f), TG_ERR_INVALID_ARG, "group 1 is adam"},
        {"net/fc/bias", 2, tg_optimizer_sgd(0.1f, 0), TG_ERR_INVALID_ARG, "there are 2 groups"},
        {"net/fc/nothing", 1, tg_optimizer_sgd(0.1f, 0), TG_ERR_NOT_FOUND,
         "'net/fc/nothing' (entry 0) is not a parameter"},
        {"weight_grad", 1, tg_optimizer_sgd(0.1f, 0), TG_ERR_NOT_FOUND, "is not a parameter"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        s = make_graph();
        tg_optimizer two[2] = {tg_optimizer_sgd(0.1f, 0), bad[k].second};
        TG_CHECK(tg_graph_add_optimizer_groups(s.g, two, 2, &bad[k].name, &bad[k].group, 1) ==
                 bad[k].status);
        TG_CHECK(strstr(tg_graph_error(s.g), bad[k].says) != NULL);
        TG_CHECK(tg_graph_find(s.g, "net/fc/weight/update") == NULL);
        tg_graph_destroy(s.g);
    }
    s = make_graph();
    tg_optimizer clip[2] = {tg_optimizer_adam(0.1f), tg_optimizer_adam(0.1f)};
    clip[1].max_grad_norm = 1.0f;
    TG_CHECK(tg_graph_add_optimizer_groups(s.g, clip, 2, NULL, NULL, 0) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_graph_error(s.g), "max_grad_norm") != NULL);
    tg_graph_destroy(s.g);
}

/* A linear warm-up scales any schedule over its first updates. */
static void test_lr_warmup(void)
{
    tg_lr_schedule s = {.kind = TG_LR_COSINE, .lr = 0.01f, .total_steps = 100, .warmup_steps = 4};
    tg_lr_schedule plain = s;
    plain.warmup_steps = 0;
    for (int64_t k = 0; k < 4; k++)
        TG_CHECK_NEAR(tg_lr_at(&s, k), tg_lr_at(&plain, k) * (double)(k + 1) / 4.0, 1e-9);
    for (int64_t k = 4; k < 100; k += 7)
        TG_CHECK(tg_lr_at(&s, k) == tg_lr_at(&plain, k));
    tg_optimizer o = tg_optimizer_adam(0.01f);
    o.lr.warmup_steps = -1;
    TG_CHECK(tg_optimizer_validate(&o) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "warmup_steps") != NULL);
}

int main(void)
{
    TG_RUN(test_lr_warmup);
    TG_RUN(test_defaults);
    TG_RUN(test_parse_and_name);
    TG_RUN(test_lr_constant);
    TG_RUN(test_lr_step);
    TG_RUN(test_lr_cosine);
    TG_RUN(test_validate);
    TG_RUN(test_add_sgd_momentum);
    TG_RUN(test_add_sgd_plain);
    TG_RUN(test_add_adam);
    TG_RUN(test_add_errors);
    TG_RUN(test_add_groups);
    return tg_test_finish();
}
