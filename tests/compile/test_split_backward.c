/* tests/compile/test_split_backward.c - a device's backward as B (input
 * gradient) then W (weight gradient) under the zero-bubble schedules: B is
 * exactly what the gradients sent back depend on, no B step reads a W
 * step, the steps are 1f1b's in another order, the first device's backward
 * is all W, other schedules keep their order, and where W waits behind other
 * passes (zb-h2) what it reads from B has a slot per micro-batch. */
#include "tg_test.h"

#include "compile/program.h"
#include "tilegraph/models.h"

#include <string.h>

static tg_program *compile_with(const tg_graph *g, const char *schedule)
{
    tg_options *o = tg_options_create();
    const char *kv[] = {"executionStrategy",
                        "pipelined",
                        "stages",
                        "B1,B2|B3,B4",
                        "pipelineSchedule",
                        schedule,
                        "Training.gradientAccumulation",
                        "8",
                        "threadsPerDevice",
                        "1",
                        NULL};
    tg_test_options_set(o, kv);
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(g, o, &p));
    tg_options_destroy(o);
    return p;
}

static bool sent_back(const tg_program *p, int d, int buffer)
{
    for (int k = 0; k < p->n_transfers; k++)
        if (p->transfers[k].src_device == d && p->transfers[k].phase == TG_PHASE_BACKWARD &&
            p->transfers[k].src_buffer == buffer)
            return true;
    return false;
}

/* Whether any of steps [begin, end) of device d's backward reads buffer b. */
static bool read_by(const tg_program *p, int d, int begin, int end, int b)
{
    const tg_device_program *dp = &p->devices[d];
    for (int k = begin; k < end; k++) {
        const tg_step *st = &dp->steps[TG_PHASE_BACKWARD][k];
        for (int i = 0; i < p->graph->nodes[st->node]->n_in; i++)
            if (st->in[i] == b)
                return true;
    }
    return false;
}

/* Every B step is sent back or read by a B step; no W step is. */
static void check_partition(const tg_program *p, int d)
{
    const tg_device_program *dp = &p->devices[d];
    int n_b = dp->input_grad_steps, n = dp->n_steps[TG_PHASE_BACKWARD];
    for (int k = 0; k < n; k++) {
        int out = dp->steps[TG_PHASE_BACKWARD][k].out;
        bool feeds_b = out >= 0 && (sent_back(p, d, out) || read_by(p, d, 0, n_b, out));
        if (feeds_b != (k < n_b))
            tg_test_fail(__FILE__, __LINE__, "device %d backward step %d ('%s'): %s", d, k,
                         p->graph->nodes[dp->steps[TG_PHASE_BACKWARD][k].node]->name,
                         k < n_b ? "in B but nothing sent back depends on it"
                                 : "in W but a B step or a sent gradient needs it");
    }
}

/* The backward steps of a and b are the same nodes, in any order. */
static bool same_steps(const tg_device_program *a, const tg_device_program *b)
{
    int n = a->n_steps[TG_PHASE_BACKWARD];
    if (n != b->n_steps[TG_PHASE_BACKWARD])
        return false;
    for (int k = 0; k < n; k++) {
        bool found = false;
        for (int i = 0; i < n && !found; i++)
            found = a->steps[TG_PHASE_BACKWARD][k].node == b->steps[TG_PHASE_BACKWARD][i].node;
        if (!found)
            return false;
    }
    return true;
}

static void test_partition(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.05f, 0.9f);
    tg_model_graph mg;
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), 8, &opt, &mg));
    tg_program *ref = compile_with(mg.graph, "1f1b");
    tg_program *zb = compile_with(mg.graph, "zb-h1");
    for (int d = 0; ref && zb && d < 2; d++) {
        const tg_device_program *r = &ref->devices[d], *z = &zb->devices[d];
        /* 1f1b runs the whole backward as one pass, in the order it had */
        TG_CHECK(r->input_grad_steps == r->n_steps[TG_PHASE_BACKWARD]);
        TG_CHECK(same_steps(r, z));
        check_partition(zb, d);
        /* zb-h1 runs every W right after its B: nothing more is stashed */
        TG_CHECK(z->region_bytes[TG_REGION_STASH] == r->region_bytes[TG_REGION_STASH]);
    }
    /* the second device's receive buffers have a slot more than the stash:
     * W still reads micro-batch j's activation when B has sent its
     * gradient back, and the first device's next forward must not wait for
     * W to free that slot (memplan.c, region_slots) */
    int received = 0;
    for (int i = 0; zb && i < zb->n_buffers; i++) {
        const tg_buffer *b = &zb->buffers[i];
        if (b->device != 1 || b->region != TG_REGION_EXCHANGE)
            continue;
        received++;
        TG_CHECK(b->slots == zb->devices[1].stash_depth + 1);
    }
    TG_CHECK(received > 0);
    TG_CHECK(ref && zb &&
             zb->devices[1].region_bytes[TG_REGION_EXCHANGE] ==
                 2 * ref->devices[1].region_bytes[TG_REGION_EXCHANGE]); /* 1f1b: depth 1 */
    /* the first device sends nothing back: all W; the second has both */
    TG_CHECK(zb && zb->devices[0].input_grad_steps == 0);
    TG_CHECK(zb && zb->devices[1].input_grad_steps > 0 &&
             zb->devices[1].input_grad_steps < zb->devices[1].n_steps[TG_PHASE_BACKWARD]);
    tg_program_destroy(ref);
    tg_program_destroy(zb);
    tg_model_graph_destroy(&mg);
}

/* zb-h2 runs other passes between a B and its W on device 1: a value B
 * writes and W reads is in the stash, one slot per micro-batch in flight. */
static void test_deferred_weight_is_stashed(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.05f, 0.9f);
    tg_model_graph mg;
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), 8, &opt, &mg));
    tg_program *p = compile_with(mg.graph, "zb-h2");
    const tg_device_program *dp = p ? &p->devices[1] : NULL;
    int crossing = 0;
    for (int k = 0; dp && k < dp->input_grad_steps; k++) {
        int out = dp->steps[TG_PHASE_BACKWARD][k].out;
        if (out < 0 || !read_by(p, 1, dp->input_grad_steps, dp->n_steps[TG_PHASE_BACKWARD], out))
            continue;
        crossing++;
        TG_CHECK(p->buffers[out].region == TG_REGION_STASH);
        TG_CHECK(p->buffers[out].slots == dp->stash_depth && dp->stash_depth > 1);
    }
    TG_CHECK(crossing > 0 && tg_pipe_schedule_defers_weight(&p->schedule, 1));
    tg_program_destroy(p);
    tg_model_graph_destroy(&mg);
}

int main(void)
{
    TG_RUN(test_partition);
    TG_RUN(test_deferred_weight_is_stashed);
    return tg_test_finish();
}
