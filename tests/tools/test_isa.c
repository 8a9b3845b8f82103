/* tests/tools/test_isa.c - TILEGRAPH_ISA (core/isa.h, issue 46 row 29):
 * avx2 holds the own kernels' dispatch (backend/cpu/simd.c), the bf16 conversions
 * (core/bf16.h) and oneDNN's JIT (backend/cpu/dnnl_util.c) to AVX2 in this process,
 * whatever the CPU has; the command says what it uses in --version, plans
 * with the set it is held to (the AVX2 plan of mnist-pipeline needs less
 * kernel scratch than the AVX-512 one where the CPU has AVX-512), and
 * refuses a value it does not know by name before any work.
 * TG_TEST_LABELS: isa quick */
#include "tg_test.h"
#include "tg_test_cli.h"

#include "core/bf16.h"
#include "core/isa.h"
#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/simd.h"

#include <stdlib.h>
#include <string.h>

static char tmpdir[256];

#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)

/* Set before the first question to the CPU: read once, as the library does. */
static void test_avx2_holds_every_dispatch(void)
{
    tg_isa cpu = tg_isa_cpu(), want = cpu < TG_ISA_AVX2 ? cpu : TG_ISA_AVX2;
    TG_CHECK(tg_isa_get() == want);
    TG_CHECK(tg_simd_level_get() <= TG_SIMD_AVX2);
    TG_CHECK(cpu < TG_ISA_AVX2 || tg_simd_level_get() == TG_SIMD_AVX2);
    TG_CHECK(!tg_bf16_hw());
    TG_CHECK(tg_dnnl_isa() <= dnnl_cpu_isa_avx2);
    /* the value is read once: changing it later changes nothing */
    setenv("TILEGRAPH_ISA", "avx512_bf16", 1);
    TG_CHECK(tg_isa_get() == want);
    setenv("TILEGRAPH_ISA", "avx2", 1);
}

static void test_command_says_and_refuses(void)
{
    EXPECT("--version", 0, "kernels use avx2");
    TG_CHECK(tg_isa_cpu() <= TG_ISA_AVX2 || strstr(tg_cli_output, "TILEGRAPH_ISA=avx2; the CPU"));
    setenv("TILEGRAPH_ISA", "avx1024", 1);
    EXPECT("compile --model mnist-pipeline", 2,
           "TILEGRAPH_ISA='avx1024' names no instruction set: use avx2, avx512");
    setenv("TILEGRAPH_ISA", "avx2", 1);
}

/* The plan is the held set's: on an AVX-512 CPU less scratch than its own. */
static void test_plan_follows_the_set(void)
{
    const char *args = "compile --model mnist-pipeline --json";
    tg_arena *a = tg_arena_create(1 << 16);
    const tg_json *j = tg_cli_json(tmpdir, a, args, __FILE__, __LINE__);
    double held =
        j ? tg_cli_num(tg_json_at(tg_json_get(j, "per_device"), 0), "scratch_peak_bytes") : -1;
    unsetenv("TILEGRAPH_ISA");
    j = tg_cli_json(tmpdir, a, args, __FILE__, __LINE__);
    double own =
        j ? tg_cli_num(tg_json_at(tg_json_get(j, "per_device"), 0), "scratch_peak_bytes") : -1;
    setenv("TILEGRAPH_ISA", "avx2", 1);
    TG_CHECK(held > 0 && own > 0);
    if (tg_isa_cpu() >= TG_ISA_AVX512)
        TG_CHECK(held < own);
    else
        TG_CHECK(held == own);
    tg_arena_destroy(a);
}

int main(void)
{
    setenv("TILEGRAPH_ISA", "avx2", 1); /* before anything asks the CPU */
    setenv("TILEGRAPH_CALIBRATION", "off", 1);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_isa_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return tg_test_finish();
    TG_RUN(test_avx2_holds_every_dispatch);
    TG_RUN(test_command_says_and_refuses);
    TG_RUN(test_plan_follows_the_set);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
