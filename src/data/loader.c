/* data/loader.c - seeded per-epoch shuffling, per-sample augmentation and
 * batch filling, on the caller's thread (sync) or by a pool of prefetching
 * workers (async).
 *
 * Normalisation goes through a 256-entry table per channel computed once (a
 * u8 pixel has only 256 values), so filling a step is one table lookup per
 * pixel. With one mean and std every channel uses table 0. A resize first
 * makes the u8 image (so f32 output is exactly the normalised u8 output) in
 * per-thread scratch, using index/weight tables computed at creation.
 *
 * Async ring: step k of the epoch always goes to slot k % depth. Workers take
 * the next unissued step while it is less than depth steps ahead of the
 * consumer, fill its slot without holding the lock, and mark it ready. The
 * consumer takes step k from its slot when ready and frees the slot when it
 * has copied (or released) it, which lets step k + depth be issued. Since a
 * step's content depends only on (order, epoch, step), the workers' timing
 * cannot change what the consumer sees. Restarting an epoch stops issuing,
 * waits for in-flight steps, then reshuffles and clears the ring.
 */
#include "data/loader.h"

#include "tilegraph/trace.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/rng.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef struct slot {
    float *f;
    uint8_t *u;
    int32_t *t; /* text: token ids */
    int32_t *labels;
    int64_t count;
    int ready;
} slot;

typedef struct worker {
    struct tg_loader *l;
    uint8_t *scratch; /* one output sample (u8) for resizing */
} worker;

struct tg_loader {
    const tg_dataset *ds;
    tg_loader_config cfg;
    int oh, ow;
    int resize;
    int64_t in_per, out_per; /* elements per input / output sample */
    int text;                /* a text data set: token windows, labels per position */
    int64_t label_per;       /* labels per sample: 1, seq_len for text, oh * ow for masks */
    int64_t epoch;
    int64_t steps; /* per epoch */
    int64_t *order;
    float lut[TG_LOADER_MAX_CHANNELS][256];
    /* resize tables: source rows/columns and weights per output row/column */
    int *y0, *y1, *x0, *x1;
    float *wy, *wx;
    tg_trace_channel *trace;

    /* consumer side */
    int64_t next_step; /* the step the consumer takes next */
    int borrowed;
    uint8_t *sync_scratch;
    tg_loader_stats stats;

    /* the ring: 1 slot in sync mode (for borrowing), depth slots in async */
    slot *slots;
    int nslots;

    /* async */
    int nworkers, started;
    worker *workers;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, ready_cv, idle_cv;
    int64_t next_issue;
    int inflight, restarting, stop;
    double load_seconds_async; /* summed by workers under mu */
};

tg_status tg_loader_mode_parse(const char *name, tg_loader_mode *out)
{
    if (name && strcmp(name, "sync") == 0)
        *out = TG_LOADER_SYNC;
    else if (name && strcmp(name, "async") == 0)
        *out = TG_LOADER_ASYNC;
    else
        return tg_error(TG_ERR_INVALID_ARG, "loader mode '%s': expected sync or async",
                        name ? name : "(null)");
    return TG_OK;
}

const char *tg_loader_mode_name(tg_loader_mode mode)
{
    return mode == TG_LOADER_ASYNC ? "async" : mode == TG_LOADER_SYNC ? "sync" : "?";
}

