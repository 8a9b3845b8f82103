/* tests/tools/test_train_resume.c - resuming and stopping say what
 * happened (issue 32): a resumed run with nothing left to train reports the
 * loaded weights' accuracy, not 0.00%; a run stopped early shows its
 * progress bar where it stopped, not at 100%; --max-steps counts the run's
 * host steps in all, those before --resume too; the checkpoint records the
 * training configuration and --resume refuses another one by name; --save
 * says what a failed write kept, and two runs cannot write one checkpoint.
 * Needs Debian's Fashion-MNIST (skipped without it). */
#include "tg_test.h"
#include "tg_test_cli.h"

#include "tilegraph/checkpoint.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[256];

#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)
/* 20 host steps per epoch, a fraction of a second each run */
#define RUN "train --model fashion-basic --train-limit 320 --test-limit 64 --seed 2 "

static const char *at(const char *name)
{
    return tg_test_path(tmpdir, name);
}

/* A number after `key` in the output (NAN when absent). */
static double number_after(const char *key)
{
    const char *p = strstr(tg_cli_output, key);
    return p ? atof(p + strlen(key)) : NAN;
}

/* item 1: --resume of a finished run */
static void test_resume_of_a_finished_run(void)
{
    char args[1024];
    snprintf(args, sizeof args, RUN "--quiet --epochs 2 --optimizer adamw --lr 0.001 --save %s",
             at("full.st"));
    EXPECT(args, 0, "test accuracy: ");
    double trained = number_after("test accuracy: ");
    TG_CHECK(trained > 20);
    snprintf(args, sizeof args,
             RUN "--quiet --epochs 2 --optimizer adamw --lr 0.001 --resume %s --save %s",
             at("full.st"), at("f2.st"));
    EXPECT(args, 0, "nothing left to train");
    TG_CHECK_NEAR(number_after("test accuracy: "), trained, 1e-9);
    /* --epochs below the checkpoint's epoch: the same */
    snprintf(args, sizeof args,
             RUN "--quiet --epochs 1 --optimizer adamw --lr 0.001 --resume %s --save %s",
             at("full.st"), at("f2.st"));
    EXPECT(args, 0, "nothing left to train");
    TG_CHECK_NEAR(number_after("test accuracy: "), trained, 1e-9);
    /* and with --json one record, with the accuracy */
    snprintf(args, sizeof args, RUN "--json --epochs 2 --optimizer adamw --lr 0.001 --resume %s",
             at("full.st"));
    EXPECT(args, 0, "\"nothing_to_train\"");
    TG_CHECK_NEAR(number_after("\"test_accuracy\":"), trained, 0.006); /* printed as %.2f */
}

/* item 2: a run stopped early shows its bar where it stopped */
static void test_progress_of_a_stopped_run(void)
{
    EXPECT(RUN "--max-steps 5", 0, "stopped by --max-steps at epoch 1, host step 5");
    TG_CHECK(strstr(tg_cli_output, "epoch 1/1  25% 5/20") != NULL);
    TG_CHECK(strstr(tg_cli_output, "epoch 1/1 100%") == NULL);
    TG_CHECK(strstr(tg_cli_output, "20/20") == NULL);
}

/* item 28: --max-steps counts the run's host steps in all, as its help says */
static void test_max_steps_in_all(void)
{
    char args[1024];
    snprintf(args, sizeof args, RUN "--quiet --epochs 2 --save %s --max-steps 7", at("m.st"));
    EXPECT(args, 0, "stopped by --max-steps at epoch 1, host step 7");
    snprintf(args, sizeof args, RUN "--quiet --epochs 2 --save %s --resume %s --max-steps 25",
             at("m.st"), at("m.st"));
    EXPECT(args, 0, "stopped by --max-steps at epoch 2, host step 5");
    EXPECT("train --help", 0, "N host steps in all (those before --resume count)");
}

/* The checkpoint's update counter (metadata "step"), -1 when unreadable. */
static long long update_count(const char *path)
{
    char buf[32];
    return tg_checkpoint_read_meta(path, "step", buf, sizeof buf) == TG_OK ? atoll(buf) : -1;
}

/* A copy of `from` whose metadata key `key` is renamed to one of the same
 * length (the header stays valid): a checkpoint written before the key. */
static void without_key(const char *from, const char *to, const char *key)
{
    FILE *f = fopen(from, "rb");
    TG_CHECK(f != NULL);
    if (!f)
        return;
    static char data[1 << 22];
    size_t n = fread(data, 1, sizeof data, f);
    fclose(f);
    char *hit = NULL;
    for (size_t i = 0; i + strlen(key) < n && !hit; i++)
        if (!memcmp(data + i, key, strlen(key)))
            hit = data + i;
    TG_CHECK(hit != NULL);
    if (hit)
        hit[strlen(key) - 1] = 'X';
    FILE *g = fopen(to, "wb");
    TG_CHECK(g && fwrite(data, 1, n, g) == n);
    if (g)
        fclose(g);
}

/* item 25: the checkpoint records the training configuration; --resume
 * refuses another one by name, --resume-weights-only takes it afresh */
