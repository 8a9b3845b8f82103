/* profile/profile.c - the profile file: its schema, opening it (locked,
 * under a temporary name), and closing it (renamed into place only whole).
 *
 * Everything is written inside transactions with prepared statements; the
 * graph profile once at compile time (profile_graph.c), the execution events
 * after each recorded run (profile_execution.c). The schema is versioned
 * (meta.schema_version) and documented in docs/profile-format.md.
 */
#include "profile/profile_internal.h"

#include "core/alloc.h"
#include "core/error.h"
#include "tilegraph/files.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const schema =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
    "CREATE TABLE devices(device INTEGER PRIMARY KEY, arena_bytes INTEGER, stash_depth INTEGER,"
    " scratch_peak INTEGER, threads INTEGER, flops_forward REAL, flops_backward REAL,"
    " flops_update REAL);"
    "CREATE TABLE memory(device INTEGER, category TEXT, bytes INTEGER,"
    " PRIMARY KEY(device, category));"
    "CREATE TABLE ops(id INTEGER PRIMARY KEY, name TEXT, type TEXT, block TEXT, device INTEGER,"
    " phase TEXT, flops REAL, bytes_in INTEGER, bytes_out INTEGER, forward_of INTEGER,"
    " calls INTEGER DEFAULT 0, total_ns INTEGER DEFAULT 0, predicted_ns REAL, kernel TEXT);"
    "CREATE TABLE op_edges(producer INTEGER, consumer INTEGER, PRIMARY KEY(producer, consumer));"
    "CREATE TABLE tensors(id INTEGER PRIMARY KEY, node INTEGER, name TEXT, category TEXT,"
    " dtype TEXT, shape TEXT, bytes INTEGER, slots INTEGER, device INTEGER, offset INTEGER,"
    " first_step INTEGER, last_step INTEGER, always_live INTEGER);"
    "CREATE TABLE steps(id INTEGER PRIMARY KEY, parent INTEGER, device INTEGER, kind TEXT,"
    " phase TEXT, name TEXT, op INTEGER, position INTEGER);"
    "CREATE TABLE schedule(device INTEGER, position INTEGER, micro_batch INTEGER, phase TEXT,"
    " PRIMARY KEY(device, position));"
    "CREATE TABLE liveness(device INTEGER, step INTEGER, name TEXT, live_bytes INTEGER,"
    " always_live_bytes INTEGER, PRIMARY KEY(device, step));"
    "CREATE TABLE trace(run INTEGER, replica INTEGER, device INTEGER, kind TEXT, phase TEXT,"
    " iteration INTEGER, micro_batch INTEGER, peer INTEGER, start_ns INTEGER, end_ns INTEGER,"
    " bytes INTEGER, flops REAL, start_cycles INTEGER, end_cycles INTEGER);"
    "CREATE INDEX trace_by_device ON trace(device, replica, start_ns);"
    "CREATE TABLE tiles(device INTEGER, tile INTEGER, category TEXT, bytes INTEGER,"
    " PRIMARY KEY(device, tile, category));"
    "CREATE TABLE tile_spans(tensor INTEGER PRIMARY KEY, tile_start INTEGER, tiles INTEGER,"
    " bytes_per_tile INTEGER);"
    "CREATE TABLE host_trace(thread TEXT, channel TEXT, kind TEXT, name TEXT, start_ns INTEGER,"
    " end_ns INTEGER, depth INTEGER, link INTEGER, value REAL);"
    "CREATE TABLE predicted_trace(device INTEGER, phase TEXT, micro_batch INTEGER,"
    " start_ns REAL, end_ns REAL);"

    /* added later: a profile from an older tilegraph lacks these */
    "CREATE TABLE remedies(id INTEGER PRIMARY KEY, remedy TEXT, need_bytes INTEGER,"
    " after_bytes INTEGER, capacity_bytes INTEGER, outcome TEXT);"
    "CREATE TABLE counters(step INTEGER, name TEXT, value REAL, PRIMARY KEY(step, name));"
    "CREATE TABLE histograms(run INTEGER, tensor TEXT, kind TEXT, elements INTEGER, min REAL,"
    " max REAL, mean REAL, std REAL, zeros INTEGER, non_finite INTEGER, bins TEXT,"
    " PRIMARY KEY(run, tensor, kind));"
    "CREATE TABLE vertex_types(device INTEGER, type TEXT, vertices INTEGER, state_bytes INTEGER,"
    " code_bytes INTEGER, PRIMARY KEY(device, type));";

const char *const pf_phase_names[TG_PHASE_COUNT] = {"forward", "backward", "update"};

tg_status pf_db_error(const tg_profile *pf, const char *what)
{
    return tg_error(TG_ERR_IO, "profile %s: %s: %s", pf->path, what,
                    pf->db ? sqlite3_errmsg(pf->db) : "cannot open");
}

tg_status pf_exec(tg_profile *pf, const char *sql)
{
    char *err = NULL;
    if (sqlite3_exec(pf->db, sql, NULL, NULL, &err) != SQLITE_OK) {
        tg_status s = tg_error(TG_ERR_IO, "profile %s: %s", pf->path, err ? err : "error");
        sqlite3_free(err);
        return s;
    }
    return TG_OK;
}

