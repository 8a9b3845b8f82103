/* compile/pipeline.c - building pipeline schedules and measuring them. */
#include "compile/pipeline.h"

#include "core/alloc.h"
#include "core/check.h"
#include "core/error.h"

#include <string.h>

static const char *const schedule_names[TG_SCHEDULE_COUNT] = {
    "grouped", "interleaved", "gpipe", "1f1b", "sharded", "zb-h1", "zb-h2"};

const char *tg_schedule_name(tg_schedule_kind k)
{
    return (unsigned)k < TG_SCHEDULE_COUNT ? schedule_names[k] : "?";
}

int tg_schedule_parse(const char *name)
{
    for (int k = 0; name && k < TG_SCHEDULE_COUNT; k++)
        if (strcmp(name, schedule_names[k]) == 0)
            return k;
    return -1;
}

const char *tg_pipe_pass_name(tg_pipe_pass pass)
{
    static const char *const names[] = {"forward", "backward", "weight"};
    return (unsigned)pass <= TG_PASS_WEIGHT ? names[pass] : "?";
}

bool tg_pipe_schedule_defers_weight(const tg_pipe_schedule *s, int d)
{
    for (int k = 0; tg_pipe_schedule_splits(s) && k + 1 < s->n_ops[d]; k++) {
        tg_pipe_op op = s->ops[d][k], after = s->ops[d][k + 1];
        if (op.pass == TG_PASS_BACKWARD &&
            (after.pass != TG_PASS_WEIGHT || after.micro_batch != op.micro_batch))
            return true;
    }
    return false;
}

static void push(tg_pipe_schedule *s, int d, int mb, bool backward)
{
    s->ops[d][s->n_ops[d]++] = (tg_pipe_op){mb, backward ? TG_PASS_BACKWARD : TG_PASS_FORWARD};
}

/* ---- zb-h1, zb-h2: the order of a unit-clock run (pipeline.h) ---- */

typedef struct zb_clock {
    int *f, *b, *w;     /* per device: passes done */
    int *f_end, *b_end; /* [d * m + j]: the cycle F(j) / B(j) ran on d, -1 before */
    int *pass;          /* per device: this cycle's pass, -1 idle */
} zb_clock;

static bool zb_done_before(const int *end, int at, int cycle)
{
    return end[at] >= 0 && end[at] < cycle;
}

/* The pass device d runs at `cycle`, or -1 to idle: B first (the previous
 * stage waits for it), then F within the cap (the stash), then W (only the
 * update waits for it). */
static int zb_pick(const tg_pipe_schedule *s, const zb_clock *z, int d, int cycle)
{
    int n = s->n_devices, m = s->micro_batches;
    int cap = s->kind == TG_SCHEDULE_ZB_H2 ? 2 * n - d - 1 : n - d;
    cap = cap < m ? cap : m;
    int jb = z->b[d], jf = z->f[d];
    if (jb < m && zb_done_before(z->f_end, d * m + jb, cycle) &&
        (d == n - 1 || zb_done_before(z->b_end, (d + 1) * m + jb, cycle)))
        return TG_PASS_BACKWARD;
    if (jf < m && jf - z->w[d] < cap &&
        (d == 0 || zb_done_before(z->f_end, (d - 1) * m + jf, cycle)))
        return TG_PASS_FORWARD;
    return z->w[d] < z->b[d] ? TG_PASS_WEIGHT : -1;
}

/* False if a cycle passes with every device idle: nothing would ever change
 * again (the rules above exclude it; the check keeps a bug from looping). */
static bool zb_run(tg_pipe_schedule *s, zb_clock *z)
{
    int n = s->n_devices, m = s->micro_batches, left = 3 * n * m;
    for (int cycle = 0; left > 0; cycle++) {
        int *pass = z->pass, before = left;
        for (int d = 0; d < n; d++) /* decide every device before any moves */
            pass[d] = zb_pick(s, z, d, cycle);
        for (int d = 0; d < n; d++) {
            int *count = pass[d] == TG_PASS_FORWARD    ? z->f
                         : pass[d] == TG_PASS_BACKWARD ? z->b
                                                       : z->w;
            if (pass[d] < 0)
                continue;
            int j = count[d]++;
            if (pass[d] == TG_PASS_FORWARD)
                z->f_end[d * m + j] = cycle;
            else if (pass[d] == TG_PASS_BACKWARD)
                z->b_end[d * m + j] = cycle;
            s->ops[d][s->n_ops[d]++] = (tg_pipe_op){j, (tg_pipe_pass)pass[d]};
            left--;
        }
        if (left == before)
            return false;
    }
    return true;
}

