/* backend/cpu/conv_dnnl_run.c - running a node's oneDNN convolution as
 * conv_dnnl.c planned it: the operands converted from bf16 storage and
 * reordered into the primitive's layouts, the batch in parts over the
 * device's pool, the shared weights and the summed weight gradient in
 * slices, the output reordered (and converted) back. conv_dnnl.c's header
 * comment says why each of these is so. */
#include "ops/conv.h"
#include "backend/cpu/conv_dnnl_state.h"

#include "core/alloc.h"
#include "core/convert.h"
#include "core/process.h"
#include "ops/norm.h"

#include <fenv.h>
#include <math.h>

#include <string.h>

#define RUN_WHAT "running a conv2d primitive"

/* A memory object over ptr (none for an empty descriptor). */
static dnnl_memory_t mem(const dnnl_memory_desc_t *md, void *ptr)
{
    return tg_dnnl_memory(md, ptr, RUN_WHAT);
}

static void exec(dnnl_primitive_t prim, dnnl_stream_t stream, int n, const dnnl_exec_arg_t *args)
{
    dnnl_status_t s = dnnl_primitive_execute(prim, stream, n, args);
    if (s == dnnl_success)
        s = dnnl_stream_wait(stream);
    if (s != dnnl_success)
        tg_dnnl_run_failed(s, RUN_WHAT);
}

/* The convolution itself: with a fast ReLU (conv_dnnl.c's fast_relu),
 * that first, on this thread's cleared invalid flag, and the exact
 * primitive again over the same operands where the flag went up (a NaN met
 * the max, or an inf - inf made one); the thread's flag as it was after. */
static void exec_conv(const conv_state *st, dnnl_stream_t stream, int n,
                      const dnnl_exec_arg_t *args)
{
    if (!st->fast) {
        exec(st->prim, stream, n, args);
        return;
    }
    fexcept_t saved;
    fegetexceptflag(&saved, FE_INVALID);
    feclearexcept(FE_INVALID);
    exec(st->fast, stream, n, args);
    bool nan_met = fetestexcept(FE_INVALID) != 0;
    fesetexceptflag(&saved, FE_INVALID);
    if (nan_met)
        exec(st->prim, stream, n, args);
}

/* Reorder role k between user_side (the stored tensor, or its f32 copy)
 * and its inner copy, with the reorder scratchpad of `scratch`. */
static void run_reorder(const conv_state *st, int k, dnnl_stream_t stream, void *user_side,
                        void *inner_side, unsigned char *scratch)
{
    bool out = k == st->n_args - 1;
    dnnl_memory_t user = mem(tg_conv_reorder_user(st, k), user_side);
    dnnl_memory_t inner = mem(&st->inner[k], inner_side);
    dnnl_memory_t rs = mem(&st->reorder_scratch_md[k], scratch + st->reorder_scratch_off);
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_FROM, out ? inner : user},
                               {DNNL_ARG_TO, out ? user : inner},
                               {DNNL_ARG_SCRATCHPAD, rs}};
    exec(st->reorder[k], stream, rs ? 3 : 2, args);
    if (rs)
        dnnl_memory_destroy(rs);
    dnnl_memory_destroy(user);
    dnnl_memory_destroy(inner);
}

/* Role k's f32 copy in the stored layout (converted roles): before the
 * reorder into the primitive's layout, after the one out of it, or the
 * primitive's operand itself where no reorder is needed. */
static unsigned char *copy_ptr(const conv_state *st, int k, unsigned char *scratch)
{
    return scratch + (st->reorder[k] ? st->copy_off[k] : st->buf_off[k]);
}

/* Whether role k has a buffer of its own in scratch for the primitive. */
static bool has_inner(const conv_state *st, int k)
{
    return st->reorder[k] || st->convert[k];
}

/* Input role k (stored at user) into the primitive's buffer in scratch:
 * converted from bf16, reordered, or both. */
static void bring_in(const conv_state *st, int k, dnnl_stream_t stream, const void *user,
                     unsigned char *scratch)
{
    if (st->convert[k])
        tg_convert(user, TG_BF16, copy_ptr(st, k, scratch), TG_F32, st->span[k]);
    if (st->reorder[k])
        run_reorder(st, k, stream, st->convert[k] ? copy_ptr(st, k, scratch) : (void *)user,
                    scratch + st->buf_off[k], scratch);
}

