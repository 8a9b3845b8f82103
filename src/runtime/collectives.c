/* runtime/collectives.c - the collectives part's life and what the rest of
 * the runtime reads of it: the communicators, the exchange times, the
 * gathered sharded state; and the wire format of an instance's pack, which
 * the all-reduce (allreduce.c) and the gradient buckets (buckets.c) both
 * write and read. */
#include "runtime/collectives_state.h"

#include "compile/program.h"
#include "core/alloc.h"
#include "core/error.h"
#include "runtime/dist.h"

#include <string.h>

tg_status tg_collectives_create(tg_collectives **out)
{
    tg_collectives *c = tg_calloc(1, sizeof *c);
    if (!(*out = c))
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    c->state_step = -1;
    return TG_OK;
}

void tg_collectives_free(tg_collectives *c)
{
    tg_free(c);
}

struct tg_dist_group *tg_collectives_group(const tg_collectives *c)
{
    return c ? c->group : NULL;
}

void tg_collectives_add_times(tg_session *s)
{
    tg_exchange_times *times = s->coll->exchange_times;
    for (int d = 0; times && d < s->program->n_devices; d++) {
        const tg_exchange_times *x = &s->ctx[d].exchange;
        tg_exchange_times *to = &times[d];
        to->updates += x->updates;
        to->during_backward += x->during_backward;
        to->after_backward += x->after_backward;
        to->imbalance += x->imbalance;
        to->summing += x->summing;
    }
}

tg_exchange_times tg_session_exchange_times(const tg_session *s, int device)
{
    tg_exchange_times none = {0};
    if (!s || !s->coll || !s->coll->exchange_times || device < 0 || device >= s->program->n_devices)
        return none;
    return s->coll->exchange_times[device];
}

tg_status tg_collectives_state(const tg_session *s, const tg_tensor *t, unsigned char *dst)
{
    const tg_collectives *c = s->coll;
    if (!c->state || !c->state[t->id] || c->state_step != s->step)
        return tg_error(TG_ERR_INVALID_ARG,
                        "session: '%s' is sharded over the replicas of every instance of the "
                        "job; every instance calls tg_dist_sync before one of them reads it "
                        "(as before a checkpoint)",
                        t->name);
    memcpy(dst, c->state[t->id], (size_t)tg_numel(t) * tg_dtype_size(s->program->storage[t->id]));
    return TG_OK;
}

/* ---- the wire format of a pack ------------------------------------------------------ */

bool tg_collectives_wire_bf16(const tg_session *s, int buf)
{
    return s->program->config.distributed.wire_bf16 && s->program->buffers[buf].dtype == TG_F32;
}

size_t tg_collectives_wire_bytes(const tg_session *s, int buf)
{
    size_t bytes = s->program->buffers[buf].bytes;
    return tg_collectives_wire_bf16(s, buf) ? bytes / 2 : bytes;
}

void tg_collectives_to_wire(const tg_session *s, int buf, unsigned char *dst,
                            const unsigned char *src)
{
    if (!tg_collectives_wire_bf16(s, buf)) {
        memcpy(dst, src, s->program->buffers[buf].bytes);
        return;
    }
    int64_t n = tg_numel(s->program->graph->nodes[s->program->buffers[buf].node]);
    const float *x = (const float *)src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = tg_f32_to_bf16(x[i]);
        memcpy(dst + 2 * i, &h, sizeof h);
    }
}

void tg_collectives_stamp(unsigned char *at, double local)
{
    double job = tg_dist_job_time(local);
    memcpy(at, &job, sizeof job);
}

void tg_collectives_note_wait(device_ctx *c, const unsigned char *recv, size_t stride, size_t at,
                              double t0)
{
    double waited = tg_engine_now() - t0, latest = -1e300;
    for (int i = 0; i < tg_dist_instances(); i++) {
        double stamp;
        memcpy(&stamp, recv + (size_t)i * stride + at, sizeof stamp);
        if (i != tg_dist_instance() && stamp > latest)
            latest = stamp;
    }
    double behind = latest - tg_dist_job_time(t0); /* how long after t0 the last one sent */
    c->exchange.after_backward += waited;
    c->exchange.imbalance += behind < 0 ? 0 : behind > waited ? waited : behind;
}
