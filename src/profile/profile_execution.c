/* profile/profile_execution.c - the execution profile's tables: what ran
 * (the trace of each recorded run, measured or, on a tiled target, the cycle
 * model's timeline; op calls and times; counters per host step; tensor
 * histograms; the host trace). The file itself: profile.c.
 */
#include "profile/profile_internal.h"

#include "core/alloc.h"
#include "core/error.h"
#include "target/tiled.h"
#include "tilegraph/trace.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

tg_status tg_profile_counter(tg_profile *pf, int64_t step, const char *name, double value)
{
    if (!pf || !name || !*name)
        return TG_OK;
    int k = 0;
    while (k < pf->n_counter_names && strcmp(pf->counter_names[k], name) != 0)
        k++;
    if (k == pf->n_counter_names) {
        if (k == TG_PROFILE_MAX_COUNTERS)
            return tg_error(TG_ERR_INVALID_ARG,
                            "profile %s: counter '%s': at most %d counters are recorded", pf->path,
                            name, TG_PROFILE_MAX_COUNTERS);
        snprintf(pf->counter_names[k], sizeof pf->counter_names[k], "%s", name);
        pf->n_counter_names++;
    }
    if (pf->n_counters == pf->cap_counters) {
        int64_t cap = pf->cap_counters ? pf->cap_counters * 2 : 1024;
        struct counter_row *grown = tg_realloc(pf->counters, (size_t)cap * sizeof *grown);
        if (!grown)
            return tg_error(TG_ERR_NOMEM, "profile %s: out of memory for counters", pf->path);
        pf->counters = grown;
        pf->cap_counters = cap;
    }
    pf->counters[pf->n_counters++] = (struct counter_row){step, k, value};
    return TG_OK;
}
/* The counters recorded, one row per host step and name (a later value of
 * the same step replaces an earlier one). */
static tg_status write_counters(tg_profile *pf)
{
    if (!pf->n_counters)
        return TG_OK;
    sqlite3_stmt *st = pf_prepare(pf, "INSERT OR REPLACE INTO counters VALUES(?, ?, ?)");
    tg_status s = st ? pf_exec(pf, "BEGIN") : pf_db_error(pf, "prepare");
    for (int64_t i = 0; s == TG_OK && i < pf->n_counters; i++) {
        const struct counter_row *c = &pf->counters[i];
        s = isfinite(c->value)
                ? pf_insert(pf, st, "isd", c->step, pf->counter_names[c->name], c->value)
                : pf_insert(pf, st, "isn", c->step, pf->counter_names[c->name]);
    }
    sqlite3_finalize(st);
    if (s == TG_OK)
        s = pf_exec(pf, "COMMIT");
    else if (st)
        pf_exec(pf, "ROLLBACK");
    return s;
}
tg_status tg_profile_histogram(tg_profile *pf, int64_t run, const char *tensor, const char *kind,
                               const float *x, int64_t n)
{
    if (!pf || n <= 0)
        return TG_OK;
    double lo = INFINITY, hi = -INFINITY, sum = 0, sq = 0;
    int64_t finite = 0, zeros = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        if (!isfinite(v))
            continue;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        sum += v;
        sq += v * v;
        zeros += v == 0;
        finite++;
    }
    int64_t bins[TG_PROFILE_HISTOGRAM_BINS] = {0};
    double width = hi > lo ? (hi - lo) / TG_PROFILE_HISTOGRAM_BINS : 0;
    for (int64_t i = 0; finite && i < n; i++) {
        if (!isfinite(x[i]))
            continue;
        int b = width > 0 ? (int)(((double)x[i] - lo) / width) : TG_PROFILE_HISTOGRAM_BINS / 2;
        bins[b < 0 ? 0 : b >= TG_PROFILE_HISTOGRAM_BINS ? TG_PROFILE_HISTOGRAM_BINS - 1 : b]++;
    }
    char text[TG_PROFILE_HISTOGRAM_BINS * 21 + 4];
    size_t used = 0;
    for (int b = 0; b < TG_PROFILE_HISTOGRAM_BINS; b++)
        used += (size_t)snprintf(text + used, sizeof text - used, "%s%lld", b ? "," : "[",
                                 (long long)bins[b]);
    snprintf(text + used, sizeof text - used, "]");
    double mean = finite ? sum / (double)finite : NAN;
    double var = finite ? sq / (double)finite - mean * mean : NAN;
    sqlite3_stmt *st =
        pf_prepare(pf, "INSERT OR REPLACE INTO histograms VALUES(?,?,?,?,?,?,?,?,?,?,?)");
    if (!st)
        return pf_db_error(pf, "prepare");
    tg_status s =
        finite ? pf_insert(pf, st, "issiddddiis", run, tensor, kind, n, lo, hi, mean,
                           sqrt(var > 0 ? var : 0), zeros, n - finite, text)
               : pf_insert(pf, st, "issinnnniis", run, tensor, kind, n, zeros, n - finite, text);
    sqlite3_finalize(st);
    return s;
}

