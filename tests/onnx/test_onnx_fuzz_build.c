/* tests/onnx/test_onnx_fuzz_build.c - fuzz/corpus/onnx_build replayed
 * through the graph builder and the compiler in the ordinary run (and so
 * under ASan/UBSan in the sanitizer builds): the seeds, and the inputs
 * fuzz_onnx_build found (regress_*.onnx: a Reshape whose target dims
 * overflowed their product, an attribute without a name read as NULL, a Tile
 * and an Expand of constants to 2^30 elements folded for minutes). Each must
 * build and compile or be refused with a message (onnx_build_check.h), in a
 * few seconds, leaking nothing. */
#include "tg_test.h"

#include "../../fuzz/onnx_build_check.h"
#include "core/alloc.h"

#include <dirent.h>
#include <stdio.h>
#include <time.h>

static int replay(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    int64_t live = tg_alloc_live_bytes();
    clock_t t0 = clock();
    tg_fuzz_onnx_build_one(buf, n);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    if (tg_alloc_live_bytes() != live)
        tg_test_fail(__FILE__, __LINE__, "%s leaked %lld bytes", path,
                     (long long)(tg_alloc_live_bytes() - live));
    if (secs > 20)
        tg_test_fail(__FILE__, __LINE__, "%s took %.1f s of CPU to build and compile", path, secs);
    return 1;
}

static void test_corpus_builds_or_is_refused(void)
{
    const char *dir = TG_SOURCE_DIR "/fuzz/corpus/onnx_build";
    DIR *d = opendir(dir);
    TG_CHECK(d != NULL);
    int files = 0, regressions = 0;
    struct dirent *e;
    char path[4096];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        files += replay(path);
        regressions += strncmp(e->d_name, "regress_", 8) == 0;
    }
    if (d)
        closedir(d);
    printf("    %d inputs (%d found by the fuzzer) built and compiled or refused\n", files,
           regressions);
    TG_CHECK(files >= 30 && regressions >= 4);
}

int main(void)
{
    TG_RUN(test_corpus_builds_or_is_refused);
    return tg_test_finish();
}
