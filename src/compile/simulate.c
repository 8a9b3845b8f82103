/* compile/simulate.c - event simulation of a pipeline schedule with
 * per-stage costs (the model is described in simulate.h). */
#include "compile/simulate.h"

#include "core/alloc.h"
#include "core/error.h"

#include <math.h>
#include <string.h>

void tg_sim_result_free(tg_sim_result *r)
{
    tg_free(r->busy_time);
    tg_free(r->busy);
    tg_free(r->peak_stash);
    tg_free(r->finish_time);
    tg_free(r->op_start);
    tg_free(r->op_end);
    memset(r, 0, sizeof *r);
}

static tg_status check_costs(const tg_stage_cost *c, int n)
{
    for (int d = 0; d < n; d++) {
        double v[] = {c[d].time[TG_SIM_FORWARD], c[d].time[TG_SIM_BACKWARD],
                      c[d].time[TG_SIM_WEIGHT],  c[d].send_forward,
                      c[d].send_backward,        c[d].update};
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
            if (!(v[k] >= 0) || !isfinite(v[k]))
                return tg_error(TG_ERR_INVALID_ARG,
                                "schedule simulator: stage %d has a cost of %g s; costs must be "
                                "finite and not negative",
                                d, v[k]);
    }
    return TG_OK;
}

typedef struct sim_state {
    const tg_pipe_schedule *s;
    const tg_stage_cost *c;
    double *end;   /* end[(d * m + j) * KINDS + kind], < 0 while not run */
    double *start; /* the same for starts */
    double *free;  /* per device: when it is next free */
    int *next;     /* per device: index of its next op */
} sim_state;

#define END(st, d, j, k)                                                                           \
    (st)->end[((size_t)(d) * (st)->s->micro_batches + (j)) * TG_SIM_KIND_COUNT + (k)]

/* When op (d, j, kind)'s inputs have arrived; < 0 if they have not yet. */
static double ready_at(const sim_state *st, int d, int j, tg_sim_kind kind)
{
    int n = st->s->n_devices;
    if (kind == TG_SIM_FORWARD) {
        if (d == 0)
            return 0;
        double f = END(st, d - 1, j, TG_SIM_FORWARD);
        return f < 0 ? -1 : f + st->c[d - 1].send_forward;
    }
    if (kind == TG_SIM_WEIGHT)
        return END(st, d, j, TG_SIM_BACKWARD);
    double own = END(st, d, j, TG_SIM_FORWARD);
    if (own < 0)
        return -1;
    if (d == n - 1)
        return own;
    double next = END(st, d + 1, j, TG_SIM_BACKWARD);
    if (next < 0)
        return -1;
    next += st->c[d + 1].send_backward;
    return next > own ? next : own;
}

/* What an op costs: a backward that is not split carries the weight gradient too. */
static double op_time(const sim_state *st, int d, tg_sim_kind kind)
{
    const tg_stage_cost *c = &st->c[d];
    if (kind == TG_SIM_BACKWARD && !tg_pipe_schedule_splits(st->s))
        return c->time[TG_SIM_BACKWARD] + c->time[TG_SIM_WEIGHT];
    return c->time[kind];
}

static tg_sim_kind sim_kind(tg_pipe_pass pass)
{
    return pass == TG_PASS_FORWARD    ? TG_SIM_FORWARD
           : pass == TG_PASS_BACKWARD ? TG_SIM_BACKWARD
                                      : TG_SIM_WEIGHT;
}

/* Run every op whose inputs are ready, device by device, until no device
 * can move; the order of ops on a device is the schedule's, so the result
 * does not depend on the sweep order. */
