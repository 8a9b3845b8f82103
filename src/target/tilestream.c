/* target/tilestream.c - the cycle model of streaming memory and of the
 * gathers of sharded weights on a tiled target (docs/targets.md,
 * "Streaming memory and I/O tiles").
 *
 * Streamed copies of offloaded tensors (compile/streaming.c) cross the host
 * link at hostBytesPerCycle. Without I/O tiles they are charged inside their
 * pass, after its compute, as before. With numIOTiles N the I/O tiles run
 * them beside the compute, as Poplar overlaps stream copies on its I/O
 * tiles: a pass is its steps in order, each waiting for its loads, and the
 * loads run ahead of their steps, in order, as far as the I/O tiles can hold
 * what waits there for its step to start (95% of their memory, the seed's
 * ~5% going to exchange code and buffers, less the host-stream inputs they
 * keep); what does not fit streams once the step before has ended. The
 * compute tiles' memory plan does not see a copy before its step: it waits
 * on the I/O tiles, whose room bounds how far ahead it starts. Stores queue on the
 * I/O tiles after their step. Loads and stores share the host link, whose
 * busy time bounds the pass as well: a pass takes max(compute, copies) over
 * each such window instead of their sum, and the compute has N tiles fewer.
 *
 * A sharded weight's gather (replicated tensor sharding) moves the R - 1
 * shards a replica lacks between replicas: an all-gather over the pod's
 * rings (target/collective.h: (R - 1)/R of the weight at linkBytesPerCycle
 * in one link domain, through the gateways beyond it) in its pass, and
 * R - 1 exchange steps of code on the tiles of the whole copy, as the
 * all-reduce's ring is charged.
 */
#include "target/tiled.h"

#include "target/collective.h"

#include "compile/program.h"
#include "core/alloc.h"
#include "core/error.h"

#include <math.h>

/* Streaming-memory bytes step st loads (in) and stores (out); gathers are
 * between replicas, not the host. */
static void step_streams(const tg_program *p, const tg_device_program *dp, int ph,
                         const tg_step *st, double *in, double *out)
{
    *in = *out = 0;
    for (int i = 0; i < st->n_stream_in + st->n_stream_out; i++) {
        const tg_stream_op *op = &dp->streams[ph][st->stream_at + i];
        if (op->kind == TG_STREAM_GATHER)
            continue;
        double bytes = (double)p->buffers[op->home].bytes;
        if (i < st->n_stream_in)
            *in += bytes;
        else
            *out += bytes;
    }
}

/* What device d's I/O tiles can hold of copies in flight. */
static double io_staging_bytes(const tg_program *p, const tg_target_desc *tg, int d)
{
    const tg_device_program *dp = &p->devices[d];
    double room = 0.95 * (double)tg->io_tiles * (double)tg->tile_memory;
    for (int k = 0; k < dp->n_inputs; k++) {
        const tg_buffer *b = &p->buffers[dp->inputs[k]];
        room -= (double)b->stride * (double)(b->slots > 0 ? b->slots : 1);
    }
    return room > 0 ? room : 0;
}

/* The earliest time from `from` at which `bytes` more fit the staging room
 * `cap`, given that the loads of steps before k (load[j] bytes) wait there
 * until their step starts (start[j]). */
static double room_at(const double *load, const double *start, int k, double bytes, double cap,
                      double from)
{
    double t = from;
    for (;;) {
        double held = bytes, next = -1;
        for (int j = 0; j < k; j++)
            if (load[j] > 0 && start[j] > t) {
                held += load[j];
                if (next < 0 || start[j] < next)
                    next = start[j];
            }
        if (held <= cap || next < 0)
            return t;
        t = next; /* the first of them to start frees its bytes */
    }
}