static tg_status build_zero_bubble(tg_pipe_schedule *s)
{
    int n = s->n_devices, m = s->micro_batches;
    zb_clock z = {
        tg_calloc((size_t)n, sizeof(int)),        tg_calloc((size_t)n, sizeof(int)),
        tg_calloc((size_t)n, sizeof(int)),        tg_malloc(sizeof(int) * (size_t)(n * m)),
        tg_malloc(sizeof(int) * (size_t)(n * m)), tg_calloc((size_t)n, sizeof(int))};
    tg_status st = TG_OK;
    if (!z.f || !z.b || !z.w || !z.f_end || !z.b_end || !z.pass) {
        st = tg_error(TG_ERR_NOMEM, "pipeline: out of memory");
    } else {
        for (int i = 0; i < n * m; i++)
            z.f_end[i] = z.b_end[i] = -1;
        if (!zb_run(s, &z))
            st = tg_error(TG_ERR_INTERNAL,
                          "pipeline: %s deadlocks on %d devices with %d "
                          "micro-batches",
                          tg_schedule_name(s->kind), n, m);
    }
    tg_free(z.f);
    tg_free(z.b);
    tg_free(z.w);
    tg_free(z.f_end);
    tg_free(z.b_end);
    tg_free(z.pass);
    return st;
}

/* Forwards first (`warm` of them), then alternate backward/forward, then drain. */
static void warm_then_alternate(tg_pipe_schedule *s, int d, int warm)
{
    int m = s->micro_batches, f = 0, b = 0;
    if (warm > m)
        warm = m;
    while (f < warm)
        push(s, d, f++, false);
    while (b < m) {
        push(s, d, b++, true);
        if (f < m)
            push(s, d, f++, false);
    }
}

static void build_device(tg_pipe_schedule *s, int d)
{
    int n = s->n_devices, m = s->micro_batches;
    if (!s->training) {
        for (int j = 0; j < m; j++)
            push(s, d, j, false);
        return;
    }
    switch (s->kind) {
    case TG_SCHEDULE_SHARDED:
        for (int j = 0; j < m; j++) {
            push(s, d, j, false);
            push(s, d, j, true);
        }
        return;
    case TG_SCHEDULE_GPIPE:
        for (int j = 0; j < m; j++)
            push(s, d, j, false);
        for (int j = 0; j < m; j++)
            push(s, d, j, true);
        return;
    case TG_SCHEDULE_1F1B:
        warm_then_alternate(s, d, n - d);
        return;
    case TG_SCHEDULE_INTERLEAVED:
        warm_then_alternate(s, d, n - d + 1);
        return;
    case TG_SCHEDULE_GROUPED: {
        /* cycle t: F(t - d), then B(t - (2N - d)). The backward of a
         * micro-batch starts one cycle after its forward leaves the last
         * device (the loss and the turn-around), so device d stashes
         * 2(N - d) + 1 activations: the reference's figure. */
        int lag = 2 * n - d;
        for (int t = 0; t < m + lag; t++) {
            if (t - d >= 0 && t - d < m)
                push(s, d, t - d, false);
            if (t - lag >= 0 && t - lag < m)
                push(s, d, t - lag, true);
        }
        return;
    }
    case TG_SCHEDULE_ZB_H1: /* training: split passes, built by build_zero_bubble */
    case TG_SCHEDULE_ZB_H2:
    default:
        TG_UNREACHABLE("pipeline schedule", s->kind);
    }
}

/* The most micro-batches whose forward has run and whose backward (W, when
 * split) has not: the slots every stashed value needs. */
static int stash_depth(const tg_pipe_schedule *s, int d)
{
    tg_pipe_pass last = tg_pipe_schedule_splits(s) ? TG_PASS_WEIGHT : TG_PASS_BACKWARD;
    int live = 0, depth = 0;
    for (int k = 0; k < s->n_ops[d]; k++) {
        tg_pipe_pass pass = s->ops[d][k].pass;
        live += pass == TG_PASS_FORWARD ? 1 : pass == last ? -1 : 0;
        depth = live > depth ? live : depth;
    }
    return depth;
}

