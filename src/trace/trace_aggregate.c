/* trace/trace_aggregate.c - series summaries and heatmaps computed from the
 * recorded events.
 *
 * Recording a heatmap sample only appends (time, value) to the thread's
 * buffer; the bins and time slices are applied here, when the trace is read.
 * That keeps the hot path free of shared state (many threads feed the same
 * heatmap) and lets bins be defined or changed after the samples came in.
 */
#include "trace/trace_internal.h"

#include "core/alloc.h"
#include "core/error.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- heatmap bin definitions --------------------------------------------------- */

typedef struct bins_def {
    char channel[TG_TRACE_CHANNEL_NAME_MAX + 1];
    char *name;
    int n_edges;
    double edges[TG_TRACE_MAX_EDGES];
} bins_def;

static pthread_mutex_t g_bins_lock = PTHREAD_MUTEX_INITIALIZER;
static bins_def *g_bins; /* live for the process, like the channels */
static int g_n_bins, g_cap_bins;

static const double default_edges[] = {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};

tg_status tg_trace_heatmap_bins(tg_trace_channel *ch, const char *name, const double *edges,
                                int n_edges)
{
    if (!ch || !name)
        return tg_error(TG_ERR_INVALID_ARG, "tg_trace_heatmap_bins: no channel or no name");
    if (!edges || n_edges < 1 || n_edges > TG_TRACE_MAX_EDGES)
        return tg_error(TG_ERR_INVALID_ARG, "heatmap '%s': %d bin edges; give 1 to %d", name,
                        n_edges, TG_TRACE_MAX_EDGES);
    for (int i = 0; i < n_edges; i++)
        if (!isfinite(edges[i]) || (i && !(edges[i] > edges[i - 1])))
            return tg_error(TG_ERR_INVALID_ARG,
                            "heatmap '%s': bin edges must be finite and strictly increasing "
                            "(edge %d is %g)",
                            name, i, edges[i]);
    tg_status st = TG_OK;
    pthread_mutex_lock(&g_bins_lock);
    bins_def *d = NULL;
    for (int i = 0; i < g_n_bins && !d; i++)
        if (!strcmp(g_bins[i].channel, ch->name) && !strcmp(g_bins[i].name, name))
            d = &g_bins[i];
    if (!d) {
        if (g_n_bins == g_cap_bins) {
            int cap = g_cap_bins ? 2 * g_cap_bins : 8;
            bins_def *t = tg_realloc(g_bins, (size_t)cap * sizeof *t);
            if (t) {
                g_bins = t;
                g_cap_bins = cap;
            }
        }
        char *copy = g_n_bins < g_cap_bins ? tg_strdup(name) : NULL;
        if (copy) {
            d = &g_bins[g_n_bins++];
            memcpy(d->channel, ch->name, sizeof d->channel);
            d->name = copy;
        } else {
            st = tg_error(TG_ERR_NOMEM, "heatmap '%s': out of memory", name);
        }
    }
    if (d) {
        d->n_edges = n_edges;
        memcpy(d->edges, edges, (size_t)n_edges * sizeof *edges);
    }
    pthread_mutex_unlock(&g_bins_lock);
    return st;
}

int tg_trace_heatmap_edges(const char *channel, const char *name, double *edges)
{
    int n = (int)(sizeof default_edges / sizeof default_edges[0]);
    memcpy(edges, default_edges, sizeof default_edges);
    pthread_mutex_lock(&g_bins_lock);
    for (int i = 0; i < g_n_bins; i++)
        if (!strcmp(g_bins[i].channel, channel) && !strcmp(g_bins[i].name, name)) {
            n = g_bins[i].n_edges;
            memcpy(edges, g_bins[i].edges, (size_t)n * sizeof *edges);
            break;
        }
    pthread_mutex_unlock(&g_bins_lock);
    return n;
}

/* ---- series ---------------------------------------------------------------------- */

