/* analyse/views_tiles.c - the per-tile parts of the views on tiled targets
 * (mk2): in the memory view the tile memory per device (largest tile, mean,
 * tiles over capacity), the top tiles by category, a histogram of tiles by
 * bytes, and with --tile N what one tile holds (its categories and the
 * tensors mapped on it, from tile_spans); in the trace view the tile
 * balance. On targets without tiles (no meta tiles_per_device) they add
 * nothing, so a cpu profile's views are unchanged. */
#include "analyse/analyse.h"

#include "core/alloc.h"
#include "core/error.h"
#include "profile/reader.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

enum { HIST_BINS = 10 };

tg_status tg_an_tiles_per_device(tg_profile_reader *r, int *out)
{
    *out = 0;
    const char *v = tg_profile_reader_meta(r, "tiles_per_device");
    if (!*v)
        return TG_OK; /* a target without tiles */
    /* the count sizes arrays and loops: a damaged or crafted profile must not
     * make them huge (a target description allows 1 to TG_AN_MAX_TILES) */
    char *end = NULL;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || *end || n < 0 || n > TG_AN_MAX_TILES)
        return tg_error(TG_ERR_FORMAT,
                        "%s: meta tiles_per_device '%s' is not a tile count from 0 to %d; the "
                        "profile is damaged: write it again with --profile",
                        tg_profile_reader_path(r), v, TG_AN_MAX_TILES);
    *out = (int)n;
    return TG_OK;
}

/* The bytes a tensor spread over `span` tiles, `per` bytes a tile and
 * `total` in all, holds on the tile at distance k0 from its first tile
 * (0 <= k0 < n_tiles); a span longer than the device wraps round again.
 * Closed form, so a crafted span of 2^63 tiles costs no more than one. */
static double bytes_on_tile(int64_t k0, int64_t span, int64_t n_tiles, double per, double total)
{
    if (!(per > 0) || !(total > 0) || span <= 0 || k0 >= span)
        return 0;
    /* the tiles k = 0.. that hold anything: k * per < total, and k < span */
    double cover = ceil(total / per);
    int64_t m = cover < (double)span ? (int64_t)cover : span;
    if (k0 >= m)
        return 0;
    int64_t visits = (m - 1 - k0) / n_tiles + 1, last = k0 + (visits - 1) * n_tiles;
    /* every visit before the last holds a full `per` (its k is at most
     * m - 1 - n_tiles, so more than `per` is left); the last what is left */
    double left = total - (double)last * per;
    return (double)(visits - 1) * per + (left < per ? (left > 0 ? left : 0) : per);
}

static const char *col_text(sqlite3_stmt *st, int i)
{
    const unsigned char *s = sqlite3_column_text(st, i);
    return s ? (const char *)s : "";
}

static int n_devices(tg_profile_reader *r)
{
    int64_t n = 0;
    if (tg_profile_reader_int(r, "SELECT COUNT(*) FROM devices", 0, &n) != TG_OK)
        return 0;
    return (int)n;
}

/* Bytes per tile of device d summed over categories; tiles without rows hold 0. */
static tg_status tile_totals(tg_profile_reader *r, int d, int n_tiles, double *out)
{
    memset(out, 0, sizeof *out * (size_t)n_tiles);
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r, "SELECT tile, SUM(bytes) FROM tiles WHERE device = ?1 GROUP BY tile",
                         &st));
    sqlite3_bind_int(st, 1, d);
    while (sqlite3_step(st) == SQLITE_ROW) {
        int t = sqlite3_column_int(st, 0);
        if (t >= 0 && t < n_tiles)
            out[t] = sqlite3_column_double(st, 1);
    }
    sqlite3_finalize(st);
    return TG_OK;
}

typedef struct tile_stats {
    double max, mean;
    int max_tile, used, over;
} tile_stats;

