/* tests/analyse/test_analyse.c - `tilegraph analyse` and `tilegraph compare`
 * on profiles this test writes by training the pipeline tutorial (small):
 * the views' numbers agree with the profile's tables read through SQLite,
 * the trace shows all four devices' busy fractions, a comparison of the
 * pipelined and sharded runs shows both with differences, tensors of one
 * report only are marked, and bad inputs exit 1 naming the file. */
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

static char tmpdir[256], pipe_db[512], shard_db[512];

#define output tg_cli_output
#define run_ex(args, with_err) tg_cli_run(tmpdir, args, with_err)
#define run_json(arena, args) tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__)
#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)

static const tg_json *table(const tg_json *root, const char *title_prefix)
{
    const tg_json *tables = tg_json_get(root, "tables");
    for (size_t i = 0; tables && i < tables->count; i++) {
        const tg_json *t = tg_json_get(tables->items[i], "title");
        if (t && t->type == TG_JSON_STRING &&
            !strncmp(t->string, title_prefix, strlen(title_prefix)))
            return tg_json_get(tables->items[i], "rows");
    }
    tg_test_fail(__FILE__, __LINE__, "no table '%s' in the JSON", title_prefix);
    return NULL;
}

#define num tg_cli_num
#define str tg_cli_str

static double sql_num(const char *db_path, const char *sql, int device, const char *text)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    double out = NAN;
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int(st, 1, device);
        if (text)
            sqlite3_bind_text(st, 2, text, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
            out = sqlite3_column_double(st, 0);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

static void test_memory_matches_profile(void)
{
    tg_arena *arena = tg_arena_create(1 << 16);
    char args[1024];
    snprintf(args, sizeof args, "analyse %s/pipe memory --json", tmpdir);
    const tg_json *rows = table(run_json(arena, args), "Memory by category");
    TG_CHECK(rows &&
             rows->count == (size_t)sql_num(pipe_db, "SELECT COUNT(*) FROM memory", 0, NULL));
    for (size_t i = 0; rows && i < rows->count; i++) {
        const tg_json *r = rows->items[i];
        int d = (int)num(r, "device");
        double want =
            sql_num(pipe_db, "SELECT bytes FROM memory WHERE device = ?1 AND category = ?2", d,
                    str(r, "category"));
        if (num(r, "bytes") != want)
            tg_test_fail(__FILE__, __LINE__, "device %d %s: view %g, profile %g", d,
                         str(r, "category"), num(r, "bytes"), want);
    }
    /* the filter keeps one device's column; the text view shows units */
    snprintf(args, sizeof args, "analyse %s/pipe memory --device 2 --json", tmpdir);
    rows = table(run_json(arena, args), "Memory per device");
    const tg_json *total = NULL;
    for (size_t i = 0; rows && i < rows->count; i++)
        if (!strcmp(str(rows->items[i], "memory"), "total"))
            total = rows->items[i];
    TG_CHECK(total && isnan(num(total, "device 0")) &&
             num(total, "device 2") ==
                 sql_num(pipe_db, "SELECT arena_bytes FROM devices WHERE device = ?1", 2, NULL));
    snprintf(args, sizeof args, "analyse %s/pipe memory --top 3", tmpdir);
    EXPECT(args, 0, "pipeline stash");
    EXPECT(args, 0, "KiB");
    tg_arena_destroy(arena);
}

static void test_trace_busy_fractions(void)
{
    tg_arena *arena = tg_arena_create(1 << 16);
    char args[1024];
    snprintf(args, sizeof args, "analyse %s/pipe trace --json", tmpdir);
    const tg_json *root = run_json(arena, args);
    const tg_json *rows = table(root, "Time per device");
    TG_CHECK(rows && rows->count == 4);
    double wall = sql_num(pipe_db,
                          "SELECT MAX(end_ns) - MIN(start_ns) FROM trace WHERE replica = 0 AND "
                          "run = (SELECT MIN(run) FROM trace) AND ?1 = ?1",
                          0, NULL);
    for (size_t i = 0; rows && i < rows->count; i++) {
        const tg_json *r = rows->items[i];
        int d = (int)num(r, "device");
        double compute = sql_num(pipe_db,
                                 "SELECT SUM(end_ns - start_ns) FROM trace WHERE device = ?1 AND "
                                 "replica = 0 AND kind = 'execute' AND "
                                 "run = (SELECT MIN(run) FROM trace)",
                                 d, NULL);
        TG_CHECK(d == (int)i);
        TG_CHECK(num(r, "compute") == compute);
        TG_CHECK_NEAR(num(r, "busy"), compute / wall, 1e-12);
        TG_CHECK(num(r, "busy") > 0 && num(r, "busy") < 1);
        TG_CHECK(num(r, "idle") >= 0);
    }
    /* micro-batches 0..3 of the gradient accumulation, each with forward and backward */
    rows = table(root, "Per micro-batch");
    TG_CHECK(rows && rows->count == 4);
    for (size_t i = 0; rows && i < rows->count; i++)
        TG_CHECK(num(rows->items[i], "forward") > 0 && num(rows->items[i], "backward") > 0);
    snprintf(args, sizeof args, "analyse %s/pipe trace", tmpdir);
    EXPECT(args, 0, "busy");
    EXPECT(args, 0, "Proportions of the wall time");
    tg_arena_destroy(arena);
}

static void test_other_views(void)
{
    tg_arena *arena = tg_arena_create(1 << 16);
    char args[1024];
    snprintf(args, sizeof args, "analyse %s/pipe summary --json", tmpdir);
    const tg_json *rows = table(run_json(arena, args), "Configuration and graph statistics");
    for (size_t i = 0; rows && i < rows->count; i++) {
        if (!strcmp(str(rows->items[i], "item"), "devices"))
            TG_CHECK(num(rows->items[i], "value") == 4);
        if (!strcmp(str(rows->items[i], "item"), "micro-batches"))
            TG_CHECK(num(rows->items[i], "value") == 4);
    }
    /* liveness at the peak step of device 0 lists exactly the tensors live there */
    double peak = sql_num(pipe_db,
                          "SELECT step FROM liveness WHERE device = ?1 ORDER BY live_bytes DESC, "
                          "step LIMIT 1",
                          0, NULL);
    double live = sql_num(pipe_db,
                          "SELECT COUNT(*) FROM tensors WHERE device = 0 AND always_live = 0 AND "
                          "first_step <= ?1 AND last_step >= ?1",
                          (int)peak, NULL);
    snprintf(args, sizeof args, "analyse %s/pipe liveness --device 0 --json", tmpdir);
    const tg_json *root = run_json(arena, args);
    rows = table(root, "Not-always-live tensors");
    /* the tensors, plus a row for the step's kernel scratch: together the
     * step's live bytes (issue 15, item 9) */
    double tensors = 0, bytes = 0;
    for (size_t i = 0; rows && i < rows->count; i++) {
        tensors += strcmp(str(rows->items[i], "category"), "kernel scratch") != 0;
        bytes += num(rows->items[i], "bytes");
    }
    TG_CHECK(tensors == live && live > 0);
    TG_CHECK(bytes == sql_num(pipe_db,
                              "SELECT live_bytes FROM liveness WHERE device = 0 AND "
                              "step = ?1",
                              (int)peak, NULL));
    snprintf(args, sizeof args, "analyse %s/pipe liveness --device 0 --step %d --json", tmpdir,
             (int)peak == 0 ? 1 : 0);
    rows = table(run_json(arena, args), "Not-always-live tensors");
    double other = sql_num(pipe_db,
                           "SELECT COUNT(*) FROM tensors WHERE device = 0 AND always_live = 0 AND "
                           "first_step <= ?1 AND last_step >= ?1",
                           (int)peak == 0 ? 1 : 0, NULL);
    tensors = 0;
    for (size_t i = 0; rows && i < rows->count; i++)
        tensors += strcmp(str(rows->items[i], "category"), "kernel scratch") != 0;
    TG_CHECK(rows && tensors == other);
    /* operations: time per op type adds up to the ops table */
    snprintf(args, sizeof args, "analyse %s/pipe operations --json", tmpdir);
    rows = table(run_json(arena, args), "Per op type");
    double sum = 0;
    for (size_t i = 0; rows && i < rows->count; i++)
        sum += num(rows->items[i], "time");
    TG_CHECK(sum == sql_num(pipe_db, "SELECT SUM(total_ns) FROM ops WHERE ?1 = ?1", 0, NULL));
    snprintf(args, sizeof args, "analyse %s/pipe program --device 3", tmpdir);
    EXPECT(args, 0, "    forward pass");
    snprintf(args, sizeof args, "analyse %s/pipe insights", tmpdir);
    EXPECT(args, 0, "longest stage is device");
    EXPECT(args, 0, "in theory for 4 stages and 4 micro-batches");
    tg_arena_destroy(arena);
}

static void test_compare(void)
{
    tg_arena *arena = tg_arena_create(1 << 16);
    char args[1024];
    snprintf(args, sizeof args, "compare %s/pipe %s/shard memory --json", tmpdir, tmpdir);
    const tg_json *rows = table(run_json(arena, args), "Memory by category");
    int checked = 0;
    for (size_t i = 0; rows && i < rows->count; i++) {
        const tg_json *r = rows->items[i];
        int d = (int)num(r, "device");
        const char *cat = str(r, "category");
        const char *q = "SELECT bytes FROM memory WHERE device = ?1 AND category = ?2";
        double a = sql_num(pipe_db, q, d, cat), b = sql_num(shard_db, q, d, cat);
        TG_CHECK(num(r, "bytes (A)") == a && num(r, "bytes (B)") == b);
        TG_CHECK(num(r, "bytes diff") == b - a);
        if (!strcmp(cat, "pipeline stash") && a > 0) {
            TG_CHECK(b == 0 && num(r, "bytes diff %") == -1);
            checked++;
        }
    }
    TG_CHECK(checked > 0);
    snprintf(args, sizeof args, "compare %s/pipe %s/shard trace", tmpdir, tmpdir);
    EXPECT(args, 0, "busy (A)");
    EXPECT(args, 0, "busy (B)");
    EXPECT(args, 0, "busy diff");
    snprintf(args, sizeof args, "compare %s/pipe %s/shard", tmpdir, tmpdir);
    EXPECT(args, 0, "==== liveness ====");
    /* a training and an inference profile: refused, unless forced; then the
     * optimizer state is in A only */
    snprintf(args, sizeof args, "compare %s/pipe %s/pipe/inference/profile.sqlite memory", tmpdir,
             tmpdir);
    EXPECT(args, 1, "different programs");
    snprintf(args, sizeof args,
             "compare %s/pipe %s/pipe/inference/profile.sqlite memory --force --json", tmpdir,
             tmpdir);
    rows = table(run_json(arena, args), "Largest tensors");
    /* rows pair up by tensor name and device, in order: "only in A" when A has
     * more buffers of that name there than the inference profile (usually none) */
    char infer_db[512];
    snprintf(infer_db, sizeof infer_db, "%s/pipe/inference/profile.sqlite", tmpdir);
    int only_a = 0;
    for (size_t i = 0; rows && i < rows->count; i++) {
        const tg_json *r = rows->items[i];
        const char *present = str(r, "present");
        double in_b =
            sql_num(infer_db, "SELECT COUNT(*) FROM tensors WHERE device = ?1 AND name = ?2",
                    (int)num(r, "device"), str(r, "tensor"));
        double in_a =
            sql_num(pipe_db, "SELECT COUNT(*) FROM tensors WHERE device = ?1 AND name = ?2",
                    (int)num(r, "device"), str(r, "tensor"));
        if (!strcmp(present, "only in A")) {
            only_a++;
            TG_CHECK(in_a > in_b);
        } else if (!strcmp(present, "only in B")) {
            TG_CHECK(in_b > in_a);
        } else {
            TG_CHECK(in_a > 0 && in_b > 0);
        }
    }
    TG_CHECK(only_a >= (int)sql_num(pipe_db,
                                    "SELECT COUNT(*) FROM tensors WHERE category = ?2 "
                                    "AND ?1 = ?1",
                                    0, "gradient accumulators"));
    double grads = sql_num(pipe_db, "SELECT COUNT(*) FROM tensors WHERE category = ?2 AND ?1 = ?1",
                           0, "optimizer state");
    TG_CHECK(grads > 0); /* trained with adamw: its moments exist in training only */
    tg_arena_destroy(arena);
}

static void test_bad_inputs(void)
{
    char args[1024], path[512];
    snprintf(args, sizeof args, "analyse %s/missing.sqlite", tmpdir);
    EXPECT(args, 1, "missing.sqlite");
    snprintf(path, sizeof path, "%s/junk.sqlite", tmpdir);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("this is not a profile\n", f);
        fclose(f);
    }
    snprintf(args, sizeof args, "analyse %s memory", path);
    EXPECT(args, 1, "junk.sqlite");
    snprintf(args, sizeof args, "analyse %s", tmpdir);
    EXPECT(args, 1, "holds no training/profile.sqlite");
    snprintf(args, sizeof args, "compare %s/pipe %s", tmpdir, path);
    EXPECT(args, 1, "junk.sqlite");
    snprintf(args, sizeof args, "analyse %s/pipe flamegraph", tmpdir);
    EXPECT(args, 2, "unknown view 'flamegraph'");
    EXPECT("analyse", 2, "expected REPORT");
    EXPECT("analyse --help", 0, "--top");
}

