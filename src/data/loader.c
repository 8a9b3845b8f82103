/* data/loader.c - seeded per-epoch shuffling and batch filling, on the
 * caller's thread (sync) or by a pool of prefetching workers (async); what
 * goes in a step (augmentation, normalisation) is data/loader_fill.c's.
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
#include "data/loader_internal.h"

#include "tilegraph/trace.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/rng.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

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
        int64_t count = tg_loader_fill_step(l, epoch, k, s->f, s->u, s->t, s->labels, w->scratch);
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
    S = tg_loader_part_size(cfg); /* what one step's buffers hold */
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
        s->count = tg_loader_fill_step(l, l->epoch, l->next_step, s->f, s->u, s->t, s->labels,
                                       l->sync_scratch);
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
        int64_t n =
            tg_loader_fill_step(l, l->epoch, l->next_step, f, u, t, labels, l->sync_scratch);
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
