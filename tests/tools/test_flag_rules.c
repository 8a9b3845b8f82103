/* tests/tools/test_flag_rules.c - the command's flags say what they do
 * (issue 32): --help shows each default once, from the flag table; flags
 * that cannot apply are errors naming the flag and why; `compile` takes
 * train's training flags with train's defaults, so the program of
 * docs/executable-cache.md's example is the one train loads; option values
 * that would be cut or ignored (a NUL, an unknown trace channel, an empty
 * split) are refused. Needs Debian's Fashion-MNIST (skipped without it). */
#include "tg_test.h"
#include "tg_test_cli.h"

#include "tilegraph/options.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char tmpdir[256];

#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)
#define TRAIN "train --model fashion-basic --train-limit 160 --test-limit 40 --quiet "

/* item 15: no line of any command's --help says "(default" twice */
static void test_help_shows_one_default(void)
{
    const char *commands[] = {"train",   "infer",   "compile", "check",   "models",
                              "import",  "options", "report",  "analyse", "compare",
                              "devices", "monitor", "run"};
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char args[64];
        snprintf(args, sizeof args, "%s --help", commands[i]);
        EXPECT(args, 0, "usage");
        int lines = 0;
        for (char *line = tg_cli_output; line && *line; lines++) {
            char *end = strchr(line, '\n');
            size_t len = end ? (size_t)(end - line) : strlen(line);
            char one[1024];
            snprintf(one, sizeof one, "%.*s", (int)(len < sizeof one ? len : sizeof one - 1), line);
            const char *first = strstr(one, "(default");
            if (first && strstr(first + 1, "(default"))
                tg_test_fail(__FILE__, __LINE__, "tilegraph %s: two defaults: %s", args, one);
            line = end ? end + 1 : NULL;
        }
        TG_CHECK(lines > 3);
    }
    /* the ones a user saw, now each once and from the table */
    EXPECT("monitor --help", 0, "(default 0: list once)");
    EXPECT("import --help", 0, "dynamic batch dimension (default 1)");
    EXPECT("train --help", 0, "cross-entropy or mse (default cross-entropy)");
    EXPECT("train --help", 0, "learning rate (default 0.05; language models 0.001)");
    EXPECT("compile --help", 0, "learning rate (default 0.05; language models 0.001)");
}

/* issue 33: every flag of the option table's flag column is one that train or
 * compile takes (the commands name their flags from that column) */
static void test_flag_column_is_taken(void)
{
    static char help[65536];
    EXPECT("train --help", 0, "usage");
    snprintf(help, sizeof help, "%s", tg_cli_output);
    EXPECT("compile --help", 0, "usage");
    size_t used = strlen(help);
    snprintf(help + used, sizeof help - used, "%s", tg_cli_output);
    for (int i = 0; i < tg_options_count(); i++) {
        const char *flag = tg_options_flag(tg_options_key(i));
        if (!flag)
            continue;
        char line[64]; /* "  --offload " of "--offload weights" */
        snprintf(line, sizeof line, "\n  %.*s ", (int)strcspn(flag, " "), flag);
        if (!strstr(help, line))
            tg_test_fail(__FILE__, __LINE__,
                         "%s, the flag of %s, is not a flag of train or compile", flag,
                         tg_options_key(i));
    }
}

