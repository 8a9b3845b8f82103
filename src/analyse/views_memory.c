/* analyse/views_memory.c - where the memory goes: the Memory Report (the
 * memory table `tilegraph compile` prints, per device and category with
 * shares, the largest tensors) and the Liveness Report (live bytes per
 * program step, the peak, and the tensors live at a chosen step). */
#include "analyse/analyse.h"
#include "report/memory_table.h"

#include "core/alloc.h"
#include "core/error.h"
#include "profile/reader.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static int n_devices(tg_profile_reader *r)
{
    int64_t n = 0;
    if (tg_profile_reader_int(r, "SELECT COUNT(*) FROM devices", 0, &n) != TG_OK)
        return 0;
    return (int)n;
}

static const char *col_text(sqlite3_stmt *st, int i)
{
    const unsigned char *s = sqlite3_column_text(st, i);
    return s ? (const char *)s : "";
}

/* A number, or NaN for NULL (a column a profile left empty). */
static double col_num(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

/* ---- memory --------------------------------------------------------------- */

/* The memory table's figures of the devices in the profile (at most
 * TG_AN_MAX_DEVICES): NaN where the profile has no row. */
static tg_status read_devices(tg_profile_reader *r, tg_an_memory *m)
{
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT device, arena_bytes, stash_depth, flops_forward + flops_backward "
                         "FROM devices WHERE device >= 0 AND device < ?1 ORDER BY device",
                         &st));
    sqlite3_bind_int(st, 1, TG_AN_MAX_DEVICES);
    while (sqlite3_step(st) == SQLITE_ROW) {
        int d = sqlite3_column_int(st, 0);
        tg_an_device_memory *dm = &m->devices[d];
        dm->total = col_num(st, 1);
        dm->stash_depth = col_num(st, 2);
        dm->flops = col_num(st, 3);
        if (d + 1 > m->n_devices)
            m->n_devices = d + 1;
    }
    sqlite3_finalize(st);
    return TG_OK;
}

/* The figure of category `name` ("weights", "offloaded to host") in dm. */
static double *category_slot(tg_an_device_memory *dm, const char *name)
{
    for (int r = TG_REGION_PARAM; r < TG_REGION_COUNT; r++)
        if (strcmp(name, tg_an_memory_region_name(r)) == 0)
            return &dm->region[r];
    if (strcmp(name, "kernel scratch (peak)") == 0)
        return &dm->scratch_peak;
    if (strcmp(name, "offloaded to host") == 0)
        return &dm->offloaded;
    if (strcmp(name, TG_WEIGHT_CACHE_CATEGORY) == 0)
        return &dm->weight_cache;
    return NULL; /* a category this reader does not know: in "Memory by category" only */
}

/* The memory table's figures from a profile's `devices` and `memory` tables. */
static tg_status tg_an_memory_from_profile(tg_profile_reader *r, tg_an_memory *m)
{
    m->n_devices = 0;
    for (int d = 0; d < TG_AN_MAX_DEVICES; d++) {
        tg_an_device_memory *dm = &m->devices[d];
        for (int k = 0; k < TG_REGION_COUNT; k++)
            dm->region[k] = NAN;
        dm->scratch_peak = dm->total = dm->offloaded = dm->weight_cache = dm->stash_depth =
            dm->flops = NAN;
    }
    TG_TRY(read_devices(r, m));
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r, "SELECT device, category, bytes FROM memory", &st));
    while (sqlite3_step(st) == SQLITE_ROW) {
        int d = sqlite3_column_int(st, 0);
        double *slot =
            d >= 0 && d < m->n_devices ? category_slot(&m->devices[d], col_text(st, 1)) : NULL;
        if (slot)
            *slot = col_num(st, 2);
    }
    sqlite3_finalize(st);
    return TG_OK;
}

/* Per device and category, largest first, with the share of the device's
 * memory (kernel scratch is part of activations: listed, but not counted in
 * the share). */
