/* backend/cpu/matmul_dnnl.c - MATMUL and LINEAR through oneDNN's matmul primitive,
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
 * In an inference program a 2-D product with constant weights whose rows
 * T does not divide (a classifier's at batch 1) is cut by its output
 * columns instead, each part a primitive of its own with its own packed
 * slice of the weights (col_parts). Any other shape that T does not
 * divide runs whole on the calling thread's team.
 *
 * bf16: with the precision's bf16 compute the primitive is made with
 * oneDNN's bf16 math mode, which lets it multiply in bf16 where the CPU
 * has bf16 instructions (AVX512_BF16, AMX); the operands stay f32. On AVX2
 * (no bf16 arithmetic; oneDNN 2.6 has no bf16 matmul there at all) the
 * product is f32, which the kernel name says. An inference program's
 * operands stored in bf16 are read in place on such a CPU (bf16 memory
 * descriptors, plan.native_storage), not staged through f32 copies.
 *
 * Inference: a constant B (a leaf) is packed into the layout the primitive
 * chooses (format any: brgemm's blocked weights) once per weight write,
 * kept in a weight cache (backend/cpu/weight_cache.h), and a product fused with
 * what follows it (compile/fuse_matmul.c) adds the bias from
 * in[TG_FUSE_IN_STATS], applies GELU as an eltwise post-op and adds the
 * residual in[TG_FUSE_IN_STATS + 1] as a binary post-op; in a bf16 program
 * (operands read in place) the bias and residual are read in their stored
 * types and the last value written in bf16.
 */
#include "backend/cpu/matmul_dnnl.h"
#include "backend/cpu/dnnl_util.h"
#include "ops/matmul_geom.h"

#include "core/alloc.h"
#include "core/process.h"
#include "ops/unary.h"
#include "backend/cpu/weight_cache.h"

#include <stdio.h>
#include <string.h>

typedef struct mm_state mm_state;

/* One thread's share of a product cut by its output columns (col_parts):
 * its own primitive over columns [n0, n0 + width) of B, C, the bias and
 * the residual, its packed slice of B, its scratchpad at scratch_off. */
typedef struct mm_col_part {
    mm_state *st;
    int64_t n0;
    size_t scratch_off;
} mm_col_part;

struct mm_state {
    dnnl_primitive_t prim; /* one part's product */
    dnnl_memory_desc_t a_md, b_md, c_md, bias_md, scratch_md;
    int parts;
    int team;                       /* threads the whole product was made for (parts: 1) */
    int64_t a_step, b_step, c_step; /* elements from one part's operand to the next's */
    size_t a_size, b_size, c_size;  /* bytes per element as stored */
    size_t sp_bytes;                /* one part's scratchpad (aligned) */
    int bias_in;                    /* the in[] holding the bias, -1: none */
    /* An inference program's constant B, packed into the primitive's
     * layout (b_md) from the graph's (user_b_md) once per weight write */
    tg_weight_cache *cache;
    dnnl_memory_desc_t user_b_md;
    dnnl_primitive_t pack;
    /* A residual added by a binary post-op (compile/fuse_matmul.c),
     * from in[TG_FUSE_IN_STATS + 1], laid out as C in its stored type
     * (res_md, res_size bytes an element); its post-op index */
    bool residual;
    int residual_po;
    dnnl_memory_desc_t res_md;
    size_t res_size;
    int64_t res_step; /* elements from one part's residual (or mask) to the next's */
    /* A scores product's divisor (a binary div post-op by a scalar) from
     * in[TG_FUSE_IN_STATS], in its stored type; its post-op index */
    bool scale;
    int scale_po;
    dnnl_memory_desc_t scale_md;
    /* Parts of the output columns, a state each (prim NULL here), and what
     * a column is in B as the graph holds it and in the bias */
    mm_col_part *cols;
    int n_cols;
    int64_t b_col;
    size_t bias_size;
};

