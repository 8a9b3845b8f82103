/* analyse/views_histograms.c - weights and gradients per tensor at the
 * recorded runs (profile table `histograms`): the statistics of each and
 * its distribution as a row of bars, so that a run going wrong (gradients
 * vanishing or exploding, non-finite values, dead tensors) shows where, not
 * only where the time goes. The engine writes one histogram per parameter
 * and recorded run, and one of the gradient the update used when gradients
 * are accumulated. */
#include "analyse/analyse.h"

#include "core/error.h"
#include "profile/reader.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_BINS = 64 };

/* The bins of a "[c0,c1,...]" text as a bar of ▁..█ scaled to the largest
 * (an empty bin is a space); a malformed text gives what parsed. */
static void bins_bar(const char *text, char *out, size_t cap)
{
    static const char *const ticks[] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                        "\u2585", "\u2586", "\u2587", "\u2588"};
    double bins[MAX_BINS], top = 0;
    int n = 0;
    const char *p = text ? strchr(text, '[') : NULL;
    while (p && *p && n < MAX_BINS) {
        char *end;
        double v = strtod(p + 1, &end);
        if (end == p + 1 || !isfinite(v))
            break;
        bins[n++] = v;
        top = v > top ? v : top;
        p = strchr(end, ',');
    }
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n && used + 4 < cap; i++) {
        int level = top > 0 ? (int)(bins[i] / top * 7 + 0.5) : 0;
        used += (size_t)snprintf(out + used, cap - used, "%s",
                                 bins[i] > 0 ? ticks[level < 0   ? 0
                                                     : level > 7 ? 7
                                                                 : level]
                                             : " ");
    }
}

static double column(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

tg_status tg_an_view_histograms(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v)
{
    int64_t n = 0;
    if (tg_an_has_table(r, "histograms"))
        TG_TRY(tg_profile_reader_int(r, "SELECT COUNT(*) FROM histograms", 0, &n));
    if (n == 0) {
        tg_an_note(v,
                   "%s holds no weight or gradient histograms: they are recorded for the "
                   "recorded runs of a training program (autoReport execution profiling, "
                   "autoReport.executionProfileProgramRunCount)",
                   tg_profile_reader_path(r));
        return TG_OK;
    }
    static const char *const cols[] = {"run",
                                       "tensor",
                                       "kind",
                                       "elements",
                                       "min",
                                       "max",
                                       "mean",
                                       "std",
                                       "zeros",
                                       "non-finite",
                                       "distribution (min to max)"};
    static const tg_an_kind kinds[] = {TG_AN_ID,   TG_AN_TEXT,  TG_AN_TEXT, TG_AN_COUNT,
                                       TG_AN_NUM,  TG_AN_NUM,   TG_AN_NUM,  TG_AN_NUM,
                                       TG_AN_FRAC, TG_AN_COUNT, TG_AN_BAR};
    tg_an_table *t =
        tg_an_table_add(v, "Weights and gradients per tensor, recorded runs", 11, cols, kinds);
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT run, tensor, kind, elements, min, max, mean, std, zeros, "
                         "non_finite, bins FROM histograms WHERE (?1 IS NULL OR instr(tensor, "
                         "?1) > 0) ORDER BY run, rowid",
                         &st));
    if (f->op)
        sqlite3_bind_text(st, 1, f->op, -1, SQLITE_STATIC);
    int64_t bad = 0, gradients = 0, dead = 0;
    char bar[MAX_BINS * 4 + 1];
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *tensor = (const char *)sqlite3_column_text(st, 1);
        const char *kind = (const char *)sqlite3_column_text(st, 2);
        double elements = column(st, 3), zeros = column(st, 8), non_finite = column(st, 9);
        bins_bar((const char *)sqlite3_column_text(st, 10), bar, sizeof bar);
        tg_an_row(t, column(st, 0), tensor ? tensor : "?", kind ? kind : "?", elements,
                  column(st, 4), column(st, 5), column(st, 6), column(st, 7),
                  elements > 0 ? zeros / elements : NAN, non_finite, bar);
        bool gradient = kind && !strcmp(kind, "gradient");
        gradients += gradient;
        bad += non_finite > 0;
        dead += gradient && elements > 0 && zeros == elements;
    }
    sqlite3_finalize(st);
    if (bad)
        tg_an_note(v, "histograms: %lld tensors hold NaN or infinite values (column non-finite)",
                   (long long)bad);
    if (dead)
        tg_an_note(v, "histograms: %lld gradients are all zeros: those weights do not learn",
                   (long long)dead);
    if (!gradients)
        tg_an_note(v, "histograms: weights only: the gradient of an update is kept (in its "
                      "accumulator) only when gradients are accumulated over micro-batches or "
                      "replicas");
    else
        tg_an_note(v,
                   "histograms: a gradient is the one the run's last update used, the mean over "
                   "micro-batches and replicas%s",
                   strcmp(tg_profile_reader_meta(r, "option.lossScaling"), "none") &&
                           *tg_profile_reader_meta(r, "option.lossScaling")
                       ? ", multiplied by the loss scale"
                       : "");
    tg_an_note(v,
               "histograms: %d equal bins from min to max per row; --op NAME keeps the tensors "
               "whose name contains NAME",
               32);
    return TG_OK;
}
