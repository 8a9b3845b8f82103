/* target/tileplan.c - a compiled program on a tile processor: every buffer
 * of a device mapped linearly over the device's tiles, per tile memory by
 * category (variables exact, code and vertex state estimated), the per tile
 * capacity check, and a bulk-synchronous cycle estimate per step.
 *
 * Mapping: always-live buffers (weights, optimizer state, accumulators,
 * constants and the slotted host-stream, stash and receive buffers) are laid
 * one after the other from tile 0 up, each over ceil(grains / tiles) grains
 * per tile starting where the previous one ended, so small tensors do not
 * all pile up on tile 0. Activations and kernel scratch are mapped the same
 * way with their own cursor; large ones cover every tile. A tile's activation
 * bytes are its own peak over the device's timeline (a sweep over live
 * ranges), which is what a tile really needs; the device-wide arena may be
 * larger because its peak is reached at a different step on another tile.
 * Half-precision steps count only their kernel's scratch: the host engine's
 * f32 staging is not something the tile processor would hold.
 */
#include "target/tiled.h"

#include "target/collective.h"

#include "compile/program.h"
#include "core/alloc.h"
#include "core/error.h"
#include "core/units.h"
#include "ops/op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A step's scratch on the tile processor: its kernel's own. The f32 staging
 * of half-precision steps is how the host emulates them; the tile processor
 * computes in f16 and needs none. */
static int64_t device_scratch(const tg_step *st)
{
    return (int64_t)st->kernel_scratch;
}

void tg_tiled_describe(const tg_target_desc *d, tg_target_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", d->name);
    out->tiled = true;
    out->tiles = d->tiles;
    out->workers_per_tile = d->workers;
    out->memory_per_tile = d->tile_memory;
    out->memory_per_device = d->tile_memory * d->tiles;
    out->clock_hz = d->clock_hz;
}

int64_t tg_tiled_device_memory(const tg_target_desc *t)
{
    return (int64_t)t->tiles * t->tile_memory;
}

tg_status tg_tiled_set_io_tiles(const tg_config *c, tg_target_desc *out)
{
    out->io_tiles = c->target.io_tiles;
    if (out->io_tiles >= out->tiles)
        return tg_error(TG_ERR_CONFIG,
                        "numIOTiles %d: %s has %d tiles per device and at least one must compute",
                        out->io_tiles, out->name, out->tiles);
    return TG_OK;
}

const char *tg_tile_cat_name(tg_tile_cat c)
{
    static const char *const names[] = {
#define TG_TILE_CAT_NAME(e, name) name,
        TG_TILE_CAT_LIST(TG_TILE_CAT_NAME)
#undef TG_TILE_CAT_NAME
    };
    return (unsigned)c < TG_TILE_CAT_COUNT ? names[c] : "?";
}

tg_tile_span tg_tile_map_linear(int64_t bytes, int64_t grain, int tiles, int start)
{
    tg_tile_span sp = {start % tiles, 0, 0};
    if (bytes <= 0)
        return sp;
    int64_t grains = (bytes + grain - 1) / grain;
    int64_t per = (grains + tiles - 1) / tiles;
    sp.chunk = per * grain;
    sp.used = (int)((bytes + sp.chunk - 1) / sp.chunk);
    return sp;
}

int64_t tg_tile_span_bytes(const tg_tile_span *sp, int64_t bytes, int tiles, int t)
{
    if (sp->used <= 0)
        return 0;
    int k = (t - sp->start + tiles) % tiles; /* position of tile t in the span */
    if (k >= sp->used)
        return 0;
    return k < sp->used - 1 ? sp->chunk : bytes - sp->chunk * (sp->used - 1);
}

/* Add `v` per byte-share of a span to every tile it covers. */
static void span_add(int64_t *bytes, int cat, const tg_tile_span *sp, int64_t total, int tiles)
{
    for (int k = 0; k < sp->used; k++) {
        int t = (sp->start + k) % tiles;
        int64_t b = k < sp->used - 1 ? sp->chunk : total - sp->chunk * (sp->used - 1);
        bytes[(size_t)t * TG_TILE_CAT_COUNT + cat] += b;
    }
}

