/* runtime/verify.c - one run checked against the reference
 * (tilegraph/verify.h, runtime/verify.h).
 *
 * What the program computed for every micro-batch of the first iteration
 * of replica 0 is kept per node as f32 in NCHW, and each micro-batch is
 * checked on its own inputs (an error in micro-batch 3 alone is caught): a blocked (nChw16c) value
 * is put back in NCHW order, a view (an alias: reshape, flatten) is read from its buffer's bytes as
 * they are, in the order the view assumes. A view of a buffer the program kept blocked therefore
 * shows the wrong numbers here exactly as it did to the ops that read it, and is caught at the
 * view.
 */
#include "runtime/verify.h"

#include "compile/layout.h"
#include "core/meminfo.h"
#include "core/alloc.h"
#include "core/convert.h"
#include "core/error.h"
#include "graph/optim_params.h"
#include "ops/norm.h"
#include "ops/op.h"
#include "runtime/interp.h"
#include "runtime/scaling.h"
#include "runtime/streams.h"
#include "runtime/session_state.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define DEFAULT_FACTOR 32.0

struct tg_verify_report {
    tg_verify_row *rows;
    int n_rows;
    int first_beyond;
    int counts[3];
    tg_verify_summary summary;
    char limits[512];
};

struct tg_verify {
    double factor;
    bool armed;     /* the next run is verified */
    bool fail;      /* and fails when a tensor is beyond tolerance */
    bool capturing; /* the current run is */
    int n;          /* nodes */
    int n_mb;       /* micro-batches kept: those of replica 0's first iteration */
    int cur_mb;     /* the one fast, captured and before's inputs show */
    float **fast;   /* per node: the program's value of micro-batch cur_mb (f32, NCHW) */
    unsigned char *captured;
    float ***fast_mb; /* per micro-batch: its fast */
    unsigned char **captured_mb;
    double ***inputs_mb;           /* per micro-batch, per input node: what it streamed */
    int *alias_first, *alias_next; /* per root buffer's node: its views, chained */
    double **before;               /* per leaf: its value as the run began (inputs: cur_mb's) */
    float **after;                 /* per mutated leaf: its value after the run, as read */
    int64_t step;
    float loss_scale;
    tg_verify_report *report;
};

/* ---- capture ------------------------------------------------------------------ */

int tg_verify_test_fault_node = -1;
int64_t tg_verify_test_fault_from;

void tg_verify_test_fault(const tg_program *p, const tg_step *st, void *out, int64_t g)
{
    if (out && st->out >= 0 && g >= tg_verify_test_fault_from &&
        p->buffers[st->out].dtype == TG_F32)
        ((float *)out)[0] += 1.0f;
}

static void free_values(tg_verify *v)
{
    for (int m = 0; m < v->n_mb; m++) {
        for (int i = 0; i < v->n; i++) {
            if (v->fast_mb && v->fast_mb[m])
                tg_free(v->fast_mb[m][i]);
            if (v->inputs_mb && v->inputs_mb[m]) {
                if (v->before && v->before[i] == v->inputs_mb[m][i])
                    v->before[i] = NULL; /* borrowed */
                tg_free(v->inputs_mb[m][i]);
            }
        }
        if (v->fast_mb)
            tg_free(v->fast_mb[m]);
        if (v->captured_mb)
            tg_free(v->captured_mb[m]);
        if (v->inputs_mb)
            tg_free(v->inputs_mb[m]);
    }
    for (int i = 0; i < v->n; i++) {
        if (v->before)
            tg_free(v->before[i]);
        if (v->after)
            tg_free(v->after[i]);
    }
    tg_free(v->fast_mb);
    tg_free(v->captured_mb);
    tg_free(v->inputs_mb);
    tg_free(v->before);
    tg_free(v->after);
    tg_free(v->alias_first);
    tg_free(v->alias_next);
    v->fast = v->after = NULL, v->before = NULL, v->captured = NULL;
    v->fast_mb = NULL, v->captured_mb = NULL, v->inputs_mb = NULL;
    v->alias_first = v->alias_next = NULL;
    v->n_mb = v->cur_mb = 0;
}

