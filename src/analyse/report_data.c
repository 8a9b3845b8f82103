/* analyse/report_data.c - a profile's tables as the JSON the HTML report page
 * reads (see report_data.h). The page does all the arithmetic; this file
 * only copies rows, so the page and the profile cannot disagree. The one
 * reshaping: the `tiles` table of tiled targets (tiles x categories rows per
 * device) is written as one dense array per device and category, indexed by
 * tile, which is a fifth of the size of its rows. `op_edges` (the operations
 * graph) is copied when the profile has it. The insights view is written
 * as `analyse insights` builds it (its figures are sums and sentences). */
#include "analyse/report_data.h"

#include "analyse/analyse.h"

#include "core/error.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A view exactly as `tilegraph analyse` builds it (the insights; an MPI
 * job's instances):
 * {"tables": [{"title", "cols", "kinds", "rows": [[cell...]]}], "notes"},
 * numbers as numbers (no value: null), kinds by name ("bytes", "ns", ...),
 * so the page shows the same figures and sentences. A profile the view
 * refuses gives {"error": message}, and the rest of the page still works. */
static const char *const kind_names[TG_AN_KIND_COUNT] = {"text",  "id", "label", "bar", "count",
                                                         "bytes", "ns", "frac",  "num"};

static void write_view_table(const tg_an_table *t, tg_json_writer *w)
{
    tg_json_begin_object(w);
    tg_json_key(w, "title");
    tg_json_string(w, t->title);
    tg_json_key(w, "cols");
    tg_json_begin_array(w);
    for (int c = 0; c < t->n_cols; c++)
        tg_json_string(w, t->cols[c]);
    tg_json_end_array(w);
    tg_json_key(w, "kinds");
    tg_json_begin_array(w);
    for (int c = 0; c < t->n_cols; c++)
        tg_json_string(w, kind_names[t->kinds[c]]);
    tg_json_end_array(w);
    tg_json_key(w, "rows");
    tg_json_begin_array(w);
    for (int r = 0; r < t->n_rows; r++) {
        tg_json_begin_array(w);
        for (int c = 0; c < t->n_cols; c++) {
            const tg_an_cell *x = &t->cells[(size_t)r * (size_t)t->n_cols + (size_t)c];
            if (tg_an_kind_is_text(t->kinds[c]))
                tg_json_string(w, x->text ? x->text : "");
            else if (isfinite(x->num))
                tg_json_number(w, x->num);
            else
                tg_json_null(w);
        }
        tg_json_end_array(w);
    }
    tg_json_end_array(w);
    tg_json_end_object(w);
}

static void write_view(tg_profile_reader *r, const char *name, tg_json_writer *w)
{
    tg_an_filter f;
    tg_view_filter_defaults(&f);
    tg_an_view v;
    memset(&v, 0, sizeof v);
    tg_json_begin_object(w);
    if (tg_an_build(r, name, &f, &v) != TG_OK) {
        tg_json_key(w, "error");
        tg_json_string(w, tg_error_message());
    } else {
        tg_json_key(w, "tables");
        tg_json_begin_array(w);
        for (int i = 0; i < v.n_tables; i++)
            write_view_table(&v.tables[i], w);
        tg_json_end_array(w);
        tg_json_key(w, "notes");
        tg_json_begin_array(w);
        for (int i = 0; i < v.n_notes; i++)
            tg_json_string(w, v.notes[i]);
        tg_json_end_array(w);
    }
    tg_json_end_object(w);
    tg_an_view_free(&v);
}

/* Which rows of each table the page needs, in a stable order. Only run 0 of
 * the trace: the page shows one host step (later runs repeat it). */
static const struct {
    const char *key, *sql;
} report_tables[] = {
    {"devices", "SELECT * FROM devices ORDER BY device"},
    {"memory", "SELECT device, category, bytes FROM memory ORDER BY device, bytes DESC"},
    {"tensors", "SELECT * FROM tensors ORDER BY device, id"},
    {"steps", "SELECT * FROM steps ORDER BY id"},
    {"schedule", "SELECT * FROM schedule ORDER BY device, position"},
    {"liveness", "SELECT * FROM liveness ORDER BY device, step"},
    {"trace", "SELECT * FROM trace WHERE run = 0 ORDER BY device, replica, start_ns"},
    {"ops", "SELECT * FROM ops ORDER BY id"},
};

