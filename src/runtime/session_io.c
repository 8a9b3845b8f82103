/* runtime/session_io.c - moving data between the host and a session's
 * devices: persistent values written and read in their own type (gathered
 * from or scattered to the replicas' shards), the initial values, the
 * outputs of a run, and the session's accessors. Split from
 * runtime/session.c, which creates and destroys the session.
 */
#include "runtime/session_state.h"
#include "runtime/session_dist.h"
#include "compile/layout.h"

#include "core/alloc.h"
#include "core/convert.h"
#include "core/error.h"
#include "core/process.h"
#include "graph/init.h"
#include "backend/cpu/dnnl_util.h"
#include "ops/op.h"
#include "runtime/rts.h"
#include "runtime/streams.h"
#include "runtime/scaling.h"
#include "runtime/collectives.h"

#include <stdio.h>
#include <string.h>

static unsigned char *replica_data(const tg_session *s, int r, const tg_tensor *t);

static tg_dtype stored_as(const tg_session *s, const tg_tensor *t)
{
    return s->program->storage[t->id];
}

static const tg_buffer *home_buffer(const tg_session *s, const tg_tensor *t)
{
    int b = s->program->home[t->id];
    return b >= 0 ? &s->program->buffers[b] : NULL;
}

static size_t stored_bytes(const tg_session *s, const tg_tensor *t)
{
    return (size_t)tg_numel(t) * tg_dtype_size(stored_as(s, t));
}

/* A persistent value as stored (all of it) into dst, gathered from the
 * replicas' shards under replicated tensor sharding, else replica 0's. */
static tg_status gather_value(const tg_session *s, const tg_tensor *t, unsigned char *dst)
{
    const tg_buffer *b = home_buffer(s, t);
    if (!b->sharded) {
        memcpy(dst, replica_data(s, 0, t), stored_bytes(s, t));
        return TG_OK;
    }
    /* a sharded weight, on chip or off: the others' shards are here */
    if (tg_sharding_is_weight(s->program, s->program->home[t->id])) {
        tg_rts_whole(s, s->program->home[t->id], dst);
        return TG_OK;
    }
    if (tg_collectives_group(s->coll)) /* the other instances' shards: tg_dist_sync's */
        return tg_collectives_state(s, t, dst);
    size_t es = tg_dtype_size(b->dtype);
    for (int r = 0; r < s->program->replicas; r++) {
        int64_t begin, end;
        tg_shard_range(tg_numel(t), r, s->program->replicas, &begin, &end);
        memcpy(dst + (size_t)begin * es, replica_data(s, r, t), (size_t)(end - begin) * es);
    }
    return TG_OK;
}

/* The reverse: every replica gets the value, or its shard of it. */
static void scatter_value(const tg_session *s, const tg_tensor *t, const unsigned char *src)
{
    const tg_buffer *b = home_buffer(s, t);
    size_t es = tg_dtype_size(b->dtype);
    for (int r = 0; r < s->program->replicas; r++) {
        int64_t begin = 0, end = tg_numel(t);
        if (b->sharded) /* this instance's replicas hold shards replica_offset + r */
            tg_shard_range(tg_numel(t), s->replica_offset + r, tg_program_shards(s->program),
                           &begin, &end);
        memcpy(replica_data(s, r, t), src + (size_t)begin * es, (size_t)(end - begin) * es);
    }
    /* a sharded weight: and the other instances' shards */
    if (tg_sharding_is_weight(s->program, s->program->home[t->id]))
        tg_rts_host_written(s, s->program->home[t->id], src);
}

/* The host wrote a persistent value: what kernels derived from the old
 * ones (backend/cpu/weight_cache.h) is stale. */
static void weights_written(tg_session *s)
{
    s->weights_version = tg_process_next_weights_version();
}

/* Write a persistent value given in t's own type: converted to its storage
 * type and copied to every replica (or shard). */