static tile_stats stats_of(const double *b, int n, double capacity)
{
    tile_stats s = {0, 0, 0, 0, 0};
    double sum = 0;
    for (int t = 0; t < n; t++) {
        sum += b[t];
        if (b[t] > s.max)
            s.max = b[t], s.max_tile = t;
        s.used += b[t] > 0;
        s.over += capacity > 0 && b[t] > capacity;
    }
    s.mean = n > 0 ? sum / n : 0;
    return s;
}

/* qsort has no context argument: the bytes being sorted by, set just before
 * each sort (the views run on one thread). */
static const double *sort_bytes;

static int by_bytes_desc(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    if (sort_bytes[a] != sort_bytes[b])
        return sort_bytes[a] > sort_bytes[b] ? -1 : 1;
    return a < b ? -1 : a > b;
}

/* Rows of the top-tile list: --top, at most MAX_TOP_TILES (compare asks for
 * every row, and a million-tile list of unrelated tiles says nothing). */
enum { MAX_TOP_TILES = 1000 };
static int top_tiles(const tg_an_filter *f, int n_tiles)
{
    int want = f->top > 0 && f->top < n_tiles ? f->top : n_tiles;
    return want < MAX_TOP_TILES ? want : MAX_TOP_TILES;
}

/* The categories of the tiles table, in a fixed order (for the top-tile columns). */
enum { MAX_CATS = 16 };
static int categories(tg_profile_reader *r, char cats[][48])
{
    sqlite3_stmt *st;
    if (tg_an_prepare(r, "SELECT DISTINCT category FROM tiles ORDER BY category", &st) != TG_OK)
        return 0;
    int n = 0;
    while (n < MAX_CATS && sqlite3_step(st) == SQLITE_ROW)
        snprintf(cats[n++], 48, "%s", col_text(st, 0));
    sqlite3_finalize(st);
    return n;
}

/* --tile N: the categories on tile N of each device, and the tensors mapped
 * on it. A tensor covers tiles [tile_start, tile_start + tiles) modulo the
 * tile count, bytes_per_tile each, except the last tile of its span, which
 * holds what is left of the tensor's bytes (all slots). */
static tg_status one_tile(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v, int n_tiles)
{
    int tile = f->tile;
    char title[96];
    static const char *const cols[] = {"device", "tile", "category", "bytes"};
    static const tg_an_kind kinds[] = {TG_AN_ID, TG_AN_ID, TG_AN_TEXT, TG_AN_BYTES};
    snprintf(title, sizeof title, "Tile %d by category", tile);
    tg_an_table *t = tg_an_table_add(v, title, 4, cols, kinds);
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT device, tile, category, bytes FROM tiles WHERE tile = ?1 "
                         "AND (?2 < 0 OR device = ?2) ORDER BY device, bytes DESC, category",
                         &st));
    sqlite3_bind_int(st, 1, tile);
    sqlite3_bind_int(st, 2, f->device);
    while (sqlite3_step(st) == SQLITE_ROW)
        tg_an_row(t, (double)sqlite3_column_int(st, 0), (double)sqlite3_column_int(st, 1),
                  col_text(st, 2), sqlite3_column_double(st, 3));
    sqlite3_finalize(st);

    static const char *const tcols[] = {"tensor",     "device", "category",
                                        "tile start", "tiles",  "bytes on tile"};
    static const tg_an_kind tkinds[] = {TG_AN_TEXT,  TG_AN_ID,    TG_AN_LABEL,
                                        TG_AN_COUNT, TG_AN_COUNT, TG_AN_BYTES};
    snprintf(title, sizeof title, "Tensors mapped on tile %d", tile);
    tg_an_table *tt = tg_an_table_add(v, title, 6, tcols, tkinds);
    TG_TRY(
        tg_an_prepare(r,
                      "SELECT t.name, t.device, t.category, s.tile_start, s.tiles, "
                      "s.bytes_per_tile, t.bytes * t.slots FROM tile_spans s "
                      "JOIN tensors t ON t.id = s.tensor "
                      "WHERE (?1 < 0 OR t.device = ?1) AND (?2 IS NULL OR instr(t.name, ?2) > 0) "
                      "ORDER BY t.device, t.id",
                      &st));
    sqlite3_bind_int(st, 1, f->device);
    if (f->op)
        sqlite3_bind_text(st, 2, f->op, -1, SQLITE_STATIC);
    int listed = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t start = sqlite3_column_int64(st, 3), span = sqlite3_column_int64(st, 4);
        double per = sqlite3_column_double(st, 5), total = sqlite3_column_double(st, 6);
        /* residues first: tile - start itself may overflow for a crafted start */
        int64_t k0 = ((int64_t)tile % n_tiles - start % n_tiles) % n_tiles;
        if (k0 < 0)
            k0 += n_tiles;
        double on = bytes_on_tile(k0, span, n_tiles, per, total);
        if (on <= 0)
            continue;
        tg_an_row(tt, col_text(st, 0), (double)sqlite3_column_int(st, 1), col_text(st, 2),
                  (double)start, (double)span, on);
        listed++;
    }
    sqlite3_finalize(st);
    tg_an_note(v, "tile %d: %d tensor%s mapped on it%s", tile, listed, listed == 1 ? "" : "s",
               f->device >= 0 ? "" : " (all devices)");
    return TG_OK;
}

