/* core/convert.h - moving floating-point values between storage types.
 *
 * Half-precision training stores activations, weights and gradients in f16
 * or bf16 and computes in f32: these are the conversions at the edges of
 * every kernel, of the host streams and of the gradient reductions.
 */
#ifndef TG_CORE_CONVERT_H
#define TG_CORE_CONVERT_H

#include "tilegraph/dtype.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True for f32, f16 and bf16. */
bool tg_dtype_is_float(tg_dtype t);

/* n elements from src (type sd) to dst (type dd); both float types. Rounds
 * to nearest even; the same type is a copy. */
void tg_convert(const void *src, tg_dtype sd, void *dst, tg_dtype dd, size_t n);

/* n elements of type dt (any type) as doubles, exactly: a double holds
 * every f32, i32 and u8 value, and the half types arrive through f32. The
 * reference kernels' operands (backend/dispatch.c) and the checker's
 * (runtime/verify_check.c). */
void tg_convert_to_double(const void *src, tg_dtype dt, double *dst, size_t n);

/* n doubles into f32 (rounded to nearest), i32 or u8 (truncated as C's
 * cast does; each value must fit): a reference kernel's results written as
 * a fast kernel's operands. The half types abort: every kernel reads and
 * writes them staged through f32, so a half-typed buffer here is a bug. */
void tg_convert_from_double(const double *src, void *dst, tg_dtype dt, size_t n);

/* f32 to f16 or bf16 with stochastic rounding: each value goes to one of its
 * two neighbours with probability proportional to closeness, from a
 * counter-based hash of (key, first + i), so the result is reproducible and
 * the same on every replica. Non-finite values and f32 destinations round to
 * nearest. */
void tg_convert_stochastic(const float *src, void *dst, tg_dtype dd, size_t n, uint64_t key,
                           uint64_t first);

/* Index of the first NaN or infinity among n elements of a float type, or -1. */
int64_t tg_first_nonfinite(const void *src, tg_dtype t, size_t n);

#endif
