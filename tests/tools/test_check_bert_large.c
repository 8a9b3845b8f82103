/* tests/tools/test_check_bert_large.c - `tilegraph check` on BERT-large in
 * the ordinary suite (issue 46): its 24 layers of 1024 and vocabulary of
 * 30522 at 8 tokens, batch 1, bf16 with dynamic loss scaling, the
 * whole-graph reference included (streamed, runtime/verify_ref.c: a few
 * layers' doubles at once). About 90 s of CPU and 6.9 GiB at its peak, so not
 * in the sanitizer builds (skipped: several times both). Every precision
 * and loss scaling is tests/tools/test_check.c's (label slow), and its own
 * size (128 tokens, batch 4: 11.6 GiB) too. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include <stdio.h>
#include <string.h>

static char tmpdir[256];

static void test_bert_large_at_8_tokens(void)
{
    TG_CLI_EXPECT(tmpdir,
                  "check --model bert-large --input 1x1x8 --batch-size 1 --precision bf16.bf16 "
                  "--loss-scaling dynamic",
                  0, "ok: every tensor within tolerance");
}

int main(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    printf("skipped: BERT-large's check takes several times its 6.9 GiB and 90 s instrumented\n");
    return 77;
#endif
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_check_bert_large_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_bert_large_at_8_tokens);
    return tg_test_finish();
}
