/* tests/compile/test_schedule.c - which nodes run and in what order: only
 * what the outputs and updates need, in creation order where the data
 * allows; every node after its inputs; every update of a tensor after every
 * other reader of it; and in a compiled program, every step of a device
 * after the steps of that device and phase whose values it reads.
 * TG_TEST_LABELS: quick */
#include "tg_test.h"

#include "compile/program.h"
#include "core/alloc.h"
#include "tilegraph/optim.h"

#include <string.h>

typedef struct {
    int *order, n;
    int *pos; /* per node: its place in order, -1 when it does not run */
} schedule;

static schedule schedule_of(const tg_graph *g)
{
    schedule s = {NULL, 0, NULL};
    TG_CHECK_OK(tg_schedule(g, &s.order, &s.n));
    s.pos = tg_malloc(((size_t)g->n_nodes + 1) * sizeof *s.pos);
    for (int i = 0; i < g->n_nodes; i++)
        s.pos[i] = -1;
    for (int k = 0; k < s.n; k++) {
        TG_CHECK(s.pos[s.order[k]] == -1); /* each node once */
        s.pos[s.order[k]] = k;
    }
    return s;
}

static void schedule_free(schedule *s)
{
    tg_free(s->order);
    tg_free(s->pos);
}

/* Every scheduled node after its inputs, and every update after every
 * other reader of what it updates. */
static void check_order(const tg_graph *g, const schedule *s)
{
    for (int k = 0; k < s->n; k++) {
        const tg_tensor *t = g->nodes[s->order[k]];
        for (int j = 0; j < t->n_in; j++)
            if (s->pos[t->in[j]->id] < 0 || s->pos[t->in[j]->id] >= k)
                tg_test_fail(__FILE__, __LINE__, "'%s' runs at %d, its input '%s' at %d", t->name,
                             k, t->in[j]->name, s->pos[t->in[j]->id]);
        for (int m = 0; m < t->n_mutated; m++)
            for (int i = 0; i < g->n_nodes; i++) {
                const tg_tensor *r = g->nodes[i];
                for (int j = 0; r != t && s->pos[i] >= 0 && j < r->n_in; j++)
                    if (r->in[j] == t->in[m] && s->pos[i] > k)
                        tg_test_fail(__FILE__, __LINE__, "'%s' reads '%s' after its update '%s'",
                                     r->name, t->in[m]->name, t->name);
            }
    }
}

static void test_only_what_is_needed_in_creation_order(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(2, 3));
    tg_tensor *a = tg_relu(g, x);
    tg_tensor *dead = tg_exp(g, x); /* nothing reads it, not an output */
    tg_tensor *b = tg_tanh(g, x);
    tg_tensor *c = tg_add(g, a, b);
    tg_tensor_mark_output(c);
    TG_CHECK_OK(tg_graph_status(g));
    schedule s = schedule_of(g);
    int want[] = {x->id, a->id, b->id, c->id};
    TG_CHECK(s.n == 4 && s.pos[dead->id] == -1);
    for (int k = 0; k < s.n && k < 4; k++)
        TG_CHECK(s.order[k] == want[k]);
    schedule_free(&s);
    /* the dead branch runs once it is an output too */
    tg_tensor_mark_output(dead);
    s = schedule_of(g);
    TG_CHECK(s.n == 5 && s.pos[dead->id] == 2);
    schedule_free(&s);
    tg_graph_destroy(g);
}

/* An MLP trained with momentum SGD, and a node made after the optimizer
 * that reads a weight: it must run before the weight's update, against
 * creation order. */
