/* tests/analyse/test_views_insights.c - `analyse insights` tells the truth
 * about offloading and tile memory (issue 15, items 2 and 3): a profile
 * with the optimizer state offloaded shows the bytes kept in host memory
 * and the update phase's stream traffic, equal to SQL on the profile; on
 * mk2 the limit of a device is its tiles times a tile's memory (not "no
 * limit was set") and the fullest tile of each device is named; devices
 * that share the machine's cores are said to (issue 14, item 6); on mk2
 * stream copies over 5% of the cycles get the seed's numIOTiles rule of
 * thumb, computed from the profile, and with that many I/O tiles the
 * insights say the copies run beside the compute (issue 14, item 5); on
 * mk2 the cost model is compared with the cycle model, never with the
 * host's wall time, and nothing the cycle model gives is called measured
 * (issue 32, item 3).
 * TG_TEST_LABELS: isa */
#include "tg_test.h"
#include "tg_test_cli.h"

#include "core/cpus.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];

#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)

static double sql_num(const char *db_path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    double out = NAN;
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        out = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

static const tg_json *rows_of(const tg_json *root, const char *title)
{
    const tg_json *tables = root ? tg_json_get(root, "tables") : NULL;
    for (size_t i = 0; tables && i < tables->count; i++) {
        const tg_json *t = tg_json_get(tables->items[i], "title");
        if (t && t->type == TG_JSON_STRING && !strcmp(t->string, title))
            return tg_json_get(tables->items[i], "rows");
    }
    tg_test_fail(__FILE__, __LINE__, "no table '%s'", title);
    return NULL;
}

static int train(const char *dir, const char *extra)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s/tilegraph train --model fashion-basic --batch-size 8 --train-limit 160 "
             "--test-limit 40 --quiet --profile --profile-dir %s/%s %s > %s/train.txt 2>&1",
             TG_BINARY_DIR, tmpdir, dir, extra, tmpdir);
    return system(cmd);
}

static void test_offloading(void)
{
    TG_CHECK(train("off", "--optimizer adam --offload weights,optimizer") == 0);
    char db[512], args[600];
    snprintf(db, sizeof db, "%s/off/training/profile.sqlite", tmpdir);
    double kept = sql_num(db, "SELECT SUM(bytes) FROM memory WHERE category = 'offloaded to host'");
    double in = sql_num(db, "SELECT SUM(bytes) FROM trace WHERE run = (SELECT MIN(run) FROM "
                            "trace) AND kind = 'load from streaming memory'");
    double out = sql_num(db, "SELECT SUM(bytes) FROM trace WHERE run = (SELECT MIN(run) FROM "
                             "trace) AND kind = 'store to streaming memory'");
    /* weights load in every phase, and store only after their update */
    double forward = sql_num(db, "SELECT SUM(bytes) FROM trace WHERE run = (SELECT MIN(run) FROM "
                                 "trace) AND phase = 'forward' AND kind = 'load from streaming "
                                 "memory'");
    TG_CHECK(kept > 0 && in > out && out > 0 && forward > 0);
    tg_arena *arena = tg_arena_create(1 << 20);
    snprintf(args, sizeof args, "analyse %s insights --json", db);
    const tg_json *root = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    const tg_json *rows = rows_of(root, "Offloading");
    TG_CHECK(rows && rows->count == 1);
    if (rows && rows->count == 1) {
        TG_CHECK(tg_cli_num(rows->items[0], "offloaded to host") == kept);
        TG_CHECK(tg_cli_num(rows->items[0], "loaded") == in);
        TG_CHECK(tg_cli_num(rows->items[0], "stored") == out);
    }
    snprintf(args, sizeof args, "analyse %s insights", db);
    EXPECT(args, 0, "kept in host streaming memory");
    TG_CHECK(strstr(tg_cli_output, "offloading: none") == NULL);
    tg_arena_destroy(arena);

    /* without offloading it says none, and has no table */
    TG_CHECK(train("plain", "") == 0);
    snprintf(args, sizeof args, "analyse %s/plain insights", tmpdir);
    EXPECT(args, 0, "offloading: none");
}