tg_status tg_pipe_schedule_build(tg_schedule_kind kind, int n_devices, int micro_batches,
                                 bool training, tg_pipe_schedule *s)
{
    memset(s, 0, sizeof *s);
    if ((unsigned)kind >= TG_SCHEDULE_COUNT || n_devices < 1 || micro_batches < 1)
        return tg_error(TG_ERR_CONFIG, "pipeline: %d devices and %d micro-batches with schedule %d",
                        n_devices, micro_batches, (int)kind);
    s->kind = kind;
    s->n_devices = n_devices;
    s->micro_batches = micro_batches;
    s->training = training;
    s->ops = tg_calloc((size_t)n_devices, sizeof *s->ops);
    s->n_ops = tg_calloc((size_t)n_devices, sizeof *s->n_ops);
    s->stash_depth = tg_calloc((size_t)n_devices, sizeof *s->stash_depth);
    if (!s->ops || !s->n_ops || !s->stash_depth)
        goto nomem;
    for (int d = 0; d < n_devices; d++)
        if (!(s->ops[d] = tg_calloc(3 * (size_t)micro_batches, sizeof **s->ops)))
            goto nomem;
    if (tg_pipe_schedule_splits(s)) {
        tg_status st = build_zero_bubble(s);
        if (st != TG_OK) {
            tg_pipe_schedule_free(s);
            return st;
        }
    } else {
        for (int d = 0; d < n_devices; d++)
            build_device(s, d);
    }
    for (int d = 0; d < n_devices; d++)
        s->stash_depth[d] = training ? stash_depth(s, d) : 1;
    return TG_OK;
nomem:
    tg_pipe_schedule_free(s);
    return tg_error(TG_ERR_NOMEM, "pipeline: out of memory");
}

void tg_pipe_schedule_free(tg_pipe_schedule *s)
{
    for (int d = 0; s->ops && d < s->n_devices; d++)
        tg_free(s->ops[d]);
    tg_free(s->ops);
    tg_free(s->n_ops);
    tg_free(s->stash_depth);
    memset(s, 0, sizeof *s);
}

/* done[((d * m) + j) * 3 + pass]: the cycle at whose end the op finished, or -1 */
#define DONE(d, j, pass) done[((size_t)(d) * (size_t)m + (size_t)(j)) * 3 + (pass)]

static bool unit_done(const int *done, int m, int d, int j, tg_pipe_pass pass, int cycle)
{
    return DONE(d, j, pass) >= 0 && DONE(d, j, pass) < cycle;
}

/* Whether op can start at `cycle`: F(j) needs F(j) on d-1; B(j) needs F(j)
 * on d and B(j) on d+1; W(j) needs B(j) on d. */
static bool unit_ready(const tg_pipe_schedule *s, const int *done, int d, tg_pipe_op op, int cycle)
{
    int n = s->n_devices, m = s->micro_batches, j = op.micro_batch;
    switch (op.pass) {
    case TG_PASS_FORWARD:
        return d == 0 || unit_done(done, m, d - 1, j, TG_PASS_FORWARD, cycle);
    case TG_PASS_BACKWARD:
        return unit_done(done, m, d, j, TG_PASS_FORWARD, cycle) &&
               (d == n - 1 || unit_done(done, m, d + 1, j, TG_PASS_BACKWARD, cycle));
    case TG_PASS_WEIGHT:
        return unit_done(done, m, d, j, TG_PASS_BACKWARD, cycle);
    default:
        TG_UNREACHABLE("pipeline pass", op.pass);
    }
}

/* Runs one cycle: every device whose next op is ready runs it. Returns how many ran. */
static int unit_cycle(const tg_pipe_schedule *s, int *done, int *next, int *worked, int cycle)
{
    int m = s->micro_batches, progressed = 0;
    for (int d = 0; d < s->n_devices; d++) {
        if (next[d] >= s->n_ops[d])
            continue;
        tg_pipe_op op = s->ops[d][next[d]];
        if (!unit_ready(s, done, d, op, cycle))
            continue;
        DONE(d, op.micro_batch, op.pass) = cycle;
        next[d]++;
        worked[d]++;
        progressed++;
    }
    return progressed;
}

int tg_pipe_schedule_simulate(const tg_pipe_schedule *s, double *busy)
{
    int n = s->n_devices, m = s->micro_batches;
    int *done = tg_malloc(sizeof(int) * (size_t)(3 * n * m));
    int *next = tg_calloc((size_t)n, sizeof(int));
    int *worked = tg_calloc((size_t)n, sizeof(int));
    int cycle = -1, remaining = 0;
    if (done && next && worked) {
        for (int i = 0; i < 3 * n * m; i++)
            done[i] = -1;
        for (int d = 0; d < n; d++)
            remaining += s->n_ops[d];
        /* a cycle where nothing runs means every device waits on another: a deadlock */
        for (cycle = 0; remaining > 0; cycle++) {
            int ran = unit_cycle(s, done, next, worked, cycle);
            if (!ran) {
                cycle = -1;
                break;
            }
            remaining -= ran;
        }
    }
    for (int d = 0; busy && d < n && cycle > 0; d++)
        busy[d] = (double)worked[d] / cycle;
    tg_free(worked);
    tg_free(done);
    tg_free(next);
    return cycle;
}
#undef DONE