double tg_tile_step_cycles(const tg_target_desc *t, double flops, bool f16, int tiles_used,
                           double exchange_bytes, double *compute, double *exchange)
{
    if (tiles_used < 1)
        tiles_used = 1;
    double rate = f16 ? t->flops_per_cycle_f16 : t->flops_per_cycle_f32;
    double c = flops / ((double)tiles_used * rate);
    double x = exchange_bytes / ((double)tiles_used * t->exchange_bytes_per_cycle);
    if (compute)
        *compute = c;
    if (exchange)
        *exchange = x;
    return c + x + t->sync_cycles;
}

static int64_t buffer_bytes(const tg_buffer *b)
{
    return b->region == TG_REGION_ACTIVATION ? (int64_t)b->stride
                                             : (int64_t)(b->stride * (size_t)b->slots);
}

static bool same_span(const tg_tile_span *a, const tg_tile_span *b)
{
    return a->start == b->start && a->used == b->used && a->chunk == b->chunk;
}

typedef struct {
    int time;
    int sign; /* -1 ends (at last + 1), +1 starts */
    tg_tile_span span;
    int64_t bytes;
} live_event;

static int by_time(const void *a_, const void *b_)
{
    const live_event *a = a_, *b = b_;
    if (a->time != b->time)
        return a->time < b->time ? -1 : 1;
    return a->sign - b->sign; /* ends before starts at the same step */
}

/* Activations (and scratch) at each tile's peak over the timeline. */
static tg_status activation_peaks(const tg_program *p, const tg_tile_plan *tp, int d,
                                  const tg_tile_span *scratch_span, tg_tile_device *td)
{
    const tg_device_program *dp = &p->devices[d];
    int tiles = tp->target.tiles, n_steps = 0;
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
        n_steps += dp->n_steps[ph];
    live_event *ev = tg_malloc(2 * ((size_t)p->n_buffers + (size_t)n_steps + 1) * sizeof *ev);
    int64_t *cur = tg_calloc((size_t)tiles, sizeof *cur);
    if (!ev || !cur) {
        tg_free(ev);
        tg_free(cur);
        return tg_error(TG_ERR_NOMEM, "tile plan: out of memory");
    }
    int n = 0;
    for (int i = 0; i < p->n_buffers; i++) {
        const tg_buffer *b = &p->buffers[i];
        if (b->device != d || b->region != TG_REGION_ACTIVATION || b->first < 0)
            continue;
        ev[n++] = (live_event){b->first, 1, tp->span[i], buffer_bytes(b)};
        ev[n++] = (live_event){b->last + 1, -1, tp->span[i], buffer_bytes(b)};
    }
    for (int ph = 0, base = 0; ph < TG_PHASE_COUNT; base += dp->n_steps[ph++])
        for (int s = 0; s < dp->n_steps[ph]; s++) {
            int64_t sb = device_scratch(&dp->steps[ph][s]);
            if (sb == 0)
                continue;
            ev[n++] = (live_event){base + s, 1, scratch_span[base + s], sb};
            ev[n++] = (live_event){base + s + 1, -1, scratch_span[base + s], sb};
        }
    qsort(ev, (size_t)n, sizeof *ev, by_time);
    for (int i = 0; i < n;) {
        int time = ev[i].time;
        bool grew = false;
        for (; i < n && ev[i].time == time; i++) {
            const live_event *e = &ev[i];
            for (int k = 0; k < e->span.used; k++) {
                int t = (e->span.start + k) % tiles;
                int64_t b = k < e->span.used - 1 ? e->span.chunk
                                                 : e->bytes - e->span.chunk * (e->span.used - 1);
                cur[t] += e->sign * b;
            }
            grew |= e->sign > 0;
        }
        for (int t = 0; grew && t < tiles; t++) {
            int64_t *peak = &td->bytes[(size_t)t * TG_TILE_CAT_COUNT + TG_TILE_ACTIVATIONS];
            if (cur[t] > *peak) {
                *peak = cur[t];
                td->peak_step[t] = time;
            }
        }
    }
    tg_free(ev);
    tg_free(cur);
    return TG_OK;
}

