/* analyse/views_insights.c - what a person should look at first, for memory
 * and for time: the largest category per device and devices near their
 * memory limit; the longest pipeline stage and what balancing would gain;
 * the pipeline bubble measured against (N-1)/(m+N-1); time spent waiting on
 * the host; offloading traffic. Numbers go in tables (so reports compare),
 * the sentences in notes. */
#include "analyse/analyse.h"

#include "core/error.h"
#include "profile/profile.h"
#include "profile/reader.h"
#include "report/memory_table.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

/* The cost model against the measurement: per device, the op time the
 * compiler predicted (ops.predicted_ns x calls) beside the measured op time
 * over the same recorded runs. Profiles written before the column existed
 * have no such table. */
/* On a tiled target the trace is the cycle model's and the ops' times are
 * this host's CPU running the kernels: the cost model's prediction is
 * compared with the cycle model (one host step, as the trace view does),
 * never with the host's wall time, which is another machine's time. */
static tg_status cycle_model_check(tg_profile_reader *r, const tg_an_times *t, tg_an_view *v)
{
    if (!tg_an_has_table(r, "predicted_trace") || t->run < 0)
        return TG_OK;
    double its = atof(tg_profile_reader_meta(r, "iterations"));
    its = its >= 1 ? its : 1;
    static const char *const cols[] = {"device", "cycle model compute", "predicted",
                                       "predicted / cycle model"};
    static const tg_an_kind kinds[] = {TG_AN_ID, TG_AN_NS, TG_AN_NS, TG_AN_NUM};
    tg_an_table *tab = tg_an_table_add(
        v, "Cost model against the cycle model (first recorded host step)", 4, cols, kinds);
    if (!tab)
        return tg_error(TG_ERR_NOMEM, "out of memory building the insights");
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT device, SUM(end_ns - start_ns) FROM predicted_trace "
                         "GROUP BY device ORDER BY device",
                         &st));
    char a[32], b[32];
    while (sqlite3_step(st) == SQLITE_ROW) {
        int d = sqlite3_column_int(st, 0);
        double predicted = sqlite3_column_double(st, 1) * its;
        double cycles = d >= 0 && d < t->n_devices ? t->execute[d] : NAN;
        double ratio = cycles > 0 ? predicted / cycles : NAN;
        tg_an_row(tab, (double)d, cycles, predicted, ratio);
        tg_an_note(v,
                   "cost model: device %d computes for %s in the cycle model (simulated %s "
                   "cycles) against %s predicted by the cost model (%.2fx), both models of the "
                   "%s; the time this host took to run its kernels is the CPU's, not the %s's, "
                   "and is not compared",
                   d, tg_an_format(TG_AN_NS, cycles, a, sizeof a),
                   tg_profile_reader_meta(r, "target"),
                   tg_an_format(TG_AN_NS, predicted, b, sizeof b), ratio,
                   tg_profile_reader_meta(r, "target"), tg_profile_reader_meta(r, "target"));
    }
    sqlite3_finalize(st);
    return TG_OK;
}