tg_status pf_insert(tg_profile *pf, sqlite3_stmt *st, const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
    sqlite3_reset(st);
    for (int i = 0; types[i]; i++) {
        switch (types[i]) {
        case 'i':
            sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
            break;
        case 'd':
            sqlite3_bind_double(st, i + 1, va_arg(ap, double));
            break;
        case 's': {
            const char *v = va_arg(ap, const char *);
            if (v)
                sqlite3_bind_text(st, i + 1, v, -1, SQLITE_TRANSIENT);
            else
                sqlite3_bind_null(st, i + 1);
            break;
        }
        default:
            sqlite3_bind_null(st, i + 1);
        }
    }
    va_end(ap);
    return sqlite3_step(st) == SQLITE_DONE ? TG_OK : pf_db_error(pf, "insert");
}

sqlite3_stmt *pf_prepare(tg_profile *pf, const char *sql)
{
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(pf->db, sql, -1, &st, NULL);
    return st;
}

static tg_status make_dirs(const char *path)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return tg_error(TG_ERR_IO, "profile: cannot create directory '%s': %s", buf,
                            strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return tg_error(TG_ERR_IO, "profile: cannot create directory '%s': %s", buf,
                        strerror(errno));
    return TG_OK;
}

/* Two runs writing one profile directory would replace each other's files
 * (once leaving one run's training profile beside another's inference
 * profile). The directory is locked while its profile is written: an fcntl
 * lock, so it goes away with the process however it ends. The lock file
 * holds the owner's pid for the message. */
static tg_status lock_dir(tg_profile *pf, const char *sub)
{
    char lock[1100];
    snprintf(lock, sizeof lock, "%s/.profile.lock", sub);
    char owner[32];
    if (tg_file_lock(lock, &pf->lock_fd, owner) == TG_OK)
        return TG_OK;
    if (!owner[0])
        return tg_error_prefix(TG_ERR_IO, "profile");
    return tg_error(TG_ERR_IO,
                    "profile: '%s' is being written by another run (pid %s); wait for it "
                    "or give this run another --profile-dir (autoReport.directory)",
                    sub, owner);
}

static void release(tg_profile *pf)
{
    tg_free(pf->counters);
    if (pf->db)
        sqlite3_close(pf->db);
    pf->db = NULL;
    tg_atomic_file_abort(&pf->af);
    if (pf->lock_fd >= 0)
        close(pf->lock_fd);
    tg_free(pf);
}
tg_status tg_profile_open(const char *dir, const tg_program *p, bool execution, tg_profile **out)
{
    *out = NULL;
    tg_profile *pf = tg_calloc(1, sizeof *pf);
    if (!pf)
        return tg_error(TG_ERR_NOMEM, "profile: out of memory");
    pf->program = p;
    pf->lock_fd = -1;
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/%s", dir, p->training ? "training" : "inference");
    tg_status s = make_dirs(sub);
    snprintf(pf->path, sizeof pf->path, "%s/profile.sqlite", sub);
    if (s == TG_OK)
        s = lock_dir(pf, sub);
    /* Written under a temporary name and renamed by tg_profile_close: the
     * previous profile stays whole until then, and a killed run leaves no
     * partial file that would read as a normal profile. That is also why
     * the fast, unsafe journal settings below are harmless. */
    if (s == TG_OK && (s = tg_atomic_file_reserve(pf->path, &pf->af)) != TG_OK)
        tg_error_prefix(s, "profile");
    if (s == TG_OK && sqlite3_open(pf->af.tmp, &pf->db) != SQLITE_OK)
        s = pf_db_error(pf, "open");
    if (s == TG_OK)
        s = pf_exec(pf, "PRAGMA journal_mode=MEMORY; PRAGMA synchronous=OFF; BEGIN;");
    if (s == TG_OK)
        s = pf_exec(pf, schema);
    if (s == TG_OK)
        s = pf_write_graph(pf);
    if (s == TG_OK)
        s = pf_exec(pf, execution
                            ? "INSERT INTO meta VALUES('execution_profile', 'true'); COMMIT;"
                            : "INSERT INTO meta VALUES('execution_profile', 'false'); COMMIT;");
    if (s != TG_OK) {
        release(pf);
        return s;
    }
    *out = pf;
    return TG_OK;
}

const char *tg_profile_path(const tg_profile *pf)
{
    return pf->path;
}

tg_status tg_profile_close(tg_profile *pf, const tg_profile_recorder *recorders)
{
    if (!pf)
        return TG_OK;
    tg_status status = pf_write_execution_end(pf, recorders);
    if (sqlite3_close(pf->db) != SQLITE_OK && status == TG_OK)
        status = pf_db_error(pf, "close");
    pf->db = NULL;
    /* Only a complete profile takes the final name. */
    if (status == TG_OK && (status = tg_atomic_file_commit(&pf->af)) != TG_OK)
        tg_error_prefix(status, "profile");
    release(pf);
    return status;
}

void tg_profile_abort(tg_profile *pf)
{
    if (pf)
        release(pf);
}
