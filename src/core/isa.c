/* core/isa.c - the CPU's instruction sets and the TILEGRAPH_ISA cap (see
 * core/isa.h). Both are the process's (core/process.h): detected once,
 * the variable read once, so every kernel of a run sees one answer. */
#include "core/isa.h"

#include "core/error.h"
#include "tilegraph/devices.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ISA_VAR "TILEGRAPH_ISA"

static const char *const names[] = {"base", "avx2", "avx512", "avx512_bf16"};

const char *tg_isa_name(tg_isa isa)
{
    return isa >= TG_ISA_BASE && isa <= TG_ISA_AVX512_BF16 ? names[isa] : "base";
}

tg_isa tg_isa_cpu(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return TG_ISA_BASE;
    if (!__builtin_cpu_supports("avx512f"))
        return TG_ISA_AVX2;
#if !defined(__clang__) /* clang's __builtin_cpu_supports knows no avx512bf16 */
    if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bf16"))
        return TG_ISA_AVX512_BF16;
#endif
    return TG_ISA_AVX512;
#else
    return TG_ISA_BASE;
#endif
}

/* The set TILEGRAPH_ISA names, -1 when unset or empty, -2 when unknown. */
static int env_isa(void)
{
    const char *e = getenv(ISA_VAR);
    if (!e || !*e)
        return -1;
    for (int i = TG_ISA_AVX2; i <= TG_ISA_AVX512_BF16; i++)
        if (!strcmp(e, names[i]))
            return i;
    return -2;
}

tg_isa tg_isa_get(void)
{
    static atomic_int chosen = -1; /* every thread that races here stores the same value */
    int c = atomic_load_explicit(&chosen, memory_order_relaxed);
    if (c >= 0)
        return (tg_isa)c;
    int cpu = (int)tg_isa_cpu(), want = env_isa();
    if (want == -2)
        fprintf(stderr,
                "tilegraph: warning: %s=%s is none of avx2, avx512, avx512_bf16: "
                "ignored, the kernels use the CPU's %s\n",
                ISA_VAR, getenv(ISA_VAR), names[cpu]);
    c = want >= 0 && want < cpu ? want : cpu;
    atomic_store_explicit(&chosen, c, memory_order_relaxed);
    return (tg_isa)c;
}

tg_status tg_isa_check(void)
{
    if (env_isa() != -2)
        return TG_OK;
    return tg_error(TG_ERR_INVALID_ARG,
                    "%s='%s' names no instruction set: use avx2, avx512 (no AVX-512 BF16) or "
                    "avx512_bf16, or unset it for all the CPU has",
                    ISA_VAR, getenv(ISA_VAR));
}

void tg_isa_describe(char *out, size_t cap)
{
    tg_isa use = tg_isa_get(), cpu = tg_isa_cpu();
    const char *e = getenv(ISA_VAR);
    if (env_isa() >= 0)
        snprintf(out, cap, "%s (%s=%s; the CPU has %s)", names[use], ISA_VAR, e, names[cpu]);
    else
        snprintf(out, cap, "%s", names[use]);
}

tg_status tg_host_isa_check(void)
{
    return tg_isa_check();
}

void tg_host_isa_describe(char *out, size_t cap)
{
    tg_isa_describe(out, cap);
}
