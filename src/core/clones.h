/* core/clones.h - TG_WIDE_CLONES: one copy of a loop function per
 * instruction set (AVX-512, AVX2, the baseline), picked at load time by an
 * ifunc, for loops the compiler vectorises far better with wider vectors
 * (the bf16 conversions). GCC on x86-64 only, and not under the sanitizers:
 * the ifunc resolver runs before their runtime starts. */
#ifndef TG_CORE_CLONES_H
#define TG_CORE_CLONES_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) &&                             \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define TG_WIDE_CLONES __attribute__((target_clones("arch=skylake-avx512", "avx2", "default")))
#else
#define TG_WIDE_CLONES
#endif

#endif
