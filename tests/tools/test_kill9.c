/* tests/tools/test_kill9.c - kill -9 at random moments of a run that saves
 * checkpoints (--save, --checkpoint-every) and writes profiles: after every
 * kill each file under its final name must load, and after the next complete
 * run no temporary (.tmp.PID) may be left (issue 17, "Done when").
 * Bounded: 10 kills of at most ~2 s each. Needs Debian's Fashion-MNIST.
 * TG_TEST_LABELS: slow */
#include "tg_test.h"
#include "tg_test_cli.h"

#include "data/safetensors.h"
#include "profile/reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DATA "/usr/share/datasets/fashion-mnist"
#define KILLS 10

static char dir[256];

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static char *path(const char *name)
{
    return tg_test_path(dir, name);
}

/* Every file present under its final name loads. */
static void check_loadable(int round)
{
    if (access(path("ck.st"), F_OK) == 0) {
        tg_safetensors *f = NULL;
        tg_status s = tg_safetensors_load(path("ck.st"), &f);
        if (s != TG_OK)
            tg_test_fail(__FILE__, __LINE__, "kill %d: ck.st does not load: %s", round,
                         tg_error_message());
        else if (!tg_safetensors_metadata(f, "train_epoch"))
            tg_test_fail(__FILE__, __LINE__, "kill %d: ck.st lacks its resume position", round);
        tg_safetensors_destroy(f);
    }
    const char *profiles[] = {"prof/training/profile.sqlite", "prof/inference/profile.sqlite"};
    for (int i = 0; i < 2; i++) {
        if (access(path(profiles[i]), F_OK) != 0)
            continue;
        tg_profile_reader *r = NULL;
        if (tg_profile_reader_open(path(profiles[i]), &r) != TG_OK)
            tg_test_fail(__FILE__, __LINE__, "kill %d: %s does not open: %s", round, profiles[i],
                         tg_error_message());
        tg_profile_reader_close(r);
    }
}

static int temps_in(const char *sub, int report)
{
    int n = 0;
    DIR *d = opendir(path(sub));
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) {
            if (report)
                fprintf(stderr, "left behind: %s/%s\n", sub, e->d_name);
            n++;
        }
    if (d)
        closedir(d);
    return n;
}

static void test_kill9_loop(void)
{
    const char *run = "train --train-limit 3000 --test-limit 200 --batch-size 8 --epochs 3 "
                      "--quiet --json --seed 7 --save ck.st --checkpoint-every 7 "
                      "--profile-dir prof";
    srand(17);
    int saw_checkpoint = 0, saw_temp = 0;
    for (int k = 0; k < KILLS; k++) {
        pid_t pid = tg_cli_spawn(dir, "out.txt", NULL, NULL, run);
        sleep_ms(150 + rand() % 1800);
        saw_temp += temps_in(".", 0) + temps_in("prof/training", 0) > 0;
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        check_loadable(k);
        saw_checkpoint += access(path("ck.st"), F_OK) == 0;
    }
    TG_CHECK(saw_checkpoint > 0); /* the kills did land during training */
    /* The next run, to the end, finds and removes what the killed ones left. */
    pid_t pid =
        tg_cli_spawn(dir, "out.txt", NULL, NULL,
                     "train --train-limit 64 --test-limit 32 --batch-size 8 --epochs 1 --quiet "
                     "--json --seed 7 --save ck.st --checkpoint-every 2 --profile-dir prof");
    int status;
    waitpid(pid, &status, 0);
    TG_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    check_loadable(KILLS);
    TG_CHECK(temps_in(".", 1) == 0);
    TG_CHECK(temps_in("prof/training", 1) == 0);
    TG_CHECK(temps_in("prof/inference", 1) == 0);
    printf("  %d kills, %d with a checkpoint on disk, %d while a temporary existed\n", KILLS,
           saw_checkpoint, saw_temp);
}

int main(void)
{
    if (access(DATA "/t10k-images-idx3-ubyte.gz", R_OK) != 0) {
        printf("skipped: %s is not installed\n", DATA);
        return 77;
    }
    snprintf(dir, sizeof dir, "%s/kill9_test_%ld", TG_BINARY_DIR, (long)getpid());
    mkdir(dir, 0755);
    TG_RUN(test_kill9_loop);
    tg_test_remove_dir(dir);
    return tg_test_finish();
}
