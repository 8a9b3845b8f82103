/* compile/sharding.c - replicated tensor sharding of weights (ZeRO-3;
 * TensorLocations.weight.replicatedTensorSharding, docs/memory-locations.md).
 *
 * A sharded weight's home buffer holds one shard: replica k of the job's S
 * (tg_program_shards) keeps elements [n*k/S, n*(k+1)/S) at its start, so the
 * device memory of every weight of at least minElementsForReplicatedTensor-
 * Sharding elements drops to 1/S. Its optimizer state is sharded with it
 * (the update of a shard needs only the state of that shard), whatever the
 * optimizer's own setting says.
 *
 * Every forward and backward pass that reads the weight reads a gathered
 * copy: an activation buffer of the pass, filled from all the shards before
 * the pass's first step that reads it (a TG_STREAM_GATHER op, placed by
 * compile/streaming.c as it places streamed copies), and live only until
 * the pass's last such step, so the memory plan shares its bytes with the
 * rest of the pass. The update reads the home shard itself: the engine
 * gives it a view of one shard (runtime/engine.c shard_view), and the
 * all-reduce sums each replica's shard of the gradient only
 * (runtime/allreduce.c: a reduce-scatter).
 *
 * A weight that some update-phase step other than its own update reads
 * stays whole: that step would need a gather while other replicas write
 * their shards.
 *
 * Sharded and offloaded at once (TensorLocations.weight.onChip=false with
 * replicatedTensorSharding; seed 002 §4.4's RTS "off chip"): this plan runs
 * first, so the home holds one shard when compile/streaming.c moves it to
 * streaming memory, and each replica's host copy is one shard. The passes'
 * gathers read the shards from the replicas' streaming memory; the update
 * streams the replica's shard (of the weight and its state) in and back out
 * through a copy one shard long, itself marked sharded.
 */
#include "compile/program.h"

#include "core/error.h"

/* Whether every update-phase step that reads buffer b is b's own update. */
static bool only_its_update_reads(const tg_program *p, int b)
{
    for (int d = 0; d < p->n_devices; d++) {
        const tg_device_program *dp = &p->devices[d];
        for (int s = 0; s < dp->n_steps[TG_PHASE_UPDATE]; s++) {
            const tg_step *st = &dp->steps[TG_PHASE_UPDATE][s];
            const tg_tensor *t = p->graph->nodes[st->node];
            for (int k = 0; k < t->n_in; k++)
                if (st->in[k] == b && !(k == 0 && tg_is_weight_update(t)))
                    return false;
        }
    }
    return true;
}

static void shard_buffer(tg_program *p, int b)
{
    tg_buffer *buf = &p->buffers[b];
    if (buf->sharded)
        return;
    buf->sharded = true;
    buf->bytes = buf->stride = tg_sharding_shard_bytes(p, b);
}

/* The weight update of device d that rewrites buffer b, or NULL. */
static const tg_step *update_of(const tg_program *p, int d, int b)
{
    const tg_device_program *dp = &p->devices[d];
    for (int s = 0; s < dp->n_steps[TG_PHASE_UPDATE]; s++) {
        const tg_step *st = &dp->steps[TG_PHASE_UPDATE][s];
        if (tg_is_weight_update(p->graph->nodes[st->node]) && st->in[0] == b)
            return st;
    }
    return NULL;
}

bool tg_sharding_is_weight(const tg_program *p, int b)
{
    const tg_buffer *buf = &p->buffers[b];
    if (!buf->sharded || buf->copy_of >= 0)
        return false;
    /* an offloaded home lost its region (NONE): its value says what it is */
    return buf->region == TG_REGION_PARAM ||
           (buf->offloaded && p->graph->nodes[buf->node]->role == TG_ROLE_PARAM);
}

size_t tg_sharding_shard_bytes(const tg_program *p, int b)
{
    int64_t n = tg_numel(p->graph->nodes[p->buffers[b].node]), S = tg_program_shards(p);
    return (size_t)((n + S - 1) / S) * tg_dtype_size(p->buffers[b].dtype);
}

bool tg_sharding_gathers(const tg_program *p, int b, tg_phase ph)
{
    return ph != TG_PHASE_UPDATE && tg_sharding_is_weight(p, b);
}

tg_status tg_sharding_plan(tg_program *p)
{
    const tg_tensor_location *loc = &p->config.memory.location[TG_TENSOR_WEIGHT];
    if (!loc->sharded || tg_program_shards(p) < 2 || !p->training)
        return TG_OK;
    int n_homes = p->n_buffers;
    for (int b = 0; b < n_homes; b++) {
        const tg_buffer *buf = &p->buffers[b];
        if (buf->region != TG_REGION_PARAM ||
            tg_numel(p->graph->nodes[buf->node]) < loc->min_sharded)
            continue;
        const tg_step *u = update_of(p, buf->device, b);
        if (!u || !only_its_update_reads(p, b))
            continue; /* frozen weights stay whole: nothing would update a shard */
        shard_buffer(p, b);
        const tg_tensor *t = p->graph->nodes[u->node];
        for (int k = 1; k < t->n_mutated; k++)
            if (u->in[k] >= 0)
                shard_buffer(p, u->in[k]);
    }
    return TG_OK;
}
