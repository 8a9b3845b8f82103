/* backend/cpu/blas.h - single-threaded OpenBLAS under our own thread pool.
 *
 * The engine runs several devices, each a group of threads (a tg_pool), so
 * OpenBLAS must never start threads of its own: tg_blas_init() pins it to one
 * thread (once per process, thread-safe), and tg_sgemm_pool() splits one large
 * GEMM over a pool, each thread calling sgemm on its block of rows or columns.
 */
#ifndef TG_BACKEND_CPU_BLAS_H
#define TG_BACKEND_CPU_BLAS_H

#include "core/pool.h"
#include "ops/ref_blas.h" /* tg_blas_init */

#include <stdbool.h>
#include <stdint.h>

/* Row-major C[M,N] = alpha * op(A) op(B) + beta * C on the calling thread. */
void tg_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc);

/* The same, split over the pool's threads by rows of C (or by columns when C
 * is wide and short); small products run on the caller alone. */
void tg_sgemm_pool(tg_pool *pool, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                   const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

#endif
