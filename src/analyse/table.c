/* analyse/table.c - opening a report, the view dispatch, and the queries the
 * views run. The views themselves live in views_*.c; the tables they fill,
 * report/table.c. */
#include "analyse/analyse.h"

#include "core/alloc.h"
#include "core/error.h"
#include "profile/reader.h"

#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>

const tg_an_view_def tg_an_views[] = {
    {"summary", tg_an_view_summary, "what was compiled for which target; memory per device"},
    {"insights", tg_an_view_insights, "what to look at first, for memory and for time"},
    {"memory", tg_an_view_memory, "memory per device and category; the largest tensors"},
    {"liveness", tg_an_view_liveness, "live bytes per program step; what is live at the peak"},
    {"program", tg_an_view_program, "the steps of each device's program"},
    {"operations", tg_an_view_operations, "per op type and op: calls, FLOPs, time"},
    {"trace", tg_an_view_trace, "where a step's time goes per device"},
    {"pipeline", tg_an_view_pipeline,
     "a pipelined host step split into parts that add up to it, beside the cost model"},
    {"host", tg_an_view_host, "the host's call tree: self and total time per region"},
    {"histograms", tg_an_view_histograms, "weights and gradients per tensor, as statistics"},
    {"instances", tg_an_view_instances, "an MPI job's instances side by side"},
    {NULL, NULL, NULL},
};

const tg_an_view_def *tg_an_view_find(const char *name)
{
    for (const tg_an_view_def *d = tg_an_views; d->name; d++)
        if (!strcmp(d->name, name))
            return d;
    return NULL;
}

bool tg_view_known(const char *name)
{
    return tg_an_view_find(name) != NULL;
}

const char *tg_view_list(char *buf, size_t cap, const char *sep, const char *last,
                         const char *extra)
{
    int n = 0;
    while (tg_an_views[n].name)
        n++;
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n + (extra != NULL) && used < cap; i++) {
        const char *name = i < n ? tg_an_views[i].name : extra;
        const char *before = i == 0 ? "" : i == n - 1 + (extra != NULL) ? last : sep;
        int k = snprintf(buf + used, cap - used, "%s%s", before, name);
        used += k > 0 ? (size_t)k : 0;
    }
    return buf;
}

void tg_view_filter_defaults(tg_an_filter *f)
{
    f->device = -1;
    f->step = -1;
    f->op = NULL;
    f->top = 20;
    f->by_tile = false;
    f->tile = 0;
    f->no_group = false;
}

/* A directory's profile: training/, inference/ or its own profile.sqlite. */
static tg_status open_in_dir(const char *dir, tg_profile_reader **out)
{
    static const char *const subs[] = {"training/profile.sqlite", "inference/profile.sqlite",
                                       "profile.sqlite"};
    char path[4200];
    struct stat st;
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, subs[i]);
        if (stat(path, &st) == 0)
            return tg_profile_reader_open(path, out);
    }
    /* a profile is renamed into place when its run closes it: until then
     * the directory has only the writer's lock */
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, i ? "inference" : "training");
        long pid = tg_profile_writer_pid(path);
        if (pid > 0)
            return tg_error(TG_ERR_IO,
                            "'%s' is being written by a running tilegraph (pid %ld): its profile "
                            "appears when that run ends; wait for it",
                            path, pid);
    }
    return tg_error(TG_ERR_NOT_FOUND,
                    "report directory '%s' holds no training/profile.sqlite or "
                    "inference/profile.sqlite",
                    dir);
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

tg_status tg_analyse_open(const char *report, int instance, tg_profile_reader **out)
{
    *out = NULL;
    struct stat st;
    if (stat(report, &st) != 0)
        return tg_error(TG_ERR_IO, "report '%s' does not exist", report);
    char job_dir[4200];
    snprintf(job_dir, sizeof job_dir, "%s/instance-%d", report, instance < 0 ? 0 : instance);
    bool job = S_ISDIR(st.st_mode) && is_dir(job_dir);
    if (instance >= 0 && !job)
        return tg_error(TG_ERR_NOT_FOUND,
                        "--instance %d: '%s' holds no instance-%d directory (the profiles of an "
                        "MPI job's instances, written with --profile-dir under mpirun)",
                        instance, report, instance);
    if (!S_ISDIR(st.st_mode))
        return tg_profile_reader_open(report, out);
    /* a job's directory: its instance 0 unless --instance says which */
    return open_in_dir(job ? job_dir : report, out);
}

void tg_analyse_close(tg_profile_reader *r)
{
    tg_profile_reader_close(r);
}

const char *tg_analyse_path(const tg_profile_reader *r)
{
    return tg_profile_reader_path(r);
}

const char *tg_analyse_meta(tg_profile_reader *r, const char *key)
{
    return tg_profile_reader_meta(r, key);
}

/* --device N names a device of the profile: one that does not exist would
 * otherwise give empty tables, read as "nothing there". */
static tg_status check_device(tg_profile_reader *r, const tg_an_filter *f)
{
    if (f->device < 0)
        return TG_OK;
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r, "SELECT device FROM devices ORDER BY device", &st));
    char list[256] = "";
    size_t used = 0;
    int n = 0, found = 0, last = -1;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int d = sqlite3_column_int(st, 0);
        found |= d == f->device;
        if (n++ == 0)
            used += (size_t)snprintf(list, sizeof list, "%d", d);
        last = d;
    }
    sqlite3_finalize(st);
    if (found)
        return TG_OK;
    if (n > 1 && used < sizeof list)
        snprintf(list + used, sizeof list - used, " to %d", last);
    return tg_error(TG_ERR_INVALID_ARG,
                    "--device %d: %s has no device %d; its device%s %s (give one of them, or "
                    "leave --device out for all)",
                    f->device, tg_profile_reader_path(r), f->device, n == 1 ? " is" : "s are",
                    n ? list : "none");
}

tg_status tg_an_build(tg_profile_reader *r, const char *name, const tg_an_filter *f, tg_an_view *v)
{
    v->name = name;
    TG_TRY(check_device(r, f));
    if (f->by_tile && strcmp(name, "memory"))
        tg_an_note(v, "--tile %d applies to the memory view only; the %s view shows all tiles",
                   f->tile, name);
    const tg_an_view_def *d = tg_an_view_find(name);
    if (d)
        return d->build(r, f, v);
    char list[256];
    return tg_error(TG_ERR_INVALID_ARG, "unknown view '%s' (%s)", name,
                    tg_view_list(list, sizeof list, ", ", " or ", NULL));
}

tg_status tg_an_prepare(tg_profile_reader *r, const char *sql, sqlite3_stmt **out)
{
    sqlite3 *db = tg_profile_reader_db(r);
    if (sqlite3_prepare_v2(db, sql, -1, out, NULL) != SQLITE_OK)
        return tg_error(TG_ERR_FORMAT, "%s: %s", tg_profile_reader_path(r), sqlite3_errmsg(db));
    return TG_OK;
}

tg_status tg_an_query(tg_profile_reader *r, const char *sql, int (*row)(sqlite3_stmt *, void *),
                      void *ctx)
{
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r, sql, &st));
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        if (row(st, ctx))
            break;
    tg_status s = TG_OK;
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        s = tg_error(TG_ERR_FORMAT, "%s: %s", tg_profile_reader_path(r),
                     sqlite3_errmsg(tg_profile_reader_db(r)));
    sqlite3_finalize(st);
    return s;
}

bool tg_an_has_table(tg_profile_reader *r, const char *name)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(tg_profile_reader_db(r),
                           "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", -1, &st,
                           NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    bool found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return found;
}
