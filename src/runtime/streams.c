/* runtime/streams.c - the host streams of a run: each micro-batch's inputs
 * in from the host and outputs back to it (checked for NaN on request),
 * and offloaded tensors in and out of their streamed copies around the
 * steps that use them (compile/streaming.c). */
#include "runtime/streams.h"

#include "core/alloc.h"
#include "core/error.h"
#include "runtime/exchange.h"
#include "runtime/rts.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Position of (iteration, replica, micro-batch) in the host streams:
 * [device iteration][replica][accumulation micro-batch]. Inference pipelines
 * its iterations as micro-batches, so there j is the iteration. */
struct tg_host_streams {
    /* per node id: all micro-batches of one run, in
     * [iteration][replica][micro-batch] order (NULL for other nodes) */
    unsigned char **in, **out;
    int n_nodes;
};

tg_status tg_host_streams_create(const tg_program *p, const tg_graph *g, int64_t count,
                                 tg_host_streams **out)
{
    tg_host_streams *h = tg_calloc(1, sizeof *h);
    if (!h)
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    *out = h;
    h->n_nodes = g->n_nodes;
    h->in = tg_calloc((size_t)g->n_nodes + 1, sizeof *h->in);
    h->out = tg_calloc((size_t)g->n_nodes + 1, sizeof *h->out);
    if (!h->in || !h->out)
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    for (int d = 0; d < p->n_devices; d++) {
        const tg_device_program *dp = &p->devices[d];
        for (int k = 0; k < dp->n_inputs + dp->n_outputs; k++) {
            const tg_buffer *b =
                &p->buffers[k < dp->n_inputs ? dp->inputs[k] : dp->outputs[k - dp->n_inputs]];
            unsigned char **slot = k < dp->n_inputs ? &h->in[b->node] : &h->out[b->node];
            if (!(*slot = tg_calloc((size_t)count, b->bytes)))
                return tg_error(TG_ERR_NOMEM, "session: out of memory for the host stream of '%s'",
                                g->nodes[b->node]->name);
        }
    }
    return TG_OK;
}

void tg_host_streams_free(tg_host_streams *h)
{
    if (!h)
        return;
    for (int i = 0; h->in && i < h->n_nodes; i++)
        tg_free(h->in[i]);
    for (int i = 0; h->out && i < h->n_nodes; i++)
        tg_free(h->out[i]);
    tg_free(h->in);
    tg_free(h->out);
    tg_free(h);
}

unsigned char *tg_host_streams_in(const tg_host_streams *h, int node)
{
    return h->in[node];
}

unsigned char *tg_host_streams_out(const tg_host_streams *h, int node)
{
    return h->out[node];
}

static int64_t host_index(const tg_program *p, int64_t it, int r, int64_t j)
{
    if (!p->training)
        return j * p->replicas + r;
    return (it * p->replicas + r) * p->micro_batches + j;
}

int64_t tg_streams_copy_in(tg_session *s, int replica, int device, int64_t it, int64_t j, int64_t g)
{
    const tg_program *p = s->program;
    const tg_device_program *dp = &p->devices[device];
    int64_t h = host_index(p, it, replica, j), streamed = 0;
    for (int k = 0; k < dp->n_inputs; k++) {
        const tg_buffer *b = &p->buffers[dp->inputs[k]];
        memcpy(tg_engine_slot_ptr(s, replica, dp->inputs[k], g),
               s->streams->in[b->node] + (size_t)h * b->bytes, b->bytes);
        streamed += (int64_t)b->bytes;
    }
    return streamed;
}

/* Micro-batch j of iteration it from the host's input streams into the
 * device's input buffers (slot g), on the device's own thread. */
void tg_streams_inputs(device_ctx *c, int64_t it, int64_t j, int64_t g)
{
    double t0 = tg_engine_now();
    int64_t streamed = tg_streams_copy_in(c->s, c->replica, c->device, it, j, g);
    c->streams += tg_engine_now() - t0;
    if (streamed)
        tg_engine_record(c, TG_EVENT_STREAM_IN, TG_PHASE_FORWARD, it, j, -1, t0, streamed, 0);
}

int64_t tg_streams_copy(tg_session *s, int replica, int device, tg_phase ph, const tg_step *st,
                        bool in, int64_t g)
{
    const tg_program *p = s->program;
    int n = in ? st->n_stream_in : st->n_stream_out;
    const tg_stream_op *ops =
        p->devices[device].streams[ph] + st->stream_at + (in ? 0 : st->n_stream_in);
    int64_t moved = 0;
    for (int i = 0; i < n; i++) {
        if (ops[i].kind != TG_STREAM_COPY)
            continue;
        size_t bytes = p->buffers[ops[i].home].bytes;
        unsigned char *host = tg_engine_slot_ptr(s, replica, ops[i].home, g);
        unsigned char *copy = tg_engine_slot_ptr(s, replica, ops[i].copy, g);
        memcpy(in ? copy : host, in ? host : copy, bytes);
        moved += (int64_t)bytes;
    }
    return moved;
}

