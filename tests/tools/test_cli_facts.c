/* tests/tools/test_cli_facts.c - what the command says about a run is what
 * the run did (issue 46's misleading outputs): compile's defaults are
 * train's, the executable cache says hit or miss, memory categories, the
 * remedies' reasons, and the small messages a new user met. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include <stdio.h>
#include <string.h>

static char tmpdir[256];

#define output tg_cli_output
#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)

/* The output holds no `text` (after an EXPECT). */
#define EXPECT_NOT(text)                                                                           \
    do {                                                                                           \
        if (strstr(tg_cli_output, text))                                                           \
            tg_test_fail(__FILE__, __LINE__, "'%s' in:\n%.2000s", text, tg_cli_output);            \
    } while (0)

/* Row 19: a program compiled with compile's defaults is the one train's
 * defaults load (compile used to default to mnist-pipeline at batch 40). */
static void test_compile_defaults_are_trains(void)
{
    char args[768];
    snprintf(args, sizeof args, "compile --save-executable %s/d.tgx", tmpdir);
    EXPECT(args, 0, "fashion-basic: training program");
    snprintf(args, sizeof args,
             "train --executable %s/d.tgx --max-steps 1 --train-limit 64 --test-limit 64", tmpdir);
    EXPECT(args, 0, "executable cache: training program hit (loaded, nothing compiled)");
    EXPECT_NOT("compiling again");
    EXPECT("compile --help", 0, "(FILE.onnx) (default fashion-basic)");
    EXPECT("compile --help", 0, "samples per micro-batch (default 16)");
}

/* Row 20: train --executable-cache says, per program, hit or miss. */
static void test_cache_hit_or_miss(void)
{
    char args[768];
    snprintf(args, sizeof args,
             "train --executable-cache %s/cache --max-steps 1 --train-limit 64 --test-limit 64",
             tmpdir);
    EXPECT(args, 0,
           "executable cache: training program miss (compiled and written); evaluation program "
           "miss (compiled and written)\n");
    EXPECT(args, 0,
           "executable cache: training program hit (loaded, nothing compiled); evaluation "
           "program hit (loaded, nothing compiled)\n");
    /* without a cache, nothing is said */
    EXPECT("train --max-steps 1 --train-limit 64 --test-limit 64", 0, "precision: ");
    EXPECT_NOT("executable cache");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_facts_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    if (tg_test_fashion_dir()) {
        TG_RUN(test_compile_defaults_are_trains);
        TG_RUN(test_cache_hit_or_miss);
    } else
        printf("  skip the train runs: Fashion-MNIST not installed\n");
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
