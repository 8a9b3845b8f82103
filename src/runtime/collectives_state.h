/* runtime/collectives_state.h - the fields of the collectives part
 * (runtime/collectives.h), for the part's own files only: the all-reduce
 * (allreduce.c), the gradient buckets (buckets.c), sharded weights across
 * instances (rts.c) and the job's set-up (session_dist.c). */
#ifndef TG_RUNTIME_COLLECTIVES_STATE_H
#define TG_RUNTIME_COLLECTIVES_STATE_H

#include "runtime/buckets.h"
#include "runtime/collectives.h"

struct tg_collectives {
    /* the MPI job's communicators, one per device (runtime/dist.h); NULL
     * outside a training job of several instances */
    struct tg_dist_group *group;
    unsigned char **send, **recv;      /* per device: the all-reduce's staging */
    tg_bucket_plan *buckets;           /* per device, or NULL: no exchange during the backward */
    tg_exchange_times *exchange_times; /* per device, since creation (local replica 0's) */
    /* replicated tensor sharding across instances: each sharded value whole
     * (per node id; NULL when not sharded), as tg_dist_sync gathered it
     * after host step state_step (-1: never) */
    unsigned char **state;
    int64_t state_step;
    /* replicated tensor sharding of weights across instances (runtime/rts.c):
     * per buffer, the other instances' shards of a sharded weight as last
     * exchanged (whole-sized); NULL with one instance */
    unsigned char **rts_remote;
};

#endif
