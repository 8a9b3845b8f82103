/* tests/tools/test_cli_facts.c - what the command says about a run is what
 * the run did (issue 46's misleading outputs): compile's defaults are
 * train's, the executable cache says hit or miss, memory categories, the
 * remedies' reasons, and the small messages a new user met. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];

#define output tg_cli_output
#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)

/* The output holds no `text` (after an EXPECT). */
#define EXPECT_NOT(text)                                                                           \
    do {                                                                                           \
        if (strstr(tg_cli_output, text))                                                           \
            tg_test_fail(__FILE__, __LINE__, "'%s' in:\n%.2000s", text, tg_cli_output);            \
    } while (0)

/* Row 19: a program compiled with compile's defaults is the one train's
 * defaults load (compile used to default to mnist-pipeline at batch 40). */
static void test_compile_defaults_are_trains(void)
{
    char args[768];
    snprintf(args, sizeof args, "compile --save-executable %s/d.tgx", tmpdir);
    EXPECT(args, 0, "fashion-basic: training program");
    snprintf(args, sizeof args,
             "train --executable %s/d.tgx --max-steps 1 --train-limit 64 --test-limit 64", tmpdir);
    EXPECT(args, 0, "executable cache: training program hit (loaded, nothing compiled)");
    EXPECT_NOT("compiling again");
    EXPECT("compile --help", 0, "(FILE.onnx) (default fashion-basic)");
    EXPECT("compile --help", 0, "samples per micro-batch (default 16)");
}

/* Row 20: train --executable-cache says, per program, hit or miss. */
static void test_cache_hit_or_miss(void)
{
    char args[768];
    snprintf(args, sizeof args,
             "train --executable-cache %s/cache --max-steps 1 --train-limit 64 --test-limit 64",
             tmpdir);
    EXPECT(args, 0,
           "executable cache: training program miss (compiled and written); evaluation program "
           "miss (compiled and written)\n");
    EXPECT(args, 0,
           "executable cache: training program hit (loaded, nothing compiled); evaluation "
           "program hit (loaded, nothing compiled)\n");
    /* without a cache, nothing is said */
    EXPECT("train --max-steps 1 --train-limit 64 --test-limit 64", 0, "precision: ");
    EXPECT_NOT("executable cache");
}

/* Row 22: the phases-auto remedy names --split as its reason where the
 * model's blocks come from it (it said "the model has no blocks"). */
static void test_phases_auto_remedy_reason(void)
{
    EXPECT("compile --model resnet18 --strategy pipelined --split layer3.0 "
           "--gradient-accumulation 2 --input 3x32x32 --classes 10 --insights",
           0,
           "phased, the compiler's plan (phases auto)  phases auto does not take --split's "
           "division");
    EXPECT_NOT("the model has no blocks");
}

/* Row 22: a plan over capacity that debug.allowOutOfMemory lets run says so. */
static void test_allow_out_of_memory_warns(void)
{
    const char *oom = "train --model mnist-pipeline --memory-per-device 1000000 --max-steps 1 "
                      "--train-limit 64 --test-limit 64";
    char args[512];
    snprintf(args, sizeof args, "%s --engine-option debug.allowOutOfMemory=true", oom);
    EXPECT(args, 0,
           "tilegraph: warning: debug.allowOutOfMemory: running a plan that does not fit (a real "
           "device would refuse it): device 0 needs 1.95 MiB but has 977 KiB (memoryPerDevice)");
    EXPECT_NOT("Set debug.allowOutOfMemory");
    EXPECT(oom, 1, "Set debug.allowOutOfMemory to compile it anyway");
}

/* Row 24: analyse instances' samples/s is a step's samples over the mean
 * step it shows (it was the mean of each step's host-timed rate: 32 samples
 * in 8.59 ms shown as 4,903/s). fashion-basic's step is 16 samples. */
