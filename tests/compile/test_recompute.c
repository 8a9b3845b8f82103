/* tests/compile/test_recompute.c - what recomputation marks, per mode.
 * Stage 1 computes a = tanh(x W1), b = tanh(a); tanh's backward reads its
 * output, so under recomputation "pipeline" device 0's backward pass starts
 * by computing x W1, a and b again (in forward order, into buffers of their
 * own) and its backward steps read those; a checkpoint on a keeps a, and
 * only b is computed again; batch norm's update of its running statistics
 * is never run twice; mode "none" and inference programs recompute nothing.
 * (tests/runtime/test_recompute.c checks that the numbers stay the same.) */
#include "tg_test.h"

#include "compile/program.h"
#include "tilegraph/optim.h"

#include <string.h>

typedef struct {
    tg_graph *g;
    tg_tensor *xw, *a, *b;
    tg_tensor *bn; /* batch norm's running-statistics update */
} net;

/* Block B1: x W1, tanh, tanh (and batch norm with `bn`); block B2: a
 * linear layer and the loss. Trained with SGD unless `inference`. */
static net build(bool checkpoint_a, bool bn, bool inference)
{
    net n = {0};
    tg_graph *g = n.g = tg_graph_create();
    tg_graph_set_training(g, !inference);
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(4, 6));
    tg_tensor *labels = tg_input(g, "labels", TG_I32, tg_shape1(4));
    tg_block_begin(g, "B1");
    tg_tensor *w1 = tg_param(g, "w1", tg_shape2(8, 6), (tg_init){TG_INIT_FAN_IN_UNIFORM, 6, 0});
    n.xw = tg_linear(g, x, w1, NULL);
    tg_graph_rename(g, n.xw, "xw");
    n.a = tg_tanh(g, n.xw);
    tg_graph_rename(g, n.a, "a");
    if (checkpoint_a)
        tg_recomputation_checkpoint(g, n.a);
    n.b = tg_tanh(g, n.a);
    tg_graph_rename(g, n.b, "b");
    tg_tensor *h = n.b;
    if (bn) {
        tg_tensor *stats =
            tg_state(g, "stats", tg_shape2(2, 8), (tg_init){TG_INIT_NORM_STATS, 0, 0});
        h = tg_batch_norm(g, n.b, NULL, NULL, stats, 1e-5f);
        for (int i = 0; i < g->n_nodes; i++) /* the op that writes the running statistics */
            if (g->nodes[i]->op == TG_OP_RUNNING_STATS_UPDATE)
                n.bn = g->nodes[i];
    }
    tg_block_begin(g, "B2");
    tg_tensor *w2 = tg_param(g, "w2", tg_shape2(3, 8), (tg_init){TG_INIT_FAN_IN_UNIFORM, 8, 0});
    tg_tensor *loss = tg_cross_entropy(g, tg_linear(g, h, w2, NULL), labels);
    tg_block_end(g);
    tg_tensor_mark_output(loss);
    if (!inference) {
        tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.0f);
        TG_CHECK_OK(tg_graph_backward(g, loss));
        TG_CHECK_OK(tg_graph_add_optimizer(g, &opt));
    }
    TG_CHECK_OK(tg_graph_status(g));
    return n;
}

static tg_program *compile(const net *n, const char *mode, bool inference)
{
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "executionStrategy", "pipelined"));
    TG_CHECK_OK(
        tg_options_set(o, inference ? "deviceIterations" : "Training.gradientAccumulation", "4"));
    TG_CHECK_OK(tg_options_set(o, "recomputation", mode));
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(n->g, o, &p));
    tg_options_destroy(o);
    TG_CHECK(p && p->n_devices == 2);
    return p;
}

static bool is_forward(const tg_tensor *t)
{
    return !(t->flags & (TG_NODE_BACKWARD | TG_NODE_OPTIMIZER));
}

