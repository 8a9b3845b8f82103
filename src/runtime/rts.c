/* runtime/rts.c - replicated tensor sharding of weights (ZeRO-3) at run
 * time: the plan is compile/sharding.c, the reduce-scatter of the gradient
 * runtime/allreduce.c.
 *
 * Replica k of the job's S holds shard k of each sharded weight at the
 * start of its home buffer. A pass that reads the weight first gathers the
 * S shards into its whole copy (a TG_STREAM_GATHER op before the pass's
 * first step that reads it). The shards of this instance's replicas are
 * read from their arenas, or from their streaming memory when the weight is
 * offloaded too (the update's stores end with its pass, before the barrier
 * after it): replicas write their shards only in the update,
 * between the all-reduce's barrier and the barrier after the update
 * (allreduce.c), while gathers run only in forward and backward passes, so
 * no shard is read while it is written.
 *
 * Under an MPI job the other instances' shards are not in this process:
 * after every update local replica 0 of each device exchanges the
 * instance's blocks of its sharded weights with the other instances, into
 * a host copy per weight (rts_remote: the whole weight's size, of which the
 * other instances' blocks are used), which the gathers of the next passes
 * read. The exchange is one collective per device and update, in the place
 * the optimizer's sharded updates exchange theirs; gathering over MPI in
 * every pass would be a collective per pass and weight.
 */
#include "runtime/rts.h"

#include "core/alloc.h"
#include "core/error.h"
#include "runtime/dist.h"
#include "runtime/exchange.h"
#include "runtime/run_control.h"
#include "runtime/collectives_state.h"

#include <string.h>

bool tg_rts_updates_shard(const tg_program *p, const tg_step *st)
{
    const tg_tensor *t = p->graph->nodes[st->node];
    return tg_is_weight_update(t) && st->in[0] >= 0 && p->buffers[st->in[0]].sharded;
}

tg_status tg_rts_setup(tg_session *s)
{
    const tg_program *p = s->program;
    if (tg_program_shards(p) <= p->replicas) /* one instance: every shard is local */
        return TG_OK;
    if (!(s->coll->rts_remote = tg_calloc((size_t)p->n_buffers + 1, sizeof *s->coll->rts_remote)))
        return tg_error(TG_ERR_NOMEM, "session: out of memory for the sharded weights");
    for (int b = 0; b < p->n_buffers; b++) {
        if (!tg_sharding_is_weight(p, b)) /* optimizer state is never gathered */
            continue;
        const tg_tensor *t = p->graph->nodes[p->buffers[b].node];
        size_t bytes = (size_t)tg_numel(t) * tg_dtype_size(p->buffers[b].dtype);
        if (!(s->coll->rts_remote[b] = tg_calloc(1, bytes + 1)))
            return tg_error(TG_ERR_NOMEM,
                            "session: out of memory for the other instances' shards of '%s' "
                            "(%zu bytes)",
                            t->name, bytes);
    }
    return TG_OK;
}

void tg_rts_free(tg_session *s)
{
    if (!s->coll)
        return;
    for (int b = 0; s->coll->rts_remote && b < s->program->n_buffers; b++)
        tg_free(s->coll->rts_remote[b]);
    tg_free(s->coll->rts_remote);
    s->coll->rts_remote = NULL;
}

/* Where shard k of sharded buffer b (elements from `begin`) is read. */
static const unsigned char *shard_at(const tg_session *s, int b, int k, int64_t begin)
{
    int local = k - s->replica_offset;
    if (local >= 0 && local < s->program->replicas)
        return tg_engine_slot_ptr(s, local, b, 0);
    return s->coll->rts_remote[b] + (size_t)begin * tg_dtype_size(s->program->buffers[b].dtype);
}

/* Every shard of b into dst; the bytes that came from other shards than
 * `own` (-1: count them all). */
static int64_t assemble(const tg_session *s, int b, unsigned char *dst, int own)
{
    const tg_program *p = s->program;
    int64_t n = tg_numel(p->graph->nodes[p->buffers[b].node]), moved = 0;
    size_t es = tg_dtype_size(p->buffers[b].dtype);
    int S = tg_program_shards(p);
    for (int k = 0; k < S; k++) {
        int64_t begin, end;
        tg_shard_range(n, k, S, &begin, &end);
        memcpy(dst + (size_t)begin * es, shard_at(s, b, k, begin), (size_t)(end - begin) * es);
        if (k != own)
            moved += (end - begin) * (int64_t)es;
    }
    return moved;
}

int64_t tg_rts_gather(device_ctx *c, const tg_stream_op *op, int64_t g)
{
    tg_session *s = c->s;
    return assemble(s, op->home, tg_engine_slot_ptr(s, c->replica, op->copy, g),
                    s->replica_offset + c->replica);
}

void tg_rts_whole(const tg_session *s, int b, unsigned char *dst)
{
    assemble(s, b, dst, -1);
}

