/* analyse/analyse.h - the Graph Analyser's views of a profile, as tables.
 *
 * Every view (summary, insights, memory, liveness, program, operations,
 * trace) reads a profile (docs/profile-format.md) and fills a tg_an_view: a
 * list of titled tables whose cells are either text or numbers with a unit
 * kind (bytes, nanoseconds, count, fraction), plus free-text notes. Keeping
 * the numbers as numbers is what lets one renderer print aligned text, one
 * print JSON, and one compare two reports row by row with differences,
 * without each view knowing about any of them.
 *
 * A row's key is its TEXT and ID cells (a tensor's name, a device); the
 * comparison matches rows of two reports by key, so tensors present in only
 * one report show up as such.
 */
#ifndef TG_ANALYSE_H
#define TG_ANALYSE_H

#include "tilegraph/devices.h"
#include "tilegraph/status.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct tg_profile_reader tg_profile_reader;

typedef enum tg_an_kind {
    TG_AN_TEXT,  /* part of the row's key (a name, a category) */
    TG_AN_ID,    /* an integer that is part of the key (a device, a step) */
    TG_AN_LABEL, /* text that is not part of the key (a target, a schedule) */
    TG_AN_BAR,   /* a text bar chart: shown in text only */
    TG_AN_COUNT, /* integer */
    TG_AN_BYTES,
    TG_AN_NS,   /* a duration in nanoseconds */
    TG_AN_FRAC, /* 0..1, printed as a percentage */
    TG_AN_NUM,  /* any other number */
    TG_AN_KIND_COUNT
} tg_an_kind;

/* Columns of a table: the memory table has one per device (at most
 * TG_AN_MAX_DEVICES, the most a program has) beside its label; a compared
 * table 4 per number, as many as fit. */
enum { TG_AN_MAX_DEVICES = TG_MAX_DEVICES, TG_AN_MAX_COLS = TG_AN_MAX_DEVICES + 8 };

typedef struct tg_an_cell {
    double num; /* NaN: no value (printed as a dash, null in JSON) */
    char *text; /* TEXT, LABEL and BAR only; owned */
} tg_an_cell;

typedef struct tg_an_table {
    char *title;
    int n_cols;
    char *cols[TG_AN_MAX_COLS];
    tg_an_kind kinds[TG_AN_MAX_COLS];
    int n_rows, cap_rows;
    tg_an_cell *cells; /* n_rows * n_cols */
} tg_an_table;

typedef struct tg_an_view {
    const char *name;
    int n_tables;
    tg_an_table *tables;
    int n_notes;
    char **notes; /* sentences printed after the tables */
} tg_an_view;

/* Filters from the command line; negative / NULL: none. */
typedef struct tg_an_filter {
    int device;
    int step;
    const char *op; /* substring of an op or tensor name */
    int top;        /* rows in "largest" lists; <= 0: 20 */
    /* tiled targets: the memory view of tile `tile` only when `by_tile`
     * (a flag, so a zero-initialised filter means no tile, not tile 0) */
    bool by_tile;
    int tile;
    /* trace: every execution on its own row instead of repeated ones grouped */
    bool no_group;
} tg_an_filter;

void tg_an_filter_defaults(tg_an_filter *f);

/* Open REPORT: a profile.sqlite, or a directory holding
 * training/profile.sqlite (preferred) or inference/profile.sqlite. */
tg_status tg_an_open(const char *report, tg_profile_reader **out);
/* The same for the directory of an MPI job (instance-K subdirectories,
 * docs/distributed.md): instance `instance`'s profile, instance 0's when it
 * is negative. A non-negative instance of a report that is not a job's
 * directory is an error naming it. */
tg_status tg_an_open_instance(const char *report, int instance, tg_profile_reader **out);
/* Close a profile opened by tg_an_open (NULL is fine), and the file it read:
 * so that commands need not reach into the profile reader. */