/* A cropped weight gradient's f32 copy zeroed before it is written: its
 * dead taps lie between the live ones and are converted with them. */
static void zero_dead_taps(const conv_state *st, int k, unsigned char *scratch)
{
    if (st->convert[k] && st->cropped && k == st->weight_role)
        memset(copy_ptr(st, k, scratch), 0, st->span[k] * sizeof(float));
}

/* The output role k from the primitive's buffer in scratch to user:
 * reordered, converted to bf16, or both. */
static void send_out(const conv_state *st, int k, dnnl_stream_t stream, void *user,
                     unsigned char *scratch)
{
    if (st->reorder[k])
        run_reorder(st, k, stream, st->convert[k] ? copy_ptr(st, k, scratch) : user,
                    scratch + st->buf_off[k], scratch);
    if (st->convert[k])
        tg_convert(copy_ptr(st, k, scratch), TG_F32, user, TG_BF16, st->span[k]);
}

/* Role k's user memory for part p: batch roles start at the part's first
 * sample, the weights (or their gradient) at the first live tap. */
static unsigned char *user_ptr(const conv_state *st, const tg_kernel_args *a, int k, int p)
{
    unsigned char *ptr = k == st->n_args - 1 ? a->out : a->in[k];
    if (k == st->weight_role)
        ptr += st->weight_offset * st->elem[k];
    return ptr + (size_t)p * st->batch_step[k];
}

/* An input every part reads in the primitive's layout (the weights, with
 * batch parts): converted once, into part 0's buffer, before the parts run. */
static bool shared_input(const conv_state *st, int k)
{
    return st->parts > 1 && k < st->n_args - 1 && st->batch_step[k] == 0 && st->reorder[k];
}

static dnnl_stream_t new_stream(dnnl_engine_t eng)
{
    dnnl_stream_t stream = NULL;
    dnnl_status_t s = dnnl_stream_create(&stream, eng, dnnl_stream_default_flags);
    if (s != dnnl_success)
        tg_dnnl_run_failed(s, RUN_WHAT);
    return stream;
}

/* Reorder role k of part 0 on the calling thread: a shared input into the
 * primitive's layout, or the summed weight gradient out of it. */
static void reorder_part0(const conv_state *st, const tg_kernel_args *a, int k)
{
    tg_status ts;
    dnnl_engine_t eng = tg_dnnl_engine(&ts);
    dnnl_stream_t stream = new_stream(eng);
    if (k < st->n_args - 1)
        bring_in(st, k, stream, user_ptr(st, a, k, 0), a->scratch);
    else
        send_out(st, k, stream, user_ptr(st, a, k, 0), a->scratch);
    dnnl_stream_destroy(stream);
}

/* The primitive over part p of the batch (the whole of it without parts),
 * with scratch region `region` (the part's, or its thread's): inputs
 * reordered in, the output reordered out unless the parts' weight
 * gradients are summed first. */
