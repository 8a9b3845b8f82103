/* core/clones.h - TG_WIDE_CLONES: one copy of a loop function per
 * instruction set (AVX-512, AVX2, the baseline), picked at load time by an
 * ifunc, for loops the compiler vectorises far better with wider vectors
 * (the bf16 conversions, the blocked kernels' 16-float vectors). GCC on
 * x86-64 only, and not under the sanitizers: the ifunc resolver runs before
 * their runtime starts.
 *
 * The copies are chosen by feature ("avx512f"), not by CPU model: with
 * "arch=skylake-avx512" the resolver asks whether the CPU *is* a Skylake,
 * and an AMD EPYC with AVX-512 got the AVX2 copy, in which the blocked
 * batch norm ran at half the speed of even the baseline.
 *
 * TG_WIDE_KERNEL adds `flatten`: the static helpers a kernel calls are
 * inlined into each copy, else they stay compiled once for the baseline. */
#ifndef TG_CORE_CLONES_H
#define TG_CORE_CLONES_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) &&                             \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define TG_WIDE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TG_WIDE_CLONES
#endif

/* Helpers that pass 16-float vectors by value must be inlined into every
 * copy, at every optimisation level (the sanitizer builds are not -O2): a
 * call from a copy compiled for AVX-512 into one compiled for the baseline
 * passes the vector in a register the callee looks for on the stack (the
 * ABI note GCC's -Wpsabi gives). The same for loops taking their
 * conversions as constant function pointers (core/bf16.h
 * TG_BF16_POOL_FNS): only inlined does each copy call its own. */
#define TG_VEC_INLINE static inline __attribute__((always_inline))

#if defined(__GNUC__)
#define TG_WIDE_KERNEL TG_WIDE_CLONES __attribute__((flatten))
#else
#define TG_WIDE_KERNEL TG_WIDE_CLONES
#endif

#endif