int64_t tg_streams_accumulate(device_ctx *c, tg_phase ph, const tg_step *st, int64_t g)
{
    const tg_program *p = c->s->program;
    const tg_stream_op *ops = p->devices[c->device].streams[ph] + st->stream_at + st->n_stream_in;
    int64_t j = ph == TG_PHASE_UPDATE ? -1 : g % p->micro_batches, moved = 0;
    for (int i = 0; i < st->n_stream_out; i++)
        if (ops[i].kind == TG_STREAM_ACCUMULATE) { /* in and out of host memory */
            tg_engine_accumulate(c, ops[i].home, ops[i].copy, j, g);
            moved += 2 * (int64_t)p->buffers[ops[i].home].bytes;
        }
    return moved;
}

/* The gathers among step st's ops in: they sort after its loads
 * (compile/streaming.c). */
static int gathers_of(const tg_stream_op *ops, int n)
{
    int k = 0;
    while (k < n && ops[n - 1 - k].kind == TG_STREAM_GATHER)
        k++;
    return k;
}

int64_t tg_streams_gather(device_ctx *c, tg_phase ph, const tg_step *st, int64_t it, int64_t g)
{
    const tg_program *p = c->s->program;
    const tg_stream_op *ops = p->devices[c->device].streams[ph] + st->stream_at;
    int n = st->n_stream_in, k = gathers_of(ops, n);
    if (k == 0)
        return 0;
    double t0 = tg_engine_now();
    int64_t gathered = 0, j = ph == TG_PHASE_UPDATE ? -1 : g % p->micro_batches;
    for (int i = n - k; i < n; i++) /* sharded weights, whole for the pass (runtime/rts.c) */
        gathered += tg_rts_gather(c, &ops[i], g);
    tg_engine_record(c, TG_EVENT_GATHER, ph, it, j, -1, t0, gathered, 0);
    return gathered;
}

int64_t tg_streams_step(device_ctx *c, tg_phase ph, const tg_step *st, bool in, int64_t it,
                        int64_t g)
{
    int n = in ? st->n_stream_in : st->n_stream_out;
    if (n == 0)
        return 0;
    const tg_program *p = c->s->program;
    const tg_stream_op *ops =
        p->devices[c->device].streams[ph] + st->stream_at + (in ? 0 : st->n_stream_in);
    int64_t moved = 0;
    if (n > (in ? gathers_of(ops, n) : 0)) {
        double t0 = tg_engine_now();
        moved = tg_streams_copy(c->s, c->replica, c->device, ph, st, in, g);
        if (!in)
            moved += tg_streams_accumulate(c, ph, st, g);
        int64_t j = ph == TG_PHASE_UPDATE ? -1 : g % p->micro_batches;
        tg_engine_record(c, in ? TG_EVENT_STREAMING_LOAD : TG_EVENT_STREAMING_STORE, ph, it, j, -1,
                         t0, moved, 0);
    }
    if (in)
        moved += tg_streams_gather(c, ph, st, it, g);
    return moved;
}

bool tg_streams_outputs(device_ctx *c, int64_t it, int64_t j, int64_t g)
{
    tg_session *s = c->s;
    const tg_program *p = s->program;
    const tg_device_program *dp = &p->devices[c->device];
    int64_t h = host_index(p, it, c->replica, j), streamed = 0;
    double t0 = tg_engine_now();
    for (int k = 0; k < dp->n_outputs; k++) {
        const tg_buffer *b = &p->buffers[dp->outputs[k]];
        const unsigned char *src = tg_engine_slot_ptr(s, c->replica, dp->outputs[k], g);
        memcpy(s->streams->out[b->node] + (size_t)h * b->bytes, src, b->bytes);
        streamed += (int64_t)b->bytes;
        const tg_tensor *t = p->graph->nodes[b->node];
        if (!s->check_nan || tg_numel(t) != 1 || t->dtype != TG_F32)
            continue;
        float v;
        memcpy(&v, src, sizeof v);
        if (!isfinite(v)) {
            char msg[512];
            snprintf(msg, sizeof msg, "step %lld, micro-batch %lld, replica %d: '%s' is %s",
                     (long long)(s->step + it), (long long)j, c->replica, t->name,
                     isnan(v) ? "NaN" : "infinite");
            tg_exchange_fail(s, TG_ERR_NUMERIC, msg);
            return false;
        }
    }
    if (dp->n_outputs)
        tg_engine_record(c, TG_EVENT_STREAM_OUT, TG_PHASE_FORWARD, it, j, -1, t0, streamed, 0);
    return true;
}