static void test_instances_columns_agree(void)
{
    char args[768];
    snprintf(args, sizeof args,
             "train --max-steps 4 --train-limit 64 --test-limit 64 --quiet --profile-dir %s/prof",
             tmpdir);
    EXPECT(args, 0, "");
    tg_arena *a = tg_arena_create(1 << 16);
    snprintf(args, sizeof args, "analyse %s/prof instances --json", tmpdir);
    const tg_json *j = tg_cli_json(tmpdir, a, args, __FILE__, __LINE__);
    const tg_json *tables = j ? tg_json_get(j, "tables") : NULL;
    const tg_json *rows = tables ? tg_json_get(tg_json_at(tables, 0), "rows") : NULL;
    const tg_json *row = rows ? tg_json_at(rows, 0) : NULL;
    TG_CHECK(row != NULL);
    if (row) {
        double step_ns = tg_cli_num(row, "mean step"), rate = tg_cli_num(row, "samples/s");
        TG_CHECK(step_ns > 0);
        TG_CHECK_NEAR(rate * step_ns * 1e-9, 16.0, 1e-6);
    }
    tg_arena_destroy(a);
    /* Row 25: the insights name the option, not the profile's meta key */
    snprintf(args, sizeof args, "analyse %s/prof insights", tmpdir);
    EXPECT(args, 0, "no device memory limit was set (memoryPerDevice, --memory-per-device)");
}

/* Row 21: batch norm's running statistics are a row of their own, not
 * optimizer state: with the optimizer state offloaded, what stays on chip is
 * shown as what it is (SGD without momentum has no optimizer state at all). */
static void test_running_statistics_row(void)
{
    const char *args = "compile --model resnet18 --input 3x32x32 --classes 10 --optimizer adamw "
                       "--lr 0.001 --offload-optimiser";
    EXPECT(args, 0,
           "\n  optimizer state                 0 B\n  running statistics         37.5 KiB\n");
    EXPECT("compile --model resnet18 --input 3x32x32 --classes 10 --optimizer sgd", 0,
           "\n  optimizer state                 0 B\n  running statistics         37.5 KiB\n");
}

/* Row 25: a misspelt flag or option gets the one it most likely meant,
 * including a prefix too many or too few. */
static void test_did_you_mean(void)
{
    EXPECT("train --epoch 2", 2, "unknown option '--epoch' (did you mean --epochs?)");
    EXPECT("train --bach-size 2", 2, "(did you mean --batch-size?)");
    EXPECT("compile --engine-option TensorLocations.numIOTiles=2", 1,
           "unknown option 'TensorLocations.numIOTiles' (did you mean 'numIOTiles'?)");
    EXPECT("compile --engine-option gradientAccumulation=2", 1,
           "(did you mean 'Training.gradientAccumulation'?)");
}

/* Row 25: --phases, --stages, --offload and --shard refuse an empty name
 * as --split does (they read "B1||B2" as "B1|B2" and "weights," as
 * "weights"), and every kind takes its singular, plural and the optimizer
 * both spellings (--offload optimiser was refused, activation taken). */
static void test_lists_as_split_reads_them(void)
{
    const char *bad[] = {"--phases 'B1||B2,B3,B4'", "--phases ',B1|B2,B3,B4'",
                         "--phases 'B1|B2,B3,B4|'", "--stages 'B1,,B2|B3,B4'"};
    char args[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "compile --model mnist-pipeline %s", bad[i]);
        EXPECT(args, 1, "has an empty name or group (a comma or bar at the start, the end or");
    }
    EXPECT("compile --model mnist-pipeline --phases 'B1|B2|B3|B4' --offload weights,", 1,
           "--offload 'weights,' has an empty kind");
    EXPECT("compile --model mnist-pipeline --replicas 2 --shard ,weights", 1,
           "--shard ',weights' has an empty kind");
    const char *kinds[] = {"optimiser", "optimizers", "optimisers", "optimizer"};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        snprintf(args, sizeof args,
                 "compile --model mnist-pipeline --optimizer adamw --lr 0.001 --phases "
                 "'B1|B2|B3|B4' --offload %s",
                 kinds[i]);
        EXPECT(args, 0, "offloaded to host           704 KiB");
    }
    EXPECT("compile --model mnist-pipeline --optimizer adamw --lr 0.001 --replicas 2 --shard "
           "optimiser",
           0, "2 replicas");
}