static void run_part(const conv_state *st, const tg_kernel_args *a, int p, int region, void *kept)
{
    tg_status ts;
    dnnl_engine_t eng = tg_dnnl_engine(&ts);
    dnnl_stream_t stream = new_stream(eng);
    /* no scratch at all when nothing is reordered (NULL + 0 is undefined) */
    unsigned char *scratch =
        a->scratch ? (unsigned char *)a->scratch + (size_t)region * st->part_bytes : NULL;
    dnnl_memory_t operand[4] = {0}, residual = NULL;
    dnnl_exec_arg_t args[6];
    int n = 0;
    int o = st->n_args - 1;
    for (int k = 0; k < st->n_args; k++) {
        bool from_cache = kept && k == st->weight_role;
        bool folded_bias = st->fold && k == 2;
        bool shared = shared_input(st, k);
        unsigned char *user = user_ptr(st, a, k, p);
        if (k < o && !shared && !from_cache && !folded_bias)
            bring_in(st, k, stream, user, scratch);
        unsigned char *base = shared ? (unsigned char *)a->scratch : scratch;
        unsigned char *kept_at = (unsigned char *)kept;
        operand[k] = from_cache ? mem(&st->inner[k], kept_at + st->kept_offset + p * st->kept_step)
                     : folded_bias
                         ? mem(&st->user[k], kept_at + st->kept_bias_off + p * st->batch_step[k])
                     : has_inner(st, k) ? mem(&st->inner[k], base + st->buf_off[k])
                                        : mem(&st->user[k], user);
        args[n].arg = st->arg[k];
        args[n++].memory = operand[k];
    }
    if (st->post_add) { /* the part's residual: where the part's output lies */
        residual = mem(&st->user[o],
                       (unsigned char *)a->in[TG_FUSE_IN_RESIDUAL] + (size_t)p * st->batch_step[o]);
        args[n].arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(st->residual_po) | DNNL_ARG_SRC_1;
        args[n++].memory = residual;
    }
    dnnl_memory_t sp = mem(&st->scratch_md, scratch);
    if (sp) {
        args[n].arg = DNNL_ARG_SCRATCHPAD;
        args[n++].memory = sp;
    }
    if (!st->sum_out)
        zero_dead_taps(st, o, scratch);
    exec_conv(st, stream, n, args);
    if (!st->sum_out)
        send_out(st, o, stream, user_ptr(st, a, o, p), scratch);
    if (sp)
        dnnl_memory_destroy(sp);
    for (int k = 0; k < st->n_args; k++)
        dnnl_memory_destroy(operand[k]);
    if (residual)
        dnnl_memory_destroy(residual);
    dnnl_stream_destroy(stream);
}

typedef struct parts_job {
    const conv_state *st;
    const tg_kernel_args *a;
    bool out;   /* slices_loop: the output's slices, else the shared inputs' */
    void *kept; /* the weights from the cache, or NULL */
    /* the Winograd state to try first (conv_state.wino) with its kept
     * weights, where they are finite; else NULL */
    const conv_state *wino;
    void *kept_wino;
} parts_job;

/* Part p as the Winograd state computes it where that is exact, else as
 * the direct one (conv_dnnl.c's add_winograd): the part's input scanned
 * for a NaN or an infinity (one read of it, against 9 C multiply-adds per
 * input element), then the Winograd primitive on this thread's cleared
 * overflow and invalid flags (an overflow in its transforms), the direct
 * primitive over the same operands where either went up; the thread's
 * flags as they were after. */
static void run_checked(const parts_job *j, int p, int region)
{
    const conv_state *st = j->st;
    const tg_kernel_args *a = j->a;
    if (!j->wino ||
        tg_first_nonfinite(user_ptr(st, a, 0, p), TG_F32,
                           dnnl_memory_desc_get_size(&st->user[0]) / sizeof(float)) >= 0) {
        run_part(st, a, p, region, j->kept);
        return;
    }
    fexcept_t saved;
    fegetexceptflag(&saved, FE_INVALID | FE_OVERFLOW);
    feclearexcept(FE_INVALID | FE_OVERFLOW);
    run_part(j->wino, a, p, region, j->kept_wino);
    bool inexact = fetestexcept(FE_INVALID | FE_OVERFLOW) != 0;
    fesetexceptflag(&saved, FE_INVALID | FE_OVERFLOW);
    if (inexact)
        run_part(st, a, p, region, j->kept);
}

/* Slice p of role k's reorder, with part p's reorder scratchpad. */
static void run_slice(const conv_state *st, const tg_kernel_args *a, int k, int p)
{
    tg_status ts;
    dnnl_engine_t eng = tg_dnnl_engine(&ts);
    dnnl_stream_t stream = new_stream(eng);
    const reorder_slice *sl = &st->slices[k][p];
    unsigned char *scratch = a->scratch;
    unsigned char *rs_ptr = scratch + (size_t)p * st->part_bytes + st->reorder_scratch_off;
    /* a converted role's slices are of its f32 copy, converted as a whole */
    void *user_side = st->convert[k] ? copy_ptr(st, k, scratch) : user_ptr(st, a, k, 0);
    dnnl_memory_t user = mem(&sl->user, user_side);
    dnnl_memory_t inner = mem(&sl->inner, scratch + st->buf_off[k]);
    dnnl_memory_t rs = mem(&sl->scratch_md, rs_ptr);
    bool out = k == st->n_args - 1;
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_FROM, out ? inner : user},
                               {DNNL_ARG_TO, out ? user : inner},
                               {DNNL_ARG_SCRATCHPAD, rs}};
    exec(sl->prim, stream, rs ? 3 : 2, args);
    if (rs)
        dnnl_memory_destroy(rs);
    dnnl_memory_destroy(user);
    dnnl_memory_destroy(inner);
    dnnl_stream_destroy(stream);
}

