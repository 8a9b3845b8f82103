/* data/loader_fill.c - what a loader puts in a step: per-sample
 * augmentation (flips, resizing), normalisation and the step's samples
 * (this part's, when a step is split), for the caller's thread and the
 * workers alike (data/loader.c).
 *
 * Normalisation goes through a 256-entry table per channel computed once (a
 * u8 pixel has only 256 values), so filling a step is one table lookup per
 * pixel. With one mean and std every channel uses table 0. A resize first
 * makes the u8 image (so f32 output is exactly the normalised u8 output) in
 * per-thread scratch, using index/weight tables computed at creation.
 */
#include "data/loader_internal.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/rng.h"

#include <math.h>
#include <string.h>

/* ---- filling ------------------------------------------------------------------- */

/* Is sample idx of `epoch` flipped? A pure function of (seed, epoch, idx). */
static int flipped(const tg_loader *l, int64_t epoch, int64_t idx)
{
    if (!(l->cfg.flip_prob > 0.0f))
        return 0;
    uint64_t key =
        tg_hash64(l->cfg.seed ^ 0xF11Bull) ^ tg_hash64((uint64_t)epoch + 0x9E3779B97F4A7C15ull);
    return tg_hash_uniform(key, (uint64_t)idx) < l->cfg.flip_prob;
}

/* Bilinear resize (and flip) of one u8 sample into dst. */
static void resize_sample(const tg_loader *l, const uint8_t *src, int flip, uint8_t *dst)
{
    const int h = l->ds->h, w = l->ds->w, oh = l->oh, ow = l->ow;
    for (int c = 0; c < l->ds->c; c++) {
        const uint8_t *plane = src + (int64_t)c * h * w;
        uint8_t *out = dst + (int64_t)c * oh * ow;
        for (int oy = 0; oy < oh; oy++) {
            const uint8_t *r0 = plane + (int64_t)l->y0[oy] * w,
                          *r1 = plane + (int64_t)l->y1[oy] * w;
            float fy = l->wy[oy];
            for (int ox = 0; ox < ow; ox++) {
                int sx = flip ? ow - 1 - ox : ox;
                int a = l->x0[sx], b = l->x1[sx];
                float fx = l->wx[sx];
                float top = (float)r0[a] + fx * (float)(r0[b] - r0[a]);
                float bot = (float)r1[a] + fx * (float)(r1[b] - r1[a]);
                float v = top + fy * (bot - top);
                out[(int64_t)oy * ow + ox] = (uint8_t)(v + 0.5f);
            }
        }
    }
}

/* Sample idx, flipped or not, into f (floats, normalised) or u (bytes). */
static void prepare_sample(const tg_loader *l, int64_t idx, int flip, float *f, uint8_t *u,
                           uint8_t *scratch)
{
    const uint8_t *src = l->ds->images + idx * l->in_per;
    int oc = l->ds->c;
    int64_t plane = (int64_t)l->oh * l->ow;
    if (l->resize) {
        uint8_t *dst = u ? u : scratch;
        resize_sample(l, src, flip, dst);
        if (f)
            for (int c = 0; c < oc; c++) {
                const float *lut = l->lut[l->cfg.channel_stats ? c : 0];
                const uint8_t *s = dst + c * plane;
                float *d = f + c * plane;
                for (int64_t p = 0; p < plane; p++)
                    d[p] = lut[s[p]];
            }
        return;
    }
    const int w = l->ow, h = l->oh;
    for (int c = 0; c < oc; c++) {
        const uint8_t *s = src + c * plane;
        if (u) {
            uint8_t *d = u + c * plane;
            if (!flip)
                memcpy(d, s, (size_t)plane);
            else
                for (int y = 0; y < h; y++)
                    for (int x = 0; x < w; x++)
                        d[(int64_t)y * w + x] = s[(int64_t)y * w + (w - 1 - x)];
        } else {
            const float *lut = l->lut[l->cfg.channel_stats ? c : 0];
            float *d = f + c * plane;
            if (!flip)
                for (int64_t p = 0; p < plane; p++)
                    d[p] = lut[s[p]];
            else
                for (int y = 0; y < h; y++)
                    for (int x = 0; x < w; x++)
                        d[(int64_t)y * w + x] = lut[s[(int64_t)y * w + (w - 1 - x)]];
        }
    }
}

/* A segmentation set's mask of sample idx into labels [oh, ow]: flipped as
 * its image, resized by the nearest source pixel (a class cannot be
 * interpolated; pixel centres as the bilinear resize's). */
static void fill_mask(const tg_loader *l, int64_t idx, int flip, int32_t *labels)
{
    const int h = l->ds->h, w = l->ds->w, oh = l->oh, ow = l->ow;
    const uint8_t *src = l->ds->masks + idx * h * w;
    for (int oy = 0; oy < oh; oy++) {
        int sy = (int)(((int64_t)2 * oy + 1) * h / (2 * oh));
        for (int ox = 0; ox < ow; ox++) {
            int fx = flip ? ow - 1 - ox : ox;
            int sx = (int)(((int64_t)2 * fx + 1) * w / (2 * ow));
            labels[(int64_t)oy * ow + ox] = src[(int64_t)sy * w + sx];
        }
    }
}