static tg_status cost_model_check(tg_profile_reader *r, const tg_an_times *times, tg_an_view *v)
{
    if (tg_an_trace_is_simulated(r))
        return cycle_model_check(r, times, v);
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT COUNT(*) FROM pragma_table_info('ops') WHERE name = "
                         "'predicted_ns'",
                         &st));
    bool has = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) > 0;
    sqlite3_finalize(st);
    if (!has)
        return TG_OK;
    static const char *const cols[] = {"device", "measured op time", "predicted",
                                       "predicted / measured"};
    static const tg_an_kind kinds[] = {TG_AN_ID, TG_AN_NS, TG_AN_NS, TG_AN_FRAC};
    tg_an_table *t = tg_an_table_add(v, "Cost model against the measured op time", 4, cols, kinds);
    if (!t)
        return tg_error(TG_ERR_NOMEM, "out of memory building the insights");
    TG_TRY(tg_an_prepare(r,
                         "SELECT device, SUM(total_ns), SUM(predicted_ns * calls) FROM ops "
                         "WHERE calls > 0 AND predicted_ns IS NOT NULL GROUP BY device "
                         "ORDER BY device",
                         &st));
    char a[32], b[32];
    while (sqlite3_step(st) == SQLITE_ROW) {
        int d = sqlite3_column_int(st, 0);
        double measured = sqlite3_column_double(st, 1), predicted = sqlite3_column_double(st, 2);
        double ratio = measured > 0 ? predicted / measured : NAN;
        tg_an_row(t, (double)d, measured, predicted, ratio);
        tg_an_note(v,
                   "cost model: device %d's ops took %s measured (wall clock) against %s "
                   "predicted (%.2fx); "
                   "a split is chosen on the ratios between stages, so a ratio that differs "
                   "between devices is what misleads it",
                   d, tg_an_format(TG_AN_NS, measured, a, sizeof a),
                   tg_an_format(TG_AN_NS, predicted, b, sizeof b), ratio);
    }
    sqlite3_finalize(st);
    return TG_OK;
}

/* The memory a device may hold: memory_per_device when set; on tiled
 * targets (mk2) the tiles times the memory of a tile, which is a limit even
 * when no device limit was set. `from` says where it came from (NULL: set). */
static tg_status device_limit(tg_profile_reader *r, double *limit, const char **from, char *how,
                              size_t how_cap)
{
    *limit = atof(tg_profile_reader_meta(r, "memory_per_device"));
    *from = NULL;
    if (*limit > 0)
        return TG_OK;
    int tiles = 0;
    TG_TRY(tg_an_tiles_per_device(r, &tiles));
    double per_tile = atof(tg_profile_reader_meta(r, "memory_per_tile"));
    if (tiles > 0 && per_tile > 0) {
        char b[32];
        *limit = tiles * per_tile;
        snprintf(how, how_cap, "%d tiles of %s each", tiles,
                 tg_an_format(TG_AN_BYTES, per_tile, b, sizeof b));
        *from = how;
    }
    return TG_OK;
}

/* The remedies `compile` printed for this plan (a table older profiles lack): what
 * each one-change re-compilation needs where the plan is fullest. */
static tg_status remedies(tg_profile_reader *r, tg_an_view *v)
{
    if (!tg_an_has_table(r, "remedies"))
        return TG_OK;
    int64_t n = 0;
    TG_TRY(tg_profile_reader_int(r, "SELECT COUNT(*) FROM remedies", 0, &n));
    if (n == 0)
        return TG_OK;
    static const char *const cols[] = {"remedy", "needs", "after", "saves", "of need", "outcome"};
    static const tg_an_kind kinds[] = {TG_AN_TEXT,  TG_AN_BYTES, TG_AN_BYTES,
                                       TG_AN_BYTES, TG_AN_FRAC,  TG_AN_LABEL};
    tg_an_table *t = tg_an_table_add(v, "Re-planned remedies (compile)", 6, cols, kinds);
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT remedy, need_bytes, after_bytes, capacity_bytes, outcome "
                         "FROM remedies ORDER BY id",
                         &st));
    int fits = 0;
    double need = 0, cap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *what = (const char *)sqlite3_column_text(st, 0);
        const char *outcome = (const char *)sqlite3_column_text(st, 4);
        need = sqlite3_column_double(st, 1);
        cap = sqlite3_column_double(st, 3);
        bool known = sqlite3_column_type(st, 2) != SQLITE_NULL;
        double after = known ? sqlite3_column_double(st, 2) : NAN;
        tg_an_row(t, what ? what : "?", need, after, known ? need - after : NAN,
                  known && need > 0 ? (need - after) / need : NAN, outcome ? outcome : "");
        fits += known && cap > 0 && after <= cap;
    }
    sqlite3_finalize(st);
    char a[32], b[32];
    if (cap > 0)
        tg_an_note(v,
                   "memory: compile re-planned %lld remedies for this plan (it needs %s of %s); "
                   "%d of them fit",
                   (long long)n, tg_an_format(TG_AN_BYTES, need, a, sizeof a),
                   tg_an_format(TG_AN_BYTES, cap, b, sizeof b), fits);
    else
        tg_an_note(v, "memory: compile re-planned %lld remedies for this plan (it needs %s)",
                   (long long)n, tg_an_format(TG_AN_BYTES, need, a, sizeof a));
    return TG_OK;
}