/* The tiles a step's work runs on: where its output is mapped (or its
 * largest input when it has no output buffer). */
static tg_tile_span work_span(const tg_program *p, const tg_tile_plan *tp, const tg_step *st)
{
    if (st->out >= 0 && tp->span[st->out].used > 0)
        return tp->span[st->out];
    const tg_tensor *t = p->graph->nodes[st->node];
    int best = -1;
    for (int k = 0; k < t->n_in; k++)
        if (st->in[k] >= 0 && (best < 0 || p->buffers[st->in[k]].bytes > p->buffers[best].bytes))
            best = st->in[k];
    if (best >= 0 && tp->span[best].used > 0)
        return tp->span[best];
    return (tg_tile_span){0, 1, 0};
}

/* Bytes a step receives for input buffer `in` when its work runs on w. An
 * input spread over more tiles than the work is reduced where it lives
 * first, as Poplar's reductions are (a loss, a norm, a bias or weight
 * gradient): each of its tiles sends partial results of the output's size,
 * not its share of the input. Receiving the whole input would pile a
 * model's worth of exchange code on the output's few tiles. */
static double received_bytes(const tg_program *p, const tg_tile_plan *tp, const tg_step *st, int in,
                             const tg_tile_span *w)
{
    const tg_tile_span *from = &tp->span[in];
    double bytes = (double)p->buffers[in].bytes;
    if (st->out >= 0 && from->used > w->used) {
        double partials = (double)from->used * (double)p->buffers[st->out].bytes;
        if (partials < bytes)
            bytes = partials;
    }
    return bytes;
}

/* The all-reduce between replicas as a ring (what collective libraries do
 * on these machines): each of the R replicas' gradient buffers is cut into R
 * pieces and passed round in 2(R - 1) exchange steps, a reduce-scatter then
 * an all-gather. Every step is exchange code on every tile that holds part
 * of an accumulator, so this code grows with the replicas (seed 002, table
 * 4.1); one replica needs none. */
static void allreduce_code(const tg_program *p, const tg_tile_plan *tp, const tg_device_program *dp,
                           const tg_target_desc *tg, tg_tile_device *td)
{
    int r = p->replicas, tiles = tg->tiles;
    if (r < 2)
        return;
    for (int k = 0; k < dp->n_accumulators; k++) {
        int b = dp->accumulators[k].acc_buffer;
        if (b < 0 || b >= p->n_buffers)
            continue;
        const tg_tile_span *sp = &tp->span[b];
        for (int j = 0; j < sp->used; j++) {
            int tile = (sp->start + j) % tiles;
            double piece_kib =
                (double)tg_tile_span_bytes(sp, buffer_bytes(&p->buffers[b]), tiles, tile) / r /
                1024.0;
            td->bytes[(size_t)tile * TG_TILE_CAT_COUNT + TG_TILE_EXCHANGE_CODE] +=
                2 * (int64_t)(r - 1) *
                (tg->exchange_code_bytes + (int64_t)(tg->exchange_code_per_kib * piece_kib));
        }
    }
}

/* The time of that all-reduce on device d, once per weight update: its
 * gradient accumulators over the pod's IPU-Links and gateways
 * (target/collective.h), part of the update's copies. */
static void allreduce_time(const tg_program *p, const tg_device_program *dp,
                           const tg_target_desc *tg, tg_tile_device *td)
{
    double bytes = 0;
    for (int k = 0; k < dp->n_accumulators; k++) {
        int b = dp->accumulators[k].acc_buffer;
        if (b >= 0 && b < p->n_buffers)
            bytes += (double)buffer_bytes(&p->buffers[b]);
    }
    tg_allreduce_cost c = tg_allreduce_cost_of(tg, bytes, p->replicas, p->n_devices);
    td->allreduce_bytes = p->replicas > 1 ? bytes : 0;
    td->allreduce_cycles = c.cycles;
    td->allreduce_gateway_cycles = c.gateway_cycles;
    td->copy_cycles[TG_PHASE_UPDATE] += c.cycles;
}