static int sweep(sim_state *st, tg_sim_result *r, int *live)
{
    int moved = 0;
    tg_pipe_pass last = tg_pipe_schedule_splits(st->s) ? TG_PASS_WEIGHT : TG_PASS_BACKWARD;
    for (int d = 0; d < st->s->n_devices; d++) {
        while (st->next[d] < st->s->n_ops[d]) {
            tg_pipe_op op = st->s->ops[d][st->next[d]];
            tg_sim_kind kind = sim_kind(op.pass);
            double ready = ready_at(st, d, op.micro_batch, kind);
            if (ready < 0)
                break;
            double start = ready > st->free[d] ? ready : st->free[d];
            double t = op_time(st, d, kind);
            END(st, d, op.micro_batch, kind) = st->free[d] = start + t;
            st->start[((size_t)d * st->s->micro_batches + op.micro_batch) * TG_SIM_KIND_COUNT +
                      kind] = start;
            r->busy_time[d] += t;
            live[d] += op.pass == TG_PASS_FORWARD ? 1 : op.pass == last ? -1 : 0;
            if (live[d] > r->peak_stash[d])
                r->peak_stash[d] = live[d];
            st->next[d]++;
            moved++;
        }
    }
    return moved;
}

static tg_status run(sim_state *st, tg_sim_result *r, int *live)
{
    int remaining = 0;
    for (int d = 0; d < st->s->n_devices; d++)
        remaining += st->s->n_ops[d];
    while (remaining > 0) {
        int moved = sweep(st, r, live);
        if (moved == 0)
            return tg_error(TG_ERR_CONFIG,
                            "schedule simulator: schedule %s deadlocks on %d devices with %d "
                            "micro-batches",
                            tg_schedule_name(st->s->kind), st->s->n_devices, st->s->micro_batches);
        remaining -= moved;
    }
    return TG_OK;
}

tg_status tg_schedule_simulate_costs(const tg_pipe_schedule *s, const tg_stage_cost *costs,
                                     tg_sim_result *r)
{
    memset(r, 0, sizeof *r);
    int n = s->n_devices, m = s->micro_batches;
    TG_TRY(check_costs(costs, n));
    sim_state st = {s, costs, NULL, NULL, NULL, NULL};
    size_t n_ops = (size_t)n * (size_t)m * TG_SIM_KIND_COUNT;
    st.end = tg_malloc(sizeof(double) * n_ops + 1);
    st.start = tg_calloc(n_ops + 1, sizeof(double));
    st.free = tg_calloc((size_t)n, sizeof(double));
    st.next = tg_calloc((size_t)n, sizeof(int));
    int *live = tg_calloc((size_t)n, sizeof(int));
    r->n_devices = n;
    r->busy_time = tg_calloc((size_t)n, sizeof(double));
    r->busy = tg_calloc((size_t)n, sizeof(double));
    r->peak_stash = tg_calloc((size_t)n, sizeof(int));
    r->finish_time = tg_calloc((size_t)n, sizeof(double));
    tg_status status = TG_OK;
    if (!st.end || !st.start || !st.free || !st.next || !live || !r->busy_time || !r->busy ||
        !r->peak_stash || !r->finish_time) {
        status = tg_error(TG_ERR_NOMEM, "schedule simulator: out of memory");
        goto done;
    }
    for (size_t i = 0; i < n_ops; i++)
        st.end[i] = -1;
    if ((status = run(&st, r, live)) != TG_OK)
        goto done;
    double busy_all = 0;
    for (int d = 0; d < n; d++) {
        /* the update runs once the device's last backward is done */
        r->finish_time[d] = st.free[d] + (s->training ? costs[d].update : 0);
        r->busy_time[d] += s->training ? costs[d].update : 0;
        if (r->finish_time[d] > r->step_time)
            r->step_time = r->finish_time[d];
        busy_all += r->busy_time[d];
    }
    for (int d = 0; d < n; d++)
        r->busy[d] = r->step_time > 0 ? r->busy_time[d] / r->step_time : 0;
    r->bubble = r->step_time > 0 ? 1 - busy_all / (n * r->step_time) : 0;
    r->micro_batches = m;
    r->op_start = st.start;
    r->op_end = st.end;
    st.start = st.end = NULL;
done:
    tg_free(st.start);
    tg_free(st.end);
    tg_free(st.free);
    tg_free(st.next);
    tg_free(live);
    if (status != TG_OK)
        tg_sim_result_free(r);
    return status;
}