/* item 12: flags that cannot apply are errors naming the flag and why */
static void test_flags_that_cannot_apply(void)
{
    EXPECT("compile --model mnist-pipeline --batch-size 40 --target-description td.json", 2,
           "--target-description describes a tile processor and applies with --target mk2 "
           "only (the target is 'cpu')");
    EXPECT(
        "compile --model mnist-pipeline --batch-size 40 --target cpu --target-description td.json",
        2, "add --target mk2");
    EXPECT("train --model mnist-pipeline --loss mse --train-limit 40 --quiet", 1,
           "--loss applies to ONNX models");
    TG_CHECK(strstr(tg_cli_output, "mnist-pipeline brings its own loss") != NULL);
    EXPECT(TRAIN "--schedule 1f1b", 1,
           "pipelineSchedule 1f1b (--schedule) orders the stages of a pipeline and cannot "
           "apply with executionStrategy single");
    TG_CHECK(strstr(tg_cli_output, "test accuracy") == NULL);
    EXPECT("compile --model mnist-pipeline --batch-size 40 --strategy sharded --schedule 1f1b", 1,
           "cannot apply with executionStrategy sharded");
    /* where it applies it still works, and the default schedule is no error */
    EXPECT("compile --model mnist-pipeline --batch-size 40 --strategy pipelined "
           "--gradient-accumulation 4 "
           "--schedule 1f1b",
           0, "4 devices");
    EXPECT("compile --model mnist-pipeline --batch-size 40 --strategy sharded", 0, "devices");
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* item 5: the example of docs/executable-cache.md, as written there (train
 * with --train-limit and --test-limit added, which do not enter the
 * program): train loads the program compile saved instead of compiling
 * again and rewriting the file. */
static void test_executable_example(void)
{
    char doc[256], *text = NULL;
    snprintf(doc, sizeof doc, "%s/docs/executable-cache.md", TG_SOURCE_DIR);
    FILE *f = fopen(doc, "r");
    TG_CHECK(f != NULL);
    if (!f)
        return;
    text = calloc(1, 1 << 16);
    size_t n = fread(text, 1, (1 << 16) - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *c = strstr(text, "\ntilegraph compile --model fashion-basic");
    const char *t = strstr(text, "\ntilegraph train --model fashion-basic");
    TG_CHECK(c && t);
    if (!c || !t) {
        free(text);
        return;
    }
    char compile[256], train[256];
    snprintf(compile, sizeof compile, "%.*s", (int)strcspn(c + 11, "\n"), c + 11);
    snprintf(train, sizeof train, "%.*s", (int)strcspn(t + 11, "\n"), t + 11);
    free(text);
    TG_CHECK(strstr(compile, "--save-executable fb.tgx") && strstr(train, "--executable fb.tgx"));
    /* run in tmpdir, where fb.tgx goes */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd %s && %s/tilegraph %s > out.txt 2>&1", tmpdir, TG_BINARY_DIR,
             compile);
    TG_CHECK(system(cmd) == 0);
    char exe[512];
    snprintf(exe, sizeof exe, "%s/fb.tgx", tmpdir);
    long before = file_size(exe);
    TG_CHECK(before > 0);
    snprintf(cmd, sizeof cmd,
             "cd %s && %s/tilegraph %s --train-limit 320 --test-limit 64 --quiet > out.txt 2>&1",
             tmpdir, TG_BINARY_DIR, train);
    TG_CHECK(system(cmd) == 0);
    char out[512], buf[8192] = "";
    snprintf(out, sizeof out, "%s/out.txt", tmpdir);
    FILE *o = fopen(out, "r");
    if (o) {
        buf[fread(buf, 1, sizeof buf - 1, o)] = '\0';
        fclose(o);
    }
    if (strstr(buf, "warning") || !strstr(buf, "test accuracy"))
        tg_test_fail(__FILE__, __LINE__, "train did not load fb.tgx:\n%s", buf);
    TG_CHECK(file_size(exe) == before);
    /* compile takes train's training flags, and they reach the program */
    EXPECT("compile --model fashion-basic --batch-size 40 --optimizer sgd --lr 0.01 --momentum 0.9 "
           "--nesterov "
           "--weight-decay 0.001 --max-grad-norm 1",
           0, "fashion-basic");
    /* training flags other than the defaults give the same program too */
    const char *flags = "--model fashion-basic --batch-size 32 --seed 5 --optimizer adam --lr 0.01 "
                        "--weight-decay 0.001 --lr-schedule cosine --lr-warmup-epochs 0.5 "
                        "--epochs 2 --train-limit 320 --output-mode everyN "
                        "--device-iterations 2 --output-return-period 2";
    snprintf(cmd, sizeof cmd,
             "cd %s && %s/tilegraph compile %s --save-executable fl.tgx > out.txt 2>&1", tmpdir,
             TG_BINARY_DIR, flags);
    TG_CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd,
             "cd %s && %s/tilegraph train %s --executable fl.tgx --test-limit 64 --quiet > out.txt "
             "2>&1",
             tmpdir, TG_BINARY_DIR, flags);
    TG_CHECK(system(cmd) == 0);
    o = fopen(out, "r");
    buf[0] = '\0';
    if (o) {
        buf[fread(buf, 1, sizeof buf - 1, o)] = '\0';
        fclose(o);
    }
    if (strstr(buf, "warning") || !strstr(buf, "test accuracy"))
        tg_test_fail(__FILE__, __LINE__, "train did not load fl.tgx:\n%s", buf);
    EXPECT("compile --model mnist-pipeline --batch-size 40 --loss mse", 2,
           "--loss applies to ONNX models");
    EXPECT("compile --model mnist-pipeline --batch-size 40 --output-return-period 2", 2,
           "add --output-mode everyN");
    /* item 28: bytes after the program's end are not "truncated" */
    FILE *x = fopen(exe, "ab");
    TG_CHECK(x && fwrite("abcd", 1, 4, x) == 4);
    if (x)
        fclose(x);
    snprintf(cmd, sizeof cmd, "compile --model fashion-basic --batch-size 32 --executable %s", exe);
    EXPECT(cmd, 0, "4 bytes follow its end");
    TG_CHECK(strstr(tg_cli_output, "truncated") == NULL);
    EXPECT("compile --model fashion-basic --batch-size 40 --lr-schedule cosine", 2,
           "give --train-limit N");
    EXPECT("compile --model fashion-basic --batch-size 40 --lr-schedule cosine --epochs 3 "
           "--train-limit 320",
           0, "fashion-basic");
}

