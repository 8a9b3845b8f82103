/* tests/runtime/test_recompute.c - recomputation keeps the numbers and
 * shrinks what is kept between the passes. */
#include "tg_test.h"

#include "core/rng.h"
#include "runtime/session_internal.h"
#include "tilegraph/models.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    tg_model_graph mg;
    tg_session *s;
} run_ctx;

static void train(run_ctx *c, const char *const *kv, int runs, bool checkpoint)
{
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), 8, &opt, &c->mg));
    if (checkpoint) /* keep layer1's output instead of recomputing it */
        tg_recomputation_checkpoint(c->mg.graph, tg_graph_find(c->mg.graph, "layer1/relu"));
    tg_options *o = tg_options_create();
    tg_options_set(o, "threadsPerDevice", "1");
    for (int i = 0; kv && kv[i]; i += 2)
        TG_CHECK_OK(tg_options_set(o, kv[i], kv[i + 1]));
    TG_CHECK_OK(tg_session_create(c->mg.graph, o, &c->s));
    tg_options_destroy(o);
    int64_t n = c->s ? tg_session_samples_per_run(c->s, c->mg.images) : 0;
    float *img = malloc((size_t)n * 784 * sizeof(float));
    int32_t *lab = malloc((size_t)n * sizeof(int32_t));
    tg_rng r;
    tg_rng_seed(&r, 4);
    for (int k = 0; c->s && k < runs; k++) {
        for (int64_t i = 0; i < n * 784; i++)
            img[i] = (float)tg_rng_uniform(&r);
        for (int64_t i = 0; i < n; i++)
            lab[i] = (int32_t)tg_rng_below(&r, 10);
        tg_session_write(c->s, c->mg.images, img, (size_t)n * 784 * sizeof(float));
        tg_session_write(c->s, c->mg.labels, lab, (size_t)n * sizeof(int32_t));
        TG_CHECK_OK(tg_session_run(c->s));
    }
    free(img);
    free(lab);
}

static size_t total(const tg_program *p, tg_region r)
{
    size_t sum = 0;
    for (int d = 0; d < p->n_devices; d++)
        sum += p->devices[d].region_bytes[r];
    return sum;
}

static void compare(const char *const *base, const char *const *recomputed, bool checkpoint)
{
    run_ctx a = {0}, b = {0};
    train(&a, base, 3, false);
    train(&b, recomputed, 3, checkpoint);
    if (a.s && b.s) {
        const tg_graph *g = a.mg.graph;
        for (int i = 0; i < g->n_nodes; i++) {
            const tg_tensor *t = g->nodes[i];
            if (t->op == TG_OP_PARAM)
                TG_CHECK(memcmp(tg_session_data(a.s, t),
                                tg_session_data(b.s, tg_graph_find(b.mg.graph, t->name)),
                                tg_nbytes(t)) == 0);
        }
        const tg_program *pa = tg_session_program(a.s), *pb = tg_session_program(b.s);
        double fa = 0, fb = 0;
        for (int d = 0; d < pa->n_devices; d++) {
            fa += pa->devices[d].flops[TG_PHASE_BACKWARD];
            fb += pb->devices[d].flops[TG_PHASE_BACKWARD];
        }
        TG_CHECK(fb > fa); /* the forward work is done again */
        if (pa->n_devices > 1)
            TG_CHECK(total(pb, TG_REGION_STASH) < total(pa, TG_REGION_STASH));
        TG_CHECK(pb->arena_bytes <= pa->arena_bytes);
    }
    tg_session_destroy(a.s);
    tg_session_destroy(b.s);
    tg_model_graph_destroy(&a.mg);
    tg_model_graph_destroy(&b.mg);
}

static void test_recompute_one_device(void)
{
    compare(NULL, (const char *[]){"recomputation", "pipeline", NULL}, false);
}

static void test_recompute_pipelined_stages(void)
{
    const char *base[] = {"executionStrategy", "pipelined", "Training.gradientAccumulation", "8", NULL};
    const char *re[] = {"executionStrategy", "pipelined", "Training.gradientAccumulation", "8",
                        "recomputation", "pipeline", NULL};
    compare(base, re, false);
    compare(base, re, true);
}

int main(void)
{
    TG_RUN(test_recompute_one_device);
    TG_RUN(test_recompute_pipelined_stages);
    return tg_test_finish();
}