/* Tiled targets: a device is only as full as its fullest tile. */
static tg_status tile_insights(tg_profile_reader *r, tg_an_view *v)
{
    int tiles = 0;
    TG_TRY(tg_an_tiles_per_device(r, &tiles));
    double per_tile = atof(tg_profile_reader_meta(r, "memory_per_tile"));
    if (tiles <= 0 || !(per_tile > 0))
        return TG_OK;
    static const char *const cols[] = {"device", "largest tile", "bytes", "of tile memory"};
    static const tg_an_kind kinds[] = {TG_AN_ID, TG_AN_COUNT, TG_AN_BYTES, TG_AN_FRAC};
    tg_an_table *t = tg_an_table_add(v, "Fullest tile per device", 4, cols, kinds);
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT device, tile, MAX(total) FROM (SELECT device, tile, "
                         "SUM(bytes) AS total FROM tiles GROUP BY device, tile) "
                         "GROUP BY device ORDER BY device",
                         &st));
    char a[32], b[32];
    while (sqlite3_step(st) == SQLITE_ROW) {
        int d = sqlite3_column_int(st, 0), tile = sqlite3_column_int(st, 1);
        double bytes = sqlite3_column_double(st, 2), frac = bytes / per_tile;
        tg_an_row(t, (double)d, (double)tile, bytes, frac);
        tg_an_note(v, "memory: device %d's fullest tile (%d) holds %s of its %s (%.0f%%)%s", d,
                   tile, tg_an_format(TG_AN_BYTES, bytes, a, sizeof a),
                   tg_an_format(TG_AN_BYTES, per_tile, b, sizeof b), 100 * frac,
                   frac > 1      ? ": over capacity"
                   : frac >= 0.9 ? ": close to the limit"
                                 : "");
    }
    sqlite3_finalize(st);
    return TG_OK;
}

/* Devices x threads x replicas beyond the cores: they take turns on the
 * cores. The advice is only what can still help: fewer threads per device
 * when each has more than its share of the cores, fewer devices or replicas
 * when every device already has a single thread. Options are named by their
 * library key, with how Python (Options().set) and train (its flag) set it. */
static void shared_cores_note(tg_an_view *v, int n, int threads, int replicas, int cores,
                              int wanted)
{
    int parties = n * replicas, share = cores / parties;
    double speedup = (double)cores / threads < n ? (double)cores / threads : (double)n;
    char advice[256];
    if (share >= 1 && share < threads)
        snprintf(advice, sizeof advice,
                 "give each device %d thread%s (threadsPerDevice: opts.set('threadsPerDevice', "
                 "%d) in Python, --threads-per-device %d in tilegraph train) or use fewer "
                 "devices",
                 share, share == 1 ? "" : "s", share, share);
    else /* more devices x replicas than cores: threads cannot help */
        snprintf(advice, sizeof advice,
                 "%s, so only fewer devices%s can help: at most %d device%s%s for %d core%s",
                 threads == 1 ? "every device already has a single thread"
                              : "even 1 thread per device would be more threads than cores",
                 replicas > 1 ? " or replicas" : "", cores, cores == 1 ? "" : "s",
                 replicas > 1 ? " x replicas" : "", cores, cores == 1 ? "" : "s");
    tg_an_note(v,
               "time: %d devices x %d thread%s%s = %d threads share %d core%s, so the devices "
               "take turns on the cores and a pipeline cannot be faster than running them "
               "one after another (at most %.2fx over one device, not %dx); balancing the "
               "stages will not change that: %s",
               n, threads, threads == 1 ? "" : "s", replicas > 1 ? " x replicas" : "", wanted,
               cores, cores == 1 ? "" : "s", speedup, n, advice);
}

