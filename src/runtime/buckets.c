/* runtime/buckets.c - gradient buckets: an update's gradients sent to the
 * other instances of an MPI job while the backward still runs (buckets.h).
 *
 * Only where each instance runs one replica per device: with several local
 * replicas a bucket would be final only when the last of them had produced
 * it, and whichever thread got there last would start the collective, so
 * the instances could start the buckets of one communicator in different
 * orders (MPI requires the same order). Those jobs exchange after the
 * backward, as before. Each device has its own communicator and thread, so
 * in a pipeline the last stage's buckets leave while the first stage still
 * computes its backward. */
#include "runtime/buckets.h"

#include "core/alloc.h"
#include "core/error.h"
#include "runtime/allreduce.h"
#include "runtime/dist.h"
#include "runtime/exchange.h"
#include "runtime/staging.h"
#include "runtime/run_control.h"
#include "runtime/collectives_state.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The last backward step of device d that writes buffer b: its output or
 * an input it mutates. -1 when none does (a gradient received from
 * another device arrives before the backward's first step). */
static int last_writer(const tg_program *p, int d, int b)
{
    const tg_device_program *dp = &p->devices[d];
    int last = -1;
    for (int k = 0; k < dp->n_steps[TG_PHASE_BACKWARD]; k++) {
        const tg_step *st = &dp->steps[TG_PHASE_BACKWARD][k];
        const tg_tensor *t = p->graph->nodes[st->node];
        bool writes = st->out == b;
        for (int i = 0; i < t->n_mutated && i < t->n_in; i++)
            writes |= st->in[i] == b;
        if (writes)
            last = k;
    }
    return last;
}

/* The op of device d's schedule that finishes the accumulators: its last
 * backward (the last weight gradient in a split schedule). False if none. */
static bool finishing_op(const tg_program *p, int d, tg_bucket_plan *b)
{
    const tg_pipe_schedule *sch = &p->schedule;
    tg_pipe_pass pass = tg_pipe_schedule_splits(sch) ? TG_PASS_WEIGHT : TG_PASS_BACKWARD;
    for (int k = sch->n_ops[d] - 1; k >= 0; k--)
        if (sch->ops[d][k].pass == pass) {
            b->last_pass = pass;
            b->last_mb = sch->ops[d][k].micro_batch;
            return true;
        }
    return false;
}

typedef struct ready_key {
    int ready, index;
} ready_key;

static int ready_cmp(const void *a, const void *b)
{
    const ready_key *x = a, *y = b;
    if (x->ready != y->ready)
        return x->ready < y->ready ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* Accumulators in the order they become final, cut into buckets of at
 * least `cap` bytes (the last may be smaller), each with its place in the
 * pack. */
static tg_status cut(const tg_session *s, int d, size_t cap, tg_bucket_plan *b)
{
    const tg_program *p = s->program;
    const tg_device_program *dp = &p->devices[d];
    int n = dp->n_accumulators;
    ready_key *keys = tg_calloc((size_t)n, sizeof *keys);
    b->order = tg_calloc((size_t)n, sizeof *b->order);
    b->pack_off = tg_calloc((size_t)n, sizeof *b->pack_off);
    b->buckets = tg_calloc((size_t)n, sizeof *b->buckets);
    b->started = tg_calloc((size_t)n, sizeof *b->started);
    if (!keys || !b->order || !b->pack_off || !b->buckets || !b->started) {
        tg_free(keys);
        return tg_error(TG_ERR_NOMEM, "session: out of memory for device %d's gradient buckets", d);
    }
    for (int k = 0; k < n; k++)
        keys[k] = (ready_key){last_writer(p, d, dp->accumulators[k].grad_buffer), k};
    qsort(keys, (size_t)n, sizeof *keys, ready_cmp);
    tg_bucket *cur = NULL;
    for (int k = 0; k < n; k++) {
        int a = keys[k].index;
        size_t bytes = tg_collectives_wire_bytes(s, dp->accumulators[a].acc_buffer);
        if (!cur || cur->bytes >= cap) {
            cur = &b->buckets[b->n_buckets++];
            *cur = (tg_bucket){k, 0, -1, b->pack, 0};
        }
        b->order[k] = a;
        b->pack_off[a] = b->pack;
        b->pack += bytes;
        cur->count++;
        cur->bytes += bytes;
        cur->ready = keys[k].ready; /* sorted: the bucket's last is its latest */
    }
    if (cur) { /* the pack ends with the instance's stamp, sent with the last bucket */
        cur->bytes += TG_DIST_STAMP_BYTES;
        b->pack += TG_DIST_STAMP_BYTES;
    }
    tg_free(keys);
    return TG_OK;
}

tg_status tg_buckets_plan(tg_session *s)
{
    const tg_program *p = s->program;
    int64_t cap = p->config.distributed.bucket_bytes;
    if (!s->coll->group || p->replicas != 1 || cap <= 0)
        return TG_OK;
    s->coll->buckets = tg_calloc((size_t)p->n_devices, sizeof *s->coll->buckets);
    if (!s->coll->buckets)
        return tg_error(TG_ERR_NOMEM, "session: out of memory for the gradient buckets");
    bool any = false;
    for (int d = 0; d < p->n_devices; d++) {
        tg_bucket_plan *b = &s->coll->buckets[d];
        if (!p->devices[d].n_accumulators || !finishing_op(p, d, b))
            continue;
        TG_TRY(cut(s, d, (size_t)cap, b));
        /* MPI's displacements are ints: a larger pack goes whole, after the backward */
        if (b->pack * (size_t)tg_dist_instances() > INT_MAX)
            b->n_buckets = 0;
        if (b->n_buckets)
            TG_TRY(tg_dist_group_reserve(s->coll->group, d, b->n_buckets));
        any |= b->n_buckets > 0;
    }
    if (!any)
        tg_buckets_free(s);
    return TG_OK;
}

void tg_buckets_free(tg_session *s)
{
    for (int d = 0; s->coll->buckets && d < s->program->n_devices; d++) {
        tg_bucket_plan *b = &s->coll->buckets[d];
        tg_free(b->order);
        tg_free(b->pack_off);
        tg_free(b->buckets);
        tg_free(b->started);
    }
    tg_free(s->coll->buckets);
    s->coll->buckets = NULL;
}

const tg_bucket_plan *tg_buckets_finishing(const device_ctx *c, tg_pipe_pass pass, int64_t j)
{
    const tg_bucket_plan *b = c->s->coll->buckets ? &c->s->coll->buckets[c->device] : NULL;
    return b && b->n_buckets && b->last_pass == pass && b->last_mb == j ? b : NULL;
}

/* The last micro-batch's gradient (slot g) added to accumulator a's sum
 * of the earlier ones, the result written to `dst` rather than back to
 * the accumulator: the same sum, without a copy when j is the first. */
static void accumulate_into(device_ctx *c, const tg_accumulator *a, int64_t j, int64_t g,
                            unsigned char *dst)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_buffer *acc = &p->buffers[a->acc_buffer], *grad = &p->buffers[a->grad_buffer];
    if (tg_collectives_wire_bytes(s, a->acc_buffer) != acc->bytes) {
        /* to another type on the wire: the sum in the accumulator, then rounded into the pack */
        unsigned char *sum = tg_engine_slot_ptr(s, c->replica, a->acc_buffer, 0);
        tg_accumulate_typed(sum, acc->dtype, tg_engine_slot_ptr(s, c->replica, a->grad_buffer, g),
                            grad->dtype, tg_numel(p->graph->nodes[acc->node]), j == 0, 1.0f);
        tg_collectives_to_wire(s, a->acc_buffer, dst, sum);
        return;
    }
    if (j > 0)
        memcpy(dst, tg_engine_slot_ptr(s, c->replica, a->acc_buffer, 0), acc->bytes);
    tg_accumulate_typed(dst, acc->dtype, tg_engine_slot_ptr(s, c->replica, a->grad_buffer, g),
                        grad->dtype, tg_numel(p->graph->nodes[acc->node]), j == 0, 1.0f);
}

void tg_buckets_send(device_ctx *c, int i, int64_t j, int64_t g)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    tg_bucket_plan *b = &s->coll->buckets[c->device];
    const tg_bucket *k = &b->buckets[i];
    /* this instance's block of the gathered packs: the accumulators' final
     * values go there (the all-reduce reads them there and writes the mean
     * to the accumulators) */
    unsigned char *mine = s->coll->recv[c->device] + (size_t)tg_dist_instance() * b->pack;
    for (int m = k->first; m < k->first + k->count; m++)
        accumulate_into(c, &p->devices[c->device].accumulators[b->order[m]], j, g,
                        mine + b->pack_off[b->order[m]]);
    double t0 = tg_engine_now();
    b->started[i] = t0;
    if (i == b->n_buckets - 1)
        tg_collectives_stamp(mine + b->pack - TG_DIST_STAMP_BYTES, t0);
    tg_dist_group_start(s->coll->group, c->device, i, s->coll->recv[c->device], k->offset, k->bytes,
                        b->pack);
    c->buckets_sent++;
    c->exchange.during_backward += tg_engine_now() - t0;
}