/* The linear mapping of `bytes` over tiles [base, base + n) from *cursor,
 * which moves on past it. Over the whole device (no I/O tiles) a buffer
 * wraps around from the last tile to tile 0; within a part of it (the
 * compute or the I/O tiles) it starts again at the part's first tile
 * instead, so no span leaves its part. */
static tg_tile_span place(const tg_target_desc *tg, int64_t bytes, int base, int n, int *cursor)
{
    if (n == tg->tiles) {
        tg_tile_span sp = tg_tile_map_linear(bytes, tg->grain_bytes, n, *cursor);
        *cursor = (sp.start + sp.used) % n;
        return sp;
    }
    tg_tile_span sp = tg_tile_map_linear(bytes, tg->grain_bytes, n, 0);
    if (*cursor + sp.used > n)
        *cursor = 0;
    sp.start = base + *cursor;
    *cursor = (*cursor + sp.used) % n;
    return sp;
}

/* Every buffer of device d over its tiles: always-live ones from tile 0 up,
 * activations and scratch with a cursor of their own; with I/O tiles the
 * host-stream inputs on the last io_tiles tiles, everything else before them. */
static void map_buffers(const tg_program *p, tg_tile_plan *tp, int d, tg_tile_span *scratch_span)
{
    const tg_target_desc *tg = &tp->target;
    const tg_device_program *dp = &p->devices[d];
    tg_tile_device *td = &tp->devices[d];
    int tiles = tg->tiles, compute = tiles - tg->io_tiles;
    int live_cursor = 0, act_cursor = 0, io_cursor = 0;
    for (int r = TG_REGION_PARAM; r < TG_REGION_COUNT; r++)
        for (int i = 0; i < p->n_buffers; i++) {
            const tg_buffer *b = &p->buffers[i];
            if (b->device != d || (int)b->region != r)
                continue;
            int64_t bytes = buffer_bytes(b);
            bool io = tg->io_tiles > 0 && r == TG_REGION_INPUT;
            int *cursor = io ? &io_cursor : r == TG_REGION_ACTIVATION ? &act_cursor : &live_cursor;
            tp->span[i] = io ? place(tg, bytes, compute, tg->io_tiles, cursor)
                             : place(tg, bytes, 0, compute, cursor);
            if (r != TG_REGION_ACTIVATION)
                span_add(td->bytes, TG_TILE_ALWAYS_LIVE, &tp->span[i], bytes, tiles);
        }
    for (int ph = 0, base = 0; ph < TG_PHASE_COUNT; base += dp->n_steps[ph++])
        for (int s = 0; s < dp->n_steps[ph]; s++)
            scratch_span[base + s] =
                place(tg, device_scratch(&dp->steps[ph][s]), 0, compute, &act_cursor);
}

double tg_tile_stream_in_cycles(const tg_program *p, int d)
{
    const tg_device_program *dp = &p->devices[d];
    double bytes = 0;
    for (int k = 0; k < dp->n_inputs; k++)
        bytes += (double)p->buffers[dp->inputs[k]].bytes;
    return bytes / p->tile_plan->target.host_bytes_per_cycle;
}

