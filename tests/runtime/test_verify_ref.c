/* tests/runtime/test_verify_ref.c - the streamed reference run
 * (runtime/verify_ref.c) against the interpreter (runtime/interp.c): the
 * same value for every node and every updated leaf, bit for bit, on random
 * training graphs (SGD with and without momentum) and on an MLP under Adam
 * with gradient clipping; and the memory it holds: a deep MLP's updates run
 * as their gradients are made, so the plan never holds every gradient (the
 * interpreter holds every node's double; `check --model bert-large` needed
 * more than 10 GB for it). */
#include "tg_test.h"
#include "tg_random_graph.h"

#include "graph/node.h"
#include "runtime/interp.h"
#include "runtime/verify_ref.h"
#include "tilegraph/nn.h"
#include "tilegraph/optim.h"
#include "tilegraph/tilegraph.h"

#include <stdlib.h>
#include <string.h>

/* What the walk saw against what the interpreter computed. */
typedef struct walk {
    tg_interp *ip;
    double **start; /* per leaf: its value before the interpreter ran */
    bool clipped;   /* the gradients were clipped */
    int nodes, settled, mismatched;
    const char *first_bad;
} walk;

static bool leaf(void *ctx, const tg_tensor *t, double *out)
{
    walk *w = ctx;
    memcpy(out, w->start[t->id], (size_t)tg_numel(t) * sizeof(double));
    return true;
}

static bool same(const double *a, const double *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof(double)) == 0;
}

static tg_status node(void *ctx, const tg_tensor *t, int pos, const double *ref)
{
    walk *w = ctx;
    (void)pos;
    w->nodes++;
    /* An update's own output is empty: its effect is the settled leaves.
     * The interpreter's buffers are as the run left them: a view of a leaf
     * shows it updated (the walk saw it before), clipping scaled the
     * gradients in place (the walk saw them as made; the updated weights
     * show the scaling was the same). */
    const tg_tensor *root = t;
    while (root->flags & TG_NODE_ALIAS)
        root = root->in[0];
    const double *then = root->n_in == 0 ? w->start[root->id] : tg_interp_data(w->ip, t);
    if (t->n_mutated > 0 || (w->clipped && t->role == TG_ROLE_GRADIENT))
        return TG_OK;
    if ((!ref || !same(ref, then, tg_numel(t))) && !w->mismatched++)
        w->first_bad = t->name;
    return TG_OK;
}

static void settled(void *ctx, const tg_tensor *t, const double *ref)
{
    walk *w = ctx;
    w->settled++;
    if (!same(ref, tg_interp_data(w->ip, t), tg_numel(t)) && !w->mismatched++)
        w->first_bad = t->name;
}

static int count_rewritten(const tg_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        bool rewritten = false;
        for (int j = 0; j < g->n_nodes && !rewritten; j++)
            for (int k = 0; k < g->nodes[j]->n_mutated; k++)
                rewritten |= g->nodes[j]->in[k] == g->nodes[i];
        n += rewritten;
    }
    return n;
}

/* Run g in the interpreter and streamed from the same leaves; every node and
 * rewritten leaf must match. Returns the plan's peak bytes. */
static int64_t compare_with_interpreter(tg_graph *g, tg_tensor *x, tg_tensor *labels, int classes,
                                        bool clipped)
{
    walk w = {.clipped = clipped};
    TG_CHECK_OK(tg_interp_create(g, 11, &w.ip));
    double *xd = tg_interp_data(w.ip, x);
    for (int64_t i = 0; i < tg_numel(x); i++)
        xd[i] = (double)((i * 37) % 29) / 14.0 - 1.0;
    for (int64_t i = 0; labels && i < tg_numel(labels); i++)
        tg_interp_data(w.ip, labels)[i] = (double)(i % classes);
    w.start = calloc((size_t)g->n_nodes, sizeof(double *));
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->n_in > 0)
            continue;
        w.start[i] = malloc((size_t)(tg_numel(t) ? tg_numel(t) : 1) * sizeof(double));
        memcpy(w.start[i], tg_interp_data(w.ip, t), (size_t)tg_numel(t) * sizeof(double));
    }
    tg_interp_set_stream(w.ip, 3);
    TG_CHECK_OK(tg_interp_run(w.ip, 4));
    tg_ref_plan *plan = NULL;
    TG_CHECK_OK(tg_ref_plan_create(g, &plan));
    int n_order;
    const int *order = tg_ref_plan_order(plan, &n_order);
    TG_CHECK(n_order == g->n_nodes);
    int *seen = calloc((size_t)g->n_nodes, sizeof(int));
    for (int at = 0; at < n_order; at++)
        seen[order[at]]++;
    int inner = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        TG_CHECK(seen[i] == 1);
        inner += g->nodes[i]->n_in > 0;
    }
    tg_ref_visit visit = {&w, leaf, node, settled};
    char why[256];
    TG_CHECK_OK(tg_ref_plan_run(plan, &visit, true, 11, 3, 4, why, sizeof why));
    TG_CHECK(why[0] == 0);
    TG_CHECK(w.nodes == inner);
    TG_CHECK(w.settled == count_rewritten(g));
    if (w.mismatched)
        fprintf(stderr, "%d values differ from the interpreter's, the first '%s'\n", w.mismatched,
                w.first_bad);
    TG_CHECK(w.mismatched == 0);
    int64_t peak = tg_ref_plan_peak_bytes(plan);
    tg_ref_plan_destroy(plan);
    for (int i = 0; i < g->n_nodes; i++)
        free(w.start[i]);
    free(w.start);
    free(seen);
    tg_interp_destroy(w.ip);
    return peak;
}