/* Micro-batch m's values in view: its captures and the inputs it streamed. */
static void select_mb(tg_verify *v, int m)
{
    v->cur_mb = m;
    v->fast = v->fast_mb[m];
    v->captured = v->captured_mb[m];
    for (int i = 0; i < v->n; i++)
        if (v->inputs_mb[0][i])
            v->before[i] = v->inputs_mb[m][i];
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

static const tg_tensor *storage_root(const tg_tensor *t)
{
    while (t->flags & TG_NODE_ALIAS)
        t = t->in[0];
    return t;
}

static void to_float(const void *src, tg_dtype dt, float *dst, int64_t n)
{
    if (dt == TG_F32 || dt == TG_F16 || dt == TG_BF16) {
        tg_convert(src, dt, dst, TG_F32, (size_t)n);
        return;
    }
    for (int64_t k = 0; k < n; k++)
        dst[k] = dt == TG_I32 ? (float)((const int32_t *)src)[k] : ((const uint8_t *)src)[k];
}

/* n values of type dt into doubles: i32 directly, the rest through f32 a
 * chunk at a time (f32 holds every half-precision and u8 value exactly). */
static void to_double(const void *src, tg_dtype dt, double *dst, int64_t n)
{
    float chunk[1024];
    for (int64_t k = 0; dt == TG_I32 && k < n; k++)
        dst[k] = ((const int32_t *)src)[k];
    for (int64_t k = 0; dt != TG_I32 && k < n; k += 1024) {
        int64_t m = n - k < 1024 ? n - k : 1024;
        to_float((const unsigned char *)src + (size_t)k * tg_dtype_size(dt), dt, chunk, m);
        for (int64_t i = 0; i < m; i++)
            dst[k + i] = chunk[i];
    }
}

/* nChw16c -> NCHW */
static void unblock(const float *src, float *dst, const tg_shape *s)
{
    int64_t N = s->dim[0], C = s->dim[1], HW = s->dim[2] * s->dim[3], CB = C / TG_CHANNEL_BLOCK;
    for (int64_t n = 0; n < N; n++)
        for (int64_t cb = 0; cb < CB; cb++)
            for (int64_t hw = 0; hw < HW; hw++)
                for (int64_t c = 0; c < TG_CHANNEL_BLOCK; c++)
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
    if (tg_layout_reads_blocked(p, t) && t->shape.ndim == 4 && (tmp = tg_malloc((size_t)n * 4))) {
        to_float(out, dt, tmp, n);
        unblock(tmp, fast[t->id], &t->shape);
        tg_free(tmp);
    } else {
        to_float(out, dt, fast[t->id], n);
    }
    captured[t->id] = 1;
    /* the views of this buffer see its bytes in plain order */
    for (int a = v->alias_first[t->id]; a >= 0; a = v->alias_next[a]) {
        if (fast[a] && tg_numel(p->graph->nodes[a]) == n) {
            to_float(out, dt, fast[a], n);
            captured[a] = 1;
        }
    }
}

static bool is_value_leaf(const tg_tensor *t)
{
    return t->n_in == 0 && t->op != TG_OP_INPUT;
}

/* Input i as replica 0 streams it in micro-batch m of the first iteration
 * (runtime/streams.c's order: training [iteration][replica][micro-batch],
 * inference [iteration][replica]). */
static tg_status keep_inputs(tg_session *s, tg_verify *v, const tg_tensor *t)
{
    const tg_program *p = s->program;
    int64_t n = tg_numel(t);
    tg_dtype dt = tg_session_storage_dtype(s, t);
    for (int m = 0; m < v->n_mb; m++) {
        double *d = tg_malloc((size_t)(n ? n : 1) * sizeof(double));
        if (!(v->inputs_mb[m][t->id] = d))
            return tg_error(TG_ERR_NOMEM, "verify: out of memory for '%s'", t->name);
        int64_t h = p->training ? m : (int64_t)m * p->replicas;
        if (tg_host_streams_in(s->streams, t->id))
            to_double(tg_host_streams_in(s->streams, t->id) + (size_t)(h * n) * tg_dtype_size(dt),
                      dt, d, n);
    }
    v->before[t->id] = v->inputs_mb[0][t->id];
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
        if (!(v->before[i] = tg_malloc((size_t)(n ? n : 1) * sizeof(double))))
            return tg_error(TG_ERR_NOMEM, "verify: out of memory for '%s'", t->name);
        if ((t->flags & TG_NODE_LOSS_SEED) && tg_scaling_seed_buffer(s->scaling) >= 0) {
            /* the engine writes the run's loss scale here as the run begins:
             * the reference's backward pass is scaled as the program's is */
            for (int64_t k = 0; k < n; k++)
                v->before[i][k] = v->loss_scale;
            continue;
        }
        void *tmp = tg_malloc((size_t)(n ? n : 1) * tg_dtype_size(t->dtype));
        tg_status st = tmp ? tg_session_read(s, t, tmp, tg_nbytes(t))
                           : tg_error(TG_ERR_NOMEM, "verify: out of memory for '%s'", t->name);
        if (st == TG_OK)
            to_double(tmp, t->dtype, v->before[i], n);
        tg_free(tmp);
        if (st != TG_OK) {
            tg_free(v->before[i]);
            v->before[i] = NULL;
        }
    }
    return TG_OK;
}

