/* runtime/verify.c - a verified run's values kept while it runs
 * (tilegraph/verify.h, runtime/verify.h); runtime/verify_check.c checks
 * them when it is over.
 *
 * What the program computed for every micro-batch of the first iteration
 * of replica 0 is kept per node as f32 in NCHW, and each micro-batch is
 * checked on its own inputs (an error in micro-batch 3 alone is caught): a
 * blocked (nChw16c) value is put back in NCHW order, a view (an alias:
 * reshape, flatten) is read from its buffer's bytes as they are, in the
 * order the view assumes. A view of a buffer the program kept blocked
 * therefore shows the wrong numbers here exactly as it did to the ops that
 * read it, and is caught at the view. The leaves (weights, state, inputs)
 * are kept as the run begins, in their own types.
 */
#include "runtime/verify_internal.h"

#include "compile/layout.h"
#include "core/alloc.h"
#include "core/bf16.h"
#include "core/convert.h"
#include "core/error.h"
#include "ops/op.h"
#include "runtime/session_state.h"
#include "runtime/scaling.h"
#include "runtime/streams.h"

#include <string.h>

#define DEFAULT_FACTOR 32.0

/* ---- capture ------------------------------------------------------------------ */

int tg_verify_test_fault_node = -1;
int64_t tg_verify_test_fault_from;

void tg_verify_test_fault(const tg_program *p, const tg_step *st, void *out, int64_t g)
{
    if (!out || st->out < 0 || g < tg_verify_test_fault_from)
        return;
    /* bf16 too (a bf16 program's fused products are checked alike), with a
     * fault as far beyond bf16's tolerance (a few units in the 8th bit of
     * the largest value) as 1 is beyond f32's */
    if (p->buffers[st->out].dtype == TG_F32)
        ((float *)out)[0] += 1.0f;
    else if (p->buffers[st->out].dtype == TG_BF16)
        ((uint16_t *)out)[0] = tg_bf16_narrow(tg_bf16_widen(((uint16_t *)out)[0]) + 256.0f);
}

static void free_values(tg_verify *v)
{
    for (int m = 0; m < v->n_mb; m++) {
        for (int i = 0; i < v->n; i++) {
            if (v->fast_mb && v->fast_mb[m])
                tg_free(v->fast_mb[m][i]);
            if (v->inputs_mb && v->inputs_mb[m])
                tg_free(v->inputs_mb[m][i]);
        }
        if (v->fast_mb)
            tg_free(v->fast_mb[m]);
        if (v->captured_mb)
            tg_free(v->captured_mb[m]);
        if (v->inputs_mb)
            tg_free(v->inputs_mb[m]);
    }
    for (int i = 0; v->before && i < v->n; i++)
        tg_free(v->before[i]);
    tg_free(v->fast_mb);
    tg_free(v->captured_mb);
    tg_free(v->inputs_mb);
    tg_free(v->before);
    tg_free(v->raw_dt);
    tg_free(v->seeded);
    tg_free(v->alias_first);
    tg_free(v->alias_next);
    v->fast = NULL, v->before = NULL, v->captured = NULL;
    v->raw_dt = NULL, v->seeded = NULL;
    v->fast_mb = NULL, v->captured_mb = NULL, v->inputs_mb = NULL;
    v->alias_first = v->alias_next = NULL;
    v->n_mb = v->cur_mb = 0;
}

static void free_report(tg_verify_report *r)
{
    if (r)
        tg_free(r->rows);
    tg_free(r);
}

void tg_verify_destroy(tg_verify *v)
{
    if (!v)
        return;
    free_values(v);
    free_report(v->report);
    tg_free(v);
}

static tg_status make_verify(tg_session *s)
{
    if (!s->verify) {
        s->verify = tg_calloc(1, sizeof *s->verify);
        if (!s->verify)
            return tg_error(TG_ERR_NOMEM, "verify: out of memory");
        s->verify->factor = DEFAULT_FACTOR;
    }
    return TG_OK;
}

tg_status tg_verify_arm(tg_session *s, bool fail)
{
    TG_TRY(make_verify(s));
    s->verify->armed = true;
    s->verify->fail = fail;
    return TG_OK;
}

bool tg_verify_capturing(const tg_verify *v)
{
    return v && v->capturing;
}

/* nChw16c -> NCHW (a padded last block's padding skipped) */
static void unblock(const float *src, float *dst, const tg_shape *s)
{
    int64_t N = s->dim[0], C = s->dim[1], HW = s->dim[2] * s->dim[3], CB = tg_channel_blocks(C);
    for (int64_t n = 0; n < N; n++)
        for (int64_t cb = 0; cb < CB; cb++)
            for (int64_t hw = 0; hw < HW; hw++)
                for (int64_t c = 0; c < TG_CHANNEL_BLOCK && cb * TG_CHANNEL_BLOCK + c < C; c++)
                    dst[(n * C + cb * TG_CHANNEL_BLOCK + c) * HW + hw] =
                        src[((n * CB + cb) * HW + hw) * TG_CHANNEL_BLOCK + c];
}

