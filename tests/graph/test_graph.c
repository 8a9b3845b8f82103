/* tests/graph/test_graph.c - building graphs: names from scopes, unique
 * names, blocks, sticky errors, and what autodiff does and does not build.
 * TG_TEST_LABELS: quick */
#include "tg_test.h"

#include "runtime/interp.h"

#include <string.h>

static void test_names_scopes_and_blocks(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(2, 3));
    tg_scope_push(g, "layer1");
    tg_block_begin(g, "B1");
    tg_tensor *a = tg_relu(g, x), *b = tg_relu(g, a);
    tg_tensor *w = tg_param(g, "weight", tg_shape2(2, 3), (tg_init){TG_INIT_ONES, 0, 0});
    tg_block_end(g);
    tg_scope_pop(g);
    TG_CHECK(strcmp(tg_tensor_name(a), "layer1/relu") == 0);
    TG_CHECK(strcmp(tg_tensor_name(b), "layer1/relu.1") == 0);
    TG_CHECK(strcmp(tg_tensor_name(w), "layer1/weight") == 0);
    TG_CHECK(tg_tensor_is_param(w) && !tg_tensor_is_param(x) && !tg_tensor_is_param(a) &&
             !tg_tensor_is_param(NULL));
    TG_CHECK(tg_graph_find(g, "layer1/relu.1") == b && tg_graph_find(g, "nope") == NULL);
    TG_CHECK(a->block == 0 && x->block == -1 && strcmp(g->blocks[0].name, "B1") == 0);
    tg_graph_rename(g, b, "act");
    TG_CHECK(strcmp(tg_tensor_name(b), "act") == 0 && tg_graph_find(g, "act") == b);
    TG_CHECK(tg_graph_find(g, "layer1/relu.1") == NULL);
    tg_block_begin_on(g, "B2", 1);
    TG_CHECK(g->blocks[1].device_id == 1);
    TG_CHECK_OK(tg_graph_status(g));
    tg_graph_destroy(g);
}

/* Many renames keep every name findable (removal from the open-addressed
 * name table must not lose entries that probed past the removed one). */
static void test_many_renames(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(4)), *t[300];
    for (int i = 0; i < 300; i++)
        t[i] = tg_relu(g, x);
    for (int i = 0; i < 300; i += 2) {
        char name[32];
        snprintf(name, sizeof name, "renamed%d", i);
        tg_graph_rename(g, t[i], name);
    }
    for (int i = 0; i < 300; i++) {
        char name[32];
        if (i % 2 == 0)
            snprintf(name, sizeof name, "renamed%d", i);
        else
            snprintf(name, sizeof name, i ? "relu.%d" : "relu", i);
        TG_CHECK(tg_graph_find(g, name) == t[i]);
    }
    TG_CHECK(tg_graph_find(g, "relu") == NULL); /* t[0] was renamed */
    TG_CHECK_OK(tg_graph_status(g));
    tg_graph_destroy(g);
}

static void test_errors_are_sticky_and_named(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(2, 3));
    tg_tensor *y = tg_input(g, "y", TG_F32, tg_shape2(4, 5));
    tg_scope_push(g, "head");
    tg_tensor *bad = tg_add(g, x, y);
    TG_CHECK(bad == NULL);
    TG_CHECK(tg_graph_status(g) == TG_ERR_SHAPE);
    TG_CHECK(strstr(tg_graph_error(g), "head/add") != NULL);
    /* later ops given NULL fail without replacing the first message */
    TG_CHECK(tg_relu(g, bad) == NULL && tg_relu(g, x) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "head/add") != NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    TG_CHECK(tg_input(g, "x", TG_F32, tg_shape2(-1, 3)) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "negative") != NULL);
    tg_graph_destroy(g);
}

