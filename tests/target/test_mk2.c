/* tests/target/test_mk2.c - the mk2 tile processor model: the tile mapping
 * conserves bytes, the per tile capacity check names device and tile,
 * debug.allowOutOfMemory compiles anyway, the cycle model scales with FLOPs
 * and dtype, target descriptions are read strictly, and I/O tiles hold the
 * host-stream inputs alone, checked against a micro-batch. */
#include "tg_test.h"

#include "compile/program.h"
#include "core/error.h"
#include "target/tiled.h"
#include "tilegraph/devices.h"
#include "tilegraph/models.h"
#include "tilegraph/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static tg_model_graph build(int batch)
{
    tg_model_graph mg = {0};
    const tg_model_spec *m = tg_model_find("mnist-pipeline");
    TG_CHECK(m != NULL);
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    TG_CHECK_OK(tg_model_graph_create_ex(m, batch, &opt, NULL, &mg));
    return mg;
}

static tg_options *mk2_options(const char *description, bool allow_oom)
{
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "target", "mk2"));
    TG_CHECK_OK(tg_options_set(o, "executionStrategy", "pipelined"));
    TG_CHECK_OK(tg_options_set_int(o, "Training.gradientAccumulation", 4));
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    if (description)
        TG_CHECK_OK(tg_options_set(o, "targetDescription", description));
    if (allow_oom)
        TG_CHECK_OK(tg_options_set(o, "debug.allowOutOfMemory", "true"));
    return o;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    TG_CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_linear_mapping_conserves_bytes(void)
{
    tg_tile_span sp = tg_tile_map_linear(1000, 64, 4, 0);
    /* 16 grains over 4 tiles: 4 grains (256 bytes) per tile, 232 on the last */
    TG_CHECK(sp.used == 4 && sp.chunk == 256);
    TG_CHECK(tg_tile_span_bytes(&sp, 1000, 4, 3) == 232);
    /* a small tensor from tile 6 of 8 wraps around and stays on few tiles */
    sp = tg_tile_map_linear(130, 64, 8, 6);
    TG_CHECK(sp.used == 3 && sp.chunk == 64);
    TG_CHECK(tg_tile_span_bytes(&sp, 130, 8, 0) == 2);
    TG_CHECK(tg_tile_span_bytes(&sp, 130, 8, 5) == 0);
    for (int64_t bytes = 1; bytes < 100000; bytes = bytes * 3 + 7)
        for (int tiles = 1; tiles <= 1472; tiles *= 7) {
            sp = tg_tile_map_linear(bytes, 64, tiles, tiles / 2);
            int64_t sum = 0;
            for (int t = 0; t < tiles; t++) {
                int64_t b = tg_tile_span_bytes(&sp, bytes, tiles, t);
                TG_CHECK(b >= 0 && b <= sp.chunk);
                sum += b;
            }
            if (sum != bytes)
                tg_test_fail(__FILE__, __LINE__, "%lld bytes over %d tiles map to %lld",
                             (long long)bytes, tiles, (long long)sum);
        }
}

/* The program's always-live bytes of each device are exactly the bytes on its
 * tiles; activations at each tile's peak add up to at least the device's
 * peak of live activations and at most all activations and scratch. */