/* One part's operands as oneDNN sees them (dims and strides in floats). */
typedef struct mm_layout {
    int nd;
    dnnl_dims_t a, as, b, bs, c, cs;
    int64_t a_step, b_step, c_step;
    int parts;
    bool bias;
    bool pack; /* B constant: the primitive picks its layout (format any) */
    /* the operands' types as stored: f32, or bf16 read in place (a bf16
     * program on a CPU with bf16 arithmetic); res_dt a fused residual's */
    dnnl_data_type_t a_dt, b_dt, c_dt, bias_dt, res_dt, scale_dt;
    /* a fused residual's (or attention mask's) dims and strides, and the
     * elements from one part's to the next's */
    dnnl_dims_t r, rs;
    int64_t r_step;
} mm_layout;

/* A column part's width is a multiple of this (brgemm packs B in blocks
 * of 16 columns and more). */
#define TG_MM_COL_BLOCK 16

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

/* Attention's scores, [B, H, M, K] x [B, H, K, N] (both batched, either
 * transposed) as 4-D operands, so that a mask [B or 1, 1, M or 1, N] added
 * by a post-op broadcasts over the heads (the 3-D form's batch B * H
 * cannot say that). Cut into the threads' parts by B, or by H at B = 1. */
static bool scores_layout(const tg_tensor *node, const tg_tensor *mask, bool heads_out, int threads,
                          mm_layout *l)
{
    memset(l, 0, sizeof *l);
    tg_mm_dims d = tg_mm_dims_of(node);
    if (node->op != TG_OP_MATMUL || node->shape.ndim != 4 || d.sum || !d.a_batched ||
        !d.b_batched || d.M == 0 || d.N == 0 || d.K == 0 || d.batch == 0)
        return false;
    int64_t B = node->shape.dim[0], H = node->shape.dim[1], M = d.M, N = d.N, K = d.K;
    int64_t bp = B, hp = H;
    l->nd = 4;
    l->parts = split(B, threads);
    if (l->parts > 1)
        bp = B / l->parts;
    else if (B == 1 && (l->parts = split(H, threads)) > 1)
        hp = H / l->parts;
    int64_t per = bp < B ? bp : hp; /* what one part's step crosses: samples or heads */
    int64_t a_unit = bp < B ? H * M * K : M * K, b_unit = bp < B ? H * K * N : K * N;
    /* heads_out: C written as its transpose [B, M, H, N] (element (b, h,
     * m, n) at ((b M + m) H + h) N + n): a head's part starts N on */
    int64_t c_unit = bp < B ? H * M * N : heads_out ? N : M * N;
    dnnl_dims_t a = {bp, hp, M, K}, as = {H * M * K, M * K, d.ta ? 1 : K, d.ta ? M : 1};
    dnnl_dims_t b = {bp, hp, K, N}, bs = {H * K * N, K * N, d.tb ? 1 : N, d.tb ? K : 1};
    dnnl_dims_t c = {bp, hp, M, N}, cs = {H * M * N, M * N, N, 1};
    if (heads_out)
        cs[1] = N, cs[2] = H * N;
    memcpy(l->a, a, sizeof a), memcpy(l->as, as, sizeof as);
    memcpy(l->b, b, sizeof b), memcpy(l->bs, bs, sizeof bs);
    memcpy(l->c, c, sizeof c), memcpy(l->cs, cs, sizeof cs);
    l->a_step = per * a_unit, l->b_step = per * b_unit, l->c_step = per * c_unit;
    memcpy(l->r, c, sizeof c), memcpy(l->rs, cs, sizeof cs);
    l->r_step = l->c_step;
    if (mask) {
        const int64_t *md = mask->shape.dim;
        if (mask->shape.ndim != 4 || (md[0] != 1 && md[0] != B) || md[1] != 1 ||
            (md[2] != 1 && md[2] != M) || md[3] != N)
            return false;
        dnnl_dims_t r = {md[0] == 1 ? 1 : bp, 1, md[2], N}, rs = {md[2] * N, md[2] * N, N, 1};
        memcpy(l->r, r, sizeof r), memcpy(l->rs, rs, sizeof rs);
        l->r_step = md[0] == 1 || bp == B ? 0 : bp * md[2] * N;
    }
    return true;
}