static tg_status by_category(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v)
{
    static const char *const cols[] = {"device", "category", "bytes", "share"};
    static const tg_an_kind kinds[] = {TG_AN_ID, TG_AN_TEXT, TG_AN_BYTES, TG_AN_FRAC};
    tg_an_table *t = tg_an_table_add(v, "Memory by category", 4, cols, kinds);
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT m.device, m.category, m.bytes, "
                         "(SELECT SUM(bytes) FROM memory x WHERE x.device = m.device "
                         "AND x.category NOT LIKE 'kernel scratch%') "
                         "FROM memory m ORDER BY m.device, m.bytes DESC",
                         &st));
    while (sqlite3_step(st) == SQLITE_ROW) {
        int d = sqlite3_column_int(st, 0);
        if (f->device >= 0 && d != f->device)
            continue;
        double b = sqlite3_column_double(st, 2), total = sqlite3_column_double(st, 3);
        tg_an_row(t, (double)d, col_text(st, 1), b, total > 0 ? b / total : 0.0);
    }
    sqlite3_finalize(st);
    return TG_OK;
}

tg_status tg_an_view_memory(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v)
{
    tg_an_memory *m = tg_calloc(1, sizeof *m);
    if (!m)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory for the memory table", tg_analyse_path(r));
    tg_status s = tg_an_memory_from_profile(r, m);
    if (s == TG_OK)
        tg_an_memory_tables(m, f->device, v);
    tg_free(m);
    TG_TRY(s);
    TG_TRY(by_category(r, f, v));
    sqlite3_stmt *st;

    static const char *const lcols[] = {"tensor", "device", "category", "dtype",
                                        "shape",  "slots",  "bytes"};
    static const tg_an_kind lkinds[] = {TG_AN_TEXT,  TG_AN_ID,    TG_AN_LABEL, TG_AN_LABEL,
                                        TG_AN_LABEL, TG_AN_COUNT, TG_AN_BYTES};
    tg_an_table *big =
        tg_an_table_add(v, "Largest tensors (bytes over all slots)", 7, lcols, lkinds);
    TG_TRY(tg_an_prepare(r,
                         "SELECT name, device, category, dtype, shape, slots, bytes * slots "
                         "FROM tensors WHERE (?1 < 0 OR device = ?1) "
                         "AND (?2 IS NULL OR instr(name, ?2) > 0) "
                         "ORDER BY bytes * slots DESC, name LIMIT ?3",
                         &st));
    sqlite3_bind_int(st, 1, f->device);
    if (f->op)
        sqlite3_bind_text(st, 2, f->op, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, f->top);
    while (sqlite3_step(st) == SQLITE_ROW)
        tg_an_row(big, col_text(st, 0), (double)sqlite3_column_int(st, 1), col_text(st, 2),
                  col_text(st, 3), col_text(st, 4), (double)sqlite3_column_int(st, 5),
                  sqlite3_column_double(st, 6));
    sqlite3_finalize(st);
    return tg_an_view_memory_tiles(r, f, v);
}

/* ---- liveness ------------------------------------------------------------- */

/* The step's live bytes are its live tensors plus its op's kernel scratch,
 * which is no tensor: a row of its own, so the list adds up to the step's
 * live bytes, and a note with the always-live baseline on top. */
static tg_status scratch_row(tg_profile_reader *r, tg_an_view *v, tg_an_table *t, int d, int step,
                             double listed)
{
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT name, live_bytes, always_live_bytes FROM liveness "
                         "WHERE device = ?1 AND step = ?2",
                         &st));
    sqlite3_bind_int(st, 1, d);
    sqlite3_bind_int(st, 2, step);
    if (sqlite3_step(st) == SQLITE_ROW) {
        double live = sqlite3_column_double(st, 1), always = sqlite3_column_double(st, 2);
        char name[160], a[32], b[32], c[32], e[32];
        snprintf(name, sizeof name, "(kernel scratch of %s)", col_text(st, 0));
        double scratch = live - listed;
        if (scratch > 0)
            tg_an_row(t, name, "kernel scratch", "", scratch);
        tg_an_note(v,
                   "device %d, step %d: %s of live tensors + %s of kernel scratch = %s live; "
                   "with %s always live, %s in use",
                   d, step, tg_an_format(TG_AN_BYTES, listed, a, sizeof a),
                   tg_an_format(TG_AN_BYTES, scratch > 0 ? scratch : 0, b, sizeof b),
                   tg_an_format(TG_AN_BYTES, live, c, sizeof c),
                   tg_an_format(TG_AN_BYTES, always, e, sizeof e),
                   tg_an_format(TG_AN_BYTES, live + always, name, sizeof name));
    }
    sqlite3_finalize(st);
    return TG_OK;
}