/* Devices whose threads fit the cores but not the cores that were free at
 * compile time: other processes took turns with them. (Threads beyond the
 * cores themselves are the "share cores" note of the time section.) Profiles
 * without the core counts, and tiled targets (simulated cycles), say nothing. */
static void other_processes(tg_profile_reader *r, int n_devices, tg_an_view *v)
{
    int allowed = atoi(tg_profile_reader_meta(r, "cores_allowed"));
    int free_cores = atoi(tg_profile_reader_meta(r, "cores_free"));
    int threads = atoi(tg_profile_reader_meta(r, "threads_per_device"));
    int replicas = atoi(tg_profile_reader_meta(r, "replicas"));
    int parties = n_devices * (replicas > 0 ? replicas : 1);
    if (allowed <= 0 || parties < 2 || atoi(tg_profile_reader_meta(r, "tiles_per_device")) > 0)
        return;
    int64_t total = (int64_t)parties * (threads > 0 ? threads : 1);
    if (free_cores > 0 && total > free_cores && total <= allowed)
        tg_an_note(v,
                   "time: %lld threads on %d usable cores of which %d were free at compile time: "
                   "other processes shared the cores, so devices waited for time slices as well "
                   "as for each other",
                   (long long)total, allowed, free_cores);
}

/* Offloading: the bytes each device keeps in host streaming memory (the
 * memory table's "offloaded to host") and what the first recorded host step
 * loaded into streamed copies and stored back, in every phase, with the
 * time the copies took (compile/streaming.c), how long the device waited
 * for its I/O thread's copies, and so how much of the copy time ran beside
 * the compute (TensorLocations.ioSchedule preload; copies on the device's
 * own thread, onDemand, hide none). */
static tg_status offloading(tg_profile_reader *r, const tg_an_times *times, tg_an_view *v)
{
    static const char *const cols[] = {
        "device", "offloaded to host", "loaded", "stored", "copy time", "waited", "beside compute"};
    static const tg_an_kind kinds[] = {TG_AN_ID, TG_AN_BYTES, TG_AN_BYTES, TG_AN_BYTES,
                                       TG_AN_NS, TG_AN_NS,    TG_AN_NS};
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT d.device, "
                         "(SELECT COALESCE(SUM(bytes), 0) FROM memory m WHERE m.device = "
                         " d.device AND m.category = 'offloaded to host'), "
                         "(SELECT COALESCE(SUM(bytes), 0) FROM trace t WHERE t.device = d.device "
                         " AND t.run = ?1 AND t.kind = 'load from streaming memory'), "
                         "(SELECT COALESCE(SUM(bytes), 0) FROM trace t WHERE t.device = d.device "
                         " AND t.run = ?1 AND t.kind = 'store to streaming memory'), "
                         "(SELECT COALESCE(SUM(end_ns - start_ns), 0) FROM trace t WHERE "
                         " t.device = d.device AND t.run = ?1 AND t.kind IN "
                         " ('load from streaming memory', 'store to streaming memory')), "
                         "(SELECT COALESCE(SUM(end_ns - start_ns), 0) FROM trace t WHERE "
                         " t.device = d.device AND t.run = ?1 AND t.kind = "
                         " 'wait for streaming memory'), "
                         "(SELECT COALESCE(SUM(end_ns - start_ns), 0) FROM trace t WHERE "
                         " t.device = d.device AND t.run = ?1 AND t.peer = ?2 AND t.kind IN "
                         " ('load from streaming memory', 'store to streaming memory')) "
                         "FROM devices d ORDER BY d.device",
                         &st));
    sqlite3_bind_int(st, 1, times->run);
    sqlite3_bind_int(st, 2, TG_EVENT_PEER_IO_THREAD);
    tg_an_table *t = NULL;
    double offloaded = 0, in = 0, out = 0, ns = 0, waited = 0, beside = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        double o = sqlite3_column_double(st, 1), i = sqlite3_column_double(st, 2),
               x = sqlite3_column_double(st, 3), c = sqlite3_column_double(st, 4),
               w = sqlite3_column_double(st, 5), io = sqlite3_column_double(st, 6);
        if (o <= 0 && i <= 0 && x <= 0)
            continue;
        if (!t)
            t = tg_an_table_add(v, "Offloading", 7, cols, kinds);
        double hidden = io > w ? io - w : 0; /* the I/O thread's time the device did not wait */
        tg_an_row(t, (double)sqlite3_column_int(st, 0), o, i, x, c, w, hidden);
        offloaded += o, in += i, out += x, ns += c, waited += w, beside += hidden;
    }
    sqlite3_finalize(st);
    char a[32], b[32], c[32], d[32], e[32];
    if (!t)
        tg_an_note(v, "offloading: none (no tensor is kept in host streaming memory)");
    else
        tg_an_note(v,
                   "offloading: %s kept in host streaming memory; the first recorded host step "
                   "loaded %s into streamed copies and stored %s back, in %s of copies, %s of it "
                   "beside the compute (%.0f%%)%s",
                   tg_an_format(TG_AN_BYTES, offloaded, a, sizeof a),
                   tg_an_format(TG_AN_BYTES, in, b, sizeof b),
                   tg_an_format(TG_AN_BYTES, out, c, sizeof c),
                   tg_an_format(TG_AN_NS, ns, d, sizeof d),
                   tg_an_format(TG_AN_NS, beside, e, sizeof e), ns > 0 ? 100.0 * beside / ns : 0.0,
                   times->run < 0 ? " (no execution trace recorded)" : "");
    return TG_OK;
}

