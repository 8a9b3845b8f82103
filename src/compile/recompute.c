/* compile/recompute.c - recomputing activations in the backward pass.
 *
 * With recomputation, a device keeps for the backward pass only what it
 * cannot recompute: its inputs (from the host or other devices) and the
 * values marked as checkpoints. Every other forward value a backward step
 * reads is computed again at the start of the backward pass, into a buffer
 * of its own that lives only in the backward phase; the forward buffer then
 * dies within the forward phase and needs no stash slots. Ops that mutate
 * state (running statistics) are never re-run. Kernels are deterministic, so
 * the recomputed values, and so the training, are bit-identical.
 */
#include "compile/program.h"

#include "core/alloc.h"
#include "core/error.h"
#include "ops/op.h"

#include <string.h>

/* The forward node whose recomputable value buffer b holds, or NULL. */
static const tg_tensor *recomputable(const tg_program *p, int d, int b)
{
    if (b < 0)
        return NULL;
    const tg_buffer *buf = &p->buffers[b];
    const tg_tensor *t = p->graph->nodes[buf->node];
    if (buf->device != d || buf->region != TG_REGION_ACTIVATION || buf->offloaded || t->n_in == 0 ||
        (t->flags & (TG_NODE_BACKWARD | TG_NODE_OPTIMIZER | TG_NODE_CHECKPOINT)) ||
        t->n_mutated > 0 || p->home[t->id] != b)
        return NULL;
    return t;
}

/* A recompute step reads a value received from another device (a stage
 * input) in the backward phase: its receive slot must stay the value's
 * until this device's backward of the micro-batch, not be released to the
 * sender after the forward (which let the next micro-batch overwrite it
 * and the backward recompute from the wrong input). */
static void hold_received(tg_program *p, int d, const tg_step *st)
{
    const tg_tensor *t = p->graph->nodes[st->node];
    for (int k = 0; k < t->n_in; k++)
        for (int i = 0; st->in[k] >= 0 && i < p->n_transfers; i++)
            if (p->transfers[i].dst_device == d && p->transfers[i].dst_buffer == st->in[k])
                p->transfers[i].used_backward = true;
}

static tg_status recompute_device(tg_program *p, int d)
{
    tg_device_program *dp = &p->devices[d];
    int nf = dp->n_steps[TG_PHASE_FORWARD], nb = dp->n_steps[TG_PHASE_BACKWARD];
    int *remap = tg_malloc(((size_t)p->n_buffers + (size_t)nf + 1) * sizeof(int));
    bool *needed = tg_calloc((size_t)nf + 1, sizeof(bool));
    tg_step *old_b = tg_malloc(((size_t)nb + 1) * sizeof(tg_step));
    if (!remap || !needed || !old_b) {
        tg_free(remap);
        tg_free(needed);
        tg_free(old_b);
        return tg_error(TG_ERR_NOMEM, "recomputation: out of memory");
    }
    for (int i = 0; i < p->n_buffers + nf; i++)
        remap[i] = -1;
    /* which forward steps the backward pass needs again: those whose value a
     * backward step reads, and (walking back) the inputs they need in turn */
    const tg_step *fwd = dp->steps[TG_PHASE_FORWARD];
    for (int s = 0; s < nb; s++)
        for (int k = 0; k < TG_MAX_INPUTS; k++) {
            const tg_step *st = &dp->steps[TG_PHASE_BACKWARD][s];
            if (k >= p->graph->nodes[st->node]->n_in || !recomputable(p, d, st->in[k]))
                continue;
            for (int f = 0; f < nf; f++)
                if (fwd[f].out == st->in[k])
                    needed[f] = true;
        }
    for (int f = nf - 1; f >= 0; f--) {
        if (!needed[f])
            continue;
        const tg_tensor *t = p->graph->nodes[fwd[f].node];
        for (int k = 0; k < t->n_in; k++)
            if (recomputable(p, d, fwd[f].in[k]))
                for (int e = 0; e < f; e++)
                    if (fwd[e].out == fwd[f].in[k])
                        needed[e] = true;
    }
    /* the recompute steps first, in forward order, into buffers of their own */
    memcpy(old_b, dp->steps[TG_PHASE_BACKWARD], (size_t)nb * sizeof(tg_step));
    int n = 0;
    tg_status status = TG_OK;
    for (int f = 0; f < nf && status == TG_OK; f++) {
        if (!needed[f])
            continue;
        tg_step st = fwd[f];
        const tg_tensor *t = p->graph->nodes[st.node];
        for (int k = 0; k < t->n_in; k++)
            if (st.in[k] >= 0 && remap[st.in[k]] >= 0)
                st.in[k] = remap[st.in[k]];
        if (p->n_buffers == p->cap_buffers) {
            int cap = 2 * p->cap_buffers;
            tg_buffer *nbuf = tg_realloc(p->buffers, (size_t)cap * sizeof *nbuf);
            if (!nbuf) {
                status = tg_error(TG_ERR_NOMEM, "recomputation: out of memory");
                break;
            }
            p->buffers = nbuf;
            p->cap_buffers = cap;
        }
        hold_received(p, d, &st);
        int rb = p->n_buffers++;
        p->buffers[rb] = p->buffers[fwd[f].out];
        p->buffers[rb].first = p->buffers[rb].last = -1;
        remap[fwd[f].out] = rb;
        st.out = rb;
        dp->steps[TG_PHASE_BACKWARD][n++] = st;
        const tg_op_def *def = tg_op_get(t->op);
        if (def && def->flops)
            dp->flops[TG_PHASE_BACKWARD] += def->flops(t);
    }
    /* then the backward steps, reading the recomputed values */
    for (int s = 0; s < nb && status == TG_OK; s++) {
        tg_step st = old_b[s];
        for (int k = 0; k < TG_MAX_INPUTS; k++)
            if (k < p->graph->nodes[st.node]->n_in && st.in[k] >= 0 && st.in[k] < p->n_buffers &&
                remap[st.in[k]] >= 0)
                st.in[k] = remap[st.in[k]];
        dp->steps[TG_PHASE_BACKWARD][n++] = st;
    }
    dp->n_steps[TG_PHASE_BACKWARD] = n;
    tg_free(remap);
    tg_free(needed);
    tg_free(old_b);
    return status;
}

tg_status tg_recompute(tg_program *p)
{
    for (int d = 0; d < p->n_devices; d++)
        TG_TRY(recompute_device(p, d));
    return TG_OK;
}