/* The forward nodes device d computes again in its backward phase, in
 * order, as "xw,a,b"; checks that they come first and write buffers of
 * their own, and that no later step reads the forward buffers. */
static void recomputed(const tg_program *p, int d, char *out, size_t cap)
{
    const tg_device_program *dp = &p->devices[d];
    const tg_graph *g = p->graph;
    out[0] = '\0';
    int n = 0;
    while (n < dp->n_steps[TG_PHASE_BACKWARD] &&
           is_forward(g->nodes[dp->steps[TG_PHASE_BACKWARD][n].node]))
        n++;
    for (int k = 0; k < n; k++) {
        const tg_step *st = &dp->steps[TG_PHASE_BACKWARD][k];
        const tg_tensor *t = g->nodes[st->node];
        size_t used = strlen(out);
        snprintf(out + used, cap - used, "%s%s", k ? "," : "", t->name);
        TG_CHECK(st->out >= 0 && st->out != p->home[t->id]);
        TG_CHECK(st->out >= 0 && p->buffers[st->out].region == TG_REGION_ACTIVATION);
        TG_CHECK(st->out >= 0 && p->buffers[st->out].bytes == p->buffers[p->home[t->id]].bytes);
        for (int s = k + 1; s < dp->n_steps[TG_PHASE_BACKWARD]; s++)
            for (int j = 0; j < g->nodes[dp->steps[TG_PHASE_BACKWARD][s].node]->n_in; j++)
                if (dp->steps[TG_PHASE_BACKWARD][s].in[j] == p->home[t->id])
                    tg_test_fail(__FILE__, __LINE__, "a backward step reads '%s' as stashed",
                                 t->name);
    }
    for (int s = n; s < dp->n_steps[TG_PHASE_BACKWARD]; s++)
        TG_CHECK(!is_forward(g->nodes[dp->steps[TG_PHASE_BACKWARD][s].node]));
}

static double backward_flops(const tg_program *p, int d)
{
    return p->devices[d].flops[TG_PHASE_BACKWARD];
}

static void test_pipeline_recomputes_stage_values(void)
{
    net n = build(false, false, false);
    tg_program *none = compile(&n, "none", false), *re = compile(&n, "pipeline", false);
    char list[256];
    if (none && re) {
        recomputed(none, 0, list, sizeof list);
        TG_CHECK(strcmp(list, "") == 0);
        recomputed(re, 0, list, sizeof list);
        if (strcmp(list, "xw,a,b") != 0)
            tg_test_fail(__FILE__, __LINE__, "device 0 recomputes \"%s\"", list);
        /* the backward steps themselves are unchanged, after the three */
        TG_CHECK(re->devices[0].n_steps[TG_PHASE_BACKWARD] ==
                 none->devices[0].n_steps[TG_PHASE_BACKWARD] + 3);
        /* the forward work is counted again: tanh twice, x W1 (2 x 4 x 6 x 8) */
        TG_CHECK(backward_flops(re, 0) >= backward_flops(none, 0) + 2 * 4 * 6 * 8);
        /* a and xw no longer live until the backward pass: less stash */
        TG_CHECK(re->devices[0].region_bytes[TG_REGION_STASH] <
                 none->devices[0].region_bytes[TG_REGION_STASH]);
    }
    tg_program_destroy(none);
    tg_program_destroy(re);
    tg_graph_destroy(n.g);
}

static void test_checkpoint_is_kept(void)
{
    net n = build(true, false, false);
    tg_program *re = compile(&n, "pipeline", false);
    char list[256];
    if (re) {
        recomputed(re, 0, list, sizeof list);
        if (strcmp(list, "b") != 0)
            tg_test_fail(__FILE__, __LINE__, "with a checkpoint on a, device 0 recomputes \"%s\"",
                         list);
    }
    tg_program_destroy(re);
    tg_graph_destroy(n.g);
}

