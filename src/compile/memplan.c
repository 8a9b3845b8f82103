/* compile/memplan.c - every buffer's place in the device arena.
 *
 * Layout: persistent regions first (parameters, state, constants, inputs),
 * each tensor at its own offset; then the activation region, where tensors
 * and kernel scratch share offsets when their live ranges (in steps) do not
 * overlap. Placement is "greedy by size": the largest buffer first, each at
 * the lowest offset that does not collide with an already placed buffer live
 * at the same time. It is simple, deterministic and close to optimal on
 * layered networks; the peak of the activation region is reported as is.
 */
#include "compile/program.h"

#include "core/alloc.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

static size_t align_up(size_t x) { return (x + TG_ALIGN - 1) & ~(size_t)(TG_ALIGN - 1); }

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
                at = align_up(end);
        }
        items[i].offset = at;
        if (at + items[i].bytes > extent)
            extent = at + items[i].bytes;
    }
    tg_free(live);
    return extent;
}

/* Live ranges of activation buffers from the schedule. */
static void compute_liveness(tg_program *p, const int *step_of)
{
    const tg_graph *g = p->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        tg_buffer *b = &p->buffers[p->root[i]];
        if (b->region != TG_REGION_ACTIVATION)
            continue;
        if (step_of[i] >= 0 && (b->first < 0 || step_of[i] < b->first))
            b->first = step_of[i];
        if (step_of[i] > b->last)
            b->last = step_of[i];
        if (g->nodes[i]->flags & TG_NODE_OUTPUT)
            b->last = p->n_steps;
    }
    for (int s = 0; s < p->n_steps; s++) {
        const tg_tensor *t = g->nodes[p->steps[s].node];
        for (int k = 0; k < t->n_in; k++) {
            tg_buffer *b = &p->buffers[p->root[t->in[k]->id]];
            if (b->region == TG_REGION_ACTIVATION && s > b->last)
                b->last = s;
        }
    }
}

tg_status tg_memplan(tg_program *p)
{
    const tg_graph *g = p->graph;
    int n = g->n_nodes;
    int *step_of = tg_malloc(((size_t)n + 1) * sizeof *step_of);
    plan_item *items = tg_calloc((size_t)n + (size_t)p->n_steps + 1, sizeof *items);
    if (!step_of || !items) {
        tg_free(step_of);
        tg_free(items);
        return tg_error(TG_ERR_NOMEM, "memory plan: out of memory");
    }
    for (int i = 0; i < n; i++)
        step_of[i] = -1;
    for (int s = 0; s < p->n_steps; s++)
        step_of[p->steps[s].node] = s;

    /* Persistent regions: one after the other, in region order then node order. */
    size_t at = 0;
    for (tg_region r = TG_REGION_PARAM; r <= TG_REGION_INPUT; r++) {
        size_t start = at;
        for (int i = 0; i < n; i++) {
            tg_buffer *b = &p->buffers[i];
            if (p->root[i] != i || b->region != r)
                continue;
            b->offset = at;
            b->first = -1;
            b->last = p->n_steps;
            at = align_up(at + b->bytes);
        }
        p->region_bytes[r] = at - start;
    }
    size_t act_base = at;

    compute_liveness(p, step_of);
    int n_items = 0;
    for (int i = 0; i < n; i++) {
        tg_buffer *b = &p->buffers[i];
        if (p->root[i] != i || b->region != TG_REGION_ACTIVATION)
            continue;
        if (b->first < 0) /* never produced by a step: not needed */
            b->first = b->last < 0 ? 0 : b->last;
        if (b->last < b->first)
            b->last = b->first;
        items[n_items++] = (plan_item){b->bytes, 0, b->first, b->last, &b->offset};
    }
    p->scratch_peak = 0;
    for (int s = 0; s < p->n_steps; s++) {
        tg_step *st = &p->steps[s];
        if (st->scratch_bytes == 0)
            continue;
        if (st->scratch_bytes > p->scratch_peak)
            p->scratch_peak = st->scratch_bytes;
        items[n_items++] = (plan_item){st->scratch_bytes, 0, s, s, &st->scratch_offset};
    }
    size_t extent = place_greedy(items, n_items);
    tg_status status = TG_OK;
    if (extent == SIZE_MAX) {
        status = tg_error(TG_ERR_NOMEM, "memory plan: out of memory");
    } else {
        for (int i = 0; i < n_items; i++)
            *items[i].out = act_base + items[i].offset;
        p->region_bytes[TG_REGION_ACTIVATION] = align_up(extent);
        p->arena_bytes = act_base + align_up(extent);
    }
    tg_free(step_of);
    tg_free(items);
    return status;
}