/* Tables a profile may lack (written by later versions, or only when the
 * feature was on), each under the key of its table's name. */
static const struct {
    const char *key, *sql;
} optional_tables[] = {
    /* The operations graph (producer -> consumer op ids). */
    {"op_edges", "SELECT producer, consumer FROM op_edges ORDER BY producer, consumer"},
    /* The schedule simulated with the cost model (one weight update): the
     * trace tab draws it under the measured lanes. */
    {"predicted_trace", "SELECT device, phase, micro_batch, start_ns, end_ns FROM predicted_trace "
                        "ORDER BY device, start_ns"},
    /* Weights and gradients per tensor at the recorded runs: the Histograms tab. */
    {"histograms", "SELECT run, tensor, kind, elements, min, max, mean, std, zeros, non_finite, "
                   "bins FROM histograms ORDER BY run, rowid"},
    /* Vertex types of tiled targets: the Memory tab's table below the tile maps. */
    {"vertex_types", "SELECT device, type, vertices, state_bytes, code_bytes FROM vertex_types "
                     "ORDER BY device, vertices DESC, type"},
    /* The counters per host step: the Host tab's line graphs. */
    {"counters", "SELECT step, name, value FROM counters ORDER BY name, step"},
    /* The host threads' regions (TILEGRAPH_TRACE): the page builds the
     * timeline, flame graph and call tree from them. */
    {"host_trace", "SELECT thread, channel, name, start_ns, end_ns, depth FROM host_trace "
                   "WHERE kind = 'region' ORDER BY thread, start_ns, depth"},
};

static tg_status write_table(tg_profile_reader *r, const char *sql, tg_json_writer *w)
{
    sqlite3 *db = tg_profile_reader_db(r);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return tg_error(TG_ERR_FORMAT, "%s: cannot read the profile (%s)",
                        tg_profile_reader_path(r), sqlite3_errmsg(db));
    int n = sqlite3_column_count(st);
    tg_json_begin_object(w);
    tg_json_key(w, "cols");
    tg_json_begin_array(w);
    for (int i = 0; i < n; i++)
        tg_json_string(w, sqlite3_column_name(st, i));
    tg_json_end_array(w);
    tg_json_key(w, "rows");
    tg_json_begin_array(w);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        tg_json_begin_array(w);
        for (int i = 0; i < n; i++) {
            switch (sqlite3_column_type(st, i)) {
            case SQLITE_INTEGER:
                tg_json_int(w, sqlite3_column_int64(st, i));
                break;
            case SQLITE_FLOAT:
                tg_json_number(w, sqlite3_column_double(st, i));
                break;
            case SQLITE_NULL:
                tg_json_null(w);
                break;
            default:
                tg_json_string_n(w, (const char *)sqlite3_column_text(st, i),
                                 (size_t)sqlite3_column_bytes(st, i));
                break;
            }
        }
        tg_json_end_array(w);
    }
    tg_json_end_array(w);
    tg_json_end_object(w);
    tg_status s = TG_OK;
    if (rc != SQLITE_DONE)
        s = tg_error(TG_ERR_FORMAT, "%s: cannot read the profile (%s)", tg_profile_reader_path(r),
                     sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return s;
}

/* Whether the profile has table `name` (tiles, tile_spans and host_trace
 * are only written on tiled targets or when tracing is on). */
static int has_table(sqlite3 *db, const char *name)
{
    sqlite3_stmt *st = NULL;
    int found = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", -1,
                           &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        found = sqlite3_step(st) == SQLITE_ROW;
    }
    sqlite3_finalize(st);
    return found;
}

/* Pads the open per-tile array with zeros up to tile `to` (tiles with no
 * bytes of that category have no row). */
static void pad_tiles(tg_json_writer *w, int64_t *next, int64_t to)
{
    for (; *next < to; (*next)++)
        tg_json_int(w, 0);
}

/* "tiles": {"per_device": N, "devices": [{"device": d, "bytes": {category:
 * [bytes of tile 0, 1, ... N-1]}}]}, streamed from the rows in order. */