static void test_autodiff_sums_contributions_and_skips_the_rest(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *w = tg_param(g, "w", tg_shape1(3), (tg_init){TG_INIT_UNIFORM, -1, 1});
    tg_tensor *unused = tg_param(g, "unused", tg_shape1(3), (tg_init){TG_INIT_ONES, 0, 0});
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(3));
    /* w used twice: loss = sum(w*x + w*w) -> dloss/dw = x + 2w */
    tg_tensor *loss = tg_reduce_sum(g, tg_add(g, tg_mul(g, w, x), tg_mul(g, w, w)), 1u, false);
    TG_CHECK_OK(tg_graph_backward(g, loss));
    TG_CHECK(tg_tensor_grad(w) != NULL && tg_tensor_grad(unused) == NULL);
    TG_CHECK(tg_tensor_grad(x) == NULL); /* inputs get no gradient */
    tg_interp *ip = NULL;
    TG_CHECK_OK(tg_interp_create(g, 1, &ip));
    double *xv = tg_interp_data(ip, x);
    xv[0] = 1, xv[1] = -2, xv[2] = 0.5;
    TG_CHECK_OK(tg_interp_run(ip, 0));
    const double *wv = tg_interp_data(ip, w), *gw = tg_interp_data(ip, tg_tensor_grad(w));
    for (int i = 0; i < 3; i++)
        TG_CHECK_NEAR(gw[i], xv[i] + 2 * wv[i], 1e-12);
    /* backward ops are marked and named after the op they derive from */
    bool marked = false;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->flags & TG_NODE_BACKWARD)
            marked = g->nodes[i]->forward_of != NULL;
    TG_CHECK(marked);
    tg_interp_destroy(ip);
    tg_graph_destroy(g);
}

static void test_backward_needs_a_scalar_loss(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *w = tg_param(g, "w", tg_shape1(3), (tg_init){TG_INIT_ONES, 0, 0});
    TG_CHECK(tg_graph_backward(g, tg_relu(g, w)) == TG_ERR_SHAPE);
    TG_CHECK(strstr(tg_error_message(), "scalar") != NULL);
    TG_CHECK(tg_graph_backward(g, NULL) == TG_ERR_INVALID_ARG);
    tg_graph_destroy(g);
}

/* 50,000 nodes of one name get relu.1 ... in order, each name once, also
 * past a suffix taken by hand (an exported model's thousands of "Relu":
 * trying suffixes from 1 each time was quadratic). A suffix freed by a
 * rename is not reused: the names stay unique and deterministic. */
static void test_many_nodes_of_one_name(void)
{
    enum { N = 50000 };
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(4));
    tg_tensor *first = tg_relu(g, x);
    tg_tensor *taken = tg_relu(g, x); /* relu.1 */
    tg_graph_rename(g, taken, "relu.3");
    TG_CHECK(strcmp(tg_tensor_name(first), "relu") == 0);
    tg_tensor *t2 = tg_relu(g, x), *t4 = tg_relu(g, x), *last = NULL;
    TG_CHECK(strcmp(tg_tensor_name(t2), "relu.2") == 0);
    TG_CHECK(strcmp(tg_tensor_name(t4), "relu.4") == 0);
    for (int i = 4; i < N; i++)
        last = tg_relu(g, x);
    TG_CHECK(strcmp(tg_tensor_name(last), "relu.50000") == 0);
    TG_CHECK(tg_graph_find(g, "relu.3") == taken);
    TG_CHECK(tg_graph_find(g, "relu.50000") == last && !tg_graph_find(g, "relu.1"));
    TG_CHECK_OK(tg_graph_status(g));
    tg_graph_destroy(g);
}

/* A tensor beyond 2^36 elements is refused where it is made, naming it: a
 * declared input, or a broadcast of two that fit. */
static void test_sizes_are_bounded(void)
{
    tg_graph *g = tg_graph_create();
    TG_CHECK(tg_input(g, "ok", TG_F32, tg_shape2((int64_t)1 << 18, (int64_t)1 << 18)) != NULL);
    TG_CHECK(tg_input(g, "huge", TG_F32, tg_shape4(1, 1, (int64_t)1 << 40, 1)) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "huge: shape [1, 1, 1099511627776, 1]") != NULL);
    tg_graph_destroy(g);
    g = tg_graph_create();
    tg_tensor *a = tg_input(g, "a", TG_F32, tg_shape2((int64_t)1 << 18, 1));
    tg_tensor *b = tg_input(g, "b", TG_F32, tg_shape2(1, (int64_t)1 << 19));
    TG_CHECK(a && b && tg_add(g, a, b) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "more than 2^36 elements") != NULL);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_names_scopes_and_blocks);
    TG_RUN(test_many_renames);
    TG_RUN(test_many_nodes_of_one_name);
    TG_RUN(test_sizes_are_bounded);
    TG_RUN(test_errors_are_sticky_and_named);
    TG_RUN(test_autodiff_sums_contributions_and_skips_the_rest);
    TG_RUN(test_backward_needs_a_scalar_loss);
    return tg_test_finish();
}