/* Host-stream waits: what the devices spend on host streams, the longest
 * as a share of the host step; on cpu, above 1% with no prefetch, the
 * option that hides them (docs/data.md, Host streams). */
static void host_stream_waits(tg_profile_reader *r, const tg_an_times *t, tg_an_view *v)
{
    char a[32];
    int n = t->n_devices, worst = 0;
    double host = 0, w = t->wall_ns > 0 ? t->wall_ns : 1;
    for (int d = 0; d < n; d++) {
        host += t->host[d];
        if (t->host[d] > t->host[worst])
            worst = d;
    }
    int depth = atoi(tg_profile_reader_meta(r, "option.defaultPrefetchBufferingDepth"));
    bool measured = !tg_an_trace_is_simulated(r); /* a cycle model's time has no host waits */
    bool hint = measured && depth <= 1 && t->host[worst] > 0.01 * w;
    tg_an_note(v,
               "time: host-stream waits: devices wait %s on host streams in the host step "
               "(%.1f%% of device time); the longest, device %d, %.2f%% of the host step%s",
               tg_an_format(TG_AN_NS, host, a, sizeof a), 100 * host / (n * w), worst,
               100 * t->host[worst] / w,
               hint ? "; defaultPrefetchBufferingDepth=3 would fill the next micro-batches "
                      "while the devices compute"
                    : "");
}

/* One micro-batch's host-stream inputs of device d and its stash depth
 * (the input slots are one more with I/O tiles), from the trace and the
 * devices table. */
static void device_inputs(tg_profile_reader *r, int d, int run, double *bytes, int *depth)
{
    sqlite3_stmt *st;
    *bytes = 0;
    *depth = 1;
    if (tg_an_prepare(r,
                      "SELECT (SELECT COALESCE(MAX(bytes), 0) FROM trace WHERE run = ?1 AND "
                      "device = ?2 AND phase = 'forward' AND kind IN ('stream from host', "
                      "'I/O tiles: stream from host')), (SELECT stash_depth FROM devices "
                      "WHERE device = ?2)",
                      &st) != TG_OK)
        return;
    sqlite3_bind_int(st, 1, run);
    sqlite3_bind_int(st, 2, d);
    if (sqlite3_step(st) == SQLITE_ROW) {
        *bytes = sqlite3_column_double(st, 0);
        /* bounded: a damaged devices table must not overflow depth + 1 */
        int64_t k = sqlite3_column_int64(st, 1);
        *depth = k > 0 && k < (1 << 20) ? (int)k : 1;
    }
    sqlite3_finalize(st);
}

