/* tests/analyse/test_views_summary.c - `analyse summary` on a tiled target
 * shows what PopVision's summary shows for an IPU (issue 15, "summary on
 * mk2"): tiles per device and in all, memory per tile, per device and of
 * all devices, and the compute sets, vertices and edges the profile holds,
 * each equal to SQL on the profile; a cpu profile has no such tables.
 * Numbers in the tables are fixed figures with thousands grouped, never in
 * scientific notation (1.109e+04 samples/s, MFLOP 1.167e+05 were). */
#include "tg_test.h"
#include "tg_test_cli.h"

#include "analyse/analyse.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256], db[512];

static double meta(const char *key)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    double out = NAN;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, "SELECT CAST(value AS REAL) FROM meta WHERE key = ?1", -1, &st,
                           NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW)
            out = sqlite3_column_double(st, 0);
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    return out;
}

/* The "value" of the row whose "item" is `item` in table `title`. */
static double item(const tg_json *root, const char *title, const char *what)
{
    const tg_json *tables = root ? tg_json_get(root, "tables") : NULL;
    for (size_t i = 0; tables && i < tables->count; i++) {
        const tg_json *t = tg_json_get(tables->items[i], "title");
        if (!t || t->type != TG_JSON_STRING || strcmp(t->string, title))
            continue;
        const tg_json *rows = tg_json_get(tables->items[i], "rows");
        for (size_t r = 0; rows && r < rows->count; r++)
            if (!strcmp(tg_cli_str(rows->items[r], "item"), what))
                return tg_cli_num(rows->items[r], "value");
    }
    tg_test_fail(__FILE__, __LINE__, "no '%s' in table '%s'", what, title);
    return NAN;
}

static void test_mk2_summary(void)
{
    tg_arena *arena = tg_arena_create(1 << 20);
    char args[700];
    snprintf(args, sizeof args, "analyse %s summary --json", db);
    const tg_json *root = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    double tiles = meta("tiles_per_device"), per = meta("memory_per_tile");
    double devices = meta("devices"), replicas = meta("replicas");
    TG_CHECK(tiles > 0 && per > 0 && devices == 4);
    TG_CHECK(item(root, "Target (tiles)", "tiles per device") == tiles);
    TG_CHECK(item(root, "Target (tiles)", "tiles in all") == tiles * devices * replicas);
    TG_CHECK(item(root, "Target (tiles)", "worker threads per tile") == meta("workers_per_tile"));
    TG_CHECK(item(root, "Target (tiles)", "compute sets") == meta("compute_sets"));
    TG_CHECK(item(root, "Target (tiles)", "vertices") == meta("vertices"));
    TG_CHECK(item(root, "Target (tiles)", "edges") == meta("edges"));
    TG_CHECK(meta("vertices") > 0 && meta("edges") > 0);
    TG_CHECK(item(root, "Target memory", "memory per tile") == per);
    TG_CHECK(item(root, "Target memory", "memory per device") == tiles * per);
    TG_CHECK(item(root, "Target memory", "memory of all devices") ==
             tiles * per * devices * replicas);
    snprintf(args, sizeof args, "analyse %s/cpu summary", tmpdir);
    TG_CHECK(tg_cli_run(tmpdir, args, 0) == 0);
    TG_CHECK(strstr(tg_cli_output, "Target (tiles)") == NULL);
    tg_arena_destroy(arena);
}

static void check_format(tg_an_kind k, double v, const char *want)
{
    char buf[64];
    tg_an_format(k, v, buf, sizeof buf);
    if (strcmp(buf, want))
        tg_test_fail(__FILE__, __LINE__, "%g formats as '%s', not '%s'", v, buf, want);
}

static void test_number_format(void)
{
    check_format(TG_AN_NUM, 11090.4, "11,090");
    check_format(TG_AN_NUM, 116700.0, "116,700");
    check_format(TG_AN_NUM, 12160000000.0, "12,160,000,000");
    check_format(TG_AN_NUM, -1234567.0, "-1,234,567");
    check_format(TG_AN_NUM, 999.94, "999.9");
    check_format(TG_AN_NUM, 24.08, "24.08");
    check_format(TG_AN_NUM, 0.6216, "0.6216");
    check_format(TG_AN_NUM, 0, "0");
    check_format(TG_AN_NUM, 0.00001234, "0.000012");
    check_format(TG_AN_COUNT, 1234567, "1,234,567");
    check_format(TG_AN_COUNT, 12, "12");
    check_format(TG_AN_ID, 12345, "12345"); /* a device or step number is no quantity */
}

/* No table or note of the views uses an exponent; the summary names the
 * unit of its FLOPs note. */
static void test_no_exponents(void)
{
    static const char *const views[] = {"summary", "operations", "memory", "host", "trace"};
    char args[700];
    for (size_t i = 0; i < sizeof views / sizeof *views; i++) {
        snprintf(args, sizeof args, "analyse %s %s", db, views[i]);
        TG_CHECK(tg_cli_run(tmpdir, args, 0) == 0);
        for (const char *p = tg_cli_output; (p = strstr(p, "e+")) != NULL; p++)
            if (p > tg_cli_output && p[-1] >= '0' && p[-1] <= '9')
                tg_test_fail(__FILE__, __LINE__, "analyse %s prints an exponent: '%.20s'", views[i],
                             p > tg_cli_output + 8 ? p - 8 : p);
    }
    snprintf(args, sizeof args, "analyse %s summary", db);
    TG_CHECK(tg_cli_run(tmpdir, args, 0) == 0 && strstr(tg_cli_output, "MFLOP per host step: "));
}

int main(void)
{
    TG_RUN(test_number_format);
    int begun = tg_test_fashion_tmpdir("summary", tmpdir, sizeof tmpdir);
    if (begun)
        return begun;
    char cmd[1400];
    snprintf(cmd, sizeof cmd,
             "%s/tilegraph train --model mnist-pipeline --strategy pipelined "
             "--gradient-accumulation 4 --batch-size 8 --train-limit 64 --test-limit 16 --quiet "
             "--target mk2 --profile-dir %s/mk2 > %s/train.txt 2>&1 && "
             "%s/tilegraph train --model fashion-basic --train-limit 16 --test-limit 8 --quiet "
             "--profile-dir %s/cpu >> %s/train.txt 2>&1",
             TG_BINARY_DIR, tmpdir, tmpdir, TG_BINARY_DIR, tmpdir, tmpdir);
    if (system(cmd) != 0) {
        fprintf(stderr, "training failed; see %s/train.txt\n", tmpdir);
        return 1;
    }
    snprintf(db, sizeof db, "%s/mk2/training/profile.sqlite", tmpdir);
    TG_RUN(test_mk2_summary);
    TG_RUN(test_no_exponents);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