typedef struct {
    tg_profile *pf;
    sqlite3_stmt *st;
    int64_t run;
    int replica;
    double ns_per_cycle, base_cycles;
} sim_ctx;

/* One piece of a simulated phase, from cycle `*at` for `cycles`; advances *at. */
static tg_status sim_piece(sim_ctx *c, int d, int ph, int it, int j, tg_event_kind kind, int peer,
                           double *at, double cycles, int64_t bytes, double flops)
{
    double start = *at, end = *at + cycles;
    *at = end;
    return pf_insert(c->pf, c->st, "iiissiiiiiidii", c->run, (int64_t)c->replica, (int64_t)d,
                     tg_event_name(kind), pf_phase_names[ph], (int64_t)it, (int64_t)j,
                     (int64_t)peer, (int64_t)(start * c->ns_per_cycle),
                     (int64_t)(end * c->ns_per_cycle), bytes, flops, (int64_t)start, (int64_t)end);
}

/* One simulated phase of a tiled target, split as the cycle model costs it
 * (target/tileplan.c): transfers received from other devices (a wait for
 * the peer's data), host streams in, the compute steps with their exchange
 * and syncs, host streams out, transfers sent. Forward streams are per
 * micro-batch (with I/O tiles, the inputs a piece of their own, beside the
 * compute); offloaded tensors come in and go out of their streamed copies
 * in every phase that uses them. Each piece has its bytes, so copies on mk2 have their cycles. */
