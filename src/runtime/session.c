/* runtime/session.c - one compiled program on one CPU device.
 *
 * The session owns the program, the device arena and the device's thread
 * pool. A run walks the program's steps in order and calls each op's fast
 * kernel with pointers into the arena; that is the whole engine on one
 * device, and the multi-device engine runs the same steps per device.
 */
#include "runtime/session_internal.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/pool.h"
#include "graph/init.h"
#include "ops/op.h"

#include <math.h>
#include <string.h>

struct tg_session {
    tg_graph *graph;
    tg_program *program;
    unsigned char *arena;
    tg_pool *pool;
    uint64_t seed;
    int64_t step;
    bool has_updates;
    bool check_nan;
};

static void fill_leaves(tg_session *s)
{
    const tg_graph *g = s->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        const tg_buffer *b = tg_program_buffer(s->program, i);
        if (t->n_in > 0 || b->region == TG_REGION_NONE || t->role == TG_ROLE_INPUT)
            continue;
        if (t->dtype == TG_F32)
            tg_init_fill_f32(t, s->seed, (float *)(s->arena + b->offset));
    }
}

tg_status tg_session_create(tg_graph *g, const tg_options *opts, tg_session **out)
{
    *out = NULL;
    if (!g)
        return tg_error(TG_ERR_INVALID_ARG, "session: no graph");
    int threads = (int)tg_options_get_int(opts, "threadsPerDevice");
    if (threads <= 0)
        threads = tg_cpu_count();
    tg_session *s = tg_calloc(1, sizeof *s);
    if (!s)
        return tg_error(TG_ERR_NOMEM, "session: out of memory");
    s->graph = g;
    s->seed = (uint64_t)tg_options_get_int(opts, "randomSeed");
    s->check_nan = tg_options_get_int(opts, "debug.checkNaN") != 0;
    tg_status st = tg_program_compile(g, threads, &s->program);
    if (st != TG_OK)
        goto fail;
    s->arena = tg_malloc_aligned(s->program->arena_bytes ? s->program->arena_bytes : 64);
    if (!s->arena) {
        st = tg_error(TG_ERR_NOMEM, "session: cannot allocate the device arena of %zu bytes",
                      s->program->arena_bytes);
        goto fail;
    }
    memset(s->arena, 0, s->program->arena_bytes);
    s->pool = tg_pool_create(threads);
    if (!s->pool) {
        st = TG_ERR_NOMEM;
        goto fail;
    }
    for (int k = 0; k < s->program->n_steps; k++)
        if (g->nodes[s->program->steps[k].node]->flags & TG_NODE_OPTIMIZER)
            s->has_updates = true;
    fill_leaves(s);
    *out = s;
    return TG_OK;
fail:
    tg_session_destroy(s);
    return st;
}

void tg_session_destroy(tg_session *s)
{
    if (!s)
        return;
    tg_pool_destroy(s->pool);
    tg_free(s->arena);
    tg_program_destroy(s->program);
    tg_free(s);
}

void *tg_session_data(const tg_session *s, const tg_tensor *t)
{
    if (!s || !t || t->id >= s->graph->n_nodes || s->graph->nodes[t->id] != t)
        return NULL;
    const tg_buffer *b = tg_program_buffer(s->program, t->id);
    return b->region == TG_REGION_NONE ? NULL : s->arena + b->offset;
}

const tg_program *tg_session_program(const tg_session *s) { return s->program; }
const tg_graph *tg_session_graph(const tg_session *s) { return s->graph; }

static tg_status check_access(const tg_session *s, const tg_tensor *t, size_t bytes, bool write)
{
    if (!t || !tg_session_data(s, t))
        return tg_error(TG_ERR_INVALID_ARG, "session: tensor '%s' is not stored by this program",
                        t ? t->name : "(null)");
    const tg_buffer *b = tg_program_buffer(s->program, t->id);
    if (b->region == TG_REGION_ACTIVATION && (write || b->last < s->program->n_steps))
        return tg_error(TG_ERR_INVALID_ARG,
                        "session: '%s' is an intermediate value; mark it as an output to read it",
                        t->name);
    if (bytes != tg_nbytes(t))
        return tg_error(TG_ERR_INVALID_ARG, "session: '%s' holds %zu bytes, not %zu", t->name,
                        tg_nbytes(t), bytes);
    return TG_OK;
}

tg_status tg_session_write(tg_session *s, const tg_tensor *t, const void *data, size_t bytes)
{
    TG_TRY(check_access(s, t, bytes, true));
    memcpy(tg_session_data(s, t), data, bytes);
    return TG_OK;
}

tg_status tg_session_read(tg_session *s, const tg_tensor *t, void *data, size_t bytes)
{
    TG_TRY(check_access(s, t, bytes, false));
    memcpy(data, tg_session_data(s, t), bytes);
    return TG_OK;
}

static tg_status check_outputs(const tg_session *s)
{
    const tg_graph *g = s->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!(t->flags & TG_NODE_OUTPUT) || tg_numel(t) != 1 || t->dtype != TG_F32)
            continue;
        float v = *(const float *)tg_session_data(s, t);
        if (!isfinite(v))
            return tg_error(TG_ERR_NUMERIC, "step %lld: '%s' is %s", (long long)s->step, t->name,
                            isnan(v) ? "NaN" : "infinite");
    }
    return TG_OK;
}

tg_status tg_session_run(tg_session *s)
{
    const tg_program *p = s->program;
    const tg_graph *g = s->graph;
    for (int k = 0; k < p->n_steps; k++) {
        const tg_step *st = &p->steps[k];
        const tg_tensor *t = g->nodes[st->node];
        tg_kernel_args a = {
            .node = t,
            .out = s->arena + tg_program_buffer(p, t->id)->offset,
            .scratch = st->scratch_bytes ? s->arena + st->scratch_offset : NULL,
            .scratch_bytes = st->scratch_bytes,
            .pool = s->pool,
            .step = s->step,
            .seed = s->seed,
        };
        for (int i = 0; i < t->n_in; i++)
            a.in[i] = s->arena + tg_program_buffer(p, t->in[i]->id)->offset;
        tg_op_get(t->op)->forward(&a);
    }
    tg_status status = s->check_nan ? check_outputs(s) : TG_OK;
    if (s->has_updates)
        s->step++;
    return status;
}

int64_t tg_session_step(const tg_session *s) { return s->step; }
void tg_session_set_step(tg_session *s, int64_t step) { s->step = step; }
size_t tg_session_arena_bytes(const tg_session *s) { return s->program->arena_bytes; }
int tg_session_threads(const tg_session *s) { return tg_pool_threads(s->pool); }
double tg_session_flops(const tg_session *s) { return s->program->flops; }

tg_status tg_session_copy_weights(tg_session *dst, const tg_session *src)
{
    const tg_graph *g = dst->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->op != TG_OP_PARAM && t->op != TG_OP_STATE)
            continue;
        void *to = tg_session_data(dst, t);
        const tg_tensor *from = tg_graph_find(src->graph, t->name);
        if (!to)
            continue;
        if (!from || !tg_session_data(src, from)) {
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
        memcpy(to, tg_session_data(src, from), tg_nbytes(t));
    }
    return TG_OK;
}