static void test_state_updates_never_rerun(void)
{
    net n = build(false, true, false);
    TG_CHECK(n.bn && n.bn->n_mutated == 1);
    tg_program *re = compile(&n, "pipeline", false);
    char list[256];
    if (re && n.bn) {
        /* the statistics batch norm computes from b are computed again, the
         * running statistics are not updated again */
        recomputed(re, 0, list, sizeof list);
        TG_CHECK(strncmp(list, "xw,a,b,", 7) == 0);
        int runs = 0;
        for (int d = 0; d < re->n_devices; d++)
            for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
                for (int k = 0; k < re->devices[d].n_steps[ph]; k++)
                    if (re->devices[d].steps[ph][k].node == n.bn->id) {
                        TG_CHECK(d == 0 && ph == TG_PHASE_FORWARD);
                        runs++;
                    }
        TG_CHECK(runs == 1);
    }
    tg_program_destroy(re);
    tg_graph_destroy(n.g);
}

static void test_inference_recomputes_nothing(void)
{
    net n = build(false, false, true);
    tg_program *none = compile(&n, "none", true), *re = compile(&n, "pipeline", true);
    for (int d = 0; none && re && d < 2; d++) {
        TG_CHECK(re->devices[d].n_steps[TG_PHASE_BACKWARD] == 0);
        TG_CHECK(re->devices[d].n_steps[TG_PHASE_FORWARD] ==
                 none->devices[d].n_steps[TG_PHASE_FORWARD]);
        TG_CHECK(re->devices[d].arena_bytes == none->devices[d].arena_bytes);
    }
    tg_program_destroy(none);
    tg_program_destroy(re);
    tg_graph_destroy(n.g);
}

/* Stage 2 begins with a transpose, whose backward does not read its
 * input: without recomputation the received value is used in the forward
 * only, with it the backward computes the transpose again from it, so its
 * receive slot must be held until the backward (it was released after the
 * forward, and the next micro-batch overwrote it: found by the random
 * graphs of tests/runtime/test_verify.c). */
static void test_received_value_held_for_recomputation(void)
{
    static const int swap[2] = {1, 0};
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(4, 6));
    tg_tensor *labels = tg_input(g, "labels", TG_I32, tg_shape1(4));
    tg_block_begin(g, "B1");
    tg_tensor *w1 = tg_param(g, "w1", tg_shape2(6, 6), (tg_init){TG_INIT_FAN_IN_UNIFORM, 6, 0});
    tg_tensor *a = tg_tanh(g, tg_linear(g, x, w1, NULL));
    tg_block_begin(g, "B2");
    tg_tensor *t = tg_transpose(g, tg_transpose(g, a, swap), swap);
    tg_tensor *w2 = tg_param(g, "w2", tg_shape2(3, 6), (tg_init){TG_INIT_FAN_IN_UNIFORM, 6, 0});
    tg_tensor *loss = tg_cross_entropy(g, tg_linear(g, t, w2, NULL), labels);
    tg_block_end(g);
    tg_tensor_mark_output(loss);
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.0f);
    TG_CHECK_OK(tg_graph_backward(g, loss));
    TG_CHECK_OK(tg_graph_add_optimizer(g, &opt));
    net n = {.g = g};
    for (int on = 0; on < 2; on++) {
        tg_program *p = compile(&n, on ? "pipeline" : "none", false);
        int found = 0;
        for (int i = 0; p && i < p->n_transfers; i++) {
            const tg_transfer *tr = &p->transfers[i];
            if (tr->node != a->id || tr->dst_device != 1)
                continue;
            found++;
            TG_CHECK(tr->used_forward);
            TG_CHECK(tr->used_backward == (on == 1));
        }
        TG_CHECK(found == 1);
        tg_program_destroy(p);
    }
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_pipeline_recomputes_stage_values);
    TG_RUN(test_checkpoint_is_kept);
    TG_RUN(test_state_updates_never_rerun);
    TG_RUN(test_inference_recomputes_nothing);
    TG_RUN(test_received_value_held_for_recomputation);
    return tg_test_finish();
}