static tg_status tensors_at(tg_profile_reader *r, tg_an_view *v, int d, int step, int always,
                            const tg_an_filter *f)
{
    static const char *const cols[] = {"tensor", "category", "shape", "bytes"};
    static const tg_an_kind kinds[] = {TG_AN_TEXT, TG_AN_LABEL, TG_AN_LABEL, TG_AN_BYTES};
    char title[128];
    snprintf(title, sizeof title, "%s tensors at the chosen step, device %d",
             always ? "Always-live" : "Not-always-live", d);
    tg_an_table *t = tg_an_table_add(v, title, 4, cols, kinds);
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT name, category, shape, bytes * slots FROM tensors "
                         "WHERE device = ?1 AND always_live = ?3 AND "
                         "(?3 = 1 OR (first_step <= ?2 AND last_step >= ?2)) "
                         "AND (?4 IS NULL OR instr(name, ?4) > 0) "
                         "ORDER BY bytes * slots DESC, name",
                         &st));
    sqlite3_bind_int(st, 1, d);
    sqlite3_bind_int(st, 2, step);
    sqlite3_bind_int(st, 3, always);
    if (f->op)
        sqlite3_bind_text(st, 4, f->op, -1, SQLITE_STATIC);
    int n = 0;
    double listed = 0;
    while (sqlite3_step(st) == SQLITE_ROW && n++ < (always ? f->top : 1 << 30)) {
        tg_an_row(t, col_text(st, 0), col_text(st, 1), col_text(st, 2),
                  sqlite3_column_double(st, 3));
        listed += sqlite3_column_double(st, 3);
    }
    sqlite3_finalize(st);
    if (always || f->op)
        return TG_OK;
    return scratch_row(r, v, t, d, step, listed);
}

tg_status tg_an_view_liveness(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v)
{
    int nd = n_devices(r);
    for (int d = 0; d < nd; d++) {
        if (f->device >= 0 && d != f->device)
            continue;
        int64_t peak = 0, peak_step = 0, n_steps = 0;
        char sql[256];
        snprintf(sql, sizeof sql, "SELECT MAX(live_bytes) FROM liveness WHERE device = %d", d);
        TG_TRY(tg_profile_reader_int(r, sql, 0, &peak));
        snprintf(sql, sizeof sql,
                 "SELECT step FROM liveness WHERE device = %d ORDER BY live_bytes DESC, step "
                 "LIMIT 1",
                 d);
        TG_TRY(tg_profile_reader_int(r, sql, 0, &peak_step));
        snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM liveness WHERE device = %d", d);
        TG_TRY(tg_profile_reader_int(r, sql, 0, &n_steps));

        static const char *const cols[] = {"step", "op", "live", "always live", ""};
        static const tg_an_kind kinds[] = {TG_AN_ID, TG_AN_TEXT, TG_AN_BYTES, TG_AN_BYTES,
                                           TG_AN_BAR};
        char title[96];
        snprintf(title, sizeof title, "Live bytes per step, device %d", d);
        tg_an_table *t = tg_an_table_add(v, title, 5, cols, kinds);
        sqlite3_stmt *st;
        TG_TRY(tg_an_prepare(r,
                             "SELECT step, name, live_bytes, always_live_bytes FROM liveness "
                             "WHERE device = ?1 ORDER BY step",
                             &st));
        sqlite3_bind_int(st, 1, d);
        while (sqlite3_step(st) == SQLITE_ROW) {
            double live = sqlite3_column_double(st, 2);
            char b[160];
            tg_an_bar(peak > 0 ? live / (double)peak : 0, false, b, sizeof b);
            if (sqlite3_column_int64(st, 0) == peak_step)
                strncat(b, " peak", sizeof b - strlen(b) - 1);
            tg_an_row(t, (double)sqlite3_column_int(st, 0), col_text(st, 1), live,
                      sqlite3_column_double(st, 3), b);
        }
        sqlite3_finalize(st);
        int chosen = f->step >= 0 ? f->step : (int)peak_step;
        if (chosen >= n_steps) {
            tg_an_note(v, "device %d: step %d is past its last step (%lld)", d, chosen,
                       (long long)n_steps - 1);
            continue;
        }
        char pb[32];
        tg_an_note(v, "device %d: peak %s of activations at step %lld; chosen step %d%s", d,
                   tg_an_format(TG_AN_BYTES, (double)peak, pb, sizeof pb), (long long)peak_step,
                   chosen, f->step >= 0 ? "" : " (the peak)");
        TG_TRY(tensors_at(r, v, d, chosen, 0, f));
        TG_TRY(tensors_at(r, v, d, chosen, 1, f));
    }
    return TG_OK;
}
