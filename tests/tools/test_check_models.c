/* tests/tools/test_check_models.c - `tilegraph check` on the zoo in the
 * ordinary suite, in seconds (issue 46: check passes every zoo model under
 * every precision and loss scaling): a model per line at its smallest size,
 * the seven precisions and three loss scalings spread over them. BERT-large
 * is tests/tools/test_check_bert_large.c's; the whole table of every model
 * under every setting is tests/tools/test_check.c's (label slow) and
 * scripts/check_matrix.py's. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include <stdio.h>
#include <string.h>

static char tmpdir[256];

static void test_each_model_once(void)
{
    static const char *const runs[] = {
        "--model fashion-basic --precision 32.32 --loss-scaling none",
        "--model fashion-basic --precision 16.16 --loss-scaling static",
        "--model mnist-pipeline --precision 32.16 --loss-scaling dynamic",
        "--model resnet18 --input 3x16x16 --stem imagenet --precision bf16.32 --loss-scaling "
        "static",
        "--model gpt-tiny --input 1x1x8 --precision 16.32 --loss-scaling dynamic",
        "--model bert-tiny --input 1x1x8 --precision 32.bf16 --loss-scaling static",
        "--model bert-tiny --input 1x1x8 --precision bf16.bf16 --loss-scaling dynamic",
    };
    char args[512];
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        snprintf(args, sizeof args, "check --batch-size 2 %s", runs[i]);
        TG_CLI_EXPECT(tmpdir, args, 0, "ok: every tensor within tolerance");
    }
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_check_models_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_each_model_once);
    return tg_test_finish();
}