/* Pool loop over slices: those of the shared inputs, or of the output. */
static void slices_loop(void *ctx, int64_t begin, int64_t end, int part)
{
    const parts_job *j = ctx;
    const conv_state *st = j->st;
    (void)part;
    tg_dnnl_threads(1);
    for (int64_t p = begin; p < end; p++)
        for (int k = 0; k < st->n_args; k++)
            if (st->slices[k] && (k == st->n_args - 1) == j->out &&
                !(j->kept && k == st->weight_role))
                run_slice(st, j->a, k, (int)p);
}

/* Pool loop over parts: each runs on one OpenMP thread, the thread's own. */
static void parts_loop(void *ctx, int64_t begin, int64_t end, int part)
{
    const parts_job *j = ctx;
    tg_dnnl_threads(1);
    for (int64_t p = begin; p < end; p++)
        run_checked(j, (int)p, j->st->regions ? part : (int)p);
}

/* Pool loop over floats of the weight gradient: parts 1.. added to part 0. */
static void sum_loop(void *ctx, int64_t begin, int64_t end, int part)
{
    const parts_job *j = ctx;
    const conv_state *st = j->st;
    (void)part;
    size_t off = st->buf_off[st->n_args - 1];
    float *dst = (float *)((unsigned char *)j->a->scratch + off);
    for (int p = 1; p < st->parts; p++) {
        const float *src = (const float *)((const unsigned char *)j->a->scratch +
                                           (size_t)p * st->part_bytes + off);
        for (int64_t i = begin; i < end; i++)
            dst[i] += src[i];
    }
}

/* The batch in parts over the device's pool: whichever thread is free takes
 * the next part, so a thread the OS holds back delays nothing but itself. */
static void run_parts(const conv_state *st, const tg_kernel_args *a, parts_job j)
{
    tg_dnnl_threads(1);
    bool sliced = false;
    unsigned char *scratch = a->scratch;
    for (int k = 0; k < st->n_args - 1; k++) {
        if (j.kept && k == st->weight_role)
            continue;
        if (shared_input(st, k) && !st->slices[k])
            reorder_part0(st, a, k);
        if (shared_input(st, k) && st->slices[k] && st->convert[k])
            tg_convert(user_ptr(st, a, k, 0), TG_BF16, copy_ptr(st, k, scratch), TG_F32,
                       st->span[k]);
        sliced = sliced || (shared_input(st, k) && st->slices[k]);
    }
    if (sliced)
        tg_pool_for(a->pool, st->parts, slices_loop, &j);
    tg_pool_for(a->pool, st->parts, parts_loop, &j);
    if (!st->sum_out)
        return;
    int o = st->n_args - 1;
    int64_t floats = (int64_t)(dnnl_memory_desc_get_size(&st->inner[o]) / sizeof(float));
    tg_pool_for(a->pool, floats, sum_loop, &j);
    j.out = true;
    zero_dead_taps(st, o, scratch);
    if (st->slices[o]) {
        tg_pool_for(a->pool, st->parts, slices_loop, &j);
        if (st->convert[o])
            tg_convert(copy_ptr(st, o, scratch), TG_F32, user_ptr(st, a, o, 0), TG_BF16,
                       st->span[o]);
    } else {
        reorder_part0(st, a, o);
    }
}

/* Copies of the weights in the cache: one per part of the output channels,
 * else one that every part reads. */
static int kept_copies(const conv_state *st)
{
    return st->split_k ? st->parts : 1;
}

/* A fused convolution's weights and bias with the batch norm folded in
 * (compile/fuse.c): weights scaled by gamma / sqrt(var + eps) per output
 * channel, bias (b - mean) * scale + beta, in double and rounded once, then
 * reordered into the cache like the plain weights. */
