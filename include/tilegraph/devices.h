/* tilegraph/devices.h - what this machine offers: the host's cores, memory
 * and the vector instructions the kernels use, and the targets with their
 * devices (`tilegraph devices`, gc-info's role).
 *
 *     tg_host_info h;
 *     tg_host_query(&h);
 *     for (int i = 0; i < tg_target_count(); i++) {
 *         tg_target_info t;
 *         tg_target_info_get(i, &t);
 *     }
 */
#ifndef TILEGRAPH_DEVICES_H
#define TILEGRAPH_DEVICES_H

#include "tilegraph/export.h"
#include "tilegraph/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Instruction-set features looked for, in this order (names as in
 * /proc/cpuinfo): the ones the kernels choose between at run time (avx2,
 * fma, avx512f) and those their conversions could use. */
#define TG_ISA_FEATURE_COUNT 10
TG_API const char *tg_isa_feature_name(int i);

typedef struct tg_host_info {
    char cpu_model[96];             /* "Intel(R) Xeon(R) ..." or "unknown" */
    int cores_online;               /* logical CPUs online */
    int cores_usable;               /* of which this process may run on (sched_getaffinity) */
    int64_t memory_total;           /* bytes of RAM (0 when unknown) */
    int64_t memory_available;       /* bytes available now (MemAvailable; 0 when unknown) */
    bool isa[TG_ISA_FEATURE_COUNT]; /* per tg_isa_feature_name(i) */
    char kernel_level[16];          /* the instruction sets the kernels use: base, avx2, avx512 or
                                       avx512_bf16 (the CPU's, held to TILEGRAPH_ISA) */
} tg_host_info;

/* Fill *out from the operating system and cpuid. Never fails for missing
 * information (fields stay 0 or "unknown"); TG_ERR_INVALID_ARG for NULL. */
TG_API tg_status tg_host_query(tg_host_info *out);
/* The instruction sets the kernels use: the CPU's, capped by the
 * TILEGRAPH_ISA environment variable (avx2, avx512 or avx512_bf16; read once
 * per process), e.g. "avx2 (TILEGRAPH_ISA=avx2; the CPU has avx512_bf16)". */
TG_API void tg_host_isa_describe(char *out, size_t cap);
/* TG_ERR_INVALID_ARG naming TILEGRAPH_ISA when it holds none of those. */
TG_API tg_status tg_host_isa_check(void);

typedef struct tg_target_info {
    char name[32];             /* the value of option "target" */
    bool tiled;                /* a tile processor (memory checked per tile) */
    bool takes_description;    /* option targetDescription may describe its tiles */
    int max_devices;           /* most devices one replica can be placed over (option "devices") */
    int threads_per_device;    /* cpu: the default threads per device; tiled: 0 */
    int tiles;                 /* tiled: tiles per device; else 0 */
    int workers_per_tile;      /* tiled: hardware threads per tile */
    int64_t memory_per_tile;   /* tiled: bytes; else 0 */
    int64_t memory_per_device; /* tiled: tiles x memory per tile; cpu: 0 (no limit unless
                                  memoryPerDevice) */
    double clock_hz;           /* tiled: clock; else 0 */
    const char *description;   /* one line */
} tg_target_info;

/* The most devices one replica is placed over, whatever the target (option
 * "devices", the analysis's tables, the monitor's records). */
#define TG_MAX_DEVICES 64

/* The registered targets (target/targets.c): `tilegraph devices` lists them
 * and option "target" takes their names. */
TG_API int tg_target_count(void);
/* The name of target i (the value of option "target"), NULL out of range. */
TG_API const char *tg_target_name(int i);
/* Target i (0 <= i < tg_target_count()); TG_ERR_INVALID_ARG out of range. */
TG_API tg_status tg_target_info_get(int i, tg_target_info *out);
/* TG_OK when `name` is a registered target, else TG_ERR_CONFIG naming it as
 * the value of option "target" and listing the targets. Compiling checks the
 * option with it (options themselves are core's, below the targets, and take
 * any name); a program that wants the error when the option is given, as the
 * command does for --target, calls it then. */
TG_API tg_status tg_target_check(const char *name);

#ifdef __cplusplus
}
#endif
#endif
