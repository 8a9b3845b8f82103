/* analyse/analyse.h - the Graph Analyser's views of a profile, as tables.
 *
 * Every view (the {name, fn, summary} table of analyse/table.c: summary,
 * insights, memory, liveness, program, operations, trace, pipeline, host, histograms,
 * instances) reads a profile (docs/profile-format.md) and fills a tg_an_view,
 * the report layer's list of tables (report/table.h), which one renderer
 * prints as text or JSON and compare.c sets side by side. This layer reads
 * profiles only; what is shown of a compiled program is report/'s.
 */
#ifndef TG_ANALYSE_H
#define TG_ANALYSE_H

#include "report/table.h"
#include "tilegraph/analyse.h"
#include "tilegraph/devices.h"
#include "tilegraph/status.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The command line's filters (tilegraph/analyse.h), by the name the views
 * were written with. */
typedef tg_view_filter tg_an_filter;
/* Opening a profile, the filters' defaults, the view names and
 * tg_analyse_comparable are the public API's (tilegraph/analyse.h, api.c). */

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

/* Fill `view` (zeroed by the caller) with view `name` of the profile. */
tg_status tg_an_build(tg_profile_reader *r, const char *name, const tg_an_filter *f,
                      tg_an_view *view);

/* ---- comparison (compare.c) ---- */
/* Fill `out` with a side-by-side table per table of `a` and `b`: for every
 * numeric column source, target and difference (absolute and %); rows
 * matched by key, rows of one report only marked "only in A"/"only in B". */
tg_status tg_an_compare(const tg_an_view *a, const tg_an_view *b, tg_an_view *out);

/* The views, one family per file. */
tg_status tg_an_view_summary(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
tg_status tg_an_view_memory(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
tg_status tg_an_view_liveness(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
tg_status tg_an_view_program(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
tg_status tg_an_view_operations(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
tg_status tg_an_view_trace(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
/* Where a pipelined host step goes (views_pipeline.c): parts that sum to it. */
tg_status tg_an_view_pipeline(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v);
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