typedef struct series_ctx {
    const char *channel, *name;
    tg_trace_series_summary *s;
    uint64_t finite;
    double sum;
} series_ctx;

static int add_point(const tg_trace_event *e, void *ctx)
{
    series_ctx *c = ctx;
    if (e->kind != TG_TRACE_VALUE || strcmp(e->channel, c->channel) || strcmp(e->name, c->name))
        return 0;
    tg_trace_series_summary *s = c->s;
    if (s->count == 0 || e->start_ns < s->first_ns)
        s->first_ns = e->start_ns;
    if (s->count == 0 || e->start_ns >= s->last_ns) {
        s->last_ns = e->start_ns;
        s->last = e->value;
    }
    s->count++;
    if (isnan(e->value))
        return 0;
    if (c->finite == 0 || e->value < s->min)
        s->min = e->value;
    if (c->finite == 0 || e->value > s->max)
        s->max = e->value;
    c->finite++;
    c->sum += e->value;
    return 0;
}

tg_status tg_trace_series(const char *channel, const char *name, tg_trace_series_summary *out)
{
    memset(out, 0, sizeof *out);
    if (!channel || !name)
        return tg_error(TG_ERR_INVALID_ARG, "tg_trace_series: no channel or no name");
    series_ctx c = {channel, name, out, 0, 0.0};
    TG_TRY(tg_trace_visit(NULL, add_point, &c));
    if (out->count == 0)
        return tg_error(TG_ERR_NOT_FOUND, "trace series '%s' on channel '%s' has no points", name,
                        channel);
    out->mean = c.finite ? c.sum / (double)c.finite : NAN;
    if (!c.finite)
        out->min = out->max = NAN;
    return TG_OK;
}

/* ---- heatmap slices ---------------------------------------------------------------- */

typedef struct heatmap {
    const char *channel, *name; /* pointers valid while the events are */
    int n_edges;
    double edges[TG_TRACE_MAX_EDGES];
} heatmap;

typedef struct sample {
    int64_t slice;
    uint32_t heatmap, bin;
} sample;

typedef struct gather_ctx {
    heatmap *maps;
    int n_maps, cap_maps, last; /* last: the heatmap the previous sample went to */
    sample *samples;
    size_t n_samples, cap_samples;
    int64_t origin, interval;
    tg_status status;
} gather_ctx;

static int find_map(gather_ctx *g, const tg_trace_event *e)
{
    if (g->last >= 0 && g->maps[g->last].channel == e->channel &&
        (g->maps[g->last].name == e->name || !strcmp(g->maps[g->last].name, e->name)))
        return g->last;
    for (int i = 0; i < g->n_maps; i++)
        if (g->maps[i].channel == e->channel && !strcmp(g->maps[i].name, e->name))
            return g->last = i;
    if (g->n_maps == g->cap_maps) {
        int cap = g->cap_maps ? 2 * g->cap_maps : 8;
        heatmap *t = tg_realloc(g->maps, (size_t)cap * sizeof *t);
        if (!t)
            return -1;
        g->maps = t;
        g->cap_maps = cap;
    }
    heatmap *m = &g->maps[g->n_maps];
    m->channel = e->channel; /* channel name pointers are unique per channel */
    m->name = e->name;
    m->n_edges = tg_trace_heatmap_edges(e->channel, e->name, m->edges);
    return g->last = g->n_maps++;
}