static void test_program_mapping_conserves_bytes(void)
{
    tg_model_graph mg = build(8);
    tg_options *o = mk2_options(NULL, false);
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(mg.graph, o, &p));
    TG_CHECK(p && p->tile_plan && p->n_devices >= 2);
    for (int d = 0; p && d < p->n_devices; d++) {
        const tg_device_program *dp = &p->devices[d];
        const tg_tile_device *td = &p->tile_plan->devices[d];
        int64_t fixed = 0;
        for (int r = TG_REGION_PARAM; r < TG_REGION_ACTIVATION; r++)
            fixed += (int64_t)dp->region_bytes[r];
        TG_CHECK(fixed > 0);
        TG_CHECK(td->total[TG_TILE_ALWAYS_LIVE] == fixed);
        int64_t per_tile_sum = 0;
        for (int t = 0; t < p->tile_plan->target.tiles; t++)
            per_tile_sum += td->bytes[(size_t)t * TG_TILE_CAT_COUNT + TG_TILE_ALWAYS_LIVE];
        TG_CHECK(per_tile_sum == fixed);
        /* every buffer's tiles hold exactly its bytes */
        for (int i = 0; i < p->n_buffers; i++) {
            const tg_buffer *b = &p->buffers[i];
            if (b->device != d)
                continue;
            int64_t bytes =
                (int64_t)(b->region == TG_REGION_ACTIVATION ? b->stride : b->stride * b->slots);
            int64_t sum = 0;
            for (int t = 0; t < p->tile_plan->target.tiles; t++)
                sum += tg_tile_span_bytes(&p->tile_plan->span[i], bytes, p->tile_plan->target.tiles,
                                          t);
            TG_CHECK(sum == bytes);
        }
        int n_steps = dp->n_steps[0] + dp->n_steps[1] + dp->n_steps[2];
        int64_t peak = 0, all = 0;
        for (int i = 0; i < p->n_buffers; i++)
            if (p->buffers[i].device == d && p->buffers[i].region == TG_REGION_ACTIVATION)
                all += (int64_t)p->buffers[i].stride;
        for (int ph = 0; ph < 3; ph++)
            for (int s = 0; s < dp->n_steps[ph]; s++)
                all += (int64_t)dp->steps[ph][s].scratch_bytes;
        for (int s = 0; s < n_steps; s++) {
            int64_t live = 0;
            for (int i = 0; i < p->n_buffers; i++) {
                const tg_buffer *b = &p->buffers[i];
                if (b->device == d && b->region == TG_REGION_ACTIVATION && b->first <= s &&
                    s <= b->last)
                    live += (int64_t)b->stride;
            }
            peak = live > peak ? live : peak;
        }
        TG_CHECK(td->total[TG_TILE_ACTIVATIONS] >= peak);
        TG_CHECK(td->total[TG_TILE_ACTIVATIONS] <= all);
        /* the max tile is the fullest and every estimate is present */
        for (int t = 0; t < p->tile_plan->target.tiles; t++)
            TG_CHECK(tg_tile_bytes(p->tile_plan, d, t) <= td->max_bytes);
        TG_CHECK(td->total[TG_TILE_VERTEX_STATE] > 0 && td->total[TG_TILE_VERTEX_CODE] > 0 &&
                 td->total[TG_TILE_CONTROL_CODE] > 0 && td->total[TG_TILE_EXCHANGE_CODE] > 0);
        TG_CHECK(td->cycles[TG_PHASE_FORWARD] > 0 && td->cycles[TG_PHASE_BACKWARD] > 0);
        double sum = 0;
        for (int s = 0; s < dp->n_steps[TG_PHASE_FORWARD]; s++)
            sum += td->step_cycles[TG_PHASE_FORWARD][s];
        TG_CHECK_NEAR(sum + td->copy_cycles[TG_PHASE_FORWARD], td->cycles[TG_PHASE_FORWARD],
                      1e-6 * sum);
    }
    tg_program_destroy(p);
    tg_options_destroy(o);

    /* the cpu target has no tile plan */
    o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "executionStrategy", "pipelined"));
    TG_CHECK_OK(tg_options_set_int(o, "Training.gradientAccumulation", 4));
    TG_CHECK_OK(tg_program_compile(mg.graph, o, &p));
    TG_CHECK(p && p->tile_plan == NULL);
    tg_program_destroy(p);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

