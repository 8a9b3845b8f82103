/* runtime/verify_check.c - a verified run's values checked, tensor by
 * tensor, when the run is over (tilegraph/verify.h, runtime/verify.h).
 *
 * Each micro-batch in turn: every node's own error (its reference kernel
 * on the inputs the program used) and its drift from the reference run of
 * the whole graph, streamed beside (runtime/verify_ref.h) so that a
 * node's reference double and the program's value kept for it are freed
 * once their last reader is checked; the updates with micro-batch 0's.
 */
#include "runtime/verify_internal.h"

#include "core/alloc.h"
#include "core/convert.h"
#include "core/error.h"
#include "core/meminfo.h"
#include "graph/optim_params.h"
#include "ops/norm.h"
#include "ops/op.h"
#include "runtime/session_state.h"
#include "runtime/scaling.h"
#include "runtime/verify_ref.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Micro-batch m's values in view: its captures and the inputs it streamed. */
static void select_mb(tg_verify *v, int m)
{
    v->cur_mb = m;
    v->fast = v->fast_mb[m];
    v->captured = v->captured_mb[m];
}

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

/* Scratch doubles of one node's check, grown as needed and given back after
 * a node that needed many (a 30522 x 1024 embedding's are 250 MB each). */
typedef struct scratch {
    double *p;
    int64_t n;
} scratch;

enum { SCRATCH_KEEP = 1 << 21 }; /* doubles (16 MiB) kept from one node to the next */

static double *scratch_get(scratch *b, int64_t n)
{
    n = n > 0 ? n : 1;
    if (n > b->n) {
        double *p = tg_realloc(b->p, (size_t)n * sizeof(double));
        if (!p)
            return NULL;
        b->p = p, b->n = n;
    }
    return b->p;
}

static void scratch_trim(scratch *b, int64_t keep)
{
    if (b->n > keep) {
        tg_free(b->p);
        b->p = NULL, b->n = 0;
    }
}

/* A sum of drifts: the largest difference over a set of tensors relative
 * to the largest reference value among them all (a gradient that is zero
 * in the reference, such as a bias in front of a batch norm, does not make
 * it infinite). */
typedef struct drift_sum {
    double max_abs, magnitude;
    bool nonfinite, any;
} drift_sum;

typedef struct check_ctx {
    tg_session *s;
    tg_verify *v;
    tg_verify_report *r;
    bool single;       /* one micro-batch of one replica per run: updates are comparable */
    bool skipped;      /* the run's update was skipped: a gradient overflowed (loss scaling) */
    bool reference;    /* the whole graph runs in the reference (drift, end to end) */
    scratch ref;       /* one node's reference */
    scratch moved_out; /* and it on inputs moved by a rounding */
    scratch in_tmp[TG_MAX_INPUTS], moved[TG_MAX_INPUTS];
    float *after_tmp; /* a leaf after the run, as read */
    int64_t after_n;
    /* the micro-batch in view: its rows by node (appended in graph order at
     * its end) and its end-to-end sums */
    tg_verify_row *rows;
    unsigned char *has_row;
    drift_sum loss, outputs, gradients, weights;
    /* per position of the reference's order: the captures whose last
     * reader it is (freed there), chained */
    int *fast_first, *fast_next;
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
    return cx->s->program->storage[tg_verify_storage_root(t)->id];
}

void tg_verify_to_float(const void *src, tg_dtype dt, float *dst, int64_t n)
{
    if (dt == TG_F32 || dt == TG_F16 || dt == TG_BF16) {
        tg_convert(src, dt, dst, TG_F32, (size_t)n);
        return;
    }
    for (int64_t k = 0; k < n; k++)
        dst[k] = dt == TG_I32 ? (float)((const int32_t *)src)[k] : ((const uint8_t *)src)[k];
}

/* Leaf t as the run began (inputs: the micro-batch in view's) into out;
 * false when it was not kept. */
