/* backend/cpu/matmul_kernels.c - the cpu backend's kernels for MATMUL and
 * LINEAR (ops/matmul.c is what they are): oneDNN's matmul where the plan
 * hook took the product (backend/cpu/matmul_dnnl.c), else OpenBLAS sgemm
 * split over the device's pool (backend/cpu/blas.h). */
#include "backend/backend.h"
#include "backend/cpu/blas.h"
#include "backend/cpu/matmul_dnnl.h"
#include "ops/matmul.h"
#include "ops/matmul_geom.h"

#include "core/check.h"

#include <string.h>

typedef tg_mm_dims mm_dims;

/* The op's FLOPs (ops/matmul.c), by which the kernel splits small products. */
static double flops_matmul(const tg_tensor *node)
{
    return tg_op_get(node->op)->flops(node);
}

typedef struct mm_job {
    mm_dims d;
    const float *a, *b;
    float *c;
} mm_job;

/* One thread per range of batch elements. */
static void mm_batches(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const mm_job *j = ctx;
    const mm_dims *d = &j->d;
    int lda = (int)(d->ta ? d->M : d->K), ldb = (int)(d->tb ? d->K : d->N);
    for (int64_t i = begin; i < end; i++)
        tg_sgemm(d->ta, d->tb, (int)d->M, (int)d->N, (int)d->K, 1.0f,
                 j->a + (d->a_batched ? i * d->M * d->K : 0), lda,
                 j->b + (d->b_batched ? i * d->K * d->N : 0), ldb, 0.0f, j->c + i * d->M * d->N,
                 (int)d->N);
}

/* Summed mode: each thread owns a block of 16-row groups of C and accumulates
 * every batch element into it, so no partial sums need merging. */
static void mm_sum_rows(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const mm_job *j = ctx;
    const mm_dims *d = &j->d;
    int lda = (int)(d->ta ? d->M : d->K), ldb = (int)(d->tb ? d->K : d->N);
    int64_t lo = begin * 16, hi = end * 16 < d->M ? end * 16 : d->M;
    for (int64_t i = 0; i < d->batch; i++) {
        const float *a = j->a + i * d->M * d->K;
        a += d->ta ? lo : lo * d->K;
        tg_sgemm(d->ta, d->tb, (int)(hi - lo), (int)d->N, (int)d->K, 1.0f, a, lda,
                 j->b + i * d->K * d->N, ldb, i ? 1.0f : 0.0f, j->c + lo * d->N, (int)d->N);
    }
}

static void fwd_matmul(const tg_kernel_args *a)
{
    if (a->plan) {
        tg_matmul_dnnl_run(a->plan, a);
        return;
    }
    mm_job j = {tg_mm_dims_of(a->node), a->in[0], a->in[1], a->out};
    const mm_dims *d = &j.d;
    /* the output is batch x M x N, or M x N with the batch summed */
    TG_ASSERT((d->sum ? 1 : d->batch) * d->M * d->N == tg_numel(a->node));
    int T = tg_pool_threads(a->pool);
    if (d->K == 0) {
        memset(a->out, 0, tg_nbytes(a->node));
        return;
    }
    if (d->a_batched && !d->b_batched && !d->ta) {
        /* a shared b: the batch is just more rows of one GEMM */
        tg_sgemm_pool(a->pool, false, d->tb, (int)(d->batch * d->M), (int)d->N, (int)d->K, 1.0f,
                      j.a, (int)d->K, j.b, (int)(d->tb ? d->K : d->N), 0.0f, j.c, (int)d->N);
    } else if (d->sum && d->ta && !d->tb) {
        /* sum_i A_i^T B_i with the A_i and the B_i one after the other is
         * one product of inner dimension batch * K (LINEAR's weight
         * gradient over [B, S, in]): C is written once, not once per batch
         * element */
        tg_sgemm_pool(a->pool, true, false, (int)d->M, (int)d->N, (int)(d->batch * d->K), 1.0f, j.a,
                      (int)d->M, j.b, (int)d->N, 0.0f, j.c, (int)d->N);
    } else if (d->sum) {
        if (T > 1 && d->M >= 32 && flops_matmul(a->node) > 2e6)
            tg_pool_for(a->pool, (d->M + 15) / 16, mm_sum_rows, &j);
        else
            mm_sum_rows(&j, 0, (d->M + 15) / 16, 0);
    } else if (d->batch >= T || flops_matmul(a->node) < 2e6) {
        tg_pool_for(T > 1 && d->batch > 1 ? a->pool : NULL, d->batch, mm_batches, &j);
    } else {
        int lda = (int)(d->ta ? d->M : d->K), ldb = (int)(d->tb ? d->K : d->N);
        for (int64_t i = 0; i < d->batch; i++)
            tg_sgemm_pool(a->pool, d->ta, d->tb, (int)d->M, (int)d->N, (int)d->K, 1.0f,
                          j.a + (d->a_batched ? i * d->M * d->K : 0), lda,
                          j.b + (d->b_batched ? i * d->K * d->N : 0), ldb, 0.0f,
                          j.c + i * d->M * d->N, (int)d->N);
    }
}

static void fwd_linear(const tg_kernel_args *a)
{
    if (a->plan) {
        tg_matmul_dnnl_run(a->plan, a);
        return;
    }
    const tg_tensor *w = a->node->in[1];
    int out_f = (int)w->shape.dim[0], in_f = (int)w->shape.dim[1];
    int rows = out_f ? (int)(tg_numel(a->node) / out_f) : 0;
    TG_ASSERT((int64_t)rows * out_f == tg_numel(a->node));
    TG_ASSERT(a->node->in[0]->shape.dim[a->node->in[0]->shape.ndim - 1] == in_f);

    float *y = a->out;
    const float *bias = a->node->n_in == 3 ? a->in[2] : NULL;
    if (bias)
        for (int r = 0; r < rows; r++)
            memcpy(y + (size_t)r * out_f, bias, (size_t)out_f * sizeof(float));
    if (in_f == 0) {
        if (!bias)
            memset(y, 0, tg_nbytes(a->node));
        return;
    }
    tg_sgemm_pool(a->pool, false, true, rows, out_f, in_f, 1.0f, a->in[0], in_f, a->in[1], in_f,
                  bias ? 1.0f : 0.0f, y, out_f);
}

extern const tg_op_planner tg_matmul_planner; /* matmul_dnnl.c */

const tg_kernel_def tg_cpu_kernel_MATMUL = {.forward = fwd_matmul, .planner = &tg_matmul_planner};
const tg_kernel_def tg_cpu_kernel_LINEAR = {.forward = fwd_linear, .planner = &tg_matmul_planner};