bool tg_matmul_dnnl_scores(const tg_tensor *node, const tg_tensor *mask, int threads)
{
    mm_layout l;
    return tg_dnnl_mode_get() != TG_DNNL_NEVER && scores_layout(node, mask, false, threads, &l);
}

static size_t align64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* What a fused matmul computes after the product (compile/fuse_matmul.c):
 * the division by a scalar (attention's scores) as a binary div post-op,
 * the activation as an eltwise post-op, then the residual (or the scores'
 * mask, broadcast) as a binary add post-op (the bias is the primitive's
 * own). */
static dnnl_status_t post_ops(mm_state *st, const mm_layout *l, const tg_plan_opts *o,
                              dnnl_primitive_attr_t attr)
{
    if (!o->mm_act && !o->mm_residual && !o->mm_scale)
        return dnnl_success;
    dnnl_post_ops_t po;
    dnnl_status_t s = dnnl_post_ops_create(&po);
    if (s != dnnl_success)
        return s;
    int n = 0;
    if (o->mm_scale) {
        /* x / c as the step divides (not x * (1 / c)): the same f32 value */
        dnnl_dims_t one = {1, 1, 1, 1};
        s = dnnl_memory_desc_init_by_tag(&st->scale_md, l->nd, one, l->scale_dt,
                                         l->nd == 4 ? dnnl_abcd : dnnl_abc);
        if (s == dnnl_success)
            s = dnnl_post_ops_append_binary(po, dnnl_binary_div, &st->scale_md);
        st->scale = true;
        st->scale_po = n++;
    }
    if (s == dnnl_success && o->mm_act) {
        /* GELU only (compile/fuse_matmul.c: oneDNN's ReLU drops NaN) */
        dnnl_alg_kind_t alg =
            tg_gelu_form(o->mm_act) == 0 ? dnnl_eltwise_gelu_erf : dnnl_eltwise_gelu_tanh;
        s = dnnl_post_ops_append_eltwise(po, 1.0f, alg, 0.0f, 0.0f);
        n++;
    }
    if (s == dnnl_success && o->mm_residual)
        s = o->mm_mask
                ? dnnl_memory_desc_init_by_strides(&st->res_md, l->nd, l->r, l->res_dt, l->rs)
                : dnnl_memory_desc_init_by_strides(&st->res_md, l->nd, l->c, l->res_dt, l->cs);
    if (s == dnnl_success && o->mm_residual) {
        s = dnnl_post_ops_append_binary(po, dnnl_binary_add, &st->res_md);
        st->res_size = l->res_dt == dnnl_bf16 ? 2 : 4;
        st->residual = true;
        st->residual_po = n;
        st->res_step = o->mm_mask ? l->r_step : l->c_step;
    }
    if (s == dnnl_success)
        s = dnnl_primitive_attr_set_post_ops(attr, po);
    dnnl_post_ops_destroy(po);
    return s;
}

/* The descriptors of one part's operands; B's as the graph holds it in
 * user_b_md, and in b_md as the primitive will choose (packed) or the same. */
static dnnl_status_t operand_mds(mm_state *st, const mm_layout *l)
{
    dnnl_status_t s = dnnl_memory_desc_init_by_strides(&st->a_md, l->nd, l->a, l->a_dt, l->as);
    if (s == dnnl_success)
        s = dnnl_memory_desc_init_by_strides(&st->user_b_md, l->nd, l->b, l->b_dt, l->bs);
    st->b_md = st->user_b_md;
    if (s == dnnl_success && l->pack)
        s = dnnl_memory_desc_init_by_tag(&st->b_md, l->nd, l->b, l->b_dt, dnnl_format_tag_any);
    if (s == dnnl_success)
        s = dnnl_memory_desc_init_by_strides(&st->c_md, l->nd, l->c, l->c_dt, l->cs);
    if (s == dnnl_success && l->bias) {
        dnnl_dims_t bd = {1, l->c[1]};
        s = dnnl_memory_desc_init_by_tag(&st->bias_md, 2, bd, l->bias_dt, dnnl_ab);
    }
    return s;
}

/* The reorder that packs B into the layout the primitive chose; none when
 * it chose B's own. */
static dnnl_status_t make_pack(mm_state *st, dnnl_primitive_desc_t pd, dnnl_engine_t eng)
{
    st->b_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (dnnl_memory_desc_equal(&st->b_md, &st->user_b_md))
        return dnnl_success;
    dnnl_memory_desc_t sp;
    dnnl_status_t s = tg_dnnl_reorder_create(&st->user_b_md, &st->b_md, eng, NULL, &st->pack, &sp);
    if (s == dnnl_success &&
        !(st->cache = tg_weight_cache_create(align64(dnnl_memory_desc_get_size(&st->b_md)))))
        s = dnnl_out_of_memory;
    return s;
}

/* The primitive of one part, with the user-managed scratchpad and, for bf16
 * compute, oneDNN's bf16 math mode; *impl names the implementation. */
static dnnl_status_t make_primitive(mm_state *st, const mm_layout *l, const tg_plan_opts *o,
                                    int team, const char **impl)
{
    tg_status ts;
    bool bf16 = o->compute == TG_BF16;
    dnnl_engine_t eng = tg_dnnl_engine(&ts);
    if (!eng)
        return dnnl_runtime_error;
    dnnl_matmul_desc_t d;
    dnnl_status_t s = operand_mds(st, l);
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
    if (s == dnnl_success && bf16 && l->a_dt == dnnl_f32)
        s = dnnl_primitive_attr_set_fpmath_mode(attr, dnnl_fpmath_mode_bf16);
    if (s == dnnl_success)
        s = post_ops(st, l, o, attr);
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
    s = l->pack ? make_pack(st, pd, eng) : dnnl_success;
    if (s == dnnl_success)
        s = dnnl_primitive_create(&st->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    return s;
}

/* A state for the product l, one primitive made for `team` threads. */
static dnnl_status_t new_state(const mm_layout *l, const tg_plan_opts *o, bool native, int bias_at,
                               int team, const char **impl, mm_state **out)
{
    mm_state *st = *out = tg_calloc(1, sizeof *st);
    if (!st)
        return dnnl_out_of_memory;
    st->a_size = native ? 2 : 4, st->b_size = native ? 2 : 4;
    st->c_size = l->c_dt == dnnl_bf16 ? 2 : 4;
    st->bias_size = l->bias_dt == dnnl_bf16 ? 2 : 4;
    st->b_col = l->bs[1];
    st->parts = l->parts;
    st->a_step = l->a_step, st->b_step = l->b_step, st->c_step = l->c_step;
    st->bias_in = !l->bias ? -1 : bias_at;
    st->team = team;
    dnnl_status_t s = make_primitive(st, l, o, team, impl);
    if (s == dnnl_success)
        st->sp_bytes = align64(dnnl_memory_desc_get_size(&st->scratch_md));
    return s;
}

/* The t column parts of l into st (col_parts), their scratchpads one
 * after another. */
static dnnl_status_t new_col_states(mm_state *st, const mm_layout *l, const tg_plan_opts *o,
                                    bool native, int bias_at, int t, const char **impl)
{
    st->parts = 1;
    if (!(st->cols = tg_calloc((size_t)t, sizeof *st->cols)))
        return dnnl_out_of_memory;
    int64_t n = l->c[1], blocks = (n + TG_MM_COL_BLOCK - 1) / TG_MM_COL_BLOCK;
    dnnl_status_t s = dnnl_success;
    for (int p = 0; p < t && s == dnnl_success; p++) {
        mm_col_part *cp = &st->cols[p];
        int64_t n1 = blocks * (p + 1) / t * TG_MM_COL_BLOCK;
        cp->n0 = blocks * p / t * TG_MM_COL_BLOCK;
        cp->scratch_off = st->sp_bytes;
        mm_layout lp = *l;
        lp.b[1] = lp.c[1] = (n1 < n ? n1 : n) - cp->n0;
        st->n_cols = p + 1;
        s = new_state(&lp, o, native, bias_at, 1, impl, &cp->st);
        if (s == dnnl_success)
            st->sp_bytes += cp->st->sp_bytes;
    }
    if (s == dnnl_success)
        st->a_size = st->cols[0].st->a_size;
    return s;
}

/* Whether oneDNN's bf16 arithmetic exists on this CPU (AVX512_BF16, AMX). */
static bool native_bf16(void)
{
    return tg_dnnl_isa() >= dnnl_cpu_isa_avx512_core_bf16;
}

bool tg_matmul_dnnl_reads_bf16(const tg_plan_opts *o)
{
    return o->inference && o->compute == TG_BF16 && native_bf16() && o->in_storage[0] == TG_BF16 &&
           o->in_storage[1] == TG_BF16;
}

/* The oneDNN type of an operand stored as `stored` in a product reading
 * its operands in place (native) or staged through f32. */
static dnnl_data_type_t stored_dt(bool native, tg_dtype stored)
{
    return native && stored == TG_BF16 ? dnnl_bf16 : dnnl_f32;
}

/* Whether B is a value only the host writes (a leaf: a weight, a constant)
 * in an inference program, so that the product may keep it packed. */
static bool constant_b(const tg_tensor *node, const tg_plan_opts *opts)
{
    const tg_tensor *b = node->in[1];
    return opts->inference && b->n_in == 0 && b->op != TG_OP_INPUT && tg_process_keep_weights();
}

/* The kernel's name in plan->kernel. */
static void name_kernel(const mm_state *st, const tg_plan_opts *o, const char *impl,
                        tg_kernel_plan *plan)
{
    bool bf16 = o->compute == TG_BF16;
    const mm_state *k = st->n_cols ? st->cols[0].st : st;
    char cols[32] = "";
    if (st->n_cols)
        snprintf(cols, sizeof cols, ", columns in %d parts", st->n_cols);
    snprintf(plan->kernel, sizeof plan->kernel, "oneDNN matmul %s%s%s%s%s%s", impl,
             st->a_size == 2         ? " (bf16 in place)"
             : bf16 && native_bf16() ? " (bf16 math)"
             : bf16                  ? " (f32: no bf16 arithmetic on this CPU)"
                                     : "",
             st->parts > 1 ? ", parts per thread" : "", cols, k->cache ? ", weights packed" : "",
             o->mm_act || o->mm_residual || o->mm_scale || o->mm_heads_out ||
                     st->bias_in == TG_FUSE_IN_STATS
                 ? ", fused"
                 : "");
}

/* Column parts for a 2-D product whose rows the threads do not divide (a
 * classifier's at batch 1) in an inference program, whose constant B each
 * part packs its own slice of: one thread each on the device's pool (no
 * OpenMP team), in whole 16-column blocks, the last one short; 1: none. At
 * batch 1 on 2 threads mobilenet_v3_large's classifier (960->1280->1000)
 * ran on a team of 2, or on OpenBLAS where OpenMP threads spin, for 7-22%
 * of the run. */
static int col_parts(const mm_layout *l, const tg_plan_opts *o)
{
    int t = o->n_threads;
    bool wide = (l->c[1] + TG_MM_COL_BLOCK - 1) / TG_MM_COL_BLOCK >= t;
    return o->inference && l->nd == 2 && l->parts == 1 && t > 1 && wide ? t : 1;
}

bool tg_matmul_dnnl_packs(const tg_tensor *node, const tg_plan_opts *opts)
{
    mm_layout l;
    if (tg_dnnl_mode_get() == TG_DNNL_NEVER || !constant_b(node, opts) ||
        !layout_of(node, opts->n_threads, &l))
        return false;
    /* a product the threads cannot split runs on an OpenMP team, whose idle
     * threads spin against the device's pool unless they sleep (as for the
     * convolutions, dnnl_util.h) */
    bool team_ok = l.parts > 1 || col_parts(&l, opts) > 1 || opts->n_threads == 1 ||
                   tg_dnnl_passive_wait() || tg_dnnl_mode_get() != TG_DNNL_AUTO;
    return l.nd == 2 && l.b_step == 0 && team_ok;
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
    bool scores = opts->mm_scale || (opts->mm_residual && opts->mm_mask) || opts->mm_heads_out;
    if (scores &&
        (blocked || !scores_layout(node, opts->mm_mask, opts->mm_heads_out, opts->n_threads, &l)))
        return tg_error(TG_ERR_INTERNAL, "fused with a scale or mask, but no 4-D oneDNN form");
    if (!scores && (blocked || !layout_of(node, opts->n_threads, &l))) {
        snprintf(plan->kernel, sizeof plan->kernel, "%s (no oneDNN form)", own);
        return TG_OK;
    }
    /* An inference program's constant B is packed once per weight write
     * into the layout oneDNN's brgemm kernels read: measured on the 2-core
     * AVX-512 machine (1 thread, BERT's 128x768x768 to 1024x3072x768
     * products) 1.3-2.6x OpenBLAS's sgemm, where oneDNN on B as the graph
     * holds it was not faster. */
    l.pack = tg_matmul_dnnl_packs(node, opts);
    bool fused =
        opts->mm_bias || opts->mm_act || opts->mm_residual || opts->mm_scale || opts->mm_heads_out;
    if (fused && !l.pack && !scores)
        return tg_error(TG_ERR_INTERNAL, "fused with what follows it, but its weights not packed");
    l.bias |= opts->mm_bias;
    /* The rule (TG_DNNL_AUTO) otherwise: oneDNN for the batched products,
     * OpenBLAS for the 2-D ones, unless bf16 arithmetic is asked for and
     * the CPU has it. Measured by bench_matmul (best of alternating runs, 1
     * thread, on the shared 2-core AVX2 machine, oneDNN's gemm:jit /
     * OpenBLAS): attention's batched 128x128x64 and 128x64x128 products
     * 1.03-1.64, BERT's 2-D ones 0.82-1.04 (the 1024x3072x768 feed-forward
     * 0.82-0.83). */
    bool bf16 = opts->compute == TG_BF16;
    if (mode == TG_DNNL_AUTO && l.nd == 2 && !l.pack && !(bf16 && native_bf16())) {
        snprintf(plan->kernel, sizeof plan->kernel, "%s", own);
        return TG_OK;
    }
    if (mode == TG_DNNL_AUTO && l.parts == 1 && !(l.pack && col_parts(&l, opts) > 1) &&
        opts->n_threads > 1 && !tg_dnnl_passive_wait()) {
        if (fused)
            return tg_error(TG_ERR_INTERNAL, "fused with what follows it, but its product not "
                                             "split over the threads");
        snprintf(plan->kernel, sizeof plan->kernel,
                 "%s (oneDNN with several threads needs OMP_WAIT_POLICY=passive)", own);
        return TG_OK;
    }
    /* An inference program's operands stored in bf16 are read as they are
     * where the CPU multiplies bf16 (the product is in bf16 anyway): no f32
     * copy of the activations, and of the weights at every run, is staged
     * (training keeps its staged path, bit for bit). A fused product's bias
     * and residual are read as stored too: they are never staged. */
    bool native = tg_matmul_dnnl_reads_bf16(opts);
    int bias_at = opts->mm_bias ? TG_FUSE_IN_STATS : 2;
    l.a_dt = l.b_dt = native ? dnnl_bf16 : dnnl_f32;
    l.c_dt = stored_dt(native, opts->out_storage);
    l.bias_dt = stored_dt(native, opts->in_storage[bias_at]);
    l.res_dt = stored_dt(native, opts->in_storage[TG_FUSE_IN_STATS + 1]);
    l.scale_dt = stored_dt(native, opts->in_storage[TG_FUSE_IN_STATS]);
    if (fused && !native &&
        (opts->out_storage == TG_BF16 || (opts->mm_bias && opts->in_storage[bias_at] == TG_BF16) ||
         (opts->mm_residual && opts->in_storage[TG_FUSE_IN_STATS + 1] == TG_BF16) ||
         (opts->mm_scale && opts->in_storage[TG_FUSE_IN_STATS] == TG_BF16)))
        return tg_error(TG_ERR_INTERNAL, "fused with what follows it in bf16, but its operands "
                                         "not read in place (no bf16 arithmetic on this CPU)");
    int cols = l.pack && !scores ? col_parts(&l, opts) : 1;
    mm_state *st = NULL;
    const char *impl = "?";
    dnnl_status_t s;
    if (cols > 1) {
        st = tg_calloc(1, sizeof *st);
        s = st ? new_col_states(st, &l, opts, native, bias_at, cols, &impl) : dnnl_out_of_memory;
    } else {
        s = new_state(&l, opts, native, bias_at, l.parts > 1 ? 1 : opts->n_threads, &impl, &st);
    }
    if (s != dnnl_success) {
        tg_matmul_dnnl_free(st);
        if (s == dnnl_unimplemented && !fused) {
            snprintf(plan->kernel, sizeof plan->kernel, "%s (no oneDNN implementation)", own);
            return TG_OK;
        }
        return tg_dnnl_check(s, "creating its oneDNN matmul");
    }
    plan->state = st;
    plan->scratch = st->sp_bytes * (size_t)st->parts;
    plan->native_storage = native;
    name_kernel(st, opts, impl, plan);
    return TG_OK;
}

void tg_matmul_dnnl_free(void *state)
{
    mm_state *st = state;
    if (!st)
        return;
    for (int p = 0; p < st->n_cols; p++)
        tg_matmul_dnnl_free(st->cols[p].st);
    tg_free(st->cols);
    if (st->prim)
        dnnl_primitive_destroy(st->prim);
    if (st->pack)
        dnnl_primitive_destroy(st->pack);
    tg_weight_cache_destroy(st->cache);
    tg_free(st);
}

#define RUN_WHAT "running a matmul primitive"

static dnnl_memory_t mem(const dnnl_memory_desc_t *md, void *ptr)
{
    return tg_dnnl_memory(md, ptr, RUN_WHAT);
}

/* Part p of the product, with part p's scratchpad; B from b (packed, or
 * the graph's). */
static void run_part(const mm_state *st, const tg_kernel_args *a, const void *b, int p)
{
    tg_status ts;
    dnnl_engine_t eng = tg_dnnl_engine(&ts);
    dnnl_stream_t stream = NULL;
    dnnl_status_t s = dnnl_stream_create(&stream, eng, dnnl_stream_default_flags);
    if (s != dnnl_success)
        tg_dnnl_run_failed(s, RUN_WHAT);
    dnnl_exec_arg_t args[7];
    int n = 0;
    char *in0 = a->in[0], *out = a->out;
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, mem(&st->a_md, in0 + p * st->a_step * st->a_size)};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS,
                                  mem(&st->b_md, (char *)b + p * st->b_step * st->b_size)};
    if (st->bias_in >= 0)
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, mem(&st->bias_md, a->in[st->bias_in])};
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DST, mem(&st->c_md, out + p * st->c_step * st->c_size)};
    if (st->residual)
        args[n++] =
            (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(st->residual_po) | DNNL_ARG_SRC_1,
                              mem(&st->res_md, (char *)a->in[TG_FUSE_IN_STATS + 1] +
                                                   p * st->res_step * st->res_size)};
    if (st->scale)
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(st->scale_po) | DNNL_ARG_SRC_1,
                                      mem(&st->scale_md, a->in[TG_FUSE_IN_STATS])};
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

