/* tests/tools/test_phases_auto.c - `--phases auto` (compile/phases_auto.c,
 * issue 31 item 4): the compiler chooses the phases' devices and the
 * tensor locations, and says what it chose and why. BERT-large on mk2 over
 * up to 4 devices gets a plan that fits every tile; a model that fits on
 * chip gets nothing off chip; a model that cannot fit at all is refused
 * naming the closest plan; a cpu run on devices smaller than the model's
 * weights trains with the plan chosen and writes the unlimited run's bytes;
 * `--stages auto` that finds no pipelined split names the phased plan that
 * fits instead of switching strategy. The cost model runs on its default
 * rates (TILEGRAPH_CALIBRATION=off), so the choice does not depend on the
 * machine's load. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include <stdlib.h>
#include <string.h>

static char tmpdir[256];

#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)

#define BERT_LARGE "compile --model bert-large --target mk2 --batch-size 1 --optimizer adamw "

static void test_bert_large_fits_on_mk2(void)
{
    EXPECT(BERT_LARGE "--phases auto --devices 4", 0, "\nphases auto: B1@0|");
    /* weights and optimizer state are never on chip: they alone are 5 GiB
     * against 4 x 897 MiB */
    TG_CHECK(strstr(tg_cli_output, "--offload weights,") != NULL);
    TG_CHECK(strstr(tg_cli_output, "optimizer)") != NULL);
    TG_CHECK(strstr(tg_cli_output, "OUT OF MEMORY") == NULL);
    TG_CHECK(strstr(tg_cli_output, "the fewest copies that fit") != NULL);
    tg_arena *a = tg_arena_create(1 << 20);
    const tg_json *j =
        tg_cli_json(tmpdir, a, BERT_LARGE "--phases auto --devices 4 --json", __FILE__, __LINE__);
    const tg_json *tiles = j ? tg_json_get(j, "tiles") : NULL;
    TG_CHECK(tiles && tiles->count >= 2 && tiles->count <= 4);
    for (size_t d = 0; tiles && d < tiles->count; d++) {
        bool fits = false;
        TG_CHECK(tg_json_get_bool(tg_json_at(tiles, d), "fits", &fits) == TG_OK && fits);
    }
    TG_CHECK(j && strstr(tg_cli_str(j, "auto_offload"), "weights") != NULL);
    tg_arena_destroy(a);
}

static void test_fits_on_chip_offloads_nothing(void)
{
    EXPECT("compile --model mnist-pipeline --batch-size 40 --phases auto --devices 2", 0,
           "\nphases auto: B1@0|B2@0|B3@0|B4@0 (1 device, --offload none)\n  off chip: nothing;");
    TG_CHECK(tg_cli_row_bytes(tg_cli_output, "  offloaded to host") == 0);
}

static void test_cannot_fit_says_so(void)
{
    EXPECT("compile --model mnist-pipeline --batch-size 40 --phases auto --devices 2 "
           "--memory-per-device 1000000",
           1,
           "phases auto: no phased plan of the model's 4 blocks over up to 2 devices fits: the "
           "plan that needs least, ");
    TG_CHECK(strstr(tg_cli_output, "device 0 needs ") != NULL); /* the plan's own figure */
    /* compiled anyway on request: the plan that needs least, said so */
    EXPECT("compile --model mnist-pipeline --batch-size 40 --phases auto --devices 2 "
           "--memory-per-device 1000000 "
           "--engine-option debug.allowOutOfMemory=true",
           0, "none fits: the one that needs least, compiled anyway (debug.allowOutOfMemory)");
    /* a plan over its devices names phases auto among its remedies, with its figure */
    EXPECT("compile --model mnist-pipeline --batch-size 40 --memory-per-device 3000000", 1,
           "phased, the compiler's plan (phases auto)  3.22 MiB -> ");
    EXPECT("compile --model mnist-pipeline --batch-size 40 --phases auto --split layer2", 1,
           "phases auto with split \"layer2\": automatic phases choose among the model's blocks");
}

/* bert-tiny's weights are 1.86 MiB; its devices here have 1.72 MiB */
#define TRAIN                                                                                      \
    "train --model bert-tiny --data text:/usr/share/common-licenses/GPL-3 --batch-size 2 "         \
    "--eval-batch-size 2 --optimizer adamw --train-limit 16 --test-limit 8 --epochs 1 --quiet "    \
    "--threads-per-device 1 "

static void test_trains_below_its_weights(void)
{
    char args[1024];
    snprintf(args, sizeof args,
             TRAIN "--memory-per-device 1800000 --phases auto --devices 2 --save %s/auto.st",
             tmpdir);
    EXPECT(args, 0, "\nphases auto: B1@0|B2@");
    snprintf(args, sizeof args, TRAIN "--save %s/chip.st", tmpdir);
    EXPECT(args, 0, "test accuracy");
    TG_CHECK(tg_cli_same_file(tmpdir, "auto.st", "chip.st"));
    /* on chip alone it is refused */
    EXPECT(TRAIN "--memory-per-device 1800000", 1, "needs");
}

static void test_stages_auto_names_the_phased_plan(void)
{
    EXPECT(BERT_LARGE "--stages auto --devices 4", 1,
           "automatic stages: no split of the model's 4 blocks over 4 devices fits");
    TG_CHECK(strstr(tg_cli_output, "Phased, the model fits: --strategy phased --phases \"B1@0|") !=
             NULL);
    TG_CHECK(strstr(tg_cli_output, "(what --phases auto chooses)") != NULL);
}

int main(void)
{
    setenv("TILEGRAPH_CALIBRATION", "off", 1); /* the commands inherit it */
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_phases_auto_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_bert_large_fits_on_mk2);
    TG_RUN(test_fits_on_chip_offloads_nothing);
    TG_RUN(test_cannot_fit_says_so);
    TG_RUN(test_trains_below_its_weights);
    TG_RUN(test_stages_auto_names_the_phased_plan);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
