/* compile/phases.c - what each phase of a phased program costs
 * (executionStrategy phased, docs/memory-locations.md).
 *
 * The phases run one after another on one device, and the memory plan
 * already shares the activation region by liveness: a streamed copy of an
 * offloaded weight is live only between the steps that use it. So a phase's
 * memory is the device's persistent part plus the most activation bytes
 * live at any of its steps, read from the plan, not estimated.
 */
#include "compile/program.h"

#include <string.h>

void tg_program_phase_memory(const tg_program *p, int d, tg_phase_memory *out)
{
    const tg_device_program *dp = &p->devices[d];
    memset(out, 0, (size_t)p->n_phases * sizeof *out);
    size_t persistent = dp->arena_bytes - dp->region_bytes[TG_REGION_ACTIVATION];
    for (int k = 0; k < p->n_phases; k++)
        out[k].persistent = persistent;
    int at = 0;
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
        for (int s = 0; s < dp->n_steps[ph]; s++, at++) {
            const tg_step *st = &dp->steps[ph][s];
            int k = p->phase_of ? p->phase_of[st->node] : -1;
            if (k < 0 || k >= p->n_phases)
                continue;
            tg_phase_memory *m = &out[k];
            size_t live = tg_program_live_bytes(p, d, at) + st->scratch_bytes;
            if (live > m->peak_activations)
                m->peak_activations = live;
            m->steps++;
            for (int i = 0; i < st->n_stream_in + st->n_stream_out; i++) {
                const tg_stream_op *op = &dp->streams[ph][st->stream_at + i];
                if (op->kind == TG_STREAM_GATHER) /* between replicas, not streaming memory */
                    continue;
                size_t bytes = p->buffers[op->home].bytes;
                if (i < st->n_stream_in)
                    m->loaded += bytes;
                else
                    m->stored += bytes;
            }
        }
}