/* B packed into `to` (the calling thread's team). */
static void pack_b(const mm_state *st, const void *b, void *to)
{
    tg_status ts;
    dnnl_stream_t stream = NULL;
    dnnl_status_t s = dnnl_stream_create(&stream, tg_dnnl_engine(&ts), dnnl_stream_default_flags);
    if (s != dnnl_success)
        tg_dnnl_run_failed(s, "packing a matmul's weights");
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, mem(&st->user_b_md, (void *)b)},
                               {DNNL_ARG_TO, mem(&st->b_md, to)}};
    s = dnnl_primitive_execute(st->pack, stream, 2, args);
    if (s == dnnl_success)
        s = dnnl_stream_wait(stream);
    if (s != dnnl_success)
        tg_dnnl_run_failed(s, "packing a matmul's weights");
    dnnl_memory_destroy(args[0].memory);
    dnnl_memory_destroy(args[1].memory);
    dnnl_stream_destroy(stream);
}

/* B in the primitive's layout: the graph's own, or packed from the node's
 * cache (refilled when the host wrote the weights since); without a
 * weights version (a test's call) packed afresh into *fresh, which the
 * caller frees. */
static const void *packed_b(const mm_state *st, const tg_kernel_args *a, void **fresh)
{
    *fresh = NULL;
    if (!st->pack)
        return a->in[1];
    bool fill;
    void *kept = tg_weight_cache_get(st->cache, a->in[1], a->weights_version, &fill);
    if (!kept && !(kept = *fresh = tg_malloc_aligned(dnnl_memory_desc_get_size(&st->b_md))))
        tg_dnnl_run_failed(dnnl_out_of_memory, "packing a matmul's weights");
    if (fill || *fresh) {
        tg_dnnl_threads(1);
        pack_b(st, a->in[1], kept);
    }
    return kept;
}