static tg_status make_buffers(tg_session *s, tg_verify *v)
{
    const tg_graph *g = s->graph;
    int n = v->n = g->n_nodes, mbs = s->program->micro_batches > 0 ? s->program->micro_batches : 1;
    v->fast_mb = tg_calloc((size_t)mbs, sizeof(float **));
    v->captured_mb = tg_calloc((size_t)mbs, sizeof(unsigned char *));
    v->inputs_mb = tg_calloc((size_t)mbs, sizeof(double **));
    if (!v->fast_mb || !v->captured_mb || !v->inputs_mb)
        return tg_error(TG_ERR_NOMEM, "verify: out of memory");
    v->n_mb = mbs;
    for (int m = 0; m < mbs; m++) {
        v->fast_mb[m] = tg_calloc((size_t)n + 1, sizeof(float *));
        v->captured_mb[m] = tg_calloc((size_t)n + 1, 1);
        v->inputs_mb[m] = tg_calloc((size_t)n + 1, sizeof(double *));
        if (!v->fast_mb[m] || !v->captured_mb[m] || !v->inputs_mb[m])
            return tg_error(TG_ERR_NOMEM, "verify: out of memory");
    }
    v->fast = v->fast_mb[0], v->captured = v->captured_mb[0];
    v->before = tg_calloc((size_t)n + 1, sizeof(double *));
    v->after = tg_calloc((size_t)n + 1, sizeof(float *));
    v->alias_first = tg_malloc(((size_t)n + 1) * sizeof(int));
    v->alias_next = tg_malloc(((size_t)n + 1) * sizeof(int));
    if (!v->before || !v->after || !v->alias_first || !v->alias_next)
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
            int root = storage_root(t)->id;
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

/* ---- checks ------------------------------------------------------------------- */

static double unit_roundoff(tg_dtype t)
{
    switch (t) {
    case TG_F32:
        return 0x1p-24;
    case TG_F16:
        return 0x1p-11;
    case TG_BF16:
        return 0x1p-8;
    default:
        return 0; /* integers are exact */
    }
}

/* One row's figures: the program's values against the reference's. */
typedef struct compare_out {
    double max_abs, magnitude;
    bool nonfinite; /* the program has a NaN or infinity the reference has not */
    bool ref_nonfinite;
} compare_out;

/* Where rounding to nearest in the storage type gives an infinity: its
 * largest finite value plus half its last step (f16 65504 + 16). */
static double overflow_at(tg_dtype t)
{
    switch (t) {
    case TG_F16:
        return 65520.0;
    case TG_BF16:
        return 0x1.ffp127;
    default:
        return 0x1.ffffffp127;
    }
}

/* `stored` is the type the program stores the value in: an infinity where
 * the reference is beyond that type's range is its rounding, not an error
 * (a half-precision gradient overflowing under loss scaling, which the
 * program detects and skips the update for). */
static compare_out compare(const float *fast, const double *ref, int64_t n, tg_dtype stored)
{
    compare_out c = {0};
    double inf_from = overflow_at(stored);
    for (int64_t k = 0; k < n; k++) {
        double r = ref[k], f = fast[k];
        if (!isfinite(r)) {
            c.ref_nonfinite = true;
            continue;
        }
        if (isinf(f) && fabs(r) >= inf_from && (f > 0) == (r > 0))
            continue;
        if (!isfinite(f)) {
            c.nonfinite = true;
            continue;
        }
        double d = fabs(f - r);
        if (d > c.max_abs)
            c.max_abs = d;
        if (fabs(r) > c.magnitude)
            c.magnitude = fabs(r);
    }
    return c;
}

static double relative(double abs, double magnitude)
{
    return magnitude > 0 ? abs / magnitude : (abs > 0 ? INFINITY : 0);
}

typedef struct check_ctx {
    tg_session *s;
    tg_verify *v;
    tg_interp *ip;     /* the reference run of the whole graph, or NULL */
    bool single;       /* one micro-batch of one replica per run: updates are comparable */
    bool skipped;      /* the run's update was skipped: a gradient overflowed (loss scaling) */
    double *ref;       /* scratch for one node's reference */
    double *moved_out; /* and for it on inputs moved by a rounding */
    double *in_tmp[TG_MAX_INPUTS], *moved[TG_MAX_INPUTS];
} check_ctx;

/* The random ops' stream of the micro-batch in view (engine_passes.c's):
 * replica 0 of this instance, micro-batch cur_mb. */
static uint64_t stream_of(const check_ctx *cx)
{
    return (uint64_t)cx->s->replica_offset * 0x100000000ull + (uint64_t)cx->v->cur_mb;
}

/* The type the program stores t's value in. */
static tg_dtype stored_type(const check_ctx *cx, const tg_tensor *t)
{
    return cx->s->program->storage[storage_root(t)->id];
}

static const double *input_value(check_ctx *cx, const tg_tensor *x, int k)
{
    tg_verify *v = cx->v;
    if (x->n_in == 0)
        return v->before[x->id];
    if (!v->captured[x->id])
        return NULL;
    int64_t n = tg_numel(x);
    double *d = tg_realloc(cx->in_tmp[k], (size_t)(n ? n : 1) * sizeof(double));
    if (!d)
        return NULL;
    cx->in_tmp[k] = d;
    for (int64_t i = 0; i < n; i++)
        d[i] = v->fast[x->id][i];
    return d;
}

/* The reduction length: the op's FLOPs per output element (at least 1). */
static double reduction_length(const tg_tensor *t)
{
    const tg_op_def *def = tg_op_get(t->op);
    double n = (double)(tg_numel(t) ? tg_numel(t) : 1);
    double k = def && def->flops ? def->flops(t) / n : 1;
    return k >= 1 ? k : 1;
}

/* `sensitivity` is how far the reference moves when every input element
 * moves by one f32 rounding (sensitivity_of): what any f32 kernel may be
 * off by where the op cancels (a batch norm's sums behind another batch
 * norm, x * scale - mean * scale over a channel of nearly equal values). */
static double tolerance_of(const check_ctx *cx, const tg_tensor *t, double magnitude,
                           double sensitivity)
{
    const tg_program *p = cx->s->program;
    double k = reduction_length(t);
    /* kernels accumulate in f32; a half-precision program's matrix kernels
     * round f32-stored operands to its type on the way in, and with bf16
     * inputs or model every planned kernel computes in bf16 (as
     * compile/program_steps.c plans them: oneDNN multiplies in bf16) */
    double acc = 0x1p-24, half = unit_roundoff(p->precision.model);
    if (p->precision.input == TG_BF16 && unit_roundoff(TG_BF16) > half)
        half = unit_roundoff(TG_BF16);
    for (int i = 0; i < t->n_in && k > 1; i++)
        if (p->storage[t->in[i]->id] == TG_F32 && half > acc)
            acc = half;
    tg_dtype stored = p->storage[storage_root(t)->id];
    double out = unit_roundoff(stored);
    /* below its normal range a type is exact only to its subnormal spacing
     * (f16: 2^-24, 6e-8): a small bias stored in f16 is off by that */
    double floor = stored == TG_F16 ? 0x1p-24 : 0;
    return cx->v->factor * (sensitivity * sqrt(k) + magnitude * (acc * sqrt(k) + out) + floor) +
           1e-30;
}

/* The reference's largest change when each float input element moves by
 * 2^-24 of itself, up or down at random: the error its conditioning alone
 * gives an f32 computation. */
static double sensitivity_of(check_ctx *cx, const tg_tensor *t, tg_ref_args a)
{
    if (t->flags & TG_NODE_ALIAS)
        return 0;
    for (int k = 0; k < t->n_in; k++) {
        int64_t n = tg_numel(t->in[k]);
        if (t->in[k]->dtype == TG_I32 || t->in[k]->dtype == TG_U8)
            continue;
        double *d = tg_realloc(cx->moved[k], (size_t)(n ? n : 1) * sizeof(double));
        if (!d)
            return 0;
        cx->moved[k] = d;
        uint64_t h = 0x9E3779B97F4A7C15ull * (uint64_t)(k + 1);
        for (int64_t i = 0; i < n; i++) {
            h ^= h >> 12, h ^= h << 25, h ^= h >> 27;
            d[i] = a.in[k][i] * (1 + ((h >> 40) & 1 ? 0x1p-24 : -0x1p-24));
        }
        a.in[k] = d;
    }
    a.out = cx->moved_out;
    tg_op_get(t->op)->reference(&a);
    double worst = 0;
    for (int64_t i = 0; i < tg_numel(t); i++) {
        double d = fabs(a.out[i] - cx->ref[i]);
        if (isfinite(d) && d > worst)
            worst = d;
    }
    return worst;
}

static void set_skip(tg_verify_row *row, const char *why)
{
    row->verdict = TG_VERIFY_SKIPPED;
    row->note = why;
}

/* The batch norm's reference on y (the convolution's), into cx->ref; the
 * largest per-channel scale and the largest |y| times its channel's scale. */
static void norm_reference(check_ctx *cx, const tg_tensor *conv, const tg_tensor *bn, double *y,
                           double *most_scale, double *folded)
{
    int64_t n = tg_numel(bn), K = conv->shape.dim[1], plane = n / conv->shape.dim[0] / K;
    tg_ref_args b = {.node = bn, .out = cx->ref};
    b.in[0] = y;
    for (int k = 1; k < bn->n_in; k++)
        b.in[k] = cx->v->before[bn->in[k]->id];
    tg_op_get(bn->op)->reference(&b);
    const double *stats = b.in[1], *gamma = tg_norm_has_gamma(bn) ? b.in[2] : NULL;
    for (int64_t i = 0; i < n; i++) {
        int64_t c = (i / plane) % K;
        double scale = fabs((gamma ? gamma[c] : 1.0) / sqrt(stats[K + c] + tg_norm_eps(bn)));
        *most_scale = fmax(*most_scale, scale);
        *folded = fmax(*folded, fabs(y[i]) * scale);
    }
}

/* The last node a fused convolution computes (compile/fuse.c): the
 * convolution's, the batch norm's (if folded) and the activation's (if
 * any) reference kernels chained on the convolution's inputs as the
 * program used them, into cx->ref. The folded convolution rounds like one
 * whose outputs are the convolution's times each channel's scale: that
 * magnitude and the convolution's sensitivity times the largest scale go
 * into *magnitude and *sensitivity. False (row skipped) when an input was
 * not kept. */
static bool fused_reference(check_ctx *cx, const tg_tensor *t, tg_verify_row *row,
                            double *magnitude, double *sensitivity)
{
    const tg_program *p = cx->s->program;
    const tg_tensor *conv = cx->s->graph->nodes[p->fused_into[t->id]], *bn, *act;
    tg_fuse_chain(p, conv, &bn, &act);
    if (t == bn)
        act = NULL; /* a row for the norm itself ends the chain there */
    int64_t n = tg_numel(t);
    tg_ref_args a = {.node = conv,
                     .out = cx->ref,
                     .step = cx->v->step,
                     .seed = cx->s->seed,
                     .stream = stream_of(cx)};
    for (int k = 0; k < conv->n_in; k++)
        if (!(a.in[k] = (double *)input_value(cx, conv->in[k], k)))
            return set_skip(row, "an input was not kept"), false;
    tg_op_get(conv->op)->reference(&a);
    double sens = sensitivity_of(cx, conv, a);
    double *y = tg_malloc((size_t)(n ? n : 1) * sizeof(double));
    if (!y)
        return set_skip(row, "out of memory"), false;
    memcpy(y, cx->ref, (size_t)n * sizeof(double));
    double most_scale = bn ? 0 : 1, folded = 0;
    if (bn) {
        norm_reference(cx, conv, bn, y, &most_scale, &folded);
    } else {
        for (int64_t i = 0; i < n; i++)
            folded = fmax(folded, fabs(y[i]));
    }
    if (act && act->op == TG_OP_MUL) { /* x * hard_sigmoid(x), in the graph's order */
        const tg_tensor *hs = act->in[0]->op == TG_OP_ACTIVATION && act->in[0]->in[0] == act->in[1]
                                  ? act->in[0]
                                  : act->in[1];
        double *s = tg_malloc((size_t)(n ? n : 1) * sizeof(double));
        if (!s) {
            tg_free(y);
            return set_skip(row, "out of memory"), false;
        }
        memcpy(y, cx->ref, (size_t)n * sizeof(double));
        tg_ref_args h = {.node = hs, .out = s};
        h.in[0] = y;
        tg_op_get(hs->op)->reference(&h);
        tg_ref_args r = {.node = act, .out = cx->ref};
        r.in[0] = act->in[0] == hs ? s : y;
        r.in[1] = act->in[0] == hs ? y : s;
        tg_op_get(act->op)->reference(&r);
        tg_free(s);
    } else if (act) { /* the activation, on the norm's or the convolution's value */
        memcpy(y, cx->ref, (size_t)n * sizeof(double));
        tg_ref_args r = {.node = act, .out = cx->ref};
        r.in[0] = y;
        tg_op_get(act->op)->reference(&r);
    }
    tg_free(y);
    *magnitude = folded;
    *sensitivity = sens * most_scale;
    return true;
}

/* The last node a fused matmul computes (compile/fuse_matmul.c): the
 * product's reference kernel on its inputs as the program used them, then
 * each fused op's (bias add, activation, residual add) on the value before
 * it and its other input, into cx->ref; the product's sensitivity in
 * *sensitivity and the largest value along the chain in *magnitude. False
 * (row skipped) when an input was not kept. */
static bool matmul_chain_reference(check_ctx *cx, const tg_tensor *t, tg_verify_row *row,
                                   double *magnitude, double *sensitivity)
{
    const tg_program *p = cx->s->program;
    const tg_tensor *head = cx->s->graph->nodes[p->fused_into[t->id]], *prev = head;
    int64_t n = tg_numel(t);
    tg_ref_args a = {.node = head,
                     .out = cx->ref,
                     .step = cx->v->step,
                     .seed = cx->s->seed,
                     .stream = stream_of(cx)};
    for (int k = 0; k < head->n_in; k++)
        if (!(a.in[k] = (double *)input_value(cx, head->in[k], k)))
            return set_skip(row, "an input was not kept"), false;
    tg_op_get(head->op)->reference(&a);
    *sensitivity = sensitivity_of(cx, head, a);
    double *y = tg_malloc((size_t)(n ? n : 1) * sizeof(double)), most = 0;
    if (!y)
        return set_skip(row, "out of memory"), false;
    for (int i = head->id + 1; i <= t->id; i++) {
        const tg_tensor *m = cx->s->graph->nodes[i];
        if (p->fused_into[i] != head->id)
            continue;
        for (int64_t e = 0; e < n; e++)
            most = fmax(most, fabs(y[e] = cx->ref[e]));
        tg_ref_args b = {.node = m, .out = cx->ref};
        for (int k = 0; k < m->n_in; k++)
            if (!(b.in[k] = m->in[k] == prev
                                ? y
                                : (double *)input_value(cx, m->in[k], TG_MAX_INPUTS - 1))) {
                tg_free(y);
                return set_skip(row, "an input was not kept"), false;
            }
        tg_op_get(m->op)->reference(&b);
        prev = m;
    }
    tg_free(y);
    *magnitude = most;
    return true;
}

/* A fused tail's row: against its chained reference, with the tolerance of
 * the convolution or matmul that computed it. */
static void check_fused(check_ctx *cx, const tg_tensor *t, tg_verify_row *row)
{
    double folded, sens;
    const tg_tensor *head = cx->s->graph->nodes[cx->s->program->fused_into[t->id]];
    bool mm = head->op != TG_OP_CONV2D;
    if (mm ? !matmul_chain_reference(cx, t, row, &folded, &sens)
           : !fused_reference(cx, t, row, &folded, &sens))
        return;
    compare_out c = compare(cx->v->fast[t->id], cx->ref, tg_numel(t), stored_type(cx, t));
    row->max_abs = c.nonfinite ? INFINITY : c.max_abs;
    row->max_rel = relative(row->max_abs, c.magnitude);
    row->tolerance = tolerance_of(cx, head, fmax(c.magnitude, folded), sens);
    row->verdict = row->max_abs > row->tolerance ? TG_VERIFY_BEYOND : TG_VERIFY_OK;
    row->note = mm ? "fused: matmul and the bias, activation or residual after it against "
                     "their chained references"
                   : "fused: conv2d and what it computes after it against their chained references";
}

/* The node's own error: its reference kernel on the inputs the program used. */
static void check_own(check_ctx *cx, const tg_tensor *t, tg_verify_row *row)
{
    const tg_program *p = cx->s->program;
    if (p->fused_into && p->fused_into[t->id] >= 0)
        return check_fused(cx, t, row);
    tg_verify *v = cx->v;
    int64_t n = tg_numel(t);
    const double *ref = NULL;
    tg_ref_args a = {
        .node = t, .out = cx->ref, .step = v->step, .seed = cx->s->seed, .stream = stream_of(cx)};
    if (t->flags & TG_NODE_ALIAS) {
        ref = input_value(cx, storage_root(t), 0);
    } else {
        const tg_op_def *def = tg_op_get(t->op);
        if (!def || !def->reference)
            return set_skip(row, "no reference kernel");
        if ((t->flags & TG_NODE_LOSS_SEED) && v->loss_scale != 1.0f)
            return set_skip(row, "the loss scale's seed");
        for (int k = 0; k < t->n_in; k++)
            if (!(a.in[k] = (double *)input_value(cx, t->in[k], k)))
                return set_skip(row, "an input was not kept");
        def->reference(&a);
        ref = cx->ref;
    }
    if (!ref)
        return set_skip(row, "its input was not kept");
    compare_out c = compare(v->fast[t->id], ref, n, stored_type(cx, t));
    if (c.ref_nonfinite && !c.nonfinite && c.max_abs == 0)
        return set_skip(row, "the reference is not finite");
    row->max_abs = c.nonfinite ? INFINITY : c.max_abs;
    row->max_rel = relative(row->max_abs, c.magnitude);
    row->tolerance = tolerance_of(cx, t, c.magnitude, sensitivity_of(cx, t, a));
    row->verdict = row->max_abs > row->tolerance ? TG_VERIFY_BEYOND : TG_VERIFY_OK;
}

/* A gradient the program computed, loss-scaled, as the update reads it: the
 * update unscales it (tg_update_opts), the reference kernel does not. */
static double *unscaled(check_ctx *cx, const tg_tensor *x, const double *g, int k)
{
    int64_t n = tg_numel(x);
    double *d = tg_realloc(cx->moved[k], (size_t)(n ? n : 1) * sizeof(double));
    if (!d)
        return NULL;
    cx->moved[k] = d;
    for (int64_t i = 0; i < n; i++)
        d[i] = g[i] / cx->v->loss_scale;
    return d;
}

/* An update (or running statistics): its reference on the weights as the
 * run began and the gradient the program computed, against the weights
 * after the run. Comparable when the run is one update of one micro-batch. */
static void check_update(check_ctx *cx, const tg_tensor *t, tg_verify_row *row)
{
    tg_verify *v = cx->v;
    const tg_op_def *def = tg_op_get(t->op);
    if (!cx->single)
        return set_skip(row, "updates read gradients summed over micro-batches or replicas");
    if (tg_scaling_max_grad_norm(cx->s->scaling) > 0)
        return set_skip(row, "the gradient is clipped");
    if (!def || !def->reference)
        return set_skip(row, "no reference kernel");
    tg_ref_args a = {
        .node = t, .out = cx->ref, .step = v->step, .seed = cx->s->seed, .stream = stream_of(cx)};
    double *mutated[TG_MAX_INPUTS] = {0};
    for (int k = 0; k < t->n_in; k++) {
        const double *x = input_value(cx, t->in[k], k);
        if (x && k >= t->n_mutated && (t->in[k]->flags & TG_NODE_BACKWARD) && v->loss_scale != 1.0f)
            x = unscaled(cx, t->in[k], x, k);
        if (!x)
            return set_skip(row, "an input was not kept");
        a.in[k] = (double *)x;
    }
    for (int k = 0; k < t->n_mutated; k++) {
        if (!v->after[t->in[k]->id])
            return set_skip(row, "its result was not read");
        int64_t n = tg_numel(t->in[k]);
        if (!(mutated[k] = tg_malloc((size_t)(n ? n : 1) * sizeof(double))))
            goto out;
        memcpy(mutated[k], a.in[k], (size_t)n * sizeof(double));
        a.in[k] = mutated[k];
    }
    if (cx->skipped && tg_is_weight_update(t))
        row->note = "skipped by the program: a gradient overflowed (loss scaling)";
    else
        def->reference(&a);
    row->elements = 0;
    double worst = -1;
    for (int k = 0; k < t->n_mutated; k++) {
        int64_t n = tg_numel(t->in[k]);
        compare_out c = compare(v->after[t->in[k]->id], mutated[k], n, TG_F32);
        double tol = tolerance_of(cx, t->in[k], c.magnitude, 0);
        double abs = c.nonfinite ? INFINITY : c.max_abs;
        row->elements += n;
        if (abs / tol > worst) {
            worst = abs / tol;
            row->max_abs = abs, row->tolerance = tol, row->max_rel = relative(abs, c.magnitude);
        }
    }
    row->verdict = worst > 1 ? TG_VERIFY_BEYOND : TG_VERIFY_OK;
out:
    for (int k = 0; k < t->n_mutated; k++)
        tg_free(mutated[k]);
}

/* Against the reference run of the whole graph. */
static double drift_of(check_ctx *cx, const tg_tensor *t)
{
    tg_verify *v = cx->v;
    if (!cx->ip || !v->captured[t->id])
        return -1;
    compare_out c =
        compare(v->fast[t->id], tg_interp_data(cx->ip, t), tg_numel(t), stored_type(cx, t));
    return c.nonfinite ? INFINITY : relative(c.max_abs, c.magnitude);
}

/* A summary figure: the largest difference over a set of tensors relative
 * to the largest reference value among them all (a gradient that is zero
 * in the reference, such as a bias in front of a batch norm, does not make
 * it infinite). */
typedef struct drift_sum {
    double max_abs, magnitude;
    bool nonfinite, any;
} drift_sum;

static void add_drift(drift_sum *d, const float *fast, const double *ref, int64_t n, tg_dtype dt)
{
    compare_out c = compare(fast, ref, n, dt);
    d->max_abs = fmax(d->max_abs, c.max_abs);
    d->magnitude = fmax(d->magnitude, c.magnitude);
    d->nonfinite |= c.nonfinite;
    d->any = true;
}

static double drift_value(const drift_sum *d)
{
    if (!d->any)
        return -1;
    return d->nonfinite ? INFINITY : relative(d->max_abs, d->magnitude);
}

static void summarise(check_ctx *cx, tg_verify_report *r)
{
    const tg_graph *g = cx->s->graph;
    tg_verify *v = cx->v;
    drift_sum loss = {0}, outputs = {0}, gradients = {0}, weights = {0};
    for (int i = 0; cx->ip && i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        const double *ref = tg_interp_data(cx->ip, t);
        if ((t->flags & TG_NODE_OUTPUT) && v->captured[i])
            add_drift(tg_numel(t) == 1 ? &loss : &outputs, v->fast[i], ref, tg_numel(t),
                      stored_type(cx, t));
        if (t->role == TG_ROLE_GRADIENT && v->captured[i])
            add_drift(&gradients, v->fast[i], ref, tg_numel(t), stored_type(cx, t));
        if (t->op == TG_OP_PARAM && cx->single && !cx->skipped && v->after[i] &&
            v->loss_scale == 1.0f)
            add_drift(&weights, v->after[i], tg_interp_data(cx->ip, t), tg_numel(t), TG_F32);
    }
    tg_verify_summary now = {drift_value(&loss), drift_value(&outputs), drift_value(&gradients),
                             drift_value(&weights)};
    /* over the micro-batches, the largest (-1: not compared in any) */
    r->summary.loss = fmax(r->summary.loss, now.loss);
    r->summary.outputs = fmax(r->summary.outputs, now.outputs);
    r->summary.gradients = fmax(r->summary.gradients, now.gradients);
    r->summary.weights = fmax(r->summary.weights, now.weights);
}

static tg_status add_row(tg_verify_report *r, int *cap, const tg_verify_row *row)
{
    if (r->n_rows == *cap) {
        int c = *cap ? *cap * 2 : 64;
        tg_verify_row *rows = tg_realloc(r->rows, (size_t)c * sizeof *rows);
        if (!rows)
            return tg_error(TG_ERR_NOMEM, "verify: out of memory");
        r->rows = rows, *cap = c;
    }
    r->rows[r->n_rows++] = *row;
    return TG_OK;
}

/* The rows of the micro-batch in view (select_mb); the updates, made once
 * per run, with micro-batch 0's. */
static tg_status check_nodes(check_ctx *cx, tg_verify_report *r, int *cap)
{
    const tg_graph *g = cx->s->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        bool update = t->n_mutated > 0;
        if (t->n_in == 0 || (!update && !cx->v->captured[i]) || (update && cx->v->cur_mb > 0))
            continue;
        tg_verify_row row = {.name = t->name,
                             .op = tg_op_name(t->op),
                             .block = t->block >= 0 ? g->blocks[t->block].name : "",
                             .elements = tg_numel(t),
                             .drift_rel = update ? -1 : drift_of(cx, t),
                             .note = "",
                             .micro_batch = cx->v->cur_mb};
        if (update)
            check_update(cx, t, &row);
        else
            check_own(cx, t, &row);
        if (row.verdict == TG_VERIFY_BEYOND && r->first_beyond < 0)
            r->first_beyond = r->n_rows;
        r->counts[row.verdict]++;
        TG_TRY(add_row(r, cap, &row));
    }
    return TG_OK;
}