/* Number of edges <= v: 0 below the first edge, n_edges at or above the last. */
static uint32_t bin_of(const heatmap *m, double v)
{
    int lo = 0, hi = m->n_edges;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (m->edges[mid] <= v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (uint32_t)lo;
}

static int64_t floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

static int gather(const tg_trace_event *e, void *ctx)
{
    gather_ctx *g = ctx;
    if (e->kind != TG_TRACE_SAMPLE)
        return 0;
    int m = find_map(g, e);
    if (m < 0) {
        g->status = TG_ERR_NOMEM;
        return 1;
    }
    if (g->n_samples == g->cap_samples) {
        size_t cap = g->cap_samples * 2 + 1024;
        sample *t = tg_realloc(g->samples, cap * sizeof *t);
        if (!t) {
            g->status = TG_ERR_NOMEM;
            return 1;
        }
        g->samples = t;
        g->cap_samples = cap;
    }
    g->samples[g->n_samples++] = (sample){floor_div(e->start_ns - g->origin, g->interval),
                                          (uint32_t)m, bin_of(&g->maps[m], e->value)};
    return 0;
}

static int map_cmp(const void *a, const void *b)
{
    const heatmap *x = *(const heatmap *const *)a, *y = *(const heatmap *const *)b;
    int c = strcmp(x->channel, y->channel);
    return c ? c : strcmp(x->name, y->name);
}

static int sample_cmp(const void *a, const void *b)
{
    const sample *x = a, *y = b;
    if (x->heatmap != y->heatmap)
        return x->heatmap < y->heatmap ? -1 : 1;
    if (x->slice != y->slice)
        return x->slice < y->slice ? -1 : 1;
    return 0;
}

tg_status tg_trace_heatmap_visit(tg_trace_slice_fn fn, void *ctx)
{
    tg_trace_settings set;
    tg_trace_settings_get(&set);
    gather_ctx g = {
        .last = -1, .origin = tg_trace_origin_ns(), .interval = set.heatmap_interval_ns};
    tg_status st = tg_trace_visit(NULL, gather, &g);
    const heatmap **order = NULL;
    int *rank = NULL;
    uint64_t *counts = NULL;
    if (st == TG_OK && g.status != TG_OK)
        st = tg_error(g.status, "trace heatmaps: out of memory");
    if (st == TG_OK && g.n_maps) {
        order = tg_malloc((size_t)g.n_maps * sizeof *order);
        rank = tg_malloc((size_t)g.n_maps * sizeof *rank);
        counts = tg_malloc((TG_TRACE_MAX_EDGES + 1) * sizeof *counts);
        if (!order || !rank || !counts)
            st = tg_error(TG_ERR_NOMEM, "trace heatmaps: out of memory");
    }
    if (st == TG_OK && g.n_maps) {
        /* Number heatmaps by (channel, name) so the sort below groups them
         * in that order. */
        for (int i = 0; i < g.n_maps; i++)
            order[i] = &g.maps[i];
        qsort(order, (size_t)g.n_maps, sizeof *order, map_cmp);
        for (int i = 0; i < g.n_maps; i++)
            rank[order[i] - g.maps] = i;
        for (size_t i = 0; i < g.n_samples; i++)
            g.samples[i].heatmap = (uint32_t)rank[g.samples[i].heatmap];
        qsort(g.samples, g.n_samples, sizeof *g.samples, sample_cmp);
        for (size_t i = 0; i < g.n_samples;) {
            const heatmap *m = order[g.samples[i].heatmap];
            memset(counts, 0, (size_t)(m->n_edges + 1) * sizeof *counts);
            size_t j = i;
            for (; j < g.n_samples && g.samples[j].heatmap == g.samples[i].heatmap &&
                   g.samples[j].slice == g.samples[i].slice;
                 j++)
                counts[g.samples[j].bin]++;
            tg_trace_heatmap_slice s = {
                .channel = m->channel,
                .name = m->name,
                .start_ns = g.origin + g.samples[i].slice * g.interval,
                .end_ns = g.origin + (g.samples[i].slice + 1) * g.interval,
                .edges = m->edges,
                .n_edges = m->n_edges,
                .counts = counts,
            };
            if (fn(&s, ctx))
                break;
            i = j;
        }
    }
    tg_free(order);
    tg_free(rank);
    tg_free(counts);
    tg_free(g.maps);
    tg_free(g.samples);
    return st;
}
