/* fuzz/fuzz_cifar.c - libFuzzer target for the CIFAR-10 binary reader.
 *
 * Any input must load or fail with a message; what loads must hold exactly
 * the input's whole records, labels 0..9, pixels equal to the input's bytes
 * (every byte is read, so ASan sees any overrun).
 */
#include "core/error.h"
#include "data/dataset.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *data, size_t size, int64_t max_samples)
{
    tg_dataset *ds = NULL;
    tg_status s = tg_cifar10_parse(data, size, "fuzz", max_samples, &ds);
    if (s != TG_OK) {
        if (ds || tg_error_message()[0] == '\0')
            abort();
        return;
    }
    int64_t records = (int64_t)(size / 3073);
    if (size % 3073 != 0 || ds->n <= 0 || ds->n > records ||
        (max_samples > 0 && ds->n > max_samples))
        abort();
    if (ds->c != 3 || ds->h != 32 || ds->w != 32 || ds->num_classes != 10)
        abort();
    for (int64_t i = 0; i < ds->n; i++) {
        if (ds->labels[i] < 0 || ds->labels[i] > 9 || ds->labels[i] != data[i * 3073])
            abort();
        if (memcmp(ds->images + i * 3072, data + i * 3073 + 1, 3072) != 0)
            abort();
    }
    tg_dataset_destroy(ds);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check(data, size, 0);
    check(data, size, 1);
    return 0;
}