/* mk2: stream copies over 5% of a device's cycles without I/O tiles get the
 * seed's rule of thumb (002 §4.4.2): N ~ 1.05 x the bytes the I/O tiles hold
 * (a micro-batch of inputs per slot) / the tile memory, rounded up to a
 * power of 2 as the seed advises; with I/O tiles, what they overlap. */
static void io_tiles_insight(tg_profile_reader *r, const tg_an_times *t, tg_an_view *v)
{
    double per_tile = atof(tg_profile_reader_meta(r, "memory_per_tile"));
    int io_tiles = atoi(tg_profile_reader_meta(r, "option.numIOTiles"));
    double w = t->wall_ns > 0 ? t->wall_ns : 1;
    char a[32], b[32], c[32];
    for (int d = 0; d < t->n_devices && per_tile > 0; d++) {
        if (io_tiles > 0 && t->io[d] > 0)
            tg_an_note(v,
                       "time: device %d's host streams in run on its %d I/O tile%s beside the "
                       "compute (%.1f%% of the host step's cycles)",
                       d, io_tiles, io_tiles == 1 ? "" : "s", 100 * t->io[d] / w);
        double share = t->host[d] / w, bytes;
        int depth;
        if (io_tiles > 0 || share <= 0.05)
            continue;
        device_inputs(r, d, t->run, &bytes, &depth);
        if (bytes <= 0)
            continue;
        /* a damaged profile can hold any bytes (2^63, inf): the count is
         * bounded by the device's tiles before it is rounded up, so the
         * doubling below ends (an int doubled past 2^31 became 0, forever) */
        int tiles = 0;
        if (tg_an_tiles_per_device(r, &tiles) != TG_OK || tiles <= 0)
            tiles = TG_AN_MAX_TILES;
        double need = 1.05 * bytes * ((double)depth + 1) / per_tile;
        if (!(need <= tiles)) {
            tg_an_note(v,
                       "time: device %d's stream copies take %.0f%% of the cycles; I/O tiles "
                       "cannot hold them (%s x %d slots needs more than the device's %d tiles "
                       "of %s)",
                       d, 100 * share, tg_an_format(TG_AN_BYTES, bytes, a, sizeof a), depth + 1,
                       tiles, tg_an_format(TG_AN_BYTES, per_tile, b, sizeof b));
            continue;
        }
        int64_t n = 1;
        while ((double)n < need)
            n *= 2;
        tg_an_note(v,
                   "time: device %d's stream copies take %.0f%% of the cycles; numIOTiles=%d would "
                   "overlap them with the compute (the rule of thumb 1.05 x %s x %d slots / %s "
                   "per tile, rounded up to a power of 2), at the cost of %d tile%s memory: %s",
                   d, 100 * share, (int)n, tg_an_format(TG_AN_BYTES, bytes, a, sizeof a), depth + 1,
                   tg_an_format(TG_AN_BYTES, per_tile, b, sizeof b), (int)n, n == 1 ? "'s" : "s'",
                   tg_an_format(TG_AN_BYTES, (double)n * per_tile, c, sizeof c));
    }
}

/* The memory insights: each device's total and largest category against its
 * limit, the tiles', and the remedies a compile quantified. */