static int train(const char *strategy, const char *dir)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "TILEGRAPH_ENGINE_OPTIONS='{\"autoReport.all\":\"true\",\"autoReport.directory\":"
             "\"%s/%s\"}' %s/tilegraph train --model mnist-pipeline --strategy %s "
             "--gradient-accumulation 4 --batch-size 8 --train-limit 640 --test-limit 200 "
             "--optimizer adamw "
             "--quiet > %s/train.txt 2>&1",
             tmpdir, dir, TG_BINARY_DIR, strategy, tmpdir);
    int r = system(cmd);
    return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

int main(void)
{
    int begun = tg_test_fashion_tmpdir("analyse", tmpdir, sizeof tmpdir);
    if (begun)
        return begun;
    if (train("pipelined", "pipe") != 0 || train("sharded", "shard") != 0) {
        fprintf(stderr, "training with autoReport failed; see %s/train.txt\n", tmpdir);
        return 1;
    }
    snprintf(pipe_db, sizeof pipe_db, "%s/pipe/training/profile.sqlite", tmpdir);
    snprintf(shard_db, sizeof shard_db, "%s/shard/training/profile.sqlite", tmpdir);
    TG_RUN(test_memory_matches_profile);
    TG_RUN(test_trace_busy_fractions);
    TG_RUN(test_other_views);
    TG_RUN(test_compare);
    TG_RUN(test_bad_inputs);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
