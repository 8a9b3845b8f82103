/* analyse/views_host.c - the System Analyser's call tree: the host trace's
 * regions aggregated by their path from the outermost region, with self and
 * total time and their share of the traced time, like the reference's
 * Summary / Call Tree panel.
 *
 * Regions are read per thread in the order they began; a stack gives each
 * its parent, so a region's path is its parent's path plus its name. Self
 * time is total time minus the time of the regions directly inside it.
 */
#include "analyse/analyse.h"

#include "core/alloc.h"
#include "core/error.h"
#include "profile/reader.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEPTH = 64, MAX_NODES = 4096 };

typedef struct call_node {
    char name[96];
    int parent, depth;
    double self, total;
    int64_t calls;
} call_node;

typedef struct {
    call_node *nodes;
    int n;
    /* the current thread's open regions: node index and end time */
    int stack[MAX_DEPTH];
    int64_t stack_end[MAX_DEPTH];
    int depth;
    char thread[128];
    double traced_ns;
    int64_t first_ns, last_ns;
} call_tree;

static int child(call_tree *t, int parent, const char *name)
{
    for (int i = 0; i < t->n; i++)
        if (t->nodes[i].parent == parent && !strcmp(t->nodes[i].name, name))
            return i;
    if (t->n == MAX_NODES)
        return -1;
    call_node *c = &t->nodes[t->n];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->parent = parent;
    c->depth = parent < 0 ? 0 : t->nodes[parent].depth + 1;
    return t->n++;
}

static int add_region(sqlite3_stmt *st, void *ctx)
{
    call_tree *t = ctx;
    const char *thread = (const char *)sqlite3_column_text(st, 0);
    const char *name = (const char *)sqlite3_column_text(st, 1);
    int64_t start = sqlite3_column_int64(st, 2), end = sqlite3_column_int64(st, 3);
    if (!thread || !name || end < start)
        return 0;
    if (strcmp(thread, t->thread) != 0) {
        snprintf(t->thread, sizeof t->thread, "%s", thread);
        t->depth = 0;
    }
    while (t->depth > 0 && t->stack_end[t->depth - 1] <= start)
        t->depth--; /* regions that ended before this one began */
    int parent = t->depth > 0 ? t->stack[t->depth - 1] : -1;
    int node = child(t, parent, name);
    if (node < 0)
        return 0;
    double dur = (double)(end - start);
    t->nodes[node].total += dur;
    t->nodes[node].self += dur;
    t->nodes[node].calls++;
    if (parent >= 0)
        t->nodes[parent].self -= dur;
    else
        t->traced_ns += dur;
    if (t->depth < MAX_DEPTH) {
        t->stack[t->depth] = node;
        t->stack_end[t->depth++] = end;
    }
    if (t->first_ns == 0 || start < t->first_ns)
        t->first_ns = start;
    if (end > t->last_ns)
        t->last_ns = end;
    return 0;
}

/* Depth first, children by total time, largest first. */
static void emit(const call_tree *t, tg_an_table *table, int parent, int top)
{
    int order[MAX_NODES], n = 0;
    for (int i = 0; i < t->n; i++)
        if (t->nodes[i].parent == parent)
            order[n++] = i;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++)
            if (t->nodes[order[b]].total > t->nodes[order[a]].total) {
                int tmp = order[a];
                order[a] = order[b];
                order[b] = tmp;
            }
    for (int k = 0; k < n && table->n_rows < top; k++) {
        const call_node *c = &t->nodes[order[k]];
        char label[160];
        snprintf(label, sizeof label, "%*s%s", 2 * c->depth, "", c->name);
        double share = t->traced_ns > 0 ? 1.0 / t->traced_ns : 0;
        tg_an_row(table, label, c->self, c->self * share, c->total, c->total * share,
                  (double)c->calls);
        emit(t, table, order[k], top);
    }
}

/* A sparkline of `n` values in at most `width` cells of ▁..█ (each cell the
 * mean of its values), scaled from min to max; NaN cells are blank. */
static void sparkline(const double *x, int n, double lo, double hi, char *out, size_t cap)
{
    static const char *const ticks[] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                        "\u2585", "\u2586", "\u2587", "\u2588"};
    enum { WIDTH = 40 };
    int cells = n < WIDTH ? n : WIDTH;
    size_t used = 0;
    out[0] = '\0';
    for (int c = 0; c < cells && used + 4 < cap; c++) {
        int from = (int)((int64_t)c * n / cells), to = (int)((int64_t)(c + 1) * n / cells);
        double sum = 0;
        int k = 0;
        for (int i = from; i < to; i++)
            if (!isnan(x[i])) {
                sum += x[i];
                k++;
            }
        const char *t = " ";
        if (k) {
            double frac = hi > lo ? (sum / k - lo) / (hi - lo) : 0.5;
            int level = (int)(frac * 7 + 0.5);
            t = ticks[level < 0 ? 0 : level > 7 ? 7 : level];
        }
        used += (size_t)snprintf(out + used, cap - used, "%s", t);
    }
}

enum { MAX_COUNTER_STEPS = 1 << 20 };

