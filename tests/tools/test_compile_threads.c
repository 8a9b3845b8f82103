/* tests/tools/test_compile_threads.c - what `tilegraph compile` says about
 * threads: the count and where it came from, in text and JSON, and the
 * warning (stdout and stderr) when the threads exceed the cores. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include "core/cpus.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];

#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)

/* A JSON boolean as 1 or 0; -1 when missing or not a boolean. */
static int flag(const tg_json *row, const char *key)
{
    const tg_json *v = tg_json_get(row, key);
    return v && v->type == TG_JSON_BOOL ? v->boolean : -1;
}

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
        TG_CHECK(per == tg_threads_default((int)allowed, 1)); /* not the free ones */
        TG_CHECK(flag(t, "default") == 1 && flag(t, "free_cores") == 0);
    }
    /* -1: the cores free at compile time, from --options or the flag alike
     * (the flag takes the option table's range, -1..1024) */
    char path[300];
    snprintf(path, sizeof path, "%s/free.json", tmpdir);
    FILE *f = fopen(path, "w");
    TG_CHECK(f != NULL);
    if (f) {
        fputs("{\"threadsPerDevice\": -1}\n", f);
        fclose(f);
    }
    snprintf(path, sizeof path,
             "compile --model mnist-pipeline --batch-size 40 --options %s/free.json --json",
             tmpdir);
    j = tg_cli_json(tmpdir, a, path, __FILE__, __LINE__);
    t = j ? tg_json_get(j, "threads") : NULL;
    TG_CHECK(t != NULL);
    if (t) {
        TG_CHECK(flag(t, "free_cores") == 1);
        TG_CHECK(tg_cli_num(t, "per_device") ==
                 tg_threads_default((int)tg_cli_num(t, "cores_free"), 1));
    }
    for (int k = 0; k < 2; k++) {
        j = tg_cli_json(tmpdir, a,
                        k ? "compile --model mnist-pipeline --batch-size 40 --threads -1 --json"
                          : "compile --model mnist-pipeline --batch-size 40 "
                            "--threads-per-device -1 --json",
                        __FILE__, __LINE__);
        t = j ? tg_json_get(j, "threads") : NULL;
        TG_CHECK(t != NULL && flag(t, "free_cores") == 1);
    }
    EXPECT("compile --model mnist-pipeline --batch-size 40 --threads -2", 2,
           "--threads must be between -1 and 1024");
    tg_arena_destroy(a);
}

/* A thread that keeps one core busy until told to stop. */
static volatile int spinning;
static void *spin(void *arg)
{
    (void)arg;
    volatile unsigned long n = 0;
    while (spinning)
        n++;
    return NULL;
}

/* The default thread count, and so a run's bits, do not follow the load:
 * the same short run beside a busy loop writes the same weights as without
 * it (the former default, the free cores, gave the loaded run fewer threads,
 * whose kernels sum in another order). */
static void test_default_ignores_load(void)
{
    static const char run[] = "train --model mnist-pipeline --train-limit 64 --test-limit 16 "
                              "--batch-size 16 "
                              "--eval-batch-size 16 --quiet --save %s/%s";
    char args[512];
    snprintf(args, sizeof args, run, tmpdir, "quiet.st");
    TG_CHECK(tg_cli_run(tmpdir, args, 1) == 0);
    pthread_t busy;
    spinning = 1;
    if (pthread_create(&busy, NULL, spin, NULL) != 0) {
        TG_CHECK(!"pthread_create");
        return;
    }
    snprintf(args, sizeof args, run, tmpdir, "loaded.st");
    int rc = tg_cli_run(tmpdir, args, 1);
    tg_arena *a = tg_arena_create(1 << 16);
    const tg_json *j = tg_cli_json(
        tmpdir, a, "compile --model mnist-pipeline --batch-size 40 --json", __FILE__, __LINE__);
    spinning = 0;
    pthread_join(busy, NULL);
    TG_CHECK(rc == 0);
    TG_CHECK(tg_cli_same_file(tmpdir, "quiet.st", "loaded.st"));
    const tg_json *t = j ? tg_json_get(j, "threads") : NULL;
    TG_CHECK(t && tg_cli_num(t, "per_device") == tg_cpu_count());
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
    TG_RUN(test_default_ignores_load);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
