/* tests/profile/test_profile_atomic.c - a profile is never visible under its
 * final name until complete, the previous one survives a new run until then,
 * a second run on the same directory is refused by name, and a failure to
 * write the profile during a run neither fails the run nor costs the
 * checkpoint (issue 17: D2, D4). */
#include "tg_test.h"
#include "tg_test_train.h"

#include "analyse/analyse.h"
#include "profile/reader.h"
#include "tilegraph/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];
static char final_path[128], tmp_path[128], lock_path[128];

static void start(tg_test_model *c, int runs)
{
    const char *kv[] = {"autoReport.all", "true", "autoReport.directory", dir, NULL};
    tg_optimizer opt = tg_optimizer_sgd(0.01f, 0.0f);
    tg_test_train(c, 4, &opt, kv, runs, 3, NULL);
}

static int temps_left(void)
{
    char sub[128];
    snprintf(sub, sizeof sub, "%s/training", dir);
    return tg_test_count_temps(sub);
}

static int64_t runs_recorded(const char *path)
{
    tg_profile_reader *r = NULL;
    int64_t v = -1;
    if (tg_profile_reader_open(path, &r) != TG_OK)
        return -1;
    if (tg_profile_reader_int(r, "SELECT COUNT(DISTINCT run) FROM trace", -1, &v) != TG_OK)
        v = -2;
    tg_profile_reader_close(r);
    return v;
}

static void test_written_under_a_temporary_name(void)
{
    tg_test_model c;
    start(&c, 1);
    /* While the session lives, only the temporary exists. */
    TG_CHECK(access(final_path, F_OK) != 0);
    TG_CHECK(access(tmp_path, F_OK) == 0);
    TG_CHECK_OK(tg_session_finish_profile(c.s));
    TG_CHECK(access(final_path, F_OK) == 0 && access(tmp_path, F_OK) != 0);
    TG_CHECK(runs_recorded(final_path) == 1);
    tg_test_model_destroy(&c);
    TG_CHECK(temps_left() == 0);
}

static void test_previous_profile_kept_until_complete(void)
{
    struct stat before, during;
    TG_CHECK(stat(final_path, &before) == 0);
    tg_test_model c;
    start(&c, 2);
    /* The old profile is whole and unchanged while the new one is written. */
    TG_CHECK(stat(final_path, &during) == 0 && during.st_ino == before.st_ino);
    TG_CHECK(runs_recorded(final_path) == 1);
    tg_test_model_destroy(&c); /* destroy commits too */
    TG_CHECK(runs_recorded(final_path) == 2);
    TG_CHECK(temps_left() == 0);
}

/* Another process holds the directory: this one is refused, naming it. */
static void test_second_run_on_a_directory_is_refused(void)
{
    int go[2], done[2];
    TG_CHECK(pipe(go) == 0 && pipe(done) == 0);
    pid_t child = fork();
    if (child == 0) {
        int fd = open(lock_path, O_RDWR | O_CREAT, 0666);
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        int ok = fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0;
        char pid[32];
        int len = snprintf(pid, sizeof pid, "%ld", (long)getpid());
        ok = ok && ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)len, 0) == len;
        (void)!write(go[1], ok ? "y" : "n", 1);
        char b;
        (void)!read(done[0], &b, 1); /* until the parent is done */
        _exit(0);
    }
    char b = 0;
    TG_CHECK(read(go[0], &b, 1) == 1 && b == 'y');
    tg_test_model c = {0};
    const char *kv[] = {"autoReport.all", "true", "autoReport.directory", dir, NULL};
    tg_optimizer opt = tg_optimizer_sgd(0.01f, 0.0f);
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), 4, &opt, &c.mg));
    tg_options *o = tg_options_create();
    tg_test_options_set(o, kv);
    tg_status st = tg_session_create(c.mg.graph, o, &c.s);
    char want[64];
    snprintf(want, sizeof want, "(pid %ld)", (long)child);
    TG_CHECK(st == TG_ERR_IO && strstr(tg_error_message(), "being written by another run"));
    TG_CHECK(strstr(tg_error_message(), want) != NULL);
    TG_CHECK(strstr(tg_error_message(), "--profile-dir") != NULL);
    TG_CHECK(runs_recorded(final_path) == 2); /* the other run's profile is untouched */
    tg_options_destroy(o);
    tg_test_model_destroy(&c);
    (void)!write(done[1], "x", 1);
    waitpid(child, NULL, 0);
    close(go[0]), close(go[1]), close(done[0]), close(done[1]);
}