typedef struct parts_job {
    const mm_state *st;
    const tg_kernel_args *a;
    const void *b;
} parts_job;

static void parts_loop(void *ctx, int64_t begin, int64_t end, int t)
{
    const parts_job *j = ctx;
    (void)t;
    tg_dnnl_threads(1);
    for (int64_t p = begin; p < end; p++)
        run_part(j->st, j->a, j->b, (int)p);
}

/* Column part cp: the node's operands moved on to its first column (A
 * whole), its own packed slice of B and its scratchpad. */
static void run_col_part(const mm_col_part *cp, const tg_kernel_args *a)
{
    const mm_state *st = cp->st;
    tg_kernel_args pa = *a;
    pa.in[1] = (char *)a->in[1] + cp->n0 * st->b_col * (int64_t)st->b_size;
    pa.out = (char *)a->out + cp->n0 * (int64_t)st->c_size;
    if (st->bias_in >= 0)
        pa.in[st->bias_in] = (char *)a->in[st->bias_in] + cp->n0 * (int64_t)st->bias_size;
    if (st->residual)
        pa.in[TG_FUSE_IN_STATS + 1] =
            (char *)a->in[TG_FUSE_IN_STATS + 1] + cp->n0 * (int64_t)st->res_size;
    pa.scratch = (unsigned char *)a->scratch + cp->scratch_off;
    void *fresh;
    const void *b = packed_b(st, &pa, &fresh);
    run_part(st, &pa, b, 0);
    tg_free(fresh);
}

static void cols_loop(void *ctx, int64_t begin, int64_t end, int t)
{
    const parts_job *j = ctx;
    (void)t;
    tg_dnnl_threads(1);
    for (int64_t p = begin; p < end; p++)
        run_col_part(&j->st->cols[p], j->a);
}

void tg_matmul_dnnl_run(const void *state, const tg_kernel_args *a)
{
    const mm_state *st = state;
    if (st->n_cols) {
        parts_job j = {st, a, NULL};
        tg_pool_for(a->pool, st->n_cols, cols_loop, &j);
        return;
    }
    void *fresh;
    const void *b = packed_b(st, a, &fresh);
    if (st->parts > 1) {
        parts_job j = {st, a, b};
        tg_pool_for(a->pool, st->parts, parts_loop, &j);
    } else {
        int team = a->pool ? tg_pool_threads(a->pool) : 1;
        team = team < st->team ? team : st->team;
        if (team > 1)
            tg_pool_rest(a->pool); /* its spinning workers would take the team's cores */
        tg_dnnl_threads(team);
        run_part(st, a, b, 0);
    }
    tg_free(fresh);
}

const tg_op_planner tg_matmul_planner = {tg_matmul_dnnl_plan, tg_matmul_dnnl_free};
