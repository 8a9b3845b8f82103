/* analyse/views_pipeline.c - where a pipelined host step goes (the pipeline
 * view): per device, the measured host step split into parts that add up
 * to it, the cost model's prediction beside each, and how the waits read.
 *
 * A device's time line in one recorded host step (replica 0) is walked in
 * order; every instant of the host step lands in exactly one part:
 *   compute        forward and backward passes ("execute")
 *   update         the update pass, all-reduce, reduce-scatter, all-gather
 *   copies         inter-device copies this device sends (the memcpy only)
 *   host streams   micro-batch data from and to the host
 *   accumulate     gradients into the accumulators
 *   waiting for input      data from the other stage not there yet
 *   waiting for free slot  the receiver has not freed the slot (back-pressure)
 *   fill           before the device's first compute (waits and gaps)
 *   drain          after its last forward/backward compute, outside the
 *                  parts above (the barrier before the update, then after
 *                  its update until the last device ends)
 *   untracked      gaps between recorded events inside the compute window
 *                  (the device loop itself, a thread off the CPU)
 *   host           the host step outside every device's events (handing
 *                  the step to the device threads and waiting for them)
 * Events that overlap an earlier one on the same device (a gradient
 * bucket, the I/O thread's copies, the exchange inside an all-reduce) are
 * clipped, so nothing is counted twice and the parts sum to the step.
 * The view averages the recorded host steps after the first (cold caches,
 * threads starting) when there are several.
 */
#include "analyse/analyse.h"

#include "core/error.h"
#include "profile/profile.h"
#include "profile/reader.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
    P_COMPUTE,
    P_UPDATE,
    P_COPY,
    P_STREAMS,
    P_ACCUMULATE,
    P_WAIT_INPUT,
    P_WAIT_SLOT,
    P_FILL,
    P_DRAIN,
    P_UNTRACKED,
    P_HOST,
    P_COUNT
} part;

static const char *const part_names[P_COUNT] = {"compute",
                                                "update",
                                                "copies to the next stage",
                                                "host streams",
                                                "accumulate",
                                                "waiting for input",
                                                "waiting for free slot",
                                                "fill (before first compute)",
                                                "drain (after last compute)",
                                                "untracked gaps",
                                                "host (outside the devices)"};

typedef struct {
    int n_devices, runs;
    bool skipped_first;                    /* the first recorded host step left out */
    double ns[TG_AN_MAX_DEVICES][P_COUNT]; /* summed over the runs used */
    double step_ns;                        /* the host steps, summed */
} breakdown;

/* The part of a non-wait event kind, or -1 for kinds that run beside the
 * device's time line (clipped anyway). */
static int part_of_kind(const char *k, const char *phase)
{
    if (!strcmp(k, "execute"))
        return phase && !strcmp(phase, "update") ? P_UPDATE : P_COMPUTE;
    if (!strcmp(k, "all-reduce") || !strcmp(k, "reduce-scatter") || !strcmp(k, "all-gather"))
        return P_UPDATE;
    if (!strcmp(k, "copy to device"))
        return P_COPY;
    if (!strcmp(k, "stream from host") || !strcmp(k, "stream to host") ||
        !strcmp(k, "wait for streaming memory") || strstr(k, "streaming memory"))
        return P_STREAMS;
    if (!strncmp(k, "accumulate", 10))
        return P_ACCUMULATE;
    if (!strcmp(k, "wait for free slot"))
        return P_WAIT_SLOT;
    if (!strcmp(k, "wait for device"))
        return P_WAIT_INPUT;
    return -1;
}

/* The first start and last end of run `run`'s events (replica 0) that
 * `where` selects, ?2 being device d; NaN when there are none. */
static tg_status span(tg_profile_reader *r, const char *where, int run, int d, double *first,
                      double *last)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT MIN(start_ns), MAX(end_ns) FROM trace WHERE run = ?1 AND replica = 0 AND %s",
             where);
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r, sql, &st));
    sqlite3_bind_int(st, 1, run);
    sqlite3_bind_int(st, 2, d);
    *first = *last = NAN;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        *first = sqlite3_column_double(st, 0);
        *last = sqlite3_column_double(st, 1);
    }
    sqlite3_finalize(st);
    return TG_OK;
}

/* Time [a, b) of device d outside any event: fill before the first
 * compute, drain after the last, untracked between. */