/* The mutated leaves (weights, optimizer and running state) after the run. */
static tg_status keep_results(tg_session *s, tg_verify *v)
{
    const tg_graph *g = s->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *u = g->nodes[i];
        for (int k = 0; k < u->n_mutated; k++) {
            const tg_tensor *w = u->in[k];
            if (v->after[w->id] || !is_value_leaf(w) || w->dtype != TG_F32)
                continue;
            int64_t n = tg_numel(w);
            if (!(v->after[w->id] = tg_malloc((size_t)(n ? n : 1) * sizeof(float))))
                return tg_error(TG_ERR_NOMEM, "verify: out of memory");
            if (tg_session_read(s, w, v->after[w->id], (size_t)n * sizeof(float)) != TG_OK) {
                tg_free(v->after[w->id]);
                v->after[w->id] = NULL;
            }
        }
    }
    return TG_OK;
}

/* The whole graph run by the reference from the same leaves; NULL (and a
 * line in limits) when it cannot run. */
static tg_interp *reference_run(tg_session *s, tg_verify *v, tg_verify_report *r)
{
    const tg_graph *g = s->graph;
    tg_interp *ip = NULL;
    /* A double of every tensor at once: BERT-large's took 10 GB beside the
     * kept values, and Linux hands out memory it does not have until the
     * OOM killer ends the process (and maybe another). Without the room,
     * each op is still checked on its own inputs; only the whole-graph
     * figures (drift, end to end) are missing. */
    int64_t need = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!(g->nodes[i]->flags & TG_NODE_ALIAS))
            need +=
                (tg_numel(g->nodes[i]) > 0 ? tg_numel(g->nodes[i]) : 1) * (int64_t)sizeof(double);
    int64_t avail = tg_mem_room(); /* ulimit -v counts too */
    if (avail > 0 && need > avail / 10 * 8) {
        snprintf(r->limits, sizeof r->limits,
                 "no reference run of the whole graph: its doubles need %.1f GiB, %.1f GiB of "
                 "memory is available (each op is still checked on its own inputs; a smaller "
                 "--batch-size or --input gives the end-to-end figures)",
                 (double)need / (1 << 30), (double)avail / (1 << 30));
        return NULL;
    }
    if (tg_interp_create(g, s->seed, &ip) != TG_OK) {
        snprintf(r->limits, sizeof r->limits, "no reference run: %s", tg_error_message());
        return NULL;
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (v->before[i])
            memcpy(tg_interp_data(ip, g->nodes[i]), v->before[i],
                   (size_t)tg_numel(g->nodes[i]) * sizeof(double));
    tg_interp_set_stream(ip, (uint64_t)s->replica_offset * 0x100000000ull + (uint64_t)v->cur_mb);
    if (tg_interp_run(ip, v->step) != TG_OK) {
        snprintf(r->limits, sizeof r->limits, "no reference run: %s", tg_error_message());
        tg_interp_destroy(ip);
        return NULL;
    }
    return ip;
}

