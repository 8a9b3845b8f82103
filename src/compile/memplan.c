/* compile/memplan.c - every buffer's place in its device's arena.
 *
 * Layout: persistent regions first (weights, optimizer state, accumulators,
 * constants), each buffer at its own offset; then the slotted regions
 * (host-stream inputs, pipeline stash, receive buffers), one slot per
 * micro-batch in flight; then the activation region, where tensors and kernel
 * scratch share offsets when their live ranges (steps on the device's
 * timeline) do not overlap. Placement is "greedy by size": the largest buffer first, each at
 * the lowest offset that does not collide with an already placed buffer live
 * at the same time. It is simple, deterministic and close to optimal on
 * layered networks; the peak of the activation region is reported as is.
 */
#include "compile/program.h"

#include "core/alloc.h"
#include "core/error.h"
#include "ops/op.h"
#include "target/target.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t bytes, offset;
    int first, last;
    size_t *out; /* where to write the offset */
} plan_item;

static int by_size_desc(const void *a_, const void *b_)
{
    const plan_item *a = a_, *b = b_;
    if (a->bytes != b->bytes)
        return a->bytes < b->bytes ? 1 : -1;
    return a->first - b->first; /* deterministic */
}

static int by_offset(const void *a_, const void *b_)
{
    const plan_item *a = *(plan_item *const *)a_, *b = *(plan_item *const *)b_;
    return a->offset < b->offset ? -1 : a->offset > b->offset;
}

/* Place items; returns the region's extent, or SIZE_MAX when out of memory. */
static size_t place_greedy(plan_item *items, int n)
{
    qsort(items, (size_t)n, sizeof *items, by_size_desc);
    plan_item **live = tg_malloc(((size_t)n + 1) * sizeof *live);
    if (!live)
        return SIZE_MAX;
    size_t extent = 0;
    for (int i = 0; i < n; i++) {
        int n_live = 0;
        for (int j = 0; j < i; j++)
            if (items[j].first <= items[i].last && items[i].first <= items[j].last)
                live[n_live++] = &items[j];
        qsort(live, (size_t)n_live, sizeof *live, by_offset);
        size_t at = 0;
        for (int j = 0; j < n_live; j++) {
            if (live[j]->offset >= at + items[i].bytes)
                break; /* fits in the gap before live[j] */
            size_t end = live[j]->offset + live[j]->bytes;
            if (end > at)
                at = tg_align(end);
        }
        items[i].offset = at;
        if (at + items[i].bytes > extent)
            extent = at + items[i].bytes;
    }
    tg_free(live);
    return extent;
}

static int timeline_base(const tg_device_program *dp, int phase)
{
    return tg_program_timeline_at(dp, (tg_phase)phase, 0);
}

int tg_program_timeline_at(const tg_device_program *dp, tg_phase ph, int s)
{
    for (int k = 0; k < (int)ph; k++)
        s += dp->n_steps[k];
    return s;
}

void tg_buffer_live_at(tg_buffer *b, int at)
{
    if (b->first < 0 || at < b->first)
        b->first = at;
    if (at > b->last)
        b->last = at;
}

/* Whether buffer b, live across step `end` of the timeline and the step
 * after, must keep a slot per micro-batch in flight: other micro-batches'
 * passes run between the two. */
static bool crosses(const tg_buffer *b, int end)
{
    return b->first <= end && b->last > end;
}

/* Live ranges of the device's activation buffers on its timeline
 * (forward steps, then backward steps (B, then W when split), then update
 * steps). */
static void compute_liveness(tg_program *p, int d)
{
    tg_device_program *dp = &p->devices[d];
    int end_f = timeline_base(dp, TG_PHASE_BACKWARD) - 1;
    int end_b = timeline_base(dp, TG_PHASE_UPDATE) - 1;
    int end_ig = end_f + dp->input_grad_steps; /* the last B step */
    bool split = tg_pipe_schedule_defers_weight(&p->schedule, d) && end_ig < end_b;
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++) {
        int base = timeline_base(dp, ph);
        for (int s = 0; s < dp->n_steps[ph]; s++) {
            const tg_step *st = &dp->steps[ph][s];
            if (st->out >= 0)
                tg_buffer_live_at(&p->buffers[st->out], base + s);
            /* a fused step reads its fused ops' inputs too (tg_step.fused) */
            for (int k = 0; k < TG_MAX_INPUTS; k++)
                if ((k < p->graph->nodes[st->node]->n_in ||
                     (st->fused && k >= TG_FUSE_IN_STATS && k < TG_FUSE_IN_END)) &&
                    st->in[k] >= 0)
                    tg_buffer_live_at(&p->buffers[st->in[k]], base + s);
        }
    }
    /* streamed to the host at the end of the forward pass */
    for (int k = 0; k < dp->n_outputs; k++)
        tg_buffer_live_at(&p->buffers[dp->outputs[k]], end_f);
    /* sent to another device at the end of the producing phase */
    for (int k = 0; k < p->n_transfers; k++) {
        const tg_transfer *t = &p->transfers[k];
        if (t->src_device == d)
            tg_buffer_live_at(&p->buffers[t->src_buffer],
                              t->phase == TG_PHASE_FORWARD ? end_f : end_ig);
    }
    /* added into the accumulators at the end of the backward pass */
    for (int k = 0; k < dp->n_accumulators; k++)
        if (!dp->accumulators[k].early) /* else added after its last step */
            tg_buffer_live_at(&p->buffers[dp->accumulators[k].grad_buffer], end_b);
    /* with micro-batches in flight, what the backward pass needs from the
     * forward pass gets a slot per micro-batch, and so does what W needs
     * from B when the schedule runs them apart */
    for (int i = 0; i < p->n_buffers; i++) {
        tg_buffer *b = &p->buffers[i];
        if (b->device == d && b->region == TG_REGION_ACTIVATION && dp->stash_depth > 1 &&
            (crosses(b, end_f) || (split && crosses(b, end_ig))))
            b->region = TG_REGION_STASH;
    }
}