static tg_status memory_insights(tg_profile_reader *r, tg_an_view *v)
{
    char a[32], b[32];
    static const char *const mcols[] = {"device", "largest category", "bytes", "share",
                                        "total",  "of limit"};
    static const tg_an_kind mkinds[] = {TG_AN_ID,   TG_AN_LABEL, TG_AN_BYTES,
                                        TG_AN_FRAC, TG_AN_BYTES, TG_AN_FRAC};
    tg_an_table *mt = tg_an_table_add(v, "Memory", 6, mcols, mkinds);
    double limit = 0;
    const char *limit_from = NULL;
    char limit_how[128];
    TG_TRY(device_limit(r, &limit, &limit_from, limit_how, sizeof limit_how));
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(
        r,
        "SELECT d.device, d.arena_bytes, "
        "(SELECT category FROM memory m WHERE m.device = d.device "
        " AND m.category NOT LIKE 'kernel scratch%' AND m.category != 'offloaded to host' "
        " AND m.category != '" TG_WEIGHT_CACHE_CATEGORY "' ORDER BY bytes DESC LIMIT 1), "
        "(SELECT MAX(bytes) FROM memory m WHERE m.device = d.device "
        " AND m.category NOT LIKE 'kernel scratch%' "
        " AND m.category != 'offloaded to host' "
        " AND m.category != '" TG_WEIGHT_CACHE_CATEGORY "') "
        "FROM devices d ORDER BY d.device",
        &st));
    while (sqlite3_step(st) == SQLITE_ROW) {
        int d = sqlite3_column_int(st, 0);
        double total = sqlite3_column_double(st, 1), top = sqlite3_column_double(st, 3);
        const char *cat = (const char *)sqlite3_column_text(st, 2);
        double of = limit > 0 ? total / limit : NAN;
        tg_an_row(mt, (double)d, cat ? cat : "", top, total > 0 ? top / total : 0.0, total, of);
        if (cat)
            tg_an_note(v, "memory: device %d holds %s, most of it %s (%s, %.0f%%)", d,
                       tg_an_format(TG_AN_BYTES, total, a, sizeof a), cat,
                       tg_an_format(TG_AN_BYTES, top, b, sizeof b),
                       total > 0 ? 100 * top / total : 0.0);
        if (limit > 0 && total > limit) /* over 100% is not close: it does not fit */
            tg_an_note(v,
                       "memory: device %d needs %s, %.0f%% of its %s: it does not fit (a real "
                       "device could not load this program; it ran because out-of-memory was "
                       "allowed); split it over more devices, recompute or offload",
                       d, tg_an_format(TG_AN_BYTES, total, b, sizeof b), 100 * total / limit,
                       tg_an_format(TG_AN_BYTES, limit, a, sizeof a));
        else if (limit > 0 && total >= 0.9 * limit)
            tg_an_note(v, "memory: device %d uses %.0f%% of its %s: close to the limit", d,
                       100 * total / limit, tg_an_format(TG_AN_BYTES, limit, a, sizeof a));
    }
    sqlite3_finalize(st);
    if (limit <= 0)
        tg_an_note(v, "memory: no device memory limit was set (memoryPerDevice, "
                      "--memory-per-device), so no device is near one");
    else if (limit_from)
        tg_an_note(v, "memory: the limit of a device is %s (%s)",
                   tg_an_format(TG_AN_BYTES, limit, a, sizeof a), limit_from);
    TG_TRY(tile_insights(r, v));
    return remedies(r, v);
}

/* The time insights of the first recorded host step: the stages' balance,
 * the bubble, the host streams, the cost model's predictions, other
 * processes, offloading. */
