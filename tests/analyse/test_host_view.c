/* tests/analyse/test_host_view.c - the host trace lands in the profile and
 * `tilegraph analyse REPORT host` aggregates it into a call tree whose
 * counts and nesting match what ran. */
#include "tg_test.h"

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

static void test_host_call_tree(void)
{
    char dir[] = "/tmp/tg_host_view_XXXXXX", cmd[2048];
    if (!mkdtemp(dir))
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
    TG_CHECK(strstr(out, "\n  compile") != NULL || strstr(out, "compile ") != NULL);
    TG_CHECK(strstr(out, "    memory plan") != NULL);
    TG_CHECK(strstr(out, "    schedule") != NULL);
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
    /* --op filters the regions by name (its parameter was never bound) */
    snprintf(cmd, sizeof cmd, "%s/tilegraph analyse %s host --op load 2>&1", TG_BINARY_DIR, dir);
    TG_CHECK(run(cmd) == 0);
    TG_CHECK(strstr(out, "load batch") != NULL && strstr(out, "host step") == NULL);
    tg_test_remove_dir(dir);
}

int main(void)
{
    TG_RUN(test_host_call_tree);
    return tg_test_finish();
}