static void describe_limits(const check_ctx *cx, tg_verify_report *r)
{
    const tg_program *p = cx->s->program;
    size_t len = strlen(r->limits);
    if (cx->skipped && len < sizeof r->limits)
        len += (size_t)snprintf(r->limits + len, sizeof r->limits - len,
                                "%sa gradient overflowed its storage type: the program skipped "
                                "the update (training without loss scaling stops here)",
                                len ? "; " : "");
    if (!cx->single && len < sizeof r->limits)
        len += (size_t)snprintf(r->limits + len, sizeof r->limits - len,
                                "%sweights after the update not compared (%d micro-batches x %d "
                                "replicas x %d iterations per run; the values are replica 0's "
                                "micro-batches of the first iteration, each on its own inputs)",
                                len ? "; " : "", p->micro_batches, cx->s->global_replicas,
                                p->iterations);
    if (cx->v->loss_scale != 1.0f && cx->single && len < sizeof r->limits)
        snprintf(r->limits + len, sizeof r->limits - len,
                 "%sweights after the update not compared end to end (the loss is scaled by %g: "
                 "the reference run's updates read scaled gradients; each update is compared on "
                 "its own)",
                 len ? "; " : "", (double)cx->v->loss_scale);
}

static tg_status build_report(tg_session *s, tg_verify *v, tg_verify_report *r)
{
    const tg_program *p = s->program;
    const tg_graph *g = s->graph;
    check_ctx cx = {.s = s, .v = v};
    cx.single = p->micro_batches == 1 && p->iterations == 1 && s->global_replicas == 1;
    cx.skipped = p->training && tg_scaling_skipped(s->scaling, 0, v->step);
    int64_t most = 1;
    for (int i = 0; i < g->n_nodes; i++)
        if (tg_numel(g->nodes[i]) > most)
            most = tg_numel(g->nodes[i]);
    cx.ref = tg_malloc((size_t)most * sizeof(double));
    cx.moved_out = tg_malloc((size_t)most * sizeof(double));
    if (!cx.ref || !cx.moved_out) {
        tg_free(cx.ref);
        tg_free(cx.moved_out);
        return tg_error(TG_ERR_NOMEM, "verify: out of memory");
    }
    tg_status st = p->training ? keep_results(s, v) : TG_OK;
    int cap = 0;
    r->first_beyond = -1;
    r->summary = (tg_verify_summary){-1, -1, -1, -1};
    for (int m = 0; st == TG_OK && m < v->n_mb; m++) {
        select_mb(v, m);
        cx.ip = reference_run(s, v, r);
        st = check_nodes(&cx, r, &cap);
        if (st == TG_OK)
            summarise(&cx, r);
        tg_interp_destroy(cx.ip);
        cx.ip = NULL;
    }
    if (st == TG_OK)
        describe_limits(&cx, r);
    tg_free(cx.ref);
    tg_free(cx.moved_out);
    for (int k = 0; k < TG_MAX_INPUTS; k++) {
        tg_free(cx.in_tmp[k]);
        tg_free(cx.moved[k]);
    }
    return st;
}

tg_status tg_verify_end(tg_session *s)
{
    tg_verify *v = s->verify;
    if (!v || !v->capturing)
        return TG_OK;
    v->capturing = false;
    free_report(v->report);
    v->report = tg_calloc(1, sizeof *v->report);
    tg_status st =
        v->report ? build_report(s, v, v->report) : tg_error(TG_ERR_NOMEM, "verify: out of memory");
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
