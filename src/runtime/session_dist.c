/* runtime/session_dist.c - a session as one instance of an MPI job: the
 * replicas it runs out of the job's, the check that every instance compiled
 * the same program, and the buffers the all-reduce exchanges
 * (runtime/allreduce.c). Outside a job (or a job of one) it changes nothing. */
#include "runtime/session_dist.h"

#include "core/alloc.h"
#include "compile/program.h"
#include "core/error.h"
#include "runtime/allreduce.h"
#include "runtime/buckets.h"
#include "runtime/dist.h"
#include "runtime/record.h"
#include "runtime/rts.h"
#include "runtime/collectives_state.h"
#include "tilegraph/trace.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef TG_VERSION
#define TG_VERSION "dev"
#endif

tg_status tg_session_dist_options(tg_session *s, tg_config *c)
{
    int R = c->pipeline.replicas;
    c->threads.host_instances = tg_dist_host_instances();
    int N = tg_dist_instances(), i = tg_dist_instance();
    s->global_replicas = R;
    s->replica_offset = 0;
    if (N < 2)
        return TG_OK;
    if (R % N) {
        /* the multiples of N either side of R: below R there is none when R < N */
        int below = R - R % N, above = below + N;
        char use[64];
        if (below > 0)
            snprintf(use, sizeof use, "%d or %d", below, above);
        else
            snprintf(use, sizeof use, "%d", above);
        return tg_error(TG_ERR_CONFIG,
                        "instance %d of %d: replicationFactor (--replicas) %d is not a multiple "
                        "of the %d instances; each instance runs replicas / instances of them: "
                        "use --replicas %s",
                        i, N, R, N, use);
    }
    s->replica_offset = i * (R / N);
    char v[16];
    snprintf(v, sizeof v, "%d", N);
    TG_TRY(tg_config_set(c, "distributed.instances", v));
    snprintf(v, sizeof v, "%d", R / N);
    return tg_config_set(c, "replicationFactor", v);
}

/* Instance 0's program, or NULL when it has none or it is not this
 * instance's (another graph or other options: the check at set-up then
 * names the difference). */
static tg_program *load_from_instance0(const tg_graph *g, const tg_config *c, void *bytes,
                                       size_t len)
{
    tg_program *p = NULL;
    if (bytes && tg_executable_parse(g, c, bytes, len, "from instance 0", &p) == TG_OK)
        tg_program_choose_threads(p); /* for this host's cores */
    return p;
}

tg_status tg_session_dist_compile(const tg_graph *g, const tg_config *c, tg_program **out,
                                  tg_cache_result *cache)
{
    *out = NULL;
    *cache = TG_CACHE_OFF; /* a program from instance 0 is no cache's */
    if (tg_dist_instances() < 2)
        return tg_program_compile_cached_config(g, c, out, cache);
    void *bytes = NULL;
    size_t len = 0;
    if (tg_dist_instance() == 0) {
        tg_status st = tg_program_compile_cached_config(g, c, out, cache);
        if (st == TG_OK && tg_executable_serialize(*out, &bytes, &len) != TG_OK)
            bytes = NULL; /* the others compile for themselves */
        char why[512];
        snprintf(why, sizeof why, "%s", tg_error_message()); /* the broadcast may overwrite it */
        tg_status sent = tg_dist_broadcast(&bytes, &len);
        tg_free(bytes);
        if (st != TG_OK)
            return tg_error(st, "%s", why);
        return sent;
    }
    tg_trace_channel *ch = tg_trace_channel_get("compile");
    tg_trace_begin(ch, "program from instance 0");
    tg_status st = tg_dist_broadcast(&bytes, &len);
    if (st == TG_OK)
        *out = load_from_instance0(g, c, bytes, len);
    tg_trace_end(ch);
    TG_TRY(st);
    tg_free(bytes);
    return *out ? TG_OK : tg_program_compile_cached_config(g, c, out, cache);
}