static void test_random_training_graphs(void)
{
    int graphs = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        tg_rg_spec spec = {
            .seed = seed, .max_ops = 8, .training = true, .momentum = seed % 2 ? 0.9f : 0.0f};
        tg_random_graph rg;
        if (tg_random_graph_build(&spec, &rg) == TG_OK) {
            compare_with_interpreter(rg.graph, rg.x, rg.labels, rg.classes, false);
            graphs++;
        }
        tg_random_graph_destroy(&rg);
    }
    TG_CHECK(graphs >= 50);
}

/* An MLP of `layers` linear layers of width 128 with a GELU between; its
 * optimizer opt. */
static tg_graph *mlp(int layers, const tg_optimizer *opt, tg_tensor **x, tg_tensor **labels)
{
    tg_graph *g = tg_graph_create();
    *x = tg_input(g, "x", TG_F32, tg_shape2(2, 128));
    *labels = tg_input(g, "labels", TG_I32, tg_shape1(2));
    tg_tensor *h = *x;
    char name[32];
    for (int l = 0; l < layers; l++) {
        snprintf(name, sizeof name, "fc%d", l);
        h = tg_nn_linear(g, h, name, 128, 128, true);
        if (l + 1 < layers)
            h = tg_gelu(g, h);
    }
    tg_tensor *loss = tg_cross_entropy(g, h, *labels);
    tg_tensor_mark_output(loss);
    TG_CHECK_OK(tg_graph_backward(g, loss));
    TG_CHECK_OK(tg_graph_add_optimizer(g, opt));
    return g;
}

static int64_t all_doubles(const tg_graph *g)
{
    int64_t n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!(g->nodes[i]->flags & TG_NODE_ALIAS))
            n += (tg_numel(g->nodes[i]) ? tg_numel(g->nodes[i]) : 1) * (int64_t)sizeof(double);
    return n;
}

/* Adam with clipping: the gradients' norm over all of them comes first, so
 * the updates stay at the end, and still match the interpreter. */
static void test_clipped_adam(void)
{
    tg_optimizer opt = tg_optimizer_adam(0.01f);
    opt.max_grad_norm = 1e-3f; /* far below the norm: every gradient is scaled */
    tg_tensor *x, *labels;
    tg_graph *g = mlp(3, &opt, &x, &labels);
    compare_with_interpreter(g, x, labels, 128, true);
    tg_graph_destroy(g);
}

/* Twelve layers under SGD: the weights and gradients are almost all the
 * graph's doubles. The plan holds a few layers' worth at once; holding
 * every gradient until the optimizer at the end would be half of it all. */
static void test_memory_follows_the_layers(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.9f);
    tg_tensor *x, *labels;
    tg_graph *g = mlp(12, &opt, &x, &labels);
    int64_t peak = compare_with_interpreter(g, x, labels, 128, false), all = all_doubles(g);
    int64_t layer = (128 * 128 + 128) * (int64_t)sizeof(double);
    printf("12-layer MLP: the interpreter holds %lld bytes, the streamed plan %lld at most (a "
           "layer's weights are %lld)\n",
           (long long)all, (long long)peak, (long long)layer);
    TG_CHECK(peak < all / 6);
    TG_CHECK(peak < 5 * layer);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_random_training_graphs);
    TG_RUN(test_clipped_adam);
    TG_RUN(test_memory_follows_the_layers);
    return tg_test_finish();
}
