/* ops/ref_blas.c - OpenBLAS pinned to one thread, and the reference
 * kernels' double-precision GEMM (ops/ref_blas.h). */
#include "ops/ref_blas.h"

#include <cblas.h>
#include <pthread.h>

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_set_single(void)
{
    openblas_set_num_threads(1);
}

void tg_blas_init(void)
{
    pthread_once(&blas_once, blas_set_single);
}

void tg_dgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
              const double *A, int64_t lda, const double *B, int64_t ldb, double beta, double *C,
              int64_t ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) { /* an empty sum: BLAS would refuse the leading dimension 0 */
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++)
                C[m * ldc + n] *= beta;
        return;
    }
    tg_blas_init();
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (blasint)M, (blasint)N, (blasint)K, alpha, A,
                (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
}