static tg_status time_insights(tg_profile_reader *r, tg_an_view *v)
{
    char a[32], b[32], c[32];
    tg_an_times t;
    TG_TRY(tg_an_times_read(r, &t));
    if (t.run < 0 || t.n_devices == 0) {
        tg_an_note(v, "time: the profile holds no execution trace");
        return offloading(r, &t, v);
    }
    int n = t.n_devices, longest = 0;
    double sum = 0, host = 0, busy_sum = 0, w = t.wall_ns > 0 ? t.wall_ns : 1;
    for (int d = 0; d < n; d++) {
        sum += t.execute[d];
        host += t.host[d];
        busy_sum += t.execute[d];
        if (t.execute[d] > t.execute[longest])
            longest = d;
    }
    double balanced = sum / n, gain = t.execute[longest] - balanced;
    double bubble = 1 - busy_sum / (n * w);
    int m = t.micro_batches > 0 ? t.micro_batches : 1;
    double theory = (double)(n - 1) / ((double)m + n - 1); /* m is the profile's: no int sum */
    const char *strategy = tg_profile_reader_meta(r, "strategy");
    bool pipelined = !strcmp(strategy, "pipelined");

    static const char *const tcols[] = {"measure", "value"};
    static const tg_an_kind nskind[] = {TG_AN_TEXT, TG_AN_NS};
    static const tg_an_kind frkind[] = {TG_AN_TEXT, TG_AN_FRAC};
    tg_an_table *tt = tg_an_table_add(v, "Time (first recorded host step)", 2, tcols, nskind);
    tg_an_table *tf = tg_an_table_add(v, "Time fractions", 2, tcols, frkind);
    tt = &v->tables[v->n_tables - 2];
    tg_an_row(tt, "wall time", t.wall_ns);
    tg_an_row(tt, "longest stage compute", t.execute[longest]);
    tg_an_row(tt, "balanced stage compute", balanced);
    tg_an_row(tt, "gain from balancing", gain);
    tg_an_row(tt, "waiting on the host (streams)", host);
    bool sim = tg_an_trace_is_simulated(r); /* the trace is a cycle model's, not measured */
    tg_an_row(tf, sim ? "bubble (cycle model)" : "bubble (measured)", bubble);
    tg_an_row(tf, "bubble (theoretical)", pipelined ? theory : NAN);
    tg_an_row(tf, "gain from balancing", t.execute[longest] > 0 ? gain / t.execute[longest] : 0.0);
    tg_an_row(tf, "host streams of wall time", host / (n * w));
    double longest_wait = 0;
    for (int d = 0; d < n; d++)
        longest_wait = t.host[d] > longest_wait ? t.host[d] : longest_wait;
    tg_an_row(tf, "host-stream waits of the host step (longest device)", longest_wait / w);

    /* devices x threads beyond the cores: the devices take turns on the
     * cores, and no split or schedule can overlap what cannot run at once */
    int threads = atoi(tg_profile_reader_meta(r, "threads_per_device"));
    int replicas = atoi(tg_profile_reader_meta(r, "replicas"));
    int cores = atoi(tg_profile_reader_meta(r, "cores_allowed"));
    int wanted = n * (threads > 0 ? threads : 1) * (replicas > 0 ? replicas : 1);
    bool shared = n > 1 && cores > 0 && wanted > cores && !tg_an_trace_is_simulated(r);
    if (shared)
        shared_cores_note(v, n, threads > 0 ? threads : 1, replicas > 0 ? replicas : 1, cores,
                          wanted);
    tg_an_note(v,
               "time: the longest stage is device %d with %s of compute; perfectly balanced "
               "stages would take %s each, %s (%.0f%%) less%s",
               longest, tg_an_format(TG_AN_NS, t.execute[longest], a, sizeof a),
               tg_an_format(TG_AN_NS, balanced, b, sizeof b),
               tg_an_format(TG_AN_NS, gain, c, sizeof c),
               t.execute[longest] > 0 ? 100 * gain / t.execute[longest] : 0.0,
               shared ? " if the devices had cores of their own (they share them, above)" : "");
    if (pipelined)
        tg_an_note(v,
                   "time: the pipeline bubble (devices not computing) is %.1f%% %s "
                   "against %.1f%% in theory for %d stages and %d micro-batches, "
                   "(N-1)/(m+N-1)",
                   100 * bubble, sim ? "in the cycle model" : "measured", 100 * theory, n, m);
    else
        tg_an_note(v,
                   "time: devices compute %.1f%% of the time (%s strategy: no pipeline, so "
                   "no theoretical bubble applies)",
                   100 * (1 - bubble), strategy[0] ? strategy : "unknown");
    host_stream_waits(r, &t, v);
    io_tiles_insight(r, &t, v);
    TG_TRY(cost_model_check(r, &t, v));
    if (!shared)
        other_processes(r, n, v);
    return offloading(r, &t, v);
}

tg_status tg_an_view_insights(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v)
{
    (void)f;
    TG_TRY(memory_insights(r, v));
    return time_insights(r, v);
}