/* Sample idx of `epoch`, flipped or not, and its label(s). */
static void fill_sample(const tg_loader *l, int64_t epoch, int64_t idx, float *f, uint8_t *u,
                        int32_t *labels, uint8_t *scratch)
{
    int flip = flipped(l, epoch, idx);
    prepare_sample(l, idx, flip, f, u, scratch);
    if (l->ds->masks)
        fill_mask(l, idx, flip, labels);
    else
        labels[0] = l->ds->labels[idx];
}

/* Text window idx into ids and labels ([seq_len] each): next-token targets,
 * or BERT's masking (80% mask token, 10% a random token, 10% unchanged),
 * drawn from a hash of (seed, epoch, position in the text) alone. */
static void fill_text(const tg_loader *l, int64_t epoch, int64_t idx, int32_t *ids, int32_t *labels)
{
    const int64_t S = l->ds->seq_len;
    const int32_t *src = l->ds->tokens + idx * S;
    memcpy(ids, src, (size_t)S * sizeof *ids);
    if (!(l->cfg.mask_prob > 0.0f)) {
        memcpy(labels, src + 1, (size_t)S * sizeof *labels);
        return;
    }
    uint64_t key = tg_hash64(l->cfg.seed ^ 0x3A5Cull) ^ tg_hash64((uint64_t)epoch + 0x51ED27ull);
    for (int64_t p = 0; p < S; p++) {
        uint64_t at = (uint64_t)(idx * S + p);
        labels[p] = TG_LOADER_IGNORE_LABEL;
        if (tg_hash_uniform(key, 3 * at) >= l->cfg.mask_prob)
            continue;
        labels[p] = src[p];
        float how = tg_hash_uniform(key, 3 * at + 1);
        if (how < 0.8f)
            ids[p] = l->cfg.mask_token;
        else if (how < 0.9f) {
            int64_t r = (int64_t)(tg_hash_uniform(key, 3 * at + 2) * (float)l->ds->num_classes);
            ids[p] = (int32_t)(r < l->ds->num_classes ? r : l->ds->num_classes - 1);
        }
    }
}

tg_status tg_loader_sample(const tg_loader *l, int64_t index, void *image, int32_t *label)
{
    if (index < 0 || index >= l->ds->n)
        return tg_error(TG_ERR_CONFIG, "%s: sample %lld does not exist (it has %lld)", l->ds->name,
                        (long long)index, (long long)l->ds->n);
    if (l->text) {
        int32_t *labels = label ? label : tg_malloc((size_t)l->label_per * sizeof *labels);
        if (!labels)
            return tg_error(TG_ERR_NOMEM, "%s: out of memory for sample %lld", l->ds->name,
                            (long long)index);
        fill_text(l, 0, index, image, labels);
        if (!label)
            tg_free(labels);
        return TG_OK;
    }
    uint8_t *scratch = NULL;
    if (l->resize && !l->cfg.output_u8 && !(scratch = tg_malloc((size_t)l->out_per)))
        return tg_error(TG_ERR_NOMEM, "%s: out of memory resizing sample %lld", l->ds->name,
                        (long long)index);
    prepare_sample(l, index, 0, l->cfg.output_u8 ? NULL : image, l->cfg.output_u8 ? image : NULL,
                   scratch);
    tg_free(scratch);
    if (label && l->ds->masks)
        fill_mask(l, index, 0, label);
    else if (label)
        *label = l->ds->labels[index];
    return TG_OK;
}

/* Samples of a step this loader hands out (its part of it). */
int64_t tg_loader_part_size(const tg_loader_config *cfg)
{
    return cfg->split_parts > 1 ? cfg->samples_per_step / cfg->split_parts : cfg->samples_per_step;
}

/* Position in the whole step of this part's k-th sample (increasing in k). */
static int64_t step_position(const tg_loader_config *cfg, int64_t k)
{
    if (cfg->split_parts <= 1)
        return k;
    int64_t chunk = cfg->split_chunk;
    return ((k / chunk) * cfg->split_parts + cfg->split_index) * chunk + k % chunk;
}

/* Fill step `step` of `epoch` (order already drawn); returns the sample count. */
int64_t tg_loader_fill_step(const tg_loader *l, int64_t epoch, int64_t step, float *f, uint8_t *u,
                            int32_t *t, int32_t *labels, uint8_t *scratch)
{
    int64_t S = l->cfg.samples_per_step, first = step * S, left = l->ds->n - first;
    int64_t take = left < S ? left : S, n = 0;
    for (int64_t k = 0; k < tg_loader_part_size(&l->cfg); k++, n++) {
        int64_t q = step_position(&l->cfg, k);
        if (q >= take)
            break;
        int64_t idx = l->order[first + q];
        if (l->text) {
            fill_text(l, epoch, idx, t + n * l->out_per, labels + n * l->label_per);
            continue;
        }
        fill_sample(l, epoch, idx, f ? f + n * l->out_per : NULL, u ? u + n * l->out_per : NULL,
                    labels + n * l->label_per, scratch);
    }
    return n;
}
