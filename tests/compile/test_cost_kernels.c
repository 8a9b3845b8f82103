/* tests/compile/test_cost_kernels.c - the program's own kernels timed once
 * per signature: signatures tell kernels apart by op, shape, integer
 * parameters and whether they read the stash, and not by float parameters;
 * timed kernels are cached atomically and read back without timing again;
 * an op whose signature was timed costs its time, others keep the rates;
 * TILEGRAPH_CALIBRATION=off times nothing and writes nothing. No timing
 * asserts: only that times are positive and come back as written. */
#include "tg_test.h"

#include "compile/cost.h"
#include "core/error.h"
#include "tilegraph/graph.h"
#include "tilegraph/optim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

/* A small training graph: matmul, ReLU, max pooling, cross-entropy, and
 * their backward ops (which read the stash). */
typedef struct {
    tg_graph *g;
    tg_tensor *mm, *mm_other, *pool, *relu;
    bool *needed;
} net;

static void net_build(net *n)
{
    tg_graph *g = n->g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(4, 2, 8, 8));
    tg_tensor *labels = tg_input(g, "labels", TG_I32, tg_shape1(4));
    tg_tensor *p = n->pool = tg_maxpool2d(g, tg_relu(g, x), 2, 2, 0);
    tg_tensor *flat = tg_reshape(g, p, tg_shape2(4, 32));
    tg_tensor *w = tg_param(g, "w", tg_shape2(32, 10), (tg_init){TG_INIT_FAN_IN_UNIFORM, 32, 0});
    n->mm = tg_matmul(g, flat, w, false, false);
    n->relu = tg_relu(g, n->mm);
    tg_tensor *loss = tg_cross_entropy(g, n->relu, labels);
    tg_tensor_mark_output(loss);
    /* the same product but transposed: another kernel */
    n->mm_other = tg_matmul(g, tg_input(g, "a", TG_F32, tg_shape2(10, 32)), w, false, false);
    TG_CHECK_OK(tg_graph_backward(g, loss));
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.0f);
    TG_CHECK_OK(tg_graph_add_optimizer(g, &opt));
    TG_CHECK_OK(tg_graph_status(g));
    n->needed = calloc((size_t)g->n_nodes, sizeof(bool));
    for (int i = 0; n->needed && i < g->n_nodes; i++)
        n->needed[i] = g->nodes[i] != n->mm_other;
}

static void net_free(net *n)
{
    free(n->needed);
    tg_graph_destroy(n->g);
}

static tg_status model_of(tg_cost_model *m)
{
    tg_options *o = tg_options_create();
    tg_config c;
    tg_status s = tg_options_set_int(o, "threadsPerDevice", 1);
    if (s == TG_OK && (s = tg_config_read(o, &c)) == TG_OK) {
        s = tg_cost_model_from_config(&c, 1, m);
        tg_config_free(&c);
    }
    tg_options_destroy(o);
    return s;
}

static void test_signatures(void)
{
    net n;
    net_build(&n);
    tg_graph *g = n.g;
    TG_CHECK(tg_cost_kernel_signature(n.mm) != tg_cost_kernel_signature(n.mm_other));
    TG_CHECK(tg_cost_kernel_signature(n.mm) != tg_cost_kernel_signature(n.relu));
    /* the same op on the same shapes: one kernel, whatever the name */
    tg_tensor *again = tg_matmul(g, n.mm->in[0], n.mm->in[1], false, false);
    TG_CHECK(tg_cost_kernel_signature(again) == tg_cost_kernel_signature(n.mm));
    /* a transpose is an integer parameter: another kernel */
    tg_tensor *wt = tg_param(g, "wt", tg_shape2(10, 32), (tg_init){TG_INIT_ZEROS, 0, 0});
    tg_tensor *trans = tg_matmul(g, n.mm->in[0], wt, false, true);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(tg_cost_kernel_signature(trans) != tg_cost_kernel_signature(n.mm));
    /* no forward op reads the stash; the weight's gradient reads the
     * matmul's input (the pooling's output, through a reshape) from it */
    int forward_stash = 0, weight_grad_stash = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!(t->flags & (TG_NODE_BACKWARD | TG_NODE_OPTIMIZER)))
            forward_stash += tg_cost_reads_stash(t);
        else if (t->op == TG_OP_MATMUL && t == n.mm->in[1]->grad)
            weight_grad_stash += tg_cost_reads_stash(t);
    }
    TG_CHECK(forward_stash == 0 && weight_grad_stash == 1);
    net_free(&n);
}