/* Bucket i has arrived: its event, from its start to now. */
static void arrived(device_ctx *c, int64_t it, int i)
{
    const tg_bucket_plan *b = &c->s->coll->buckets[c->device];
    tg_engine_record(c, TG_EVENT_BUCKET, TG_PHASE_BACKWARD, it, -1, -1, b->started[i],
                     (int64_t)b->buckets[i].bytes * tg_dist_instances(), 0);
    c->buckets_done++;
}

void tg_buckets_progress(device_ctx *c, int64_t it)
{
    double t0 = tg_engine_now();
    while (c->buckets_done < c->buckets_sent &&
           tg_dist_group_test(c->s->coll->group, c->device, c->buckets_done))
        arrived(c, it, c->buckets_done);
    c->exchange.during_backward += tg_engine_now() - t0;
}

bool tg_buckets_wait(device_ctx *c, int64_t it)
{
    tg_session *s = c->s;
    const tg_bucket_plan *b = &s->coll->buckets[c->device];
    double t0 = tg_engine_now();
    if (c->buckets_sent != b->n_buckets) { /* the finishing op sends them all */
        char msg[160];
        snprintf(msg, sizeof msg,
                 "device %d sent %d of its %d gradient buckets before the update (a tilegraph "
                 "defect: report it with the command line)",
                 c->device, c->buckets_sent, b->n_buckets);
        tg_exchange_fail(s, TG_ERR_INTERNAL, msg);
        return false;
    }
    while (c->buckets_done < c->buckets_sent) {
        if (!tg_dist_group_wait(s->coll->group, c->device, c->buckets_done,
                                tg_run_abort_flag(s->run))) {
            tg_exchange_fail(
                s, TG_ERR_IO,
                tg_dist_stuck_reason("the gradients' exchange across instances was abandoned"));
            return false;
        }
        arrived(c, it, c->buckets_done);
    }
    /* what the update waited for: the exchange the backward did not hide */
    tg_engine_record(c, TG_EVENT_INSTANCES, TG_PHASE_UPDATE, it, -1, -1, t0,
                     (int64_t)b->pack * tg_dist_instances(), 0);
    tg_collectives_note_wait(c, s->coll->recv[c->device], b->pack, b->pack - TG_DIST_STAMP_BYTES,
                             t0);
    c->buckets_sent = c->buckets_done = 0;
    return true;
}