static tg_status write_value(tg_session *s, const tg_tensor *t, const void *data)
{
    weights_written(s);
    const tg_buffer *b = home_buffer(s, t);
    if (!b->sharded) {
        for (int r = 0; r < s->program->replicas; r++)
            tg_convert(data, t->dtype, replica_data(s, r, t), stored_as(s, t), (size_t)tg_numel(t));
        return TG_OK;
    }
    unsigned char *tmp = tg_malloc(stored_bytes(s, t) + 1);
    if (!tmp)
        return tg_error(TG_ERR_NOMEM, "session: out of memory writing '%s'", t->name);
    tg_convert(data, t->dtype, tmp, stored_as(s, t), (size_t)tg_numel(t));
    scatter_value(s, t, tmp);
    tg_free(tmp);
    return TG_OK;
}

/* Read a persistent value into data, in t's own type. */
static tg_status read_value(const tg_session *s, const tg_tensor *t, void *data)
{
    const tg_buffer *b = home_buffer(s, t);
    if (!b->sharded) {
        tg_convert(replica_data(s, 0, t), stored_as(s, t), data, t->dtype, (size_t)tg_numel(t));
        return TG_OK;
    }
    unsigned char *tmp = tg_malloc(stored_bytes(s, t) + 1);
    if (!tmp)
        return tg_error(TG_ERR_NOMEM, "session: out of memory reading '%s'", t->name);
    tg_status st = gather_value(s, t, tmp);
    if (st == TG_OK)
        tg_convert(tmp, stored_as(s, t), data, t->dtype, (size_t)tg_numel(t));
    tg_free(tmp);
    return st;
}

/* Initial values are drawn in f32 (the same numbers whatever the storage). */
tg_status tg_session_fill_leaves(tg_session *s)
{
    const tg_program *p = s->program;
    const tg_graph *g = s->graph;
    weights_written(s);
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->n_in > 0 || p->home[i] < 0 || t->role == TG_ROLE_INPUT || t->dtype != TG_F32)
            continue;
        if (stored_as(s, t) == TG_F32 && !home_buffer(s, t)->sharded) {
            for (int r = 0; r < p->replicas; r++)
                tg_init_fill_f32(t, s->seed, (float *)replica_data(s, r, t));
            continue;
        }
        float *tmp = tg_malloc((size_t)tg_numel(t) * sizeof(float) + 1);
        if (!tmp)
            return tg_error(TG_ERR_NOMEM, "session: out of memory initialising '%s'", t->name);
        tg_init_fill_f32(t, s->seed, tmp);
        tg_status st = write_value(s, t, tmp);
        tg_free(tmp);
        TG_TRY(st);
    }
    return TG_OK;
}

/* ---- access -------------------------------------------------------------------------- */

static unsigned char *replica_data(const tg_session *s, int r, const tg_tensor *t)
{
    if (!s || !t || t->id >= s->graph->n_nodes || s->graph->nodes[t->id] != t)
        return NULL;
    int b = s->program->home[t->id];
    if (b < 0)
        return NULL;
    const tg_buffer *buf = &s->program->buffers[b];
    if (buf->offloaded)
        return s->host_state[b * s->program->replicas + r];
    return s->arena[r * s->program->n_devices + buf->device] + buf->offset;
}

void *tg_session_data(const tg_session *s, const tg_tensor *t)
{
    return replica_data(s, 0, t);
}
const tg_program *tg_session_program(const tg_session *s)
{
    return s->program;
}
const tg_graph *tg_session_graph(const tg_session *s)
{
    return s->graph;
}

static bool is_leaf_value(const tg_tensor *t)
{
    return t->op == TG_OP_PARAM || t->op == TG_OP_STATE || t->op == TG_OP_CONSTANT;
}

int64_t tg_session_output_count(const tg_session *s, const tg_tensor *t)
{
    const tg_program *p = s->program;
    if (!t || !tg_host_streams_out(s->streams, t->id))
        return 1;
    switch (s->output_mode) {
    case TG_OUTPUT_SUM:
    case TG_OUTPUT_FINAL:
        return p->replicas;
    case TG_OUTPUT_EVERY_N:
        return tg_session_stream_count(s) / s->output_period;
    default:
        return tg_session_stream_count(s);
    }
}