static void add_gap(breakdown *b, int d, double a, double bnd, double first, double last)
{
    if (bnd <= a)
        return;
    double fill = fmin(bnd, first) - a, drain = bnd - fmax(a, last);
    fill = fill > 0 ? fill : 0;
    drain = drain > 0 ? drain : 0;
    double mid = bnd - a - fill - drain;
    b->ns[d][P_FILL] += fill;
    b->ns[d][P_DRAIN] += drain;
    b->ns[d][P_UNTRACKED] += mid > 0 ? mid : 0;
}

/* One device's events of one run, from `begin` to `end` (the run's span). */
static tg_status walk_device(tg_profile_reader *r, int run, int d, double begin, double end,
                             breakdown *b)
{
    double first, last; /* device d's first and last forward or backward compute */
    TG_TRY(
        span(r, "device = ?2 AND kind = 'execute' AND phase != 'update'", run, d, &first, &last));
    if (isnan(first)) /* no compute on this device: all of it is bubble */
        first = last = end;
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT kind, phase, start_ns, end_ns, peer FROM trace WHERE run = ?1 "
                         "AND replica = 0 AND device = ?2 ORDER BY start_ns, rowid",
                         &st));
    sqlite3_bind_int(st, 1, run);
    sqlite3_bind_int(st, 2, d);
    double at = begin; /* covered until */
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(st, 0);
        const char *ph = (const char *)sqlite3_column_text(st, 1);
        double s = sqlite3_column_double(st, 2), e = sqlite3_column_double(st, 3);
        int pt = k ? part_of_kind(k, ph) : -1;
        if (sqlite3_column_int(st, 4) == TG_EVENT_PEER_IO_THREAD)
            pt = -1; /* the device's I/O thread, beside its compute */
        if (pt < 0 || e <= at)
            continue; /* beside the time line, or within an earlier event */
        s = s > at ? s : at;
        add_gap(b, d, at, s, first, last);
        /* a wait before the first compute is the fill, after the last the drain */
        if ((pt == P_WAIT_INPUT || pt == P_WAIT_SLOT) && e <= first)
            pt = P_FILL;
        else if ((pt == P_WAIT_INPUT || pt == P_WAIT_SLOT) && s >= last)
            pt = P_DRAIN;
        b->ns[d][pt] += e - s;
        at = e;
    }
    sqlite3_finalize(st);
    add_gap(b, d, at, end, first, last);
    return TG_OK;
}

/* The host step time the session counted for run `run`; NaN when absent. */
static double host_step_ns(tg_profile_reader *r, int run)
{
    sqlite3_stmt *st;
    double ns = NAN;
    if (!tg_an_has_table(r, "counters") ||
        tg_an_prepare(r,
                      "SELECT value FROM counters WHERE step = ?1 AND name = 'host step time (ns)'",
                      &st) != TG_OK)
        return NAN;
    sqlite3_bind_int(st, 1, run);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
        ns = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return ns;
}

static tg_status add_run(tg_profile_reader *r, int run, bool simulated, breakdown *b)
{
    double begin, end;
    TG_TRY(span(r, "?2 = ?2", run, 0, &begin, &end));
    if (isnan(begin))
        return TG_OK;
    /* a cycle model's time line is not the host's: no host part then */
    double step = simulated ? NAN : host_step_ns(r, run);
    if (isnan(step) || step < end - begin)
        step = end - begin;
    for (int d = 0; d < b->n_devices; d++) {
        TG_TRY(walk_device(r, run, d, begin, end, b));
        b->ns[d][P_HOST] += step - (end - begin);
    }
    b->step_ns += step;
    b->runs++;
    return TG_OK;
}

/* The cost model's parts of device d (predicted_trace): compute, update,
 * fill, drain and the waits between, and the predicted step. */
typedef struct {
    double part[TG_AN_MAX_DEVICES][P_COUNT];
    double step;
} prediction;

