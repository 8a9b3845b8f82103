/* tests/analyse/test_hostile_profiles.c - `analyse`, `compare` and `report`
 * on profiles crafted or caught in a bad state, as the bad-input campaign
 * made them (issue 17): a tile_spans row of 2^63 tiles (H2), an unbounded
 * meta tiles_per_device (H3), a legal million-tile target compared with
 * itself (H4), values that overflowed signed arithmetic under UBSan
 * (tile_start -2^63, micro_batches INT_MAX), a profile locked by its writer,
 * and `report -o` over its own input or on a full disk (D1), a stream of
 * 2^63 bytes (issue 32, item 20). Each finishes
 * quickly with the right answer or a clear message and a non-zero exit. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[256], base_db[512];

#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A copy of the trained mk2 profile named `name`, changed by `sql`. */
static const char *crafted(const char *name, const char *sql)
{
    static char path[600];
    char cmd[1400];
    snprintf(path, sizeof path, "%s/%s.sqlite", tmpdir, name);
    snprintf(cmd, sizeof cmd, "cp %s %s", base_db, path);
    TG_CHECK(system(cmd) == 0);
    sqlite3 *db = NULL;
    char *err = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK ||
        sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
        tg_test_fail(__FILE__, __LINE__, "crafting %s: %s", name, err ? err : "open failed");
    sqlite3_free(err);
    sqlite3_close(db);
    return path;
}

/* H2: the per-tile bytes of a span of 2^63 tiles come in closed form (the
 * old loop ran ~6e15 times); the tensor still shows its one full tile. */
static void test_huge_span(void)
{
    const char *p = crafted("h2", "UPDATE tile_spans SET tile_start = 0, "
                                  "tiles = 9223372036854775807 WHERE tensor = "
                                  "(SELECT MIN(tensor) FROM tile_spans)");
    char args[1024];
    snprintf(args, sizeof args, "analyse %s memory --tile 0 --json", p);
    double t0 = now_s();
    int rc = tg_cli_run(tmpdir, args, 0);
    TG_CHECK(rc == 0);
    TG_CHECK(now_s() - t0 < 20);
    TG_CHECK(strstr(tg_cli_output, "Tensors mapped on tile 0") != NULL);
}

/* UBSan: tile_start of -2^63 made `tile - start` overflow; the tile's
 * residue is taken first now. micro_batches of INT_MAX overflowed m + n - 1
 * in the insights' theoretical bubble. */
static void test_signed_overflows(void)
{
    const char *p = crafted("ub", "UPDATE tile_spans SET tile_start = -9223372036854775808;"
                                  "INSERT OR REPLACE INTO meta VALUES('micro_batches', "
                                  "'2147483647');");
    char args[1024];
    snprintf(args, sizeof args, "analyse %s memory --tile 5", p);
    EXPECT(args, 0, "Tensors mapped on tile 5");
    snprintf(args, sizeof args, "analyse %s insights", p);
    EXPECT(args, 0, "pipeline bubble");
}

/* Issue 32, item 20: a stream of 2^63 bytes made the I/O-tile rule of thumb
 * double an int past 2^31 to 0, and loop forever, in insights, report and
 * compare. The count is bounded by the device's tiles now: the views finish
 * and say that I/O tiles cannot hold such a stream. */
static void test_huge_stream_bytes(void)
{
    const char *p = crafted("huge_bytes", "UPDATE trace SET bytes = 9223372036854775807");
    char args[1400];
    snprintf(args, sizeof args, "analyse %s insights", p);
    int rc = tg_cli_run_bounded(tmpdir, args, 30);
    if (rc != 0 || !strstr(tg_cli_output, "I/O tiles cannot hold them"))
        tg_test_fail(__FILE__, __LINE__, "%s: exit %d (137: it hung):\n%.2000s", args, rc,
                     tg_cli_output);
    snprintf(args, sizeof args, "compare %s %s insights", p, p);
    TG_CHECK(tg_cli_run_bounded(tmpdir, args, 30) == 0);
    snprintf(args, sizeof args, "report %s -o %s/huge_bytes.html", p, tmpdir);
    TG_CHECK(tg_cli_run_bounded(tmpdir, args, 30) == 0);
    /* a stash depth of INT_MAX overflowed depth + 1 (UBSan) */
    p = crafted("huge_depth", "UPDATE devices SET stash_depth = 2147483647");
    snprintf(args, sizeof args, "analyse %s insights", p);
    TG_CHECK(tg_cli_run_bounded(tmpdir, args, 30) == 0);
    /* the unchanged profile keeps its advice */
    snprintf(args, sizeof args, "analyse %s insights", base_db);
    TG_CHECK(tg_cli_run_bounded(tmpdir, args, 30) == 0);
    TG_CHECK(strstr(tg_cli_output, "rounded up to a power of 2") != NULL);
}

/* H3: a tiles_per_device beyond what a target allows is refused, naming
 * the profile and the value, before anything is allocated by it. */
