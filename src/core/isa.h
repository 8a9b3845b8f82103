/* core/isa.h - the instruction sets the library's kernels may use: what the
 * CPU has, capped by TILEGRAPH_ISA, read once per process.
 *
 * TILEGRAPH_ISA=avx2 / avx512 / avx512_bf16 holds every kernel choice to at
 * most that set (never above what the CPU has), so one AVX-512 machine tests
 * the AVX2 paths and the paths without AVX-512 BF16 too: the own kernels'
 * dispatch (backend/cpu/simd.c, core/bf16.h tg_bf16_hw) and oneDNN's JIT
 * (backend/cpu/dnnl_util.c, dnnl_set_max_cpu_isa) both read tg_isa_get. Plans
 * differ by set (kernel scratch, blocked layouts), numbers must not beyond
 * the rounding the kernels document. The loops compiled once per set by an
 * ifunc (core/clones.h) are picked at load time, before any environment is
 * read, and are not held: they vectorise the same arithmetic (no FMA in
 * their targets, no reassociation), so their results do not differ.
 */
#ifndef TG_CORE_ISA_H
#define TG_CORE_ISA_H

#include "tilegraph/status.h"

#include <stddef.h>

typedef enum tg_isa {
    TG_ISA_BASE = 0,    /* SSE2 (every x86-64), or portable C elsewhere */
    TG_ISA_AVX2,        /* AVX2 + FMA */
    TG_ISA_AVX512,      /* AVX-512F (+BW, VL), no AVX-512 BF16 */
    TG_ISA_AVX512_BF16, /* AVX-512 with the BF16 conversions and dot products */
} tg_isa;

/* What this CPU (and its OS) supports, whatever TILEGRAPH_ISA says. */
tg_isa tg_isa_cpu(void);
/* What the kernels may use: tg_isa_cpu capped by TILEGRAPH_ISA. The variable
 * is read once, on the first call; a value it does not know is ignored
 * with a warning on stderr (tg_isa_check refuses it). */
tg_isa tg_isa_get(void);
/* TG_ERR_INVALID_ARG naming TILEGRAPH_ISA and the values it takes when it
 * is set to anything else; commands call it at start. */
tg_status tg_isa_check(void);
const char *tg_isa_name(tg_isa isa);
/* "avx2 (TILEGRAPH_ISA=avx2; the CPU has avx512_bf16)", or the name alone. */
void tg_isa_describe(char *out, size_t cap);

#endif
