/* tests/tools/test_train_flags.c - flags that said less than they did
 * (issue 15, items 5 and 8): --workers and --prefetch-depth without
 * --loader async are errors, not ignored, and their help shows one default;
 * --precision's help lists every value its error accepts; `analyse` and
 * `compare` list the host view in --help and in the unknown-view error;
 * `train --target` and `--output-return-period` exist and take effect;
 * `--output-mode sum` says the train accuracy is not available instead of
 * printing 0.00%; train prints "Graph compilation: 100%" with the time. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include "analyse/analyse.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];

#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)
#define TRAIN "train --model fashion-basic --train-limit 160 --test-limit 40 --quiet "

static void test_loader_flags(void)
{
    EXPECT(TRAIN "--workers 2", 1, "--workers applies to the async loader only");
    EXPECT(TRAIN "--prefetch-depth 4", 1, "add --loader async");
    EXPECT(TRAIN "--loader async --workers 2 --prefetch-depth 4", 0, "test accuracy");
    EXPECT("train --help", 0, "--workers");
    TG_CHECK(strstr(tg_cli_output, "(default 1) (default") == NULL);
    TG_CHECK(strstr(tg_cli_output, "(default 3) (default") == NULL);
}

/* Every value the precision error lists is in --help. */
static void test_precision_help(void)
{
    EXPECT(TRAIN "--precision 8.8", 1, "is not one of ");
    char list[256] = "";
    const char *at = strstr(tg_cli_output, "is not one of ");
    if (at)
        snprintf(list, sizeof list, "%s", at + 14);
    list[strcspn(list, "\n")] = '\0';
    EXPECT("train --help", 0, "--precision");
    const char *help = strstr(tg_cli_output, "--precision");
    char line[512] = "";
    if (help)
        snprintf(line, sizeof line, "%.*s", (int)strcspn(help, "\n"), help);
    int values = 0;
    char *save = NULL;
    for (char *v = strtok_r(list, "|", &save); v; v = strtok_r(NULL, "|", &save)) {
        values++;
        if (!strstr(line, v))
            tg_test_fail(__FILE__, __LINE__, "--precision help '%s' lacks '%s'", line, v);
    }
    TG_CHECK(values >= 5);
}

static void test_view_lists(void)
{
    char args[600];
    for (int i = 0; tg_an_views[i].name; i++) {
        EXPECT("analyse --help", 0, tg_an_views[i].name);
        EXPECT("analyse --help", 0, tg_an_views[i].about); /* the table's line, too */
        EXPECT("compare --help", 0, tg_an_views[i].name);
        snprintf(args, sizeof args, "analyse %s nosuchview", tmpdir);
        EXPECT(args, 2, tg_an_views[i].name);
        snprintf(args, sizeof args, "compare %s %s nosuchview", tmpdir, tmpdir);
        EXPECT(args, 2, tg_an_views[i].name);
    }
}

static void test_target_flag(void)
{
    char args[600], db[512];
    snprintf(args, sizeof args, TRAIN "--target mk2 --profile-dir %s/mk2", tmpdir);
    EXPECT(args, 0, "test accuracy");
    snprintf(db, sizeof db, "%s/mk2/training/profile.sqlite", tmpdir);
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    char target[32] = "";
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, "SELECT value FROM meta WHERE key = 'target'", -1, &st, NULL) ==
            SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        snprintf(target, sizeof target, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(h);
    TG_CHECK(!strcmp(target, "mk2"));
    EXPECT(TRAIN "--target tpu", 1, "tpu");
}

static void test_return_period(void)
{
    EXPECT(TRAIN "--output-return-period 2", 1, "applies to --output-mode everyN only");
    EXPECT(TRAIN "--output-mode everyN --device-iterations 4 --output-return-period 2", 0,
           "test accuracy");
    /* the option reaches the session: 3 iterations are not a multiple of 2 */
    EXPECT(TRAIN "--output-mode everyN --device-iterations 3 --output-return-period 2", 1,
           "outputReturnPeriod (2)");
}

static void test_sum_accuracy(void)
{
    EXPECT(TRAIN "--output-mode sum", 0, "train accuracy not available");
    TG_CHECK(strstr(tg_cli_output, "train accuracy 0.00%") == NULL);
    EXPECT(TRAIN "--output-mode sum --json", 0, "\"train_accuracy\":null");
    EXPECT(TRAIN "--output-mode all --json", 0, "\"train_accuracy\":");
    TG_CHECK(strstr(tg_cli_output, "\"train_accuracy\":null") == NULL);
}

/* issue 15, item 7: a strategy that cannot divide a model without blocks
 * is refused, not run on one device; a one-device program names no
 * pipeline schedule */
static void test_strategy_without_blocks(void)
{
    EXPECT(TRAIN "--strategy pipelined", 1, "this model has none");
    EXPECT("compile --model fashion-basic --batch-size 40 --strategy sharded", 1,
           "use --strategy single");
    EXPECT("compile --model fashion-basic --batch-size 40", 0, "schedule none (one device)");
    EXPECT("compile --model mnist-pipeline --batch-size 40", 0, "schedule none (one device)");
    EXPECT("compile --model mnist-pipeline --batch-size 40 --json", 0, "\"schedule\":\"none\"");
    EXPECT("compile --model mnist-pipeline --batch-size 40 --strategy pipelined "
           "--gradient-accumulation 4",
           0, "4 devices");
    TG_CHECK(strstr(tg_cli_output, "schedule none") == NULL);
    char args[600];
    snprintf(args, sizeof args, TRAIN "--profile-dir %s/single", tmpdir);
    EXPECT(args, 0, "test accuracy");
    snprintf(args, sizeof args, "analyse %s/single summary", tmpdir);
    EXPECT(args, 0, "none (one device)");
}

/* "Graph compilation: 100%" and the time, as PopTorch prints it; not in JSON */
static void test_compile_line(void)
{
    EXPECT(TRAIN, 0, "Graph compilation: 100% (");
    EXPECT(TRAIN "--json", 0, "\"epoch\":1");
    TG_CHECK(strstr(tg_cli_output, "Graph compilation") == NULL);
}

int main(void)
{
    int begun = tg_test_fashion_tmpdir("train_flags", tmpdir, sizeof tmpdir);
    if (begun)
        return begun;
    TG_RUN(test_loader_flags);
    TG_RUN(test_precision_help);
    TG_RUN(test_view_lists);
    TG_RUN(test_target_flag);
    TG_RUN(test_return_period);
    TG_RUN(test_sum_accuracy);
    TG_RUN(test_strategy_without_blocks);
    TG_RUN(test_compile_line);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
