/* backend/cpu/blas.c - OpenBLAS pinned to one thread, and GEMMs split over a pool. */
#include "backend/cpu/blas.h"

#include <cblas.h>

void tg_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    tg_blas_init();
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

typedef struct {
    bool ta, tb, by_rows;
    int M, N, K, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C;
} gemm_job;

/* Blocks are multiples of 16 rows/columns so each thread's part keeps
 * OpenBLAS's register tiles whole. */
static void gemm_part(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const gemm_job *j = ctx;
    int total = j->by_rows ? j->M : j->N;
    int lo = (int)(begin * 16), hi = (int)(end * 16);
    if (hi > total)
        hi = total;
    if (lo >= hi)
        return;
    if (j->by_rows) {
        /* rows lo..hi of op(A): row r of A, or column r of A when transposed */
        const float *A = j->ta ? j->A + lo : j->A + (size_t)lo * (size_t)j->lda;
        tg_sgemm(j->ta, j->tb, hi - lo, j->N, j->K, j->alpha, A, j->lda, j->B, j->ldb, j->beta,
                 j->C + (size_t)lo * (size_t)j->ldc, j->ldc);
    } else {
        const float *B = j->tb ? j->B + (size_t)lo * (size_t)j->ldb : j->B + lo;
        tg_sgemm(j->ta, j->tb, j->M, hi - lo, j->K, j->alpha, j->A, j->lda, B, j->ldb, j->beta,
                 j->C + lo, j->ldc);
    }
}

void tg_sgemm_pool(tg_pool *pool, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                   const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    int T = tg_pool_threads(pool);
    double flops = 2.0 * M * N * K;
    /* below ~2 MFLOP a split costs more in wake-ups than it saves */
    if (T <= 1 || flops < 2e6 || (M < 32 && N < 32)) {
        tg_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    gemm_job j = {trans_a, trans_b, M >= N, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C};
    int total = j.by_rows ? M : N;
    tg_pool_for(pool, (total + 15) / 16, gemm_part, &j);
}