static tg_status write_tiles(tg_profile_reader *r, int64_t per_device, tg_json_writer *w)
{
    sqlite3 *db = tg_profile_reader_db(r);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT device, category, tile, bytes FROM tiles "
                           "ORDER BY device, category, tile",
                           -1, &st, NULL) != SQLITE_OK)
        return tg_error(TG_ERR_FORMAT, "%s: cannot read tiles (%s)", tg_profile_reader_path(r),
                        sqlite3_errmsg(db));
    tg_json_begin_object(w);
    tg_json_key(w, "per_device");
    tg_json_int(w, per_device);
    tg_json_key(w, "devices");
    tg_json_begin_array(w);
    int64_t dev = -1, next = 0;
    char cat[128] = "";
    int in_array = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t d = sqlite3_column_int64(st, 0), tile = sqlite3_column_int64(st, 2);
        const char *c = (const char *)sqlite3_column_text(st, 1);
        if (!c)
            c = "";
        if (d != dev || strncmp(c, cat, sizeof cat - 1) != 0) {
            if (in_array) {
                pad_tiles(w, &next, per_device);
                tg_json_end_array(w);
            }
            if (d != dev) {
                if (dev >= 0) {
                    tg_json_end_object(w);
                    tg_json_end_object(w);
                }
                dev = d;
                tg_json_begin_object(w);
                tg_json_key(w, "device");
                tg_json_int(w, d);
                tg_json_key(w, "bytes");
                tg_json_begin_object(w);
            }
            snprintf(cat, sizeof cat, "%s", c);
            tg_json_key(w, cat);
            tg_json_begin_array(w);
            in_array = 1;
            next = 0;
        }
        /* a tile outside 0..per_device-1 would break the dense layout */
        if (tile < next || tile >= per_device)
            continue;
        pad_tiles(w, &next, tile);
        tg_json_int(w, sqlite3_column_int64(st, 3));
        next++;
    }
    if (in_array) {
        pad_tiles(w, &next, per_device);
        tg_json_end_array(w);
    }
    if (dev >= 0) {
        tg_json_end_object(w);
        tg_json_end_object(w);
    }
    tg_json_end_array(w);
    tg_json_end_object(w);
    tg_status s = TG_OK;
    if (rc != SQLITE_DONE)
        s = tg_error(TG_ERR_FORMAT, "%s: cannot read tiles (%s)", tg_profile_reader_path(r),
                     sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return s;
}

tg_status tg_report_data_write(tg_profile_reader *r, tg_json_writer *w)
{
    int64_t tiles_per_device = 0;
    sqlite3 *db = tg_profile_reader_db(r);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT key, value FROM meta ORDER BY key", -1, &st, NULL) !=
        SQLITE_OK)
        return tg_error(TG_ERR_FORMAT, "%s: cannot read meta (%s)", tg_profile_reader_path(r),
                        sqlite3_errmsg(db));
    tg_json_begin_object(w);
    tg_json_key(w, "path");
    tg_json_string(w, tg_profile_reader_path(r));
    tg_json_key(w, "meta");
    tg_json_begin_object(w);
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(st, 0);
        const char *v = (const char *)sqlite3_column_text(st, 1);
        tg_json_key(w, k ? k : "");
        tg_json_string(w, v ? v : "");
        if (k && v && strcmp(k, "tiles_per_device") == 0)
            tiles_per_device = strtoll(v, NULL, 10);
    }
    sqlite3_finalize(st);
    tg_json_end_object(w);
    for (size_t i = 0; i < sizeof report_tables / sizeof report_tables[0]; i++) {
        tg_json_key(w, report_tables[i].key);
        tg_status s = write_table(r, report_tables[i].sql, w);
        if (s != TG_OK)
            return s;
    }
    /* Tiled targets: the per-tile memory (capped so a corrupt meta value
     * cannot make the page enormous). */
    if (tiles_per_device > 0 && tiles_per_device <= (1 << 20) && has_table(db, "tiles")) {
        tg_json_key(w, "tiles");
        tg_status s = write_tiles(r, tiles_per_device, w);
        if (s != TG_OK)
            return s;
    }
    for (size_t i = 0; i < sizeof optional_tables / sizeof optional_tables[0]; i++) {
        if (!has_table(db, optional_tables[i].key))
            continue;
        tg_json_key(w, optional_tables[i].key);
        tg_status s = write_table(r, optional_tables[i].sql, w);
        if (s != TG_OK)
            return s;
    }
    tg_json_key(w, "insights");
    write_view(r, "insights", w);
    if (atoi(tg_profile_reader_meta(r, "instances")) > 1) { /* an MPI job's instance */
        tg_json_key(w, "instances");
        write_view(r, "instances", w);
    }
    tg_json_end_object(w);
    return TG_OK;
}
