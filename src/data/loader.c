/* data/loader.c - seeded per-epoch shuffling and normalised batch filling.
 *
 * Normalisation goes through a 256-entry table per channel computed once (a
 * u8 pixel has only 256 values), so filling a step is one table lookup per
 * pixel. With one mean and std every channel uses table 0.
 */
#include "data/loader.h"

#include "tilegraph/trace.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/rng.h"

#include <math.h>
#include <string.h>

struct tg_loader {
    const tg_dataset *ds;
    tg_loader_config cfg;
    int64_t sample_size; /* c * h * w */
    int64_t epoch;
    int64_t pos; /* next position in order[] */
    int64_t *order;
    float lut[TG_LOADER_MAX_CHANNELS][256];
};

tg_loader_config tg_loader_defaults(const tg_dataset *ds, int64_t samples_per_step)
{
    tg_loader_config c = {0};
    c.samples_per_step = samples_per_step;
    c.shuffle = true;
    c.drop_last = true;
    c.mean = ds ? ds->mean : 0.0f;
    c.std = ds ? ds->std : 1.0f;
    return c;
}

tg_status tg_loader_create(const tg_dataset *ds, const tg_loader_config *cfg, tg_loader **out)
{
    *out = NULL;
    if (!ds || !cfg || ds->n <= 0)
        return tg_error(TG_ERR_INVALID_ARG, "loader: no dataset, no configuration or an empty dataset");
    if (cfg->samples_per_step <= 0)
        return tg_error(TG_ERR_CONFIG, "loader for %s: samples per step must be positive, got %lld",
                        ds->name, (long long)cfg->samples_per_step);
    if (!(cfg->std > 0.0f) || !isfinite(cfg->std) || !isfinite(cfg->mean))
        return tg_error(TG_ERR_CONFIG, "loader for %s: normalisation std must be positive and finite, "
                        "got mean %g std %g", ds->name, (double)cfg->mean, (double)cfg->std);
    if (cfg->channel_stats != 0 && cfg->channel_stats != ds->c)
        return tg_error(TG_ERR_CONFIG,
                        "loader for %s: normalisation statistics for %d channels but the images "
                        "have %d", ds->name, cfg->channel_stats, ds->c);
    if (cfg->channel_stats > TG_LOADER_MAX_CHANNELS)
        return tg_error(TG_ERR_CONFIG,
                        "loader for %s: per-channel normalisation covers at most %d channels, "
                        "not %d", ds->name, TG_LOADER_MAX_CHANNELS, cfg->channel_stats);
    for (int c = 0; c < cfg->channel_stats; c++)
        if (!(cfg->channel_std[c] > 0.0f) || !isfinite(cfg->channel_std[c]) ||
            !isfinite(cfg->channel_mean[c]))
            return tg_error(TG_ERR_CONFIG,
                            "loader for %s: channel %d's normalisation std must be positive and "
                            "finite, got mean %g std %g", ds->name, c,
                            (double)cfg->channel_mean[c], (double)cfg->channel_std[c]);
    if (cfg->drop_last && cfg->samples_per_step > ds->n)
        return tg_error(TG_ERR_CONFIG,
                        "loader for %s: %lld samples per step but the dataset has only %lld samples, "
                        "so dropping the incomplete step leaves nothing",
                        ds->name, (long long)cfg->samples_per_step, (long long)ds->n);
    tg_loader *l = tg_calloc(1, sizeof *l);
    int64_t *order = tg_malloc((size_t)ds->n * sizeof *order);
    if (!l || !order) {
        tg_free(l);
        tg_free(order);
        return tg_error(TG_ERR_NOMEM, "loader for %s: out of memory", ds->name);
    }
    l->ds = ds;
    l->cfg = *cfg;
    l->order = order;
    l->sample_size = (int64_t)ds->c * ds->h * ds->w;
    int tables = cfg->channel_stats ? cfg->channel_stats : 1;
    for (int c = 0; c < tables; c++) {
        double mean = cfg->channel_stats ? cfg->channel_mean[c] : cfg->mean;
        double std = cfg->channel_stats ? cfg->channel_std[c] : cfg->std;
        for (int v = 0; v < 256; v++)
            l->lut[c][v] = (float)(((double)v / 255.0 - mean) / std);
    }
    tg_loader_start_epoch(l, 0);
    *out = l;
    return TG_OK;
}

void tg_loader_destroy(tg_loader *l)
{
    if (!l)
        return;
    tg_free(l->order);
    tg_free(l);
}

int64_t tg_loader_steps_per_epoch(const tg_loader *l)
{
    int64_t s = l->cfg.samples_per_step;
    return l->cfg.drop_last ? l->ds->n / s : (l->ds->n + s - 1) / s;
}

int64_t tg_loader_sample_size(const tg_loader *l) { return l->sample_size; }

void tg_loader_start_epoch(tg_loader *l, int64_t epoch)
{
    int64_t n = l->ds->n;
    for (int64_t i = 0; i < n; i++)
        l->order[i] = i;
    if (l->cfg.shuffle) {
        /* The order depends on (seed, epoch) only: start from the identity. */
        tg_rng r;
        tg_rng_seed(&r, tg_hash64(l->cfg.seed) + (uint64_t)epoch);
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)tg_rng_below(&r, (uint64_t)i + 1);
            int64_t t = l->order[i];
            l->order[i] = l->order[j];
            l->order[j] = t;
        }
    }
    l->epoch = epoch;
    l->pos = 0;
}

int64_t tg_loader_epoch(const tg_loader *l) { return l->epoch; }

const int64_t *tg_loader_order(const tg_loader *l) { return l->order; }

tg_status tg_loader_next(tg_loader *l, float *images, int32_t *labels, int64_t *count)
{
    *count = 0;
    int64_t left = l->ds->n - l->pos;
    int64_t take = left < l->cfg.samples_per_step ? left : l->cfg.samples_per_step;
    if (take <= 0 || (l->cfg.drop_last && take < l->cfg.samples_per_step))
        return TG_OK; /* epoch exhausted */
    if (!images || !labels)
        return tg_error(TG_ERR_INVALID_ARG, "loader for %s: no output buffers", l->ds->name);
    const int64_t per = l->sample_size, plane = (int64_t)l->ds->h * l->ds->w;
    static tg_trace_channel *data;
    if (!data)
        data = tg_trace_channel_get("data");
    tg_trace_begin(data, "load batch");
    for (int64_t k = 0; k < take; k++) {
        int64_t idx = l->order[l->pos + k];
        for (int c = 0; c < l->ds->c; c++) {
            const uint8_t *src = l->ds->images + idx * per + c * plane;
            float *dst = images + k * per + c * plane;
            const float *lut = l->lut[l->cfg.channel_stats ? c : 0];
            for (int64_t p = 0; p < plane; p++)
                dst[p] = lut[src[p]];
        }
        labels[k] = l->ds->labels[idx];
    }
    tg_trace_end(data);
    l->pos += take;
    *count = take;
    return TG_OK;
}
