/* analyse/views_time.c - where the time goes: the Execution Trace view. Per
 * device, the first recorded host step split into compute, copies between
 * devices, host streams, all-reduce, gradient accumulation, waiting, and
 * idle (what remains of the wall time); the busy fraction; and per
 * micro-batch forward and backward time. */
#include "analyse/analyse.h"

#include "core/error.h"
#include "profile/reader.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

tg_status tg_an_times_read(tg_profile_reader *r, tg_an_times *t)
{
    memset(t, 0, sizeof *t);
    t->micro_batches = atoi(tg_profile_reader_meta(r, "micro_batches"));
    t->iterations = atoi(tg_profile_reader_meta(r, "iterations"));
    int64_t nd = 0, run = -1;
    TG_TRY(tg_profile_reader_int(r, "SELECT COUNT(*) FROM devices", 0, &nd));
    t->n_devices = nd < TG_AN_MAX_DEVICES ? (int)nd : TG_AN_MAX_DEVICES;
    TG_TRY(tg_profile_reader_int(r, "SELECT COALESCE(MIN(run), -1) FROM trace", -1, &run));
    t->run = (int)run;
    if (run < 0)
        return TG_OK;
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT (SELECT MAX(end_ns) - MIN(start_ns) FROM trace "
                         "WHERE run = ?1 AND replica = 0)",
                         &st));
    sqlite3_bind_int(st, 1, t->run);
    if (sqlite3_step(st) == SQLITE_ROW)
        t->wall_ns = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    TG_TRY(tg_an_prepare(r,
                         "SELECT device, kind, SUM(end_ns - start_ns) FROM trace "
                         "WHERE run = ?1 AND replica = 0 GROUP BY device, kind",
                         &st));
    sqlite3_bind_int(st, 1, t->run);
    while (sqlite3_step(st) == SQLITE_ROW) {
        int d = sqlite3_column_int(st, 0);
        const char *k = (const char *)sqlite3_column_text(st, 1);
        double ns = sqlite3_column_double(st, 2);
        if (d < 0 || d >= t->n_devices || !k)
            continue;
        if (!strcmp(k, "execute"))
            t->execute[d] += ns;
        else if (strstr(k, "streaming memory"))
            continue; /* within a pass's "execute", or beside it on the I/O thread */
        else if (!strncmp(k, "copy", 4))
            t->copy[d] += ns;
        else if (!strncmp(k, "stream", 6))
            t->host[d] += ns;
        else if (!strncmp(k, "I/O tiles", 9))
            t->io[d] += ns;
        else if (!strcmp(k, "all-reduce") || !strcmp(k, "reduce-scatter"))
            t->all_reduce[d] += ns;
        else if (!strcmp(k, "exchange with instances"))
            t->instances[d] += ns; /* within the all-reduce: not counted twice */
        else if (!strcmp(k, "gradient bucket to instances"))
            continue; /* in flight while the backward computes: not the device's time */
        else if (!strncmp(k, "accumulate", 10))
            t->accumulate[d] += ns;
        else if (!strncmp(k, "wait", 4))
            t->wait[d] += ns;
        else
            t->other[d] += ns;
    }
    sqlite3_finalize(st);
    return TG_OK;
}

static double idle_of(const tg_an_times *t, int d)
{
    double idle = t->wall_ns - t->execute[d] - t->copy[d] - t->host[d] - t->all_reduce[d] -
                  t->accumulate[d] - t->wait[d] - t->other[d];
    return idle > 0 ? idle : 0;
}

/* Bytes moved in the host step, as the reference's execution trace gives
 * them per stream and per inter-device copy: a copy is recorded on the
 * sending device (Tx) with the receiver as its peer, so the receiver's Rx
 * rows are the same events seen from the other side. Time includes waiting
 * for a free slot, so bytes / time is a lower bound of the link's rate. */
