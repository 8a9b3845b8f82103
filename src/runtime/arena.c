/* runtime/arena.c - where a session's values live: the slot of a program
 * buffer's micro-batch in a replica's arena (or in its host copy when
 * offloaded), the host streams' count, and the accumulation of a gradient
 * slot into its accumulator. Split from runtime/engine.c and
 * engine_passes.c so that every part of the runtime reaches the arenas
 * without calling back into the engine (scripts/check_call_cycles.py). */
#include "runtime/session_state.h"

#include "runtime/staging.h"

unsigned char *tg_engine_slot_ptr(const tg_session *s, int replica, int buffer, int64_t g)
{
    const tg_buffer *b = &s->program->buffers[buffer];
    if (b->offloaded) /* its host copy (compile/streaming.c) */
        return s->host_state[buffer * s->program->replicas + replica] +
               (size_t)(g % b->slots) * b->stride;
    unsigned char *arena = s->arena[replica * s->program->n_devices + b->device];
    return arena + b->offset + (size_t)(g % b->slots) * b->stride;
}

int64_t tg_session_stream_count(const tg_session *s)
{
    const tg_program *p = s->program;
    return (int64_t)p->iterations * p->replicas * p->micro_batches;
}

/* acc = g (first micro-batch j) or acc + g; on the last micro-batch of a
 * single replica also scaled to the mean (with replicas the all-reduce
 * does it). */
void tg_engine_accumulate(device_ctx *c, int acc_buffer, int grad_buffer, int64_t j, int64_t g)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_buffer *acc = &p->buffers[acc_buffer], *grad = &p->buffers[grad_buffer];
    float scale = 1.0f / (float)(p->micro_batches * s->global_replicas);
    bool last = j == p->micro_batches - 1 && s->global_replicas == 1;
    tg_accumulate_typed(tg_engine_slot_ptr(s, c->replica, acc_buffer, 0), acc->dtype,
                        tg_engine_slot_ptr(s, c->replica, grad_buffer, g), grad->dtype,
                        tg_numel(p->graph->nodes[acc->node]), j == 0, last ? scale : 1.0f);
}