/* Vertex types (profile table vertex_types): per device and op type its
 * vertices (a worker on each tile a step of that type runs on), their
 * vertex state and the type's code (one copy per tile running it), largest
 * first: the sums are the tiles' vertex state and vertex code. */
static tg_status vertex_types(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v)
{
    if (!tg_an_has_table(r, "vertex_types"))
        return TG_OK;
    static const char *const cols[] = {"device",      "vertex type", "vertices",
                                       "state bytes", "code bytes",  "bytes"};
    static const tg_an_kind kinds[] = {TG_AN_ID,    TG_AN_TEXT,  TG_AN_COUNT,
                                       TG_AN_BYTES, TG_AN_BYTES, TG_AN_BYTES};
    tg_an_table *t = tg_an_table_add(v, "Vertex types (estimated state and code)", 6, cols, kinds);
    if (!t)
        return tg_error(TG_ERR_NOMEM, "out of memory building the vertex types table");
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT device, type, vertices, state_bytes, code_bytes FROM "
                         "vertex_types WHERE ?1 < 0 OR device = ?1 "
                         "ORDER BY device, state_bytes + code_bytes DESC, type",
                         &st));
    sqlite3_bind_int(st, 1, f->device);
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *type = (const char *)sqlite3_column_text(st, 1);
        double state = sqlite3_column_double(st, 3), code = sqlite3_column_double(st, 4);
        tg_an_row(t, sqlite3_column_double(st, 0), type ? type : "?", sqlite3_column_double(st, 2),
                  state, code, state + code);
    }
    sqlite3_finalize(st);
    return TG_OK;
}

/* Device d's `want` largest tiles (b: bytes per tile; order: room for
 * n_tiles), sorted by bytes and ties by tile number, each with its bytes per
 * category (cat_st: the tiles table by device and tile). */
static void top_tile_rows(tg_an_table *tp, sqlite3_stmt *cat_st, char cats[][48], int nc, int d,
                          const double *b, int *order, int n_tiles, int want, double capacity)
{
    for (int t = 0; t < n_tiles; t++)
        order[t] = t;
    sort_bytes = b;
    qsort(order, (size_t)n_tiles, sizeof *order, by_bytes_desc);
    for (int i = 0; i < want; i++) {
        int tile = order[i];
        double per_cat[MAX_CATS] = {0};
        sqlite3_reset(cat_st);
        sqlite3_bind_int(cat_st, 1, d);
        sqlite3_bind_int(cat_st, 2, tile);
        while (sqlite3_step(cat_st) == SQLITE_ROW)
            for (int c = 0; c < nc; c++)
                if (!strcmp(cats[c], col_text(cat_st, 0)))
                    per_cat[c] = sqlite3_column_double(cat_st, 1);
        /* the row's cells go through tg_an_row's varargs: fill a fixed list */
        double cells[MAX_CATS];
        for (int c = 0; c < MAX_CATS; c++)
            cells[c] = c < nc ? per_cat[c] : 0;
        tg_an_row(tp, (double)d, (double)tile, b[tile], capacity > 0 ? b[tile] / capacity : 0.0,
                  cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6], cells[7],
                  cells[8], cells[9], cells[10], cells[11], cells[12], cells[13], cells[14],
                  cells[15]);
    }
}

