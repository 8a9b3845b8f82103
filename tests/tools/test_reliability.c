/* tests/tools/test_reliability.c - nothing lost, nothing hangs, nothing
 * silently wrong (issue 17), as a user meets it through `tilegraph`:
 * FIFOs and directories where files are expected, outputs probed before
 * training, engine-option variables that take engine options only,
 * --checkpoint-every/--resume giving a bit-identical run, SIGTERM/SIGINT
 * stopping cleanly with 143/130, NaN and damaged checkpoints refused, JSON
 * without NaN, trace failures that change the exit code.
 * Every command runs under `timeout`, so a hang fails the test instead of
 * hanging it. Needs Debian's Fashion-MNIST (skipped without it). */
#include "tg_test.h"
#include "tg_test_cli.h"

#include "core/arena.h"
#include "core/json.h"
#include "data/safetensors.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define DATA "/usr/share/datasets/fashion-mnist"
/* a small, quick run: 12 host steps per epoch */
#define SMALL "--train-limit 96 --test-limit 32 --batch-size 8 --quiet --json --seed 3 "

static char dir[256];
static char out[1 << 16];

/* Run `tilegraph ARGS` in dir (env may be "" or "VAR=value ..."), at most
 * 120 s; stdout and stderr into `out`. Returns the exit code (124: timed out). */
static int run(const char *env, const char *fmt, ...)
{
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd %s && %s timeout 120 %s/tilegraph %s > out.txt 2>&1", dir, env,
             TG_BINARY_DIR, args);
    int r = system(cmd);
    char path[512];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
    out[n] = '\0';
    if (f)
        fclose(f);
    return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

#define EXPECT(code, text, env, ...)                                                               \
    do {                                                                                           \
        int rc_ = run(env, __VA_ARGS__);                                                           \
        if (rc_ != (code) || !strstr(out, text))                                                   \
            tg_test_fail(__FILE__, __LINE__, "exit %d (want %d and '%s'), output:\n%.1500s", rc_,  \
                         code, text, out);                                                         \
    } while (0)

static char *in_dir(const char *name)
{
    return tg_test_path(dir, name);
}

static long file_bytes(const char *path, unsigned char **data)
{
    size_t n = 0;
    *data = (unsigned char *)tg_test_read_file(path, &n);
    return *data ? (long)n : -1;
}

static int same_file(const char *a, const char *b)
{
    unsigned char *x = NULL, *y = NULL;
    long n = file_bytes(a, &x), m = file_bytes(b, &y);
    int same = n > 0 && n == m && memcmp(x, y, (size_t)n) == 0;
    free(x);
    free(y);
    return same;
}

static void write_bytes(const char *path, const unsigned char *data, long n)
{
    FILE *f = fopen(path, "wb");
    TG_CHECK(f && fwrite(data, 1, (size_t)n, f) == (size_t)n);
    if (f)
        fclose(f);
}

/* ---- H1: non-regular files are refused, never waited on ---------------------------- */