static void fold_into(const conv_state *st, const tg_kernel_args *a, unsigned char *kept)
{
    const tg_tensor *bn = st->fold;
    int k = st->weight_role;
    /* a part of the channels (chan_run) reads the statistics from its first
     * channel on: the variances stay the node's channels further */
    int64_t K = st->k_out, K_all = a->node->shape.dim[1];
    size_t per = st->weight_bytes / sizeof(float) / (size_t)K;
    const float *w = a->in[1], *b = a->node->n_in == 3 ? a->in[2] : NULL;
    const float *stats = a->in[TG_FUSE_IN_STATS], *gamma = a->in[TG_FUSE_IN_STATS + 1],
                *beta = a->in[TG_FUSE_IN_STATS + 2];
    float *folded = st->reorder[k] ? tg_malloc_aligned(st->weight_bytes) : (float *)kept;
    if (!folded)
        tg_dnnl_run_failed(dnnl_out_of_memory, "folding a batch norm into a conv2d");
    float *bias = (float *)(kept + st->kept_bias_off);
    for (int64_t c = 0; c < K; c++) {
        tg_norm_fold f = tg_norm_fold_channel(bn, stats, K_all, gamma, beta, c, b ? b[c] : 0.0);
        for (size_t i = 0; i < per; i++)
            folded[(size_t)c * per + i] = (float)(w[(size_t)c * per + i] * f.scale);
        bias[c] = (float)f.shift;
    }
    if (!st->reorder[k])
        return;
    tg_status ts;
    dnnl_stream_t stream = new_stream(tg_dnnl_engine(&ts));
    for (int p = 0; p < kept_copies(st); p++) /* f32: elem[k] is 4 */
        run_reorder(st, k, stream,
                    (unsigned char *)(folded + st->weight_offset) + p * st->batch_step[k],
                    kept + p * st->kept_step, a->scratch);
    dnnl_stream_destroy(stream);
    tg_free(folded);
}

/* Fills kept with the weights in the primitive's layout: reordered,
 * converted or folded from the node's. */
static void fill_kept(const conv_state *st, const tg_kernel_args *a, void *kept)
{
    int k = st->weight_role;
    if (st->fold) {
        fold_into(st, a, kept);
        return;
    }
    if (!st->reorder[k]) { /* converted only: the f32 copy is the operand */
        tg_convert(user_ptr(st, a, k, 0), TG_BF16, kept, TG_F32,
                   st->span[k] * (size_t)kept_copies(st));
        return;
    }
    tg_status ts;
    dnnl_stream_t stream = new_stream(tg_dnnl_engine(&ts));
    for (int p = 0; p < kept_copies(st); p++) {
        void *user = user_ptr(st, a, k, p);
        if (st->convert[k])
            tg_convert(user, TG_BF16, copy_ptr(st, k, a->scratch), TG_F32, st->span[k]);
        run_reorder(st, k, stream, st->convert[k] ? copy_ptr(st, k, a->scratch) : user,
                    (unsigned char *)kept + p * st->kept_step, a->scratch);
    }
    dnnl_stream_destroy(stream);
    return;
}

/* Whether the Winograd state's kept weights (and the bias it adds) are all
 * finite: a NaN or an infinity in the weights, or an overflow in their
 * transform, sends every run of this version to the direct state. */
static int kept_finite(const conv_state *st, const tg_kernel_args *a, const void *kept)
{
    size_t n = dnnl_memory_desc_get_size(&st->inner[st->weight_role]) / sizeof(float);
    if (tg_first_nonfinite(kept, TG_F32, n) >= 0)
        return 0;
    const void *bias = st->fold             ? (const unsigned char *)kept + st->kept_bias_off
                       : a->node->n_in == 3 ? a->in[2]
                                            : NULL;
    return !bias || tg_first_nonfinite(bias, TG_F32, (size_t)st->k_out) < 0;
}

/* The weights in the primitive's layout from the node's cache (conv_dnnl.c's
 * keep_weights), reordered (or converted, or folded) into it first if the
 * host wrote them since; NULL without a cache or a weights version. */
