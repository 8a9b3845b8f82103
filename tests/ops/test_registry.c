/* tests/ops/test_registry.c - the op table (ops/registry.c) describes every
 * op kind once: each enum value of graph/op_list.h has a def with its
 * list name, rules and kernels, and flags that agree with each other and
 * with what the passes see on real nodes (element-wise, blocked layout,
 * bf16 kernels, aliasing, cost kind, plan hooks).
 * TG_TEST_LABELS: quick */
#include "backend/backend.h"
#include "tg_test.h"

#include "ops/binary.h"
#include "backend/cpu/blocked.h"
#include "ops/op.h"
#include "tilegraph/graph.h"

#include <string.h>

static bool is_leaf(tg_op op)
{
    return op == TG_OP_INPUT || op == TG_OP_PARAM || op == TG_OP_STATE || op == TG_OP_CONSTANT;
}

/* Every enum value has a complete def. */
static void test_every_op_has_a_def(void)
{
    const unsigned known = TG_OPF_ELEMENTWISE;
    for (int op = 0; op < TG_OP_COUNT; op++) {
        const tg_op_def *d = tg_op_get((tg_op)op);
        TG_CHECK(d != NULL);
        const tg_kernel_def *k = tg_backend_cpu.kernel((tg_op)op);
        if (!d)
            continue;
        /* the name is graph/op_list.h's line alone: present and unique */
        const char *name = tg_op_name((tg_op)op);
        TG_CHECK(name && *name && strcmp(name, "?") != 0);
        for (int other = 0; name && other < op; other++)
            TG_CHECK(strcmp(name, tg_op_name((tg_op)other)) != 0);
        TG_CHECK((d->flags & ~known) == 0);
        /* a new op says whether it reinterprets memory */
        if (d->memory != TG_OP_OWN_STORAGE && d->memory != TG_OP_VIEWS_INPUT)
            printf("  op %s does not say whether its output views its input (.memory)\n", name);
        TG_CHECK(d->memory == TG_OP_OWN_STORAGE || d->memory == TG_OP_VIEWS_INPUT);
        TG_CHECK((unsigned)d->cost < TG_COST_KIND_COUNT);
        if (is_leaf((tg_op)op)) {
            TG_CHECK(!d->infer && !k && d->flags == TG_OPF_NONE);
            continue;
        }
        /* a reference kernel is enough: the engine runs it (tg_op_forward) */
        if (!d->infer || !d->reference || !d->flops)
            printf("  op %s lacks a rule or a reference kernel\n", name);
        TG_CHECK(d->infer && d->reference && d->flops);
        TG_CHECK(tg_op_has_kernel((tg_op)op));
        /* an op without a cpu kernel has nothing a fast path would read; a
         * kernel entry without forward would leave the output unwritten */
        if (!k)
            TG_CHECK(d->flags == TG_OPF_NONE || d->flags == TG_OPF_ELEMENTWISE);
        else
            TG_CHECK(k->forward != NULL);
        if (k && k->planner)
            TG_CHECK(k->planner->plan && k->planner->plan_free);
        TG_CHECK(tg_op_planner_get((tg_op)op) == (k ? k->planner : NULL));
    }
    TG_CHECK(tg_op_get(TG_OP_COUNT) == NULL && tg_op_get((tg_op)-1) == NULL);
    TG_CHECK(strcmp(tg_op_name(TG_OP_COUNT), "?") == 0);
}

/* The flags agree with each other: what one implies of another. */
static void test_flags_consistent(void)
{
    for (int op = 0; op < TG_OP_COUNT; op++) {
        const tg_op_def *d = tg_op_get((tg_op)op);
        if (!d)
            continue;
        const tg_kernel_def *k = tg_backend_cpu.kernel((tg_op)op);
        if (d->memory == TG_OP_VIEWS_INPUT) /* a view runs no kernel and keeps NCHW */
            TG_CHECK(d->flags == TG_OPF_NONE &&
                     (!k || (!k->layout && !k->planner && !k->scratch && !k->reads_bf16)));
        if (k && k->per_channel_blocked) /* the binary kernels' blocked per-channel loop */
            TG_CHECK((d->flags & TG_OPF_ELEMENTWISE) &&
                     (op == TG_OP_ADD || op == TG_OP_SUB || op == TG_OP_MUL));
        if (d->flags & TG_OPF_ELEMENTWISE) /* position-free: no layout of its own to plan */
            TG_CHECK((!k || (!k->layout && !k->planner)) && d->cost == TG_COST_MEMORY);
        if (k && k->layout)
            TG_CHECK(!(d->flags & TG_OPF_ELEMENTWISE));
    }
}

/* The math functions share the element-wise kernel, so they run blocked
 * like ReLU (they were once missing from the list that said so); pow and
 * the gradient ops of pow, maximum and minimum were once left unflagged. */