/* Device d's tiles by bytes: HIST_BINS equal bins from 0 to the largest
 * tile (max). */
static void tile_histogram(tg_an_view *v, int d, const double *b, int n_tiles, double max)
{
    static const char *const hcols[] = {"bin", "from", "to", "tiles", ""};
    static const tg_an_kind hkinds[] = {TG_AN_ID, TG_AN_BYTES, TG_AN_BYTES, TG_AN_COUNT, TG_AN_BAR};
    char title[96];
    snprintf(title, sizeof title, "Tiles by bytes, device %d", d);
    tg_an_table *h = tg_an_table_add(v, title, 5, hcols, hkinds);
    int counts[HIST_BINS] = {0}, most = 0;
    double width = max > 0 ? max / HIST_BINS : 1;
    for (int t = 0; t < n_tiles; t++) {
        int k = b[t] > 0 ? (int)(b[t] / width) : 0;
        counts[k < HIST_BINS ? k : HIST_BINS - 1]++;
    }
    for (int k = 0; k < HIST_BINS; k++)
        most = counts[k] > most ? counts[k] : most;
    for (int k = 0; k < HIST_BINS; k++) {
        char bb[160];
        tg_an_bar(most > 0 ? (double)counts[k] / most : 0, true, bb, sizeof bb);
        tg_an_row(h, (double)k, k * width, (k + 1) * width, (double)counts[k], bb);
    }
}