tg_loader_config tg_loader_defaults(const tg_dataset *ds, int64_t samples_per_step)
{
    tg_loader_config c = {0};
    c.samples_per_step = samples_per_step;
    c.shuffle = true;
    c.drop_last = true;
    c.mean = ds ? ds->mean : 0.0f;
    c.std = ds ? ds->std : 1.0f;
    if (ds && ds->channel_stats > 0 && ds->channel_stats == ds->c &&
        ds->channel_stats <= TG_LOADER_MAX_CHANNELS) {
        c.channel_stats = ds->channel_stats;
        for (int i = 0; i < ds->channel_stats; i++) {
            c.channel_mean[i] = ds->channel_mean[i];
            c.channel_std[i] = ds->channel_std[i];
        }
    }
    c.mode = TG_LOADER_SYNC;
    c.num_workers = 1;
    c.prefetch_depth = TG_LOADER_DEFAULT_PREFETCH;
    return c;
}

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
static int64_t part_size(const tg_loader_config *cfg)
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
static int64_t fill_step(const tg_loader *l, int64_t epoch, int64_t step, float *f, uint8_t *u,
                         int32_t *t, int32_t *labels, uint8_t *scratch)
{
    int64_t S = l->cfg.samples_per_step, first = step * S, left = l->ds->n - first;
    int64_t take = left < S ? left : S, n = 0;
    for (int64_t k = 0; k < part_size(&l->cfg); k++, n++) {
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

/* ---- epochs --------------------------------------------------------------------- */

static void draw_order(tg_loader *l, int64_t epoch)
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
    l->next_step = 0;
    l->borrowed = 0;
}

void tg_loader_start_epoch(tg_loader *l, int64_t epoch)
{
    if (l->cfg.mode != TG_LOADER_ASYNC) {
        draw_order(l, epoch);
        return;
    }
    pthread_mutex_lock(&l->mu);
    l->restarting = 1; /* no new issues; wait for the steps being filled */
    while (l->inflight > 0)
        pthread_cond_wait(&l->idle_cv, &l->mu);
    draw_order(l, epoch);
    for (int i = 0; i < l->nslots; i++)
        l->slots[i].ready = 0;
    l->next_issue = 0;
    l->restarting = 0;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
}

int64_t tg_loader_epoch(const tg_loader *l)
{
    return l->epoch;
}

const int64_t *tg_loader_order(const tg_loader *l)
{
    return l->order;
}

/* ---- workers -------------------------------------------------------------------- */

static void *worker_main(void *arg)
{
    worker *w = arg;
    tg_loader *l = w->l;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && (l->restarting || l->next_issue >= l->steps ||
                            l->next_issue >= l->next_step + l->nslots))
            pthread_cond_wait(&l->work_cv, &l->mu);
        if (l->stop)
            break;
        int64_t k = l->next_issue++, epoch = l->epoch;
        slot *s = &l->slots[k % l->nslots];
        l->inflight++;
        pthread_mutex_unlock(&l->mu);

        tg_trace_begin(l->trace, "load batch");
        double t0 = tg_clock_seconds();
        int64_t count = fill_step(l, epoch, k, s->f, s->u, s->t, s->labels, w->scratch);
        double dt = tg_clock_seconds() - t0;
        tg_trace_end(l->trace);

        pthread_mutex_lock(&l->mu);
        s->count = count;
        s->ready = 1;
        l->load_seconds_async += dt;
        l->inflight--;
        pthread_cond_broadcast(&l->ready_cv);
        if (l->inflight == 0)
            pthread_cond_broadcast(&l->idle_cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* ---- creation ------------------------------------------------------------------- */

static void stop_workers(tg_loader *l)
{
    if (!l->started)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->started; i++)
        pthread_join(l->threads[i], NULL);
    l->started = 0;
}

void tg_loader_destroy(tg_loader *l)
{
    if (!l)
        return;
    stop_workers(l);
    if (l->cfg.mode == TG_LOADER_ASYNC) {
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->work_cv);
        pthread_cond_destroy(&l->ready_cv);
        pthread_cond_destroy(&l->idle_cv);
    }
    if (l->workers)
        for (int i = 0; i < l->nworkers; i++)
            tg_free(l->workers[i].scratch);
    if (l->slots)
        for (int i = 0; i < l->nslots; i++) {
            tg_free(l->slots[i].f);
            tg_free(l->slots[i].u);
            tg_free(l->slots[i].t);
            tg_free(l->slots[i].labels);
        }
    tg_free(l->slots);
    tg_free(l->workers);
    tg_free(l->threads);
    tg_free(l->y0);
    tg_free(l->sync_scratch);
    tg_free(l->order);
    tg_free(l);
}

/* Half-pixel-centre source positions for `out` outputs over `in` inputs. */
static void resize_table(int in, int out, int *i0, int *i1, float *wt)
{
    double scale = (double)in / out;
    for (int o = 0; o < out; o++) {
        double s = (o + 0.5) * scale - 0.5;
        if (s < 0)
            s = 0;
        int a = (int)s;
        if (a >= in - 1) {
            i0[o] = i1[o] = in - 1;
            wt[o] = 0.0f;
        } else {
            i0[o] = a;
            i1[o] = a + 1;
            wt[o] = (float)(s - a);
        }
    }
}

