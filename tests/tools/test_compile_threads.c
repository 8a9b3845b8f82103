/* tests/tools/test_compile_threads.c - what `tilegraph compile` says about
 * threads: the count and where it came from, in text and JSON, and the
 * warning (stdout and stderr) when the threads exceed the cores. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include "core/cpus.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];

#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)

static void test_threads_reported(void)
{
    EXPECT("compile --model mnist-pipeline --batch-size 40 --threads 1", 0,
           "threads: 1 per device (threadsPerDevice;");
    TG_CHECK(strstr(tg_cli_output, "warning:") == NULL);
    EXPECT("compile --model mnist-pipeline --batch-size 40", 0, "per device (default: ");
    tg_arena *a = tg_arena_create(1 << 16);
    const tg_json *j = tg_cli_json(
        tmpdir, a, "compile --model mnist-pipeline --batch-size 40 --json", __FILE__, __LINE__);
    const tg_json *t = j ? tg_json_get(j, "threads") : NULL;
    TG_CHECK(t != NULL);
    if (t) {
        double per = tg_cli_num(t, "per_device"), allowed = tg_cli_num(t, "cores_allowed");
        double free_cores = tg_cli_num(t, "cores_free");
        TG_CHECK(allowed == tg_cpu_count());
        TG_CHECK(free_cores >= 1 && free_cores <= allowed);
        TG_CHECK(per == tg_threads_default((int)free_cores, 1));
    }
    tg_arena_destroy(a);
}

static void test_oversubscription_warned(void)
{
    char args[128], want[96];
    int cores = tg_cpu_count();
    snprintf(args, sizeof args, "compile --model mnist-pipeline --batch-size 40 --threads %d",
             cores * 2);
    snprintf(want, sizeof want, "x %d threads = %d threads, but this process may use %d core",
             cores * 2, cores * 2, cores);
    EXPECT(args, 0, want);
    /* on stderr (from the compile) and in the report */
    TG_CHECK(strstr(tg_cli_output, "tilegraph: warning: ") && strstr(tg_cli_output, "\nwarning: "));
    TG_CHECK(tg_cli_run(tmpdir, args, 0) == 0); /* stdout alone: the report's line */
    TG_CHECK(!strstr(tg_cli_output, "tilegraph: warning") && strstr(tg_cli_output, "warning: "));
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_compile_threads_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_threads_reported);
    TG_RUN(test_oversubscription_warned);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
