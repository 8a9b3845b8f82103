/* tests/analyse/test_analyse_tiles.c - `tilegraph analyse` on a tiled
 * target (mk2): the memory view's tile sections (tile memory per device,
 * top tiles by category, the histogram of tiles by bytes) and --tile N (one
 * tile's categories and the tensors mapped on it) agree with the profile's
 * tiles and tile_spans tables read through SQLite; the trace view says its
 * times are the cycle model's and shows cycles and the tile balance; a cpu
 * profile shows no tile section; bad --tile values exit 2 with a clear
 * message, and so does a --device the profile does not have; compare of two mk2 reports handles the
 * tile tables. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include "core/arena.h"
#include "core/json.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256], mk2_db[512];
static int n_tiles, n_devices;

#define output tg_cli_output
#define run_ex(args, with_err) tg_cli_run(tmpdir, args, with_err)
#define run_json(arena, args) tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__)
#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)

/* The rows of the table whose title is exactly `title`; NULL when none. */
static const tg_json *find_table(const tg_json *root, const char *title)
{
    const tg_json *tables = root ? tg_json_get(root, "tables") : NULL;
    for (size_t i = 0; tables && i < tables->count; i++) {
        const tg_json *t = tg_json_get(tables->items[i], "title");
        if (t && t->type == TG_JSON_STRING && !strcmp(t->string, title))
            return tg_json_get(tables->items[i], "rows");
    }
    return NULL;
}

static const tg_json *table(const tg_json *root, const char *title)
{
    const tg_json *rows = find_table(root, title);
    if (!rows)
        tg_test_fail(__FILE__, __LINE__, "no table '%s' in the JSON", title);
    return rows;
}

#define num tg_cli_num
#define str tg_cli_str

