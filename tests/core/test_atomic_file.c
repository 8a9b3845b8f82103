/* tests/core/test_atomic_file.c - the write-to-temporary-then-rename helper,
 * stale-temporary cleaning, writability probes and the non-blocking
 * regular-file open (a FIFO must be refused, not waited on). */
#define _GNU_SOURCE
#include "tg_test.h"

#include "core/atomic_file.h"
#include "core/error.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "%s/atomic_file_test_%ld", TG_BINARY_DIR, (long)getpid());
    mkdir(dir, 0755);
}

static char *path_in(const char *name)
{
    return tg_test_path(dir, name);
}

static char *slurp(const char *path)
{
    static char buf[256];
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Files in `dir` whose name contains ".tmp.". */
static int count_temps(void)
{
    return tg_test_count_temps(dir);
}

static void test_commit_replaces_and_abort_keeps(void)
{
    const char *p = path_in("a.txt");
    TG_CHECK_OK(tg_atomic_file_write(p, "first", 5));
    TG_CHECK(slurp(p) && strcmp(slurp(p), "first") == 0);

    tg_atomic_file af;
    TG_CHECK_OK(tg_atomic_file_open(p, &af));
    fputs("second, unfinished", af.f);
    fflush(af.f);
    /* While being written, the final name still holds the old bytes. */
    TG_CHECK(strcmp(slurp(p), "first") == 0);
    TG_CHECK(count_temps() == 1);
    tg_atomic_file_abort(&af);
    TG_CHECK(strcmp(slurp(p), "first") == 0);
    TG_CHECK(count_temps() == 0);

    TG_CHECK_OK(tg_atomic_file_open(p, &af));
    fputs("third", af.f);
    TG_CHECK_OK(tg_atomic_file_commit(&af));
    TG_CHECK(strcmp(slurp(p), "third") == 0);
    TG_CHECK(count_temps() == 0 && af.tmp == NULL && af.f == NULL);
    tg_atomic_file_abort(&af); /* harmless on a released handle */
}

static void test_keeps_permissions(void)
{
    const char *p = path_in("perm.txt");
    TG_CHECK_OK(tg_atomic_file_write(p, "x", 1));
    chmod(p, 0640);
    TG_CHECK_OK(tg_atomic_file_write(p, "y", 1));
    struct stat st;
    TG_CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0640);
}

static void test_refuses_directory_target(void)
{
    const char *p = path_in("subdir");
    mkdir(p, 0755);
    tg_atomic_file af;
    TG_CHECK(tg_atomic_file_open(p, &af) == TG_ERR_IO);
    TG_CHECK(strstr(tg_error_message(), "is a directory, not a regular file") != NULL);
    TG_CHECK(af.tmp == NULL && count_temps() == 0);
    rmdir(p);
}

static void test_reserve_for_a_writer_that_opens_itself(void)
{
    const char *p = path_in("db.bin");
    tg_atomic_file af;
    TG_CHECK_OK(tg_atomic_file_reserve(p, &af));
    TG_CHECK(af.f == NULL && af.tmp && strstr(af.tmp, ".tmp.") != NULL);
    FILE *f = fopen(af.tmp, "wb");
    fputs("db", f);
    fclose(f);
    TG_CHECK(access(p, F_OK) != 0); /* not visible under its final name yet */
    TG_CHECK_OK(tg_atomic_file_commit(&af));
    TG_CHECK(strcmp(slurp(p), "db") == 0 && count_temps() == 0);
}

static void test_commit_of_vanished_temp_fails_cleanly(void)
{
    const char *p = path_in("gone.bin");
    TG_CHECK_OK(tg_atomic_file_write(p, "keep", 4));
    tg_atomic_file af;
    TG_CHECK_OK(tg_atomic_file_reserve(p, &af)); /* the writer never created it */
    TG_CHECK(tg_atomic_file_commit(&af) == TG_ERR_IO);
    TG_CHECK(strstr(tg_error_message(), "gone.bin") != NULL);
    TG_CHECK(strstr(tg_error_message(), "unchanged") != NULL);
    TG_CHECK(strcmp(slurp(p), "keep") == 0);
}

/* A pid that certainly does not run: a child that has been reaped. */
static long dead_pid(void)
{
    pid_t c = fork();
    if (c == 0)
        _exit(0);
    waitpid(c, NULL, 0);
    return (long)c;
}

static void test_stale_temporaries_of_dead_pids_are_removed(void)
{
    const char *p = path_in("stale.bin");
    char stale[600], live[600], other[600];
    snprintf(stale, sizeof stale, "%s.tmp.%ld", p, dead_pid());
    snprintf(live, sizeof live, "%s.tmp.%ld", p, (long)getppid()); /* running */
    snprintf(other, sizeof other, "%s/unrelated.tmp.%ld", dir, dead_pid());
    fclose(fopen(stale, "wb"));
    fclose(fopen(live, "wb"));
    fclose(fopen(other, "wb"));
    TG_CHECK_OK(tg_atomic_file_write(p, "new", 3));
    TG_CHECK(access(stale, F_OK) != 0);
    TG_CHECK(access(live, F_OK) == 0);  /* another running process's file is left alone */
    TG_CHECK(access(other, F_OK) == 0); /* only temporaries of this name */
    unlink(live);
    unlink(other);
}