/* A directory whose profile is still being written (the run holds the lock,
 * the file has no final name yet): analyse says so and names the writer,
 * where it said the directory holds no profile (issue 32 item 9). */
static void test_analyse_names_a_profile_being_written(void)
{
    char fresh[96], sub[128], lock[160];
    snprintf(fresh, sizeof fresh, "%s/being_written", dir);
    snprintf(sub, sizeof sub, "%s/training", fresh);
    snprintf(lock, sizeof lock, "%s/.profile.lock", sub);
    TG_CHECK(mkdir(fresh, 0777) == 0 && mkdir(sub, 0777) == 0);
    tg_profile_reader *r = NULL;
    TG_CHECK(tg_analyse_open(fresh, -1, &r) == TG_ERR_NOT_FOUND); /* no writer: holds no profile */
    int go[2], done[2];
    TG_CHECK(pipe(go) == 0 && pipe(done) == 0);
    pid_t child = fork();
    if (child == 0) {
        int fd = open(lock, O_RDWR | O_CREAT, 0666);
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        (void)!write(go[1], fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0 ? "y" : "n", 1);
        char b;
        (void)!read(done[0], &b, 1);
        _exit(0);
    }
    char b = 0, want[64];
    TG_CHECK(read(go[0], &b, 1) == 1 && b == 'y');
    TG_CHECK(tg_profile_writer_pid(sub) == (long)child);
    snprintf(want, sizeof want, "(pid %ld)", (long)child);
    TG_CHECK(tg_analyse_open(fresh, -1, &r) == TG_ERR_IO);
    TG_CHECK(strstr(tg_error_message(), "being written") && strstr(tg_error_message(), want));
    (void)!write(done[1], "x", 1);
    waitpid(child, NULL, 0);
    TG_CHECK(tg_profile_writer_pid(sub) == 0); /* the lock went with the process */
    close(go[0]), close(go[1]), close(done[0]), close(done[1]);
}

/* A full disk while recording (RLIMIT_FSIZE fails the writes with EFBIG, as
 * a full disk would): the run goes on, the checkpoint is written, the
 * failure is reported by tg_session_finish_profile, and the previous
 * profile and no temporary remain. */
static void test_profile_failure_keeps_training_and_checkpoint(void)
{
    tg_test_model c;
    start(&c, 0);
    TG_CHECK(access(tmp_path, F_OK) == 0);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 1024; /* every page write past the first KiB fails */
    TG_CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    tg_test_train_more(&c, 2, 4); /* failures would be test failures */
    int64_t step = tg_session_step(c.s);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    TG_CHECK(step > 0);
    char ckpt[128];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt.safetensors", dir);
    TG_CHECK_OK(tg_checkpoint_save(c.s, ckpt, "mnist-pipeline"));
    TG_CHECK(tg_session_finish_profile(c.s) == TG_ERR_IO);
    TG_CHECK(strstr(tg_error_message(), "profile") != NULL);
    TG_CHECK(tg_session_finish_profile(c.s) == TG_ERR_IO); /* asked again: the same answer */
    tg_test_model_destroy(&c);
    TG_CHECK(temps_left() == 0);
    TG_CHECK(runs_recorded(final_path) == 2); /* the previous complete profile */
    TG_CHECK(access(ckpt, F_OK) == 0);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tg_profile_atomic_XXXXXX");
    if (!TG_MKDTEMP(dir))
        return 1;
    snprintf(final_path, sizeof final_path, "%s/training/profile.sqlite", dir);
    snprintf(tmp_path, sizeof tmp_path, "%s.tmp.%ld", final_path, (long)getpid());
    snprintf(lock_path, sizeof lock_path, "%s/training/.profile.lock", dir);
    TG_RUN(test_written_under_a_temporary_name);
    TG_RUN(test_previous_profile_kept_until_complete);
    TG_RUN(test_second_run_on_a_directory_is_refused);
    TG_RUN(test_analyse_names_a_profile_being_written);
    TG_RUN(test_profile_failure_keeps_training_and_checkpoint);
    tg_test_remove_dir(dir);
    return tg_test_finish();
}