static void test_timed_and_cached(void)
{
    unsetenv("TILEGRAPH_CALIBRATION");
    net n;
    net_build(&n);
    tg_cost_model a, b;
    TG_CHECK_OK(model_of(&a));
    double rates_only = tg_cost_node_seconds(&a, n.mm);
    TG_CHECK_OK(tg_cost_model_time_kernels(&a, n.g, n.needed));
    TG_CHECK(a.kernels && a.kernels->timed > 0 && a.kernels->from_cache == 0);
    TG_CHECK(a.kernels->left == 0);
    double timed = tg_cost_kernels_find(a.kernels, tg_cost_kernel_signature(n.mm));
    TG_CHECK(timed > 0 && tg_cost_node_seconds(&a, n.mm) == timed);
    TG_CHECK(rates_only > 0 && rates_only != timed);
    /* a node that was not needed keeps the rates */
    TG_CHECK(tg_cost_kernels_find(a.kernels, tg_cost_kernel_signature(n.mm_other)) < 0);
    char path[512];
    snprintf(path, sizeof path, "%s/tilegraph/cost-kernels-1t.json", dir);
    TG_CHECK(access(path, R_OK) == 0);
    /* a second model reads them all back and times nothing */
    TG_CHECK_OK(model_of(&b));
    TG_CHECK_OK(tg_cost_model_time_kernels(&b, n.g, n.needed));
    TG_CHECK(b.kernels && b.kernels->timed == 0 && b.kernels->from_cache == a.kernels->n);
    TG_CHECK_NEAR(tg_cost_node_seconds(&b, n.mm) / timed, 1.0, 1e-5); /* 6 digits kept */
    tg_cost_model_free(&a);
    tg_cost_model_free(&b);
    TG_CHECK(a.kernels == NULL);
    TG_CHECK(tg_cost_node_seconds(&a, n.mm) == rates_only); /* usable after free: rates */
    /* a cache for another version is timed again and replaced */
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("{\"version\":\"0.0.0-other\",\"cpu\":\"x\",\"threads\":1}\n", f);
        fclose(f);
    }
    TG_CHECK_OK(model_of(&b));
    TG_CHECK_OK(tg_cost_model_time_kernels(&b, n.g, n.needed));
    TG_CHECK(b.kernels && b.kernels->timed > 0 && b.kernels->from_cache == 0);
    tg_cost_model_free(&b);
    /* a cache of this build's times on the wall clock (its version without
     * "+cpu-clock", as caches were written before kernels on one thread
     * were timed on its CPU clock) is timed again too: it holds the load
     * of the day it was made */
    char text[1 << 16];
    size_t len = 0;
    if ((f = fopen(path, "r"))) {
        len = fread(text, 1, sizeof text - 1, f);
        fclose(f);
    }
    text[len] = '\0';
    char *mark = strstr(text, "+cpu-clock");
    TG_CHECK(mark != NULL);
    if (mark && (f = fopen(path, "w"))) {
        fwrite(text, 1, (size_t)(mark - text), f);
        fputs(mark + strlen("+cpu-clock"), f);
        fclose(f);
    }
    TG_CHECK_OK(model_of(&b));
    TG_CHECK_OK(tg_cost_model_time_kernels(&b, n.g, n.needed));
    TG_CHECK(b.kernels && b.kernels->timed > 0 && b.kernels->from_cache == 0);
    tg_cost_model_free(&b);
    net_free(&n);
}

static void test_off_times_nothing(void)
{
    setenv("TILEGRAPH_CALIBRATION", "off", 1);
    char sub[512], path[600];
    snprintf(sub, sizeof sub, "%s/off", dir);
    setenv("XDG_CACHE_HOME", sub, 1);
    net n;
    net_build(&n);
    tg_cost_model m;
    TG_CHECK_OK(model_of(&m));
    TG_CHECK_OK(tg_cost_model_time_kernels(&m, n.g, n.needed));
    TG_CHECK(m.kernels == NULL);
    snprintf(path, sizeof path, "%s/tilegraph/cost-kernels-1t.json", sub);
    TG_CHECK(access(path, F_OK) != 0);
    tg_cost_model_free(&m);
    net_free(&n);
    setenv("XDG_CACHE_HOME", dir, 1);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tg_test_cost_kernels.XXXXXX");
    if (!TG_MKDTEMP(dir))
        return tg_test_finish();
    setenv("XDG_CACHE_HOME", dir, 1);
    TG_RUN(test_signatures);
    TG_RUN(test_timed_and_cached);
    TG_RUN(test_off_times_nothing);
    tg_test_remove_dir(dir);
    return tg_test_finish();
}