static tg_status predict(tg_profile_reader *r, int n_devices, prediction *pr)
{
    for (int d = 0; d < TG_AN_MAX_DEVICES; d++)
        for (int k = 0; k < P_COUNT; k++)
            pr->part[d][k] = NAN;
    pr->step = NAN;
    if (!tg_an_has_table(r, "predicted_trace"))
        return TG_OK;
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT device, SUM(CASE WHEN phase != 'update' THEN end_ns - start_ns "
                         "ELSE 0 END), SUM(CASE WHEN phase = 'update' THEN end_ns - start_ns ELSE "
                         "0 END), MIN(start_ns), MAX(CASE WHEN phase != 'update' THEN end_ns END), "
                         "(SELECT MIN(start_ns) FROM predicted_trace), (SELECT MAX(end_ns) FROM "
                         "predicted_trace) FROM predicted_trace GROUP BY device",
                         &st));
    while (sqlite3_step(st) == SQLITE_ROW) {
        int d = sqlite3_column_int(st, 0);
        if (d < 0 || d >= n_devices)
            continue;
        double compute = sqlite3_column_double(st, 1), update = sqlite3_column_double(st, 2);
        double first = sqlite3_column_double(st, 3), last = sqlite3_column_double(st, 4);
        double begin = sqlite3_column_double(st, 5), end = sqlite3_column_double(st, 6);
        double *p = pr->part[d];
        p[P_COMPUTE] = compute;
        p[P_UPDATE] = update;
        p[P_FILL] = first - begin;
        p[P_DRAIN] = end - last - update;
        p[P_WAIT_INPUT] = (end - begin) - compute - update - p[P_FILL] - p[P_DRAIN];
        pr->step = end - begin;
    }
    sqlite3_finalize(st);
    return TG_OK;
}

static void breakdown_table(tg_an_view *v, const breakdown *b, const prediction *pr, int device)
{
    static const char *const cols[] = {"device", "part", "time", "share", "predicted"};
    static const tg_an_kind kinds[] = {TG_AN_ID, TG_AN_TEXT, TG_AN_NS, TG_AN_FRAC, TG_AN_NS};
    char title[160];
    snprintf(title, sizeof title,
             "Where a host step goes, per device (mean of %d recorded host step%s%s, replica 0)",
             b->runs, b->runs == 1 ? "" : "s",
             b->skipped_first ? " after the first, cold one" : "");
    tg_an_table *t = tg_an_table_add(v, title, 5, cols, kinds);
    double step = b->step_ns / b->runs;
    for (int d = 0; d < b->n_devices; d++) {
        if (device >= 0 && d != device)
            continue;
        double sum = 0;
        for (int k = 0; k < P_COUNT; k++) {
            double ns = b->ns[d][k] / b->runs;
            sum += ns;
            tg_an_row(t, (double)d, part_names[k], ns, step > 0 ? ns / step : NAN, pr->part[d][k]);
        }
        tg_an_row(t, (double)d, "host step (sum of the parts)", sum, step > 0 ? sum / step : NAN,
                  pr->step);
    }
}

/* How the waits read: the measured bubble (fill and drain) against the
 * schedule's, the imbalance (the longest stage's compute minus this
 * one's), and what neither explains (hand-off latency, the machine). */
static void waits_table(tg_an_view *v, const breakdown *b, int micro_batches, int device)
{
    static const char *const cols[] = {"device",    "fill + drain", "schedule's bubble",
                                       "imbalance", "other waits",  "untracked"};
    static const tg_an_kind kinds[] = {TG_AN_ID, TG_AN_NS, TG_AN_NS, TG_AN_NS, TG_AN_NS, TG_AN_NS};
    tg_an_table *t = tg_an_table_add(v, "Reading the waits (mean per host step)", 6, cols, kinds);
    double longest = 0;
    for (int d = 0; d < b->n_devices; d++)
        longest = fmax(longest, b->ns[d][P_COMPUTE] / b->runs);
    int n = b->n_devices;
    for (int d = 0; d < n; d++) {
        if (device >= 0 && d != device)
            continue;
        const double *x = b->ns[d];
        double compute = x[P_COMPUTE] / b->runs;
        /* fill-drain theory: (N-1) stage-times of a micro-batch each end */
        double bubble = micro_batches > 0 ? longest * (n - 1) / micro_batches : NAN;
        double steady = (x[P_WAIT_INPUT] + x[P_WAIT_SLOT]) / b->runs;
        double imbalance = fmin(longest - compute, steady);
        tg_an_row(t, (double)d, (x[P_FILL] + x[P_DRAIN]) / b->runs, bubble, imbalance,
                  steady - imbalance, x[P_UNTRACKED] / b->runs);
    }
}

