/* tests/tools/test_eval_compiles.c - `train` compiles its evaluation
 * program once, beside the training one (issue 43, item 6): three epochs
 * evaluated at an evaluation batch of their own compile two programs in
 * all, counted as the host trace's "compile" scopes (one per session
 * created, runtime/session.c). Rebuilding the evaluation session per epoch,
 * or the training session for the evaluation batch, counts more. */
#include "tg_test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char dir[256];

/* The "compile" scopes begun in the one trace file of dir/tr (-1: none). */
static int compiles_traced(void)
{
    char tr[300];
    snprintf(tr, sizeof tr, "%s/tr", dir);
    DIR *d = opendir(tr);
    if (!d)
        return -1;
    int n = -1;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strstr(e->d_name, ".trace.json"))
            continue;
        char path[600];
        snprintf(path, sizeof path, "%s/%s", tr, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        static char text[1 << 22];
        size_t len = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[len] = '\0';
        n = 0;
        /* a scope is a begin ("ph":"B") and an end event of the same name */
        for (char *p = text; (p = strstr(p, "\"name\":\"compile\"")); p++) {
            char *end = strchr(p, '}');
            char *ph = strstr(p, "\"ph\":\"B\"");
            n += ph && end && ph < end;
        }
    }
    closedir(d);
    return n;
}

static void test_three_epochs_compile_two_programs(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "cd %s && TILEGRAPH_TRACE='{\"enable\":true,\"directory\":\"%s/tr\","
             "\"channels\":[\"compile\"]}' timeout 120 %s/tilegraph train --epochs 3 "
             "--train-limit 64 --test-limit 32 --batch-size 8 --eval-batch-size 16 --seed 3 "
             "--quiet > out.txt 2>&1",
             dir, dir, TG_BINARY_DIR);
    int r = system(cmd);
    TG_CHECK(WIFEXITED(r) && WEXITSTATUS(r) == 0);
    int n = compiles_traced();
    if (n != 2)
        tg_test_fail(__FILE__, __LINE__,
                     "%d programs compiled for 3 epochs and their evaluations, not 2 (training "
                     "once, evaluation once)",
                     n);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tg_eval_compiles_XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    TG_RUN(test_three_epochs_compile_two_programs);
    tg_test_remove_dir(dir);
    return tg_test_finish();
}