static void test_tile_out_of_memory(void)
{
    char path[128];
    snprintf(path, sizeof path, "/tmp/tg_test_mk2_small_%d.json", (int)getpid());
    write_file(path, "{\"name\": \"tiny\", \"tiles\": 16, \"memoryPerTile\": 8192}");
    tg_model_graph mg = build(8);
    tg_options *o = mk2_options(path, false);
    tg_program *p = NULL;
    tg_status s = tg_program_compile(mg.graph, o, &p);
    TG_CHECK(s == TG_ERR_CAPACITY && p == NULL);
    const char *msg = tg_error_message();
    TG_CHECK(strstr(msg, "device 0 tile ") != NULL);
    TG_CHECK(strstr(msg, "but has 8.00 KiB") != NULL || strstr(msg, "but has 8 KiB") != NULL);
    TG_CHECK(strstr(msg, "tiny memory per tile") != NULL);
    TG_CHECK(strstr(msg, "largest: ") != NULL);
    TG_CHECK(strstr(msg, "always-live variables") != NULL);
    TG_CHECK(strstr(msg, "largest tensors on the tile: '") != NULL);
    TG_CHECK(strstr(msg, "debug.allowOutOfMemory") != NULL);
    tg_options_destroy(o);

    /* allowed: compiles, and the plan shows the overflow */
    o = mk2_options(path, true);
    TG_CHECK_OK(tg_program_compile(mg.graph, o, &p));
    TG_CHECK(p && p->tile_plan && p->tile_plan->target.tiles == 16);
    if (p && p->tile_plan)
        TG_CHECK(p->tile_plan->devices[0].max_bytes > 8192);
    tg_program_destroy(p);
    tg_options_destroy(o);

    /* the real mk2 holds this small model */
    o = mk2_options(NULL, false);
    TG_CHECK_OK(tg_program_compile(mg.graph, o, &p));
    if (p)
        TG_CHECK(p->tile_plan->devices[0].max_bytes <= 624 * 1024);
    tg_program_destroy(p);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
    remove(path);
}

/* The all-reduce between replicas is a ring of 2(R - 1) exchange steps on
 * the tiles holding each accumulator: exchange code grows with the replicas
 * (seed 002, table 4.1) by exactly that, and one replica has none. */
static int64_t exchange_code(int replicas, int64_t *expected_extra)
{
    tg_model_graph mg = build(8);
    tg_options *o = mk2_options(NULL, false);
    TG_CHECK_OK(tg_options_set_int(o, "replicationFactor", replicas));
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(mg.graph, o, &p));
    int64_t total = 0, extra = 0;
    for (int d = 0; p && d < p->n_devices; d++) {
        const tg_tile_plan *tp = p->tile_plan;
        const tg_target_desc *tg = &tp->target;
        total += tp->devices[d].total[TG_TILE_EXCHANGE_CODE];
        for (int k = 0; k < p->devices[d].n_accumulators; k++) {
            int b = p->devices[d].accumulators[k].acc_buffer;
            const tg_buffer *buf = &p->buffers[b];
            int64_t bytes = (int64_t)(buf->stride * (size_t)buf->slots);
            for (int j = 0; j < tp->span[b].used; j++) {
                int tile = (tp->span[b].start + j) % tg->tiles;
                double kib = (double)tg_tile_span_bytes(&tp->span[b], bytes, tg->tiles, tile) /
                             replicas / 1024.0;
                extra += 2 * (int64_t)(replicas - 1) *
                         (tg->exchange_code_bytes + (int64_t)(tg->exchange_code_per_kib * kib));
            }
        }
    }
    *expected_extra = extra;
    tg_program_destroy(p);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
    return total;
}

static void test_exchange_code_grows_with_replicas(void)
{
    int64_t e1, e2, e4;
    int64_t one = exchange_code(1, &e1), two = exchange_code(2, &e2), four = exchange_code(4, &e4);
    TG_CHECK(e1 == 0 && e2 > 0 && e4 > e2);
    TG_CHECK(two - one == e2);
    TG_CHECK(four - one == e4);
}

