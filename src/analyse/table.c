/* analyse/table.c - opening a report, building view tables, and the view
 * dispatch. The views themselves live in views_*.c. */
#include "analyse/analyse.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/units.h"
#include "profile/reader.h"

#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
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

bool tg_an_view_known(const char *name)
{
    return tg_an_view_find(name) != NULL;
}

const char *tg_an_view_list(char *buf, size_t cap, const char *sep, const char *last,
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

void tg_an_filter_defaults(tg_an_filter *f)
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

tg_status tg_an_open_instance(const char *report, int instance, tg_profile_reader **out)
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

tg_status tg_an_open(const char *report, tg_profile_reader **out)
{
    return tg_an_open_instance(report, -1, out);
}

void tg_an_close(tg_profile_reader *r)
{
    tg_profile_reader_close(r);
}

const char *tg_an_path(const tg_profile_reader *r)
{
    return tg_profile_reader_path(r);
}

const char *tg_an_meta(tg_profile_reader *r, const char *key)
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
                    tg_an_view_list(list, sizeof list, ", ", " or ", NULL));
}

void tg_an_view_free(tg_an_view *v)
{
    for (int t = 0; t < v->n_tables; t++) {
        tg_an_table *tb = &v->tables[t];
        for (int i = 0; i < tb->n_rows * tb->n_cols; i++)
            tg_free(tb->cells[i].text);
        for (int c = 0; c < tb->n_cols; c++)
            tg_free(tb->cols[c]);
        tg_free(tb->cells);
        tg_free(tb->title);
    }
    tg_free(v->tables);
    for (int i = 0; i < v->n_notes; i++)
        tg_free(v->notes[i]);
    tg_free(v->notes);
    memset(v, 0, sizeof *v);
}

bool tg_an_kind_is_text(tg_an_kind k)
{
    return k == TG_AN_TEXT || k == TG_AN_LABEL || k == TG_AN_BAR;
}

static char *dup_or_empty(const char *s)
{
    return tg_strdup(s ? s : "");
}

tg_an_table *tg_an_table_add(tg_an_view *v, const char *title, int n_cols, const char *const *cols,
                             const tg_an_kind *kinds)
{
    tg_an_table *grown = tg_realloc(v->tables, sizeof *grown * (size_t)(v->n_tables + 1));
    if (!grown)
        return NULL;
    v->tables = grown;
    tg_an_table *t = &v->tables[v->n_tables++];
    memset(t, 0, sizeof *t);
    t->title = dup_or_empty(title);
    t->n_cols = n_cols < TG_AN_MAX_COLS ? n_cols : TG_AN_MAX_COLS;
    for (int c = 0; c < t->n_cols; c++) {
        t->cols[c] = dup_or_empty(cols[c]);
        t->kinds[c] = kinds[c];
    }
    return t;
}

/* Room for one more row: its cells (the caller fills them and counts the
 * row), or NULL when out of memory (the row is then dropped). */
static tg_an_cell *next_row(tg_an_table *t)
{
    if (t->n_rows == t->cap_rows) {
        int cap = t->cap_rows ? 2 * t->cap_rows : 16;
        tg_an_cell *c = tg_realloc(t->cells, sizeof *c * (size_t)cap * (size_t)t->n_cols);
        if (!c)
            return NULL;
        t->cells = c;
        t->cap_rows = cap;
    }
    return &t->cells[(size_t)t->n_rows * (size_t)t->n_cols];
}

void tg_an_row_numbers(tg_an_table *t, const char *label, const double *nums)
{
    tg_an_cell *row = t ? next_row(t) : NULL;
    if (!row)
        return;
    row[0] = (tg_an_cell){0, dup_or_empty(label)};
    for (int c = 1; c < t->n_cols; c++)
        row[c] = (tg_an_cell){nums[c - 1], NULL};
    t->n_rows++;
}

void tg_an_row(tg_an_table *t, ...)
{
    tg_an_cell *row = t ? next_row(t) : NULL;
    if (!row)
        return;
    va_list ap;
    va_start(ap, t);
    for (int c = 0; c < t->n_cols; c++) {
        if (tg_an_kind_is_text(t->kinds[c])) {
            row[c].text = dup_or_empty(va_arg(ap, const char *));
            row[c].num = 0;
        } else {
            row[c].text = NULL;
            row[c].num = va_arg(ap, double);
        }
    }
    va_end(ap);
    t->n_rows++;
}

