/* runtime/verify_ref.h - the whole graph run by the reference kernels in
 * double precision, streamed (runtime/verify.c's end-to-end figures).
 *
 * The interpreter (runtime/interp.h) holds a double of every node at once:
 * BERT-large's took more than 10 GB beside everything else `check` holds.
 * This runs the same graph node by node, but a node's double lives only
 * from the node that computes it to its last reader, leaves are converted
 * from the caller's copy each time a node reads them (a weight's double is
 * not held from the forward pass to the update), and each weight update
 * runs as soon as its gradient is computed and every other reader of its
 * weight has run (so the gradients' doubles are not all held until the
 * optimizer at the end of the graph). With gradient clipping the updates
 * stay at the end: they need the norm over every gradient.
 *
 * The caller sees every node in the order run, with its reference value,
 * while that value lives; what it computes is the same as the
 * interpreter's, number for number.
 */
#ifndef TG_RUNTIME_VERIFY_REF_H
#define TG_RUNTIME_VERIFY_REF_H

#include "graph/node.h"

#include <stddef.h>

typedef struct tg_ref_plan tg_ref_plan;

/* The order and the lifetimes for graph g (the graph outlives the plan). */
tg_status tg_ref_plan_create(const tg_graph *g, tg_ref_plan **out);
void tg_ref_plan_destroy(tg_ref_plan *p);
/* The nodes in the order run: order[0..n-1] are node ids, every node once. */
const int *tg_ref_plan_order(const tg_ref_plan *p, int *n);
/* The most bytes of doubles the run holds at once (node values, mutated
 * leaves and one node's converted leaves). */
int64_t tg_ref_plan_peak_bytes(const tg_ref_plan *p);

typedef struct tg_ref_visit {
    void *ctx;
    /* Leaf t's value as the run begins into out (tg_numel(t) doubles);
     * false when it was not kept (the initialiser's values are used then). */
    bool (*leaf)(void *ctx, const tg_tensor *t, double *out);
    /* Node order[pos] (id t->id) was run: `ref` is its reference value, or
     * NULL when there is no reference run (the caller still walks the
     * order). Leaves are visited too (with NULL). A failure stops the walk. */
    tg_status (*node)(void *ctx, const tg_tensor *t, int pos, const double *ref);
    /* Leaf t after the last node that rewrites it (an update, the running
     * statistics) ran: its reference value then. */
    void (*settled)(void *ctx, const tg_tensor *t, const double *ref);
} tg_ref_visit;

/* Run the plan (compute false: only walk the order, every ref NULL) with
 * the random ops' seed and stream and the optimizer's step. When the
 * reference cannot go on (an op without a reference kernel, out of
 * memory) the walk goes on without it and `why` (cap bytes) says why;
 * otherwise why[0] is 0. Returns the node hook's failure. */
tg_status tg_ref_plan_run(const tg_ref_plan *p, const tg_ref_visit *v, bool compute, uint64_t seed,
                          uint64_t stream, int64_t step, char *why, size_t cap);

#endif