static tg_status plan_device(const tg_program *p, tg_tile_plan *tp, int d)
{
    const tg_target_desc *tg = &tp->target;
    const tg_device_program *dp = &p->devices[d];
    tg_tile_device *td = &tp->devices[d];
    int tiles = tg->tiles, n_steps = 0;
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
        n_steps += dp->n_steps[ph];
    td->bytes = tg_calloc((size_t)tiles * TG_TILE_CAT_COUNT, sizeof *td->bytes);
    td->peak_step = tg_calloc((size_t)tiles, sizeof *td->peak_step);
    tg_tile_span *scratch_span = tg_calloc((size_t)n_steps + 1, sizeof *scratch_span);
    unsigned char *kinds = tg_calloc((size_t)tiles * TG_OP_COUNT, 1);
    td->vertex_types = tg_calloc((size_t)TG_OP_COUNT * 3, sizeof *td->vertex_types);
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
        td->step_cycles[ph] = tg_calloc((size_t)dp->n_steps[ph] + 1, sizeof(double));
    bool ok = td->bytes && td->peak_step && scratch_span && kinds && td->vertex_types &&
              td->step_cycles[0] && td->step_cycles[1] && td->step_cycles[2];
    if (!ok) {
        tg_free(scratch_span);
        tg_free(kinds);
        return tg_error(TG_ERR_NOMEM, "tile plan: out of memory");
    }

    map_buffers(p, tp, d, scratch_span);
    tg_status s = activation_peaks(p, tp, d, scratch_span, td);
    tg_free(scratch_span);
    if (s != TG_OK) {
        tg_free(kinds);
        return s;
    }

    /* estimated code and vertex state, and cycles, per step */
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
        for (int k = 0; k < dp->n_steps[ph]; k++) {
            const tg_step *st = &dp->steps[ph][k];
            const tg_tensor *t = p->graph->nodes[st->node];
            tg_tile_span w = work_span(p, tp, st);
            td->compute_sets++;
            td->vertices += (int64_t)w.used * tg->workers;
            td->edges += (int64_t)w.used * tg->workers * (t->n_in + 1);
            if ((unsigned)t->op < TG_OP_COUNT) {
                td->vertex_types[t->op * 3] += (int64_t)w.used * tg->workers;
                td->vertex_types[t->op * 3 + 1] +=
                    (int64_t)w.used * tg->workers * tg->vertex_state_bytes;
            }
            double moved = 0;
            for (int j = 0; j < t->n_in; j++)
                if (st->in[j] >= 0 && !same_span(&tp->span[st->in[j]], &w))
                    moved += received_bytes(p, tp, st, st->in[j], &w);
            double per_tile_kib = moved / w.used / 1024.0;
            for (int j = 0; j < w.used; j++) {
                int tile = (w.start + j) % tiles;
                int64_t *row = &td->bytes[(size_t)tile * TG_TILE_CAT_COUNT];
                row[TG_TILE_VERTEX_STATE] += (int64_t)tg->workers * tg->vertex_state_bytes;
                row[TG_TILE_EXCHANGE_CODE] +=
                    tg->exchange_code_bytes + (int64_t)(tg->exchange_code_per_kib * per_tile_kib);
                if ((unsigned)t->op < TG_OP_COUNT)
                    kinds[(size_t)tile * TG_OP_COUNT + t->op] = 1;
            }
            const tg_op_def *def = tg_op_get(t->op);
            double flops = def && def->flops ? def->flops(t) : 0;
            td->step_cycles[ph][k] = tg_tile_step_cycles(tg, flops, p->storage[t->id] == TG_F16,
                                                         w.used, moved, NULL, NULL);
            td->cycles[ph] += td->step_cycles[ph][k];
        }

    /* copies: host streams in before the forward pass and out after it,
     * device-to-device transfers after the producing phase, streamed copies
     * of offloaded tensors in and out around the steps that use them
     * (compile/streaming.c); their exchange code on the tiles they touch */
    for (int i = 0; i < p->n_buffers; i++) {
        const tg_buffer *b = &p->buffers[i];
        if (b->device != d)
            continue;
        bool streamed =
            b->region == TG_REGION_INPUT || b->region == TG_REGION_EXCHANGE || b->copy_of >= 0;
        for (int k = 0; k < dp->n_outputs && !streamed; k++)
            streamed = dp->outputs[k] == i;
        for (int k = 0; k < p->n_transfers && !streamed; k++)
            streamed = p->transfers[k].src_buffer == i;
        if (!streamed)
            continue;
        const tg_tile_span *sp = &tp->span[i];
        for (int j = 0; j < sp->used; j++) {
            int tile = (sp->start + j) % tiles;
            int64_t on = tg_tile_span_bytes(sp, buffer_bytes(b), tiles, tile);
            td->bytes[(size_t)tile * TG_TILE_CAT_COUNT + TG_TILE_EXCHANGE_CODE] +=
                tg->exchange_code_bytes + (int64_t)(tg->exchange_code_per_kib * on / 1024.0);
        }
    }
    allreduce_code(p, tp, dp, tg, td);
    allreduce_time(p, dp, tg, td);
    /* with I/O tiles the inputs' copy runs beside the compute (tilesim.c) */
    if (tg->io_tiles == 0)
        td->copy_cycles[TG_PHASE_FORWARD] += tg_tile_stream_in_cycles(p, d);
    for (int k = 0; k < dp->n_outputs; k++)
        td->copy_cycles[TG_PHASE_FORWARD] +=
            (double)p->buffers[dp->outputs[k]].bytes / tg->host_bytes_per_cycle;
    for (int k = 0; k < p->n_transfers; k++) {
        const tg_transfer *x = &p->transfers[k];
        if (x->src_device == d || x->dst_device == d)
            td->copy_cycles[x->phase] +=
                (double)p->buffers[x->src_buffer].bytes / tg->link_bytes_per_cycle;
    }
    tg_tile_gathers(p, tp, d, td);
    /* streaming memory's bandwidth is the host's; with I/O tiles its copies
     * run there beside the compute (tilestream.c), the rest after it */
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++) {
        double pass = td->cycles[ph], streamed = 0;
        bool io = tg->io_tiles > 0;
        if (io) {
            tg_status st = tg_tile_io_pass(p, tp, d, ph, &pass, &streamed);
            if (st != TG_OK) {
                tg_free(kinds);
                return st;
            }
        } else {
            streamed = (double)(dp->stream_in_bytes[ph] + dp->stream_out_bytes[ph]) /
                       tg->host_bytes_per_cycle;
        }
        td->copy_cycles[ph] += streamed;
        if (td->copy_cycles[ph] > 0)
            td->copy_cycles[ph] += tg->sync_cycles;
        td->cycles[ph] = pass + (io ? td->copy_cycles[ph] - streamed : td->copy_cycles[ph]);
    }

    /* vertex code per distinct op kind, control code for every step on every tile */
    for (int tile = 0; tile < tiles; tile++) {
        int64_t *row = &td->bytes[(size_t)tile * TG_TILE_CAT_COUNT];
        int n_kinds = 0;
        for (int op = 0; op < TG_OP_COUNT; op++) {
            n_kinds += kinds[(size_t)tile * TG_OP_COUNT + op];
            td->vertex_types[op * 3 + 2] +=
                kinds[(size_t)tile * TG_OP_COUNT + op] * (int64_t)tg->vertex_code_bytes;
        }
        row[TG_TILE_VERTEX_CODE] = n_kinds * tg->vertex_code_bytes;
        row[TG_TILE_CONTROL_CODE] = (int64_t)n_steps * tg->control_code_bytes;
    }
    tg_free(kinds);

    td->max_tile = 0;
    td->max_bytes = -1;
    for (int tile = 0; tile < tiles; tile++) {
        int64_t sum = 0;
        for (int c = 0; c < TG_TILE_CAT_COUNT; c++) {
            sum += td->bytes[(size_t)tile * TG_TILE_CAT_COUNT + c];
            td->total[c] += td->bytes[(size_t)tile * TG_TILE_CAT_COUNT + c];
        }
        if (sum > td->max_bytes) {
            td->max_bytes = sum;
            td->max_tile = tile;
        }
    }
    return TG_OK;
}