tg_status tg_session_write(tg_session *s, const tg_tensor *t, const void *data, size_t bytes)
{
    if (!t || !replica_data(s, 0, t))
        return tg_error(TG_ERR_INVALID_ARG, "session: tensor '%s' is not stored by this program",
                        t ? t->name : "(null)");
    if (t->op == TG_OP_INPUT) {
        int64_t count = tg_session_stream_count(s);
        if (bytes != (size_t)count * tg_nbytes(t))
            return tg_error(TG_ERR_INVALID_ARG,
                            "session: input '%s' takes %lld micro-batch%s of %zu bytes per run "
                            "(iterations x replicas x accumulation), %zu bytes in all, not %zu",
                            t->name, (long long)count, count == 1 ? "" : "es", tg_nbytes(t),
                            (size_t)count * tg_nbytes(t), bytes);
        tg_convert(data, t->dtype, tg_host_streams_in(s->streams, t->id), stored_as(s, t),
                   (size_t)(count * tg_numel(t)));
        return TG_OK;
    }
    if (!is_leaf_value(t))
        return tg_error(TG_ERR_INVALID_ARG,
                        "session: '%s' is computed; only inputs, weights and "
                        "state can be written",
                        t->name);
    if (bytes != tg_nbytes(t))
        return tg_error(TG_ERR_INVALID_ARG, "session: '%s' holds %zu bytes, not %zu", t->name,
                        tg_nbytes(t), bytes);
    return write_value(s, t, data);
}

int64_t tg_session_output_index(const tg_session *s, const tg_tensor *t, int64_t k)
{
    const tg_program *p = s->program;
    if (!t || !tg_host_streams_out(s->streams, t->id) || k < 0 ||
        k >= tg_session_output_count(s, t))
        return -1;
    switch (s->output_mode) {
    case TG_OUTPUT_ALL:
        return k;
    case TG_OUTPUT_FINAL:
        return p->training ? ((int64_t)(p->iterations - 1) * p->replicas + k) * p->micro_batches +
                                 p->micro_batches - 1
                           : (int64_t)(p->micro_batches - 1) * p->replicas + k;
    case TG_OUTPUT_EVERY_N: {
        int64_t per_iter =
            tg_session_stream_count(s) / (p->training ? p->iterations : p->micro_batches);
        int64_t iter = (k / per_iter + 1) * s->output_period - 1;
        return iter * per_iter + k % per_iter;
    }
    default:
        return -1;
    }
}

/* Copy the k-th returned value of output t (stored copy h) into dst, in the
 * tensor's own type. */
static void copy_out(const tg_session *s, const tg_tensor *t, unsigned char *dst, int64_t h)
{
    tg_convert(tg_host_streams_out(s->streams, t->id) + (size_t)h * stored_bytes(s, t),
               stored_as(s, t), dst, t->dtype, (size_t)tg_numel(t));
}

static tg_status read_output(const tg_session *s, const tg_tensor *t, unsigned char *dst)
{
    const tg_program *p = s->program;
    size_t nb = tg_nbytes(t);
    int64_t count = tg_session_stream_count(s), n = tg_numel(t);
    switch (s->output_mode) {
    case TG_OUTPUT_ALL:
        for (int64_t h = 0; h < count; h++)
            copy_out(s, t, dst + (size_t)h * nb, h);
        return TG_OK;
    case TG_OUTPUT_FINAL:
        for (int r = 0; r < p->replicas; r++) {
            int64_t it = p->iterations - 1, j = p->micro_batches - 1;
            int64_t h =
                p->training ? (it * p->replicas + r) * p->micro_batches + j : j * p->replicas + r;
            copy_out(s, t, dst + (size_t)r * nb, h);
        }
        return TG_OK;
    case TG_OUTPUT_SUM: {
        memset(dst, 0, (size_t)p->replicas * nb);
        if (t->dtype != TG_F32)
            return TG_OK;
        float *v = tg_malloc((size_t)n * sizeof(float) + 1);
        if (!v)
            return tg_error(TG_ERR_NOMEM, "session: out of memory reading '%s'", t->name);
        for (int64_t h = 0; h < count; h++) {
            int r =
                p->training ? (int)((h / p->micro_batches) % p->replicas) : (int)(h % p->replicas);
            float *d = (float *)(dst + (size_t)r * nb);
            copy_out(s, t, (unsigned char *)v, h);
            for (int64_t i = 0; i < n; i++)
                d[i] += v[i];
        }
        tg_free(v);
        return TG_OK;
    }
    case TG_OUTPUT_EVERY_N: {
        int64_t per_iter = count / (p->training ? p->iterations : p->micro_batches), k = 0;
        for (int64_t h = 0; h < count; h++)
            if ((h / per_iter + 1) % s->output_period == 0)
                copy_out(s, t, dst + (size_t)(k++) * nb, h);
        return TG_OK;
    }
    }
    return TG_OK;
}

