/* analyse/views_insights.c - what a person should look at first, for memory
 * and for time: the largest category per device and devices near their
 * memory limit; the longest pipeline stage and what balancing would gain;
 * the pipeline bubble measured against (N-1)/(m+N-1); time spent waiting on
 * the host; offloading traffic. Numbers go in tables (so reports compare),
 * the sentences in notes. */
#include "analyse/analyse.h"

#include "core/error.h"
#include "profile/reader.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

tg_status tg_an_view_insights(tg_profile_reader *r, const tg_an_filter *f, tg_an_view *v)
{
    (void)f;
    char a[32], b[32], c[32];
    /* ---- memory ---- */
    static const char *const mcols[] = {"device", "largest category", "bytes", "share", "total",
                                        "of limit"};
    static const tg_an_kind mkinds[] = {TG_AN_ID,   TG_AN_LABEL, TG_AN_BYTES,
                                        TG_AN_FRAC, TG_AN_BYTES, TG_AN_FRAC};
    tg_an_table *mt = tg_an_table_add(v, "Memory", 6, mcols, mkinds);
    double limit = atof(tg_profile_reader_meta(r, "memory_per_device"));
    sqlite3_stmt *st;
    TG_TRY(tg_an_prepare(r,
                         "SELECT d.device, d.arena_bytes, "
                         "(SELECT category FROM memory m WHERE m.device = d.device "
                         " AND m.category NOT LIKE 'kernel scratch%' ORDER BY bytes DESC LIMIT 1), "
                         "(SELECT MAX(bytes) FROM memory m WHERE m.device = d.device "
                         " AND m.category NOT LIKE 'kernel scratch%') "
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
        if (limit > 0 && total >= 0.9 * limit)
            tg_an_note(v, "memory: device %d uses %.0f%% of its %s: close to the limit", d,
                       100 * total / limit, tg_an_format(TG_AN_BYTES, limit, a, sizeof a));
    }
    sqlite3_finalize(st);
    if (limit <= 0)
        tg_an_note(v, "memory: no memory_per_device limit was set, so no device is near one");

    /* ---- time ---- */
    tg_an_times t;
    TG_TRY(tg_an_times_read(r, &t));
    if (t.run < 0 || t.n_devices == 0) {
        tg_an_note(v, "time: the profile holds no execution trace");
        return TG_OK;
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
    tg_an_row(tf, "bubble (measured)", bubble);
    tg_an_row(tf, "bubble (theoretical)", pipelined ? theory : NAN);
    tg_an_row(tf, "gain from balancing", t.execute[longest] > 0 ? gain / t.execute[longest] : 0.0);
    tg_an_row(tf, "host streams of wall time", host / (n * w));

    tg_an_note(v, "time: the longest stage is device %d with %s of compute; perfectly balanced "
                  "stages would take %s each, %s (%.0f%%) less",
               longest, tg_an_format(TG_AN_NS, t.execute[longest], a, sizeof a),
               tg_an_format(TG_AN_NS, balanced, b, sizeof b),
               tg_an_format(TG_AN_NS, gain, c, sizeof c),
               t.execute[longest] > 0 ? 100 * gain / t.execute[longest] : 0.0);
    if (pipelined)
        tg_an_note(v, "time: the pipeline bubble (devices not computing) is %.1f%% measured "
                      "against %.1f%% in theory for %d stages and %d micro-batches, "
                      "(N-1)/(m+N-1)",
                   100 * bubble, 100 * theory, n, m);
    else
        tg_an_note(v, "time: devices compute %.1f%% of the time (%s strategy: no pipeline, so "
                      "no theoretical bubble applies)",
                   100 * (1 - bubble), strategy[0] ? strategy : "unknown");
    tg_an_note(v, "time: devices wait %s on host streams in the host step (%.1f%% of device time)",
               tg_an_format(TG_AN_NS, host, a, sizeof a), 100 * host / (n * w));
    tg_an_note(v, "offloading: none (this profile records no offloaded tensors or their traffic)");
    return TG_OK;
}