void tg_rts_host_written(const tg_session *s, int b, const unsigned char *whole)
{
    if (!s->coll->rts_remote || !s->coll->rts_remote[b])
        return;
    const tg_tensor *t = s->program->graph->nodes[s->program->buffers[b].node];
    memcpy(s->coll->rts_remote[b], whole,
           (size_t)tg_numel(t) * tg_dtype_size(s->program->buffers[b].dtype));
}

/* This instance's block of sharded weight b (n elements), its replicas'
 * shards in order, into send. */
static void pack_block(const tg_session *s, int b, int64_t n, unsigned char *send)
{
    const tg_program *p = s->program;
    size_t es = tg_dtype_size(p->buffers[b].dtype);
    int64_t first, unused;
    tg_rts_block(s, n, tg_dist_instance(), &first, &unused);
    for (int r = 0; r < p->replicas; r++) {
        int64_t begin, end;
        tg_shard_range(n, s->replica_offset + r, tg_program_shards(p), &begin, &end);
        memcpy(send + (size_t)(begin - first) * es, tg_engine_slot_ptr(s, r, b, 0),
               (size_t)(end - begin) * es);
    }
}

/* The other instances' blocks of b from the gathered packs (each `pack`
 * bytes, b's block at `at`) into its host copy. */
static void unpack_blocks(tg_session *s, int b, int64_t n, const unsigned char *recv, size_t pack,
                          size_t at)
{
    size_t es = tg_dtype_size(s->program->buffers[b].dtype);
    for (int i = 0; i < tg_dist_instances(); i++) {
        int64_t begin, end;
        tg_rts_block(s, n, i, &begin, &end);
        if (i != tg_dist_instance())
            memcpy(s->coll->rts_remote[b] + (size_t)begin * es, recv + (size_t)i * pack + at,
                   (size_t)(end - begin) * es);
    }
}

bool tg_rts_exchange(device_ctx *c, int64_t it)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_device_program *dp = &p->devices[c->device];
    unsigned char *send = s->coll->send[c->device], *recv = s->coll->recv[c->device];
    size_t pack = 0;
    for (int k = 0; k < dp->n_steps[TG_PHASE_UPDATE]; k++) {
        const tg_step *st = &dp->steps[TG_PHASE_UPDATE][k];
        if (!tg_rts_updates_shard(p, st))
            continue;
        int64_t n = tg_numel(p->graph->nodes[st->node]->in[0]);
        int home = tg_program_home_of(p, st->in[0]); /* an offloaded shard's host copy */
        pack_block(s, home, n, send + pack);
        pack += tg_rts_block_cap(s, n, tg_dtype_size(p->buffers[home].dtype));
    }
    if (pack == 0)
        return true;
    double t0 = tg_engine_now();
    if (!tg_dist_group_allgather(s->coll->group, c->device, send, recv, pack,
                                 tg_run_abort_flag(s->run))) {
        tg_exchange_fail(
            s, TG_ERR_IO,
            tg_dist_stuck_reason("the sharded weights' exchange across instances was abandoned"));
        return false;
    }
    tg_engine_record(c, TG_EVENT_GATHER, TG_PHASE_UPDATE, it, -1, -1, t0,
                     (int64_t)pack * tg_dist_instances(), 0);
    size_t at = 0;
    for (int k = 0; k < dp->n_steps[TG_PHASE_UPDATE]; k++) {
        const tg_step *st = &dp->steps[TG_PHASE_UPDATE][k];
        if (!tg_rts_updates_shard(p, st))
            continue;
        int64_t n = tg_numel(p->graph->nodes[st->node]->in[0]);
        int home = tg_program_home_of(p, st->in[0]);
        unpack_blocks(s, home, n, recv, pack, at);
        at += tg_rts_block_cap(s, n, tg_dtype_size(p->buffers[home].dtype));
    }
    return true;
}

/* An update whose optimizer state, or weight, is sharded over the replicas. */
bool tg_rts_is_sharded_update(const tg_program *p, const tg_step *st, const tg_tensor *t)
{
    return tg_is_weight_update(t) &&
           (tg_rts_updates_shard(p, st) ||
            (t->n_mutated >= 2 && st->in[1] >= 0 && p->buffers[st->in[1]].sharded));
}

void tg_rts_block(const tg_session *s, int64_t n, int instance, int64_t *begin, int64_t *end)
{
    int S = tg_program_shards(s->program), Rl = s->program->replicas;
    int64_t unused;
    tg_shard_range(n, instance * Rl, S, begin, &unused);
    tg_shard_range(n, (instance + 1) * Rl - 1, S, &unused, end);
}

size_t tg_rts_block_cap(const tg_session *s, int64_t n, size_t elem_bytes)
{
    return (size_t)(n / tg_dist_instances() + 1) * elem_bytes;
}