void tg_verify_capture(tg_verify *v, const tg_program *p, const tg_step *st, const void *out,
                       int64_t g)
{
    /* a fused convolution's output is the last node it computes (compile/fuse.c) */
    int id = st->fused && p->fused_tail ? p->fused_tail[st->node] : st->node;
    const tg_tensor *t = p->graph->nodes[id];
    if (g < 0 || g >= v->n_mb)
        return;
    float **fast = v->fast_mb[g];
    unsigned char *captured = v->captured_mb[g];
    if (!out || st->out < 0 || !fast[t->id] || captured[t->id])
        return;
    tg_dtype dt = p->buffers[st->out].dtype;
    int64_t n = tg_numel(t);
    float *tmp = NULL;
    int64_t stored = tg_shape_numel(tg_layout_stored_shape(p, t));
    if (tg_layout_reads_blocked(p, t) && t->shape.ndim == 4 &&
        (tmp = tg_malloc((size_t)stored * 4))) {
        tg_verify_to_float(out, dt, tmp, stored);
        unblock(tmp, fast[t->id], &t->shape);
        tg_free(tmp);
    } else {
        tg_verify_to_float(out, dt, fast[t->id], n);
    }
    captured[t->id] = 1;
    /* the views of this buffer see its bytes in plain order */
    for (int a = v->alias_first[t->id]; a >= 0; a = v->alias_next[a]) {
        if (fast[a] && tg_numel(p->graph->nodes[a]) == n) {
            tg_verify_to_float(out, dt, fast[a], n);
            captured[a] = 1;
        }
    }
}

/* Input i as replica 0 streams it in micro-batch m of the first iteration
 * (runtime/streams.c's order: training [iteration][replica][micro-batch],
 * inference [iteration][replica]). */
static tg_status keep_inputs(tg_session *s, tg_verify *v, const tg_tensor *t)
{
    const tg_program *p = s->program;
    int64_t n = tg_numel(t);
    tg_dtype dt = tg_session_storage_dtype(s, t);
    size_t bytes = (size_t)n * tg_dtype_size(dt);
    v->raw_dt[t->id] = dt;
    for (int m = 0; m < v->n_mb; m++) {
        unsigned char *d = tg_calloc(bytes ? bytes : 1, 1);
        if (!(v->inputs_mb[m][t->id] = d))
            return tg_error(TG_ERR_NOMEM, "verify: out of memory for '%s'", t->name);
        int64_t h = p->training ? m : (int64_t)m * p->replicas;
        const unsigned char *in = tg_host_streams_in(s->streams, t->id);
        if (in)
            memcpy(d, in + (size_t)h * bytes, bytes);
    }
    return TG_OK;
}

/* The leaves as the run begins: weights, state and constants as stored,
 * inputs as each micro-batch of replica 0 streams them. */
static tg_status keep_leaves(tg_session *s, tg_verify *v)
{
    const tg_graph *g = s->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        int64_t n = tg_numel(t);
        if (t->n_in > 0 || s->program->home[i] < 0)
            continue;
        if (t->op == TG_OP_INPUT) {
            TG_TRY(keep_inputs(s, v, t));
            continue;
        }
        if ((t->flags & TG_NODE_LOSS_SEED) && tg_scaling_seed_buffer(s->scaling) >= 0) {
            /* the engine writes the run's loss scale here as the run begins:
             * the reference's backward pass is scaled as the program's is */
            v->seeded[i] = 1;
            continue;
        }
        void *raw = tg_malloc((size_t)(n ? n : 1) * tg_dtype_size(t->dtype));
        if (!raw)
            return tg_error(TG_ERR_NOMEM, "verify: out of memory for '%s'", t->name);
        v->raw_dt[i] = t->dtype;
        if (tg_session_read(s, t, raw, tg_nbytes(t)) == TG_OK)
            v->before[i] = raw;
        else
            tg_free(raw);
    }
    return TG_OK;
}