/* The graph as built: every node's op, type, shape, parameters, inputs and name. */
static uint64_t graph_hash(const tg_graph *g)
{
    uint64_t h = TG_DIST_HASH_INIT;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        int head[6] = {(int)t->op, (int)t->dtype, t->shape.ndim, t->n_in, (int)t->flags, t->block};
        h = tg_dist_hash(h, head, sizeof head);
        h = tg_dist_hash(h, t->shape.dim, sizeof(t->shape.dim[0]) * (size_t)t->shape.ndim);
        /* the op's parameters: hyper-parameters such as a learning rate live here */
        h = tg_dist_hash(h, t->p.i, sizeof t->p.i);
        h = tg_dist_hash(h, t->p.f, sizeof t->p.f);
        for (int k = 0; k < t->n_in; k++)
            h = tg_dist_hash(h, &t->in[k]->id, sizeof t->in[k]->id);
        if (t->name)
            h = tg_dist_hash(h, t->name, strlen(t->name));
    }
    return h;
}

/* The options that shape the training: not where reports and traces go
 * (each instance writes its own). threadsPerDevice counts: the kernels'
 * partitioning over threads changes the last bits. Compared one by one, so
 * that a difference names the option and both values. */
static bool option_is_local(const char *key)
{
    static const char *const skip[] = {"autoReport.", "profiler.", "trace."};
    for (size_t j = 0; j < sizeof skip / sizeof *skip; j++)
        if (strncmp(key, skip[j], strlen(skip[j])) == 0)
            return true;
    return false;
}

static tg_status agree_options(const tg_config *c)
{
    int n = tg_options_count(), m = 0;
    const char **names = tg_calloc((size_t)n + 1, sizeof *names);
    const char **texts = tg_calloc((size_t)n + 1, sizeof *texts);
    char *buf = tg_calloc((size_t)n + 1, 96);
    tg_status st = TG_OK;
    if (!names || !texts || !buf)
        st = tg_error(TG_ERR_NOMEM, "session: out of memory comparing the instances' options");
    for (int k = 0; st == TG_OK && k < n; k++) {
        const char *key = tg_options_key(k);
        if (option_is_local(key))
            continue;
        char *name = buf + (size_t)m * 96;
        snprintf(name, 96, "option %s", key);
        names[m] = name;
        texts[m++] = tg_config_text(c, k);
    }
    if (st == TG_OK)
        st = tg_dist_agree_texts(names, texts, m,
                                 "every instance must run with the same options (the same flags "
                                 "and --engine-option values)");
    tg_free(names);
    tg_free(texts);
    tg_free(buf);
    return st;
}

/* Bytes of one replica's accumulators on device d. */
static size_t accumulator_bytes(const tg_program *p, int d)
{
    size_t n = 0;
    for (int k = 0; k < p->devices[d].n_accumulators; k++)
        n += p->buffers[p->devices[d].accumulators[k].acc_buffer].bytes;
    return n;
}

/* Bytes of device d's sharded weights' instance blocks: what the gather of
 * the updated weights sends after each update. */
static size_t sharded_weight_bytes(const tg_session *s, int d)
{
    const tg_program *p = s->program;
    const tg_device_program *dp = &p->devices[d];
    size_t n = 0;
    for (int k = 0; k < dp->n_steps[TG_PHASE_UPDATE]; k++) {
        const tg_step *st = &dp->steps[TG_PHASE_UPDATE][k];
        const tg_tensor *t = p->graph->nodes[st->node];
        if (tg_rts_is_sharded_update(p, st, t))
            n +=
                tg_rts_block_cap(s, tg_numel(t->in[0]), tg_dtype_size(p->buffers[st->in[0]].dtype));
    }
    return n;
}

