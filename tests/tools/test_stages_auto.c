/* tests/tools/test_stages_auto.c - `train` and `compile` say which split
 * --stages auto chose (issue 32, item 30): the choice depends on the
 * strategy (a sharded run, with one micro-batch in flight, balances other
 * things than a pipeline), and a user comparing the two must see that each
 * ran another split. The text line, `compile --json`'s and `train --json`'s
 * "auto_stages" name the same split. The cost model runs on its default
 * rates (TILEGRAPH_CALIBRATION=off), so the choice does not depend on how
 * busy the machine is. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include <stdlib.h>
#include <string.h>

static char tmpdir[256];

#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)

#define COMPILE                                                                                    \
    "compile --model mnist-pipeline --batch-size 40 --stages auto --devices 2 "                    \
    "--gradient-accumulation 16 "                                                                  \
    "--batch-size 40 --threads-per-device 1 --strategy "
#define TRAIN                                                                                      \
    "train --model mnist-pipeline --stages auto --devices 2 --gradient-accumulation 2 "            \
    "--batch-size 8 --train-limit 64 --test-limit 32 --threads-per-device 1 --quiet --strategy "

/* compile's split in its JSON, into buf ("" when missing) */
static void compile_json_split(const char *strategy, char *buf, size_t cap)
{
    char args[512];
    snprintf(args, sizeof args, COMPILE "%s --json", strategy);
    tg_arena *a = tg_arena_create(1 << 16);
    const tg_json *j = tg_cli_json(tmpdir, a, args, __FILE__, __LINE__);
    snprintf(buf, cap, "%s", j ? tg_cli_str(j, "auto_stages") : "");
    tg_arena_destroy(a);
}

static void test_compile_names_the_split(void)
{
    char pipe[256], shard[256], want[320];
    compile_json_split("pipelined", pipe, sizeof pipe);
    compile_json_split("sharded", shard, sizeof shard);
    TG_CHECK(strchr(pipe, '|') && strchr(shard, '|'));
    /* the reason the line exists: the two strategies choose differently */
    TG_CHECK(strcmp(pipe, shard) != 0);
    snprintf(want, sizeof want, "\nstages auto: %s (2 devices, pipelined)\n", pipe);
    EXPECT(COMPILE "pipelined", 0, want);
    snprintf(want, sizeof want, "\nstages auto: %s (2 devices, sharded)\n", shard);
    EXPECT(COMPILE "sharded", 0, want);
    /* a split given is not called automatic */
    TG_CHECK(tg_cli_run(tmpdir,
                        "compile --model mnist-pipeline --batch-size 40 --stages 'B1,B2|B3,B4' "
                        "--gradient-accumulation 16 --batch-size 40",
                        1) == 0);
    TG_CHECK(strstr(tg_cli_output, "stages auto") == NULL);
}

static void test_train_names_the_split(void)
{
    char shard[256], want[320];
    compile_json_split("sharded", shard, sizeof shard);
    snprintf(want, sizeof want, "\nstages auto: %s (2 devices)\n", shard);
    EXPECT(TRAIN "sharded", 0, want);
    tg_arena *a = tg_arena_create(1 << 16);
    const tg_json *j = tg_cli_json(tmpdir, a, TRAIN "sharded --json", __FILE__, __LINE__);
    TG_CHECK(j && strcmp(tg_cli_str(j, "auto_stages"), shard) == 0);
    tg_arena_destroy(a);
    /* one device: nothing was chosen, and the record says so with "" */
    a = tg_arena_create(1 << 16);
    j = tg_cli_json(tmpdir, a,
                    "train --model mnist-pipeline --batch-size 8 --train-limit 64 "
                    "--test-limit 32 --quiet --json",
                    __FILE__, __LINE__);
    TG_CHECK(j && tg_json_get(j, "auto_stages") && tg_cli_str(j, "auto_stages")[0] == 0);
    tg_arena_destroy(a);
    EXPECT("train --model mnist-pipeline --batch-size 8 --train-limit 64 --test-limit 32 --quiet",
           0, "test accuracy");
    TG_CHECK(strstr(tg_cli_output, "stages auto") == NULL);
}

/* A search that finds no split is refused as it is (TG_ERR_CAPACITY from
 * the search): compile searches again with a larger margin only when the
 * plan of a split it chose did not fit (program.c tells the two apart by
 * the split recorded, not by the message). */
static void test_no_split_is_not_searched_again(void)
{
    EXPECT("compile --model mnist-pipeline --batch-size 40 --stages auto --devices 2 "
           "--memory-per-device 2000000",
           1, "automatic stages: no split of the model's 4 blocks over 2 devices fits");
    TG_CHECK(strstr(tg_cli_output, "searched again") == NULL);
}

int main(void)
{
    setenv("TILEGRAPH_CALIBRATION", "off", 1); /* the commands inherit it */
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_stages_auto_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_compile_names_the_split);
    TG_RUN(test_train_names_the_split);
    TG_RUN(test_no_split_is_not_searched_again);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