tg_status tg_an_view_memory_tiles(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v)
{
    int n_tiles = 0;
    TG_TRY(tg_an_tiles_per_device(r, &n_tiles));
    if (n_tiles <= 0) {
        if (f->by_tile)
            return tg_error(TG_ERR_INVALID_ARG,
                            "--tile %d: %s is of target '%s', which has no tiles", f->tile,
                            tg_profile_reader_path(r), tg_profile_reader_meta(r, "target"));
        return TG_OK;
    }
    if (f->by_tile && (f->tile < 0 || f->tile >= n_tiles))
        return tg_error(TG_ERR_INVALID_ARG,
                        "--tile %d is beyond the %d tiles per device of %s (0 to %d)", f->tile,
                        n_tiles, tg_profile_reader_path(r), n_tiles - 1);
    if (f->by_tile)
        return one_tile(r, f, v, n_tiles);
    TG_TRY(vertex_types(r, f, v));

    double capacity = atof(tg_profile_reader_meta(r, "memory_per_tile"));
    int nd = n_devices(r);
    double *b = tg_malloc(sizeof *b * (size_t)n_tiles);
    int *order = tg_malloc(sizeof *order * (size_t)n_tiles);
    if (!b || !order) {
        tg_free(b);
        tg_free(order);
        return tg_error(TG_ERR_NOMEM, "out of memory reading the tiles of %s",
                        tg_profile_reader_path(r));
    }
    tg_status s = TG_OK;

    static const char *const scols[] = {"device",       "tiles",     "tiles used",
                                        "largest tile", "mean tile", "largest / mean",
                                        "over capacity"};
    static const tg_an_kind skinds[] = {TG_AN_ID,    TG_AN_COUNT, TG_AN_COUNT, TG_AN_BYTES,
                                        TG_AN_BYTES, TG_AN_NUM,   TG_AN_COUNT};
    /* tables are kept by index: adding one may move the others */
    if (!tg_an_table_add(v, "Tile memory per device", 7, scols, skinds)) {
        tg_free(b);
        tg_free(order);
        return tg_error(TG_ERR_NOMEM, "out of memory building the tile tables");
    }
    int sum_i = v->n_tables - 1;

    /* top tiles: device, tile, total, share of a tile's memory, then one column per category */
    char cats[MAX_CATS][48];
    int nc = categories(r, cats);
    const char *tcols[4 + MAX_CATS] = {"device", "tile", "bytes", "of tile memory"};
    tg_an_kind tkinds[4 + MAX_CATS] = {TG_AN_ID, TG_AN_ID, TG_AN_BYTES, TG_AN_FRAC};
    for (int c = 0; c < nc; c++)
        tcols[4 + c] = cats[c], tkinds[4 + c] = TG_AN_BYTES;
    if (!tg_an_table_add(v, "Top tiles (bytes by category)", 4 + nc, tcols, tkinds)) {
        tg_free(b);
        tg_free(order);
        return tg_error(TG_ERR_NOMEM, "out of memory building the tile tables");
    }
    int top_i = v->n_tables - 1;

    sqlite3_stmt *cat_st = NULL;
    s = tg_an_prepare(r, "SELECT category, bytes FROM tiles WHERE device = ?1 AND tile = ?2",
                      &cat_st);
    for (int d = 0; d < nd && s == TG_OK; d++) {
        if (f->device >= 0 && d != f->device)
            continue;
        if ((s = tile_totals(r, d, n_tiles, b)) != TG_OK)
            break;
        tile_stats ts = stats_of(b, n_tiles, capacity);
        tg_an_row(&v->tables[sum_i], (double)d, (double)n_tiles, (double)ts.used, ts.max, ts.mean,
                  ts.mean > 0 ? ts.max / ts.mean : 0.0, (double)ts.over);
        char cb[32];
        tg_an_note(v, "device %d: tiles over capacity: %d (of %s per tile)", d, ts.over,
                   capacity > 0 ? tg_an_format(TG_AN_BYTES, capacity, cb, sizeof cb) : "no limit");

        top_tile_rows(&v->tables[top_i], cat_st, cats, nc, d, b, order, n_tiles,
                      top_tiles(f, n_tiles), capacity);

        tile_histogram(v, d, b, n_tiles, ts.max);
    }
    sqlite3_finalize(cat_st);
    tg_free(b);
    tg_free(order);
    int64_t negative = 0;
    if (s == TG_OK)
        s = tg_profile_reader_int(r, "SELECT COUNT(*) FROM tiles WHERE bytes < 0", 0, &negative);
    if (s == TG_OK && negative > 0)
        tg_an_note(v,
                   "tiles: %lld row%s of the tiles table hold negative bytes (a fault of "
                   "the profile's writer); their tiles count in the histogram's first bin",
                   (long long)negative, negative == 1 ? "" : "s");
    if (s == TG_OK)
        tg_an_note(v,
                   "tiles: bins of the histogram run from 'from' (included) to 'to' "
                   "(excluded; the last bin includes the largest tile); top tiles list the "
                   "%d largest tiles per device",
                   top_tiles(f, n_tiles));
    return s;
}

