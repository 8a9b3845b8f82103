/* fuzz/fuzz_text.c - libFuzzer target for text data sets (data/text.c).
 *
 * Any input must load or fail with a message, as bytes and as UTF-8
 * characters; what loads must have every token inside its vocabulary, the
 * vocabulary's code points ascending and valid, and its windows inside the
 * token stream.
 */
#include "core/error.h"
#include "data/dataset.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *data, size_t size, tg_text_tokens t, tg_split split)
{
    tg_text_config c = {t, 3, 0};
    tg_dataset *ds = NULL;
    if (tg_dataset_text_from_memory(data, size, "fuzz", &c, split, 0, &ds) != TG_OK) {
        if (ds || tg_error_message()[0] == '\0')
            abort();
        return;
    }
    const int32_t *tok, *cps;
    int64_t n = tg_dataset_tokens(ds, &tok);
    int v = tg_dataset_vocab(ds, NULL, &cps);
    if (n != ds->n * 3 + 1 || v < 1 || (t == TG_TOKENS_BYTE && v != 256))
        abort();
    for (int64_t i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= v)
            abort();
    for (int i = 1; cps && i < v; i++)
        if (cps[i] <= cps[i - 1] || cps[i] > 0x10FFFF || (cps[i] >= 0xD800 && cps[i] <= 0xDFFF))
            abort();
    tg_dataset_destroy(ds);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int t = 0; t < 2; t++)
        for (int s = 0; s < 2; s++)
            check(data, size, (tg_text_tokens)t, (tg_split)s);
    return 0;
}