tg_status tg_tile_plan_build(tg_program *p, const tg_target_desc *t)
{
    tg_tile_plan *tp = tg_calloc(1, sizeof *tp);
    if (!tp)
        return tg_error(TG_ERR_NOMEM, "tile plan: out of memory");
    tp->target = *t;
    tp->n_devices = p->n_devices;
    tp->span = tg_calloc((size_t)p->n_buffers + 1, sizeof *tp->span);
    tp->devices = tg_calloc((size_t)p->n_devices, sizeof *tp->devices);
    p->tile_plan = tp;
    if (!tp->span || !tp->devices)
        return tg_error(TG_ERR_NOMEM, "tile plan: out of memory");
    for (int d = 0; d < p->n_devices; d++)
        TG_TRY(plan_device(p, tp, d));
    return TG_OK;
}

void tg_tile_plan_destroy(tg_tile_plan *tp)
{
    if (!tp)
        return;
    for (int d = 0; tp->devices && d < tp->n_devices; d++) {
        tg_free(tp->devices[d].bytes);
        tg_free(tp->devices[d].peak_step);
        tg_free(tp->devices[d].vertex_types);
        for (int ph = 0; ph < 3; ph++)
            tg_free(tp->devices[d].step_cycles[ph]);
    }
    tg_free(tp->devices);
    tg_free(tp->span);
    tg_free(tp);
}