tg_status tg_session_dist_setup(tg_session *s)
{
    if (tg_dist_instances() < 2)
        return TG_OK;
    static const char *const version[] = {"tilegraph version"}, *const graph[] = {"model (graph)"};
    const char *mine[] = {TG_VERSION};
    TG_TRY(tg_dist_agree_texts(version, mine, 1,
                               "every instance must run the same tilegraph version"));
    uint64_t h = graph_hash(s->graph);
    TG_TRY(tg_dist_agree(graph, &h, 1,
                         "every instance must build the same model (the same --model, input "
                         "shape, batch size, optimizer and its hyperparameters)"));
    TG_TRY(agree_options(&s->program->config));
    const tg_program *p = s->program;
    if (!p->training)
        return TG_OK; /* inference exchanges nothing */
    TG_TRY(tg_dist_group_create(p->n_devices, &s->coll->group));
    s->coll->send = tg_calloc((size_t)p->n_devices, sizeof *s->coll->send);
    s->coll->recv = tg_calloc((size_t)p->n_devices, sizeof *s->coll->recv);
    s->coll->exchange_times = tg_calloc((size_t)p->n_devices, sizeof *s->coll->exchange_times);
    if (!s->coll->send || !s->coll->recv || !s->coll->exchange_times)
        return tg_error(TG_ERR_NOMEM, "session: out of memory for the all-reduce buffers");
    for (int d = 0; d < p->n_devices; d++) {
        size_t one = accumulator_bytes(p, d), weights = sharded_weight_bytes(s, d);
        /* each instance's pack ends with its stamp (allreduce.c) */
        size_t send = one * (size_t)p->replicas + TG_DIST_STAMP_BYTES;
        size_t recv = send * (size_t)tg_dist_instances();
        send = weights > send ? weights : send;
        recv = weights * (size_t)tg_dist_instances() > recv ? weights * (size_t)tg_dist_instances()
                                                            : recv;
        s->coll->send[d] = tg_malloc(send + 1);
        s->coll->recv[d] = tg_malloc(recv + 1);
        if (!s->coll->send[d] || !s->coll->recv[d])
            return tg_error(TG_ERR_NOMEM,
                            "session: out of memory for the all-reduce buffers of device %d "
                            "(%zu bytes per replica)",
                            d, one);
    }
    return tg_buckets_plan(s);
}

void tg_session_dist_free(tg_session *s)
{
    if (!s->coll) /* a session that ran out of memory at once */
        return;
    int n = s->program ? s->program->n_devices : 0;
    for (int d = 0; d < n; d++) {
        if (s->coll->send)
            tg_free(s->coll->send[d]);
        if (s->coll->recv)
            tg_free(s->coll->recv[d]);
    }
    tg_free(s->coll->send);
    tg_free(s->coll->recv);
    tg_free(s->coll->exchange_times);
    s->coll->exchange_times = NULL;
    for (int i = 0; s->coll->state && i < s->graph->n_nodes; i++)
        tg_free(s->coll->state[i]);
    tg_free(s->coll->state);
    s->coll->state = NULL;
    tg_buckets_free(s);
    tg_dist_group_destroy(s->coll->group);
    s->coll->group = NULL;
}

int tg_session_global_replicas(const tg_session *s)
{
    return s->global_replicas;
}

int tg_session_replica_offset(const tg_session *s)
{
    return s->replica_offset;
}

tg_status tg_session_dist_profile_meta(tg_session *s)
{
    char host[256] = "", v[32];
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "?");
    TG_TRY(tg_profile_set_meta(tg_recording_profile(s->recording), "host", host));
    const struct {
        const char *key;
        int value;
    } rows[] = {{"instance", tg_dist_instance()},
                {"instances", tg_dist_instances()},
                {"replica_offset", s->replica_offset},
                {"global_replicas", s->global_replicas}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        snprintf(v, sizeof v, "%d", rows[i].value);
        TG_TRY(tg_profile_set_meta(tg_recording_profile(s->recording), rows[i].key, v));
    }
    if (tg_dist_instances() < 2)
        return TG_OK;
    /* beneath the all-reduce (analyse's instances view): what MPI runs */
    TG_TRY(tg_profile_set_meta(tg_recording_profile(s->recording), "mpi_allgather",
                               tg_dist_allgather_algorithm(false)));
    TG_TRY(tg_profile_set_meta(tg_recording_profile(s->recording), "mpi_allgatherv",
                               tg_dist_allgather_algorithm(true)));
    return tg_profile_set_meta(tg_recording_profile(s->recording), "gradient_wire",
                               s->program->config.distributed.wire_bf16 ? "bfloat16" : "float32");
}

/* ---- replicated tensor sharding across instances ------------------------------ */

static bool is_sharded(const tg_session *s, const tg_tensor *t)
{
    int b = s->program->home[t->id];
    return b >= 0 && s->program->buffers[b].sharded;
}

