/* data/synthetic.c - deterministic, learnable synthetic image data.
 *
 * For benchmarks and tests that need data of a given shape without files
 * (CIFAR-10 is not installed here). Each class has a pattern: every 4x4 cell
 * of every channel is bright or dark, chosen by a hash of (geometry, class,
 * channel, cell); a sample is its class's pattern plus uniform noise, so a
 * linear model can learn the task but not instantly. The patterns depend on
 * the geometry and class count only, so a train set and a test set made with
 * two seeds are the same task. Cells are mirrored left-right, so a random
 * horizontal flip (a loader augmentation) leaves the task unchanged.
 */
#include "data/dataset.h"

#include "core/error.h"
#include "core/rng.h"

#include <stdio.h>

#define CELL 4
#define NOISE 96 /* pixel noise amplitude: values are pattern +- NOISE/2 */

tg_status tg_dataset_synthetic(int64_t n, int c, int h, int w, int num_classes, uint64_t seed,
                               tg_dataset **out)
{
    tg_status st = tg_dataset_create("synthetic", n, c, h, w, num_classes, out);
    if (st != TG_OK)
        return tg_error_prefix(st, "synthetic dataset");
    tg_dataset *ds = *out;
    uint64_t geom = tg_hash64(((uint64_t)c << 48) ^ ((uint64_t)h << 32) ^ ((uint64_t)w << 16) ^
                              (uint64_t)num_classes);
    tg_rng r;
    tg_rng_seed(&r, tg_hash64(seed ^ 0x5EED5EEDull));
    const int64_t per = (int64_t)c * h * w;
    for (int64_t i = 0; i < n; i++) {
        int label = (int)tg_rng_below(&r, (uint64_t)num_classes);
        ds->labels[i] = label;
        uint8_t *img = ds->images + i * per;
        for (int ch = 0; ch < c; ch++)
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) {
                    int mx = x < w - 1 - x ? x : w - 1 - x; /* mirrored column */
                    uint64_t key = geom ^ ((uint64_t)label << 40) ^ ((uint64_t)ch << 32) ^
                                   ((uint64_t)(y / CELL) << 16) ^ (uint64_t)(mx / CELL);
                    int base = (tg_hash64(key) & 1) ? 176 : 80;
                    int v = base + (int)tg_rng_below(&r, NOISE) - NOISE / 2;
                    img[((int64_t)ch * h + y) * w + x] = (uint8_t)v;
                }
    }
    return TG_OK;
}