/* Row 25: ParallelIPU without phased execution is refused as such; it was
 * ignored, and with --devices 2 the pipelined run named a device 3. */
static void test_parallel_ipu_needs_phases(void)
{
    EXPECT("compile --model mnist-pipeline --phased-execution-type ParallelIPU --devices 2", 1,
           "phasedExecutionType ParallelIPU applies to executionStrategy phased, and this run is "
           "pipelined");
    EXPECT_NOT("device 3");
    EXPECT("compile --model mnist-pipeline --phased-execution-type ParallelIPU", 1,
           "and this run is single");
    EXPECT("compile --model mnist-pipeline --strategy phased --phased-execution-type ParallelIPU",
           0, "Memory per phase");
}

/* A text file of n bytes: GPL-3's first n, or reversed (the same bytes,
 * the same length, another text). */
static void write_text(const char *name, size_t n, bool reversed)
{
    char path[512], buf[4096];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *in = fopen("/usr/share/common-licenses/GPL-3", "rb"), *out = fopen(path, "wb");
    size_t got = in && n <= sizeof buf ? fread(buf, 1, n, in) : 0;
    for (size_t i = 0; out && i < got; i++)
        fputc(buf[reversed ? got - 1 - i : i], out);
    if (in)
        fclose(in);
    if (out)
        fclose(out);
    TG_CHECK(got == n);
}

/* Row 25: --resume on another text of the same length and alphabet is
 * refused naming both texts' hashes (it continued silently); --load takes it. */
static void test_resume_other_text(void)
{
    write_text("a.txt", 4000, false);
    write_text("b.txt", 4000, true);
    char args[1024];
    const char *lm = "train --model gpt-tiny --seq-len 16 --epochs 2 --test-limit 16 --quiet";
    snprintf(args, sizeof args, "%s --data text:%s/a.txt --max-steps 1 --save %s/a.st", lm, tmpdir,
             tmpdir);
    EXPECT(args, 0, "stopped by --max-steps");
    snprintf(args, sizeof args, "%s --data text:%s/b.txt --max-steps 2 --resume %s/a.st", lm,
             tmpdir, tmpdir);
    EXPECT(args, 1, "a.st continues a run on another text: its tokens hashed ");
    snprintf(args, sizeof args, "%s --data text:%s/a.txt --max-steps 2 --resume %s/a.st", lm,
             tmpdir, tmpdir);
    EXPECT(args, 0, "stopped by --max-steps");
    snprintf(args, sizeof args, "%s --data text:%s/b.txt --max-steps 1 --load %s/a.st", lm, tmpdir,
             tmpdir);
    EXPECT(args, 0, "stopped by --max-steps");
}

/* Row 18: a data set that is not installed names where to point and what
 * runs without it (docs/executable-cache.md's example needed CIFAR-10). */
static void test_missing_data_suggests_synthetic(void)
{
    EXPECT("train --model resnet18 --data cifar10:/nonexistent --max-steps 1", 1,
           "give --data cifar10:DIR where its files are, or --data synthetic");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_facts_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_phases_auto_remedy_reason);
    TG_RUN(test_running_statistics_row);
    TG_RUN(test_did_you_mean);
    TG_RUN(test_lists_as_split_reads_them);
    TG_RUN(test_parallel_ipu_needs_phases);
    TG_RUN(test_missing_data_suggests_synthetic);
    if (access("/usr/share/common-licenses/GPL-3", R_OK) == 0)
        TG_RUN(test_resume_other_text);
    if (tg_test_fashion_dir()) {
        TG_RUN(test_compile_defaults_are_trains);
        TG_RUN(test_cache_hit_or_miss);
        TG_RUN(test_allow_out_of_memory_warns);
        TG_RUN(test_instances_columns_agree);
    } else
        printf("  skip the train runs: Fashion-MNIST not installed\n");
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
