/* backend/cpu/simd.h - which vector instructions the fast kernels may use, decided
 * at run time from the CPU (never from the build host: the library is built
 * without -march flags and its SIMD kernels carry target attributes).
 */
#ifndef TG_BACKEND_CPU_SIMD_H
#define TG_BACKEND_CPU_SIMD_H

typedef enum tg_simd_level {
    TG_SIMD_BASE = 0, /* SSE2, which every x86-64 has; portable C elsewhere */
    TG_SIMD_AVX2,     /* AVX2 + FMA, 8 floats per vector */
    TG_SIMD_AVX512,   /* AVX-512F, 16 floats per vector */
} tg_simd_level;

/* The best level this CPU supports, held to TILEGRAPH_ISA (core/isa.h),
 * capped by tg_simd_cap. */
tg_simd_level tg_simd_level_get(void);
/* For tests and benchmarks: use at most `level` from now on (so every
 * kernel variant can be checked on one machine). Process-wide (core/process.h):
 * no data race, but set it while no kernel runs, so every kernel sees one level. */
void tg_simd_cap(tg_simd_level level);
const char *tg_simd_level_name(tg_simd_level level);

#endif