static void *kept_weights(const conv_state *st, const tg_kernel_args *a)
{
    int k = st->weight_role;
    bool fill;
    uint64_t version = a->weights_version;
    if (st->fold && !version) /* no version (a test's call): fold afresh */
        version = tg_process_next_weights_version();
    void *kept = st->cache ? tg_weight_cache_get(st->cache, a->in[k], version, &fill) : NULL;
    if (!kept && st->fold)
        tg_dnnl_run_failed(dnnl_out_of_memory, "keeping a conv2d's folded weights");
    if (!kept || !fill)
        return kept;
    if (st->finite_off) /* the Winograd state's: its padding zero, not stale */
        memset(kept, 0, st->finite_off);
    fill_kept(st, a, kept);
    if (st->finite_off)
        *(int *)((unsigned char *)kept + st->finite_off) = kept_finite(st, a, kept);
    return kept;
}
/* Part p of the output channels (conv_dnnl.c's chan_parts) on the calling
 * thread: its own state over the node's operands from its first channel
 * on (the batch norm's statistics, gamma and beta too), its own scratch. */
static void chan_run(const conv_state *st, const tg_kernel_args *a, int p)
{
    const conv_chan_part *cp = &st->chan[p];
    tg_kernel_args pa = *a;
    pa.pool = NULL;
    pa.scratch = a->scratch ? (unsigned char *)a->scratch + cp->scratch_off : NULL;
    pa.scratch_bytes = cp->scratch_bytes;
    for (int k = 0; k < 3; k++)
        if (pa.in[k])
            pa.in[k] = (unsigned char *)pa.in[k] + cp->in_off[k];
    for (int k = TG_FUSE_IN_STATS; k < TG_FUSE_IN_STATS + 3 && cp->st->fold; k++)
        if (pa.in[k])
            pa.in[k] = (float *)pa.in[k] + cp->k0;
    pa.out = (unsigned char *)a->out + cp->out_off;
    /* a fused residual is stored as the output is: the part's channels of it */
    if (pa.in[TG_FUSE_IN_RESIDUAL])
        pa.in[TG_FUSE_IN_RESIDUAL] = (unsigned char *)pa.in[TG_FUSE_IN_RESIDUAL] + cp->out_off;
    tg_dnnl_threads(1);
    run_part(cp->st, &pa, 0, 0, kept_weights(cp->st, &pa));
}

static void chan_loop(void *ctx, int64_t begin, int64_t end, int part)
{
    const parts_job *j = ctx;
    (void)part;
    for (int64_t p = begin; p < end; p++)
        chan_run(j->st, j->a, (int)p);
}

void tg_conv_dnnl_run(const void *state, const tg_kernel_args *a)
{
    const conv_state *st = state;
    if (st->mm) {
        tg_wgrad_mm_run(st->mm, a);
        return;
    }
    if (st->dw) {
        tg_conv_dw_run(st->dw, a);
        return;
    }
    if (st->pw) {
        tg_conv_pw_run(st->pw, a);
        return;
    }
    if (st->chan) {
        parts_job j = {st, a, false, NULL, NULL, NULL};
        tg_pool_for(a->pool, st->n_chan, chan_loop, &j);
        return;
    }
    if (st->cropped && st->weight_role == st->n_args - 1)
        memset(a->out, 0, st->weight_bytes); /* the dead taps' gradient */
    parts_job j = {st, a, false, kept_weights(st, a), NULL, NULL};
    /* the Winograd state where its weights are kept and finite (a test's
     * call without a weights version keeps none: the direct state runs) */
    void *kw = st->wino ? kept_weights(st->wino, a) : NULL;
    if (kw && *(const int *)((const unsigned char *)kw + st->wino->finite_off)) {
        j.wino = st->wino;
        j.kept_wino = kw;
    }
    if (st->parts > 1) {
        run_parts(st, a, j);
        return;
    }
    /* the device's own threads: at most those the primitive was made for */
    int team = a->pool ? tg_pool_threads(a->pool) : 1;
    tg_pool_rest(a->pool); /* its spinning workers would take the team's cores */
    tg_dnnl_threads(team < st->n_threads ? team : st->n_threads);
    run_checked(&j, 0, 0);
}