/* Host-stream input buffers: a slot per micro-batch in flight, plus the
 * ones filled ahead: defaultPrefetchBufferingDepth - 1 of them, and at least
 * one with I/O tiles, whose copy of the next micro-batch overlaps the
 * current one's compute (docs/data.md, docs/targets.md). */
static int input_slots(const tg_program *p, const tg_device_program *dp)
{
    int ahead = p->config.streams.prefetch_depth - 1;
    bool io_tiles =
        p->config.target.io_tiles > 0 && tg_target_tiled(tg_target_of_config(&p->config));
    if (io_tiles && ahead < 1)
        ahead = 1;
    return dp->stash_depth + (ahead > 0 ? ahead : 0);
}

/* Slots of a slotted region on device d: one per micro-batch in flight.
 * Received values in a schedule that splits the backward get one more: W
 * still reads micro-batch j's received input after B has sent its gradient
 * back, and with only the stash's slots the previous device could not send
 * its next forward until W ends; it would wait out W on every micro-batch,
 * which serialises the devices and undoes the split. */
static int region_slots(const tg_program *p, int d, tg_region r)
{
    if (r == TG_REGION_INPUT)
        return input_slots(p, &p->devices[d]);
    int depth = p->devices[d].stash_depth;
    bool deferred = tg_pipe_schedule_splits(&p->schedule) && d > 0;
    if (r == TG_REGION_EXCHANGE && deferred && depth < p->micro_batches)
        return depth + 1;
    return depth;
}

size_t tg_program_live_bytes(const tg_program *p, int d, int at)
{
    size_t live = 0;
    for (int i = 0; i < p->n_buffers; i++) {
        const tg_buffer *b = &p->buffers[i];
        if (b->device == d && b->region == TG_REGION_ACTIVATION && b->first <= at && at <= b->last)
            live += b->bytes;
    }
    return live;
}

tg_status tg_memplan_device(tg_program *p, int d)
{
    tg_device_program *dp = &p->devices[d];
    int n_steps = timeline_base(dp, TG_PHASE_COUNT);
    plan_item *items = tg_calloc((size_t)p->n_buffers + (size_t)n_steps + 1, sizeof *items);
    if (!items)
        return tg_error(TG_ERR_NOMEM, "memory plan: out of memory");
    compute_liveness(p, d);

    /* persistent and slotted regions, one after the other */
    size_t at = 0;
    for (int r = TG_REGION_PARAM; r < TG_REGION_ACTIVATION; r++) {
        size_t start = at;
        bool slotted = r == TG_REGION_INPUT || r == TG_REGION_STASH || r == TG_REGION_EXCHANGE;
        for (int i = 0; i < p->n_buffers; i++) {
            tg_buffer *b = &p->buffers[i];
            if (b->device != d || (int)b->region != r)
                continue;
            b->slots = slotted ? region_slots(p, d, (tg_region)r) : 1;
            b->stride = tg_align(b->bytes);
            b->offset = at;
            b->first = -1;
            b->last = n_steps;
            at += b->stride * (size_t)b->slots;
        }
        dp->region_bytes[r] = at - start;
    }
    size_t act_base = at;

    int n_items = 0;
    for (int i = 0; i < p->n_buffers; i++) {
        tg_buffer *b = &p->buffers[i];
        if (b->device != d || b->region != TG_REGION_ACTIVATION)
            continue;
        if (b->first < 0)
            b->first = b->last = 0;
        b->slots = 1;
        b->stride = tg_align(b->bytes);
        items[n_items++] = (plan_item){b->bytes, 0, b->first, b->last, &b->offset};
    }
    dp->scratch_peak = 0;
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++) {
        int base = timeline_base(dp, ph);
        for (int s = 0; s < dp->n_steps[ph]; s++) {
            tg_step *st = &dp->steps[ph][s];
            if (st->scratch_bytes == 0)
                continue;
            if (st->scratch_bytes > dp->scratch_peak)
                dp->scratch_peak = st->scratch_bytes;
            items[n_items++] =
                (plan_item){st->scratch_bytes, 0, base + s, base + s, &st->scratch_offset};
        }
    }
    size_t extent = place_greedy(items, n_items);
    tg_status status = TG_OK;
    if (extent == SIZE_MAX) {
        status = tg_error(TG_ERR_NOMEM, "memory plan: out of memory");
    } else {
        for (int i = 0; i < n_items; i++)
            *items[i].out = act_base + items[i].offset;
        dp->region_bytes[TG_REGION_ACTIVATION] = tg_align(extent);
        dp->arena_bytes = act_base + tg_align(extent);
    }
    tg_free(items);
    return status;
}
