/* analyse/views_program.c - what the program does: the Program Tree (the
 * steps of each device, indented) and the Operations Summary (per op type
 * and per op: calls, FLOPs, measured time and its share). */
#include "analyse/analyse.h"

#include "core/alloc.h"
#include "core/error.h"
#include "profile/reader.h"

#include <sqlite3.h>
#include <string.h>

static const char *col_text(sqlite3_stmt *st, int i)
{
    const unsigned char *s = sqlite3_column_text(st, i);
    return s ? (const char *)s : "";
}

/* ---- program tree --------------------------------------------------------- */

tg_status tg_an_view_program(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v)
{
    sqlite3_stmt *st;
    /* depth-first, siblings by position: the order the device runs them */
    TG_TRY(tg_an_prepare(r,
                         "WITH RECURSIVE tree(id, depth, path, device) AS ("
                         " SELECT id, 0, printf('%06d', position), device FROM steps"
                         "  WHERE parent IS NULL"
                         " UNION ALL"
                         " SELECT s.id, t.depth + 1, t.path || '.' || printf('%06d', s.position),"
                         "  t.device FROM steps s JOIN tree t ON s.parent = t.id)"
                         "SELECT t.device, t.depth, s.name, s.kind, COALESCE(s.phase, '')"
                         " FROM tree t JOIN steps s ON s.id = t.id"
                         " WHERE (?1 < 0 OR t.device = ?1) ORDER BY t.device, t.path",
                         &st));
    sqlite3_bind_int(st, 1, f->device);
    static const char *const cols[] = {"step", "kind", "phase"};
    static const tg_an_kind kinds[] = {TG_AN_TEXT, TG_AN_LABEL, TG_AN_LABEL};
    tg_an_table *t = NULL;
    int device = -1;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int d = sqlite3_column_int(st, 0);
        if (d != device || !t) {
            char title[64];
            snprintf(title, sizeof title, "Program tree, device %d", d);
            t = tg_an_table_add(v, title, 3, cols, kinds);
            device = d;
        }
        char name[512];
        int depth = sqlite3_column_int(st, 1);
        snprintf(name, sizeof name, "%*s%s", 2 * (depth < 40 ? depth : 40), "", col_text(st, 2));
        tg_an_row(t, name, col_text(st, 3), col_text(st, 4));
    }
    sqlite3_finalize(st);
    return TG_OK;
}

/* ---- operations ----------------------------------------------------------- */

tg_status tg_an_view_operations(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v)
{
    int64_t total_ns = 0;
    TG_TRY(tg_profile_reader_int(r, "SELECT COALESCE(SUM(total_ns), 0) FROM ops", 0, &total_ns));
    double total = total_ns > 0 ? (double)total_ns : 1;

    static const char *const tcols[] = {"type", "ops",  "calls", "FLOPs (all calls)",
                                        "time", "share"};
    static const tg_an_kind tkinds[] = {TG_AN_TEXT, TG_AN_COUNT, TG_AN_COUNT,
                                        TG_AN_NUM,  TG_AN_NS,    TG_AN_FRAC};
    tg_an_table *t = tg_an_table_add(v, "Per op type", 6, tcols, tkinds);
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT type, COUNT(*), SUM(calls), SUM(flops * calls), SUM(total_ns) "
                         "FROM ops WHERE (?1 < 0 OR device = ?1) "
                         "AND (?2 IS NULL OR instr(name, ?2) > 0) "
                         "GROUP BY type ORDER BY SUM(total_ns) DESC, type",
                         &st));
    sqlite3_bind_int(st, 1, f->device);
    if (f->op)
        sqlite3_bind_text(st, 2, f->op, -1, SQLITE_STATIC);
    while (sqlite3_step(st) == SQLITE_ROW)
        tg_an_row(t, col_text(st, 0), sqlite3_column_double(st, 1), sqlite3_column_double(st, 2),
                  sqlite3_column_double(st, 3), sqlite3_column_double(st, 4),
                  sqlite3_column_double(st, 4) / total);
    sqlite3_finalize(st);

    static const char *const ocols[] = {
        "op",   "type", "kernel", "device", "phase", "calls", "FLOPs (all calls)", "time per call",
        "time", "share"};
    static const tg_an_kind okinds[] = {TG_AN_TEXT,  TG_AN_LABEL, TG_AN_LABEL, TG_AN_ID,
                                        TG_AN_LABEL, TG_AN_COUNT, TG_AN_NUM,   TG_AN_NS,
                                        TG_AN_NS,    TG_AN_FRAC};
    t = tg_an_table_add(v, "Per op, by time", 10, ocols, okinds);
    /* profiles written before ops.kernel existed have no such column */
    int64_t has_kernel = 0;
    TG_TRY(tg_profile_reader_int(
        r, "SELECT COUNT(*) FROM pragma_table_info('ops') WHERE name = 'kernel'", 0, &has_kernel));
    TG_TRY(tg_an_prepare(r,
                         has_kernel
                             ? "SELECT name, type, device, phase, calls, flops * calls, total_ns, "
                               "COALESCE(kernel, '') FROM ops WHERE (?1 < 0 OR device = ?1) "
                               "AND (?2 IS NULL OR instr(name, ?2) > 0) "
                               "ORDER BY total_ns DESC, name LIMIT ?3"
                             : "SELECT name, type, device, phase, calls, flops * calls, total_ns, "
                               "'' FROM ops WHERE (?1 < 0 OR device = ?1) "
                               "AND (?2 IS NULL OR instr(name, ?2) > 0) "
                               "ORDER BY total_ns DESC, name LIMIT ?3",
                         &st));
    sqlite3_bind_int(st, 1, f->device);
    if (f->op)
        sqlite3_bind_text(st, 2, f->op, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, f->top);
    while (sqlite3_step(st) == SQLITE_ROW) {
        double calls = sqlite3_column_double(st, 4), ns = sqlite3_column_double(st, 6);
        tg_an_row(t, col_text(st, 0), col_text(st, 1), col_text(st, 7),
                  (double)sqlite3_column_int(st, 2), col_text(st, 3), calls,
                  sqlite3_column_double(st, 5), calls > 0 ? ns / calls : 0.0, ns, ns / total);
    }
    sqlite3_finalize(st);
    char tb[32];
    tg_an_note(v, "time is summed over the recorded host steps: %s in all ops",
               tg_an_format(TG_AN_NS, (double)total_ns, tb, sizeof tb));
    return TG_OK;
}
