/* ops/matmul_dnnl.c - MATMUL and LINEAR through oneDNN's matmul primitive,
 * created once per node when the program is compiled (the op table's plan
 * hook, as the convolutions' in conv_dnnl.c) and run by the ops' forward
 * kernels.
 *
 * Operands stay where and as the graph holds them (row-major f32): the
 * transposes are strides of the memory descriptors, so no reorder and no
 * copy is made. Each product is one of:
 *  - rows: op(A) [R, K] times a shared B (LINEAR's x w^T + b, with the bias
 *    in the primitive; MATMUL with only `a` batched and not transposed,
 *    whose batch is just more rows; 2-D products);
 *  - batched: [batch, M, K] x [batch, K, N] (attention's q k^T and p v and
 *    their gradients, 4-D [B, heads, S, d] seen as 3-D), with a 2-D operand
 *    broadcast over the batch;
 *  - summed: the gradient of a shared operand, sum over the batch of
 *    A_i^T B_i (LINEAR's weight gradient over [B, S, in]), which is one
 *    product with inner dimension batch * K, since the A_i and the B_i lie
 *    one after the other.
 * Other summed products (a transpose on the other side) stay on OpenBLAS,
 * and so do the 2-D products by the rule in tg_matmul_dnnl_plan, unless
 * TG_KERNELS=dnnl forces oneDNN wherever it has the form.
 *
 * Threads: with T > 1 threads per device, the product is cut into T equal
 * parts (rows of C, or batch elements), each a one-thread primitive run on
 * the device's own pool with its own scratchpad, as the convolutions do: no
 * OpenMP team exists and whichever thread is free takes the next part.
 * A shape that T does not divide runs whole on the calling thread's team.
 *
 * bf16: with the precision's bf16 compute the primitive is made with
 * oneDNN's bf16 math mode, which lets it multiply in bf16 where the CPU
 * has bf16 instructions (AVX512_BF16, AMX); the operands stay f32. On AVX2
 * (no bf16 arithmetic; oneDNN 2.6 has no bf16 matmul there at all) the
 * product is f32, which the kernel name says.
 */
#include "ops/matmul_dnnl.h"
#include "ops/dnnl_util.h"
#include "ops/matmul_geom.h"

#include "core/alloc.h"

#include <stdio.h>
#include <string.h>

typedef struct mm_state {
    dnnl_primitive_t prim; /* one part's product */
    dnnl_memory_desc_t a_md, b_md, c_md, bias_md, scratch_md;
    int parts;
    int team;                       /* threads the whole product was made for (parts: 1) */
    int64_t a_step, b_step, c_step; /* floats from one part's operand to the next's */
    size_t sp_bytes;                /* one part's scratchpad (aligned) */
    bool bias;
} mm_state;

/* One part's operands as oneDNN sees them (dims and strides in floats). */
typedef struct mm_layout {
    int nd;
    dnnl_dims_t a, as, b, bs, c, cs;
    int64_t a_step, b_step, c_step;
    int parts;
    bool bias;
} mm_layout;

static int split(int64_t n, int threads)
{
    return threads > 1 && n % threads == 0 ? threads : 1;
}

/* op(A) [R, K] (A row-major with lda, or transposed) times op(B) [K, N],
 * cut by rows into parts. */
static void rows_layout(mm_layout *l, int64_t R, int64_t K, int64_t N, bool ta, int64_t lda,
                        bool tb, int threads)
{
    l->nd = 2;
    l->parts = split(R, threads);
    int64_t r = R / l->parts;
    l->a[0] = r, l->a[1] = K;
    l->as[0] = ta ? 1 : lda, l->as[1] = ta ? lda : 1;
    l->a_step = ta ? r : r * lda;
    l->b[0] = K, l->b[1] = N;
    l->bs[0] = tb ? 1 : N, l->bs[1] = tb ? K : 1;
    l->b_step = 0;
    l->c[0] = r, l->c[1] = N;
    l->cs[0] = N, l->cs[1] = 1;
    l->c_step = r * N;
}