/* Gather one sharded value over the instances into its whole copy. */
static tg_status gather_one(tg_session *s, const tg_tensor *t, unsigned char *send,
                            unsigned char *recv, size_t cap)
{
    const tg_program *p = s->program;
    size_t es = tg_dtype_size(p->storage[t->id]);
    int64_t n = tg_numel(t), S = tg_program_shards(p), first, unused;
    tg_rts_block(s, n, tg_dist_instance(), &first, &unused);
    for (int r = 0; r < p->replicas; r++) { /* this instance's block, shard after shard */
        int64_t begin, end;
        tg_shard_range(n, s->replica_offset + r, (int)S, &begin, &end);
        memcpy(send + (size_t)(begin - first) * es, tg_engine_slot_ptr(s, r, p->home[t->id], 0),
               (size_t)(end - begin) * es);
    }
    TG_TRY(tg_dist_allgather(send, recv, cap));
    unsigned char *whole = s->coll->state[t->id];
    if (!whole && !(whole = s->coll->state[t->id] = tg_malloc((size_t)n * es + 1)))
        return tg_error(TG_ERR_NOMEM, "MPI: out of memory gathering '%s'", t->name);
    for (int i = 0; i < tg_dist_instances(); i++) {
        int64_t begin, end;
        tg_rts_block(s, n, i, &begin, &end);
        memcpy(whole + (size_t)begin * es, recv + (size_t)i * cap, (size_t)(end - begin) * es);
    }
    return TG_OK;
}

tg_status tg_session_dist_gather_state(tg_session *s)
{
    const tg_graph *g = s->graph;
    const tg_tensor_location *loc = s->program->config.memory.location;
    if (!s->coll->group || !(loc[TG_TENSOR_OPTIMIZER].sharded || loc[TG_TENSOR_WEIGHT].sharded))
        return TG_OK;
    if (!s->coll->state &&
        !(s->coll->state = tg_calloc((size_t)g->n_nodes, sizeof *s->coll->state)))
        return tg_error(TG_ERR_NOMEM, "MPI: out of memory gathering the sharded state");
    tg_status st = TG_OK;
    for (int i = 0; st == TG_OK && i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!is_sharded(s, t))
            continue;
        size_t cap = tg_rts_block_cap(s, tg_numel(t), tg_dtype_size(s->program->storage[i]));
        unsigned char *send = tg_malloc(cap + 1);
        unsigned char *recv = tg_malloc(cap * (size_t)tg_dist_instances() + 1);
        st = send && recv ? gather_one(s, t, send, recv, cap)
                          : tg_error(TG_ERR_NOMEM, "MPI: out of memory gathering '%s'", t->name);
        tg_free(send);
        tg_free(recv);
    }
    s->coll->state_step = st == TG_OK ? s->step : -1;
    return st;
}

/* A checksum of every parameter as stored (replica 0's copy: the all-reduce
 * gives every replica the same; a sharded weight whole, runtime/rts.c). Not
 * the state: batch norm's running statistics are each replica's own, from
 * its own samples, in one process as across instances (checkpoints keep
 * replica 0's). */
static tg_status weights_hash(const tg_session *s, uint64_t *out)
{
    const tg_graph *g = tg_session_graph(s);
    uint64_t h = TG_DIST_HASH_INIT;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->op != TG_OP_PARAM || !tg_session_data(s, t))
            continue;
        size_t bytes = (size_t)tg_numel(t) * tg_dtype_size(tg_session_storage_dtype(s, t));
        void *whole = tg_malloc(bytes + 1);
        if (!whole)
            return tg_error(TG_ERR_NOMEM, "MPI: out of memory checking '%s'", t->name);
        tg_status st = tg_session_value_out(s, t, whole);
        if (st == TG_OK)
            h = tg_dist_hash(h, whole, bytes);
        tg_free(whole);
        TG_TRY(st);
    }
    *out = h;
    return TG_OK;
}

tg_status tg_dist_sync(tg_session *s)
{
    if (!tg_dist_active())
        return TG_OK;
    TG_TRY(tg_dist_check_weights(s));
    return tg_session_dist_gather_state(s);
}

tg_status tg_dist_check_weights(const tg_session *s)
{
    if (!tg_dist_active())
        return TG_OK;
    static const char *const what[] = {"weights after the last update"};
    uint64_t h = 0;
    TG_TRY(weights_hash(s, &h));
    return tg_dist_agree(what, &h, 1,
                         "the instances' training diverged; instances on hosts with different "
                         "core counts compute with different threads per device: give the same "
                         "--threads-per-device (threadsPerDevice) to all, otherwise report it "
                         "as a tilegraph defect with the command line");
}