static void test_unbounded_tiles(void)
{
    static const char *const bad[] = {"300000000", "2000000000", "3e8", "-5",
                                      "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char sql[256], name[32], args[1024];
        snprintf(sql, sizeof sql, "UPDATE meta SET value = '%s' WHERE key = 'tiles_per_device'",
                 bad[i]);
        snprintf(name, sizeof name, "h3_%zu", i);
        const char *p = crafted(name, sql);
        double t0 = now_s();
        snprintf(args, sizeof args, "analyse %s memory", p);
        EXPECT(args, 1, "tiles_per_device");
        TG_CHECK(strstr(tg_cli_output, bad[i]) != NULL);
        TG_CHECK(strstr(tg_cli_output, name) != NULL);
        snprintf(args, sizeof args, "compare %s %s trace", p, p);
        EXPECT(args, 1, "is not a tile count");
        TG_CHECK(now_s() - t0 < 10);
    }
}

/* H4: a million-tile target (the most a description allows) compared with
 * itself: the top-tile list is sorted, not selected tile by tile, and the
 * rows are matched by hash. The old code did not finish in minutes. */
static void test_million_tiles_compare(void)
{
    const char *p = crafted("h4", "UPDATE meta SET value = '1048576' WHERE key = "
                                  "'tiles_per_device'");
    char args[1400];
    snprintf(args, sizeof args, "compare %s %s memory --json", p, p);
    double t0 = now_s();
    TG_CHECK(tg_cli_run(tmpdir, args, 0) == 0);
    TG_CHECK(now_s() - t0 < 60);
    TG_CHECK(strstr(tg_cli_output, "only in") == NULL);
    snprintf(args, sizeof args, "analyse %s memory --top 3", p);
    EXPECT(args, 0, "Top tiles");
}

/* A profile its writer holds locked is not "not a tilegraph profile". */
static void test_locked_profile(void)
{
    const char *p = crafted("locked", "SELECT 1");
    sqlite3 *db = NULL;
    TG_CHECK(sqlite3_open(p, &db) == SQLITE_OK);
    TG_CHECK(sqlite3_exec(db, "BEGIN EXCLUSIVE; UPDATE meta SET value = value;", NULL, NULL,
                          NULL) == SQLITE_OK);
    char args[1024];
    snprintf(args, sizeof args, "analyse %s", p);
    EXPECT(args, 1, "is being written by a running tilegraph");
    TG_CHECK(strstr(tg_cli_output, "not a tilegraph profile") == NULL);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);
    EXPECT(args, 0, "Program information");
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* D1: `report -o` never writes over a profile it reads, nor into a
 * directory; on a full disk (a file size limit here) the previous report is
 * left whole and no temporary stays behind. */
static void test_report_output(void)
{
    char args[2048], html[600], cmd[2400];
    const char *p = crafted("d1", "SELECT 1");
    long before = file_size(p);
    snprintf(args, sizeof args, "report %s -o %s", p, p);
    EXPECT(args, 1, "is the profile being read");
    TG_CHECK(file_size(p) == before);
    snprintf(args, sizeof args, "analyse %s", p);
    EXPECT(args, 0, "Program information");
    snprintf(args, sizeof args, "report %s %s -o %s", base_db, p, p);
    EXPECT(args, 1, "is the profile being read");
    snprintf(args, sizeof args, "report %s -o %s", p, tmpdir);
    EXPECT(args, 1, "is a directory");

    snprintf(html, sizeof html, "%s/r.html", tmpdir);
    snprintf(args, sizeof args, "report %s -o %s", p, html);
    EXPECT(args, 0, "r.html");
    long whole = file_size(html);
    TG_CHECK(whole > 10000);
    /* 8 blocks: far less than a page; SIGXFSZ ignored so write() fails */
    snprintf(cmd, sizeof cmd,
             "cd %s && ulimit -f 8 && trap '' XFSZ && %s/tilegraph report %s -o %s > fsz.txt 2>&1",
             tmpdir, TG_BINARY_DIR, p, html);
    int r = system(cmd);
    TG_CHECK(WIFEXITED(r) && WEXITSTATUS(r) == 1);
    TG_CHECK(file_size(html) == whole);
    snprintf(cmd, sizeof cmd, "ls %s | grep -c '\\.tmp\\.' > /dev/null", tmpdir);
    TG_CHECK(system(cmd) != 0); /* grep finds no temporary */
}

/* A directory's training/ subdirectory is a report too, as for analyse. */
static void test_report_subdirectory(void)
{
    char args[1024];
    snprintf(args, sizeof args, "report %s/mk2/training -o %s/sub.html", tmpdir, tmpdir);
    EXPECT(args, 0, "sub.html");
}

int main(void)
{
    int begun = tg_test_fashion_tmpdir("hostile", tmpdir, sizeof tmpdir);
    if (begun)
        return begun;
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s/tilegraph train --model mnist-pipeline --strategy pipelined "
             "--gradient-accumulation 4 --batch-size 8 --train-limit 320 --test-limit 100 --quiet "
             "--profile --profile-dir %s/mk2 --engine-option target=mk2 > %s/train.txt 2>&1",
             TG_BINARY_DIR, tmpdir, tmpdir);
    if (system(cmd) != 0) {
        fprintf(stderr, "training with --profile failed; see %s/train.txt\n", tmpdir);
        return 1;
    }
    snprintf(base_db, sizeof base_db, "%s/mk2/training/profile.sqlite", tmpdir);
    TG_RUN(test_huge_span);
    TG_RUN(test_signed_overflows);
    TG_RUN(test_huge_stream_bytes);
    TG_RUN(test_unbounded_tiles);
    TG_RUN(test_million_tiles_compare);
    TG_RUN(test_locked_profile);
    TG_RUN(test_report_output);
    TG_RUN(test_report_subdirectory);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