static tg_status sim_event(void *ctx_, int d, int ph, tg_tile_piece piece, int it, int j,
                           double start, double end)
{
    sim_ctx *c = ctx_;
    const tg_program *p = c->pf->program;
    const tg_device_program *dp = &p->devices[d];
    const tg_target_desc *tg = tg_target_planned(p);
    double at = start + c->base_cycles;
    int64_t in = 0, out = 0;
    for (int k = 0; ph == TG_PHASE_FORWARD && k < dp->n_inputs; k++)
        in += (int64_t)p->buffers[dp->inputs[k]].bytes;
    if (piece == TG_TILE_STREAM_IN) /* on the I/O tiles, beside the compute */
        return sim_piece(c, d, ph, it, j, TG_EVENT_STREAM_IO, -1, &at, end - start, in, 0);
    if (piece == TG_TILE_WEIGHT) /* a split backward's W: compute only, its FLOPs counted with B */
        return sim_piece(c, d, ph, it, j, TG_EVENT_PHASE, -1, &at, end - start, 0, 0);
    double host = tg->host_bytes_per_cycle, link = tg->link_bytes_per_cycle, copies = 0;
    tg_status s = TG_OK;
    if (tg->io_tiles > 0) /* they came in on the I/O tiles, above */
        in = 0;
    if (ph == TG_PHASE_FORWARD) {
        for (int k = 0; k < dp->n_outputs; k++)
            out += (int64_t)p->buffers[dp->outputs[k]].bytes;
    }
    in += (int64_t)dp->stream_in_bytes[ph]; /* streamed copies (compile/streaming.c) */
    out += (int64_t)dp->stream_out_bytes[ph];
    for (int k = 0; s == TG_OK && k < p->n_transfers; k++) {
        const tg_transfer *x = &p->transfers[k];
        if (x->phase == (tg_phase)ph && x->dst_device == d) {
            int64_t b = (int64_t)p->buffers[x->src_buffer].bytes;
            copies += (double)b / link;
            s = sim_piece(c, d, ph, it, j, TG_EVENT_WAIT, x->src_device, &at, (double)b / link, b,
                          0);
        }
    }
    if (s == TG_OK && in)
        s = sim_piece(c, d, ph, it, j, TG_EVENT_STREAM_IN, -1, &at, (double)in / host, in, 0);
    double sent = 0;
    for (int k = 0; k < p->n_transfers; k++)
        if (p->transfers[k].phase == (tg_phase)ph && p->transfers[k].src_device == d)
            sent += (double)p->buffers[p->transfers[k].src_buffer].bytes / link;
    /* what is left of the phase's cycles is compute, exchange and syncs */
    double compute = (end - start) - copies - (double)(in + out) / host - sent;
    if (s == TG_OK)
        s = sim_piece(c, d, ph, it, j, TG_EVENT_PHASE, -1, &at, compute > 0 ? compute : 0, 0,
                      dp->flops[ph]);
    if (s == TG_OK && out)
        s = sim_piece(c, d, ph, it, j, TG_EVENT_STREAM_OUT, -1, &at, (double)out / host, out, 0);
    for (int k = 0; s == TG_OK && k < p->n_transfers; k++) {
        const tg_transfer *x = &p->transfers[k];
        if (x->phase == (tg_phase)ph && x->src_device == d) {
            int64_t b = (int64_t)p->buffers[x->src_buffer].bytes;
            s = sim_piece(c, d, ph, it, j, TG_EVENT_COPY, x->dst_device, &at, (double)b / link, b,
                          0);
        }
    }
    return s;
}

/* On a tiled target the trace is the cycle model's timeline of the host
 * step (every replica alike), placed after the previous recorded steps. */
static tg_status record_simulated(tg_profile *pf, sqlite3_stmt *st, int64_t run)
{
    const tg_program *p = pf->program;
    sim_ctx c = {pf, st, run, 0, 1e9 / tg_target_planned(p)->clock_hz, 0};
    int64_t last = 0;
    if (run > 0) {
        sqlite3_stmt *q = pf_prepare(pf, "SELECT MAX(end_cycles) FROM trace");
        if (q && sqlite3_step(q) == SQLITE_ROW)
            last = sqlite3_column_int64(q, 0);
        sqlite3_finalize(q);
    }
    c.base_cycles = (double)last;
    const tg_target_ops *t = tg_target_of_config(&p->config);
    if (!t || !t->simulate)
        return tg_error(TG_ERR_INTERNAL, "profile: target '%s' has a tile plan but no cycle model",
                        p->config.target.name);
    tg_status s = TG_OK;
    for (int r = 0; s == TG_OK && r < p->replicas; r++) {
        c.replica = r;
        s = t->simulate(p, sim_event, &c);
    }
    return s;
}

const char *tg_event_name(tg_event_kind k)
{
    static const char *const names[] = {
#define TG_EVENT_NAME(e, name) name,
        TG_EVENT_LIST(TG_EVENT_NAME)
#undef TG_EVENT_NAME
    };
    return (unsigned)k < TG_EVENT_COUNT ? names[k] : "?";
}