/* One number from SQL with ?1..?3 bound to integers and ?4 to text. */
static double sql_num(const char *sql, int a, int b, int c, const char *text)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    double out = NAN;
    if (sqlite3_open_v2(mk2_db, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int(st, 1, a);
        sqlite3_bind_int(st, 2, b);
        sqlite3_bind_int(st, 3, c);
        if (text)
            sqlite3_bind_text(st, 4, text, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
            out = sqlite3_column_double(st, 0);
    } else {
        fprintf(stderr, "sql: %s\n", db ? sqlite3_errmsg(db) : "no db");
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

#define NEAR(x, y) (fabs((x) - (y)) <= 1e-9 * (1 + fabs(y)))

static void test_memory_tiles(void)
{
    tg_arena *arena = tg_arena_create(1 << 20);
    char args[1024];
    snprintf(args, sizeof args, "analyse %s/mk2 memory --json --top 5", tmpdir);
    const tg_json *root = run_json(arena, args);
    const tg_json *top = table(root, "Top tiles (bytes by category)");
    TG_CHECK(top && top->count == (size_t)(5 * n_devices));
    for (size_t i = 0; top && i < top->count; i++) {
        const tg_json *r = top->items[i];
        int d = (int)num(r, "device"), t = (int)num(r, "tile");
        double want =
            sql_num("SELECT SUM(bytes) FROM tiles WHERE device = ?1 AND tile = ?2", d, t, 0, NULL);
        if (!NEAR(num(r, "bytes"), want))
            tg_test_fail(__FILE__, __LINE__, "device %d tile %d: view %g, SQL %g", d, t,
                         num(r, "bytes"), want);
        /* each category column is that tile's row of the tiles table */
        double vc = num(r, "vertex code");
        double wc = sql_num("SELECT bytes FROM tiles WHERE device = ?1 AND tile = ?2 AND "
                            "category = 'vertex code'",
                            d, t, 0, NULL);
        TG_CHECK(NEAR(vc, isnan(wc) ? 0 : wc));
        /* the first row of a device is its largest tile */
        if (i % 5 == 0) {
            double max = sql_num("SELECT MAX(s) FROM (SELECT SUM(bytes) AS s FROM tiles "
                                 "WHERE device = ?1 GROUP BY tile)",
                                 d, 0, 0, NULL);
            if (!NEAR(num(r, "bytes"), max))
                tg_test_fail(__FILE__, __LINE__, "device %d top tile %g, SQL max %g", d,
                             num(r, "bytes"), max);
        }
        double cap = sql_num("SELECT value FROM meta WHERE key = 'memory_per_tile'", 0, 0, 0, NULL);
        TG_CHECK(cap > 0 && NEAR(num(r, "of tile memory"), num(r, "bytes") / cap));
    }
    /* per device: the histogram holds every tile; the summary's largest tile and over-capacity
     * count */
    const tg_json *sum = table(root, "Tile memory per device");
    TG_CHECK(sum && sum->count == (size_t)n_devices);
    for (int d = 0; d < n_devices; d++) {
        char title[64];
        snprintf(title, sizeof title, "Tiles by bytes, device %d", d);
        const tg_json *h = table(root, title);
        double total = 0;
        for (size_t i = 0; h && i < h->count; i++)
            total += num(h->items[i], "tiles");
        if (total != n_tiles)
            tg_test_fail(__FILE__, __LINE__, "device %d histogram holds %g tiles, want %d", d,
                         total, n_tiles);
        /* the largest tile falls in the last bin */
        TG_CHECK(h && h->count == 10 && num(h->items[9], "tiles") >= 1);
        const tg_json *s = sum ? sum->items[d] : NULL;
        TG_CHECK(s && num(s, "device") == d && num(s, "tiles") == n_tiles);
        double over = sql_num(
            "SELECT COUNT(*) FROM (SELECT SUM(bytes) AS s FROM tiles "
            "WHERE device = ?1 GROUP BY tile) WHERE s > (SELECT CAST(value AS INTEGER) FROM "
            "meta WHERE key = 'memory_per_tile')",
            d, 0, 0, NULL);
        TG_CHECK(s && num(s, "over capacity") == over);
        double mean = sql_num("SELECT SUM(bytes) * 1.0 / ?2 FROM tiles WHERE device = ?1", d,
                              n_tiles, 0, NULL);
        TG_CHECK(s && NEAR(num(s, "mean tile"), mean));
    }
    /* the text view says it */
    snprintf(args, sizeof args, "analyse %s/mk2 memory", tmpdir);
    EXPECT(args, 0, "tiles over capacity: 0");
    EXPECT(args, 0, "Tiles by bytes, device 3");
    tg_arena_destroy(arena);
}

/* --tile N lists the tiles table's rows of tile N, and the tensors whose
 * span covers it, with the bytes a SQL query on tile_spans gives. */
static void check_one_tile(int tile, int device)
{
    tg_arena *arena = tg_arena_create(1 << 18);
    char args[1024], title[64];
    snprintf(args, sizeof args, "analyse %s/mk2 memory --json --tile %d --device %d", tmpdir, tile,
             device);
    const tg_json *root = run_json(arena, args);
    snprintf(title, sizeof title, "Tile %d by category", tile);
    const tg_json *cats = table(root, title);
    double want_rows = sql_num("SELECT COUNT(*) FROM tiles WHERE tile = ?1 AND device = ?2", tile,
                               device, 0, NULL);
    TG_CHECK(cats && cats->count == (size_t)want_rows && want_rows > 0);
    for (size_t i = 0; cats && i < cats->count; i++) {
        const tg_json *r = cats->items[i];
        TG_CHECK(num(r, "tile") == tile && num(r, "device") == device);
        double b = sql_num("SELECT bytes FROM tiles WHERE tile = ?1 AND device = ?2 AND "
                           "category = ?4",
                           tile, device, 0, str(r, "category"));
        if (!NEAR(num(r, "bytes"), b))
            tg_test_fail(__FILE__, __LINE__, "tile %d device %d %s: view %g, SQL %g", tile, device,
                         str(r, "category"), num(r, "bytes"), b);
    }
    /* the tensors on the tile, straight from tile_spans: covered when the
     * tile's offset into the span (modulo the tile count) is below `tiles`;
     * the last tile holds what is left of bytes * slots */
    static const char *const covers =
        "FROM tile_spans s JOIN tensors t ON t.id = s.tensor WHERE t.device = ?2 "
        "AND ((?1 - s.tile_start) % ?3 + ?3) % ?3 < s.tiles";
    char sql[1024];
    snprintf(sql, sizeof sql, "SELECT COUNT(*) %s", covers);
    double want_n = sql_num(sql, tile, device, n_tiles, NULL);
    snprintf(sql, sizeof sql,
             "SELECT SUM(MIN(s.bytes_per_tile, t.bytes * t.slots - "
             "(((?1 - s.tile_start) %% ?3 + ?3) %% ?3) * s.bytes_per_tile)) %s",
             covers);
    double want_bytes = sql_num(sql, tile, device, n_tiles, NULL);
    snprintf(title, sizeof title, "Tensors mapped on tile %d", tile);
    const tg_json *ts = table(root, title);
    double got_bytes = 0;
    for (size_t i = 0; ts && i < ts->count; i++) {
        const tg_json *r = ts->items[i];
        got_bytes += num(r, "bytes on tile");
        snprintf(sql, sizeof sql, "SELECT COUNT(*) %s AND t.name = ?4", covers);
        if (sql_num(sql, tile, device, n_tiles, str(r, "tensor")) < 1)
            tg_test_fail(__FILE__, __LINE__,
                         "tile %d: '%s' is listed but tile_spans does not "
                         "cover the tile",
                         tile, str(r, "tensor"));
    }
    if (!ts || ts->count != (size_t)want_n || !NEAR(got_bytes, want_bytes))
        tg_test_fail(__FILE__, __LINE__, "tile %d device %d: %zu tensors, %g bytes; SQL %g, %g",
                     tile, device, ts ? ts->count : 0, got_bytes, want_n, want_bytes);
    tg_arena_destroy(arena);
}

static void test_one_tile(void)
{
    check_one_tile(0, 0);
    check_one_tile(5, 1);
    check_one_tile(n_tiles - 1, 0); /* where the long spans wrap round */
    check_one_tile(700, 2);
    /* tiles whose tensors end there with less than bytes_per_tile: 40 of 64
     * bytes of a 1000-byte weight on device 0, 32 of a 20000-byte one on 1 */
    check_one_tile(15, 0);
    check_one_tile(312, 1);
    /* without --device: every device's rows of the tile */
    tg_arena *arena = tg_arena_create(1 << 18);
    char args[1024];
    snprintf(args, sizeof args, "analyse %s/mk2 memory --json --tile 3", tmpdir);
    const tg_json *rows = table(run_json(arena, args), "Tile 3 by category");
    TG_CHECK(rows && rows->count == (size_t)sql_num("SELECT COUNT(*) FROM tiles WHERE tile = ?1", 3,
                                                    0, 0, NULL));
    tg_arena_destroy(arena);
}

static void test_bad_tile(void)
{
    char args[1024];
    snprintf(args, sizeof args, "analyse %s/mk2 memory --tile -1", tmpdir);
    EXPECT(args, 2, "--tile must be between 0");
    snprintf(args, sizeof args, "analyse %s/mk2 memory --tile %d", tmpdir, n_tiles);
    char want[96];
    snprintf(want, sizeof want, "--tile %d is beyond the %d tiles per device", n_tiles, n_tiles);
    EXPECT(args, 2, want);
    snprintf(args, sizeof args, "analyse %s/mk2 memory --tile 1000000", tmpdir);
    EXPECT(args, 2, "is beyond the");
    snprintf(args, sizeof args, "analyse %s/mk2 memory --tile abc", tmpdir);
    EXPECT(args, 2, "--tile expects an integer");
    snprintf(args, sizeof args, "analyse %s/cpu memory --tile 0", tmpdir);
    EXPECT(args, 2, "which has no tiles");
    snprintf(args, sizeof args, "compare %s/mk2 %s/mk2s memory --tile %d", tmpdir, tmpdir, n_tiles);
    EXPECT(args, 2, "is beyond the");
    snprintf(args, sizeof args, "analyse %s/mk2 trace --tile 3", tmpdir);
    EXPECT(args, 0, "--tile 3 applies to the memory view only");
}

/* --device N of a device the profile does not have is an error naming the
 * devices it has, as --tile is (it printed empty tables, exit 0) */
static void test_bad_device(void)
{
    char args[1024], want[128];
    snprintf(args, sizeof args, "analyse %s/mk2 memory --device 9", tmpdir);
    snprintf(want, sizeof want, "has no device 9; its devices are 0 to %d", n_devices - 1);
    EXPECT(args, 2, want);
    TG_CHECK(!strstr(output, "(none)"));
    snprintf(args, sizeof args, "analyse %s/mk2 trace --device %d", tmpdir, n_devices);
    EXPECT(args, 2, "leave --device out for all");
    snprintf(args, sizeof args, "compare %s/mk2 %s/mk2s memory --device 9", tmpdir, tmpdir);
    EXPECT(args, 2, "has no device 9");
    snprintf(args, sizeof args, "analyse %s/mk2 memory --device %d", tmpdir, n_devices - 1);
    EXPECT(args, 0, "Memory by category");
}

static void test_cpu_has_no_tiles(void)
{
    tg_arena *arena = tg_arena_create(1 << 18);
    char args[1024];
    snprintf(args, sizeof args, "analyse %s/cpu memory --json", tmpdir);
    const tg_json *root = run_json(arena, args);
    TG_CHECK(root && find_table(root, "Memory by category"));
    TG_CHECK(root && !find_table(root, "Tile memory per device") &&
             !find_table(root, "Top tiles (bytes by category)") &&
             !find_table(root, "Tiles by bytes, device 0"));
    snprintf(args, sizeof args, "analyse %s/cpu memory", tmpdir);
    TG_CHECK(run_ex(args, 1) == 0 && !strstr(output, "tile") && !strstr(output, "Tile"));
    snprintf(args, sizeof args, "analyse %s/cpu trace", tmpdir);
    TG_CHECK(run_ex(args, 1) == 0 && !strstr(output, "cycle") && !strstr(output, "tile balance"));
    tg_arena_destroy(arena);
}

static void test_trace_cycles_and_balance(void)
{
    tg_arena *arena = tg_arena_create(1 << 18);
    char args[1024];
    snprintf(args, sizeof args, "analyse %s/mk2 trace", tmpdir);
    EXPECT(args, 0, "the cycle model's");
    EXPECT(args, 0, "device 3 tile balance: largest tile");
    snprintf(args, sizeof args, "analyse %s/mk2 trace --json", tmpdir);
    const tg_json *root = run_json(arena, args);
    const tg_json *cy = table(root, "Cycles per device, first recorded host step");
    TG_CHECK(cy && cy->count == (size_t)n_devices);
    double wall = sql_num("SELECT MAX(end_cycles) - MIN(start_cycles) FROM trace WHERE run = "
                          "(SELECT MIN(run) FROM trace) AND replica = 0",
                          0, 0, 0, NULL);
    for (size_t i = 0; cy && i < cy->count; i++) {
        const tg_json *r = cy->items[i];
        int d = (int)num(r, "device");
        double c = sql_num("SELECT SUM(end_cycles - start_cycles) FROM trace WHERE run = "
                           "(SELECT MIN(run) FROM trace) AND replica = 0 AND device = ?1 "
                           "AND kind = 'execute'",
                           d, 0, 0, NULL);
        TG_CHECK(num(r, "wall cycles") == wall && wall > 0);
        TG_CHECK(NEAR(num(r, "compute cycles"), c) && c > 0);
    }
    const tg_json *bal = table(root, "Tile balance (bytes per tile)");
    TG_CHECK(bal && bal->count == (size_t)n_devices);
    for (size_t i = 0; bal && i < bal->count; i++) {
        const tg_json *r = bal->items[i];
        int d = (int)num(r, "device");
        double max = sql_num("SELECT MAX(s) FROM (SELECT SUM(bytes) AS s FROM tiles "
                             "WHERE device = ?1 GROUP BY tile)",
                             d, 0, 0, NULL);
        double mean = sql_num("SELECT SUM(bytes) * 1.0 / ?2 FROM tiles WHERE device = ?1", d,
                              n_tiles, 0, NULL);
        TG_CHECK(NEAR(num(r, "largest tile"), max) && NEAR(num(r, "mean tile"), mean));
        TG_CHECK(NEAR(num(r, "largest / mean"), max / mean) && max / mean >= 1);
    }
    tg_arena_destroy(arena);
}

static void test_compare_tiles(void)
{
    char args[1024];
    snprintf(args, sizeof args, "compare %s/mk2 %s/mk2s memory", tmpdir, tmpdir);
    EXPECT(args, 0, "top tiles are not compared");
    EXPECT(args, 0, "largest tile diff");
    TG_CHECK(!strstr(output, "Top tiles (bytes by category)"));
    /* one tile of both, rows keyed by device, tile and category */
    tg_arena *arena = tg_arena_create(1 << 18);
    snprintf(args, sizeof args, "compare %s/mk2 %s/mk2s memory --tile 5 --device 1 --json", tmpdir,
             tmpdir);
    const tg_json *root = run_json(arena, args);
    const tg_json *rows = table(root, "Tile 5 by category");
    double n = sql_num("SELECT COUNT(*) FROM tiles WHERE tile = 5 AND device = 1", 0, 0, 0, NULL);
    TG_CHECK(rows && rows->count >= (size_t)n && n > 0);
    for (size_t i = 0; rows && i < rows->count; i++) {
        const tg_json *r = rows->items[i];
        double a =
            sql_num("SELECT bytes FROM tiles WHERE tile = 5 AND device = 1 AND category = ?4", 0, 0,
                    0, str(r, "category"));
        TG_CHECK(num(r, "tile") == 5 && (isnan(a) || NEAR(num(r, "bytes (A)"), a)));
    }
    TG_CHECK(find_table(root, "Tensors mapped on tile 5") != NULL);
    tg_arena_destroy(arena);
    /* a cpu and an mk2 report are refused (different targets) */
    snprintf(args, sizeof args, "compare %s/mk2 %s/cpu memory", tmpdir, tmpdir);
    EXPECT(args, 1, "different targets");
}

static int train(const char *strategy, const char *dir, const char *target)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s/tilegraph train --model mnist-pipeline --strategy %s --gradient-accumulation 4 "
             "--batch-size 8 --train-limit 320 --test-limit 100 --quiet --profile "
             "--profile-dir %s/%s %s%s > %s/train.txt 2>&1",
             TG_BINARY_DIR, strategy, tmpdir, dir, target ? "--engine-option target=" : "",
             target ? target : "", tmpdir);
    int r = system(cmd);
    return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

int main(void)
{
    int begun = tg_test_fashion_tmpdir("analyse_tiles", tmpdir, sizeof tmpdir);
    if (begun)
        return begun;
    if (train("pipelined", "mk2", "mk2") != 0 || train("sharded", "mk2s", "mk2") != 0 ||
        train("pipelined", "cpu", NULL) != 0) {
        fprintf(stderr, "training with --profile failed; see %s/train.txt\n", tmpdir);
        return 1;
    }
    snprintf(mk2_db, sizeof mk2_db, "%s/mk2/training/profile.sqlite", tmpdir);
    n_tiles = (int)sql_num("SELECT value FROM meta WHERE key = 'tiles_per_device'", 0, 0, 0, NULL);
    n_devices = (int)sql_num("SELECT COUNT(*) FROM devices", 0, 0, 0, NULL);
    if (n_tiles <= 0 || n_devices != 4) {
        fprintf(stderr, "the mk2 profile has %d tiles per device, %d devices\n", n_tiles,
                n_devices);
        return 1;
    }
    TG_RUN(test_memory_tiles);
    TG_RUN(test_one_tile);
    TG_RUN(test_bad_tile);
    TG_RUN(test_bad_device);
    TG_RUN(test_cpu_has_no_tiles);
    TG_RUN(test_trace_cycles_and_balance);
    TG_RUN(test_compare_tiles);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
