/* tests/analyse/test_host_view.c - the host trace lands in the profile and
 * `tilegraph analyse REPORT host` aggregates it into a call tree whose
 * counts and nesting match what ran; the counters (samples/s, loss, loss
 * scale, loader queue depth, memory in use) are recorded once per host step
 * and the view summarises each series as the profile holds it. */
#include "tg_test.h"

#include <math.h>
#include <stdbool.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char out[65536];

static int run(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = '\0';
    return p ? pclose(p) : -1;
}

/* In the call tree's text, is `child` a row one level (two spaces) under
 * the top-level row `parent`, before the next top-level row? Rows are
 * "  name  numbers" at the top level, "    name  numbers" one below. */
static bool is_child(const char *text, const char *parent, const char *child)
{
    char want[96];
    snprintf(want, sizeof want, "\n  %s ", parent);
    const char *at = strstr(text, want);
    if (!at)
        return false;
    at += strlen(want);
    for (const char *line = strchr(at, '\n'); line && line[1] == ' ';
         line = strchr(line + 1, '\n')) {
        if (line[2] != ' ' || line[3] != ' ')
            return false; /* the next top-level row: parent's children end here */
        if (line[4] == ' ' && line[5] != ' ' && !strncmp(line + 5, child, strlen(child)))
            return line[5 + strlen(child)] == ' ';
    }
    return false;
}

static void test_host_call_tree(void)
{
    char dir[] = "/tmp/tg_host_view_XXXXXX", cmd[2048];
    if (!TG_MKDTEMP(dir))
        return;
    /* 640 samples of 8 x 4 micro-batches: 20 host steps; the trace records them all */
    snprintf(
        cmd, sizeof cmd,
        "TILEGRAPH_TRACE='{\"enable\":\"true\",\"directory\":\"%s/trace\"}' "
        "TILEGRAPH_ENGINE_OPTIONS='{\"autoReport.all\":\"true\",\"autoReport.directory\":\"%s\"}' "
        "%s/tilegraph train --model mnist-pipeline --strategy pipelined --gradient-accumulation 4 "
        "--batch-size 8 --train-limit 640 --test-limit 200 --quiet 2>&1",
        dir, dir, TG_BINARY_DIR);
    TG_CHECK(run(cmd) == 0);
    snprintf(cmd, sizeof cmd, "%s/tilegraph analyse %s host 2>&1", TG_BINARY_DIR, dir);
    TG_CHECK(run(cmd) == 0);
    TG_CHECK(strstr(out, "Host call tree") != NULL);
    /* compile's passes sit under compile, indented */
    TG_CHECK(is_child(out, "compile", "memory plan"));
    TG_CHECK(is_child(out, "compile", "schedule"));
    TG_CHECK(!is_child(out, "compile", "load batch")); /* a sibling is not a child */
    snprintf(cmd, sizeof cmd, "%s/tilegraph analyse %s host --json 2>&1", TG_BINARY_DIR, dir);
    TG_CHECK(run(cmd) == 0);
    /* the host trace is the process's: 20 training host steps (640 / (8 x 4))
     * and the one evaluation step run before the training session closed */
    char *at = strstr(out, "\"host step\"");
    TG_CHECK(at != NULL);
    if (at) {
        char *calls = strstr(at, "\"calls\":");
        TG_CHECK(calls && atoi(calls + 8) == 21);
    }
    /* issue 15 item 1: compare lifts --top to "all", which overflowed the
     * row limit to nothing ("(none)", "rows": []) */
    snprintf(cmd, sizeof cmd, "%s/tilegraph compare %s %s host --json 2>&1", TG_BINARY_DIR, dir,
             dir);
    TG_CHECK(run(cmd) == 0);
    TG_CHECK(strstr(out, "\"rows\": []") == NULL && strstr(out, "\"rows\":[]") == NULL);
    at = strstr(out, "\"host step\"");
    TG_CHECK(at != NULL);
    if (at) {
        char *calls = strstr(at, "\"calls (B)\":");
        TG_CHECK(calls && atoi(calls + 12) == 21);
    }
    snprintf(cmd, sizeof cmd, "%s/tilegraph compare %s %s host 2>&1", TG_BINARY_DIR, dir, dir);
    TG_CHECK(run(cmd) == 0);
    TG_CHECK(strstr(out, "(none)") == NULL && strstr(out, "host step") != NULL);
    /* counters: one row per training host step (20) for each series */
    char db[512];
    snprintf(db, sizeof db, "%s/training/profile.sqlite", dir);
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    int names = 0, whole = 0;
    double last_loss = NAN;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h,
                           "SELECT name, COUNT(*), MIN(step), MAX(step) FROM counters "
                           "GROUP BY name",
                           -1, &st, NULL) == SQLITE_OK)
        while (sqlite3_step(st) == SQLITE_ROW) {
            names++;
            whole += sqlite3_column_int(st, 1) == 20 && sqlite3_column_int(st, 2) == 0 &&
                     sqlite3_column_int(st, 3) == 19;
        }
    sqlite3_finalize(st);
    if (h &&
        sqlite3_prepare_v2(h,
                           "SELECT value FROM counters WHERE name = 'loss' ORDER BY step "
                           "DESC LIMIT 1",
                           -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        last_loss = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    TG_CHECK(names == 8 &&
             whole == 8); /* train's samples, samples/s, loss, queue; the session's 4 */
    TG_CHECK(last_loss > 0 && last_loss < 10);
    snprintf(cmd, sizeof cmd, "%s/tilegraph analyse %s host --json 2>&1", TG_BINARY_DIR, dir);
    TG_CHECK(run(cmd) == 0);
    at = strstr(out, "{\"counter\":\"loss\"");
    TG_CHECK(at != NULL);
    if (at) {
        char *steps = strstr(at, "\"host steps\":"), *last = strstr(at, "\"last\":");
        TG_CHECK(steps && atoi(steps + 13) == 20);
        TG_CHECK(last && fabs(atof(last + 7) - last_loss) < 1e-6 * last_loss);
    }
    for (const char *const *n =
             (const char *const[]){"samples/s", "loss scale", "loader queue depth",
                                   "host memory in use (bytes)", NULL};
         *n; n++) {
        char want[96];
        snprintf(want, sizeof want, "{\"counter\":\"%s\"", *n);
        TG_CHECK(strstr(out, want) != NULL);
    }
    /* --op filters the regions by name (its parameter was never bound) */
    snprintf(cmd, sizeof cmd, "%s/tilegraph analyse %s host --op load 2>&1", TG_BINARY_DIR, dir);
    TG_CHECK(run(cmd) == 0);
    /* (the call tree's part: the counters above it are filtered by name too) */
    char *tree = strstr(out, "Host call tree"), *end = tree ? strstr(tree, "\n\n") : NULL;
    if (end)
        *end = '\0'; /* the table ends at a blank line; the notes follow */
    TG_CHECK(tree && strstr(tree, "load batch") != NULL && strstr(tree, "host step") == NULL);
    if (end)
        *end = '\n';
    TG_CHECK(strstr(out, "loader queue depth") && !strstr(out, "samples/s"));
    tg_test_remove_dir(dir);
}

int main(void)
{
    TG_RUN(test_host_call_tree);
    return tg_test_finish();
}
