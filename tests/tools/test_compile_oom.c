/* tests/tools/test_compile_oom.c - `tilegraph compile` out of memory (issue
 * 15, item 4): the message says "out of memory" as Poplar's does, and the
 * re-planned remedies are printed without debug.allowOutOfMemory, as the
 * README promises for a plan over capacity; the exit code stays 1. A
 * remedy that costs memory says "adds", never "saves -N B". */
#include "tg_test.h"
#include "tg_test_cli.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];

#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)
#define OVER "compile --model mnist-pipeline --batch-size 40 --memory-per-device 1000000"

static void test_out_of_memory_remedies(void)
{
    EXPECT(OVER, 1, "tilegraph compile: out of memory: device 0 needs");
    EXPECT(OVER, 1, "each remedy below is this model compiled again with that one change");
    EXPECT(OVER, 1, "offload optimizer state to the host");
    TG_CHECK(strstr(tg_cli_output, "saves -") == NULL);
    EXPECT(OVER, 1, "fp16 weights, activations, gradients");
    /* the same figures as with the option set (where the plan compiles) */
    const char *line = strstr(tg_cli_output, "half the micro-batch");
    char want[200] = "";
    if (line)
        snprintf(want, sizeof want, "%.*s", (int)strcspn(line, "\n"), line);
    TG_CHECK(want[0] != '\0');
    EXPECT(OVER " --engine-option debug.allowOutOfMemory=true", 0, want);
    /* on mk2 the tile is what is over */
    EXPECT("compile --model mnist-pipeline --target mk2 --batch-size 20000", 1,
           "out of memory: device 0 tile");
    EXPECT("compile --model mnist-pipeline --target mk2 --batch-size 20000", 1,
           "insights: the fullest tile needs");
}

/* The remedies are kept in the graph profile compile writes (issue 15):
 * `analyse insights` (text and JSON) and the report show them for that
 * plan, with the figures compile printed. */
static void test_remedies_in_profile(void)
{
    char args[600], line[200] = "";
    snprintf(args, sizeof args, OVER " --profile-dir %s/p", tmpdir);
    EXPECT(args, 1, "graph profile: ");
    const char *at = strstr(tg_cli_output, "offload optimizer state to the host");
    TG_CHECK(at != NULL);
    if (at) /* "3.69 MiB -> 3.00 MiB": the figures, which the view prints too */
        snprintf(line, sizeof line, "%.*s", (int)strcspn(at + 43, ","), at + 43);
    snprintf(args, sizeof args, "analyse %s/p insights", tmpdir);
    EXPECT(args, 0, "Re-planned remedies (compile)");
    EXPECT(args, 0, "compile re-planned 12 remedies for this plan");
    EXPECT(args, 0, "split the model at more layers");
    char need[64] = "", after[64] = "";
    TG_CHECK(sscanf(line, "%63[^-]-> %63[^\n]", need, after) == 2);
    need[strcspn(need, " ") + 4] = '\0'; /* "3.69 MiB" */
    const char *row = strstr(tg_cli_output, "offload optimizer state to the host");
    TG_CHECK(row && strstr(row, need) && strstr(row, after));
    snprintf(args, sizeof args, "analyse %s/p insights --json", tmpdir);
    EXPECT(args, 0, "\"remedy\":\"half the micro-batch\"");
    snprintf(args, sizeof args, "report %s/p -o %s/r.html", tmpdir, tmpdir);
    EXPECT(args, 0, "");
    /* a plan that fits has no remedies to keep, and its view says nothing of them */
    snprintf(args, sizeof args, "compile --model mnist-pipeline --batch-size 40 --profile-dir %s/q",
             tmpdir);
    EXPECT(args, 0, "(0 remedies)");
    snprintf(args, sizeof args, "analyse %s/q insights", tmpdir);
    EXPECT(args, 0, "time: the profile holds no execution trace");
    TG_CHECK(strstr(tg_cli_output, "Re-planned") == NULL);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_compile_oom_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_out_of_memory_remedies);
    TG_RUN(test_remedies_in_profile);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
