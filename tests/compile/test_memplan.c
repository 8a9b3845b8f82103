/* tests/compile/test_memplan.c - schedule order and memory plan invariants.
 * TG_TEST_LABELS: quick isa */
#include "tg_test.h"

#include "compile/program.h"
#include "core/rng.h"
#include "tilegraph/optim.h"

static size_t align64(size_t x)
{
    return (x + 63) & ~(size_t)63;
}

static tg_program *compile_single(const tg_graph *g, int threads)
{
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", threads);
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(g, o, &p));
    tg_options_destroy(o);
    return p;
}

/* Every pair of buffers of one device live at the same step occupies
 * disjoint bytes, and so does every step's scratch. */
static void check_no_overlap(const tg_program *p)
{
    const tg_graph *g = p->graph;
    for (int i = 0; i < p->n_buffers; i++) {
        const tg_buffer *a = &p->buffers[i];
        size_t a_end = a->offset + a->stride * (size_t)a->slots;
        const tg_device_program *dp = &p->devices[a->device];
        TG_CHECK(a->offset % TG_ALIGN == 0);
        TG_CHECK(a_end <= dp->arena_bytes);
        for (int j = i + 1; j < p->n_buffers; j++) {
            const tg_buffer *b = &p->buffers[j];
            if (b->device != a->device)
                continue;
            bool time = a->first <= b->last && b->first <= a->last;
            bool space = a->offset < b->offset + b->stride * (size_t)b->slots && b->offset < a_end;
            if (time && space)
                tg_test_fail(__FILE__, __LINE__, "'%s' and '%s' overlap in time and space",
                             g->nodes[a->node]->name, g->nodes[b->node]->name);
        }
        int base = 0;
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++) {
            for (int s = 0; s < dp->n_steps[ph]; s++) {
                const tg_step *st = &dp->steps[ph][s];
                int at = base + s;
                if (!st->scratch_bytes || at < a->first || at > a->last)
                    continue;
                if (a->offset < st->scratch_offset + st->scratch_bytes &&
                    st->scratch_offset < a_end)
                    tg_test_fail(__FILE__, __LINE__, "scratch of step %d overlaps '%s'", at,
                                 g->nodes[a->node]->name);
            }
            base += dp->n_steps[ph];
        }
    }
}

static int total_steps(const tg_program *p)
{
    int n = 0;
    for (int d = 0; d < p->n_devices; d++)
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
            n += p->devices[d].n_steps[ph];
    return n;
}

static void test_chain_reuses_memory(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(100, 100));
    tg_tensor *h = x;
    for (int i = 0; i < 6; i++)
        h = tg_relu(g, h);
    tg_tensor_mark_output(h);
    TG_CHECK_OK(tg_graph_status(g));
    tg_program *p = compile_single(g, 1);
    if (p) {
        const tg_device_program *dp = &p->devices[0];
        TG_CHECK(total_steps(p) == 6);
        size_t one = align64(100 * 100 * 4);
        /* a chain needs two buffers at a time, whatever its length */
        TG_CHECK(dp->region_bytes[TG_REGION_ACTIVATION] == 2 * one);
        TG_CHECK(dp->region_bytes[TG_REGION_INPUT] == one);
        TG_CHECK(dp->arena_bytes == 3 * one);
        check_no_overlap(p);
    }
    tg_program_destroy(p);
    tg_graph_destroy(g);
}

static void test_dead_code_is_not_scheduled(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape1(8));
    tg_tensor *used = tg_relu(g, x);
    tg_tensor *unused = tg_tanh(g, x);
    (void)unused;
    tg_tensor_mark_output(used);
    tg_program *p = compile_single(g, 1);
    if (p) {
        TG_CHECK(total_steps(p) == 1);
        TG_CHECK(p->devices[0].steps[TG_PHASE_FORWARD][0].node == used->id);
        TG_CHECK(p->home[unused->id] < 0);
    }
    tg_program_destroy(p);
    tg_graph_destroy(g);
}

/* Random DAGs of elementwise ops: the plan never overlaps live buffers. */
static void test_random_dags_never_overlap(void)
{
    tg_rng rng;
    tg_rng_seed(&rng, 3);
    for (int trial = 0; trial < 30; trial++) {
        tg_graph *g = tg_graph_create();
        tg_tensor *nodes[64];
        int n = 0;
        nodes[n++] = tg_input(g, "x", TG_F32, tg_shape1(16 + (int64_t)tg_rng_below(&rng, 500)));
        int64_t len = tg_shape_numel(tg_tensor_shape(nodes[0]));
        nodes[n++] = tg_input(g, "y", TG_F32, tg_shape1(len));
        for (int i = 0; i < 40; i++) {
            tg_tensor *a = nodes[tg_rng_below(&rng, (uint64_t)n)];
            tg_tensor *b = nodes[tg_rng_below(&rng, (uint64_t)n)];
            nodes[n++] = tg_rng_below(&rng, 2) ? tg_add(g, a, b) : tg_relu(g, a);
        }
        for (int i = 0; i < 3; i++)
            tg_tensor_mark_output(nodes[n - 1 - (int)tg_rng_below(&rng, 10)]);
        tg_program *p = compile_single(g, 2);
        if (p)
            check_no_overlap(p);
        tg_program_destroy(p);
        tg_graph_destroy(g);
    }
}

/* A parameter update must wait for every reader of the old value, even a
 * reader created after the update node. */
static void test_update_runs_after_readers(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(4, 3));
    tg_tensor *w = tg_param(g, "w", tg_shape2(4, 3), (tg_init){TG_INIT_UNIFORM, -1, 1});
    tg_tensor *loss = tg_reduce_sum(g, tg_mul(g, x, w), 3u, false);
    tg_tensor_mark_output(loss);
    TG_CHECK_OK(tg_graph_backward(g, loss));
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.0f);
    TG_CHECK_OK(tg_graph_add_optimizer(g, &opt));
    tg_tensor *late_reader = tg_relu(g, w); /* made after the update */
    tg_tensor_mark_output(late_reader);
    tg_program *p = compile_single(g, 1);
    if (p) {
        /* the late reader is a forward op: it runs in the forward phase,
         * before the update phase */
        const tg_device_program *dp = &p->devices[0];
        bool reader_forward = false, update_in_update = false;
        for (int s = 0; s < dp->n_steps[TG_PHASE_FORWARD]; s++)
            reader_forward |= dp->steps[TG_PHASE_FORWARD][s].node == late_reader->id;
        for (int s = 0; s < dp->n_steps[TG_PHASE_UPDATE]; s++)
            update_in_update |= g->nodes[dp->steps[TG_PHASE_UPDATE][s].node]->n_mutated > 0;
        TG_CHECK(reader_forward && update_in_update);
        check_no_overlap(p);
    }
    tg_program_destroy(p);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_chain_reuses_memory);
    TG_RUN(test_dead_code_is_not_scheduled);
    TG_RUN(test_random_dags_never_overlap);
    TG_RUN(test_update_runs_after_readers);
    return tg_test_finish();
}