/* What cannot apply to token windows is refused rather than ignored. */
static tg_status check_text_config(const tg_dataset *ds, const tg_loader_config *cfg)
{
    const char *bad = cfg->flip_prob > 0         ? "flips"
                      : cfg->out_h || cfg->out_w ? "a resize"
                      : cfg->output_u8           ? "8-bit output"
                                                 : NULL;
    if (bad)
        return tg_error(TG_ERR_CONFIG, "loader for %s: %s apply to images, not to text", ds->name,
                        bad);
    if (!(cfg->mask_prob >= 0.0f && cfg->mask_prob <= 1.0f))
        return tg_error(TG_ERR_CONFIG, "loader for %s: mask probability %g is not in [0, 1]",
                        ds->name, (double)cfg->mask_prob);
    return TG_OK;
}

static tg_status check_config(const tg_dataset *ds, const tg_loader_config *cfg)
{
    if (cfg->samples_per_step <= 0)
        return tg_error(TG_ERR_CONFIG, "loader for %s: samples per step must be positive, got %lld",
                        ds->name, (long long)cfg->samples_per_step);
    if (ds->tokens)
        TG_TRY(check_text_config(ds, cfg));
    else if (cfg->mask_prob != 0.0f)
        return tg_error(TG_ERR_CONFIG, "loader for %s: masking applies to text, not to images",
                        ds->name);
    if (!cfg->output_u8 && (!(cfg->std > 0.0f) || !isfinite(cfg->std) || !isfinite(cfg->mean)))
        return tg_error(TG_ERR_CONFIG,
                        "loader for %s: normalisation std must be positive and finite, "
                        "got mean %g std %g",
                        ds->name, (double)cfg->mean, (double)cfg->std);
    if (cfg->channel_stats != 0 && cfg->channel_stats != ds->c)
        return tg_error(TG_ERR_CONFIG,
                        "loader for %s: normalisation statistics for %d channels but the images "
                        "have %d",
                        ds->name, cfg->channel_stats, ds->c);
    if (cfg->channel_stats > TG_LOADER_MAX_CHANNELS)
        return tg_error(TG_ERR_CONFIG,
                        "loader for %s: per-channel normalisation covers at most %d channels, "
                        "not %d",
                        ds->name, TG_LOADER_MAX_CHANNELS, cfg->channel_stats);
    for (int c = 0; c < cfg->channel_stats && !cfg->output_u8; c++)
        if (!(cfg->channel_std[c] > 0.0f) || !isfinite(cfg->channel_std[c]) ||
            !isfinite(cfg->channel_mean[c]))
            return tg_error(TG_ERR_CONFIG,
                            "loader for %s: channel %d's normalisation std must be positive and "
                            "finite, got mean %g std %g",
                            ds->name, c, (double)cfg->channel_mean[c], (double)cfg->channel_std[c]);
    if (cfg->drop_last && cfg->samples_per_step > ds->n)
        return tg_error(
            TG_ERR_CONFIG,
            "loader for %s: %lld samples per step but the dataset has only %lld samples, "
            "so dropping the incomplete step leaves nothing",
            ds->name, (long long)cfg->samples_per_step, (long long)ds->n);
    if (cfg->split_parts > 1 &&
        (cfg->split_index < 0 || cfg->split_index >= cfg->split_parts || cfg->split_chunk <= 0 ||
         cfg->samples_per_step % (cfg->split_chunk * cfg->split_parts)))
        return tg_error(TG_ERR_CONFIG,
                        "loader for %s: part %d of %d in chunks of %lld samples does not cut a "
                        "step of %lld samples evenly",
                        ds->name, cfg->split_index, cfg->split_parts, (long long)cfg->split_chunk,
                        (long long)cfg->samples_per_step);
    if (cfg->mode != TG_LOADER_SYNC && cfg->mode != TG_LOADER_ASYNC)
        return tg_error(TG_ERR_CONFIG, "loader for %s: unknown mode %d", ds->name, (int)cfg->mode);
    if (cfg->num_workers < 0 || cfg->num_workers > TG_LOADER_MAX_WORKERS)
        return tg_error(TG_ERR_CONFIG, "loader for %s: %d workers; allowed 1..%d (0: 1)", ds->name,
                        cfg->num_workers, TG_LOADER_MAX_WORKERS);
    if (cfg->prefetch_depth < 0 || cfg->prefetch_depth > TG_LOADER_MAX_PREFETCH)
        return tg_error(TG_ERR_CONFIG, "loader for %s: prefetch depth %d; allowed 1..%d (0: %d)",
                        ds->name, cfg->prefetch_depth, TG_LOADER_MAX_PREFETCH,
                        TG_LOADER_DEFAULT_PREFETCH);
    if (!(cfg->flip_prob >= 0.0f && cfg->flip_prob <= 1.0f))
        return tg_error(TG_ERR_CONFIG, "loader for %s: flip probability %g is not in [0, 1]",
                        ds->name, (double)cfg->flip_prob);
    if ((cfg->out_h == 0) != (cfg->out_w == 0) || cfg->out_h < 0 || cfg->out_w < 0 ||
        cfg->out_h > 16384 || cfg->out_w > 16384)
        return tg_error(TG_ERR_CONFIG,
                        "loader for %s: output size %dx%d; give both height and width (1..16384), "
                        "or neither",
                        ds->name, cfg->out_h, cfg->out_w);
    return TG_OK;
}