static void test_fifos_and_directories_refused(void)
{
    TG_CHECK(mkfifo(in_dir("f.safetensors"), 0644) == 0);
    EXPECT(1, "f.safetensors is a FIFO, not a regular file", "", "infer --load f.safetensors");
    TG_CHECK(mkfifo(in_dir("o.json"), 0644) == 0);
    EXPECT(1, "o.json is a FIFO, not a regular file", "", "train --options o.json " SMALL);
    EXPECT(1, "is a directory, not a regular file", "", "train --options . " SMALL);
    TG_CHECK(mkfifo(in_dir("p.sqlite"), 0644) == 0);
    EXPECT(1, "p.sqlite is a FIFO, not a regular file", "", "analyse p.sqlite summary");
    EXPECT(1, "is a FIFO", "", "report p.sqlite -o r.html");
    EXPECT(1, "is a FIFO", "", "compare p.sqlite p.sqlite");
    /* a data directory whose test images are a FIFO */
    mkdir(in_dir("data"), 0755);
    const char *names[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-labels-idx1-ubyte.gz"};
    for (int i = 0; i < 3; i++) {
        char from[512], to[512];
        snprintf(from, sizeof from, "%s/%s", DATA, names[i]);
        snprintf(to, sizeof to, "%s/data/%s", dir, names[i]);
        TG_CHECK(symlink(from, to) == 0);
    }
    TG_CHECK(mkfifo(in_dir("data/t10k-images-idx3-ubyte.gz"), 0644) == 0);
    EXPECT(1, "t10k-images-idx3-ubyte.gz is a FIFO, not a regular file", "",
           "infer --data data --load x.safetensors");
}

/* ---- D3: outputs are checked before any work ---------------------------------------- */

static void test_outputs_probed_before_training(void)
{
    EXPECT(1, "nothing was trained", "", "train --save missing/dir/w.safetensors " SMALL);
    TG_CHECK(strstr(out, "does not exist") && !strstr(out, "\"epoch\""));
    EXPECT(1, "--save", "", "train --save /proc/w.safetensors " SMALL);
    TG_CHECK(!strstr(out, "\"epoch\""));
    EXPECT(1, "is a directory", "", "train --save . " SMALL);
    EXPECT(1, "--profile-dir", "", "train --profile-dir /proc/tg " SMALL);
    TG_CHECK(!strstr(out, "\"epoch\""));
    EXPECT(1, "host trace directory",
           "TILEGRAPH_TRACE='{\"enable\":true,\"directory\":\"/proc/tg\"}'", "train " SMALL);
    TG_CHECK(!strstr(out, "\"epoch\""));
    /* the checkpoint a run starts from, before its data are read and its
     * model compiled (issue 46, row 15): the text file named here is missing
     * too, and reading the data first named it instead */
    EXPECT(1, "--resume: missing.safetensors: cannot open", "",
           "train --model gpt-tiny --data text:missing.txt --resume missing.safetensors " SMALL);
    TG_CHECK(strstr(out, "nothing was trained") && !strstr(out, "missing.txt"));
    EXPECT(1, "--load: missing.safetensors: cannot open", "",
           "train --model gpt-tiny --data text:missing.txt --load missing.safetensors " SMALL);
    TG_CHECK(!strstr(out, "missing.txt"));
}

/* ---- W1: engine-option variables take engine options only -------------------------- */

static void test_engine_options_only(void)
{
    EXPECT(1, "'deviceIterations' is not an engine option",
           "TILEGRAPH_ENGINE_OPTIONS='{\"deviceIterations\":\"10\"}'", "train " SMALL);
    TG_CHECK(strstr(out, "--device-iterations") && !strstr(out, "\"epoch\""));
    EXPECT(1, "POPLAR_ENGINE_OPTIONS: 'replicationFactor' is not an engine option",
           "POPLAR_ENGINE_OPTIONS='{\"replicationFactor\":2}'", "train " SMALL);
    TG_CHECK(strstr(out, "--replicas") != NULL);
    EXPECT(0, "reading engine options from POPLAR_ENGINE_OPTIONS",
           "POPLAR_ENGINE_OPTIONS='{\"debug.checkNaN\":\"true\"}'", "train --epochs 1 " SMALL);
    /* said once, though two sessions read it */
    char *first = strstr(out, "POPLAR_ENGINE_OPTIONS");
    TG_CHECK(first && !strstr(first + 1, "reading engine options"));
}

/* ---- item 5: --checkpoint-every, --resume, signals --------------------------------- */

static void test_checkpoint_flags_checked(void)
{
    EXPECT(2, "--checkpoint-every needs --save", "", "train --checkpoint-every 5 " SMALL);
    EXPECT(2, "--checkpoint-every takes N", "", "train --checkpoint-every 0 --save a.st " SMALL);
    EXPECT(2, "--checkpoint-every takes N", "", "train --checkpoint-every 5x --save a.st " SMALL);
    EXPECT(2, "--resume and --load", "", "train --resume a.st --load a.st " SMALL);
}

#define RESUMABLE SMALL "--epochs 2 --optimizer adam --lr 0.01 --lr-schedule cosine --flip 0.5 "

static void test_resume_is_bit_identical(void)
{
    EXPECT(0, "\"epoch\":2", "", "train " RESUMABLE "--save full.st");
    /* stopped twice (inside epoch 1, inside epoch 2), resumed each time */
    EXPECT(0, "stopped by --max-steps at epoch 1, host step 7", "",
           "train " RESUMABLE "--save part.st --checkpoint-every 5 --max-steps 7");
    TG_CHECK(!same_file(in_dir("full.st"), in_dir("part.st")));
    /* --max-steps counts the run's host steps in all: 16 is host step 4 of epoch 2 */
    EXPECT(0, "host step 4", "",
           "train " RESUMABLE "--save part.st --resume part.st --max-steps 16");
    EXPECT(0, "\"epoch\":2", "", "train " RESUMABLE "--save part.st --resume part.st");
    TG_CHECK(same_file(in_dir("full.st"), in_dir("part.st")));
    /* every 1 epoch: the checkpoint after epoch 1 continues to the same end */
    EXPECT(0, "\"epoch\":1", "",
           "train " RESUMABLE "--save e.st --checkpoint-every 1e --max-steps 12");
    EXPECT(0, "\"epoch\":2", "", "train " RESUMABLE "--save e.st --resume e.st");
    TG_CHECK(same_file(in_dir("full.st"), in_dir("e.st")));
    /* another seed cannot continue the run */
    EXPECT(1, "give the same --seed", "", "train " RESUMABLE "--seed 4 --save x.st --resume e.st");
}

/* Wait (at most 60 s) until `path` exists. */
static int wait_for(const char *path)
{
    for (int i = 0; i < 600; i++) {
        if (access(path, F_OK) == 0)
            return 1;
        struct timespec t = {0, 100 * 1000000L};
        nanosleep(&t, NULL);
    }
    return 0;
}

static int wait_exit(pid_t pid)
{
    int status = 0;
    for (int i = 0; i < 1200; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        struct timespec t = {0, 100 * 1000000L};
        nanosleep(&t, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

#define LONG_RUN                                                                                   \
    "train --train-limit 8000 --test-limit 32 --batch-size 8 --epochs 50 --quiet --json "          \
    "--seed 5 --save sig.st --checkpoint-every 20"

static void stop_with(int sig, int want)
{
    unlink(in_dir("sig.st"));
    char trace_cfg[512];
    snprintf(trace_cfg, sizeof trace_cfg, "{\"enable\":true,\"directory\":\"%s/trace\"}", dir);
    pid_t pid = tg_cli_spawn(dir, "bg.txt", "TILEGRAPH_TRACE", trace_cfg, LONG_RUN);
    TG_CHECK(wait_for(in_dir("sig.st"))); /* training is under way */
    kill(pid, sig);
    TG_CHECK(wait_exit(pid) == want);
    char *text = NULL;
    long n = file_bytes(in_dir("bg.txt"), (unsigned char **)&text);
    TG_CHECK(n > 0 && strstr(text, "stopped by a signal") && strstr(text, "--resume sig.st"));
    free(text);
    /* the checkpoint of the stop is resumable */
    EXPECT(0, "stopped by --max-steps", "",
           "train --train-limit 8000 --test-limit 32 --batch-size 8 --epochs 50 --quiet --json "
           "--seed 5 --save sig.st --resume sig.st --max-steps 1");
    /* and the host trace was written, as valid JSON */
    char trace[512];
    snprintf(trace, sizeof trace, "%s/trace/tilegraph-%ld.trace.json", dir, (long)pid);
    char *json = NULL;
    n = file_bytes(trace, (unsigned char **)&json);
    TG_CHECK(n > 0);
    if (n > 0) {
        json[n] = '\0';
        tg_arena *a = tg_arena_create(1 << 20);
        tg_json *root = NULL;
        TG_CHECK_OK(tg_json_parse(a, json, (size_t)n, trace, &root));
        tg_arena_destroy(a);
    }
    free(json);
}

static void test_signals_stop_at_a_step_boundary(void)
{
    stop_with(SIGTERM, 143);
    stop_with(SIGINT, 130);
}

/* ---- W4, W6: damaged checkpoints ----------------------------------------------------- */

/* A copy of `from` with `patch` applied to its bytes. */
static void patched(const char *from, const char *to, void (*patch)(unsigned char *, long))
{
    unsigned char *data = NULL;
    long n = file_bytes(in_dir(from), &data);
    TG_CHECK(n > 16);
    if (n > 16) {
        patch(data, n);
        write_bytes(in_dir(to), data, n);
    }
    free(data);
}

static long header_len(const unsigned char *d)
{
    long h = 0;
    for (int i = 7; i >= 0; i--)
        h = h * 256 + d[i];
    return h;
}

/* A NaN in the first tensor's first element (f32), as a run that diverged
 * saved it: that tensor's checksum (eight hex digits in the metadata's
 * tilegraph_crc32, the tensors in the order of their names) made right, as
 * the run's save would have written it. */
static void put_nan(unsigned char *d, long n)
{
    long at = 8 + header_len(d);
    if (at + 4 > n)
        return;
    d[at] = 0, d[at + 1] = 0, d[at + 2] = 0xc0, d[at + 3] = 0x7f;
    tg_safetensors *f = NULL;
    TG_CHECK_OK(tg_safetensors_parse(d, (size_t)n, "nan.st", &f));
    size_t count = f ? tg_safetensors_count(f) : 0, first = 0, rank = 0;
    for (size_t i = 1; i < count; i++) /* the tensor at the data's start */
        if (tg_safetensors_tensor(f, i)->data < tg_safetensors_tensor(f, first)->data)
            first = i;
    const tg_st_tensor *t = f ? tg_safetensors_tensor(f, first) : NULL;
    for (size_t i = 0; t && i < count; i++)
        rank += strcmp(tg_safetensors_tensor(f, i)->name, t->name) < 0;
    char crc[9];
    snprintf(crc, sizeof crc, "%08x", t ? (unsigned)crc32(0, t->data, (uInt)t->nbytes) : 0u);
    const char key[] = "\"tilegraph_crc32\":\"";
    for (long i = 8; t && i + (long)sizeof key < at; i++)
        if (memcmp(d + i, key, sizeof key - 1) == 0)
            memcpy(d + i + sizeof key - 1 + 8 * rank, crc, 8);
    tg_safetensors_destroy(f);
}

/* Overwrite the step's digits, keeping the header's length. */
static void step_text(unsigned char *d, long n, const char *text)
{
    char *s = (char *)d + 8;
    char *v = NULL;
    for (long i = 8; i + 8 < n && !v; i++)
        if (memcmp(d + i, "\"step\":\"", 8) == 0)
            v = (char *)d + i + 8;
    (void)s;
    for (size_t i = 0; v && text[i] && v[i] != '"'; i++)
        v[i] = text[i];
}
static void step_letters(unsigned char *d, long n)
{
    step_text(d, n, "abcdefghijklmnop");
}
static void step_negative(unsigned char *d, long n)
{
    step_text(d, n, "-1111111111111111");
}

static void test_damaged_checkpoints_refused(void)
{
    /* full.st records 24 updates: two-digit steps */
    patched("full.st", "nan.st", put_nan);
    EXPECT(1, "holds NaN", "", "infer --load nan.st");
    TG_CHECK(strstr(out, "--allow-non-finite") != NULL);
    EXPECT(1, "holds NaN", "", "train --load nan.st " SMALL);
    /* allowed: and --json still prints JSON (null, never nan) */
    TG_CHECK(run("", "infer --load nan.st --allow-non-finite --json --count 2") == 0);
    TG_CHECK(!strstr(out, "nan"));
    tg_arena *a = tg_arena_create(1 << 16);
    char *line = strtok(out, "\n");
    int lines = 0;
    for (; line; line = strtok(NULL, "\n"), lines++) {
        tg_json *root = NULL;
        TG_CHECK_OK(tg_json_parse(a, line, strlen(line), "infer --json", &root));
    }
    TG_CHECK(lines == 2);
    tg_arena_destroy(a);

    patched("full.st", "abc.st", step_letters);
    EXPECT(1, "metadata 'step' is 'ab'", "", "infer --load abc.st");
    patched("full.st", "neg.st", step_negative);
    EXPECT(1, "metadata 'step' is '-1'", "", "train --load neg.st " SMALL);
}

/* ---- W3 and memory: the data ---------------------------------------------------- */

static void link_data(const char *sub, const char *name)
{
    char from[512], to[512];
    snprintf(from, sizeof from, "%s/%s", DATA, name);
    snprintf(to, sizeof to, "%s/%s/%s", dir, sub, name);
    TG_CHECK(symlink(from, to) == 0);
}

static void be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* W3: a training split of 1x1 images must not be trained on a 28x28 model. */
static void test_train_split_size_checked(void)
{
    mkdir(in_dir("tiny"), 0755);
    link_data("tiny", "train-labels-idx1-ubyte.gz");
    link_data("tiny", "t10k-images-idx3-ubyte.gz");
    link_data("tiny", "t10k-labels-idx1-ubyte.gz");
    size_t n = 16 + 60000;
    unsigned char *b = calloc(1, n);
    be32(b, 0x803), be32(b + 4, 60000), be32(b + 8, 1), be32(b + 12, 1);
    write_bytes(in_dir("tiny/train-images-idx3-ubyte.gz"), b, (long)n);
    free(b);
    EXPECT(1, "holds 1x1x1 images but the test split", "", "train --data tiny " SMALL);
    TG_CHECK(!strstr(out, "\"epoch\""));
}

/* infer --index/--count reads only the images it needs: a test split cut
 * after its 100th image (the header still promises 10000) serves --count 1. */
static void test_infer_reads_only_what_it_needs(void)
{
    mkdir(in_dir("cut"), 0755);
    link_data("cut", "t10k-labels-idx1-ubyte.gz");
    gzFile in = gzopen(DATA "/t10k-images-idx3-ubyte.gz", "rb");
    size_t n = 16 + 100 * 784;
    unsigned char *b = malloc(n);
    TG_CHECK(in && gzread(in, b, (unsigned)n) == (int)n);
    if (in)
        gzclose(in);
    gzFile o = gzopen(in_dir("cut/t10k-images-idx3-ubyte.gz"), "wb");
    TG_CHECK(o && gzwrite(o, b, (unsigned)n) == (int)n);
    if (o)
        gzclose(o);
    free(b);
    EXPECT(0, "image 3: predicted", "", "infer --data cut --load full.st --index 3 --count 1");
    EXPECT(1, "truncated", "", "infer --data cut --load full.st --index 99 --count 2");
}

/* ---- W5: flags that cannot apply are errors -------------------------------------- */

static void test_flags_that_cannot_apply(void)
{
    EXPECT(1, "has no blocks to group into stages", "",
           "compile --model fashion-basic --batch-size 40 --stages 'B1|B2'");
    EXPECT(1, "has no blocks to put on several devices", "",
           "compile --model fashion-basic --batch-size 40 --devices 2");
    EXPECT(
        1, "stages cannot apply with executionStrategy single", "",
        "compile --model mnist-pipeline --batch-size 40 --strategy single --stages 'B1,B2|B3,B4'");
    EXPECT(1, "has no blocks", "", "train --devices 2 " SMALL);
}

/* ---- JSON never prints nan; a NaN loss says what to do ---------------------------- */

static void test_nan_loss(void)
{
    TG_CHECK(run("", "train --lr 1000 --engine-option debug.checkNaN=false " SMALL) == 0);
    TG_CHECK(strstr(out, "\"train_loss\":null") && !strstr(out, "nan"));
    EXPECT(1, "'nll_loss' is NaN", "", "train --lr 1000 " SMALL);
    TG_CHECK(strstr(out, "try a lower --lr") != NULL);
}

/* ---- D5: a trace that cannot be written fails the command, once ------------------- */

static void test_trace_failure_changes_exit_code(void)
{
    EXPECT(1, "trace", "TILEGRAPH_TRACE='{\"enable\":true,\"directory\":\"/proc/tg\"}'",
           "compile --model mnist-pipeline --batch-size 40");
    int count = 0;
    for (char *p = strstr(out, "tilegraph:"); p; p = strstr(p + 1, "tilegraph:"))
        count++;
    TG_CHECK(count == 1);
}

int main(void)
{
    if (access(DATA "/t10k-images-idx3-ubyte.gz", R_OK) != 0) {
        printf("skipped: %s is not installed\n", DATA);
        return 77;
    }
    snprintf(dir, sizeof dir, "%s/reliability_test_%ld", TG_BINARY_DIR, (long)getpid());
    mkdir(dir, 0755);
    TG_RUN(test_fifos_and_directories_refused);
    TG_RUN(test_outputs_probed_before_training);
    TG_RUN(test_engine_options_only);
    TG_RUN(test_checkpoint_flags_checked);
    TG_RUN(test_resume_is_bit_identical);
    TG_RUN(test_signals_stop_at_a_step_boundary);
    TG_RUN(test_damaged_checkpoints_refused);
    TG_RUN(test_trace_failure_changes_exit_code);
    TG_RUN(test_flags_that_cannot_apply);
    TG_RUN(test_nan_loss);
    TG_RUN(test_train_split_size_checked);
    TG_RUN(test_infer_reads_only_what_it_needs);
    tg_test_remove_dir(dir);
    return tg_test_finish();
}
