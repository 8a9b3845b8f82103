/* fuzz/fuzz_idx.c - libFuzzer target for the IDX reader (raw and gzip input).
 *
 * Any input must load or fail with a message; what loads must be as large as
 * its dimensions say (every byte is read, so ASan sees any overrun).
 */
#include "data/idx.h"
#include "core/error.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *data, size_t size, int want_ndim, int64_t max_items)
{
    tg_idx a;
    tg_status s = tg_idx_parse(data, size, "fuzz", want_ndim, max_items, &a);
    if (s != TG_OK) {
        if (a.data || tg_error_message()[0] == '\0')
            abort();
        return;
    }
    if ((a.ndim != 1 && a.ndim != 3) || (size_t)(a.dim[0] * a.dim[1] * a.dim[2]) != a.bytes)
        abort();
    if (max_items > 0 && a.dim[0] > max_items)
        abort();
    unsigned sum = 0;
    for (size_t i = 0; i < a.bytes; i++)
        sum += a.data[i];
    tg_idx_free(&a);
    if (sum == 0xFFFFFFFFu) /* keep the loop */
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check(data, size, 0, 0);
    check(data, size, TG_IDX_IMAGES, 2);
    return 0;
}
