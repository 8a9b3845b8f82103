/* tilegraph/analyse.h - the Graph Analyser: a profile (docs/profile-format.md)
 * read as views of tables, printed as text or JSON, two profiles compared,
 * the HTML report page, and the flat JSON records the commands print.
 *
 * What `tilegraph analyse`, `compare` and `report` are made of, behind two
 * opaque handles: an open profile (tg_profile_reader) and a built view
 * (tg_view). The views themselves (their tables, cells and renderer) stay
 * inside the library, so a view can change its tables without a caller
 * changing with it. Every call returns a status whose message
 * (tg_error_message) names the profile or the view at fault.
 */
#ifndef TILEGRAPH_ANALYSE_H
#define TILEGRAPH_ANALYSE_H

#include "tilegraph/export.h"
#include "tilegraph/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An open profile. */
typedef struct tg_profile_reader tg_profile_reader;
/* One view of a profile (or of two, compared): titled tables and notes. */
typedef struct tg_view tg_view;

/* Open REPORT: a profile.sqlite, or a directory holding
 * training/profile.sqlite (preferred) or inference/profile.sqlite; for the
 * directory of an MPI job (instance-K subdirectories, docs/distributed.md)
 * instance `instance`'s profile, instance 0's when it is negative. A
 * non-negative instance of a report that is not a job's directory is an
 * error naming it. */
TG_API tg_status tg_analyse_open(const char *report, int instance, tg_profile_reader **out);
/* Close a profile and the file it read (NULL is fine). */
TG_API void tg_analyse_close(tg_profile_reader *r);
/* The file the profile was read from. */
TG_API const char *tg_analyse_path(const tg_profile_reader *r);
/* A value of the profile's meta table ("target"), "" when absent; valid
 * until the next call. */
TG_API const char *tg_analyse_meta(tg_profile_reader *r, const char *key);
/* TG_ERR_CONFIG naming both when the profiles are of different targets or
 * program kinds (training/inference). */
TG_API tg_status tg_analyse_comparable(tg_profile_reader *a, tg_profile_reader *b);

/* Filters from the command line; negative / NULL: none (set them with
 * tg_view_filter_defaults first). */
typedef struct tg_view_filter {
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
} tg_view_filter;

TG_API void tg_view_filter_defaults(tg_view_filter *f);

/* The views, in the order the commands list them: their count, and the
 * name and one-line description (for --help) of view i; NULL past the end. */
TG_API int tg_view_count(void);
TG_API const char *tg_view_name(int i);
TG_API const char *tg_view_about(int i);
TG_API bool tg_view_known(const char *name);
/* The view names, then `extra` (NULL: none), joined by `sep` with `last`
 * before the final one ("a|b|c" or "a, b or c") into buf; returns buf. */
TG_API const char *tg_view_list(char *buf, size_t cap, const char *sep, const char *last,
                                const char *extra);

/* View `name` of the profile into *out (free it with tg_view_destroy);
 * TG_ERR_INVALID_ARG for a filter the profile cannot meet (--device,
 * --tile), naming it. */
TG_API tg_status tg_view_build(tg_profile_reader *r, const char *name, const tg_view_filter *f,
                               tg_view **out);
/* Views a and b side by side into *out: for every numeric column source,
 * target and difference (absolute and %); rows matched by key, rows of one
 * only marked "only in A"/"only in B". The "largest" lists are compared
 * whole (so "only in" is true), then shortened to `top` rows. */
TG_API tg_status tg_view_compare(const tg_view *a, const tg_view *b, int top, tg_view **out);
TG_API void tg_view_print_text(const tg_view *v, FILE *out);
/* One JSON object {"view":..,"tables":[{"title":..,"columns":[..],"rows":[{..}]}],"notes":[..]}. */
TG_API tg_status tg_view_print_json(const tg_view *v, FILE *out);
TG_API void tg_view_destroy(tg_view *v);

/* A number of bytes for people ("1.5 MiB"), as the views print it; returns buf. */
TG_API char *tg_format_bytes(double bytes, char *buf, size_t cap);

/* ---- the HTML report page (`tilegraph report`) ---- */

/* {"reports": [one object per profile]} in *json, *len bytes; free it with
 * tg_report_json_free. */
TG_API tg_status tg_report_json(tg_profile_reader *const *r, int n, char **json, size_t *len);
TG_API void tg_report_json_free(char *json);
/* The page: HTML with the markers @@CSS@@, @@JS@@ and @@DATA@@. */
typedef struct tg_report_page {
    const unsigned char *html, *css, *js;
    size_t html_len, css_len, js_len;
} tg_report_page;
/* Write the page with `json` as its data to a temporary beside `out`, then
 * rename it over `out`: a full disk or a kill leaves the previous report
 * whole, never a truncated one. */
TG_API tg_status tg_report_page_write(const char *out, const tg_report_page *page, const char *json,
                                      size_t len);

/* ---- flat JSON records (train --json's epochs, infer --json) ---- */

typedef enum tg_record_kind {
    TG_RECORD_STRING,
    TG_RECORD_INT,
    TG_RECORD_NUMBER /* NaN and infinities print null, never `nan` */
} tg_record_kind;
typedef struct tg_record_field {
    const char *key;
    tg_record_kind kind;
    const char *s; /* TG_RECORD_STRING, escaped */
    int64_t i;     /* TG_RECORD_INT */
    double v;      /* TG_RECORD_NUMBER */
} tg_record_field;
/* {"key": value, ...} and a newline to `out`, one line per record: nothing
 * is printed when the writer fails. */
TG_API tg_status tg_print_record(FILE *out, const tg_record_field *f, int n);

#ifdef __cplusplus
}
#endif

#endif