void tg_an_close(tg_profile_reader *r);
const char *tg_an_path(const tg_profile_reader *r);
/* A value of the profile's meta table ("target"), "" when absent; valid
 * until the next call. */
const char *tg_an_meta(tg_profile_reader *r, const char *key);

/* The views: one row per view, the only list of them. Dispatch, the
 * unknown-view error and the commands' --help all read it, so a view added
 * here appears everywhere at once. In the order the commands list them;
 * ended by a row with a NULL name. */
typedef struct tg_an_view_def {
    const char *name;
    tg_status (*build)(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
    const char *about; /* one line for --help */
} tg_an_view_def;
extern const tg_an_view_def tg_an_views[];
/* The row of view `name`, or NULL. */
const tg_an_view_def *tg_an_view_find(const char *name);
bool tg_an_view_known(const char *name);
/* The view names, then `extra` (NULL: none), joined by `sep` with `last`
 * before the final one ("a|b|c" or "a, b or c") into buf; returns buf. */
const char *tg_an_view_list(char *buf, size_t cap, const char *sep, const char *last,
                            const char *extra);

/* Fill `view` (zeroed by the caller) with view `name` of the profile. */
tg_status tg_an_build(tg_profile_reader *r, const char *name, const tg_an_filter *f,
                      tg_an_view *view);
void tg_an_view_free(tg_an_view *view);
bool tg_an_kind_is_text(tg_an_kind k);

/* ---- building tables (table.c) ---- */
tg_an_table *tg_an_table_add(tg_an_view *v, const char *title, int n_cols, const char *const *cols,
                             const tg_an_kind *kinds);
/* Append a row: for each column, a `const char *` for TEXT, LABEL and BAR
 * columns and a `double` for the others (IDs too), in order. */
void tg_an_row(tg_an_table *t, ...);
/* Append a row whose first column is TEXT and whose other n_cols - 1
 * columns are numbers, nums[0..n_cols-1): for tables whose column count is
 * known only at run time (a column per device). */
void tg_an_row_numbers(tg_an_table *t, const char *label, const double *nums);
/* Keep the first n rows. */
void tg_an_table_truncate(tg_an_table *t, int n);
void tg_an_note(tg_an_view *v, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Format one number of kind `k` for people ("1.5 MiB", "12.3 ms", "42.0%"). */
char *tg_an_format(tg_an_kind k, double v, char *buf, size_t cap);
/* A number in fixed figures with thousands grouped ("11,090", "0.5000"),
 * `decimals` after the point (-1: four significant figures), never in
 * scientific notation, which does not line up in a column. */
char *tg_an_format_fixed(double v, int decimals, char *buf, size_t cap);

/* A bar of Unicode blocks, 30 cells for frac 1, in eighths of a cell.
 * keep_visible gives any frac > 0 at least one eighth. */
void tg_an_bar(double frac, bool keep_visible, char *buf, size_t cap);

/* ---- output (render.c) ---- */
void tg_an_print_text(const tg_an_view *v, FILE *out);
/* One JSON object {"view":..,"tables":[{"title":..,"columns":[..],"rows":[{..}]}],"notes":[..]}. */
tg_status tg_an_print_json(const tg_an_view *v, FILE *out);
/* The same object as text (no newline) in *text, which the caller frees
 * with tg_free: for a document that embeds a view (compile --json). */
tg_status tg_an_view_json(const tg_an_view *v, char **text, size_t *len);

/* One field of a flat JSON record (tg_an_print_record). */
typedef enum tg_an_field_kind {
    TG_AN_FIELD_STRING,
    TG_AN_FIELD_INT,
    TG_AN_FIELD_NUMBER /* NaN and infinities print null, never `nan` */
} tg_an_field_kind;
typedef struct tg_an_field {
    const char *key;
    tg_an_field_kind kind;
    const char *s; /* TG_AN_FIELD_STRING, escaped */
    int64_t i;     /* TG_AN_FIELD_INT */
    double v;      /* TG_AN_FIELD_NUMBER */
} tg_an_field;
/* {"key": value, ...} and a newline to `out`, one line per record (train
 * --json's epochs): nothing is printed when the writer fails. */
tg_status tg_an_print_record(FILE *out, const tg_an_field *f, int n);

/* ---- comparison (compare.c) ---- */
/* Fill `out` with a side-by-side table per table of `a` and `b`: for every
 * numeric column source, target and difference (absolute and %); rows
 * matched by key, rows of one report only marked "only in A"/"only in B". */
tg_status tg_an_compare(const tg_an_view *a, const tg_an_view *b, tg_an_view *out);
/* TG_ERR_CONFIG naming both when the profiles are of different targets or
 * program kinds (training/inference). */
tg_status tg_an_check_comparable(tg_profile_reader *a, tg_profile_reader *b);

/* The views, one family per file. */
tg_status tg_an_view_summary(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
tg_status tg_an_view_memory(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
tg_status tg_an_view_liveness(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
tg_status tg_an_view_program(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
tg_status tg_an_view_operations(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
tg_status tg_an_view_trace(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
tg_status tg_an_view_insights(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
tg_status tg_an_view_host(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
tg_status tg_an_view_histograms(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
tg_status tg_an_view_instances(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);

/* Tiled targets (views_tiles.c): the tile count per device (0: no tiles;
 * TG_ERR_FORMAT naming the profile when its meta is not 0..TG_AN_MAX_TILES,
 * the most a target description allows);
 * the memory view's tile sections (with f->tile, that tile's contents;
 * TG_ERR_INVALID_ARG when the profile has no tiles or no such tile); the
 * trace view's cycles and tile balance. Both add nothing without tiles. */
enum { TG_AN_MAX_TILES = 1 << 20 };
tg_status tg_an_tiles_per_device(tg_profile_reader *r, int *out);
tg_status tg_an_view_memory_tiles(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
tg_status tg_an_view_trace_tiles(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);

/* Time per device over the first recorded host step (replica 0), from the
 * trace table; shared by the trace view and the insights. */
typedef struct tg_an_times {
    int run; /* the first recorded host step; -1: no trace */
    int n_devices;
    double wall_ns; /* first start to last end over all devices */
    double execute[TG_AN_MAX_DEVICES], copy[TG_AN_MAX_DEVICES], host[TG_AN_MAX_DEVICES],
        all_reduce[TG_AN_MAX_DEVICES], accumulate[TG_AN_MAX_DEVICES], wait[TG_AN_MAX_DEVICES],
        other[TG_AN_MAX_DEVICES];
    /* of all_reduce: exchanging with the job's other instances (MPI), which
     * includes waiting for them */
    double instances[TG_AN_MAX_DEVICES];
    /* host streams in on the I/O tiles (mk2 numIOTiles): beside the compute,
     * so not part of a device's time line */
    double io[TG_AN_MAX_DEVICES];
    int micro_batches, iterations;
} tg_an_times;
tg_status tg_an_times_read(tg_profile_reader *r, tg_an_times *out);
/* Whether the trace's times are a cycle model's (a tiled target such as
 * mk2: meta trace_clock "cycles ..."), not measured on this host: they are
 * then compared with the cost model as one model with another, and never
 * with the host's wall time. */
bool tg_an_trace_is_simulated(tg_profile_reader *r);

/* Run `sql` and call `row` for each result row; errors name the profile. */
typedef struct sqlite3_stmt sqlite3_stmt;
tg_status tg_an_query(tg_profile_reader *r, const char *sql, int (*row)(sqlite3_stmt *, void *),
                      void *ctx);
/* Whether the profile has table `name` (tables added by a later schema). */
bool tg_an_has_table(tg_profile_reader *r, const char *name);
/* Prepare `sql` (with `?` parameters to bind); error names the profile. */
tg_status tg_an_prepare(tg_profile_reader *r, const char *sql, sqlite3_stmt **out);

#endif
