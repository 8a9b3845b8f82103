/* tests/target/test_tilesim.c - the mk2 timeline of a host step under the
 * zero-bubble schedules: a backward comes as B then W, together the cycles
 * of 1f1b's one backward, W after its B on the device, and the host step no
 * longer than 1f1b's. With I/O tiles (numIOTiles) a model whose stream
 * copies take over 10% of the cycles gets that time back, the copies
 * overlapping the compute on the timeline. */
#include "tg_test.h"
#include "tg_test_train.h"

#include <stdio.h>

#include "compile/program.h"
#include "target/tiled.h"
#include "tilegraph/models.h"
#include "tilegraph/nn.h"
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

typedef struct io_timeline {
    double step, streamed;
    double pass_start[2 * MB + 2], pass_end[2 * MB + 2];
    double in_start[MB], in_end[MB];
    int passes, ins;
} io_timeline;

static tg_status record_io(void *ctx, int d, int phase, tg_tile_piece piece, int it, int j,
                           double start, double end)
{
    io_timeline *t = ctx;
    (void)d, (void)phase, (void)it, (void)j;
    t->step = end > t->step ? end : t->step;
    if (piece == TG_TILE_STREAM_IN && t->ins < MB) {
        t->in_start[t->ins] = start;
        t->in_end[t->ins++] = end;
        t->streamed += end - start;
    } else if (piece != TG_TILE_STREAM_IN && t->passes < 2 * MB + 2) {
        t->pass_start[t->passes] = start;
        t->pass_end[t->passes++] = end;
    }
    return TG_OK;
}

static tg_program *compile_io(const tg_graph *g, int io_tiles)
{
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "target", "mk2"));
    TG_CHECK_OK(tg_options_set_int(o, "Training.gradientAccumulation", MB));
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    TG_CHECK_OK(tg_options_set_int(o, "numIOTiles", io_tiles));
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(g, o, &p));
    tg_options_destroy(o);
    return p;
}

static void test_io_tiles_overlap_stream_copies(void)
{
    /* its 128 KiB stream in is a fifth of a micro-batch's cycles on mk2 */
    tg_graph *g = tg_test_linear_stack(32);
    tg_program *serial = compile_io(g, 0), *io = compile_io(g, 4);
    io_timeline a = {0}, b = {0};
    if (serial && io) {
        TG_CHECK_OK(tg_tile_simulate(serial, record_io, &a));
        TG_CHECK_OK(tg_tile_simulate(io, record_io, &b));
        double copy = tg_tile_stream_in_cycles(serial, 0);
        /* without I/O tiles the copies are inside the passes, over 10% of the step */
        TG_CHECK(a.ins == 0 && MB * copy > 0.10 * a.step);
        /* with them: one copy per micro-batch beside the compute, and all but
         * the first one's time back (compute runs on 4 tiles fewer) */
        TG_CHECK(b.ins == MB);
        TG_CHECK_NEAR(b.streamed, MB * copy, 1e-6 * MB * copy);
        TG_CHECK(a.step - b.step >= 0.95 * (MB - 1) * copy);
        int overlapping = 0;
        for (int k = 0; k < b.ins; k++)
            for (int q = 0; q < b.passes; q++)
                if (b.in_start[k] < b.pass_end[q] && b.in_end[k] > b.pass_start[q]) {
                    overlapping++;
                    break;
                }
        TG_CHECK(overlapping == MB - 1);
    }
    tg_program_destroy(serial);
    tg_program_destroy(io);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_split_backward_on_the_timeline);
    TG_RUN(test_io_tiles_overlap_stream_copies);
    return tg_test_finish();
}