tg_status tg_an_view_trace_tiles(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v)
{
    int n_tiles = 0;
    TG_TRY(tg_an_tiles_per_device(r, &n_tiles));
    if (n_tiles <= 0)
        return TG_OK;
    double capacity = atof(tg_profile_reader_meta(r, "memory_per_tile"));
    int64_t run = -1;
    TG_TRY(tg_profile_reader_int(r, "SELECT MIN(run) FROM trace", -1, &run));
    char clock[256]; /* the reader's meta buffer is reused by the next call */
    snprintf(clock, sizeof clock, "%s", tg_profile_reader_meta(r, "trace_clock"));
    double hz = atof(tg_profile_reader_meta(r, "clock_hz"));
    if (run >= 0) {
        tg_an_note(v,
                   "the times are the cycle model's, not measured: trace_clock is '%s'; "
                   "cycles are converted to time at %.3g GHz",
                   clock[0] ? clock : "unset", hz / 1e9);
        static const char *const ccols[] = {"device", "wall cycles", "compute cycles",
                                            "other cycles", "busy"};
        static const tg_an_kind ckinds[] = {TG_AN_ID, TG_AN_COUNT, TG_AN_COUNT, TG_AN_COUNT,
                                            TG_AN_FRAC};
        tg_an_table *ct =
            tg_an_table_add(v, "Cycles per device, first recorded host step", 5, ccols, ckinds);
        int64_t wall = 0;
        char sql[256];
        snprintf(sql, sizeof sql,
                 "SELECT MAX(end_cycles) - MIN(start_cycles) FROM trace WHERE run = %lld "
                 "AND replica = 0",
                 (long long)run);
        TG_TRY(tg_profile_reader_int(r, sql, 0, &wall));
        sqlite3_stmt *st;
        TG_TRY(tg_an_prepare(r,
                             "SELECT device, "
                             "SUM(CASE WHEN kind = 'execute' THEN end_cycles - start_cycles "
                             "ELSE 0 END), "
                             "SUM(CASE WHEN kind = 'execute' THEN 0 ELSE end_cycles - start_cycles "
                             "END) FROM trace WHERE run = ?1 AND replica = 0 "
                             "AND (?2 < 0 OR device = ?2) GROUP BY device ORDER BY device",
                             &st));
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_int(st, 2, f->device);
        while (sqlite3_step(st) == SQLITE_ROW) {
            double c = sqlite3_column_double(st, 1);
            tg_an_row(ct, (double)sqlite3_column_int(st, 0), (double)wall, c,
                      sqlite3_column_double(st, 2), wall > 0 ? c / (double)wall : 0.0);
        }
        sqlite3_finalize(st);
    }
    static const char *const cols[] = {"device", "largest tile", "mean tile", "largest / mean",
                                       "tiles used"};
    static const tg_an_kind kinds[] = {TG_AN_ID, TG_AN_BYTES, TG_AN_BYTES, TG_AN_NUM, TG_AN_COUNT};
    if (!tg_an_table_add(v, "Tile balance (bytes per tile)", 5, cols, kinds))
        return tg_error(TG_ERR_NOMEM, "out of memory building the tile balance");
    int ti = v->n_tables - 1;
    double *b = tg_malloc(sizeof *b * (size_t)n_tiles);
    if (!b)
        return tg_error(TG_ERR_NOMEM, "out of memory reading the tiles of %s",
                        tg_profile_reader_path(r));
    int nd = n_devices(r);
    for (int d = 0; d < nd; d++) {
        if (f->device >= 0 && d != f->device)
            continue;
        tg_status s = tile_totals(r, d, n_tiles, b);
        if (s != TG_OK) {
            tg_free(b);
            return s;
        }
        tile_stats ts = stats_of(b, n_tiles, capacity);
        double ratio = ts.mean > 0 ? ts.max / ts.mean : 0;
        tg_an_row(&v->tables[ti], (double)d, ts.max, ts.mean, ratio, (double)ts.used);
        char mb[32], ab[32];
        tg_an_note(v,
                   "device %d tile balance: largest tile %d holds %s, the mean tile %s: "
                   "%.2fx the mean over %d tiles (1.00x is perfectly even)",
                   d, ts.max_tile, tg_an_format(TG_AN_BYTES, ts.max, mb, sizeof mb),
                   tg_an_format(TG_AN_BYTES, ts.mean, ab, sizeof ab), ratio, n_tiles);
    }
    tg_free(b);
    return TG_OK;
}