/* One counter's series: its summary row with a sparkline over the host steps. */
static tg_status counter_row(tg_profile_reader *r, tg_an_table *t, const char *name)
{
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(
        r, "SELECT value FROM counters WHERE name = ?1 ORDER BY step LIMIT 1048576", &st));
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int n = 0, cap = 0;
    double *x = NULL, lo = INFINITY, hi = -INFINITY, sum = 0, first = NAN, last = NAN;
    int finite = 0;
    while (sqlite3_step(st) == SQLITE_ROW && n < MAX_COUNTER_STEPS) {
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            double *grown = tg_realloc(x, (size_t)cap * sizeof *x);
            if (!grown) {
                tg_free(x);
                sqlite3_finalize(st);
                return tg_error(TG_ERR_NOMEM, "host view: out of memory for counter '%s'", name);
            }
            x = grown;
        }
        double val = sqlite3_column_type(st, 0) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 0);
        x[n++] = val;
        if (isnan(val))
            continue;
        if (isnan(first))
            first = val;
        last = val;
        lo = val < lo ? val : lo;
        hi = val > hi ? val : hi;
        sum += val;
        finite++;
    }
    sqlite3_finalize(st);
    char line[256];
    sparkline(x, n, lo, hi, line, sizeof line);
    tg_an_row(t, name, (double)n, first, last, finite ? lo : NAN, finite ? sum / finite : NAN,
              finite ? hi : NAN, line);
    tg_free(x);
    return TG_OK;
}

/* The counters recorded per host step (table `counters`): samples/s, loss,
 * loss scale, loader queue depth, memory in use, as series. */
static tg_status counters(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v)
{
    if (!tg_an_has_table(r, "counters"))
        return TG_OK;
    static const char *const cols[] = {"counter", "host steps", "first", "last",
                                       "min",     "mean",       "max",   "per host step"};
    static const tg_an_kind kinds[] = {TG_AN_TEXT, TG_AN_COUNT, TG_AN_NUM, TG_AN_NUM,
                                       TG_AN_NUM,  TG_AN_NUM,   TG_AN_NUM, TG_AN_BAR};
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r, "SELECT DISTINCT name FROM counters ORDER BY name", &st));
    tg_an_table *t = NULL;
    tg_status s = TG_OK;
    while (s == TG_OK && sqlite3_step(st) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        if (!name || (f->op && !strstr(name, f->op)))
            continue;
        if (!t)
            t = tg_an_table_add(v, "Counters per host step", 8, cols, kinds);
        char copy[128];
        snprintf(copy, sizeof copy, "%s", name);
        s = counter_row(r, t, copy);
    }
    sqlite3_finalize(st);
    if (s == TG_OK && t)
        tg_an_note(v,
                   "counters: %d series, one value per host step; the sparkline runs from the "
                   "first host step (left) to the last, min to max",
                   t->n_rows);
    return s;
}

tg_status tg_an_view_host(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v)
{
    TG_TRY(counters(r, f, v));
    int64_t has = 0;
    if (tg_profile_reader_int(r, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'host_trace'", 0,
                              &has) != TG_OK ||
        !has || tg_profile_reader_int(r, "SELECT COUNT(*) FROM host_trace", 0, &has) != TG_OK ||
        !has) {
        tg_an_note(v, "No host trace in this profile: run with TILEGRAPH_TRACE='{\"enable\":"
                      "\"true\"}' as well as autoReport to record one.");
        return TG_OK;
    }
    call_tree t = {0};
    t.nodes = tg_calloc(MAX_NODES, sizeof *t.nodes);
    if (!t.nodes)
        return tg_error(TG_ERR_NOMEM, "host view: out of memory");
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT thread, name, start_ns, end_ns FROM host_trace WHERE kind = 'region' AND "
             "end_ns >= start_ns %s ORDER BY thread, start_ns, depth",
             f->op ? "AND name LIKE '%' || ? || '%'" : "");
    sqlite3_stmt *st = NULL;
    tg_status s = tg_an_prepare(r, sql, &st);
    if (s == TG_OK) {
        if (f->op)
            sqlite3_bind_text(st, 1, f->op, -1, SQLITE_STATIC);
        while (sqlite3_step(st) == SQLITE_ROW)
            add_region(st, &t);
        sqlite3_finalize(st);
    }
    if (s == TG_OK) {
        static const char *const cols[] = {"activity",   "self time", "self",
                                           "total time", "total",     "calls"};
        static const tg_an_kind kinds[] = {TG_AN_TEXT, TG_AN_NS,   TG_AN_FRAC,
                                           TG_AN_NS,   TG_AN_FRAC, TG_AN_COUNT};
        tg_an_table *table =
            tg_an_table_add(v, "Host call tree (all threads, aggregated)", 6, cols, kinds);
        /* compare asks for every row with a huge --top: no overflow, all nodes */
        int rows = f->top <= 0 ? 200 : f->top > MAX_NODES / 10 ? MAX_NODES : f->top * 10;
        emit(&t, table, -1, rows);
        tg_an_note(v,
                   "Traced time %.3f s over %d distinct activities; shares are of the time in "
                   "outermost regions, summed over threads.",
                   t.traced_ns / 1e9, t.n);
    }
    tg_free(t.nodes);
    return s;
}