tg_status tg_session_read(tg_session *s, const tg_tensor *t, void *data, size_t bytes)
{
    if (!t || !replica_data(s, 0, t))
        return tg_error(TG_ERR_INVALID_ARG, "session: tensor '%s' is not stored by this program",
                        t ? t->name : "(null)");
    if (tg_host_streams_out(s->streams, t->id)) {
        int64_t count = tg_session_output_count(s, t);
        if (bytes != (size_t)count * tg_nbytes(t))
            return tg_error(TG_ERR_INVALID_ARG,
                            "session: output '%s' returns %lld cop%s of %zu "
                            "bytes per run (outputMode), %zu bytes in all, not %zu",
                            t->name, (long long)count, count == 1 ? "y" : "ies", tg_nbytes(t),
                            (size_t)count * tg_nbytes(t), bytes);
        return read_output(s, t, data);
    }
    if (!is_leaf_value(t) && t->op != TG_OP_INPUT)
        return tg_error(TG_ERR_INVALID_ARG,
                        "session: '%s' is an intermediate value; mark it as an output to read it",
                        t->name);
    if (t->op == TG_OP_INPUT)
        return tg_error(TG_ERR_INVALID_ARG, "session: '%s' is an input; read it from the host",
                        t->name);
    if (bytes != tg_nbytes(t))
        return tg_error(TG_ERR_INVALID_ARG, "session: '%s' holds %zu bytes, not %zu", t->name,
                        tg_nbytes(t), bytes);
    return read_value(s, t, data);
}

int64_t tg_session_step(const tg_session *s)
{
    return s->step;
}
float tg_session_loss_scale(const tg_session *s)
{
    return tg_scaling_loss_scale(s->scaling);
}
int64_t tg_session_skipped_updates(const tg_session *s)
{
    return tg_scaling_skipped_updates(s->scaling);
}
tg_status tg_session_value_out(const tg_session *s, const tg_tensor *t, void *dst)
{
    if (!replica_data(s, 0, t))
        return tg_error(TG_ERR_INVALID_ARG, "session: '%s' is not stored", t ? t->name : "(null)");
    return gather_value(s, t, dst);
}

tg_status tg_session_value_in(tg_session *s, const tg_tensor *t, const void *src)
{
    if (!replica_data(s, 0, t))
        return tg_error(TG_ERR_INVALID_ARG, "session: '%s' is not stored", t ? t->name : "(null)");
    weights_written(s);
    scatter_value(s, t, src);
    return TG_OK;
}

tg_dtype tg_session_storage_dtype(const tg_session *s, const tg_tensor *t)
{
    return replica_data(s, 0, t) ? stored_as(s, t) : t->dtype;
}
void tg_session_set_step(tg_session *s, int64_t step)
{
    s->step = step;
}
const char *tg_session_kernels(const tg_session *s, char *buf, size_t cap)
{
    const tg_program *p = s->program;
    int planned = 0, dnnl = 0, bf16 = 0;
    for (int i = 0; i < p->graph->n_nodes; i++) {
        const tg_kernel_plan *kp = &p->plans[i];
        planned += kp->kernel[0] != 0;
        dnnl += kp->state != NULL && strncmp(kp->kernel, "own", 3) != 0; /* conv_pw_bf16.c's */
        bf16 += kp->state != NULL && strstr(kp->kernel, "(bf16)") != NULL;
    }
    int blocked_tensors, blocked_ops;
    tg_layout_counts(p, &blocked_tensors, &blocked_ops);
    if (!planned)
        snprintf(buf, cap, "no op chooses between kernels");
    else
        snprintf(buf, cap,
                 "oneDNN (ISA %s) for %d of %d convolution and matrix-product ops%s%.0d%s",
                 tg_dnnl_isa_name(), dnnl, planned, bf16 ? ", " : "", bf16, bf16 ? " in bf16" : "");
    size_t used = strlen(buf);
    if (blocked_tensors && used < cap)
        snprintf(buf + used, cap - used, "; %d activations kept in nChw16c (%d other ops blocked)",
                 blocked_tensors, blocked_ops);
    return buf;
}

