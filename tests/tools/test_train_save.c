/* tests/tools/test_train_save.c - what a run trained is never lost to what
 * comes after training (issue 32, item 18): an evaluation program that
 * cannot fit is found at start-up, before any training; and --save (and the
 * --checkpoint-every Ne checkpoints) are written before the epoch's
 * evaluation, so a failure there costs no weights. */
#include "tg_test.h"
#include "tg_test_cli.h"

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
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
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

int main(void)
{
    if (!tg_test_fashion_dir()) {
        printf("  skip: Fashion-MNIST not installed\n");
        return 77;
    }
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_train_save_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_eval_that_cannot_fit_fails_before_training);
    TG_RUN(test_saved_before_evaluation);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
