/* tests/profile/test_profile_mk2.c - a profile of a run on the simulated tile
 * processor: tiles and tensor spans from the tile plan, and a trace that is
 * the cycle model's timeline, following the compiled schedule. */
#include "tg_test.h"
#include "tg_test_train.h"

#include "profile/reader.h"
#include "runtime/session_internal.h"
#include "target/tiled.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static void test_mk2_profile(void)
{
    char dir[] = "/tmp/tg_profile_mk2_XXXXXX";
    if (!TG_MKDTEMP(dir))
        return;
    tg_optimizer opt = tg_optimizer_sgd(0.05f, 0.0f);
    tg_test_model c;
    tg_test_train(&c, 8, &opt,
                  (const char *[]){"target", "mk2", "executionStrategy", "pipelined",
                                   "Training.gradientAccumulation", "4", "autoReport.all", "true",
                                   "autoReport.directory", dir, NULL},
                  2, 3, NULL);
    const tg_program *p = c.s ? tg_session_program(c.s) : NULL;
    TG_CHECK(p && p->tile_plan);
    /* keep what the checks need before the session goes */
    int n_devices = p ? p->n_devices : 0, n_buffers = p ? p->n_buffers : 0;
    int64_t dev_total[8] = {0};
    double cycles[8][3] = {{0}};
    for (int d = 0; d < n_devices && d < 8; d++) {
        for (int k = 0; k < TG_TILE_CAT_COUNT; k++)
            dev_total[d] += p->tile_plan->devices[d].total[k];
        for (int ph = 0; ph < 3; ph++)
            cycles[d][ph] = p->tile_plan->devices[d].cycles[ph];
    }
    double link = p ? p->tile_plan->target.link_bytes_per_cycle : 0;
    double host = p ? p->tile_plan->target.host_bytes_per_cycle : 0;
    tg_test_model_destroy(&c);
    char path[128], sql[512];
    snprintf(path, sizeof path, "%s/training/profile.sqlite", dir);
    tg_profile_reader *r = NULL;
    TG_CHECK_OK(tg_profile_reader_open(path, &r));
    if (r) {
        TG_CHECK(strncmp(tg_profile_reader_meta(r, "trace_clock"), "cycles", 6) == 0);
        TG_CHECK(strcmp(tg_profile_reader_meta(r, "tiles_per_device"), "1472") == 0);
        /* one compute set per step; 6 workers on each tile a step uses */
        TG_CHECK(atoll(tg_profile_reader_meta(r, "compute_sets")) ==
                 atoll(tg_profile_reader_meta(r, "steps")));
        TG_CHECK(atoll(tg_profile_reader_meta(r, "vertices")) % 6 == 0);
        TG_CHECK(atoll(tg_profile_reader_meta(r, "edges")) >
                 atoll(tg_profile_reader_meta(r, "vertices")));
        int64_t v = 0;
        for (int d = 0; d < n_devices; d++) {
            snprintf(sql, sizeof sql, "SELECT SUM(bytes) FROM tiles WHERE device = %d", d);
            TG_CHECK_OK(tg_profile_reader_int(r, sql, -1, &v));
            TG_CHECK(v == dev_total[d]);
            /* every simulated pass (its pieces: receives, streams, compute,
             * sends) takes exactly the cycles the model gives its phase */
            static const char *const phases[] = {"forward", "backward", "update"};
            for (int ph = 0; ph < 3; ph++) {
                snprintf(sql, sizeof sql,
                         "SELECT COUNT(*) FROM (SELECT MIN(start_cycles) AS s, MAX(end_cycles) "
                         "AS e FROM trace WHERE device = %d AND phase = '%s' GROUP BY run, "
                         "replica, iteration, micro_batch) WHERE ABS((e - s) - %.0f) > 2",
                         d, phases[ph], cycles[d][ph]);
                TG_CHECK_OK(tg_profile_reader_int(r, sql, -1, &v));
                TG_CHECK(v == 0);
            }
        }
        /* vertex types: their vertices are the graph's, their state and code the tiles' */
        TG_CHECK_OK(tg_profile_reader_int(r, "SELECT SUM(vertices) FROM vertex_types", -1, &v));
        TG_CHECK(v > 0 && v == atoll(tg_profile_reader_meta(r, "vertices")));
        TG_CHECK_OK(tg_profile_reader_int(
            r,
            "SELECT COUNT(*) FROM (SELECT device, SUM(state_bytes) AS s, SUM(code_bytes) AS c "
            "FROM vertex_types GROUP BY device) t WHERE s != (SELECT SUM(bytes) FROM tiles WHERE "
            "device = t.device AND category = 'vertex state') OR c != (SELECT SUM(bytes) FROM "
            "tiles WHERE device = t.device AND category = 'vertex code')",
            -1, &v));
        TG_CHECK(v == 0);
        TG_CHECK_OK(
            tg_profile_reader_int(r, "SELECT COUNT(DISTINCT device) FROM vertex_types", -1, &v));
        TG_CHECK(v == n_devices);
        TG_CHECK_OK(tg_profile_reader_int(r, "SELECT COUNT(*) FROM tiles WHERE bytes < 0", -1, &v));
        TG_CHECK(v == 0); /* streamed buffers' exchange code counts every slot they span */
        TG_CHECK_OK(tg_profile_reader_int(r, "SELECT COUNT(*) FROM tile_spans", -1, &v));
        TG_CHECK(v == n_buffers);
        /* a forward never starts before the previous device's forward of that micro-batch ends */
        TG_CHECK_OK(tg_profile_reader_int(
            r,
            "SELECT COUNT(*) FROM trace a JOIN trace b ON a.run = b.run AND a.replica = b.replica "
            "AND a.iteration = b.iteration AND a.micro_batch = b.micro_batch AND "
            "a.device = b.device + 1 WHERE a.phase = 'forward' AND b.phase = 'forward' AND "
            "a.start_cycles < b.end_cycles",
            -1, &v));
        TG_CHECK(v == 0);
        /* copies and host streams take the cycles their bytes need at the
         * link's and the host's rate (they were drawn as 0 ns) */
        snprintf(sql, sizeof sql,
                 "SELECT COUNT(*) FROM trace WHERE kind IN ('copy to device', 'wait for device') "
                 "AND bytes > 0 AND ABS((end_cycles - start_cycles) - bytes / %f) <= 1",
                 link);
        TG_CHECK_OK(tg_profile_reader_int(r, sql, -1, &v));
        int64_t copies = 0;
        TG_CHECK_OK(tg_profile_reader_int(
            r, "SELECT COUNT(*) FROM trace WHERE kind IN ('copy to device', 'wait for device')", -1,
            &copies));
        TG_CHECK(copies > 0 && v == copies);
        snprintf(sql, sizeof sql,
                 "SELECT COUNT(*) FROM trace WHERE kind LIKE 'stream%%' AND bytes > 0 AND "
                 "end_ns > start_ns AND ABS((end_cycles - start_cycles) - bytes / %f) <= 1",
                 host);
        TG_CHECK_OK(tg_profile_reader_int(r, sql, -1, &v));
        TG_CHECK_OK(tg_profile_reader_int(r, "SELECT COUNT(*) FROM trace WHERE kind LIKE 'stream%'",
                                          -1, &copies));
        TG_CHECK(copies > 0 && v == copies);
        TG_CHECK_OK(tg_profile_reader_int(r, "SELECT COUNT(DISTINCT run) FROM trace", -1, &v));
        TG_CHECK(v == 2);
    }
    tg_profile_reader_close(r);
    tg_test_remove_dir(dir);
}

int main(void)
{
    TG_RUN(test_mk2_profile);
    return tg_test_finish();
}