static void write_file(const char *name, const char *data, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    TG_CHECK(f && fwrite(data, 1, n, f) == n);
    if (f)
        fclose(f);
}

/* item 27: option values that would select nothing or be cut short */
static void test_options_refused(void)
{
    EXPECT(TRAIN "--engine-option trace.enable=true --engine-option trace.channels=nosuch", 1,
           "option 'trace.channels': 'nosuch' is not one of compile|engine|data|comms|*");
    EXPECT(TRAIN "--engine-option trace.channels=engine", 0, "test accuracy");
    EXPECT("compile --model mnist-pipeline --batch-size 40 --split ',,,,'", 1,
           "option 'split': ',,,,' has an empty name");
    EXPECT("compile --model mnist-pipeline --batch-size 40 --split 'layer2,,layer3'", 1,
           "has an empty name");
    EXPECT("compile --model mnist-pipeline --batch-size 40 --split 'layer2,'", 1,
           "has an empty name");
    /* "\u0000" in a JSON string, and a raw NUL in the file */
    const char escaped[] = "{\"replicationFactor\": 1, \"split\": \"layer2\\u0000layer3\"}";
    write_file("nul_escape.json", escaped, sizeof escaped - 1);
    char args[1024];
    snprintf(args, sizeof args,
             "compile --model mnist-pipeline --batch-size 40 --options %s/nul_escape.json", tmpdir);
    EXPECT(args, 1, "option 'split': its string holds a NUL character");
    const char raw[] = "{\"replicationFactor\": 1}\0{\"split\": \"layer2\"}";
    write_file("nul_raw.json", raw, sizeof raw - 1);
    snprintf(args, sizeof args,
             "compile --model mnist-pipeline --batch-size 40 --options %s/nul_raw.json", tmpdir);
    EXPECT(args, 1, "holds a NUL byte at offset 24");
}

int main(void)
{
    int begun = tg_test_fashion_tmpdir("flag_rules", tmpdir, sizeof tmpdir);
    if (begun)
        return begun;
    TG_RUN(test_help_shows_one_default);
    TG_RUN(test_flag_column_is_taken);
    TG_RUN(test_flags_that_cannot_apply);
    TG_RUN(test_executable_example);
    TG_RUN(test_options_refused);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
