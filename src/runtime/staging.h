/* runtime/staging.h - kernels over values stored in half precision, and the
 * gradient reductions for every storage type.
 *
 * Kernels compute in f32. A step the compiler marked `staged` has inputs or
 * an output stored as f16/bf16 (or a gradient to unscale): its inputs are
 * converted into f32 copies in the step's planned scratch, the kernel runs
 * on those, and its output and the inputs it updates in place are rounded
 * back into their storage. Kernels that read bf16 themselves
 * (tg_step_reads_native: ReLU, add, blocked batch norm, the SGD/Adam/AdamW
 * updates) are not staged; an update then gets the gradient's unscale and
 * the rounding in tg_kernel_args.update.
 */
#ifndef TG_RUNTIME_STAGING_H
#define TG_RUNTIME_STAGING_H

#include "compile/program.h"
#include "ops/op.h"

/* Run step st's kernel with args a (its buffers' pointers), staging as planned. */
void tg_stage_run(const tg_program *p, const tg_step *st, tg_kernel_args *a,
                  const tg_update_opts *o);

/* acc = grad (first) or acc + grad, then acc *= scale when scale != 1;
 * acc and grad of any float type, summed in f32. */
void tg_accumulate_typed(void *acc, tg_dtype at, const void *grad, tg_dtype gt, int64_t n,
                         bool first, float scale);

/* Elements [begin, end) of R replicas' copies of one buffer: scale * the
 * sum over replicas, summed in f32 in replica order, into the n_out buffers
 * outs (a replica's copy, or its accumulator when the copy read is a staged
 * one; in an MPI job only this instance's replicas read the result). */
void tg_reduce_typed(unsigned char *const *copies, int R, unsigned char *const *outs, int n_out,
                     tg_dtype t, int64_t begin, int64_t end, float scale);

/* Sum of x^2 over n elements of any float type, in double and in element
 * order (a fixed order: the gradient clipping's norm is deterministic). */
double tg_sum_squares_typed(const void *x, tg_dtype t, int64_t n);

/* x *= scale over n elements of any float type (computed in f32). */
void tg_scale_typed(void *x, tg_dtype t, int64_t n, float scale);

#endif
