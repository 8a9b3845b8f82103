/* ops/ref_blas.h - double-precision GEMM for the reference kernels, and the
 * one setting every caller of OpenBLAS needs first.
 *
 * The engine runs several devices, each a group of threads (a tg_pool), so
 * OpenBLAS must never start threads of its own: tg_blas_init() pins it to one
 * thread (once per process, thread-safe). The cpu backend's single-precision
 * GEMMs are backend/cpu/blas.h.
 */
#ifndef TG_OPS_REF_BLAS_H
#define TG_OPS_REF_BLAS_H

#include <stdbool.h>
#include <stdint.h>

/* Make OpenBLAS single-threaded. Cheap after the first call; every kernel
 * that calls a GEMM calls this first. */
void tg_blas_init(void);

/* Row-major C[M,N] = alpha * op(A) op(B) + beta * C in double precision
 * (the reference kernels: ops/conv.c, ops/matmul.c, runtime/interp.c), on
 * the calling thread. */
void tg_dgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
              const double *A, int64_t lda, const double *B, int64_t ldb, double beta, double *C,
              int64_t ldc);

#endif