static void test_resume_checks_the_configuration(void)
{
    char args[1024];
    snprintf(args, sizeof args, RUN "--quiet --epochs 2 --save %s --max-steps 5", at("c.st"));
    EXPECT(args, 0, "stopped by --max-steps");
    TG_CHECK(update_count(at("c.st")) == 5);
    const struct {
        const char *flags, *said;
    } cases[] = {
        {"--optimizer adam", "--optimizer sgd there, adam here"},
        {"--lr 0.1", "--lr 0.05 there, 0.1 here"},
        {"--momentum 0.9", "--momentum 0 there, 0.9 here"},
        {"--lr-schedule cosine", "--lr-schedule constant there, cosine here"},
        {"--precision bf16.32", "--precision 32.32 there, bf16.32 here"},
        {"--loss-scaling dynamic", "--loss-scaling none there, dynamic here"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, RUN "--quiet --epochs 2 %s --resume %s --save %s",
                 cases[i].flags, at("c.st"), at("x.st"));
        EXPECT(args, 1, cases[i].said);
        TG_CHECK(strstr(tg_cli_output, "--resume-weights-only") != NULL);
        TG_CHECK(strstr(tg_cli_output, "test accuracy") == NULL);
    }
    /* the same flags continue it, with the update counter */
    snprintf(args, sizeof args, RUN "--quiet --epochs 2 --resume %s --save %s", at("c.st"),
             at("same.st"));
    EXPECT(args, 0, "test accuracy");
    TG_CHECK(update_count(at("same.st")) == 40);
    /* --resume-weights-only: the weights and position, a fresh optimizer
     * (its update counter restarts: 35 updates, not 40) */
    snprintf(args, sizeof args,
             RUN "--quiet --epochs 2 --optimizer adam --lr 0.001 --resume %s "
                 "--resume-weights-only --save %s",
             at("c.st"), at("w.st"));
    EXPECT(args, 0, "--resume-weights-only");
    TG_CHECK(strstr(tg_cli_output, "--optimizer sgd there, adam here") &&
             strstr(tg_cli_output, "test accuracy"));
    TG_CHECK(update_count(at("w.st")) == 35);
    EXPECT(RUN "--resume-weights-only", 2, "--resume-weights-only applies to --resume FILE");
    /* a checkpoint from before the record: said, and resumed as before */
    without_key(at("c.st"), at("old.st"), "train_config");
    snprintf(args, sizeof args, RUN "--quiet --epochs 2 --optimizer adam --resume %s --save %s",
             at("old.st"), at("o2.st"));
    EXPECT(args, 0, "records no training configuration");
    TG_CHECK(strstr(tg_cli_output, "test accuracy") != NULL);
}

/* `sh -c` with file writes limited to 256 blocks (128 KiB in dash's
 * 512-byte blocks, 256 KiB in bash's 1024: both between the profiles
 * below) and SIGXFSZ ignored, so a write past it fails as on a full disk. */
static int run_limited(const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "sh -c \"trap '' XFSZ; ulimit -f 256; exec %s/tilegraph %s\"",
             TG_BINARY_DIR, args);
    return system(cmd);
}

static char *read_text(const char *path)
{
    static char buf[1 << 16];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    return buf;
}

/* item 28: a --save that fails (a full disk) names the checkpoint and says
 * the previous one is kept; the profiles: line names only profiles written */
static void test_failed_writes_said(void)
{
    char args[1024];
    snprintf(args, sizeof args, RUN "--quiet --save %s", at("keep.st"));
    EXPECT(args, 0, "saved: ");
    snprintf(args, sizeof args, RUN "--quiet --seed 9 --save %s > %s 2>&1", at("keep.st"),
             at("full.txt"));
    TG_CHECK(run_limited(args) != 0);
    const char *out = read_text(at("full.txt"));
    if (!strstr(out, "keep.st': File too large") ||
        !strstr(out, "the previous file there is kept, unchanged"))
        tg_test_fail(__FILE__, __LINE__, "--save on a full disk said:\n%s", out);
    TG_CHECK(update_count(at("keep.st")) == 20); /* the first run's, intact */
    /* the training profile (over 256 KiB) fails, the inference one is written */
    snprintf(args, sizeof args,
             "train --train-limit 3200 --test-limit 32 --batch-size 8 --quiet --profile-dir %s "
             "> %s 2>&1",
             at("prof"), at("prof.txt"));
    TG_CHECK(run_limited(args) != 0);
    out = read_text(at("prof.txt"));
    if (!strstr(out, "training/profile.sqlite: disk I/O error") || !strstr(out, "profiles: ") ||
        strstr(strstr(out, "profiles: "), "training/"))
        tg_test_fail(__FILE__, __LINE__, "a failed profile was listed:\n%s", out);
    TG_CHECK(strstr(out, "inference/profile.sqlite") != NULL);
}

/* item 28: two runs cannot write one checkpoint */
static void test_one_run_per_checkpoint(void)
{
    char args[1024];
    snprintf(args, sizeof args,
             "train --train-limit 8000 --test-limit 32 --batch-size 8 --epochs 50 --quiet "
             "--save %s",
             at("busy.st"));
    int pid = tg_cli_spawn(tmpdir, "bg.txt", NULL, NULL, args);
    int waited = 0;
    struct timespec tenth = {0, 100 * 1000000L};
    while (access(at("busy.st.lock"), F_OK) != 0 && waited++ < 600)
        nanosleep(&tenth, NULL);
    snprintf(args, sizeof args, RUN "--quiet --save %s", at("busy.st"));
    EXPECT(args, 1, "is writing that checkpoint");
    TG_CHECK(strstr(tg_cli_output, "give this run another --save FILE") != NULL);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    /* the lock goes with its process: the next run writes it */
    EXPECT(args, 0, "saved: ");
    TG_CHECK(access(at("busy.st.lock"), F_OK) != 0); /* removed at the end */
}

int main(void)
{
    int begun = tg_test_fashion_tmpdir("train_resume", tmpdir, sizeof tmpdir);
    if (begun)
        return begun;
    TG_RUN(test_resume_of_a_finished_run);
    TG_RUN(test_progress_of_a_stopped_run);
    TG_RUN(test_max_steps_in_all);
    TG_RUN(test_resume_checks_the_configuration);
    TG_RUN(test_failed_writes_said);
    TG_RUN(test_one_run_per_checkpoint);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