static void test_mk2_limit(void)
{
    TG_CHECK(train("mk2", "--engine-option target=mk2") == 0);
    char db[512], args[600];
    snprintf(db, sizeof db, "%s/mk2/training/profile.sqlite", tmpdir);
    double tiles = sql_num(db, "SELECT value FROM meta WHERE key = 'tiles_per_device'");
    double per_tile = sql_num(db, "SELECT value FROM meta WHERE key = 'memory_per_tile'");
    double arena_bytes = sql_num(db, "SELECT arena_bytes FROM devices WHERE device = 0");
    double fullest = sql_num(db, "SELECT MAX(t) FROM (SELECT SUM(bytes) AS t FROM tiles WHERE "
                                 "device = 0 GROUP BY tile)");
    TG_CHECK(tiles > 0 && per_tile > 0 && fullest > 0);
    snprintf(args, sizeof args, "analyse %s insights", db);
    EXPECT(args, 0, "tiles of 624 KiB each");
    TG_CHECK(strstr(tg_cli_output, "no device memory limit") == NULL);
    tg_arena *arena = tg_arena_create(1 << 20);
    snprintf(args, sizeof args, "analyse %s insights --json", db);
    const tg_json *root = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    const tg_json *mem = rows_of(root, "Memory");
    if (mem && mem->count > 0)
        TG_CHECK_NEAR(tg_cli_num(mem->items[0], "of limit"), arena_bytes / (tiles * per_tile),
                      1e-12);
    const tg_json *full = rows_of(root, "Fullest tile per device");
    if (full && full->count > 0) {
        TG_CHECK(tg_cli_num(full->items[0], "bytes") == fullest);
        TG_CHECK_NEAR(tg_cli_num(full->items[0], "of tile memory"), fullest / per_tile, 1e-12);
    }
    /* the cost model is compared with the cycle model, as one model with
     * another (it was the host's wall time, "measured", against it) */
    double cycles = sql_num(db, "SELECT SUM(end_ns - start_ns) FROM trace WHERE run = (SELECT "
                                "MIN(run) FROM trace) AND replica = 0 AND device = 0 AND kind = "
                                "'execute'");
    double predicted = sql_num(db, "SELECT SUM(end_ns - start_ns) FROM predicted_trace WHERE "
                                   "device = 0") *
                       sql_num(db, "SELECT value FROM meta WHERE key = 'iterations'");
    TG_CHECK(cycles > 0 && predicted > 0);
    const tg_json *cm = rows_of(root, "Cost model against the cycle model (first recorded host "
                                      "step)");
    TG_CHECK(cm && cm->count == 1);
    if (cm && cm->count == 1) {
        TG_CHECK(tg_cli_num(cm->items[0], "cycle model compute") == cycles);
        TG_CHECK_NEAR(tg_cli_num(cm->items[0], "predicted"), predicted, 1e-9 * predicted);
        TG_CHECK_NEAR(tg_cli_num(cm->items[0], "predicted / cycle model"), predicted / cycles,
                      1e-9 * predicted / cycles);
    }
    snprintf(args, sizeof args, "analyse %s insights", db);
    EXPECT(args, 0, "in the cycle model (simulated mk2 cycles) against");
    TG_CHECK(strstr(tg_cli_output, "measured against") == NULL);
    TG_CHECK(strstr(tg_cli_output, "Cost model against the measured op time") == NULL);
    snprintf(args, sizeof args, "analyse %s trace", db);
    EXPECT(args, 0, "Predicted (cost model) beside the cycle model (simulated, not measured)");
    TG_CHECK(strstr(tg_cli_output, "measured compute") == NULL);
    TG_CHECK(strstr(tg_cli_output, "neither measured") != NULL);
    tg_arena_destroy(arena);
}

/* Devices x threads beyond the cores: the insights say the devices share
 * cores (with the numbers from the profile), and qualify the stage-balance
 * note instead of blaming the balance; a one-device run says neither. The
 * stages come from --stages auto, so this trains an automatic split too. */