static tg_status transfers(tg_profile_reader *r, const tg_an_filter *f, int run, tg_an_view *v)
{
    static const char *const cols[] = {"device", "transfer", "peer", "count",
                                       "bytes",  "time",     "GB/s"};
    static const tg_an_kind kinds[] = {TG_AN_ID,    TG_AN_TEXT, TG_AN_ID, TG_AN_COUNT,
                                       TG_AN_BYTES, TG_AN_NS,   TG_AN_NUM};
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(
        r,
        "SELECT device, CASE kind WHEN 'stream from host' THEN 'stream from host (Rx)' "
        " WHEN 'stream to host' THEN 'stream to host (Tx)' ELSE 'copy to device (Tx)' END, "
        " peer, COUNT(*), SUM(bytes), SUM(end_ns - start_ns) FROM trace "
        " WHERE run = ?1 AND replica = 0 AND (?2 < 0 OR device = ?2) "
        " AND kind IN ('stream from host', 'stream to host', 'copy to device') "
        " GROUP BY device, kind, peer "
        "UNION ALL "
        "SELECT peer, 'copy from device (Rx)', device, COUNT(*), SUM(bytes), "
        " SUM(end_ns - start_ns) FROM trace WHERE run = ?1 AND replica = 0 "
        " AND kind = 'copy to device' AND peer >= 0 AND (?2 < 0 OR peer = ?2) "
        " GROUP BY peer, device ORDER BY 1, 2, 3",
        &st));
    sqlite3_bind_int(st, 1, run);
    sqlite3_bind_int(st, 2, f->device);
    tg_an_table *t = NULL;
    double total = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (!t)
            t = tg_an_table_add(v, "Transfers, first recorded host step (replica 0)", 7, cols,
                                kinds);
        double bytes = sqlite3_column_double(st, 4), ns = sqlite3_column_double(st, 5);
        int peer = sqlite3_column_int(st, 2);
        tg_an_row(t, (double)sqlite3_column_int(st, 0), (const char *)sqlite3_column_text(st, 1),
                  peer >= 0 ? (double)peer : NAN, sqlite3_column_double(st, 3), bytes, ns,
                  ns > 0 ? bytes / ns : NAN);
        total += bytes;
    }
    sqlite3_finalize(st);
    char b[32];
    if (t)
        tg_an_note(v,
                   "transfers: %s moved (Rx rows of copies are the Tx rows seen from the "
                   "receiver, so copies count twice in this sum); GB/s = bytes / time, time "
                   "including any wait for a free slot",
                   tg_an_format(TG_AN_BYTES, total, b, sizeof b));
    else
        tg_an_note(v, "transfers: the trace records no host streams or inter-device copies%s", "");
    return TG_OK;
}

/* Repeated executions grouped, as PopVision's execution trace folds a
 * program step repeated per micro-batch and device iteration: one row per
 * device, step kind and phase with its count and time (total, mean, min,
 * max), in the order the device first ran it. --no-group lists them all. */
static tg_status repeated(tg_profile_reader *r, const tg_an_filter *f, int run, tg_an_view *v)
{
    static const char *const cols[] = {"device", "step", "phase", "count", "total",
                                       "mean",   "min",  "max",   "bytes"};
    static const tg_an_kind kinds[] = {TG_AN_ID, TG_AN_TEXT, TG_AN_TEXT, TG_AN_COUNT, TG_AN_NS,
                                       TG_AN_NS, TG_AN_NS,   TG_AN_NS,   TG_AN_BYTES};
    tg_an_table *t = tg_an_table_add(
        v, "Repeated executions, grouped (first recorded host step, replica 0)", 9, cols, kinds);
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT device, kind, phase, COUNT(*), SUM(end_ns - start_ns), "
                         "AVG(end_ns - start_ns), MIN(end_ns - start_ns), MAX(end_ns - start_ns), "
                         "SUM(bytes), MIN(start_ns) AS first FROM trace WHERE run = ?1 AND "
                         "replica = 0 AND (?2 < 0 OR device = ?2) GROUP BY device, kind, phase "
                         "ORDER BY device, first",
                         &st));
    sqlite3_bind_int(st, 1, run);
    sqlite3_bind_int(st, 2, f->device);
    int64_t n = 0, groups = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *kind = (const char *)sqlite3_column_text(st, 1);
        const char *phase = (const char *)sqlite3_column_text(st, 2);
        tg_an_row(t, sqlite3_column_double(st, 0), kind ? kind : "?", phase ? phase : "?",
                  sqlite3_column_double(st, 3), sqlite3_column_double(st, 4),
                  sqlite3_column_double(st, 5), sqlite3_column_double(st, 6),
                  sqlite3_column_double(st, 7), sqlite3_column_double(st, 8));
        n += sqlite3_column_int64(st, 3);
        groups++;
    }
    sqlite3_finalize(st);
    tg_an_note(v,
               "executions: %lld in %lld groups (a step repeated per micro-batch and device "
               "iteration is one row); --no-group lists each",
               (long long)n, (long long)groups);
    return TG_OK;
}

