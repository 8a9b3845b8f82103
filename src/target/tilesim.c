/* target/tilesim.c - the execution timeline of one host step on a tiled
 * target, from the cycle model: each device runs its pipeline schedule,
 * every forward or backward pass taking the cycles the model gives that
 * phase, waiting for the neighbouring device as the schedule's dependencies
 * say (a forward needs the previous device's forward of that micro-batch, a
 * backward the next device's backward), then its update. With I/O tiles
 * (numIOTiles) a forward's host streams in run on the I/O tiles beside the
 * previous micro-batch's compute instead of before its own. The result is
 * what the profile records as the trace on such a target, in cycles. */
#include "target/tiled.h"

#include "compile/program.h"
#include "core/alloc.h"
#include "core/error.h"

/* Cycles of one pass of device d: a split schedule's B is the backward
 * phase less its weight-gradient steps, which make its W. */
static double pass_cycles(const tg_program *p, int d, tg_pipe_pass pass)
{
    const tg_tile_device *td = &p->tile_plan->devices[d];
    if (pass == TG_PASS_FORWARD)
        return td->cycles[TG_PHASE_FORWARD];
    const tg_device_program *dp = &p->devices[d];
    double w = 0;
    for (int k = dp->input_grad_steps;
         tg_pipe_schedule_splits(&p->schedule) && k < dp->n_steps[TG_PHASE_BACKWARD]; k++)
        w += td->step_cycles[TG_PHASE_BACKWARD][k];
    return pass == TG_PASS_WEIGHT ? w : td->cycles[TG_PHASE_BACKWARD] - w;
}

/* With I/O tiles, micro-batch j's host streams in on device d's I/O tiles:
 * after the previous copy (*io_free), and no earlier than the start of the
 * previous forward (`prev`: it overlaps that micro-batch's compute, one
 * slot ahead); the forward waits for it (*ready). */
static tg_status stream_in(const tg_program *p, tg_tile_event_fn fn, void *ctx, int d, int it,
                           int j, double *io_free, double prev, double *ready)
{
    double cycles = tg_tile_stream_in_cycles(p, d);
    if (p->tile_plan->target.io_tiles == 0 || cycles <= 0)
        return TG_OK;
    double start = *io_free > prev ? *io_free : prev;
    *io_free = start + cycles;
    if (*io_free > *ready)
        *ready = *io_free;
    return fn(ctx, d, TG_PHASE_FORWARD, TG_TILE_STREAM_IN, it, j, start, *io_free);
}

tg_status tg_tile_simulate(const tg_program *p, tg_tile_event_fn fn, void *ctx)
{
    const tg_tile_plan *tp = p->tile_plan;
    const tg_pipe_schedule *sch = &p->schedule;
    int n = p->n_devices, m = p->micro_batches;
    if (!tp)
        return tg_error(TG_ERR_INVALID_ARG, "simulate: the program has no tile plan");
    double *end_f = tg_calloc((size_t)(n * m) + 1, sizeof(double));
    double *end_b = tg_calloc((size_t)(n * m) + 1, sizeof(double));
    double *clock = tg_calloc((size_t)n + 1, sizeof(double));
    int *next = tg_calloc((size_t)n + 1, sizeof(int));
    /* per device: its I/O tiles free from, and its last forward's start */
    double *io_free = tg_calloc(2 * (size_t)n + 1, sizeof(double)), *fwd_start = io_free + n;
    if (!end_f || !end_b || !clock || !next || !io_free) {
        tg_free(end_f);
        tg_free(end_b);
        tg_free(clock);
        tg_free(next);
        tg_free(io_free);
        return tg_error(TG_ERR_NOMEM, "simulate: out of memory");
    }
    tg_status s = TG_OK;
    double start_of_iteration = 0;
    for (int it = 0; it < p->iterations && s == TG_OK; it++) {
        for (int d = 0; d < n; d++) {
            clock[d] = io_free[d] = fwd_start[d] = start_of_iteration;
            next[d] = 0;
        }
        for (int i = 0; i < n * m; i++)
            end_f[i] = end_b[i] = -1;
        /* advance every device as far as its dependencies allow, until all are done */
        for (bool progress = true; progress && s == TG_OK;) {
            progress = false;
            for (int d = 0; d < n && s == TG_OK; d++) {
                while (next[d] < sch->n_ops[d]) {
                    tg_pipe_op op = sch->ops[d][next[d]];
                    int j = op.micro_batch;
                    double ready = clock[d];
                    if (op.pass == TG_PASS_FORWARD) {
                        if (d > 0 && end_f[(d - 1) * m + j] < 0)
                            break;
                        if (d > 0 && end_f[(d - 1) * m + j] > ready)
                            ready = end_f[(d - 1) * m + j];
                    } else if (op.pass == TG_PASS_BACKWARD) {
                        if (end_f[d * m + j] < 0 || (d < n - 1 && end_b[(d + 1) * m + j] < 0))
                            break;
                        if (d < n - 1 && end_b[(d + 1) * m + j] > ready)
                            ready = end_b[(d + 1) * m + j];
                    }
                    if (op.pass == TG_PASS_FORWARD) {
                        s = stream_in(p, fn, ctx, d, it, j, &io_free[d], fwd_start[d], &ready);
                        fwd_start[d] = ready;
                        if (s != TG_OK)
                            break;
                    }
                    /* W(j) follows B(j) on this device: nothing to wait for */
                    tg_phase ph = op.pass == TG_PASS_FORWARD ? TG_PHASE_FORWARD : TG_PHASE_BACKWARD;
                    double end = ready + pass_cycles(p, d, op.pass);
                    if (op.pass != TG_PASS_WEIGHT)
                        (op.pass == TG_PASS_BACKWARD ? end_b : end_f)[d * m + j] = end;
                    s = fn(ctx, d, ph, op.pass == TG_PASS_WEIGHT ? TG_TILE_WEIGHT : TG_TILE_PASS,
                           it, j, ready, end);
                    clock[d] = end;
                    next[d]++;
                    progress = true;
                    if (s != TG_OK)
                        break;
                }
            }
        }
        /* the update on each device, then (bulk-synchronous) the next iteration */
        double iteration_end = 0;
        for (int d = 0; d < n && s == TG_OK; d++) {
            double end = clock[d];
            if (p->training) {
                end += tp->devices[d].cycles[TG_PHASE_UPDATE];
                s = fn(ctx, d, TG_PHASE_UPDATE, TG_TILE_PASS, it, -1, clock[d], end);
            }
            if (end > iteration_end)
                iteration_end = end;
        }
        start_of_iteration = iteration_end + tp->target.sync_cycles;
    }
    tg_free(end_f);
    tg_free(end_b);
    tg_free(clock);
    tg_free(next);
    tg_free(io_free);
    return s;
}