static tg_status create_fail(tg_loader *l, const char *what)
{
    const char *name = l->ds->name;
    tg_status st = tg_error(TG_ERR_NOMEM, "loader for %s: %s", name, what);
    tg_loader_destroy(l);
    return st;
}

tg_status tg_loader_create(const tg_dataset *ds, const tg_loader_config *cfg, tg_loader **out)
{
    *out = NULL;
    if (!ds || !cfg || ds->n <= 0)
        return tg_error(TG_ERR_INVALID_ARG,
                        "loader: no dataset, no configuration or an empty dataset");
    TG_TRY(check_config(ds, cfg));
    tg_loader *l = tg_calloc(1, sizeof *l);
    if (!l)
        return tg_error(TG_ERR_NOMEM, "loader for %s: out of memory", ds->name);
    l->ds = ds;
    l->cfg = *cfg;
    l->oh = cfg->out_h ? cfg->out_h : ds->h;
    l->ow = cfg->out_w ? cfg->out_w : ds->w;
    l->resize = l->oh != ds->h || l->ow != ds->w;
    l->in_per = (int64_t)ds->c * ds->h * ds->w;
    l->out_per = (int64_t)ds->c * l->oh * l->ow;
    l->text = ds->tokens != NULL;
    l->label_per = l->text ? ds->seq_len : ds->masks ? (int64_t)l->oh * l->ow : 1;
    int64_t S = cfg->samples_per_step;
    l->steps = cfg->drop_last ? ds->n / S : (ds->n + S - 1) / S;
    S = part_size(cfg); /* what one step's buffers hold */
    l->trace = tg_trace_channel_get("data");
    l->order = tg_malloc((size_t)ds->n * sizeof *l->order);
    if (!l->order)
        return create_fail(l, "out of memory for the sample order");
    if (l->resize) {
        /* one block: y0 y1 x0 x1 (ints) then wy wx (floats) */
        size_t ints = 2 * (size_t)l->oh + 2 * (size_t)l->ow;
        l->y0 = tg_malloc(ints * sizeof(int) + ((size_t)l->oh + l->ow) * sizeof(float));
        if (!l->y0)
            return create_fail(l, "out of memory for the resize tables");
        l->y1 = l->y0 + l->oh;
        l->x0 = l->y1 + l->oh;
        l->x1 = l->x0 + l->ow;
        l->wy = (float *)(l->x1 + l->ow);
        l->wx = l->wy + l->oh;
        resize_table(ds->h, l->oh, l->y0, l->y1, l->wy);
        resize_table(ds->w, l->ow, l->x0, l->x1, l->wx);
        l->sync_scratch = tg_malloc((size_t)l->out_per);
        if (!l->sync_scratch)
            return create_fail(l, "out of memory for the resize scratch");
    }
    int tables = cfg->channel_stats ? cfg->channel_stats : 1;
    for (int c = 0; c < tables; c++) {
        double mean = cfg->channel_stats ? cfg->channel_mean[c] : cfg->mean;
        double std = cfg->channel_stats ? cfg->channel_std[c] : cfg->std;
        for (int v = 0; v < 256; v++)
            l->lut[c][v] = (float)(((double)v / 255.0 - mean) / std);
    }
    int async = cfg->mode == TG_LOADER_ASYNC;
    l->nslots =
        async ? (cfg->prefetch_depth ? cfg->prefetch_depth : TG_LOADER_DEFAULT_PREFETCH) : 1;
    l->slots = tg_calloc((size_t)l->nslots, sizeof *l->slots);
    if (!l->slots)
        return create_fail(l, "out of memory for the step buffers");
    for (int i = 0; i < l->nslots; i++) {
        slot *s = &l->slots[i];
        if (l->text)
            s->t = tg_malloc((size_t)(S * l->out_per) * sizeof(int32_t));
        else if (cfg->output_u8)
            s->u = tg_malloc((size_t)(S * l->out_per));
        else
            s->f = tg_malloc((size_t)(S * l->out_per) * sizeof(float));
        s->labels = tg_malloc((size_t)(S * l->label_per) * sizeof(int32_t));
        if ((!s->u && !s->f && !s->t) || !s->labels) {
            char why[160];
            snprintf(why, sizeof why,
                     "out of memory for the step buffers (%lld samples of %lld values per host "
                     "step, %d buffer%s)",
                     (long long)S, (long long)l->out_per, l->nslots, l->nslots == 1 ? "" : "s");
            return create_fail(l, why);
        }
    }
    draw_order(l, 0);
    if (async) {
        l->nworkers = cfg->num_workers ? cfg->num_workers : 1;
        pthread_mutex_init(&l->mu, NULL);
        pthread_cond_init(&l->work_cv, NULL);
        pthread_cond_init(&l->ready_cv, NULL);
        pthread_cond_init(&l->idle_cv, NULL);
        l->workers = tg_calloc((size_t)l->nworkers, sizeof *l->workers);
        l->threads = tg_calloc((size_t)l->nworkers, sizeof *l->threads);
        if (!l->workers || !l->threads)
            return create_fail(l, "out of memory for the workers");
        for (int i = 0; i < l->nworkers; i++) {
            l->workers[i].l = l;
            if (l->resize && !(l->workers[i].scratch = tg_malloc((size_t)l->out_per)))
                return create_fail(l, "out of memory for the workers' scratch");
        }
        for (int i = 0; i < l->nworkers; i++) {
            if (pthread_create(&l->threads[i], NULL, worker_main, &l->workers[i]) != 0) {
                tg_loader_destroy(l); /* joins the ones started */
                return tg_error(TG_ERR_IO, "loader for %s: cannot start worker thread %d of %d",
                                ds->name, i + 1, cfg->num_workers);
            }
            l->started = i + 1;
        }
    }
    *out = l;
    return TG_OK;
}

