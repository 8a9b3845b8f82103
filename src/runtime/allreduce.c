/* runtime/allreduce.c - what the replicas of a data-parallel run share: the
 * mean of the gradient accumulators (of a sharded weight's gradient, each
 * replica's shard of it alone: a reduce-scatter), and under replicated
 * tensor sharding of the optimizer state each replica's share of the
 * updated weights. Both meet at the replica barrier (runtime/exchange.h). */
#include "runtime/allreduce.h"

#include "ops/op.h"
#include "runtime/buckets.h"
#include "runtime/collectives_state.h"
#include "runtime/dist.h"
#include "runtime/exchange.h"
#include "runtime/rts.h"
#include "runtime/scaling.h"
#include "runtime/session_dist.h"
#include "runtime/staging.h"
#include "runtime/run_control.h"

#include <string.h>

/* A sharded update of a weight every replica keeps whole (the optimizer
 * state alone is sharded): its updated share goes to the others after it. */
static bool shares_update(const tg_program *p, const tg_step *st, const tg_tensor *t)
{
    return tg_rts_is_sharded_update(p, st, t) && !tg_rts_updates_shard(p, st);
}

bool tg_allreduce_scatters(const tg_session *s, const tg_accumulator *a)
{
    const tg_program *p = s->program;
    int b = p->home[a->param];
    /* the overflow check and the clipping norm read the whole gradient */
    return b >= 0 && tg_sharding_is_weight(p, b) && !tg_scaling_checks_overflow(s->scaling) &&
           !(tg_scaling_max_grad_norm(s->scaling) > 0);
}

/* Under an MPI job, after the instance's replicas have their shares (run by
 * its local replica 0): send the instance's block of every sharded weight
 * of this device to the others, and copy theirs into every local replica. */
static bool weights_from_instances(device_ctx *c, int64_t it)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_device_program *dp = &p->devices[c->device];
    unsigned char *send = s->coll->send[c->device], *recv = s->coll->recv[c->device];
    size_t off = 0;
    for (int k = 0; k < dp->n_steps[TG_PHASE_UPDATE]; k++) { /* pack: a block per weight */
        const tg_step *st = &dp->steps[TG_PHASE_UPDATE][k];
        const tg_tensor *t = p->graph->nodes[st->node];
        if (!shares_update(p, st, t))
            continue;
        int64_t n = tg_numel(t->in[0]), begin, end;
        int home = tg_program_home_of(p, st->in[0]);
        size_t es = tg_dtype_size(p->buffers[home].dtype);
        tg_rts_block(s, n, tg_dist_instance(), &begin, &end);
        memcpy(send + off, tg_engine_slot_ptr(s, 0, home, 0) + (size_t)begin * es,
               (size_t)(end - begin) * es);
        off += tg_rts_block_cap(s, n, es);
    }
    double t0 = tg_engine_now();
    if (!tg_dist_group_allgather(s->coll->group, c->device, send, recv, off,
                                 tg_run_abort_flag(s->run))) {
        tg_exchange_fail(
            s, TG_ERR_IO,
            tg_dist_stuck_reason("the weights' exchange across instances was abandoned"));
        return false;
    }
    tg_engine_record(c, TG_EVENT_INSTANCES, TG_PHASE_UPDATE, it, -1, -1, t0,
                     (int64_t)off * tg_dist_instances(), 0);
    size_t at = 0;
    for (int k = 0; k < dp->n_steps[TG_PHASE_UPDATE]; k++) { /* unpack the others' blocks */
        const tg_step *st = &dp->steps[TG_PHASE_UPDATE][k];
        const tg_tensor *t = p->graph->nodes[st->node];
        if (!shares_update(p, st, t))
            continue;
        int64_t n = tg_numel(t->in[0]);
        int home = tg_program_home_of(p, st->in[0]);
        size_t es = tg_dtype_size(p->buffers[home].dtype);
        for (int i = 0; i < tg_dist_instances(); i++) {
            int64_t begin, end;
            tg_rts_block(s, n, i, &begin, &end);
            for (int r = 0; r < p->replicas && i != tg_dist_instance(); r++)
                memcpy(tg_engine_slot_ptr(s, r, home, 0) + (size_t)begin * es,
                       recv + (size_t)i * off + at, (size_t)(end - begin) * es);
        }
        at += tg_rts_block_cap(s, n, es);
    }
    return true;
}

/* Send this replica's share of each weight updated whole but with sharded
 * optimizer state to every other replica; whether there were any, and
 * whether one lives in streaming memory. */