tg_status tg_an_view_pipeline(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v)
{
    breakdown b;
    memset(&b, 0, sizeof b);
    int64_t nd = 0, first = -1, last = -1;
    TG_TRY(tg_profile_reader_int(r, "SELECT COUNT(*) FROM devices", 0, &nd));
    TG_TRY(tg_profile_reader_int(r, "SELECT COALESCE(MIN(run), -1) FROM trace", -1, &first));
    TG_TRY(tg_profile_reader_int(r, "SELECT COALESCE(MAX(run), -1) FROM trace", -1, &last));
    b.n_devices = nd < TG_AN_MAX_DEVICES ? (int)nd : TG_AN_MAX_DEVICES;
    if (first < 0) {
        tg_an_note(v,
                   "pipeline: the profile records no executed steps; train with --profile "
                   "(autoReport.all) to record %s",
                   "them");
        return TG_OK;
    }
    bool simulated = tg_an_trace_is_simulated(r);
    /* the first host step starts the threads and warms the caches */
    b.skipped_first = last > first;
    for (int64_t run = b.skipped_first ? first + 1 : first; run <= last; run++)
        TG_TRY(add_run(r, (int)run, simulated, &b));
    prediction pr;
    TG_TRY(predict(r, b.n_devices, &pr));
    breakdown_table(v, &b, &pr, f->device);
    int m = atoi(tg_analyse_meta(r, "micro_batches")), its = atoi(tg_analyse_meta(r, "iterations"));
    m *= its > 0 ? its : 1; /* micro-batches per host step */
    waits_table(v, &b, m, f->device);
    char strategy[32], schedule[32];
    snprintf(strategy, sizeof strategy, "%s", tg_analyse_meta(r, "strategy"));
    snprintf(schedule, sizeof schedule, "%s", tg_analyse_meta(r, "schedule"));
    double step = b.step_ns / b.runs, untracked = 0;
    for (int d = 0; d < b.n_devices; d++)
        untracked = fmax(untracked, b.ns[d][P_UNTRACKED] / b.runs);
    char s1[32], s2[32];
    tg_an_note(v,
               "pipeline: host step %s measured (%s strategy, %s schedule, %d devices, %d "
               "micro-batches), %s predicted by the cost model; the named parts cover at least "
               "%.1f%% of it on every device (the rest is untracked gaps)",
               tg_an_format(TG_AN_NS, step, s1, sizeof s1), strategy, schedule, b.n_devices, m,
               tg_an_format(TG_AN_NS, pr.step, s2, sizeof s2),
               step > 0 ? 100 * (1 - untracked / step) : 0.0);
    /* the split the cost model chose, cuts inside a block (BLOCK:OP) included */
    const char *chosen = tg_analyse_meta(r, "stages_auto");
    if (chosen && *chosen)
        tg_an_note(v, "pipeline: the split --%s auto chose: \"%s\"%s%s",
                   strchr(chosen, '|') ? "stages" : "split", chosen,
                   strchr(chosen, ':') ? " (BLOCK:OP: a stage begins inside the block, at that op)"
                                       : "",
                   strchr(chosen, '<')
                       ? " (<X: the stage before runs X's first convolution's input gradient, "
                         "its weight copied there with each micro-batch's gradient: in its "
                         "compute and copies above, and in the prediction)"
                       : "");
    double sum = 0, longest = 0;
    for (int d = 0; d < b.n_devices; d++) {
        sum += b.ns[d][P_COMPUTE] / b.runs;
        longest = fmax(longest, b.ns[d][P_COMPUTE] / b.runs);
    }
    /* the split's own limit: the longest stage plus the fill-drain bubble,
     * against the stages' compute one after another (a sharded run) */
    if (longest > 0 && m > 0 && b.n_devices > 1)
        tg_an_note(v,
                   "pipeline: with this split the step cannot be shorter than the longest "
                   "stage's compute plus the bubble, %s x (1 + %d/%d); the stages' compute "
                   "one after another is %s, so this split gains at most %.2fx over running "
                   "them in turn (%.2fx with perfectly balanced stages)",
                   tg_an_format(TG_AN_NS, longest, s1, sizeof s1), b.n_devices - 1, m,
                   tg_an_format(TG_AN_NS, sum, s2, sizeof s2),
                   sum / (longest * (1 + (double)(b.n_devices - 1) / m)),
                   b.n_devices / (1 + (double)(b.n_devices - 1) / m));
    tg_an_note(v,
               "pipeline: fill and drain are the bubble a pipeline of N stages has at each "
               "end; the schedule's bubble is (N-1) x the longest stage's time per "
               "micro-batch; imbalance is the longest stage's compute minus this one's; "
               "other waits are hand-off latency or a thread off the CPU%s",
               simulated ? " (this trace is the target's cycle model, not measured)" : "");
    return TG_OK;
}
