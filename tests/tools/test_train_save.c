/* tests/tools/test_train_save.c - what a run trained is never lost to what
 * comes after training (issue 32, item 18): an evaluation program that
 * cannot fit is found at start-up, before any training; and --save (and the
 * --checkpoint-every Ne checkpoints) are written before the epoch's
 * evaluation, so a failure there costs no weights; and a --save that a
 * full disk refuses is tried again, then written to $TMPDIR, and the run
 * says where (issue 46, row 12). */
#include "tg_test.h"
#include "tg_test_cli.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[256];

static char *path(const char *name)
{
    return tg_test_path(tmpdir, name);
}

/* The command: training fits in 3 MB, the evaluation program (500
 * samples a step) does not. It used to train, then fail evaluating with
 * nothing saved; now it fails before training, saying so. */
static void test_eval_that_cannot_fit_fails_before_training(void)
{
    char args[1024];
    snprintf(args, sizeof args,
             "train --model fashion-basic --train-limit 400 --test-limit 1000 "
             "--memory-per-device 3000000 --quiet --save %s",
             path("m.safetensors"));
    int rc = tg_cli_run(tmpdir, args, 1);
    if (rc != 1 || !strstr(tg_cli_output, "evaluation: ") ||
        !strstr(tg_cli_output, "nothing was trained") ||
        !strstr(tg_cli_output, "--eval-batch-size") || strstr(tg_cli_output, "epoch 1"))
        tg_test_fail(__FILE__, __LINE__, "exit %d (want 1, failing before training):\n%.2000s", rc,
                     tg_cli_output);
    TG_CHECK(access(path("m.safetensors"), F_OK) != 0);
    /* a smaller evaluation batch fits, trains and saves */
    snprintf(args, sizeof args,
             "train --model fashion-basic --train-limit 400 --test-limit 1000 "
             "--memory-per-device 3000000 --eval-batch-size 16 --quiet --save %s",
             path("m.safetensors"));
    TG_CLI_EXPECT(tmpdir, args, 0, "test accuracy");
    TG_CHECK(access(path("m.safetensors"), F_OK) == 0);
}

static void read_output(char *buf, size_t cap)
{
    FILE *f = fopen(path("run.txt"), "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
}

/* Each checkpoint appears (a new inode: written atomically) before the
 * line of the epoch it follows, which is printed after that epoch's
 * evaluation: the evaluation, 10,000 steps of one sample, takes long
 * enough to be seen. Epoch 1's is --checkpoint-every 1e's, epoch 2's the
 * final --save. */
static void test_saved_before_evaluation(void)
{
    char args[1024];
    const char *ck = path("ck.safetensors");
    snprintf(args, sizeof args,
             "train --model fashion-basic --train-limit 64 --test-limit 10000 "
             "--eval-batch-size 1 --epochs 2 --quiet --checkpoint-every 1e --save %s",
             ck);
    pid_t pid = tg_cli_spawn(NULL, path("run.txt"), NULL, NULL, args);
    TG_CHECK(pid > 0);
    static char out[1 << 16];
    ino_t seen = 0;
    int saves = 0, status = 0;
    struct timespec pause = {0, 1000000L};         /* 1 ms */
    for (int polls = 0; polls < 120000; polls++) { /* two minutes at most */
        struct stat st;
        if (stat(ck, &st) == 0 && st.st_ino != seen) {
            seen = st.st_ino;
            saves++;
            read_output(out, sizeof out);
            char line[32];
            snprintf(line, sizeof line, "epoch %d:", saves);
            if (strstr(out, line))
                tg_test_fail(__FILE__, __LINE__,
                             "checkpoint %d was written after its epoch's evaluation:\n%.2000s",
                             saves, out);
        }
        if (waitpid(pid, &status, WNOHANG) == pid) {
            pid = 0;
            break;
        }
        nanosleep(&pause, NULL);
    }
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        tg_test_fail(__FILE__, __LINE__, "train did not finish in two minutes");
        return;
    }
    read_output(out, sizeof out);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        tg_test_fail(__FILE__, __LINE__, "train exited %d:\n%.2000s", status, out);
    TG_CHECK(saves == 2);
    TG_CHECK(strstr(out, "epoch 2:") != NULL);
    TG_CHECK(strstr(out, "saved: ") != NULL);
}

/* The final --save onto a full disk: a 64 KiB tmpfs, mounted in a private
 * mount namespace (unshare -rm: no root needed; skipped where user
 * namespaces are not allowed). The run used to end with "no file was
 * written there" and its weights gone. */
static void test_full_disk_rescued(void)
{
    if (system("unshare -rm true >/dev/null 2>&1") != 0) {
        printf("  skip: unshare -rm (a private mount namespace) is not permitted here\n");
        return;
    }
    char full[600], rescue[600], cmd[4096];
    snprintf(full, sizeof full, "%s", path("full"));
    snprintf(rescue, sizeof rescue, "%s", path("rescue"));
    TG_CHECK(mkdir(full, 0755) == 0 && mkdir(rescue, 0755) == 0);
    snprintf(cmd, sizeof cmd,
             "TMPDIR=%s timeout -s KILL 120 unshare -rm sh -c 'mount -t tmpfs -o size=64k none %s "
             "&& exec %s/tilegraph train --model mnist-pipeline --train-limit 64 --test-limit 16 "
             "--epochs 1 --quiet --save %s/w.safetensors' > %s 2>&1",
             rescue, full, TG_BINARY_DIR, full, path("full.txt"));
    int rc = system(cmd);
    size_t len = 0;
    char *out = tg_test_read_file(path("full.txt"), &len);
    TG_CHECK(out != NULL);
    if (!out)
        return;
    char rescued[1200] = "";
    DIR *d = opendir(rescue);
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d))
        if (strncmp(e->d_name, "tilegraph-rescued-", 18) == 0)
            snprintf(rescued, sizeof rescued, "%s/%s", rescue, e->d_name);
    if (d)
        closedir(d);
    char saved[1300];
    snprintf(saved, sizeof saved, "saved: %s", rescued);
    if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 1 || !rescued[0] ||
        !strstr(out, "No space left on device") || !strstr(out, "trying again") ||
        !strstr(out, "the checkpoint was written to") || !strstr(out, saved))
        tg_test_fail(__FILE__, __LINE__, "exit %d, rescued '%s':\n%.3000s", rc, rescued, out);
    free(out);
    /* what went there is the run's checkpoint */
    char args[1400];
    snprintf(args, sizeof args, "infer --model mnist-pipeline --load %s --count 1", rescued);
    TG_CHECK(rescued[0] && tg_cli_run(tmpdir, args, 1) == 0);
}

int main(void)
{
    int begun = tg_test_fashion_tmpdir("train_save", tmpdir, sizeof tmpdir);
    if (begun)
        return begun;
    TG_RUN(test_eval_that_cannot_fit_fails_before_training);
    TG_RUN(test_saved_before_evaluation);
    TG_RUN(test_full_disk_rescued);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