/* Every execution of the first recorded host step (replica 0) in time order. */
enum { MAX_EXECUTIONS = 100000 };
static tg_status executions(tg_profile_reader *r, const tg_an_filter *f, int run, tg_an_view *v)
{
    static const char *const cols[] = {"device",      "step",  "phase",    "iteration",
                                       "micro-batch", "start", "duration", "bytes"};
    static const tg_an_kind kinds[] = {TG_AN_ID, TG_AN_TEXT, TG_AN_TEXT, TG_AN_ID,
                                       TG_AN_ID, TG_AN_NS,   TG_AN_NS,   TG_AN_BYTES};
    tg_an_table *t =
        tg_an_table_add(v, "Executions (first recorded host step, replica 0)", 8, cols, kinds);
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT device, kind, phase, iteration, micro_batch, start_ns - (SELECT "
                         "MIN(start_ns) FROM trace WHERE run = ?1 AND replica = 0), "
                         "end_ns - start_ns, bytes FROM trace WHERE run = ?1 AND replica = 0 "
                         "AND (?2 < 0 OR device = ?2) ORDER BY device, start_ns, rowid",
                         &st));
    sqlite3_bind_int(st, 1, run);
    sqlite3_bind_int(st, 2, f->device);
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW && n++ < MAX_EXECUTIONS) {
        const char *kind = (const char *)sqlite3_column_text(st, 1);
        const char *phase = (const char *)sqlite3_column_text(st, 2);
        tg_an_row(t, sqlite3_column_double(st, 0), kind ? kind : "?", phase ? phase : "?",
                  sqlite3_column_double(st, 3), sqlite3_column_double(st, 4),
                  sqlite3_column_double(st, 5), sqlite3_column_double(st, 6),
                  sqlite3_column_double(st, 7));
    }
    sqlite3_finalize(st);
    if (n > MAX_EXECUTIONS)
        tg_an_note(v, "executions: the first %d are listed; use --device to see the rest",
                   MAX_EXECUTIONS);
    return TG_OK;
}

bool tg_an_trace_is_simulated(tg_profile_reader *r)
{
    return strncmp(tg_profile_reader_meta(r, "trace_clock"), "cycles", 6) == 0;
}

/* The cost model's timeline (predicted_trace, written at compile time by
 * the schedule simulator) beside the measured host step: per device the
 * compute and the busy share. One weight update is predicted; a host step
 * runs `iterations` of them. Older profiles have no such table. */
