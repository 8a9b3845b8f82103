/* tests/tools/test_check_matrix.c - `tilegraph check` on every zoo model
 * under every precision and every loss scaling, BERT-large among them, and
 * BERT-large at its own size (issue 46). Label heavy: about an hour of CPU
 * and 11.6 GiB at its peak, so `make test` (and CI) leaves it out and
 * `make test-heavy` runs it; the ordinary suite has a model per line with
 * every precision and loss scaling once (test_check_models.c) and
 * BERT-large at 8 tokens (test_check_bert_large.c).
 * scripts/check_matrix.py prints the same table with each run's time and
 * peak memory.
 * TG_TEST_LABELS: heavy */
#include "tg_test.h"
#include "tg_test_cli.h"

#include <stdio.h>
#include <string.h>

static char tmpdir[256];

#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)

/* Issue 46 rows 3 and 4: every zoo model under every precision and every
 * loss scaling passes (the language models fed token ids their embeddings
 * have, the reference scaled as the program). Small shapes keep it to
 * minutes, but for BERT-large (about 90 s of CPU each at 8 tokens, its own
 * 24 layers of 1024 and vocabulary of 30522): the ResNets at 16x16, the
 * language models at 8 tokens. scripts/check_matrix.py runs the same table
 * with times and memory, and at full size. */
static void test_every_precision_and_loss_scaling(void)
{
    static const char *models[] = {
        "fashion-basic",
        "mnist-pipeline",
        "resnet18 --input 3x16x16 --stem imagenet",
        "resnet34 --input 3x16x16 --stem imagenet",
        "resnet50 --input 3x16x16 --stem imagenet",
        "resnet101 --input 3x16x16 --stem imagenet",
        "gpt-tiny --input 1x1x8",
        "bert-tiny --input 1x1x8",
        "bert-large --input 1x1x8 --batch-size 1",
    };
    static const char *precisions[] = {"32.32",     "16.32", "16.16",  "bf16.32",
                                       "bf16.bf16", "32.16", "32.bf16"};
    static const char *scalings[] = {"none", "static", "dynamic"};
    char args[512];
    for (size_t m = 0; m < sizeof models / sizeof *models; m++)
        for (size_t p = 0; p < sizeof precisions / sizeof *precisions; p++)
            for (size_t l = 0; l < sizeof scalings / sizeof *scalings; l++) {
                snprintf(args, sizeof args,
                         "check --batch-size 2 --model %s --precision %s --loss-scaling %s",
                         models[m], precisions[p], scalings[l]);
                EXPECT(args, 0, "ok: every tensor within tolerance");
            }
}

/* BERT-large at its own size (128 tokens, check's batch of 4): the
 * whole-graph reference streamed (runtime/verify_ref.c) fits beside the
 * program, where the interpreter's double of every tensor did not (21.6 GB,
 * ended by the OOM killer), so the end-to-end figures are there. */
static void test_bert_large_full_size(void)
{
    EXPECT("check --model bert-large", 0, "ok: every tensor within tolerance");
    EXPECT("check --model bert-large --precision bf16.bf16 --loss-scaling dynamic", 0,
           "ok: every tensor within tolerance");
}

int main(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    printf("skipped: hours instrumented, and several times 11.6 GiB\n");
    return 77;
#endif
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_check_matrix_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_every_precision_and_loss_scaling);
    TG_RUN(test_bert_large_full_size);
    return tg_test_finish();
}