static void test_cycle_model(void)
{
    tg_target_desc t;
    tg_target_mk2(&t);
    TG_CHECK(t.tiles == 1472 && t.tile_memory == 624 * 1024 && t.workers == 6);
    TG_CHECK_NEAR(t.flops_per_cycle_f16, 4 * t.flops_per_cycle_f32, 0);
    double c1, c2, c16, x;
    double total = tg_tile_step_cycles(&t, 1e9, false, 1000, 0, &c1, &x);
    tg_tile_step_cycles(&t, 2e9, false, 1000, 0, &c2, NULL);
    tg_tile_step_cycles(&t, 1e9, true, 1000, 0, &c16, NULL);
    TG_CHECK_NEAR(c2, 2 * c1, 1e-9 * c1);
    TG_CHECK_NEAR(c16, c1 / 4, 1e-9 * c1);
    TG_CHECK_NEAR(c1, 1e9 / (1000 * 32.0), 1e-6);
    TG_CHECK_NEAR(total, c1 + t.sync_cycles, 1e-6);
    TG_CHECK(x == 0);
    /* half the tiles: twice the compute */
    tg_tile_step_cycles(&t, 1e9, false, 500, 0, &c2, NULL);
    TG_CHECK_NEAR(c2, 2 * c1, 1e-9 * c1);
    /* exchange: bytes over the tiles' bandwidth */
    tg_tile_step_cycles(&t, 0, false, 100, 24e4, NULL, &x);
    TG_CHECK_NEAR(x, 24e4 / (100 * t.exchange_bytes_per_cycle), 1e-9);
}

static void test_target_descriptions(void)
{
    tg_target_desc d;
    const char *good = "{\"name\":\"mk1\",\"tiles\":1216,\"memoryPerTile\":262144,"
                       "\"workersPerTile\":6,\"clockHz\":1.6e9,\"flopsPerCyclePerTileF32\":16,"
                       "\"flopsPerCyclePerTileF16\":64,\"syncCycles\":150,\"grainBytes\":32}";
    TG_CHECK_OK(tg_target_desc_parse(good, strlen(good), "mk1.json", &d));
    TG_CHECK(strcmp(d.name, "mk1") == 0 && d.tiles == 1216 && d.tile_memory == 262144);
    TG_CHECK(d.clock_hz == 1.6e9 && d.flops_per_cycle_f32 == 16 && d.grain_bytes == 32);
    TG_CHECK(d.exchange_bytes_per_cycle == 24); /* keys not given keep the mk2 numbers */

    const char *unknown = "{\"tiles\": 4, \"memoryPerTyle\": 1024}";
    TG_CHECK(tg_target_desc_parse(unknown, strlen(unknown), "t.json", &d) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "unknown key 'memoryPerTyle'") != NULL);
    TG_CHECK(strstr(tg_error_message(), "t.json") != NULL);

    const char *type = "{\"tiles\": \"many\"}";
    TG_CHECK(tg_target_desc_parse(type, strlen(type), "t.json", &d) != TG_OK);
    TG_CHECK(strstr(tg_error_message(), "'tiles'") != NULL);

    const char *range = "{\"memoryPerTile\": 0}";
    TG_CHECK(tg_target_desc_parse(range, strlen(range), "t.json", &d) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "'memoryPerTile'") != NULL);

    const char *rate = "{\"flopsPerCyclePerTileF16\": 8}";
    TG_CHECK(tg_target_desc_parse(rate, strlen(rate), "t.json", &d) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "'flopsPerCyclePerTileF16'") != NULL);

    const char *bad = "{\"tiles\": 4,}";
    TG_CHECK(tg_target_desc_parse(bad, strlen(bad), "t.json", &d) == TG_ERR_FORMAT);
    TG_CHECK(strstr(tg_error_message(), "t.json:1:") != NULL);

    const char *array = "[1, 2]";
    TG_CHECK(tg_target_desc_parse(array, strlen(array), "t.json", &d) == TG_ERR_FORMAT);

    /* a missing file is named; the compile fails with it */
    tg_model_graph mg = build(4);
    tg_options *o = mk2_options("/nonexistent/target.json", false);
    tg_program *p = NULL;
    TG_CHECK(tg_program_compile(mg.graph, o, &p) == TG_ERR_IO && p == NULL);
    TG_CHECK(strstr(tg_error_message(), "/nonexistent/target.json") != NULL);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);

    /* an unknown target is refused where the config meets the targets:
     * tg_target_check, and the compile before any planning, naming it */
    TG_CHECK(tg_target_check("mk3") != TG_OK);
    TG_CHECK(strstr(tg_error_message(), "mk3") != NULL);
    mg = build(4);
    o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "target", "mk3"));
    TG_CHECK(tg_program_compile(mg.graph, o, &p) != TG_OK && p == NULL);
    TG_CHECK(strstr(tg_error_message(), "mk3") != NULL);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