void tg_an_table_truncate(tg_an_table *t, int n)
{
    if (n < 0 || n >= t->n_rows)
        return;
    for (size_t i = (size_t)n * (size_t)t->n_cols; i < (size_t)t->n_rows * (size_t)t->n_cols; i++)
        tg_free(t->cells[i].text);
    t->n_rows = n;
}

void tg_an_note(tg_an_view *v, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **n = tg_realloc(v->notes, sizeof *n * (size_t)(v->n_notes + 1));
    if (!n)
        return;
    v->notes = n;
    v->notes[v->n_notes++] = tg_strdup(buf);
}

char *tg_an_format_fixed(double v, int decimals, char *buf, size_t cap)
{
    double a = fabs(v);
    if (!isfinite(v) || a >= 1e21) { /* beyond any count a profile holds (damaged) */
        snprintf(buf, cap, "%.4g", v);
        return buf;
    }
    if (decimals < 0) /* four significant figures, never an exponent */
        decimals = a >= 1000 || a == 0 ? 0 : a >= 100 ? 1 : a >= 10 ? 2 : a >= 1 ? 3 : 4;
    if (a > 0 && a < 1e-4)
        decimals = 6;
    char digits[64];
    snprintf(digits, sizeof digits, "%.*f", decimals, a);
    const char *point = strchr(digits, '.');
    size_t whole = point ? (size_t)(point - digits) : strlen(digits), n = 0;
    char out[96];
    if (v < 0 && strspn(digits, "0.") != strlen(digits))
        out[n++] = '-';
    for (size_t i = 0; i < whole; i++) { /* thousands grouped: 11,090 */
        if (i && (whole - i) % 3 == 0)
            out[n++] = ',';
        out[n++] = digits[i];
    }
    snprintf(out + n, sizeof out - n, "%s", point ? point : "");
    snprintf(buf, cap, "%s", out);
    return buf;
}

char *tg_an_format(tg_an_kind k, double v, char *buf, size_t cap)
{
    if (isnan(v)) {
        snprintf(buf, cap, "\xe2\x80\x94"); /* em dash: no value */
        return buf;
    }
    switch (k) {
    case TG_AN_BYTES:
        if (v < 0) {
            tg_bytes_str(-v, buf + 1, cap - 1);
            buf[0] = '-';
            return buf;
        }
        return tg_bytes_str(v, buf, cap);
    case TG_AN_NS: {
        double a = v < 0 ? -v : v, s = a * 1e-9;
        const char *sign = v < 0 ? "-" : "";
        if (a < 1e3)
            snprintf(buf, cap, "%s%.0f ns", sign, a);
        else if (a < 1e6)
            snprintf(buf, cap, "%s%.1f us", sign, a / 1e3);
        else if (a < 1e9)
            snprintf(buf, cap, "%s%.2f ms", sign, a / 1e6);
        else
            snprintf(buf, cap, "%s%.3f s", sign, s);
        return buf;
    }
    case TG_AN_FRAC:
        snprintf(buf, cap, "%.1f%%", v * 100);
        return buf;
    case TG_AN_ID:
        snprintf(buf, cap, "%.0f", v);
        return buf;
    case TG_AN_COUNT:
    case TG_AN_NUM:
        return tg_an_format_fixed(v, k == TG_AN_COUNT ? 0 : -1, buf, cap);
    default:
        snprintf(buf, cap, "%g", v);
        return buf;
    }
}

void tg_an_bar(double frac, bool keep_visible, char *buf, size_t cap)
{
    enum { WIDTH = 30 };
    /* a damaged profile gives negative, huge or NaN shares: draw 0..1 */
    frac = frac > 0 ? (frac < 1 ? frac : 1) : 0;
    int eighths = (int)(frac * WIDTH * 8 + 0.5), used = 0;
    static const char *const parts[] = {"",
                                        "\xe2\x96\x8f",
                                        "\xe2\x96\x8e",
                                        "\xe2\x96\x8d",
                                        "\xe2\x96\x8c",
                                        "\xe2\x96\x8b",
                                        "\xe2\x96\x8a",
                                        "\xe2\x96\x89"};
    buf[0] = '\0';
    if (keep_visible && frac > 0 && eighths == 0)
        eighths = 1;
    for (int i = 0; i < eighths / 8 && used + 4 < (int)cap; i++)
        used += snprintf(buf + used, cap - (size_t)used, "\xe2\x96\x88"); /* full block */
    if (eighths % 8 && used + 4 < (int)cap)
        snprintf(buf + used, cap - (size_t)used, "%s", parts[eighths % 8]);
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
