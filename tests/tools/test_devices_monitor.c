/* tests/tools/test_devices_monitor.c - `tilegraph devices` and `tilegraph
 * monitor` (issue 13, item 6): devices --json lists the host and both
 * targets; a training started here appears in monitor --json with its
 * replicas and planned memory, and is forgotten once killed; the off switch
 * keeps it out; an unwritable registry costs one warning, never the run.
 * Needs Debian's Fashion-MNIST for the training (skipped without it). */
#include "tg_test.h"
#include "tg_test_cli.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[256], registry[300];

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static void test_devices_json(void)
{
    tg_arena *a = tg_arena_create(1 << 16);
    const tg_json *root = tg_cli_json(tmpdir, a, "devices --json", __FILE__, __LINE__);
    const tg_json *host = tg_json_get(root, "host");
    TG_CHECK(host != NULL);
    double online = tg_cli_num(host, "cores_online"), usable = tg_cli_num(host, "cores_usable");
    TG_CHECK(online >= 1 && usable >= 1 && usable <= online);
    TG_CHECK(tg_cli_num(host, "memory_total") > 0);
    TG_CHECK(tg_json_get(tg_json_get(host, "isa"), "avx2") != NULL);
    const tg_json *targets = tg_json_get(root, "targets");
    bool cpu = false, mk2 = false;
    for (size_t i = 0; targets && i < targets->count; i++) {
        const tg_json *t = tg_json_at(targets, i);
        if (!strcmp(tg_cli_str(t, "name"), "cpu"))
            cpu = tg_cli_num(t, "max_devices") >= 1 && tg_cli_num(t, "threads_per_device") >= 1;
        if (!strcmp(tg_cli_str(t, "name"), "mk2"))
            mk2 = tg_cli_num(t, "tiles") == 1472 &&
                  tg_cli_num(t, "memory_per_device") == 1472.0 * 638976.0;
    }
    TG_CHECK(cpu);
    TG_CHECK(mk2);
    tg_arena_destroy(a);
    TG_CLI_EXPECT(tmpdir, "devices", 0, "instruction sets");
    TG_CLI_EXPECT(tmpdir, "devices --help", 0, "tilegraph devices [--json]");
    TG_CLI_EXPECT(tmpdir, "devices --bogus", 2, "--bogus");
    TG_CLI_EXPECT(tmpdir, "monitor --help", 0, "--watch");
    TG_CLI_EXPECT(tmpdir, "monitor --watch 0", 2, "--watch");
}

static pid_t spawn_train(const char *env_name, const char *env_value)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        if (env_name)
            setenv(env_name, env_value, 1);
        char bin[512];
        snprintf(bin, sizeof bin, "%s/tilegraph", TG_BINARY_DIR);
        execl(bin, bin, "train", "--epochs", "50", "--replicas", "2", (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* The monitor's row for pid, or NULL. */
static const tg_json *row_of(const tg_json *rows, pid_t pid)
{
    for (size_t i = 0; rows && i < rows->count; i++)
        if (tg_cli_num(tg_json_at(rows, i), "pid") == (double)pid &&
            !strcmp(tg_cli_str(tg_json_at(rows, i), "program"), "training"))
            return tg_json_at(rows, i);
    return NULL;
}

/* Poll monitor --json for up to `ms` until pid's row is there (want) or not. */
static bool wait_row(pid_t pid, bool want, long ms, tg_arena *a, const tg_json **row)
{
    for (long t = 0; t <= ms; t += 100) {
        const tg_json *rows = tg_cli_json(tmpdir, a, "monitor --json", __FILE__, __LINE__);
        *row = row_of(rows, pid);
        if ((*row != NULL) == want)
            return true;
        sleep_ms(100);
    }
    return false;
}

static void test_monitor_lists_and_forgets(void)
{
    if (!tg_test_fashion_dir()) {
        printf("  (skipped: no Fashion-MNIST)\n");
        return;
    }
    tg_arena *a = tg_arena_create(1 << 16);
    pid_t pid = spawn_train(NULL, NULL);
    const tg_json *row = NULL;
    TG_CHECK(wait_row(pid, true, 30000, a, &row));
    if (row) {
        TG_CHECK(tg_cli_num(row, "replicas") == 2);
        TG_CHECK(tg_cli_num(row, "devices") == 1);
        TG_CHECK(!strcmp(tg_cli_str(row, "target"), "cpu"));
        TG_CHECK(!strcmp(tg_cli_str(row, "strategy"), "single"));
        const tg_json *mem = tg_json_get(row, "memory");
        TG_CHECK(mem && mem->count == 1 && tg_json_at(mem, 0)->number > 0);
        TG_CHECK(strstr(tg_cli_str(row, "command"), "train --epochs 50") != NULL);
    }
    TG_CLI_EXPECT(tmpdir, "monitor", 0, "training");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    TG_CHECK(wait_row(pid, false, 2000, a, &row));
    /* and its record is gone from the registry, not only hidden */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q '^%d-'", registry, (int)pid);
    TG_CHECK(system(cmd) != 0);
    tg_arena_destroy(a);
}

static void test_monitor_off_and_unwritable(void)
{
    if (!tg_test_fashion_dir())
        return;
    tg_arena *a = tg_arena_create(1 << 16);
    pid_t pid = spawn_train("TILEGRAPH_MONITOR", "0");
    const tg_json *row = NULL;
    sleep_ms(3000); /* long enough to have compiled and registered, had it wanted to */
    TG_CHECK(wait_row(pid, false, 0, a, &row));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    tg_arena_destroy(a);
    /* a registry that cannot exist: the training runs to the end, one warning */
    setenv("TILEGRAPH_MONITOR_DIR", "/dev/null/registry", 1);
    TG_CLI_EXPECT(tmpdir, "train --epochs 1 --max-steps 5", 0, "warning: not listed");
    const char *first = strstr(tg_cli_output, "warning: not listed");
    TG_CHECK(first && !strstr(first + 1, "warning: not listed"));
    setenv("TILEGRAPH_MONITOR_DIR", registry, 1);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_monitor_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    snprintf(registry, sizeof registry, "%s/registry", tmpdir);
    setenv("TILEGRAPH_MONITOR_DIR", registry, 1); /* not the sessions of other users */
    TG_RUN(test_devices_json);
    TG_RUN(test_monitor_lists_and_forgets);
    TG_RUN(test_monitor_off_and_unwritable);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