tg_status tg_tile_io_pass(const tg_program *p, const tg_tile_plan *tp, int d, int ph, double *pass,
                          double *stream_cycles)
{
    const tg_target_desc *tg = &tp->target;
    const tg_device_program *dp = &p->devices[d];
    const tg_tile_device *td = &tp->devices[d];
    double rate = fmin(tg->host_bytes_per_cycle, tg->io_tiles * tg->exchange_bytes_per_cycle);
    double cap = io_staging_bytes(p, tg, d);
    int n = dp->n_steps[ph];
    double *load = tg_calloc(2 * (size_t)n + 1, sizeof(double));
    if (!load)
        return tg_error(TG_ERR_NOMEM, "tile plan: out of memory");
    double *start = load + n;
    /* io_in, io_out: when the link is free each way; end: the last step's end */
    double io_in = 0, io_out = 0, end = 0, in_all = 0, out_all = 0;
    *stream_cycles = 0;
    for (int k = 0; k < n; k++) {
        double in, out;
        step_streams(p, dp, ph, &dp->steps[ph][k], &in, &out);
        double ready = end;
        if (in > 0) {
            /* ahead of its step as far as the I/O tiles hold it */
            double early = in < cap ? in : cap;
            if (early > 0)
                io_in = room_at(load, start, k, early, cap, io_in) + early / rate;
            if (in > early) /* the rest streams once the step before is done */
                io_in = fmax(io_in, end) + (in - early) / rate;
            ready = fmax(ready, io_in);
            load[k] = early;
        }
        start[k] = ready;
        end = ready + td->step_cycles[ph][k];
        if (out > 0)
            io_out = fmax(io_out, end) + out / rate;
        in_all += in;
        out_all += out;
    }
    tg_free(load);
    /* what no step streams (gradients added into offloaded accumulators,
     * each after the step that finishes it): queued behind the rest */
    double rest_in = fmax(0, (double)dp->stream_in_bytes[ph] - in_all);
    double rest_out = fmax(0, (double)dp->stream_out_bytes[ph] - out_all);
    io_in += rest_in / rate;
    io_out += rest_out / rate;
    *stream_cycles = (in_all + out_all + rest_in + rest_out) / rate;
    /* one link for both ways, as without I/O tiles: its busy time bounds
     * the pass too (the two queues above only order the copies) */
    *pass = fmax(fmax(end, *stream_cycles), fmax(io_in, io_out));
    return TG_OK;
}

void tg_tile_gathers(const tg_program *p, const tg_tile_plan *tp, int d, tg_tile_device *td)
{
    const tg_target_desc *tg = &tp->target;
    const tg_device_program *dp = &p->devices[d];
    int r = tg_program_shards(p), tiles = tg->tiles;
    if (r < 2)
        return;
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
        for (int k = 0; k < dp->n_steps[ph]; k++) {
            const tg_step *st = &dp->steps[ph][k];
            for (int i = 0; i < st->n_stream_in; i++) {
                const tg_stream_op *op = &dp->streams[ph][st->stream_at + i];
                if (op->kind != TG_STREAM_GATHER)
                    continue;
                double bytes = (double)p->buffers[op->copy].bytes;
                td->copy_cycles[ph] += tg_allgather_cycles(tg, bytes, r, p->n_devices);
                const tg_tile_span *sp = &tp->span[op->copy];
                for (int j = 0; j < sp->used; j++) {
                    int tile = (sp->start + j) % tiles;
                    double piece_kib = (double)tg_tile_span_bytes(
                                           sp, (int64_t)p->buffers[op->copy].stride, tiles, tile) /
                                       r / 1024.0;
                    td->bytes[(size_t)tile * TG_TILE_CAT_COUNT + TG_TILE_EXCHANGE_CODE] +=
                        (int64_t)(r - 1) * (tg->exchange_code_bytes +
                                            (int64_t)(tg->exchange_code_per_kib * piece_kib));
                }
            }
        }
}

double tg_tile_hidden_cycles(const tg_program *p, int d, int ph)
{
    const tg_tile_device *td = &p->tile_plan->devices[d];
    double sum = td->copy_cycles[ph];
    for (int k = 0; k < p->devices[d].n_steps[ph]; k++)
        sum += td->step_cycles[ph][k];
    double hidden = sum - td->cycles[ph];
    return hidden > 0.5 ? hidden : 0;
}
