/* tests/target/test_tilesim.c - the mk2 timeline of a host step under the
 * zero-bubble schedules: a backward comes as B then W, together the cycles
 * of 1f1b's one backward, W after its B on the device, and the host step no
 * longer than 1f1b's. */
#include "tg_test.h"

#include "compile/program.h"
#include "target/target.h"
#include "tilegraph/models.h"
#include "tilegraph/optim.h"

enum { MB = 8, DEVICES = 4 };

typedef struct timeline {
    double backward[DEVICES]; /* cycles of B and W passes */
    int weights[DEVICES];     /* W passes */
    double b_end[DEVICES][MB];
    bool w_after_b;
    double step; /* the last event's end */
} timeline;

static tg_status record(void *ctx, int d, int phase, tg_tile_piece piece, int it, int j,
                        double start, double end)
{
    timeline *t = ctx;
    (void)it;
    if (end > t->step)
        t->step = end;
    if (phase != TG_PHASE_BACKWARD)
        return TG_OK;
    t->backward[d] += end - start;
    if (piece == TG_TILE_WEIGHT) {
        t->weights[d]++;
        t->w_after_b &= start >= t->b_end[d][j];
    } else {
        t->b_end[d][j] = end;
    }
    return TG_OK;
}

static tg_program *compile_mk2(const tg_graph *g, const char *schedule)
{
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "target", "mk2"));
    TG_CHECK_OK(tg_options_set(o, "executionStrategy", "pipelined"));
    TG_CHECK_OK(tg_options_set(o, "pipelineSchedule", schedule));
    TG_CHECK_OK(tg_options_set_int(o, "Training.gradientAccumulation", MB));
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(g, o, &p));
    tg_options_destroy(o);
    return p;
}

static void test_split_backward_on_the_timeline(void)
{
    tg_model_graph mg = {0};
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), 8, &opt, &mg));
    tg_program *ref = compile_mk2(mg.graph, "1f1b"), *zb = compile_mk2(mg.graph, "zb-h1");
    timeline a = {.w_after_b = true}, b = {.w_after_b = true};
    TG_CHECK(ref && zb && ref->n_devices == DEVICES && zb->n_devices == DEVICES);
    if (ref && zb && ref->n_devices == DEVICES && zb->n_devices == DEVICES) {
        TG_CHECK_OK(tg_tile_simulate(ref, record, &a));
        TG_CHECK_OK(tg_tile_simulate(zb, record, &b));
        for (int d = 0; d < DEVICES; d++) {
            double per_mb = zb->tile_plan->devices[d].cycles[TG_PHASE_BACKWARD];
            TG_CHECK(a.weights[d] == 0 && b.weights[d] == MB);
            TG_CHECK_NEAR(a.backward[d], MB * per_mb, 1e-6 * MB * per_mb);
            TG_CHECK_NEAR(b.backward[d], MB * per_mb, 1e-6 * MB * per_mb);
        }
        TG_CHECK(b.w_after_b);
        TG_CHECK(b.step <= a.step);
    }
    tg_program_destroy(ref);
    tg_program_destroy(zb);
    tg_model_graph_destroy(&mg);
}

int main(void)
{
    TG_RUN(test_split_backward_on_the_timeline);
    return tg_test_finish();
}