static void test_shared_cores(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char extra[256], db[512], args[600], want[160];
    snprintf(extra, sizeof extra,
             "--model mnist-pipeline --stages auto --devices 2 --threads-per-device %ld "
             "--gradient-accumulation 4",
             cores > 0 ? cores : 1);
    setenv("TILEGRAPH_CALIBRATION", "off", 1);
    TG_CHECK(train("shared", extra) == 0);
    snprintf(db, sizeof db, "%s/shared/training/profile.sqlite", tmpdir);
    double meta_cores = sql_num(db, "SELECT value FROM meta WHERE key = 'cores_allowed'");
    TG_CHECK(meta_cores >= 1);
    snprintf(args, sizeof args, "analyse %s insights", db);
    snprintf(want, sizeof want, "= %ld threads share %.0f core", 2 * (cores > 0 ? cores : 1),
             meta_cores);
    EXPECT(args, 0, want);
    TG_CHECK(strstr(tg_cli_output, "if the devices had cores of their own") != NULL);
    /* each device gets its share of the cores, named for train and for Python */
    int share = (int)meta_cores / 2;
    if (share >= 1) {
        snprintf(want, sizeof want,
                 "give each device %d thread%s (threadsPerDevice: opts.set('threadsPerDevice', "
                 "%d) in Python",
                 share, share == 1 ? "" : "s", share);
        TG_CHECK(strstr(tg_cli_output, want) != NULL);
    }
    /* the cost model's prediction beside the measurement, as the profile holds them */
    double predicted = sql_num(db, "SELECT SUM(predicted_ns * calls) FROM ops WHERE device = 1 "
                                   "AND calls > 0");
    TG_CHECK(predicted > 0);
    tg_arena *arena = tg_arena_create(1 << 20);
    snprintf(args, sizeof args, "analyse %s insights --json", db);
    const tg_json *root = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    const tg_json *cost = rows_of(root, "Cost model against the measured op time");
    TG_CHECK(cost && cost->count == 2);
    if (cost && cost->count == 2)
        TG_CHECK_NEAR(tg_cli_num(cost->items[1], "predicted"), predicted, 1e-6 * predicted);
    /* the trace view: the simulated timeline's compute beside the measured */
    double sim = sql_num(db, "SELECT SUM(end_ns - start_ns) FROM predicted_trace WHERE device = 0");
    double its = sql_num(db, "SELECT value FROM meta WHERE key = 'iterations'");
    TG_CHECK(sim > 0 && its >= 1);
    snprintf(args, sizeof args, "analyse %s trace --json", db);
    root = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    const tg_json *pt = rows_of(root, "Predicted (cost model) beside measured, first recorded host "
                                      "step");
    TG_CHECK(pt && pt->count == 2);
    if (pt && pt->count == 2) {
        TG_CHECK_NEAR(tg_cli_num(pt->items[0], "predicted compute"), sim * its, 1e-6 * sim * its);
        double measured = tg_cli_num(pt->items[1], "measured compute");
        TG_CHECK(measured > 0);
        TG_CHECK_NEAR(tg_cli_num(pt->items[1], "predicted / measured"),
                      tg_cli_num(pt->items[1], "predicted compute") / measured, 1e-3);
    }
    tg_arena_destroy(arena);
    snprintf(args, sizeof args, "analyse %s/off/training/profile.sqlite insights", tmpdir);
    EXPECT(args, 0, "the longest stage");
    TG_CHECK(strstr(tg_cli_output, "threads share") == NULL);
}

/* Advice that can apply (issue 32, item 4): on one core, two devices of one
 * thread each share it and fewer threads cannot help, so the insights ask
 * for fewer devices and never for "1 thread"; the stderr warning says the
 * same. A device over its memory (allowed by debug.allowOutOfMemory) does
 * not fit, which is not "close to the limit". */