int64_t tg_tile_bytes(const tg_tile_plan *tp, int d, int t)
{
    int64_t sum = 0;
    for (int c = 0; c < TG_TILE_CAT_COUNT; c++)
        sum += tp->devices[d].bytes[(size_t)t * TG_TILE_CAT_COUNT + c];
    return sum;
}

static tg_status tile_out_of_memory(const tg_program *p, int d)
{
    const tg_tile_plan *tp = p->tile_plan;
    const tg_tile_device *td = &tp->devices[d];
    int tile = td->max_tile, over = 0, tiles = tp->target.tiles;
    for (int t = 0; t < tiles; t++)
        over += tg_tile_bytes(tp, d, t) > tp->target.tile_memory;
    const int64_t *row = &td->bytes[(size_t)tile * TG_TILE_CAT_COUNT];
    char msg[3072], a[32], b[32];
    size_t used = (size_t)snprintf(
        msg, sizeof msg,
        "device %d tile %d needs %s but has %s (%s memory per tile; %d of %d "
        "tiles over)",
        d, tile, tg_bytes_str((double)td->max_bytes, a, sizeof a),
        tg_bytes_str((double)tp->target.tile_memory, b, sizeof b), tp->target.name, over, tiles);
    bool shown[TG_TILE_CAT_COUNT] = {0};
    for (int k = 0; k < TG_TILE_CAT_COUNT && used < sizeof msg; k++) {
        int best = -1;
        for (int c = 0; c < TG_TILE_CAT_COUNT; c++)
            if (!shown[c] && row[c] > 0 && (best < 0 || row[c] > row[best]))
                best = c;
        if (best < 0)
            break;
        shown[best] = true;
        used += (size_t)snprintf(msg + used, sizeof msg - used, "%s %s %s",
                                 k ? "," : "; largest:", tg_tile_cat_name((tg_tile_cat)best),
                                 tg_bytes_str((double)row[best], a, sizeof a));
    }
    /* the tensors on that tile: always-live ones and those live at its peak */
    enum { TOP = 5 };
    int top[TOP];
    int64_t top_bytes[TOP];
    for (int k = 0; k < TOP; k++)
        top[k] = -1, top_bytes[k] = 0;
    int at = td->peak_step[tile];
    for (int i = 0; i < p->n_buffers; i++) {
        const tg_buffer *buf = &p->buffers[i];
        if (buf->device != d)
            continue;
        if (buf->region == TG_REGION_ACTIVATION && !(buf->first <= at && at <= buf->last))
            continue;
        int64_t on = tg_tile_span_bytes(&tp->span[i], buffer_bytes(buf), tiles, tile);
        for (int k = 0; k < TOP; k++)
            if (on > top_bytes[k]) {
                for (int j = TOP - 1; j > k; j--)
                    top[j] = top[j - 1], top_bytes[j] = top_bytes[j - 1];
                top[k] = i;
                top_bytes[k] = on;
                break;
            }
    }
    for (int k = 0; k < TOP && top[k] >= 0 && used < sizeof msg; k++) {
        const tg_buffer *buf = &p->buffers[top[k]];
        used += (size_t)snprintf(
            msg + used, sizeof msg - used, "%s '%s' (%s) %s",
            k ? "," : "; largest tensors on the tile:", p->graph->nodes[buf->node]->name,
            tg_region_name(buf->region), tg_bytes_str((double)top_bytes[k], a, sizeof a));
    }
    return tg_error(TG_ERR_CAPACITY,
                    "%s. Set debug.allowOutOfMemory to compile it anyway and look "
                    "at the plan",
                    msg);
}

/* The fullest of m I/O tiles if device d's host-stream inputs were mapped
 * on them: the inputs, their exchange code and the control code every tile
 * holds (what plan_device puts there). */