/* ---- the consumer ---------------------------------------------------------------- */

int64_t tg_loader_steps_per_epoch(const tg_loader *l)
{
    return l->steps;
}

int64_t tg_loader_sample_size(const tg_loader *l)
{
    return l->out_per;
}

void tg_loader_sample_shape(const tg_loader *l, int *c, int *h, int *w)
{
    *c = l->ds->c;
    *h = l->oh;
    *w = l->ow;
}

int tg_loader_queue_depth(tg_loader *l)
{
    if (l->cfg.mode != TG_LOADER_ASYNC)
        return 0;
    int ready = 0;
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < l->nslots; i++)
        ready += l->slots[i].ready != 0;
    pthread_mutex_unlock(&l->mu);
    return ready;
}

tg_loader_stats tg_loader_get_stats(const tg_loader *l)
{
    tg_loader_stats s = l->stats;
    if (l->cfg.mode == TG_LOADER_ASYNC) {
        pthread_mutex_lock((pthread_mutex_t *)&l->mu);
        s.load_seconds = l->load_seconds_async;
        pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
    }
    return s;
}

static void count_step(tg_loader *l, int64_t count, double wait)
{
    l->stats.steps++;
    l->stats.samples += count;
    l->stats.wait_seconds += wait;
    if (wait > l->stats.max_wait_seconds)
        l->stats.max_wait_seconds = wait;
}

tg_status tg_loader_borrow(tg_loader *l, tg_loader_batch *b)
{
    memset(b, 0, sizeof *b);
    if (l->borrowed)
        return tg_error(TG_ERR_INVALID_ARG,
                        "loader for %s: step %lld is still borrowed; release it "
                        "first",
                        l->ds->name, (long long)(l->next_step));
    if (l->next_step >= l->steps)
        return TG_OK; /* epoch exhausted */
    slot *s = &l->slots[l->next_step % l->nslots];
    double wait = 0.0;
    if (l->cfg.mode == TG_LOADER_ASYNC) {
        pthread_mutex_lock(&l->mu);
        if (!s->ready) {
            tg_trace_begin(l->trace, "wait for batch");
            double t0 = tg_clock_seconds();
            while (!s->ready)
                pthread_cond_wait(&l->ready_cv, &l->mu);
            wait = tg_clock_seconds() - t0;
            tg_trace_end(l->trace);
            l->stats.waited_steps++;
        }
        pthread_mutex_unlock(&l->mu);
    } else {
        tg_trace_begin(l->trace, "load batch");
        double t0 = tg_clock_seconds();
        s->count =
            fill_step(l, l->epoch, l->next_step, s->f, s->u, s->t, s->labels, l->sync_scratch);
        wait = tg_clock_seconds() - t0;
        tg_trace_end(l->trace);
        l->stats.load_seconds += wait;
        l->stats.waited_steps++;
    }
    count_step(l, s->count, wait);
    b->images = s->f;
    b->images_u8 = s->u;
    b->tokens = s->t;
    b->labels = s->labels;
    b->count = s->count;
    b->step = l->next_step;
    l->borrowed = 1;
    return TG_OK;
}

