/* report/table.h - the tables every report is made of: a view is a list of
 * titled tables whose cells are either text or numbers with a unit kind
 * (bytes, nanoseconds, count, fraction), plus free-text notes. Keeping the
 * numbers as numbers is what lets one renderer print aligned text, one
 * print JSON, and one compare two reports row by row with differences,
 * without each view knowing about any of them.
 *
 * A row's key is its TEXT and ID cells (a tensor's name, a device); the
 * comparison (analyse/compare.c) matches rows of two reports by key, so
 * tensors present in only one report show up as such.
 *
 * The tables sit in the report layer, below the profile reader: what
 * `tilegraph compile` prints from a compiled program (report/plan.c) and what
 * `tilegraph analyse` prints from a profile (analyse/views_*.c) are the same
 * tables through the same renderer. The names keep the analyser's prefix
 * (tg_an_) they were born with.
 */
#ifndef TG_REPORT_TABLE_H
#define TG_REPORT_TABLE_H

#include "tilegraph/devices.h"
#include "tilegraph/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

#endif