static void test_advice_that_applies(void)
{
    char cmd[2048], db[512], args[600];
    snprintf(cmd, sizeof cmd,
             "taskset -c 0 %s/tilegraph train --model mnist-pipeline --stages auto --devices 2 "
             "--threads-per-device 1 --gradient-accumulation 4 --batch-size 8 --train-limit 64 "
             "--test-limit 16 --quiet --profile-dir %s/one_core > %s/one_core.txt 2>&1",
             TG_BINARY_DIR, tmpdir, tmpdir);
    TG_CHECK(system(cmd) == 0);
    snprintf(db, sizeof db, "%s/one_core/training/profile.sqlite", tmpdir);
    TG_CHECK(sql_num(db, "SELECT value FROM meta WHERE key = 'cores_allowed'") == 1);
    snprintf(args, sizeof args, "analyse %s insights", db);
    EXPECT(args, 0, "2 devices x 1 thread = 2 threads share 1 core");
    TG_CHECK(strstr(tg_cli_output, "every device already has a single thread, so only fewer "
                                   "devices can help: at most 1 device for 1 core") != NULL);
    TG_CHECK(strstr(tg_cli_output, "give each device") == NULL);
    char log[512];
    snprintf(log, sizeof log, "%s/one_core.txt", tmpdir);
    FILE *f = fopen(log, "r");
    char text[4096] = "";
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f)
        fclose(f);
    TG_CHECK(strstr(text, "every device already has 1 thread") != NULL);
    TG_CHECK(strstr(text, "--threads 1") == NULL);

    /* a device over its limit */
    TG_CHECK(train("over", "--memory-per-device 1000000 --engine-option "
                           "debug.allowOutOfMemory=true") == 0);
    snprintf(db, sizeof db, "%s/over/training/profile.sqlite", tmpdir);
    double total = sql_num(db, "SELECT arena_bytes FROM devices WHERE device = 0");
    TG_CHECK(total > 1000000);
    char want[128];
    snprintf(want, sizeof want, "%.0f%% of its 977 KiB: it does not fit", 100 * total / 1000000);
    snprintf(args, sizeof args, "analyse %s/over insights", tmpdir);
    EXPECT(args, 0, want);
    TG_CHECK(strstr(tg_cli_output, "close to the limit") == NULL);
}

static void test_io_tiles(void)
{
    const char *mk2 = "--model mnist-pipeline --strategy pipelined --gradient-accumulation 8 "
                      "--engine-option target=mk2";
    TG_CHECK(train("io0", mk2) == 0);
    char db[512], args[600], want[160], extra[256];
    snprintf(db, sizeof db, "%s/io0/training/profile.sqlite", tmpdir);
    double bytes = sql_num(db, "SELECT MAX(bytes) FROM trace WHERE device = 0 AND phase = "
                               "'forward' AND kind = 'stream from host'");
    double depth = sql_num(db, "SELECT stash_depth FROM devices WHERE device = 0");
    double per_tile = sql_num(db, "SELECT value FROM meta WHERE key = 'memory_per_tile'");
    TG_CHECK(bytes > 0 && depth >= 1 && per_tile > 0);
    int n = 1;
    while (n < 1.05 * bytes * (depth + 1) / per_tile)
        n *= 2;
    snprintf(args, sizeof args, "analyse %s insights", db);
    snprintf(want, sizeof want, "numIOTiles=%d would overlap them", n);
    EXPECT(args, 0, want);
    snprintf(want, sizeof want, "x %.0f slots", depth + 1);
    TG_CHECK(strstr(tg_cli_output, want) != NULL);
    snprintf(extra, sizeof extra, "%s --engine-option numIOTiles=%d", mk2, n);
    TG_CHECK(train("io1", extra) == 0);
    snprintf(args, sizeof args, "analyse %s/io1 insights", tmpdir);
    snprintf(want, sizeof want, "device 0's host streams in run on its %d I/O tile", n);
    EXPECT(args, 0, want);
    TG_CHECK(strstr(tg_cli_output, "would overlap them") == NULL);
    /* the simulated trace draws the copies beside the compute: all but each
     * host step's first overlap an execute of device 0 */
    snprintf(db, sizeof db, "%s/io1/training/profile.sqlite", tmpdir);
    double copies = sql_num(db, "SELECT COUNT(*) FROM trace WHERE device = 0 AND run = 0 AND "
                                "kind = 'I/O tiles: stream from host'");
    double beside = sql_num(db, "SELECT COUNT(*) FROM trace c WHERE c.device = 0 AND c.run = 0 "
                                "AND c.kind = 'I/O tiles: stream from host' AND EXISTS (SELECT 1 "
                                "FROM trace e WHERE e.device = 0 AND e.run = 0 AND e.kind = "
                                "'execute' AND e.start_ns < c.end_ns AND e.end_ns > c.start_ns)");
    double its = sql_num(db, "SELECT value FROM meta WHERE key = 'iterations'");
    TG_CHECK(copies == 8 * its && beside == 7 * its);
}

int main(void)
{
    int begun = tg_test_fashion_tmpdir("insights", tmpdir, sizeof tmpdir);
    if (begun)
        return begun;
    TG_RUN(test_offloading);
    TG_RUN(test_mk2_limit);
    TG_RUN(test_io_tiles);
    TG_RUN(test_shared_cores);
    TG_RUN(test_advice_that_applies);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