static int64_t io_tile_peak(const tg_program *p, int d, int m)
{
    const tg_target_desc *tg = &p->tile_plan->target;
    const tg_device_program *dp = &p->devices[d];
    int64_t *on = tg_calloc((size_t)m, sizeof *on), peak = 0;
    if (!on)
        return INT64_MAX;
    int cursor = 0, base = tg->tiles - m, n_steps = 0;
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
        n_steps += dp->n_steps[ph];
    for (int i = 0; i < p->n_buffers; i++) {
        const tg_buffer *b = &p->buffers[i];
        if (b->device != d || b->region != TG_REGION_INPUT)
            continue;
        tg_tile_span sp = place(tg, buffer_bytes(b), base, m, &cursor);
        for (int k = 0; k < sp.used; k++) {
            int64_t bytes = tg_tile_span_bytes(&sp, buffer_bytes(b), tg->tiles, sp.start + k);
            on[sp.start + k - base] += bytes + tg->exchange_code_bytes +
                                       (int64_t)(tg->exchange_code_per_kib * bytes / 1024.0);
        }
    }
    for (int t = 0; t < m; t++)
        if (on[t] + n_steps * tg->control_code_bytes > peak)
            peak = on[t] + n_steps * tg->control_code_bytes;
    tg_free(on);
    return peak;
}

/* Device d's I/O tiles cannot hold its host-stream inputs: the error names
 * the fullest one, the shortfall, the inputs and the numIOTiles that fits. */
static tg_status io_tiles_short(const tg_program *p, int d, int tile, int64_t need)
{
    const tg_target_desc *tg = &p->tile_plan->target;
    const tg_device_program *dp = &p->devices[d];
    char a[32], b[32], c[32], inputs[512] = "";
    size_t used = 0;
    for (int k = 0; k < dp->n_inputs && used < sizeof inputs; k++) {
        const tg_buffer *buf = &p->buffers[dp->inputs[k]];
        used += (size_t)snprintf(inputs + used, sizeof inputs - used, "%s'%s' %s x %d slots",
                                 k ? ", " : "", p->graph->nodes[buf->node]->name,
                                 tg_bytes_str((double)buf->bytes, a, sizeof a), buf->slots);
    }
    int fits = tg->io_tiles + 1;
    while (fits < tg->tiles && io_tile_peak(p, d, fits) > tg->tile_memory)
        fits++;
    char hint[96];
    if (fits < tg->tiles)
        snprintf(hint, sizeof hint, "numIOTiles=%d would hold them", fits);
    else
        snprintf(hint, sizeof hint, "no numIOTiles below %d holds them", tg->tiles);
    return tg_error(TG_ERR_CAPACITY,
                    "device %d: its %d I/O tile%s (numIOTiles) cannot hold a micro-batch of its "
                    "host-stream inputs (%s): tile %d needs %s but has %s (%s memory per tile), "
                    "%s short; %s",
                    d, tg->io_tiles, tg->io_tiles == 1 ? "" : "s", inputs, tile,
                    tg_bytes_str((double)need, a, sizeof a),
                    tg_bytes_str((double)tg->tile_memory, b, sizeof b), tg->name,
                    tg_bytes_str((double)(need - tg->tile_memory), c, sizeof c), hint);
}

/* With I/O tiles: the fullest of them against the tile memory. */
static tg_status check_io_tiles(const tg_program *p, int d)
{
    const tg_tile_plan *tp = p->tile_plan;
    int tiles = tp->target.tiles, worst = -1;
    int64_t need = 0;
    for (int t = tiles - tp->target.io_tiles; t < tiles; t++)
        if (tg_tile_bytes(tp, d, t) > need) {
            need = tg_tile_bytes(tp, d, t);
            worst = t;
        }
    return need > tp->target.tile_memory ? io_tiles_short(p, d, worst, need) : TG_OK;
}

tg_status tg_tile_plan_check(const tg_program *p)
{
    const tg_tile_plan *tp = p->tile_plan;
    for (int d = 0; tp && tp->target.io_tiles > 0 && d < tp->n_devices; d++)
        TG_TRY(check_io_tiles(p, d));
    for (int d = 0; tp && d < tp->n_devices; d++)
        if (tp->devices[d].max_bytes > tp->target.tile_memory)
            return tile_out_of_memory(p, d);
    return TG_OK;
}
