/* backend/cpu/vmath.h - vectorised exp and GELU for the transformer's elementwise
 * kernels (softmax, GELU and its gradient), chosen at run time by the CPU
 * (backend/cpu/simd.h): AVX2 + FMA, else the C library's expf and erff;
 * softmax's exp and sum with AVX-512 where the CPU has it (the same exp,
 * 16 at a time: one softmax over [8, 12, 128, 128], CPU time on the
 * project's 2-core AMD EPYC, 1.14 ms with AVX2, 0.69 with AVX-512).
 *
 * Accuracy (checked against double in tests/backend/cpu/test_vmath.c): exp within
 * 2 ulp over [-87, 88.7], 0 below -87.3 with AVX2 (where expf gives
 * denormals or 0), +inf above ln(FLT_MAX), NaN kept; the GELU's normal CDF within 3e-7 relative in
 * both tails (it is computed from erfc, never as 1 + erf, so large negative
 * inputs keep their relative accuracy).
 */
#ifndef TG_BACKEND_CPU_VMATH_H
#define TG_BACKEND_CPU_VMATH_H

#include <stdint.h>

/* The largest of m and x[0..n), NaN skipped (each step m = x > m ? x : m). */
float tg_vmax(const float *x, int64_t n, float m);

/* y[i] *= by (-O2 leaves the scalar loop unvectorised). */
void tg_vscale(float *y, int64_t n, float by);

/* y[i] = exp(x[i] - sub); returns the sum of the y[i] (in double). y may be x. */
double tg_vexp_sum(const float *x, float *y, int64_t n, float sub);

/* y = gelu(x) = x * Phi(x), the exact (erf) form. */
void tg_vgelu(const float *x, float *y, int64_t n);

/* o = dy * gelu'(x) = dy * (Phi(x) + x phi(x)). */
void tg_vgelu_bwd(const float *dy, const float *x, float *o, int64_t n);

/* The tanh form, y = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
 * (which is x (1 + tanh(u)) / 2), and its gradient dy * gelu'(x). */
void tg_vgelu_tanh(const float *x, float *y, int64_t n);
void tg_vgelu_tanh_bwd(const float *dy, const float *x, float *o, int64_t n);

#endif
