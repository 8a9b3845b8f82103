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
#define OVER "compile --model mnist-pipeline --memory-per-device 1000000"

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
    EXPECT("compile --model mnist-pipeline --target mk2 --batch-size 4000", 1,
           "out of memory: device 0 tile");
    EXPECT("compile --model mnist-pipeline --target mk2 --batch-size 4000", 1,
           "insights: the fullest tile needs");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_compile_oom_XXXXXX");
    if (!mkdtemp(tmpdir))
        return 1;
    TG_RUN(test_out_of_memory_remedies);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