static bool send_shares(device_ctx *c, bool copy, bool *offloaded)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_device_program *dp = &p->devices[c->device];
    bool any = false;
    for (int k = 0; k < dp->n_steps[TG_PHASE_UPDATE]; k++) {
        const tg_step *st = &dp->steps[TG_PHASE_UPDATE][k];
        const tg_tensor *t = p->graph->nodes[st->node];
        if (!shares_update(p, st, t))
            continue;
        any = true;
        int home = tg_program_home_of(p, st->in[0]); /* not the update's streamed copy */
        *offloaded |= p->buffers[home].offloaded;
        if (!copy)
            continue;
        int64_t begin, end;
        tg_shard_range(tg_numel(t->in[0]), s->replica_offset + c->replica, tg_program_shards(p),
                       &begin, &end);
        size_t es = tg_dtype_size(p->buffers[home].dtype);
        const unsigned char *mine = tg_engine_slot_ptr(s, c->replica, home, 0) + (size_t)begin * es;
        for (int r = 0; r < p->replicas; r++)
            if (r != c->replica)
                memcpy(tg_engine_slot_ptr(s, r, home, 0) + (size_t)begin * es, mine,
                       (size_t)(end - begin) * es);
    }
    return any;
}

/* After a sharded update: send this replica's share of each updated weight
 * to every other replica, then wait until all shares have arrived. */
bool tg_allreduce_gather_weights(device_ctx *c, int64_t it)
{
    tg_session *s = c->s;
    double t0 = tg_engine_now();
    const tg_program *p = s->program;
    const tg_device_program *dp = &p->devices[c->device];
    bool shards = false, offloaded = false;
    for (int k = 0; k < dp->n_steps[TG_PHASE_UPDATE]; k++)
        shards |= tg_rts_updates_shard(p, &dp->steps[TG_PHASE_UPDATE][k]);
    bool shares = send_shares(c, false, &offloaded);
    /* sharded weights: the next passes read the updated shards of every
     * replica (runtime/rts.c), so none may start before all are written */
    if (!shares && !shards)
        return true;
    /* A weight in streaming memory is stored back whole after its update
     * (its copy held the other replicas' shares too, not yet updated): the
     * shares go into the others' host copies once every replica's update
     * pass, and so its stores, has ended. On chip an update writes only its
     * own share of the home, and the shares go at once. */
    bool ok = true;
    if (shares && offloaded)
        ok = tg_exchange_replica_barrier(s, c->device);
    if (shares && ok)
        send_shares(c, true, &offloaded);
    ok = ok && tg_exchange_replica_barrier(s, c->device);
    if (ok && s->coll->group) {
        ok = c->replica != 0 ||
             ((!shares || weights_from_instances(c, it)) && (!shards || tg_rts_exchange(c, it)));
        ok = tg_exchange_replica_barrier(s, c->device) && ok;
    }
    if (shares)
        tg_engine_record(c, TG_EVENT_ALL_REDUCE, TG_PHASE_UPDATE, it, -1, -1, t0, 0, 0);
    return ok;
}

/* Elements [begin, end) of R bf16 copies: scale * their sum, summed in f32
 * in replica order, into the n_out f32 buffers outs. */
static void reduce_from_bf16(unsigned char *const *copies, int R, unsigned char *const *outs,
                             int n_out, int64_t begin, int64_t end, float scale)
{
    for (int64_t i = begin; i < end; i++) {
        float sum = 0;
        for (int r = 0; r < R; r++) {
            uint16_t h;
            memcpy(&h, copies[r] + 2 * i, sizeof h);
            sum += tg_bf16_to_f32(h);
        }
        sum *= scale;
        for (int o = 0; o < n_out; o++)
            memcpy(outs[o] + 4 * i, &sum, sizeof sum);
    }
}

/* Under an MPI job: local replica 0 of this device packs the accumulators of
 * the instance's replicas ([accumulator][local replica]), then its stamp,
 * and gathers every instance's pack, so that all R replicas' values are on
 * every instance. */
static bool gather_instances(device_ctx *c, int64_t it)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_device_program *dp = &p->devices[c->device];
    if (c->replica != 0)
        return true;
    double t0 = tg_engine_now();
    size_t off = 0;
    for (int k = 0; k < dp->n_accumulators; k++) {
        int buf = dp->accumulators[k].acc_buffer;
        size_t bytes = tg_collectives_wire_bytes(s, buf);
        for (int r = 0; r < p->replicas; r++, off += bytes)
            tg_collectives_to_wire(s, buf, s->coll->send[c->device] + off,
                                   tg_engine_slot_ptr(s, r, buf, 0));
    }
    tg_collectives_stamp(s->coll->send[c->device] + off, t0);
    size_t pack = off + TG_DIST_STAMP_BYTES;
    bool ok = tg_dist_group_allgather(s->coll->group, c->device, s->coll->send[c->device],
                                      s->coll->recv[c->device], pack, tg_run_abort_flag(s->run));
    tg_engine_record(c, TG_EVENT_INSTANCES, TG_PHASE_UPDATE, it, -1, -1, t0,
                     (int64_t)pack * tg_dist_instances(), 0);
    if (ok)
        tg_collectives_note_wait(c, s->coll->recv[c->device], pack, off, t0);
    return ok;
}