/* The layout of node's product, false when this kernel does not take it. */
static bool layout_of(const tg_tensor *node, int threads, mm_layout *l)
{
    memset(l, 0, sizeof *l);
    if (node->op == TG_OP_LINEAR) {
        const tg_tensor *w = node->in[1];
        int64_t N = w->shape.dim[0], K = w->shape.dim[1];
        if (N == 0 || K == 0 || tg_numel(node) == 0)
            return false;
        rows_layout(l, tg_numel(node) / N, K, N, false, K, true, threads);
        l->bias = node->n_in == 3;
        return true;
    }
    tg_mm_dims d = tg_mm_dims_of(node);
    if (d.M == 0 || d.N == 0 || d.K == 0 || d.batch == 0)
        return false;
    if (d.sum) {
        if (!d.ta || d.tb)
            return false;
        /* sum_i A_i^T B_i = [A_0; A_1; ...]^T [B_0; B_1; ...] */
        rows_layout(l, d.M, d.batch * d.K, d.N, true, d.M, false, threads);
        return true;
    }
    if (!d.b_batched && !d.ta) {
        rows_layout(l, d.batch * d.M, d.K, d.N, false, d.K, d.tb, threads);
        return true;
    }
    if (!d.a_batched && !d.b_batched) {
        rows_layout(l, d.M, d.K, d.N, d.ta, d.M, d.tb, threads);
        return true;
    }
    l->nd = 3;
    l->parts = split(d.batch, threads);
    int64_t bp = d.batch / l->parts;
    l->a[0] = d.a_batched ? bp : 1, l->a[1] = d.M, l->a[2] = d.K;
    l->as[0] = d.M * d.K, l->as[1] = d.ta ? 1 : d.K, l->as[2] = d.ta ? d.M : 1;
    l->a_step = d.a_batched ? bp * d.M * d.K : 0;
    l->b[0] = d.b_batched ? bp : 1, l->b[1] = d.K, l->b[2] = d.N;
    l->bs[0] = d.K * d.N, l->bs[1] = d.tb ? 1 : d.N, l->bs[2] = d.tb ? d.K : 1;
    l->b_step = d.b_batched ? bp * d.K * d.N : 0;
    l->c[0] = bp, l->c[1] = d.M, l->c[2] = d.N;
    l->cs[0] = d.M * d.N, l->cs[1] = d.N, l->cs[2] = 1;
    l->c_step = bp * d.M * d.N;
    return true;
}

static size_t align64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* The primitive of one part, with the user-managed scratchpad and, for bf16
 * compute, oneDNN's bf16 math mode; *impl names the implementation. */
static dnnl_status_t make_primitive(mm_state *st, const mm_layout *l, bool bf16, int team,
                                    const char **impl)
{
    tg_status ts;
    dnnl_engine_t eng = tg_dnnl_engine(&ts);
    if (!eng)
        return dnnl_runtime_error;
    dnnl_status_t s = dnnl_memory_desc_init_by_strides(&st->a_md, l->nd, l->a, dnnl_f32, l->as);
    if (s == dnnl_success)
        s = dnnl_memory_desc_init_by_strides(&st->b_md, l->nd, l->b, dnnl_f32, l->bs);
    if (s == dnnl_success)
        s = dnnl_memory_desc_init_by_strides(&st->c_md, l->nd, l->c, dnnl_f32, l->cs);
    if (s == dnnl_success && l->bias) {
        dnnl_dims_t bd = {1, l->c[1]};
        s = dnnl_memory_desc_init_by_tag(&st->bias_md, 2, bd, dnnl_f32, dnnl_ab);
    }
    dnnl_matmul_desc_t d;
    if (s == dnnl_success)
        s = dnnl_matmul_desc_init(&d, &st->a_md, &st->b_md, l->bias ? &st->bias_md : NULL,
                                  &st->c_md);
    if (s != dnnl_success)
        return s;
    dnnl_primitive_attr_t attr;
    s = dnnl_primitive_attr_create(&attr);
    if (s != dnnl_success)
        return s;
    s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (s == dnnl_success && bf16)
        s = dnnl_primitive_attr_set_fpmath_mode(attr, dnnl_fpmath_mode_bf16);
    dnnl_primitive_desc_t pd = NULL;
    /* the implementation and its scratchpad depend on the team size */
    tg_dnnl_threads(team);
    if (s == dnnl_success)
        s = dnnl_primitive_desc_create(&pd, &d, attr, eng, NULL);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success)
        return s;
    st->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, impl);
    s = dnnl_primitive_create(&st->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    return s;
}