static void test_updates_after_every_reader(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(4, 6));
    tg_tensor *labels = tg_input(g, "labels", TG_I32, tg_shape1(4));
    tg_tensor *w1 = tg_param(g, "w1", tg_shape2(8, 6), (tg_init){TG_INIT_FAN_IN_UNIFORM, 6, 0});
    tg_tensor *w2 = tg_param(g, "w2", tg_shape2(3, 8), (tg_init){TG_INIT_FAN_IN_UNIFORM, 8, 0});
    tg_tensor *h = tg_relu(g, tg_linear(g, x, w1, NULL));
    tg_tensor *loss = tg_cross_entropy(g, tg_linear(g, h, w2, NULL), labels);
    tg_tensor_mark_output(loss);
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.9f);
    TG_CHECK_OK(tg_graph_backward(g, loss));
    TG_CHECK_OK(tg_graph_add_optimizer(g, &opt));
    tg_tensor *norm = tg_reduce_sum(g, tg_mul(g, w1, w1), 3u, false);
    tg_tensor_mark_output(norm);
    TG_CHECK_OK(tg_graph_status(g));
    schedule s = schedule_of(g);
    check_order(g, &s);
    int updates = 0, update_w1 = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        TG_CHECK(s.pos[i] >= 0); /* everything here is needed */
        updates += tg_is_weight_update(t);
        if (tg_is_weight_update(t) && t->in[0] == w1)
            update_w1 = i;
    }
    TG_CHECK(updates == 2 && update_w1 >= 0);
    /* made after the update, scheduled before it */
    TG_CHECK(update_w1 >= 0 && norm->id > update_w1);
    TG_CHECK(update_w1 >= 0 && s.pos[norm->in[0]->id] < s.pos[update_w1]);
    schedule_free(&s);
    tg_graph_destroy(g);
}

/* In a program over two devices: per device and phase, a step reading a
 * value that another step of the same device and phase makes comes after
 * it, each step is on its node's device, and every node that computes is
 * exactly one step. */
static void test_program_steps_follow_their_inputs(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(4, 6));
    tg_tensor *labels = tg_input(g, "labels", TG_I32, tg_shape1(4));
    tg_tensor *h = x;
    for (int k = 0; k < 4; k++) {
        char name[8];
        snprintf(name, sizeof name, "B%d", k + 1);
        if (k % 2 == 0)
            tg_block_begin(g, name);
        tg_tensor *w = tg_param(g, "w", tg_shape2(6, 6), (tg_init){TG_INIT_FAN_IN_UNIFORM, 6, 0});
        h = tg_relu(g, tg_linear(g, h, w, NULL));
    }
    tg_block_end(g);
    tg_tensor *loss = tg_cross_entropy(g, h, labels);
    tg_tensor_mark_output(loss);
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    TG_CHECK_OK(tg_graph_backward(g, loss));
    TG_CHECK_OK(tg_graph_add_optimizer(g, &opt));
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "executionStrategy", "pipelined"));
    TG_CHECK_OK(tg_options_set_int(o, "Training.gradientAccumulation", 2));
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(g, o, &p));
    TG_CHECK(p && p->n_devices == 2);
    int checked = 0;
    for (int d = 0; p && d < p->n_devices; d++)
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++) {
            const tg_device_program *dp = &p->devices[d];
            TG_CHECK(dp->n_steps[ph] > 0);
            for (int k = 0; k < dp->n_steps[ph]; k++) {
                const tg_step *st = &dp->steps[ph][k];
                TG_CHECK(p->device_of[st->node] == d);
                for (int j = 0; j < g->nodes[st->node]->n_in; j++)
                    for (int e = k + 1; st->in[j] >= 0 && e < dp->n_steps[ph]; e++)
                        if (dp->steps[ph][e].out == st->in[j])
                            tg_test_fail(__FILE__, __LINE__,
                                         "device %d phase %d: step %d '%s' reads what step %d "
                                         "makes",
                                         d, ph, k, g->nodes[st->node]->name, e);
                checked++;
            }
        }
    /* every node that runs as a step is one step: forward, backward, update */
    schedule s = schedule_of(g);
    int runs = 0;
    for (int k = 0; k < s.n; k++) {
        const tg_tensor *t = g->nodes[s.order[k]];
        runs += t->n_in > 0 && !(t->flags & TG_NODE_ALIAS);
    }
    TG_CHECK(checked == runs);
    schedule_free(&s);
    tg_program_destroy(p);
    tg_options_destroy(o);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_only_what_is_needed_in_creation_order);
    TG_RUN(test_updates_after_every_reader);
    TG_RUN(test_program_steps_follow_their_inputs);
    return tg_test_finish();
}