tg_status tg_profile_record_run(tg_profile *pf, const tg_profile_recorder *recorders, int64_t run)
{
    if (!pf)
        return TG_OK;
    const tg_program *p = pf->program;
    TG_TRY(pf_exec(pf, "BEGIN"));
    sqlite3_stmt *st = pf_prepare(pf, "INSERT INTO trace VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    tg_status status = st ? TG_OK : pf_db_error(pf, "prepare");
    if (status == TG_OK && tg_target_planned(p)) {
        status = record_simulated(pf, st, run);
        sqlite3_finalize(st);
        if (status == TG_OK)
            return pf_exec(pf, "COMMIT");
        pf_exec(pf, "ROLLBACK");
        return status;
    }
    for (int i = 0; status == TG_OK && i < p->replicas * p->n_devices; i++) {
        const tg_profile_recorder *r = &recorders[i];
        for (int k = 0; status == TG_OK && k < r->n_events; k++) {
            const tg_profile_event *e = &r->events[k];
            status =
                pf_insert(pf, st, "iiissiiiiiidnn", run, (int64_t)(i / p->n_devices),
                          (int64_t)(i % p->n_devices), tg_event_name((tg_event_kind)e->kind),
                          pf_phase_names[e->phase], (int64_t)e->iteration, (int64_t)e->micro_batch,
                          (int64_t)e->peer, e->start_ns, e->end_ns, e->bytes, e->flops);
        }
    }
    sqlite3_finalize(st);
    if (status == TG_OK)
        status = pf_exec(pf, "COMMIT");
    else
        pf_exec(pf, "ROLLBACK");
    return status;
}
typedef struct {
    tg_profile *pf;
    sqlite3_stmt *st;
    const char *threads[256];
    tg_status status;
} host_ctx;

static int host_thread(const tg_trace_thread_info *t, void *ctx_)
{
    host_ctx *c = ctx_;
    if (t->index >= 0 && t->index < 256)
        c->threads[t->index] = t->name;
    return 0;
}

static int host_event(const tg_trace_event *e, void *ctx_)
{
    host_ctx *c = ctx_;
    const char *thread = e->thread >= 0 && e->thread < 256 ? c->threads[e->thread] : NULL;
    c->status = pf_insert(c->pf, c->st, "ssssiiiid", thread ? thread : "?", e->channel,
                          tg_trace_kind_name(e->kind), e->name, e->start_ns, e->end_ns,
                          (int64_t)e->depth, (int64_t)e->link, e->value);
    return c->status != TG_OK;
}

/* The host trace recorded so far (tilegraph/trace.h), as the System
 * Analyser's data: every thread's regions, instants and series. */
static tg_status write_host_trace(tg_profile *pf)
{
    if (tg_trace_get_stats().threads == 0)
        return TG_OK;
    host_ctx c = {
        pf, pf_prepare(pf, "INSERT INTO host_trace VALUES(?,?,?,?,?,?,?,?,?)"), {0}, TG_OK};
    if (!c.st)
        return pf_db_error(pf, "prepare");
    tg_status s = pf_exec(pf, "BEGIN");
    if (s == TG_OK)
        s = tg_trace_visit(host_thread, host_event, &c);
    if (s == TG_OK)
        s = c.status;
    sqlite3_finalize(c.st);
    if (s == TG_OK)
        s = pf_exec(pf, "COMMIT");
    else
        pf_exec(pf, "ROLLBACK");
    return s;
}

/* What the execution profile adds at close: each op's calls and time from the
 * recorders (NULL: none), the counters, the host trace. */
tg_status pf_write_execution_end(tg_profile *pf, const tg_profile_recorder *recorders)
{
    const tg_program *p = pf->program;
    tg_status status = TG_OK;
    if (recorders) {
        status = pf_exec(pf, "BEGIN");
        sqlite3_stmt *st = pf_prepare(pf, "UPDATE ops SET calls = ?, total_ns = ? WHERE id = ?");
        for (int n = 0; status == TG_OK && st && n < p->graph->n_nodes; n++) {
            int64_t calls = 0, ns = 0;
            /* a session whose create ran out of memory may have made only
             * some recorders' counts; those hold none */
            for (int i = 0; i < p->replicas * p->n_devices; i++) {
                calls += recorders[i].op_calls ? recorders[i].op_calls[n] : 0;
                ns += recorders[i].op_ns ? recorders[i].op_ns[n] : 0;
            }
            if (calls)
                status = pf_insert(pf, st, "iii", calls, ns, (int64_t)n);
        }
        sqlite3_finalize(st);
        if (status == TG_OK)
            status = pf_exec(pf, "COMMIT");
    }
    if (status == TG_OK)
        status = write_counters(pf);
    if (status == TG_OK)
        status = write_host_trace(pf);
    return status;
}