/* Whether oneDNN's bf16 arithmetic exists on this CPU (AVX512_BF16, AMX). */
static bool native_bf16(void)
{
    return tg_dnnl_isa() >= dnnl_cpu_isa_avx512_core_bf16;
}

tg_status tg_matmul_dnnl_plan(const tg_tensor *node, const tg_plan_opts *opts, tg_kernel_plan *plan)
{
    const char *own = "own OpenBLAS sgemm";
    tg_dnnl_mode mode = tg_dnnl_mode_get();
    if (mode == TG_DNNL_NEVER) {
        snprintf(plan->kernel, sizeof plan->kernel, "%s", own);
        return TG_OK;
    }
    /* operands stored in half precision arrive staged through f32 (the
     * plan does not set native_storage); blocked ones never reach a
     * product (the layout pass keeps an op it does not know plain) */
    bool blocked = opts->out_blocked;
    for (int k = 0; k < node->n_in; k++)
        blocked |= opts->in_blocked[k];
    mm_layout l;
    if (blocked || !layout_of(node, opts->n_threads, &l)) {
        snprintf(plan->kernel, sizeof plan->kernel, "%s (no oneDNN form)", own);
        return TG_OK;
    }
    /* The rule (TG_DNNL_AUTO): oneDNN for the batched products, OpenBLAS
     * for the 2-D ones, unless bf16 arithmetic is asked for and the CPU has
     * it. Measured by bench_matmul (best of alternating runs, 1 thread, on
     * the shared 2-core AVX2 machine, oneDNN's gemm:jit / OpenBLAS):
     * attention's batched 128x128x64 and 128x64x128 products 1.03-1.64,
     * BERT's 2-D ones 0.82-1.04 (the 1024x3072x768 feed-forward 0.82-0.83). */
    bool bf16 = opts->compute == TG_BF16;
    if (mode == TG_DNNL_AUTO && l.nd == 2 && !(bf16 && native_bf16())) {
        snprintf(plan->kernel, sizeof plan->kernel, "%s", own);
        return TG_OK;
    }
    /* a product the threads cannot split runs on an OpenMP team, whose idle
     * threads spin against the device's pool unless they sleep (as for the
     * convolutions, dnnl_util.h) */
    if (mode == TG_DNNL_AUTO && l.parts == 1 && opts->n_threads > 1 && !tg_dnnl_passive_wait()) {
        snprintf(plan->kernel, sizeof plan->kernel,
                 "%s (oneDNN with several threads needs OMP_WAIT_POLICY=passive)", own);
        return TG_OK;
    }
    mm_state *st = tg_calloc(1, sizeof *st);
    if (!st)
        return tg_error(TG_ERR_NOMEM, "out of memory planning its oneDNN matmul");
    st->parts = l.parts;
    st->a_step = l.a_step, st->b_step = l.b_step, st->c_step = l.c_step;
    st->bias = l.bias;
    const char *impl = "?";
    int team = l.parts > 1 ? 1 : opts->n_threads;
    st->team = team;
    dnnl_status_t s = make_primitive(st, &l, bf16, team, &impl);
    if (s != dnnl_success) {
        tg_matmul_dnnl_free(st);
        if (s == dnnl_unimplemented) {
            snprintf(plan->kernel, sizeof plan->kernel, "%s (no oneDNN implementation)", own);
            return TG_OK;
        }
        return tg_dnnl_check(s, "creating its oneDNN matmul");
    }
    st->sp_bytes = align64(dnnl_memory_desc_get_size(&st->scratch_md));
    plan->state = st;
    plan->scratch = st->sp_bytes * (size_t)st->parts;
    snprintf(plan->kernel, sizeof plan->kernel, "oneDNN matmul %s%s%s", impl,
             bf16 && native_bf16() ? " (bf16 math)"
             : bf16                ? " (f32: no bf16 arithmetic on this CPU)"
                                   : "",
             st->parts > 1 ? ", parts per thread" : "");
    return TG_OK;
}