static void test_math_functions_are_elementwise(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(2, 16, 3, 3));
    tg_tensor *y = tg_input(g, "y", TG_F32, tg_shape4(2, 16, 3, 3));
    /* pow, maximum, minimum and their gradients' ops (one formula per
     * element of the broadcast shape) as well */
    tg_node_params which_b = {0};
    tg_grad3_set_which(&which_b, 1);
    tg_tensor *ys[] = {tg_erf(g, x),
                       tg_exp(g, x),
                       tg_log(g, x),
                       tg_sqrt(g, x),
                       tg_abs(g, x),
                       tg_relu(g, x),
                       tg_add(g, x, x),
                       tg_pow(g, x, y),
                       tg_maximum(g, x, y),
                       tg_minimum(g, x, y),
                       tg_node_create(g, TG_OP_POW_BWD, 3, (tg_tensor *[]){x, x, y}, &which_b),
                       tg_node_create(g, TG_OP_MINMAX_BWD, 3, (tg_tensor *[]){x, x, y}, NULL)};
    TG_CHECK_OK(tg_graph_status(g));
    for (size_t k = 0; k < sizeof ys / sizeof ys[0] && tg_graph_status(g) == TG_OK; k++) {
        TG_CHECK(tg_op_is_elementwise(ys[k]));
        TG_CHECK(tg_blocked_kernel_exists(ys[k]));
        TG_CHECK(tg_op_layout_of(ys[k], 2, false) == TG_LAYOUT_TIED);
    }
    /* broadcasting is not element-wise: the operands' elements differ in place */
    tg_tensor *b = tg_input(g, "b", TG_F32, tg_shape4(1, 16, 1, 1));
    tg_tensor *sum = tg_add(g, x, b);
    TG_CHECK(sum && !tg_op_is_elementwise(sum) &&
             tg_op_layout_of(sum, 2, false) == TG_LAYOUT_PLAIN);
    tg_tensor *pow_b = tg_pow(g, x, b);
    TG_CHECK(pow_b && !tg_op_is_elementwise(pow_b));
    tg_tensor *grad_b =
        tg_node_create(g, TG_OP_MINMAX_BWD, 3, (tg_tensor *[]){sum, x, b}, &which_b);
    TG_CHECK(grad_b && !tg_op_is_elementwise(grad_b));
    tg_graph_destroy(g);
}

/* What the layout and bf16 questions answer on real nodes. */
static void test_layout_and_bf16(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(2, 16, 4, 4));
    tg_tensor *run = tg_param(g, "run", tg_shape2(2, 16), (tg_init){TG_INIT_ZEROS});
    tg_tensor *bn = tg_batch_norm(g, x, NULL, NULL, run, 1e-5f);
    tg_tensor *ln = tg_layer_norm(g, x, 2, NULL, NULL, 1e-5f);
    tg_tensor *mp = tg_maxpool2d(g, x, 2, 2, 0);
    tg_tensor *r = tg_relu(g, x);
    tg_tensor *e = tg_exp(g, x);
    tg_tensor *v = tg_reshape(g, x, tg_shape2(2, 256));
    TG_CHECK_OK(tg_graph_status(g));
    if (tg_graph_status(g) != TG_OK) {
        tg_graph_destroy(g);
        return;
    }
    /* batch norm's apply over 4-D x runs blocked and reads bf16 when blocked */
    TG_CHECK(bn->op == TG_OP_NORM_APPLY && tg_op_layout_of(bn, 1, false) == TG_LAYOUT_TIED);
    TG_CHECK(tg_op_reads_bf16(bn, true) && !tg_op_reads_bf16(bn, false));
    TG_CHECK(ln->op == TG_OP_NORM_APPLY && tg_op_layout_of(ln, 1, false) == TG_LAYOUT_PLAIN);
    TG_CHECK(!tg_op_reads_bf16(ln, true));
    TG_CHECK(tg_op_layout_of(mp, 1, false) == TG_LAYOUT_TIED &&
             tg_op_get(mp->op)->cost == TG_COST_POOL);
    TG_CHECK(tg_op_reads_bf16(r, false) && tg_elementwise_bf16_supported(r));
    TG_CHECK(!tg_op_reads_bf16(e, false) && !tg_elementwise_bf16_supported(e));
    /* the view: marked by the graph from its def, plain layout */
    TG_CHECK((v->flags & TG_NODE_ALIAS) && tg_op_layout_of(v, 1, false) == TG_LAYOUT_PLAIN);
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        bool alias = tg_op_get(t->op)->memory == TG_OP_VIEWS_INPUT;
        TG_CHECK(alias == ((t->flags & TG_NODE_ALIAS) != 0));
    }
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_every_op_has_a_def);
    TG_RUN(test_flags_consistent);
    TG_RUN(test_math_functions_are_elementwise);
    TG_RUN(test_layout_and_bf16);
    return tg_test_finish();
}
