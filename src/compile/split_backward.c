/* compile/split_backward.c - a device's backward steps as the input
 * gradient (B) and the weight gradient (W), for schedules that run them as
 * two ops (zb-h1, compile/pipeline.h).
 *
 * B is every backward step the gradients sent to another device depend on
 * (on the device): what the previous stage waits for. W is the rest: the
 * weight gradients and whatever only they read, needed by the accumulation
 * and the update alone. No B step reads a W step's output (it would be on
 * the path to a sent gradient, so in B), so B then W, each in the order
 * the program had, is still an order in which every step follows its
 * inputs: the kernels read the same values and the results are the same to
 * the bit. The memory plan then keeps what W reads from B (and from the
 * forward) in slots, since other passes run between B and W.
 */
#include "compile/program.h"

#include "core/alloc.h"
#include "core/error.h"

#include <string.h>

/* needed[k]: whether backward step k of device d is on the path to a
 * gradient the device sends. */
static void mark_input_grad(const tg_program *p, int d, bool *needed_buffer, bool *needed)
{
    const tg_device_program *dp = &p->devices[d];
    for (int k = 0; k < p->n_transfers; k++) {
        const tg_transfer *t = &p->transfers[k];
        if (t->src_device == d && t->phase == TG_PHASE_BACKWARD)
            needed_buffer[t->src_buffer] = true;
    }
    for (int k = dp->n_steps[TG_PHASE_BACKWARD] - 1; k >= 0; k--) {
        const tg_step *st = &dp->steps[TG_PHASE_BACKWARD][k];
        needed[k] = st->out >= 0 && needed_buffer[st->out];
        int n_in = p->graph->nodes[st->node]->n_in;
        for (int i = 0; needed[k] && i < n_in; i++)
            if (st->in[i] >= 0)
                needed_buffer[st->in[i]] = true;
    }
}

/* Reorders device d's backward steps as B then W and sets input_grad_steps. */
static tg_status split_device(tg_program *p, int d, bool *needed_buffer)
{
    tg_device_program *dp = &p->devices[d];
    int n = dp->n_steps[TG_PHASE_BACKWARD];
    bool *needed = tg_calloc((size_t)n + 1, sizeof *needed);
    tg_step *order = tg_malloc(((size_t)n + 1) * sizeof *order);
    if (!needed || !order) {
        tg_free(needed);
        tg_free(order);
        return tg_error(TG_ERR_NOMEM, "compile: out of memory splitting device %d's backward", d);
    }
    memset(needed_buffer, 0, (size_t)p->n_buffers * sizeof *needed_buffer);
    mark_input_grad(p, d, needed_buffer, needed);
    int at = 0;
    for (int pass = 1; pass >= 0; pass--) /* B (needed) first, then W */
        for (int k = 0; k < n; k++)
            if (needed[k] == (pass == 1))
                order[at++] = dp->steps[TG_PHASE_BACKWARD][k];
    dp->input_grad_steps = 0;
    for (int k = 0; k < n; k++)
        dp->input_grad_steps += needed[k];
    memcpy(dp->steps[TG_PHASE_BACKWARD], order, (size_t)n * sizeof *order);
    tg_free(needed);
    tg_free(order);
    return TG_OK;
}

int tg_backward_cut(const tg_device_program *dp)
{
    int ig = dp->input_grad_steps;
    return ig > 0 && ig < dp->n_steps[TG_PHASE_BACKWARD] ? ig : 0;
}

tg_status tg_split_backward(tg_program *p)
{
    for (int d = 0; d < p->n_devices; d++)
        p->devices[d].input_grad_steps = p->devices[d].n_steps[TG_PHASE_BACKWARD];
    if (!tg_pipe_schedule_splits(&p->schedule))
        return TG_OK;
    bool *needed_buffer = tg_calloc((size_t)p->n_buffers + 1, sizeof *needed_buffer);
    if (!needed_buffer)
        return tg_error(TG_ERR_NOMEM, "compile: out of memory splitting the backward");
    tg_status s = TG_OK;
    for (int d = 0; s == TG_OK && d < p->n_devices; d++)
        s = split_device(p, d, needed_buffer);
    tg_free(needed_buffer);
    return s;
}