static tg_status predicted(tg_profile_reader *r, const tg_an_filter *f, const tg_an_times *t,
                           tg_an_view *v)
{
    sqlite3_stmt *st;
    TG_TRY(
        tg_an_prepare(r, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'predicted_trace'", &st));
    bool has = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) > 0;
    sqlite3_finalize(st);
    if (!has)
        return TG_OK;
    double its = atof(tg_profile_reader_meta(r, "iterations"));
    its = its >= 1 ? its : 1;
    TG_TRY(tg_an_prepare(r,
                         "SELECT device, SUM(end_ns - start_ns), (SELECT MAX(end_ns) FROM "
                         "predicted_trace) FROM predicted_trace WHERE ?1 < 0 OR device = ?1 "
                         "GROUP BY device ORDER BY device",
                         &st));
    sqlite3_bind_int(st, 1, f->device);
    /* on a tiled target the trace is the cycle model's: two models side by
     * side, each named for what it is, and nothing called measured */
    bool sim = tg_an_trace_is_simulated(r);
    static const char *const cols[] = {"device",           "predicted compute",
                                       "measured compute", "predicted / measured",
                                       "predicted busy",   "measured busy"};
    static const char *const sim_cols[] = {
        "device",         "predicted compute", "cycle model compute", "predicted / cycle model",
        "predicted busy", "cycle model busy"};
    static const tg_an_kind kinds[] = {TG_AN_ID,  TG_AN_NS,   TG_AN_NS,
                                       TG_AN_NUM, TG_AN_FRAC, TG_AN_FRAC};
    tg_an_table *tt = tg_an_table_add(
        v,
        sim ? "Predicted (cost model) beside the cycle model (simulated, not measured), first "
              "recorded host step"
            : "Predicted (cost model) beside measured, first recorded host step",
        6, sim ? sim_cols : cols, kinds);
    if (!tt) {
        sqlite3_finalize(st);
        return tg_error(TG_ERR_NOMEM, "out of memory building the trace view");
    }
    double step = 0, w = t->wall_ns > 0 ? t->wall_ns : 1;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int d = sqlite3_column_int(st, 0);
        double pc = sqlite3_column_double(st, 1) * its;
        step = sqlite3_column_double(st, 2) * its;
        double measured = d < t->n_devices ? t->execute[d] : 0;
        tg_an_row(tt, (double)d, pc, measured, measured > 0 ? pc / measured : 0.0,
                  step > 0 ? pc / step : 0.0, measured / w);
    }
    sqlite3_finalize(st);
    char a[32], b[32];
    if (step > 0 && sim)
        tg_an_note(v,
                   "predicted host step %s (the schedule simulated with the cost model's stage "
                   "times) against %s in the cycle model's timeline: two models of the %s, "
                   "neither measured; this host's own time running the program is not the "
                   "target's and is not compared",
                   tg_an_format(TG_AN_NS, step, a, sizeof a),
                   tg_an_format(TG_AN_NS, t->wall_ns, b, sizeof b),
                   tg_profile_reader_meta(r, "target"));
    else if (step > 0)
        tg_an_note(v,
                   "predicted host step %s (the schedule simulated with the cost model's stage "
                   "times, docs/multi-device.md) against %s measured; the simulator's target is "
                   "each device's compute within 15%% of the measured on an idle machine",
                   tg_an_format(TG_AN_NS, step, a, sizeof a),
                   tg_an_format(TG_AN_NS, t->wall_ns, b, sizeof b));
    return TG_OK;
}

