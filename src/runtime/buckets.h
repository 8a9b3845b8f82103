/* runtime/buckets.h - gradient buckets (buckets.c): under an MPI job, the
 * exchange of an update's gradients with the other instances started
 * while the backward still runs, a group of accumulators at a time, and
 * waited for only before the update (runtime/allreduce.c). The sum over the
 * instances is unchanged (allreduce.c adds the gathered copies in global
 * replica order), so results are bit-identical to one exchange after the
 * backward. */
#ifndef TG_RUNTIME_BUCKETS_H
#define TG_RUNTIME_BUCKETS_H

#include "runtime/session_state.h"

/* Gradient buckets (runtime/allreduce.c): under an MPI job whose instances
 * run one replica each, a device's accumulators in groups of about
 * distributed.gradientBucketBytes, in the order the backward finishes them
 * (last layer first). Each group's exchange with the other instances starts
 * in the last backward of an update, as soon as its gradients are final,
 * and runs while the rest of the backward computes. */
typedef struct tg_bucket {
    int first, count;     /* accumulators order[first .. first + count) */
    int ready;            /* the backward step after which they are final (-1: before the first) */
    size_t offset, bytes; /* their part of the instance's pack */
} tg_bucket;

typedef struct tg_bucket_plan {
    int *order;       /* accumulators by the backward step that finishes them */
    size_t *pack_off; /* per accumulator (by index): its place in the pack */
    size_t pack;      /* bytes of one instance's pack */
    tg_bucket *buckets;
    int n_buckets;
    /* the op of the schedule that finishes the accumulators: the backward
     * (or, in a split schedule, the weight gradient) of micro-batch last_mb */
    int last_mb;
    tg_pipe_pass last_pass;
    double *started; /* per bucket, when its exchange started (the device's thread's) */
} tg_bucket_plan;

/* After the communicators exist (tg_session_dist_setup): s->coll->buckets, one
 * plan per device, when the instances run one replica each and
 * distributed.gradientBucketBytes is not 0; otherwise s->coll->buckets stays
 * NULL and the all-reduce gathers everything after the backward. */
tg_status tg_buckets_plan(tg_session *s);
void tg_buckets_free(tg_session *s);

/* Device c's plan when micro-batch j's `pass` is the op that finishes the
 * update's accumulators, else NULL. */
const tg_bucket_plan *tg_buckets_finishing(const device_ctx *c, tg_pipe_pass pass, int64_t j);
/* Bucket b's gradients are final in micro-batch j (slot g), the last of the
 * update: add them to their accumulators' sums into this instance's pack
 * and start the bucket's exchange. */
void tg_buckets_send(device_ctx *c, int b, int64_t j, int64_t g);
/* Between steps: note the buckets that have arrived (in order) and let
 * MPI move the others along. */
void tg_buckets_progress(device_ctx *c, int64_t it);
/* Before the update: wait for every bucket of update `it`; false if the
 * run was aborted (the failure is set). */
bool tg_buckets_wait(device_ctx *c, int64_t it);

#endif