void tg_matmul_dnnl_free(void *state)
{
    mm_state *st = state;
    if (!st)
        return;
    if (st->prim)
        dnnl_primitive_destroy(st->prim);
    tg_free(st);
}

#define RUN_WHAT "running a matmul primitive"

static dnnl_memory_t mem(const dnnl_memory_desc_t *md, void *ptr)
{
    return tg_dnnl_memory(md, ptr, RUN_WHAT);
}

/* Part p of the product, with part p's scratchpad. */
static void run_part(const mm_state *st, const tg_kernel_args *a, int p)
{
    tg_status ts;
    dnnl_engine_t eng = tg_dnnl_engine(&ts);
    dnnl_stream_t stream = NULL;
    dnnl_status_t s = dnnl_stream_create(&stream, eng, dnnl_stream_default_flags);
    if (s != dnnl_success)
        tg_dnnl_run_failed(s, RUN_WHAT);
    dnnl_exec_arg_t args[5];
    int n = 0;
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, mem(&st->a_md, (float *)a->in[0] + p * st->a_step)};
    args[n++] =
        (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, mem(&st->b_md, (float *)a->in[1] + p * st->b_step)};
    if (st->bias)
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, mem(&st->bias_md, a->in[2])};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DST, mem(&st->c_md, (float *)a->out + p * st->c_step)};
    dnnl_memory_t sp =
        st->sp_bytes ? mem(&st->scratch_md, (unsigned char *)a->scratch + p * st->sp_bytes) : NULL;
    if (sp)
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, sp};
    s = dnnl_primitive_execute(st->prim, stream, n, args);
    if (s == dnnl_success)
        s = dnnl_stream_wait(stream);
    if (s != dnnl_success)
        tg_dnnl_run_failed(s, RUN_WHAT);
    for (int k = 0; k < n; k++)
        dnnl_memory_destroy(args[k].memory);
    dnnl_stream_destroy(stream);
}

typedef struct parts_job {
    const mm_state *st;
    const tg_kernel_args *a;
} parts_job;

static void parts_loop(void *ctx, int64_t begin, int64_t end, int t)
{
    const parts_job *j = ctx;
    (void)t;
    tg_dnnl_threads(1);
    for (int64_t p = begin; p < end; p++)
        run_part(j->st, j->a, (int)p);
}

void tg_matmul_dnnl_run(const void *state, const tg_kernel_args *a)
{
    const mm_state *st = state;
    if (st->parts > 1) {
        parts_job j = {st, a};
        tg_pool_for(a->pool, st->parts, parts_loop, &j);
        return;
    }
    int team = a->pool ? tg_pool_threads(a->pool) : 1;
    team = team < st->team ? team : st->team;
    if (team > 1)
        tg_pool_rest(a->pool); /* its spinning workers would take the team's cores */
    tg_dnnl_threads(team);
    run_part(st, a, 0);
}

const tg_op_planner tg_matmul_planner = {tg_matmul_dnnl_plan, tg_matmul_dnnl_free};