/* Under gradient buckets, device d's plan (the pack is in its order). */
static const tg_bucket_plan *bucket_plan(const tg_session *s, int d)
{
    return s->coll->buckets && s->coll->buckets[d].n_buckets ? &s->coll->buckets[d] : NULL;
}

/* Bytes of an instance's pack on device d, its stamp included. */
static size_t pack_bytes(const tg_session *s, int d)
{
    const tg_program *p = s->program;
    size_t pack = TG_DIST_STAMP_BYTES;
    for (int k = 0; k < p->devices[d].n_accumulators; k++)
        pack += tg_collectives_wire_bytes(s, p->devices[d].accumulators[k].acc_buffer) *
                (size_t)p->replicas;
    return pack;
}

/* Where global replica g's copy of an accumulator (at offset `off` of a
 * replica's part of a `pack`, `bytes` long on the wire) is: this instance's
 * arena for its own replicas, the gathered packs for the others' and, under
 * gradient buckets, for its own too (buckets.c added the last micro-batch
 * there), as under bf16 on the wire (every instance sums the same rounded
 * values, its own included). */
static unsigned char *copy_of(device_ctx *c, int g, int buf, size_t off, size_t bytes, size_t pack)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    int local = g - s->replica_offset;
    if (local >= 0 && local < p->replicas && !bucket_plan(s, c->device) &&
        !p->config.distributed.wire_bf16)
        return tg_engine_slot_ptr(s, local, buf, 0);
    int instance = g / p->replicas, r = g % p->replicas;
    return s->coll->recv[c->device] + (size_t)instance * pack + off * (size_t)p->replicas +
           (size_t)r * bytes;
}

/* Mean of the accumulators over all the job's replicas, identical on every
 * replica of every instance: each local replica sums its share of the
 * elements over the R replicas, in global replica order (the order one
 * process with R replicas sums in, so N instances give the same bits), and
 * writes the result to its instance's replicas. */
bool tg_allreduce_run(device_ctx *c, int64_t it)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_device_program *dp = &p->devices[c->device];
    int R = s->global_replicas;
    float scale = 1.0f / (float)(p->micro_batches * R);
    if (!tg_exchange_replica_barrier(s, c->device))
        return false;
    const tg_bucket_plan *b = bucket_plan(s, c->device);
    if (b && !tg_buckets_wait(c, it))
        return false;
    if (s->coll->group && !b) {
        if (!gather_instances(c, it)) {
            tg_exchange_fail(s, TG_ERR_IO,
                             tg_dist_stuck_reason("the all-reduce across instances was abandoned"));
            return false;
        }
        if (!tg_exchange_replica_barrier(s, c->device))
            return false;
    }
    double t_sum = tg_engine_now();
    unsigned char *copies[64], *outs[64];
    size_t off = 0, pack = b ? b->pack : s->coll->group ? pack_bytes(s, c->device) : 0;
    for (int k = 0; k < dp->n_accumulators; k++) {
        int buf = dp->accumulators[k].acc_buffer;
        size_t bytes = s->coll->group ? tg_collectives_wire_bytes(s, buf) : p->buffers[buf].bytes;
        size_t at = b ? b->pack_off[k] : off;
        int64_t n = tg_numel(p->graph->nodes[p->buffers[buf].node]);
        int64_t begin, end;
        bool scatter = tg_allreduce_scatters(s, &dp->accumulators[k]);
        if (scatter) /* the sum of its own shard, for its update alone */
            tg_shard_range(n, s->replica_offset + c->replica, tg_program_shards(p), &begin, &end);
        else
            tg_shard_range(n, c->replica, p->replicas, &begin, &end);
        for (int r = 0; r < R; r++)
            copies[r] = s->coll->group ? copy_of(c, r, buf, at, bytes, pack)
                                       : tg_engine_slot_ptr(s, r, buf, 0);
        for (int r = 0; r < p->replicas; r++) /* the result: this instance's replicas' */
            outs[r] = tg_engine_slot_ptr(s, r, buf, 0);
        if (scatter)
            outs[0] = tg_engine_slot_ptr(s, c->replica, buf, 0);
        if (s->coll->group && tg_collectives_wire_bf16(s, buf))
            reduce_from_bf16(copies, R, outs, scatter ? 1 : p->replicas, begin, end, scale);
        else
            tg_reduce_typed(copies, R, outs, scatter ? 1 : p->replicas, p->buffers[buf].dtype,
                            begin, end, scale);
        off += bytes;
    }
    if (s->coll->group) { /* one process of R replicas sums too, but 1 x 1 does not */
        c->exchange.summing += tg_engine_now() - t_sum;
        c->exchange.updates++;
    }
    return tg_exchange_replica_barrier(s, c->device);
}
