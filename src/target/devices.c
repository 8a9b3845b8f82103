/* target/devices.c - what this machine offers (tilegraph/devices.h): cores,
 * memory and instruction-set features of the host (the built-in targets'
 * devices are listed by target/targets.c). Read from /proc, sched_getaffinity and cpuid; nothing
 * here fails for missing information, it is shown as unknown instead.
 */
#define _GNU_SOURCE
#include "tilegraph/devices.h"

#include "core/meminfo.h"
#include "core/error.h"
#include "core/pool.h"
#include "core/isa.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define TG_HAVE_CPUID 1
#endif

static const char *const isa_names[TG_ISA_FEATURE_COUNT] = {
    "sse4_2",  "avx",      "avx2",     "fma",         "f16c",
    "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_fp16"};

const char *tg_isa_feature_name(int i)
{
    return i >= 0 && i < TG_ISA_FEATURE_COUNT ? isa_names[i] : NULL;
}

/* cpuid leaf/subleaf registers; false when the leaf does not exist. The
 * compiler's __builtin_cpu_supports does not know every feature on every
 * version (avx512_bf16), so the bits are read directly. */
static bool cpuid(unsigned leaf, unsigned sub, unsigned r[4])
{
#ifdef TG_HAVE_CPUID
    if (__get_cpuid_max(0, NULL) < leaf)
        return false;
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
    return true;
#else
    (void)leaf, (void)sub, (void)r;
    return false;
#endif
}

/* Whether the OS saves the AVX (and AVX-512) registers: without it the
 * cpuid bits mean nothing (XGETBV of XCR0). */
static void os_vector_state(bool *avx, bool *avx512)
{
    *avx = *avx512 = false;
#ifdef TG_HAVE_CPUID
    unsigned r[4];
    if (!cpuid(1, 0, r) || !(r[2] & (1u << 27))) /* OSXSAVE */
        return;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    *avx = (lo & 0x6) == 0x6;
    *avx512 = *avx && (lo & 0xe0) == 0xe0;
#endif
}

static void query_isa(bool isa[TG_ISA_FEATURE_COUNT])
{
    unsigned l1[4] = {0}, l7[4] = {0}, l71[4] = {0};
    bool os_avx, os_avx512;
    memset(isa, 0, sizeof(bool) * TG_ISA_FEATURE_COUNT);
    if (!cpuid(1, 0, l1))
        return;
    cpuid(7, 0, l7);
    if (l7[0] >= 1)
        cpuid(7, 1, l71);
    os_vector_state(&os_avx, &os_avx512);
    isa[0] = (l1[2] >> 20) & 1;                /* sse4.2: ecx 20 */
    isa[1] = os_avx && ((l1[2] >> 28) & 1);    /* avx: ecx 28 */
    isa[2] = os_avx && ((l7[1] >> 5) & 1);     /* avx2: leaf 7 ebx 5 */
    isa[3] = os_avx && ((l1[2] >> 12) & 1);    /* fma: ecx 12 */
    isa[4] = os_avx && ((l1[2] >> 29) & 1);    /* f16c: ecx 29 */
    isa[5] = os_avx512 && ((l7[1] >> 16) & 1); /* avx512f: ebx 16 */
    isa[6] = os_avx512 && ((l7[1] >> 30) & 1); /* avx512bw: ebx 30 */
    isa[7] = os_avx512 && ((l7[1] >> 31) & 1); /* avx512vl: ebx 31 */
    isa[8] = os_avx512 && ((l71[0] >> 5) & 1); /* avx512_bf16: leaf 7.1 eax 5 */
    isa[9] = os_avx512 && ((l7[3] >> 23) & 1); /* avx512_fp16: leaf 7 edx 23 */
}

static void query_cpu_model(char *out, size_t cap)
{
    snprintf(out, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon)
            continue;
        colon += 1 + (colon[1] == ' ');
        colon[strcspn(colon, "\n")] = 0;
        snprintf(out, cap, "%s", colon);
        break;
    }
    fclose(f);
}

static int usable_cores(int online)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return online;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : online;
}

tg_status tg_host_query(tg_host_info *out)
{
    if (!out)
        return tg_error(TG_ERR_INVALID_ARG, "tg_host_query: no output");
    memset(out, 0, sizeof *out);
    query_cpu_model(out->cpu_model, sizeof out->cpu_model);
    out->cores_online = tg_cpu_count();
    out->cores_usable = usable_cores(out->cores_online);
    tg_meminfo(&out->memory_total, &out->memory_available);
    query_isa(out->isa);
    snprintf(out->kernel_level, sizeof out->kernel_level, "%s", tg_isa_name(tg_isa_get()));
    return TG_OK;
}