static tg_status compile_io(const tg_model_graph *mg, int io_tiles, tg_program **p)
{
    tg_options *o = mk2_options(NULL, false);
    TG_CHECK_OK(tg_options_set_int(o, "numIOTiles", io_tiles));
    tg_status s = tg_program_compile(mg->graph, o, p);
    tg_options_destroy(o);
    return s;
}

/* Batch 200: a micro-batch of images is 612 KiB, and device 0 of the
 * pipeline holds 4 in flight plus the one coming in. One I/O tile cannot
 * hold them and the error says how many can; with that many, the inputs
 * (and only they) are on the last tiles, bytes conserved. */
static void test_io_tiles(void)
{
    tg_model_graph mg = build(200);
    tg_program *p = NULL;
    TG_CHECK(compile_io(&mg, 1, &p) == TG_ERR_CAPACITY && p == NULL);
    const char *msg = tg_error_message(), *hint = strstr(msg, "short; numIOTiles=");
    TG_CHECK(strstr(msg, "device 0: its 1 I/O tile") != NULL);
    TG_CHECK(strstr(msg, "'images' 612 KiB x 5 slots") != NULL);
    int n = hint ? atoi(hint + strlen("short; numIOTiles=")) : 0;
    TG_CHECK(n >= 5 && n <= 6 && strstr(msg, "would hold them") != NULL);
    TG_CHECK(compile_io(&mg, n - 1, &p) == TG_ERR_CAPACITY && p == NULL);
    TG_CHECK_OK(compile_io(&mg, n, &p));
    const tg_tile_plan *tp = p ? p->tile_plan : NULL;
    int tiles = tp ? tp->target.tiles : 0, inputs = 0;
    for (int i = 0; tp && i < p->n_buffers; i++) {
        const tg_buffer *b = &p->buffers[i];
        const tg_tile_span *sp = &tp->span[i];
        bool io = b->region == TG_REGION_INPUT;
        inputs += io;
        if (io)
            TG_CHECK(b->slots == p->devices[b->device].stash_depth + 1);
        TG_CHECK(sp->used == 0 || (io ? sp->start >= tiles - n && sp->start + sp->used <= tiles
                                      : sp->start + sp->used <= tiles - n));
        int64_t bytes =
                    (int64_t)(b->region == TG_REGION_ACTIVATION ? b->stride : b->stride * b->slots),
                sum = 0;
        for (int t = 0; t < tiles; t++)
            sum += tg_tile_span_bytes(sp, bytes, tiles, t);
        TG_CHECK(sum == bytes);
    }
    TG_CHECK(inputs == 2); /* images on the first device, labels on the last */
    tg_program_destroy(p);
    tg_model_graph_destroy(&mg);
}

int main(void)
{
    TG_RUN(test_linear_mapping_conserves_bytes);
    TG_RUN(test_program_mapping_conserves_bytes);
    TG_RUN(test_tile_out_of_memory);
    TG_RUN(test_exchange_code_grows_with_replicas);
    TG_RUN(test_cycle_model);
    TG_RUN(test_target_descriptions);
    TG_RUN(test_io_tiles);
    return tg_test_finish();
}
