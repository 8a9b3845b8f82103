/* analyse/report_data.c - a profile's tables as the JSON the HTML report page
 * reads (see report_data.h). The page does all the arithmetic; this file
 * only copies rows, so the page and the profile cannot disagree. */
#include "analyse/report_data.h"

#include "core/error.h"

#include <sqlite3.h>
#include <string.h>

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

tg_status tg_report_data_write(tg_profile_reader *r, tg_json_writer *w)
{
    sqlite3 *db = tg_profile_reader_db(r);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT key, value FROM meta ORDER BY key", -1, &st, NULL) != SQLITE_OK)
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
    }
    sqlite3_finalize(st);
    tg_json_end_object(w);
    for (size_t i = 0; i < sizeof report_tables / sizeof report_tables[0]; i++) {
        tg_json_key(w, report_tables[i].key);
        tg_status s = write_table(r, report_tables[i].sql, w);
        if (s != TG_OK)
            return s;
    }
    tg_json_end_object(w);
    return TG_OK;
}