static tg_status make_buffers(tg_session *s, tg_verify *v)
{
    const tg_graph *g = s->graph;
    int n = v->n = g->n_nodes, mbs = s->program->micro_batches > 0 ? s->program->micro_batches : 1;
    v->fast_mb = tg_calloc((size_t)mbs, sizeof(float **));
    v->captured_mb = tg_calloc((size_t)mbs, sizeof(unsigned char *));
    v->inputs_mb = tg_calloc((size_t)mbs, sizeof(void **));
    if (!v->fast_mb || !v->captured_mb || !v->inputs_mb)
        return tg_error(TG_ERR_NOMEM, "verify: out of memory");
    v->n_mb = mbs;
    for (int m = 0; m < mbs; m++) {
        v->fast_mb[m] = tg_calloc((size_t)n + 1, sizeof(float *));
        v->captured_mb[m] = tg_calloc((size_t)n + 1, 1);
        v->inputs_mb[m] = tg_calloc((size_t)n + 1, sizeof(void *));
        if (!v->fast_mb[m] || !v->captured_mb[m] || !v->inputs_mb[m])
            return tg_error(TG_ERR_NOMEM, "verify: out of memory");
    }
    v->fast = v->fast_mb[0], v->captured = v->captured_mb[0];
    v->before = tg_calloc((size_t)n + 1, sizeof(void *));
    v->raw_dt = tg_calloc((size_t)n + 1, sizeof(tg_dtype));
    v->seeded = tg_calloc((size_t)n + 1, 1);
    v->alias_first = tg_malloc(((size_t)n + 1) * sizeof(int));
    v->alias_next = tg_malloc(((size_t)n + 1) * sizeof(int));
    if (!v->before || !v->raw_dt || !v->seeded || !v->alias_first || !v->alias_next)
        return tg_error(TG_ERR_NOMEM, "verify: out of memory");
    for (int i = 0; i < n; i++)
        v->alias_first[i] = v->alias_next[i] = -1;
    for (int i = n - 1; i >= 0; i--) {
        const tg_tensor *t = g->nodes[i];
        if (t->n_in == 0 || t->n_mutated > 0 || s->program->home[i] < 0)
            continue;
        size_t bytes = (size_t)(tg_numel(t) ? tg_numel(t) : 1) * sizeof(float);
        for (int m = 0; m < mbs; m++)
            if (!(v->fast_mb[m][i] = tg_malloc(bytes)))
                return tg_error(
                    TG_ERR_NOMEM,
                    "verify: out of memory keeping '%s' (%lld values x %d micro-batches)", t->name,
                    (long long)tg_numel(t), mbs);
        if (t->flags & TG_NODE_ALIAS) {
            int root = tg_verify_storage_root(t)->id;
            v->alias_next[i] = v->alias_first[root];
            v->alias_first[root] = i;
        }
    }
    return TG_OK;
}

tg_status tg_verify_begin(tg_session *s)
{
    tg_verify *v = s->verify;
    if (v && !v->armed && v->capturing) { /* the verified run failed */
        v->capturing = false;
        free_values(v);
    }
    if (!v || !v->armed)
        return TG_OK;
    v->armed = false;
    free_values(v);
    v->step = s->program->training ? s->step : s->runs * s->program->iterations; /* engine.c's */
    v->loss_scale = tg_scaling_loss_scale(s->scaling);
    tg_status st = make_buffers(s, v);
    if (st == TG_OK)
        st = keep_leaves(s, v);
    if (st != TG_OK) {
        free_values(v);
        return st;
    }
    v->capturing = true;
    return TG_OK;
}

tg_status tg_verify_end(tg_session *s)
{
    tg_verify *v = s->verify;
    if (!v || !v->capturing)
        return TG_OK;
    v->capturing = false;
    free_report(v->report);
    v->report = tg_calloc(1, sizeof *v->report);
    tg_status st = v->report ? tg_verify_build_report(s, v, v->report)
                             : tg_error(TG_ERR_NOMEM, "verify: out of memory");
    free_values(v);
    if (st != TG_OK || !v->fail || v->report->first_beyond < 0)
        return st;
    const tg_verify_row *row = &v->report->rows[v->report->first_beyond];
    return tg_error(TG_ERR_NUMERIC,
                    "verify: '%s' (%s%s%s) differs from the reference by %.3g (%.3g relative; "
                    "tolerance %.3g), and %d tensor%s in all; `tilegraph check` with the same "
                    "options prints the table (docs/numerics.md)",
                    row->name, row->op, row->block[0] ? ", block " : "", row->block, row->max_abs,
                    row->max_rel, row->tolerance, v->report->counts[TG_VERIFY_BEYOND],
                    v->report->counts[TG_VERIFY_BEYOND] == 1 ? "" : "s");
}

/* ---- the public API ----------------------------------------------------------- */

void tg_session_verify_set_factor(tg_session *s, double factor)
{
    if (make_verify(s) == TG_OK)
        s->verify->factor = factor > 0 ? factor : DEFAULT_FACTOR;
}

tg_status tg_session_verify_next_run(tg_session *s)
{
    return tg_verify_arm(s, false);
}

const tg_verify_report *tg_session_verify_report(const tg_session *s)
{
    return s->verify ? s->verify->report : NULL;
}

int tg_verify_rows(const tg_verify_report *r)
{
    return r ? r->n_rows : 0;
}

const tg_verify_row *tg_verify_row_at(const tg_verify_report *r, int index)
{
    return r && index >= 0 && index < r->n_rows ? &r->rows[index] : NULL;
}

int tg_verify_first_beyond(const tg_verify_report *r)
{
    return r ? r->first_beyond : -1;
}

int tg_verify_count(const tg_verify_report *r, tg_verify_verdict verdict)
{
    return r && verdict >= 0 && verdict < 3 ? r->counts[verdict] : 0;
}

tg_verify_summary tg_verify_summary_of(const tg_verify_report *r)
{
    return r ? r->summary : (tg_verify_summary){-1, -1, -1, -1};
}

const char *tg_verify_limits(const tg_verify_report *r)
{
    return r ? r->limits : "";
}