const char *tg_session_precision(const tg_session *s, char *buf, size_t cap)
{
    return tg_precision_describe(&s->program->precision, buf, cap);
}

const char *tg_session_cache(const tg_session *s)
{
    switch ((tg_cache_result)s->cache) {
    case TG_CACHE_LOADED:
        return "hit (loaded, nothing compiled)";
    case TG_CACHE_COMPILED:
        return "miss (compiled and written)";
    case TG_CACHE_REPLACED:
        return "miss (the file was unusable, as warned: compiled and rewritten)";
    case TG_CACHE_UNSAVED:
        return "miss (compiled; not written, as warned)";
    default:
        return NULL;
    }
}

int tg_session_threads(const tg_session *s)
{
    return s->program->n_threads;
}
int tg_session_devices(const tg_session *s)
{
    return s->program->n_devices;
}
int tg_session_replicas(const tg_session *s)
{
    return s->program->replicas;
}
const char *tg_session_auto_stages(const tg_session *s, const char **option)
{
    const tg_program *p = s->program;
    if (p->auto_phases[0]) { /* phases auto (compile/phases_auto.h) */
        if (option)
            *option = "phases";
        return p->auto_phases;
    }
    /* by the form, which a loaded executable keeps as well: stages separate
     * devices with '|', split lists the boundaries (compile/stages.c) */
    if (option)
        *option = p->auto_stages[0] && !strchr(p->auto_stages, '|') ? "split" : "stages";
    return p->auto_stages;
}
double tg_session_flops(const tg_session *s)
{
    return s->program->flops;
}

size_t tg_session_arena_bytes(const tg_session *s)
{
    return s->program->arena_bytes * (size_t)s->program->replicas;
}

int64_t tg_session_samples_per_step(const tg_session *s)
{
    return s->program->samples_per_step;
}

int64_t tg_session_samples_per_run(const tg_session *s, const tg_tensor *input)
{
    return tg_session_stream_count(s) * (input && input->shape.ndim ? input->shape.dim[0] : 1);
}

tg_status tg_session_copy_weights(tg_session *dst, const tg_session *src)
{
    const tg_graph *g = dst->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if ((t->op != TG_OP_PARAM && t->op != TG_OP_STATE) || !replica_data(dst, 0, t))
            continue;
        const tg_tensor *from = tg_graph_find(src->graph, t->name);
        if (!from || !replica_data(src, 0, from)) {
            if (t->op == TG_OP_STATE)
                continue; /* optimizer state the source does not have */
            return tg_error(TG_ERR_NOT_FOUND, "copy weights: '%s' is not in the source session",
                            t->name);
        }
        if (!tg_shape_equal(from->shape, t->shape) || from->dtype != t->dtype) {
            char a[64], b[64];
            return tg_error(TG_ERR_SHAPE, "copy weights: '%s' is %s in the source but %s here",
                            t->name, tg_shape_str(from->shape, a, sizeof a),
                            tg_shape_str(t->shape, b, sizeof b));
        }
        float *tmp = tg_malloc(tg_nbytes(t) + 1);
        tg_status st =
            tmp ? read_value(src, from, tmp)
                : tg_error(TG_ERR_NOMEM, "copy weights: out of memory for '%s'", t->name);
        if (st == TG_OK)
            st = write_value(dst, t, tmp);
        tg_free(tmp);
        TG_TRY(st);
    }
    return TG_OK;
}

void *tg_session_replica_data(const tg_session *s, int replica, const tg_tensor *t)
{
    return replica < s->program->replicas ? replica_data(s, replica, t) : NULL;
}

double tg_session_last_run_seconds(const tg_session *s)
{
    return s->last_run_seconds;
}

int tg_session_max_in_flight(const tg_session *s, int device)
{
    return s->max_in_flight[device];
}

double tg_session_busy_seconds(const tg_session *s, int replica, int device)
{
    return s->last_busy[replica * s->program->n_devices + device];
}

double tg_session_stream_seconds(const tg_session *s, int replica, int device)
{
    return s->last_streams[replica * s->program->n_devices + device];
}
