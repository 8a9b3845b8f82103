/* runtime/allreduce.c - what the replicas of a data-parallel run share: the
 * mean of the gradient accumulators, and under replicated tensor sharding
 * each replica's share of the updated weights. Both meet at the replica
 * barrier (runtime/exchange.h). */
#include "runtime/allreduce.h"

#include "ops/op.h"
#include "runtime/exchange.h"
#include "runtime/staging.h"

#include <string.h>

/* An update whose optimizer state is sharded over the replicas. */
bool tg_allreduce_is_sharded_update(const tg_program *p, const tg_step *st, const tg_tensor *t)
{
    return tg_is_weight_update(t) && t->n_mutated >= 2 && st->in[1] >= 0 &&
           p->buffers[st->in[1]].sharded;
}

/* After a sharded update: send this replica's share of each updated weight
 * to every other replica, then wait until all shares have arrived. */
bool tg_allreduce_gather_weights(device_ctx *c, int64_t it)
{
    tg_session *s = c->s;
    double t0 = tg_engine_now();
    const tg_program *p = s->program;
    const tg_device_program *dp = &p->devices[c->device];
    bool any = false;
    for (int k = 0; k < dp->n_steps[TG_PHASE_UPDATE]; k++) {
        const tg_step *st = &dp->steps[TG_PHASE_UPDATE][k];
        const tg_tensor *t = p->graph->nodes[st->node];
        if (!tg_allreduce_is_sharded_update(p, st, t))
            continue;
        any = true;
        int64_t begin, end;
        tg_shard_range(tg_numel(t->in[0]), c->replica, p->replicas, &begin, &end);
        size_t es = tg_dtype_size(p->buffers[st->in[0]].dtype);
        const unsigned char *mine =
            tg_engine_slot_ptr(s, c->replica, st->in[0], 0) + (size_t)begin * es;
        for (int r = 0; r < p->replicas; r++)
            if (r != c->replica)
                memcpy(tg_engine_slot_ptr(s, r, st->in[0], 0) + (size_t)begin * es, mine,
                       (size_t)(end - begin) * es);
    }
    if (!any)
        return true;
    bool ok = tg_exchange_replica_barrier(s, c->device);
    tg_engine_record(c, TG_EVENT_ALL_REDUCE, TG_PHASE_UPDATE, it, -1, -1, t0, 0, 0);
    return ok;
}

/* Mean of the accumulators over replicas, identical on every replica: each
 * replica sums its share of the elements over all replicas, in replica
 * order, and writes the result to all of them. */
bool tg_allreduce_run(device_ctx *c)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_device_program *dp = &p->devices[c->device];
    int R = p->replicas;
    float scale = 1.0f / (float)(p->micro_batches * R);
    if (!tg_exchange_replica_barrier(s, c->device))
        return false;
    unsigned char *copies[64];
    for (int k = 0; k < dp->n_accumulators; k++) {
        int buf = dp->accumulators[k].acc_buffer;
        int64_t n = tg_numel(p->graph->nodes[p->buffers[buf].node]);
        int64_t begin, end;
        tg_shard_range(n, c->replica, R, &begin, &end);
        for (int r = 0; r < R; r++)
            copies[r] = tg_engine_slot_ptr(s, r, buf, 0);
        tg_reduce_typed(copies, R, p->buffers[buf].dtype, begin, end, scale);
    }
    return tg_exchange_replica_barrier(s, c->device);
}