static bool leaf_double(const check_ctx *cx, const tg_tensor *t, double *out)
{
    const tg_verify *v = cx->v;
    int64_t n = tg_numel(t);
    if (v->seeded[t->id]) {
        for (int64_t k = 0; k < n; k++)
            out[k] = v->loss_scale;
        return true;
    }
    const void *raw = t->op == TG_OP_INPUT ? v->inputs_mb[v->cur_mb][t->id] : v->before[t->id];
    if (!raw)
        return false;
    tg_convert_to_double(raw, v->raw_dt[t->id], out, (size_t)n);
    return true;
}

static bool leaf_hook(void *ctx, const tg_tensor *t, double *out)
{
    return leaf_double(ctx, t, out);
}

/* Input x of a node, slot k: what the program used, in double (in the slot's
 * scratch); NULL when it was not kept. */
static const double *input_value(check_ctx *cx, const tg_tensor *x, int k)
{
    tg_verify *v = cx->v;
    if (x->n_in > 0 && !v->captured[x->id])
        return NULL;
    int64_t n = tg_numel(x);
    double *d = scratch_get(&cx->in_tmp[k], n);
    if (!d)
        return NULL;
    if (x->n_in == 0)
        return leaf_double(cx, x, d) ? d : NULL;
    for (int64_t i = 0; i < n; i++)
        d[i] = v->fast[x->id][i];
    return d;
}

/* Leaf w after the run, as read from the session (f32 value leaves only);
 * NULL otherwise. */
static const float *after_value(check_ctx *cx, const tg_tensor *w)
{
    if (!tg_verify_is_value_leaf(w) || w->dtype != TG_F32)
        return NULL;
    int64_t n = tg_numel(w) ? tg_numel(w) : 1;
    if (n > cx->after_n) {
        float *p = tg_realloc(cx->after_tmp, (size_t)n * sizeof(float));
        if (!p)
            return NULL;
        cx->after_tmp = p, cx->after_n = n;
    }
    if (tg_session_read(cx->s, w, cx->after_tmp, (size_t)tg_numel(w) * sizeof(float)) != TG_OK)
        return NULL;
    return cx->after_tmp;
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
    tg_dtype stored = p->storage[tg_verify_storage_root(t)->id];
    double out = unit_roundoff(stored);
    /* below its normal range a type is exact only to its subnormal spacing
     * (f16: 2^-24, 6e-8): a small bias stored in f16 is off by that */
    double floor = stored == TG_F16 ? 0x1p-24 : 0;
    return cx->v->factor * (sensitivity * sqrt(k) + magnitude * (acc * sqrt(k) + out) + floor) +
           1e-30;
}

/* The reference's largest change when each float input element moves by
 * 2^-24 of itself, up or down at random: the error its conditioning alone
 * gives an f32 computation. `ref` is the reference on the unmoved inputs. */