tg_status tg_an_view_trace(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v)
{
    tg_an_times t;
    TG_TRY(tg_an_times_read(r, &t));
    if (t.run < 0) {
        tg_an_note(v,
                   "%s holds no execution trace (was the program run with autoReport "
                   "execution profiling on?)",
                   tg_profile_reader_path(r));
        return TG_OK;
    }
    char wb[32];
    tg_an_note(v, "host step %d, replica 0: wall time %s", t.run,
               tg_an_format(TG_AN_NS, t.wall_ns, wb, sizeof wb));
    static const char *const cols[] = {"device",       "compute",    "copies",
                                       "host streams", "all-reduce", "accumulate",
                                       "waiting",      "idle",       "busy"};
    static const tg_an_kind kinds[] = {TG_AN_ID, TG_AN_NS, TG_AN_NS, TG_AN_NS,  TG_AN_NS,
                                       TG_AN_NS, TG_AN_NS, TG_AN_NS, TG_AN_FRAC};
    tg_an_table *tt =
        tg_an_table_add(v, "Time per device, first recorded host step", 9, cols, kinds);
    tg_an_table *tp = tg_an_table_add(v, "Proportions of the wall time", 9, cols, kinds);
    tt = &v->tables[v->n_tables - 2];
    for (int i = 1; i < 8; i++)
        tp->kinds[i] = TG_AN_FRAC;
    double w = t.wall_ns > 0 ? t.wall_ns : 1;
    for (int d = 0; d < t.n_devices; d++) {
        if (f->device >= 0 && d != f->device)
            continue;
        double idle = idle_of(&t, d), busy = t.execute[d] / w;
        tg_an_row(tt, (double)d, t.execute[d], t.copy[d], t.host[d], t.all_reduce[d],
                  t.accumulate[d], t.wait[d], idle, busy);
        tg_an_row(tp, (double)d, t.execute[d] / w, t.copy[d] / w, t.host[d] / w,
                  t.all_reduce[d] / w, t.accumulate[d] / w, t.wait[d] / w, idle / w, busy);
    }

    /* per micro-batch: execute time summed over devices, averaged over iterations */
    static const char *const mcols[] = {"micro-batch", "forward", "backward", "span"};
    static const tg_an_kind mkinds[] = {TG_AN_ID, TG_AN_NS, TG_AN_NS, TG_AN_NS};
    tg_an_table *tm = tg_an_table_add(v,
                                      "Per micro-batch (compute summed over devices, mean "
                                      "over device iterations)",
                                      4, mcols, mkinds);
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT micro_batch, "
                         "SUM(CASE WHEN phase = 'forward' THEN end_ns - start_ns ELSE 0 END), "
                         "SUM(CASE WHEN phase = 'backward' THEN end_ns - start_ns ELSE 0 END), "
                         "COUNT(DISTINCT iteration) FROM trace "
                         "WHERE run = ?1 AND replica = 0 AND kind = 'execute' "
                         "AND micro_batch >= 0 AND (?2 < 0 OR device = ?2) "
                         "GROUP BY micro_batch ORDER BY micro_batch",
                         &st));
    sqlite3_bind_int(st, 1, t.run);
    sqlite3_bind_int(st, 2, f->device);
    sqlite3_stmt *span;
    tg_status s = tg_an_prepare(r,
                                "SELECT AVG(e - b) FROM (SELECT iteration, MIN(start_ns) AS b, "
                                "MAX(end_ns) AS e FROM trace WHERE run = ?1 AND replica = 0 "
                                "AND kind = 'execute' AND micro_batch = ?2 "
                                "AND (?3 < 0 OR device = ?3) GROUP BY iteration)",
                                &span);
    if (s != TG_OK) {
        sqlite3_finalize(st);
        return s;
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
        int mb = sqlite3_column_int(st, 0);
        double its = sqlite3_column_double(st, 3);
        if (its < 1)
            its = 1;
        sqlite3_reset(span);
        sqlite3_bind_int(span, 1, t.run);
        sqlite3_bind_int(span, 2, mb);
        sqlite3_bind_int(span, 3, f->device);
        double sp = sqlite3_step(span) == SQLITE_ROW ? sqlite3_column_double(span, 0) : 0;
        tg_an_row(tm, (double)mb, sqlite3_column_double(st, 1) / its,
                  sqlite3_column_double(st, 2) / its, sp);
    }
    sqlite3_finalize(span);
    sqlite3_finalize(st);
    tg_an_note(v, "busy = compute / wall time; idle = wall time minus every recorded event; "
                  "span = first start to last end of a micro-batch's compute across devices");
    TG_TRY(predicted(r, f, &t, v));
    TG_TRY(transfers(r, f, t.run, v));
    TG_TRY(f->no_group ? executions(r, f, t.run, v) : repeated(r, f, t.run, v));
    return tg_an_view_trace_tiles(r, f, v);
}