void tg_loader_release(tg_loader *l, tg_loader_batch *b)
{
    if (!l->borrowed || !b || b->count == 0)
        return;
    if (l->cfg.mode == TG_LOADER_ASYNC) {
        pthread_mutex_lock(&l->mu);
        l->slots[l->next_step % l->nslots].ready = 0;
        l->next_step++;
        l->borrowed = 0;
        pthread_cond_broadcast(&l->work_cv);
        pthread_mutex_unlock(&l->mu);
    } else {
        l->next_step++;
        l->borrowed = 0;
    }
    memset(b, 0, sizeof *b);
}

static tg_status next_any(tg_loader *l, float *f, uint8_t *u, int32_t *t, int32_t *labels,
                          int64_t *count)
{
    *count = 0;
    if (l->borrowed)
        return tg_error(TG_ERR_INVALID_ARG,
                        "loader for %s: step %lld is still borrowed; release it "
                        "first",
                        l->ds->name, (long long)l->next_step);
    if (l->next_step >= l->steps)
        return TG_OK; /* epoch exhausted */
    if ((!f && !u && !t) || !labels)
        return tg_error(TG_ERR_INVALID_ARG, "loader for %s: no output buffers", l->ds->name);
    if (l->cfg.mode != TG_LOADER_ASYNC) {
        /* straight into the caller's buffers: no copy */
        tg_trace_begin(l->trace, "load batch");
        double t0 = tg_clock_seconds();
        int64_t n = fill_step(l, l->epoch, l->next_step, f, u, t, labels, l->sync_scratch);
        double dt = tg_clock_seconds() - t0;
        tg_trace_end(l->trace);
        l->stats.load_seconds += dt;
        l->stats.waited_steps++;
        count_step(l, n, dt);
        l->next_step++;
        *count = n;
        return TG_OK;
    }
    tg_loader_batch b;
    TG_TRY(tg_loader_borrow(l, &b));
    size_t px = (size_t)(b.count * l->out_per);
    if (f)
        memcpy(f, b.images, px * sizeof(float));
    else if (u)
        memcpy(u, b.images_u8, px);
    else
        memcpy(t, b.tokens, px * sizeof *t);
    memcpy(labels, b.labels, (size_t)(b.count * l->label_per) * sizeof *labels);
    *count = b.count;
    tg_loader_release(l, &b);
    return TG_OK;
}

tg_status tg_loader_next(tg_loader *l, float *images, int32_t *labels, int64_t *count)
{
    *count = 0;
    if (l->cfg.output_u8 || l->text)
        return tg_error(TG_ERR_INVALID_ARG, "loader for %s: %s; use %s", l->ds->name,
                        l->text ? "a text data set" : "configured for 8-bit output",
                        l->text ? "tg_loader_next_tokens" : "tg_loader_next_u8");
    return next_any(l, images, NULL, NULL, labels, count);
}

tg_status tg_loader_next_tokens(tg_loader *l, int32_t *ids, int32_t *labels, int64_t *count)
{
    *count = 0;
    if (!l->text)
        return tg_error(TG_ERR_INVALID_ARG,
                        "loader for %s: an image data set; use tg_loader_next%s", l->ds->name,
                        l->cfg.output_u8 ? "_u8" : "");
    return next_any(l, NULL, NULL, ids, labels, count);
}

tg_status tg_loader_next_u8(tg_loader *l, uint8_t *images, int32_t *labels, int64_t *count)
{
    *count = 0;
    if (!l->cfg.output_u8 || l->text)
        return tg_error(TG_ERR_INVALID_ARG, "loader for %s: %s; use %s", l->ds->name,
                        l->text ? "a text data set" : "configured for f32 output",
                        l->text ? "tg_loader_next_tokens" : "tg_loader_next");
    return next_any(l, NULL, images, NULL, labels, count);
}
