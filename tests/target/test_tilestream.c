/* tests/target/test_tilestream.c - streaming memory and gathers in the mk2
 * cycle model (target/tilestream.c). With I/O tiles (numIOTiles) the
 * streamed copies of offloaded weights run beside the compute: a pass is
 * shorter than its compute plus its copies, never shorter than either, and
 * the host step falls; the compute tiles hold more as the I/O tiles take
 * tiles away. Without I/O tiles a pass is its steps plus its copies, as it
 * was. The gathers of sharded weights cost link cycles and exchange code. */
#include "tg_test.h"
#include "tg_test_train.h"

#include <stdio.h>

#include "compile/program.h"
#include "target/tiled.h"
#include "tilegraph/nn.h"
#include "tilegraph/optim.h"

/* kv: key, value, ..., NULL over the mk2 defaults */
static tg_program *compile_mk2(const tg_graph *g, const char *const *kv)
{
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "target", "mk2"));
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    for (int i = 0; kv && kv[i]; i += 2)
        TG_CHECK_OK(tg_options_set(o, kv[i], kv[i + 1]));
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(g, o, &p));
    tg_options_destroy(o);
    return p;
}

static tg_status last_end(void *ctx, int d, int phase, tg_tile_piece piece, int it, int j,
                          double start, double end)
{
    (void)d, (void)phase, (void)piece, (void)it, (void)j, (void)start;
    double *step = ctx;
    if (end > *step)
        *step = end;
    return TG_OK;
}

static double host_step(const tg_program *p)
{
    double step = 0;
    TG_CHECK_OK(tg_tile_simulate(p, last_end, &step));
    return step;
}

static double steps_sum(const tg_program *p, int ph)
{
    double sum = 0;
    for (int k = 0; k < p->devices[0].n_steps[ph]; k++)
        sum += p->tile_plan->devices[0].step_cycles[ph][k];
    return sum;
}

static void test_io_tiles_overlap_streamed_weights(void)
{
    tg_graph *g = tg_test_linear_stack(256);
    const char *io[4] = {"0", "32", "128"};
    tg_program *p[3] = {0};
    for (int k = 0; k < 3; k++) {
        const char *kv[] = {"TensorLocations.weight.onChip", "false", "numIOTiles", io[k], NULL};
        p[k] = compile_mk2(g, kv);
    }
    if (p[0] && p[1] && p[2]) {
        const tg_tile_device *none = &p[0]->tile_plan->devices[0];
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++) {
            /* no I/O tiles: steps plus copies, as before (nothing beside) */
            TG_CHECK_NEAR(none->cycles[ph], steps_sum(p[0], ph) + none->copy_cycles[ph],
                          1e-9 * none->cycles[ph]);
            TG_CHECK(tg_tile_hidden_cycles(p[0], 0, ph) == 0);
        }
        for (int k = 1; k < 3; k++) {
            const tg_tile_device *td = &p[k]->tile_plan->devices[0];
            for (int ph = TG_PHASE_FORWARD; ph <= TG_PHASE_BACKWARD; ph++) {
                double steps = steps_sum(p[k], ph), serial = steps + td->copy_cycles[ph];
                TG_CHECK(p[k]->devices[0].stream_in_bytes[ph] > 0);
                TG_CHECK(td->cycles[ph] < serial); /* copies beside the compute */
                TG_CHECK(td->cycles[ph] >= steps && td->cycles[ph] >= td->copy_cycles[ph] / 2);
                TG_CHECK(tg_tile_hidden_cycles(p[k], 0, ph) > 0);
                TG_CHECK(td->cycles[ph] < none->cycles[ph]);
            }
            TG_CHECK(host_step(p[k]) < host_step(p[0]));
        }
        /* the I/O tiles leave the compute fewer tiles: each holds more */
        int64_t full[3];
        for (int k = 0; k < 3; k++) {
            full[k] = 0;
            for (int t = 0; t < p[k]->tile_plan->target.tiles - p[k]->tile_plan->target.io_tiles;
                 t++)
                if (tg_tile_bytes(p[k]->tile_plan, 0, t) > full[k])
                    full[k] = tg_tile_bytes(p[k]->tile_plan, 0, t);
        }
        TG_CHECK(full[0] < full[1] && full[1] < full[2]);
    }
    for (int k = 0; k < 3; k++)
        tg_program_destroy(p[k]);
    tg_graph_destroy(g);
}

static void test_gathers_are_charged(void)
{
    tg_graph *g = tg_test_linear_stack(256);
    const char *whole[] = {"replicationFactor", "2", NULL};
    const char *sharded[] = {"replicationFactor",
                             "2",
                             "TensorLocations.weight.replicatedTensorSharding",
                             "true",
                             "TensorLocations.weight.minElementsForReplicatedTensorSharding",
                             "0",
                             NULL};
    tg_program *a = compile_mk2(g, whole), *b = compile_mk2(g, sharded);
    if (a && b) {
        const tg_tile_device *ta = &a->tile_plan->devices[0], *tb = &b->tile_plan->devices[0];
        /* the forward gathers every weight once: half of each over the link */
        double weights = 4 * (1024.0 * 1024 + 1024) * 4 + (1024.0 * 10 + 10) * 4;
        double link = 0.99 * weights / 2 / b->tile_plan->target.link_bytes_per_cycle;
        TG_CHECK(tb->copy_cycles[TG_PHASE_FORWARD] >= ta->copy_cycles[TG_PHASE_FORWARD] + link);
        TG_CHECK(tb->total[TG_TILE_EXCHANGE_CODE] > ta->total[TG_TILE_EXCHANGE_CODE]);
    }
    tg_program_destroy(a);
    tg_program_destroy(b);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_io_tiles_overlap_streamed_weights);
    TG_RUN(test_gathers_are_charged);
    return tg_test_finish();
}
