/* profile/reader.c - validated, read-only access to a profile. */
#include "profile/reader.h"

#include "core/alloc.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "tilegraph/files.h"
#include "profile/profile.h"

#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

struct tg_profile_reader {
    sqlite3 *db;
    char path[1024];
    int schema;
    char meta[1024];
};

static const char *const required_tables[] = {"meta",  "devices",  "memory",   "ops",  "tensors",
                                              "steps", "schedule", "liveness", "trace"};

static tg_status fail(tg_profile_reader *r, const char *what)
{
    return tg_error(TG_ERR_FORMAT, "%s: %s", r->path, what);
}

/* A profile locked by its writer is not a broken one: say what to do. */
static bool is_locked(sqlite3 *db)
{
    int code = sqlite3_errcode(db) & 0xff; /* the primary code of an extended one */
    return code == SQLITE_BUSY || code == SQLITE_LOCKED;
}

static tg_status locked(tg_profile_reader *r)
{
    return tg_error(TG_ERR_IO,
                    "%s: the profile is being written by a running tilegraph (the database is "
                    "locked); wait until that run finishes, then open it again",
                    r->path);
}

long tg_profile_writer_pid(const char *kind_dir)
{
    char lock[4200];
    snprintf(lock, sizeof lock, "%s/.profile.lock", kind_dir);
    return tg_file_lock_holder(lock);
}

static tg_status check(tg_profile_reader *r)
{
    char *err = NULL;
    char result[256] = "";
    /* quick_check reads every page: a truncated or damaged file fails here */
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(r->db, "PRAGMA quick_check", -1, &st, NULL) != SQLITE_OK) {
        if (is_locked(r->db))
            return locked(r);
        char msg[512];
        int code = sqlite3_errcode(r->db);
        bool corrupt = code == SQLITE_CORRUPT;
        bool busy = code == SQLITE_BUSY || code == SQLITE_LOCKED;
        snprintf(msg, sizeof msg,
                 busy      ? "another program is writing it (%s): wait until it has finished"
                 : corrupt ? "the file is damaged or truncated (%s)"
                           : "not a tilegraph profile (%s)",
                 sqlite3_errmsg(r->db));
        return fail(r, msg);
    }
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(result, sizeof result, "%s", (const char *)sqlite3_column_text(st, 0));
    else if (rc != SQLITE_DONE)
        snprintf(result, sizeof result, "%s", sqlite3_errmsg(r->db));
    bool busy = rc != SQLITE_ROW && rc != SQLITE_DONE && is_locked(r->db);
    sqlite3_finalize(st);
    if (busy)
        return locked(r);
    if (strcmp(result, "ok") != 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "the file is damaged or truncated (%s)", result);
        return fail(r, msg);
    }
    for (size_t i = 0; i < sizeof required_tables / sizeof required_tables[0]; i++) {
        char sql[128];
        snprintf(sql, sizeof sql, "SELECT 1 FROM %s LIMIT 1", required_tables[i]);
        if (sqlite3_exec(r->db, sql, NULL, NULL, &err) != SQLITE_OK) {
            char msg[512];
            snprintf(msg, sizeof msg, "not a tilegraph profile: table '%s' is missing",
                     required_tables[i]);
            sqlite3_free(err);
            return fail(r, msg);
        }
    }
    const char *v = tg_profile_reader_meta(r, "schema_version");
    if (!*v)
        return fail(r, "not a tilegraph profile: no schema_version");
    r->schema = atoi(v);
    if (r->schema > TG_PROFILE_SCHEMA_VERSION) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "written by a newer tilegraph (profile schema %d; this version reads up to %d)",
                 r->schema, TG_PROFILE_SCHEMA_VERSION);
        return fail(r, msg);
    }
    if (r->schema < 1)
        return fail(r, "not a tilegraph profile: bad schema_version");
    return TG_OK;
}

tg_status tg_profile_reader_open(const char *path, tg_profile_reader **out)
{
    *out = NULL;
    tg_profile_reader *r = tg_calloc(1, sizeof *r);
    if (!r)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", path);
    snprintf(r->path, sizeof r->path, "%s", path);
    tg_status s = TG_OK;
    if (access(path, R_OK) != 0)
        s = tg_error(TG_ERR_IO, "%s: cannot read the profile (missing or not readable)", path);
    /* SQLite opens the file itself: a FIFO would block it forever. */
    else if ((s = tg_check_regular(path)) != TG_OK)
        tg_error_prefix(s, "profile");
    else if (sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        s = fail(r, "cannot open as SQLite");
    if (s == TG_OK)
        s = check(r);
    if (s != TG_OK) {
        tg_profile_reader_close(r);
        return s;
    }
    *out = r;
    return TG_OK;
}

void tg_profile_reader_close(tg_profile_reader *r)
{
    if (!r)
        return;
    if (r->db)
        sqlite3_close(r->db);
    tg_free(r);
}

sqlite3 *tg_profile_reader_db(const tg_profile_reader *r)
{
    return r->db;
}
const char *tg_profile_reader_path(const tg_profile_reader *r)
{
    return r->path;
}
int tg_profile_reader_schema(const tg_profile_reader *r)
{
    return r->schema;
}

const char *tg_profile_reader_meta(tg_profile_reader *r, const char *key)
{
    r->meta[0] = '\0';
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(r->db, "SELECT value FROM meta WHERE key = ?", -1, &st, NULL) !=
        SQLITE_OK)
        return r->meta;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(r->meta, sizeof r->meta, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return r->meta;
}

tg_status tg_profile_reader_int(tg_profile_reader *r, const char *sql, int64_t fallback,
                                int64_t *out)
{
    sqlite3_stmt *st = NULL;
    *out = fallback;
    if (sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) != SQLITE_OK)
        return tg_error(TG_ERR_FORMAT, "%s: query failed: %s", r->path, sqlite3_errmsg(r->db));
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return tg_error(TG_ERR_FORMAT, "%s: query failed: %s", r->path, sqlite3_errmsg(r->db));
    return TG_OK;
}