static double sensitivity_of(check_ctx *cx, const tg_tensor *t, tg_ref_args a, const double *ref)
{
    if (t->flags & TG_NODE_ALIAS)
        return 0;
    for (int k = 0; k < t->n_in; k++) {
        int64_t n = tg_numel(t->in[k]);
        if (t->in[k]->dtype == TG_I32 || t->in[k]->dtype == TG_U8)
            continue;
        double *d = scratch_get(&cx->moved[k], n);
        if (!d)
            return 0;
        uint64_t h = 0x9E3779B97F4A7C15ull * (uint64_t)(k + 1);
        for (int64_t i = 0; i < n; i++) {
            h ^= h >> 12, h ^= h << 25, h ^= h >> 27;
            d[i] = a.in[k][i] * (1 + ((h >> 40) & 1 ? 0x1p-24 : -0x1p-24));
        }
        a.in[k] = d;
    }
    if (!(a.out = scratch_get(&cx->moved_out, tg_numel(t))))
        return 0;
    tg_op_get(t->op)->reference(&a);
    double worst = 0;
    for (int64_t i = 0; i < tg_numel(t); i++) {
        double d = fabs(a.out[i] - ref[i]);
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

/* The batch norm's reference on y (the convolution's), into out; the
 * largest per-channel scale and the largest |y| times its channel's scale.
 * False when an input of the norm was not kept. */
static bool norm_reference(check_ctx *cx, const tg_tensor *conv, const tg_tensor *bn, double *y,
                           double *out, double *most_scale, double *folded)
{
    int64_t n = tg_numel(bn), K = conv->shape.dim[1], plane = n / conv->shape.dim[0] / K;
    tg_ref_args b = {.node = bn, .out = out};
    b.in[0] = y;
    for (int k = 1; k < bn->n_in; k++) /* the convolution's inputs are no longer read */
        if (!(b.in[k] = (double *)input_value(cx, bn->in[k], k)))
            return false;
    tg_op_get(bn->op)->reference(&b);
    const double *stats = b.in[1], *gamma = tg_norm_has_gamma(bn) ? b.in[2] : NULL;
    for (int64_t i = 0; i < n; i++) {
        int64_t c = (i / plane) % K;
        double scale = fabs((gamma ? gamma[c] : 1.0) / sqrt(stats[K + c] + tg_norm_eps(bn)));
        *most_scale = fmax(*most_scale, scale);
        *folded = fmax(*folded, fabs(y[i]) * scale);
    }
    return true;
}

/* The activation act fused after the convolution (or its norm) on y, the
 * value before it, into out: x * hard_sigmoid(x) in the graph's order, or
 * the one-input activation. False when out of memory. */
static bool activation_reference(const tg_tensor *act, double *y, double *out, int64_t n)
{
    if (act->op != TG_OP_MUL) {
        tg_ref_args r = {.node = act, .out = out};
        r.in[0] = y;
        tg_op_get(act->op)->reference(&r);
        return true;
    }
    const tg_tensor *hs = act->in[0]->op == TG_OP_ACTIVATION && act->in[0]->in[0] == act->in[1]
                              ? act->in[0]
                              : act->in[1];
    double *h = tg_malloc((size_t)(n ? n : 1) * sizeof(double));
    if (!h)
        return false;
    tg_ref_args r = {.node = hs, .out = h};
    r.in[0] = y;
    tg_op_get(hs->op)->reference(&r);
    tg_ref_args m = {.node = act, .out = out};
    m.in[0] = act->in[0] == hs ? h : y;
    m.in[1] = act->in[0] == hs ? y : h;
    tg_op_get(act->op)->reference(&m);
    tg_free(h);
    return true;
}

/* The residual add fused after a convolution (compile/fuse.c) on y, the
 * value before it, and its other operand as the program had it, into out.
 * False when that operand was not kept. */
static bool add_reference(check_ctx *cx, const tg_tensor *conv, const tg_tensor *add, double *y,
                          double *out)
{
    tg_ref_args r = {.node = add, .out = out};
    for (int k = 0; k < add->n_in; k++) /* the residual was computed before the conv */
        if (!(r.in[k] = add->in[k]->id >= conv->id
                            ? y
                            : (double *)input_value(cx, add->in[k], TG_MAX_INPUTS - 1)))
            return false;
    tg_op_get(add->op)->reference(&r);
    return true;
}

/* The last node a fused convolution computes (compile/fuse.c): the
 * convolution's, the batch norm's (if folded), the residual add's (if
 * any) and the activation's (if any) reference kernels chained on the convolution's inputs as the
 * program used them, into the returned scratch. The folded convolution
 * rounds like one whose outputs are the convolution's times each channel's
 * scale: that magnitude and the convolution's sensitivity times the
 * largest scale go into *magnitude and *sensitivity. NULL (row skipped)
 * when an input was not kept. */
static const double *fused_reference(check_ctx *cx, const tg_tensor *t, tg_verify_row *row,
                                     double *magnitude, double *sensitivity)
{
    const tg_program *p = cx->s->program;
    const tg_tensor *conv = cx->s->graph->nodes[p->fused_into[t->id]], *bn, *act;
    tg_fuse_chain(p, conv, &bn, &act);
    if (t == bn)
        act = NULL; /* a row for the norm itself ends the chain there */
    int64_t n = tg_numel(t);
    double *out = scratch_get(&cx->ref, n), *y = tg_malloc((size_t)(n ? n : 1) * sizeof(double));
    if (!out || !y) {
        tg_free(y);
        return set_skip(row, "out of memory"), NULL;
    }
    tg_ref_args a = {.node = conv,
                     .out = out,
                     .step = cx->v->step,
                     .seed = cx->s->seed,
                     .stream = stream_of(cx)};
    for (int k = 0; k < conv->n_in; k++)
        if (!(a.in[k] = (double *)input_value(cx, conv->in[k], k))) {
            tg_free(y);
            return set_skip(row, "an input was not kept"), NULL;
        }
    tg_op_get(conv->op)->reference(&a);
    double sens = sensitivity_of(cx, conv, a, out);
    memcpy(y, out, (size_t)n * sizeof(double));
    double most_scale = bn ? 0 : 1, folded = 0;
    if (bn && !norm_reference(cx, conv, bn, y, out, &most_scale, &folded)) {
        tg_free(y);
        return set_skip(row, "an input was not kept"), NULL;
    }
    for (int64_t i = 0; !bn && i < n; i++)
        folded = fmax(folded, fabs(y[i]));
    const tg_tensor *add = t == bn ? NULL : tg_fuse_conv_add(p, conv);
    if (add) {
        memcpy(y, out, (size_t)n * sizeof(double));
        if (!add_reference(cx, conv, add, y, out)) {
            tg_free(y);
            return set_skip(row, "the residual was not kept"), NULL;
        }
    }
    if (act) {
        memcpy(y, out, (size_t)n * sizeof(double));
        if (!activation_reference(act, y, out, n)) {
            tg_free(y);
            return set_skip(row, "out of memory"), NULL;
        }
    }
    tg_free(y);
    *magnitude = folded;
    *sensitivity = sens * most_scale;
    return out;
}

/* The last node a fused matmul computes (compile/fuse_matmul.c): the
 * product's reference kernel on its inputs as the program used them, then
 * each fused op's (bias add, activation, residual add) on the value before
 * it and its other input, into the returned scratch; the product's
 * sensitivity in *sensitivity and the largest value along the chain in
 * *magnitude. NULL (row skipped) when an input was not kept. */
static const double *matmul_chain_reference(check_ctx *cx, const tg_tensor *t, tg_verify_row *row,
                                            double *magnitude, double *sensitivity)
{
    const tg_program *p = cx->s->program;
    const tg_tensor *head = cx->s->graph->nodes[p->fused_into[t->id]], *prev = head;
    int64_t n = tg_numel(t);
    double *out = scratch_get(&cx->ref, n), *y = tg_malloc((size_t)(n ? n : 1) * sizeof(double));
    if (!out || !y) {
        tg_free(y);
        return set_skip(row, "out of memory"), NULL;
    }
    tg_ref_args a = {.node = head,
                     .out = out,
                     .step = cx->v->step,
                     .seed = cx->s->seed,
                     .stream = stream_of(cx)};
    for (int k = 0; k < head->n_in; k++)
        if (!(a.in[k] = (double *)input_value(cx, head->in[k], k))) {
            tg_free(y);
            return set_skip(row, "an input was not kept"), NULL;
        }
    tg_op_get(head->op)->reference(&a);
    *sensitivity = sensitivity_of(cx, head, a, out);
    double most = 0;
    for (int i = head->id + 1; i <= t->id; i++) {
        const tg_tensor *m = cx->s->graph->nodes[i];
        if (p->fused_into[i] != head->id)
            continue;
        for (int64_t e = 0; e < n; e++)
            most = fmax(most, fabs(y[e] = out[e]));
        tg_ref_args b = {.node = m, .out = out};
        for (int k = 0; k < m->n_in; k++)
            if (!(b.in[k] = m->in[k] == prev
                                ? y
                                : (double *)input_value(cx, m->in[k], TG_MAX_INPUTS - 1))) {
                tg_free(y);
                return set_skip(row, "an input was not kept"), NULL;
            }
        tg_op_get(m->op)->reference(&b);
        prev = m;
    }
    tg_free(y);
    *magnitude = most;
    return out;
}

/* A fused tail's row: against its chained reference, with the tolerance of
 * the convolution or matmul that computed it. */
static void check_fused(check_ctx *cx, const tg_tensor *t, tg_verify_row *row)
{
    double folded, sens;
    const tg_tensor *head = cx->s->graph->nodes[cx->s->program->fused_into[t->id]];
    bool mm = head->op != TG_OP_CONV2D;
    const double *ref = mm ? matmul_chain_reference(cx, t, row, &folded, &sens)
                           : fused_reference(cx, t, row, &folded, &sens);
    if (!ref)
        return;
    compare_out c = compare(cx->v->fast[t->id], ref, tg_numel(t), stored_type(cx, t));
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
    tg_ref_args a = {.node = t, .step = v->step, .seed = cx->s->seed, .stream = stream_of(cx)};
    if (t->flags & TG_NODE_ALIAS) {
        ref = input_value(cx, tg_verify_storage_root(t), 0);
    } else {
        const tg_op_def *def = tg_op_get(t->op);
        if (!def || !def->reference)
            return set_skip(row, "no reference kernel");
        if ((t->flags & TG_NODE_LOSS_SEED) && v->loss_scale != 1.0f)
            return set_skip(row, "the loss scale's seed");
        if (!(a.out = scratch_get(&cx->ref, n)))
            return set_skip(row, "out of memory");
        for (int k = 0; k < t->n_in; k++)
            if (!(a.in[k] = (double *)input_value(cx, t->in[k], k)))
                return set_skip(row, "an input was not kept");
        def->reference(&a);
        ref = a.out;
    }
    if (!ref)
        return set_skip(row, "its input was not kept");
    compare_out c = compare(v->fast[t->id], ref, n, stored_type(cx, t));
    if (c.ref_nonfinite && !c.nonfinite && c.max_abs == 0)
        return set_skip(row, "the reference is not finite");
    row->max_abs = c.nonfinite ? INFINITY : c.max_abs;
    row->max_rel = relative(row->max_abs, c.magnitude);
    row->tolerance = tolerance_of(cx, t, c.magnitude, a.out ? sensitivity_of(cx, t, a, ref) : 0);
    row->verdict = row->max_abs > row->tolerance ? TG_VERIFY_BEYOND : TG_VERIFY_OK;
}

/* A gradient the program computed, loss-scaled, as the update reads it: the
 * update unscales it (tg_update_opts), the reference kernel does not. */
static double *unscaled(check_ctx *cx, const tg_tensor *x, const double *g, int k)
{
    int64_t n = tg_numel(x);
    double *d = scratch_get(&cx->moved[k], n);
    if (!d)
        return NULL;
    for (int64_t i = 0; i < n; i++)
        d[i] = g[i] / cx->v->loss_scale;
    return d;
}

/* An update (or running statistics): its reference on the weights as the
 * run began and the gradient the program computed, against the weights
 * after the run. Comparable when the run is one update of one micro-batch.
 * The rewritten inputs are the slots' own copies (input_value), rewritten
 * in place. */
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
    double *out = scratch_get(&cx->ref, tg_numel(t));
    if (!out)
        return set_skip(row, "out of memory");
    tg_ref_args a = {
        .node = t, .out = out, .step = v->step, .seed = cx->s->seed, .stream = stream_of(cx)};
    for (int k = 0; k < t->n_mutated; k++)
        if (!tg_verify_is_value_leaf(t->in[k]) || t->in[k]->dtype != TG_F32)
            return set_skip(row, "its result was not read");
    for (int k = 0; k < t->n_in; k++) {
        const double *x = input_value(cx, t->in[k], k);
        if (x && k >= t->n_mutated && (t->in[k]->flags & TG_NODE_BACKWARD) && v->loss_scale != 1.0f)
            x = unscaled(cx, t->in[k], x, k);
        if (!x)
            return set_skip(row, "an input was not kept");
        a.in[k] = (double *)x;
    }
    if (cx->skipped && tg_is_weight_update(t))
        row->note = "skipped by the program: a gradient overflowed (loss scaling)";
    else
        def->reference(&a);
    row->elements = 0;
    double worst = -1;
    for (int k = 0; k < t->n_mutated; k++) {
        int64_t n = tg_numel(t->in[k]);
        const float *after = after_value(cx, t->in[k]);
        if (!after)
            return set_skip(row, "its result was not read");
        compare_out c = compare(after, a.in[k], n, TG_F32);
        double tol = tolerance_of(cx, t->in[k], c.magnitude, 0);
        double abs = c.nonfinite ? INFINITY : c.max_abs;
        row->elements += n;
        if (abs / tol > worst) {
            worst = abs / tol;
            row->max_abs = abs, row->tolerance = tol, row->max_rel = relative(abs, c.magnitude);
        }
    }
    row->verdict = worst > 1 ? TG_VERIFY_BEYOND : TG_VERIFY_OK;
}

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

/* Against the reference run of the whole graph (ref: t's value there). */
static double drift_of(check_ctx *cx, const tg_tensor *t, const double *ref)
{
    if (!ref || !cx->v->captured[t->id])
        return -1;
    compare_out c = compare(cx->v->fast[t->id], ref, tg_numel(t), stored_type(cx, t));
    return c.nonfinite ? INFINITY : relative(c.max_abs, c.magnitude);
}

/* Node t's share of the end-to-end figures. */
static void add_to_summary(check_ctx *cx, const tg_tensor *t, const double *ref)
{
    const tg_verify *v = cx->v;
    if (!ref || !v->captured[t->id])
        return;
    if (t->flags & TG_NODE_OUTPUT)
        add_drift(tg_numel(t) == 1 ? &cx->loss : &cx->outputs, v->fast[t->id], ref, tg_numel(t),
                  stored_type(cx, t));
    if (t->role == TG_ROLE_GRADIENT)
        add_drift(&cx->gradients, v->fast[t->id], ref, tg_numel(t), stored_type(cx, t));
}

/* A weight as the reference run leaves it, against the program's. */
static void settled_hook(void *ctx, const tg_tensor *t, const double *ref)
{
    check_ctx *cx = ctx;
    const tg_verify *v = cx->v;
    if (t->op != TG_OP_PARAM || !cx->single || cx->skipped || v->loss_scale != 1.0f)
        return;
    const float *after = after_value(cx, t);
    if (after)
        add_drift(&cx->weights, after, ref, tg_numel(t), TG_F32);
}

/* Captures no later position reads: freed (the check of a micro-batch
 * gives back its memory as it goes, for the reference's). */
static void free_read_captures(check_ctx *cx, int pos)
{
    tg_verify *v = cx->v;
    for (int i = cx->fast_first[pos]; i >= 0; i = cx->fast_next[i]) {
        tg_free(v->fast[i]);
        v->fast[i] = NULL;
        v->captured[i] = 0;
    }
}

/* Node t, at position pos of the reference's order, with its reference
 * value (NULL: none): its row (updates with micro-batch 0's) and its share
 * of the summary. */
static tg_status node_hook(void *ctx, const tg_tensor *t, int pos, const double *ref)
{
    check_ctx *cx = ctx;
    const tg_graph *g = cx->s->graph;
    bool update = t->n_mutated > 0;
    if ((update && cx->v->cur_mb == 0) || (!update && cx->v->captured[t->id])) {
        tg_verify_row row = {.name = t->name,
                             .op = tg_op_name(t->op),
                             .block = t->block >= 0 ? g->blocks[t->block].name : "",
                             .elements = tg_numel(t),
                             .drift_rel = update ? -1 : drift_of(cx, t, ref),
                             .note = "",
                             .micro_batch = cx->v->cur_mb};
        if (update)
            check_update(cx, t, &row);
        else
            check_own(cx, t, &row);
        cx->rows[t->id] = row;
        cx->has_row[t->id] = 1;
    }
    add_to_summary(cx, t, ref);
    free_read_captures(cx, pos);
    scratch_trim(&cx->ref, SCRATCH_KEEP);
    scratch_trim(&cx->moved_out, SCRATCH_KEEP);
    for (int k = 0; k < TG_MAX_INPUTS; k++) {
        scratch_trim(&cx->in_tmp[k], SCRATCH_KEEP);
        scratch_trim(&cx->moved[k], SCRATCH_KEEP);
    }
    if (cx->after_n > SCRATCH_KEEP) {
        tg_free(cx->after_tmp);
        cx->after_tmp = NULL, cx->after_n = 0;
    }
    return TG_OK;
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

/* The micro-batch's rows, in graph order. */
static tg_status add_rows(check_ctx *cx, int *cap)
{
    tg_verify_report *r = cx->r;
    for (int i = 0; i < cx->v->n; i++) {
        if (!cx->has_row[i])
            continue;
        const tg_verify_row *row = &cx->rows[i];
        if (row->verdict == TG_VERIFY_BEYOND && r->first_beyond < 0)
            r->first_beyond = r->n_rows;
        r->counts[row->verdict]++;
        TG_TRY(add_row(r, cap, row));
    }
    return TG_OK;
}

/* The node before m in the chain that node head computes (head itself, or
 * a node fused into it); NULL from head. */
static const tg_tensor *fused_before(const tg_program *p, const tg_tensor *m, int head)
{
    for (int k = 0; m->id != head && k < m->n_in; k++)
        if (m->in[k]->id == head || p->fused_into[m->in[k]->id] == head)
            return m->in[k];
    return NULL;
}

/* Per position of the order: the captures whose last reader it is (a
 * node's own check, its readers', a view's of its root and a fused node's
 * of its chain's inputs). */
static tg_status plan_captures(check_ctx *cx, const tg_ref_plan *plan)
{
    const tg_graph *g = cx->s->graph;
    const tg_program *p = cx->s->program;
    int n_order, n = g->n_nodes;
    const int *order = tg_ref_plan_order(plan, &n_order);
    int *last = tg_malloc(((size_t)n + 1) * sizeof(int));
    cx->fast_first = tg_malloc(((size_t)n + 1) * sizeof(int));
    cx->fast_next = tg_malloc(((size_t)n + 1) * sizeof(int));
    if (!last || !cx->fast_first || !cx->fast_next) {
        tg_free(last);
        return tg_error(TG_ERR_NOMEM, "verify: out of memory");
    }
    for (int at = 0; at < n_order; at++) {
        const tg_tensor *t = g->nodes[order[at]];
        last[t->id] = at;
        cx->fast_first[at] = -1;
    }
    for (int at = 0; at < n_order; at++) {
        const tg_tensor *t = g->nodes[order[at]];
        for (int k = 0; k < t->n_in; k++)
            last[t->in[k]->id] = at > last[t->in[k]->id] ? at : last[t->in[k]->id];
        if (t->flags & TG_NODE_ALIAS)
            last[tg_verify_storage_root(t)->id] =
                at > last[tg_verify_storage_root(t)->id] ? at : last[tg_verify_storage_root(t)->id];
        /* a fused node's chained reference reads every input of the chain
         * up to it: the head's, a norm's, a residual add's */
        int head = p->fused_into && t->n_in > 0 ? p->fused_into[t->id] : -1;
        for (const tg_tensor *m = head >= 0 ? t : NULL; m; m = fused_before(p, m, head))
            for (int k = 0; k < m->n_in; k++)
                last[m->in[k]->id] = at > last[m->in[k]->id] ? at : last[m->in[k]->id];
    }
    for (int i = 0; i < n; i++) {
        cx->fast_next[i] = cx->fast_first[last[i]];
        cx->fast_first[last[i]] = i;
    }
    tg_free(last);
    return TG_OK;
}

/* Whether the whole graph's reference run fits: its doubles at their most
 * (verify_ref.h) against the memory available (ulimit -v counts too), a
 * fifth kept free; Linux hands out memory it does not have until the OOM
 * killer ends the process (and maybe another). Without the room, each op is
 * still checked on its own inputs. */
static bool reference_fits(const tg_ref_plan *plan, tg_verify_report *r)
{
    int64_t need = tg_ref_plan_peak_bytes(plan), avail = tg_mem_room();
    if (avail <= 0 || need <= avail / 10 * 8)
        return true;
    snprintf(r->limits, sizeof r->limits,
             "no reference run of the whole graph: its doubles need %.1f GiB at once, %.1f GiB of "
             "memory is available (each op is still checked on its own inputs; a smaller "
             "--batch-size or --input gives the end-to-end figures)",
             (double)need / (1 << 30), (double)avail / (1 << 30));
    return false;
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

/* Micro-batch m: its rows and end-to-end figures, the reference run
 * streamed beside the checks. */
static tg_status check_mb(check_ctx *cx, const tg_ref_plan *plan, int m, int *cap)
{
    tg_verify *v = cx->v;
    tg_verify_report *r = cx->r;
    select_mb(v, m);
    TG_TRY(plan_captures(cx, plan));
    memset(cx->has_row, 0, (size_t)v->n);
    cx->loss = cx->outputs = cx->gradients = cx->weights = (drift_sum){0};
    tg_ref_visit visit = {cx, leaf_hook, node_hook, settled_hook};
    char why[sizeof r->limits];
    tg_status st = tg_ref_plan_run(plan, &visit, cx->reference, cx->s->seed, stream_of(cx), v->step,
                                   why, sizeof why);
    tg_free(cx->fast_first);
    tg_free(cx->fast_next);
    cx->fast_first = cx->fast_next = NULL;
    if (why[0] && !r->limits[0])
        snprintf(r->limits, sizeof r->limits, "%s", why);
    if (st == TG_OK)
        st = add_rows(cx, cap);
    if (st == TG_OK && cx->reference && !why[0]) {
        /* over the micro-batches, the largest (-1: not compared in any) */
        r->summary.loss = fmax(r->summary.loss, drift_value(&cx->loss));
        r->summary.outputs = fmax(r->summary.outputs, drift_value(&cx->outputs));
        r->summary.gradients = fmax(r->summary.gradients, drift_value(&cx->gradients));
        r->summary.weights = fmax(r->summary.weights, drift_value(&cx->weights));
    }
    return st;
}

static void free_ctx(check_ctx *cx)
{
    tg_free(cx->ref.p);
    tg_free(cx->moved_out.p);
    for (int k = 0; k < TG_MAX_INPUTS; k++) {
        tg_free(cx->in_tmp[k].p);
        tg_free(cx->moved[k].p);
    }
    tg_free(cx->after_tmp);
    tg_free(cx->rows);
    tg_free(cx->has_row);
}

tg_status tg_verify_build_report(tg_session *s, tg_verify *v, tg_verify_report *r)
{
    const tg_program *p = s->program;
    check_ctx cx = {.s = s, .v = v, .r = r};
    cx.single = p->micro_batches == 1 && p->iterations == 1 && s->global_replicas == 1;
    /* scaling.c kept whether replica 0 skipped this update */
    cx.skipped = p->training && tg_scaling_skipped(s->scaling, 0, v->step);
    r->first_beyond = -1;
    r->summary = (tg_verify_summary){-1, -1, -1, -1};
    tg_ref_plan *plan = NULL;
    cx.rows = tg_calloc((size_t)v->n + 1, sizeof *cx.rows);
    cx.has_row = tg_calloc((size_t)v->n + 1, 1);
    tg_status st = cx.rows && cx.has_row ? tg_ref_plan_create(s->graph, &plan)
                                         : tg_error(TG_ERR_NOMEM, "verify: out of memory");
    if (st == TG_OK)
        cx.reference = reference_fits(plan, r);
    int cap = 0;
    for (int m = 0; st == TG_OK && m < v->n_mb; m++)
        st = check_mb(&cx, plan, m, &cap);
    if (st == TG_OK)
        describe_limits(&cx, r);
    tg_ref_plan_destroy(plan);
    free_ctx(&cx);
    return st;
}