static void test_stale_temporaries_by_prefix(void)
{
    char dead[600], live[600], other[600];
    long d = dead_pid();
    snprintf(dead, sizeof dead, "%s/tilegraph-%ld.trace.json.tmp.%ld", dir, d, d);
    snprintf(live, sizeof live, "%s/tilegraph-1.trace.json.tmp.%ld", dir, (long)getppid());
    snprintf(other, sizeof other, "%s/report.html.tmp.%ld", dir, d);
    fclose(fopen(dead, "wb"));
    fclose(fopen(live, "wb"));
    fclose(fopen(other, "wb"));
    TG_CHECK(tg_atomic_file_clean_stale_prefix(dir, "tilegraph-") == 1);
    TG_CHECK(access(dead, F_OK) != 0 && access(live, F_OK) == 0 && access(other, F_OK) == 0);
    unlink(live);
    unlink(other);
}

static void test_probe_writable(void)
{
    TG_CHECK_OK(tg_probe_writable("--save", path_in("fresh.safetensors")));
    TG_CHECK(access(path_in("fresh.safetensors"), F_OK) != 0 && count_temps() == 0);

    TG_CHECK(tg_probe_writable("--save", path_in("missing/x.safetensors")) == TG_ERR_IO);
    TG_CHECK(strstr(tg_error_message(), "--save") && strstr(tg_error_message(), "does not exist"));

    TG_CHECK(tg_probe_writable("--save", dir) == TG_ERR_IO);
    TG_CHECK(strstr(tg_error_message(), "is a directory") != NULL);

    TG_CHECK(tg_probe_writable("--save", "/proc/tilegraph.safetensors") == TG_ERR_IO);

    if (geteuid() != 0) { /* root writes anywhere */
        const char *ro = path_in("ro");
        mkdir(ro, 0555);
        char f[600];
        snprintf(f, sizeof f, "%s/x.bin", ro);
        TG_CHECK(tg_probe_writable("--save", f) == TG_ERR_IO);
        TG_CHECK(strstr(tg_error_message(), "Permission denied") != NULL);
        rmdir(ro);
    }
}

static void test_probe_writable_dir_creates_it(void)
{
    const char *d = path_in("prof/a/b");
    TG_CHECK_OK(tg_probe_writable_dir("--profile-dir", d));
    struct stat st;
    TG_CHECK(stat(d, &st) == 0 && S_ISDIR(st.st_mode));
    TG_CHECK(tg_probe_writable_dir("--profile-dir", path_in("a.txt")) == TG_ERR_IO);
    TG_CHECK(strstr(tg_error_message(), "not a directory") != NULL);
    rmdir(path_in("prof/a/b"));
    rmdir(path_in("prof/a"));
    rmdir(path_in("prof"));
}

/* Opening a FIFO for reading would block forever; the helper must refuse it
 * at once. Run in a child with an alarm so a regression fails, not hangs. */
static void test_open_regular_refuses_fifo_without_blocking(void)
{
    const char *fifo = path_in("f.safetensors");
    TG_CHECK(mkfifo(fifo, 0644) == 0);
    pid_t c = fork();
    if (c == 0) {
        alarm(5);
        int fd;
        tg_status s = tg_open_regular(fifo, &fd);
        int ok = s == TG_ERR_IO && fd == -1 &&
                 strstr(tg_error_message(), "is a FIFO, not a regular file") != NULL;
        FILE *f;
        ok = ok && tg_fopen_regular(fifo, &f) == TG_ERR_IO && f == NULL;
        ok = ok && tg_check_regular(fifo) == TG_ERR_IO;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(c, &status, 0);
    TG_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    unlink(fifo);
}

static void test_open_regular_other_kinds(void)
{
    int fd;
    TG_CHECK(tg_open_regular(dir, &fd) == TG_ERR_IO && fd == -1);
    TG_CHECK(strstr(tg_error_message(), "is a directory") != NULL);
    TG_CHECK(tg_open_regular("/dev/null", &fd) == TG_ERR_IO);
    TG_CHECK(strstr(tg_error_message(), "character device") != NULL);
    TG_CHECK(tg_open_regular(path_in("nope"), &fd) == TG_ERR_NOT_FOUND);
    TG_CHECK(strstr(tg_error_message(), "nope") != NULL);
    TG_CHECK_OK(tg_open_regular(path_in("a.txt"), &fd));
    char b[8] = {0};
    TG_CHECK(fd >= 0 && read(fd, b, sizeof b) == 5 && strcmp(b, "third") == 0);
    close(fd);
    TG_CHECK_OK(tg_check_regular(path_in("a.txt")));
}

int main(void)
{
    make_dir();
    TG_RUN(test_commit_replaces_and_abort_keeps);
    TG_RUN(test_keeps_permissions);
    TG_RUN(test_refuses_directory_target);
    TG_RUN(test_reserve_for_a_writer_that_opens_itself);
    TG_RUN(test_commit_of_vanished_temp_fails_cleanly);
    TG_RUN(test_stale_temporaries_of_dead_pids_are_removed);
    TG_RUN(test_stale_temporaries_by_prefix);
    TG_RUN(test_probe_writable);
    TG_RUN(test_probe_writable_dir_creates_it);
    TG_RUN(test_open_regular_refuses_fifo_without_blocking);
    TG_RUN(test_open_regular_other_kinds);
    tg_test_remove_dir(dir);
    return tg_test_finish();
}
