/* backend/cpu/simd.c - run-time CPU feature detection for the SIMD kernels. */
#include "backend/cpu/simd.h"

#include "core/isa.h"
#include "core/process.h"

#include <stdatomic.h>

/* The CPU's level, held to TILEGRAPH_ISA (core/isa.h). */
static tg_simd_level detect(void)
{
    tg_isa isa = tg_isa_get();
    return isa >= TG_ISA_AVX512 ? TG_SIMD_AVX512 : isa == TG_ISA_AVX2 ? TG_SIMD_AVX2 : TG_SIMD_BASE;
}

tg_simd_level tg_simd_level_get(void)
{
    static atomic_int detected = -1; /* every thread that races here stores the same value */
    int d = atomic_load_explicit(&detected, memory_order_relaxed);
    if (d < 0) {
        d = (int)detect();
        atomic_store_explicit(&detected, d, memory_order_relaxed);
    }
    int cap = tg_process_simd_cap();
    return (tg_simd_level)(d < cap ? d : cap);
}

void tg_simd_cap(tg_simd_level level)
{
    tg_process_set_simd_cap((int)level);
}

const char *tg_simd_level_name(tg_simd_level level)
{
    switch (level) {
    case TG_SIMD_AVX512:
        return "avx512";
    case TG_SIMD_AVX2:
        return "avx2";
    default:
        return "base";
    }
}
