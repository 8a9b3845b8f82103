/* tests/runtime/test_recompute.c - recomputation keeps the numbers and
 * shrinks what is kept between the passes. */
#include "tg_test.h"
#include "tg_test_train.h"

#include "runtime/session_internal.h"
#include "tilegraph/models.h"

#include <stdlib.h>
#include <string.h>

static void checkpoint_layer1(tg_graph *g)
{
    /* keep layer1's output instead of recomputing it */
    tg_recomputation_checkpoint(g, tg_graph_find(g, "layer1/relu"));
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
    tg_optimizer opt = tg_optimizer_adamw(0.01f);
    tg_test_model a, b;
    tg_test_train(&a, 8, &opt, base, 3, 4, NULL);
    tg_test_train(&b, 8, &opt, recomputed, 3, 4, checkpoint ? checkpoint_layer1 : NULL);
    if (a.s && b.s) {
        TG_CHECK(tg_test_same_weights(&a, &b, false));
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
    tg_test_model_destroy(&a);
    tg_test_model_destroy(&b);
}

static void test_recompute_one_device(void)
{
    compare(NULL, (const char *[]){"recomputation", "pipeline", NULL}, false);
}

static void test_recompute_pipelined_stages(void)
{
    const char *base[] = {"executionStrategy", "pipelined", "Training.gradientAccumulation", "8",
                          NULL};
    const char *re[] = {
        "executionStrategy", "pipelined", "Training.gradientAccumulation", "8", "recomputation",
        "pipeline",          NULL};
    compare(base, re, false);
    compare(base, re, true);
}

int main(void)
{
    TG_RUN(test_recompute_one_device);
    TG_RUN(test_recompute_pipelined_stages);
    return tg_test_finish();
}
