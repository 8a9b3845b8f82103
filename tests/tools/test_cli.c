/* tests/tools/test_cli.c - the `tilegraph` command as a user meets it:
 * help, bad flags, bad data, a corrupt checkpoint, and a train/infer round
 * trip. Every failure must exit non-zero with a message naming the culprit. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];

#define output tg_cli_output
#define run(args) tg_cli_run(tmpdir, args, 1)
#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)

static void test_help_everywhere(void)
{
    EXPECT("--help", 0, "train");
    EXPECT("train --help", 0, "--batch-size");
    EXPECT("infer --help", 0, "--load");
    EXPECT("models", 0, "mnist-pipeline");
    EXPECT("frobnicate", 2, "unknown command 'frobnicate'");
}

/* docs/options.md lists every option the library knows */
static void test_options_documented(void)
{
    EXPECT("options --json", 0, "randomSeed");
    char path[512], doc[65536];
    snprintf(path, sizeof path, "%s/docs/options.md", TG_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(doc, 1, sizeof doc - 1, f) : 0;
    doc[n] = '\0';
    if (f)
        fclose(f);
    char keys[8192];
    snprintf(keys, sizeof keys, "%s", output);
    for (char *k = strstr(keys, "\"key\":\""); k; k = strstr(k, "\"key\":\"")) {
        k += 7;
        char *end = strchr(k, '"');
        if (!end)
            break;
        *end = '\0';
        char needle[128];
        snprintf(needle, sizeof needle, "`%s`", k);
        if (!strstr(doc, needle))
            tg_test_fail(__FILE__, __LINE__, "docs/options.md does not list option '%s'", k);
        k = end + 1;
    }
}

static void test_bad_flags(void)
{
    EXPECT("train --bogus", 2, "unknown option '--bogus'");
    EXPECT("train --epochs abc", 2, "--epochs expects an integer");
    EXPECT("train --epochs 0", 2, "--epochs must be between");
    EXPECT("train --lr", 2, "--lr needs a value");
    EXPECT("train --model nope", 1, "unknown model 'nope'");
    EXPECT("train --optimizer rmsprop --train-limit 100 --test-limit 100", 1,
           "unknown optimizer 'rmsprop'");
    EXPECT("train --max-grad-norm -1", 2, "--max-grad-norm must be between 0");
    EXPECT("train --optimizer sgd --no-bias-correction --train-limit 100 --test-limit 100", 1,
           "--no-bias-correction applies to adam, adamw and lamb");
    /* without --load infer measures throughput; choosing images needs weights */
    EXPECT("infer --model mnist-pipeline --index 0", 2, "needs --load FILE");
    EXPECT("train --model mnist-pipeline --strategy diagonal --train-limit 100 --test-limit 100", 1,
           "single|pipelined|sharded");
    EXPECT("train --model mnist-pipeline --strategy pipelined --gradient-accumulation 2 "
           "--train-limit 400 --test-limit 100",
           1, "at least 4");
    EXPECT("train --model mnist-pipeline --strategy pipelined --stages 'B1|B2' --train-limit 400 "
           "--test-limit 100",
           1, "is in no stage");
    EXPECT("train --options /nonexistent.json --train-limit 100", 1, "/nonexistent.json");
    EXPECT("train --precision 8.8 --train-limit 100", 1, "option 'precision': '8.8' is not one of");
    EXPECT("train --loss-scaling sometimes --train-limit 100", 1, "static|dynamic");
    EXPECT("train --precision 16.16 --loss-scale 0 --train-limit 100", 1, "lossScalingFactor");
    EXPECT("compile --model resnet18 --stem round", 2, "expected auto, imagenet or cifar");
}

/* Seed 003 on mk2, from the compile report alone: fp32 at micro-batch 64 is
 * out of memory, the seed's 16.16 (with its AdamW types) fits. */
static void test_journey_memory_story(void)
{
    const char *base = "compile --optimizer adamw --lr 0.001 --target mk2 --model resnet101 "
                       "--input 3x32x32 --stem imagenet "
                       "--split layer3.8 --batch-size 64 --gradient-accumulation 3";
    char args[1024];
    snprintf(args, sizeof args, "%s --precision 32.32", base);
    EXPECT(args, 1, "device 1 tile 111 needs 717 KiB but has 624 KiB");
    snprintf(args, sizeof args, "%s --precision 32.32 --engine-option debug.allowOutOfMemory=true",
             base);
    EXPECT(
        args, 0,
        "fp16 weights, activations, gradients       717 KiB -> 513 KiB, saves 203 KiB (28%), fits");
    snprintf(args, sizeof args,
             "%s --precision 16.16 --loss-scaling static --loss-scale 1000 "
             "--accum-type f16 --first-moment-type f16",
             base);
    EXPECT(args, 0, "device 1: max tile 1016 holds 470 KiB (75% of its memory)");
}

/* half precision from the command line: the epoch reports the loss scale */
static void test_precision_flags(void)
{
    EXPECT("train --model mnist-pipeline --epochs 1 --train-limit 400 --test-limit 100 "
           "--precision 16.16 --loss-scaling dynamic",
           0, "loss scale 1024, 0 updates skipped for overflowing gradients");
    EXPECT("train --model mnist-pipeline --epochs 1 --train-limit 400 --test-limit 100 "
           "--precision bf16.bf16 --stochastic-rounding --json",
           0, "\"skipped_updates\":0");
    /* bf16 weights round their updates stochastically unless told not to,
     * and the summary says which */
    EXPECT("train --model mnist-pipeline --epochs 1 --train-limit 200 --test-limit 100 "
           "--precision bf16.bf16",
           0,
           "precision: bf16.bf16 (accumulators bf16, moments f32 f32), half updates rounded "
           "stochastically, no loss scaling");
    EXPECT("train --model mnist-pipeline --epochs 1 --train-limit 200 --test-limit 100 "
           "--precision bf16.bf16 --no-stochastic-rounding",
           0, "half updates rounded to nearest");
    EXPECT("train --model mnist-pipeline --epochs 1 --train-limit 200 --test-limit 100 "
           "--stochastic-rounding --no-stochastic-rounding",
           1, "--stochastic-rounding and --no-stochastic-rounding contradict each other");
    /* the plan shows the halving: mnist-pipeline's weights are 352 KiB in f32 */
    EXPECT("compile --optimizer adamw --lr 0.001 --model mnist-pipeline --batch-size 40 "
           "--precision 16.16",
           0, "weights                     176 KiB");
}

static void write_file(const char *name, const void *data, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
}

/* The figures below are of AdamW at lr 0.001 (its moments are planned):
 * compile's default until it took train's (SGD) */
static void test_compile_plans_and_reports_out_of_memory(void)
{
    /* exact byte figures: with the own convolution kernels, whose scratch
     * does not depend on the CPU (oneDNN's does, on its ISA) */
    setenv("TG_KERNELS", "own", 1);
    EXPECT("compile --optimizer adamw --lr 0.001 --model mnist-pipeline --batch-size 40 --strategy "
           "pipelined "
           "--gradient-accumulation 10",
           0, "pipeline stash");
    EXPECT("compile --optimizer adamw --lr 0.001 --model mnist-pipeline --batch-size 40 --strategy "
           "pipelined "
           "--gradient-accumulation 10 --json",
           0, "\"per_device\":[");
    EXPECT("compile --optimizer adamw --lr 0.001 --model mnist-pipeline --batch-size 40 --strategy "
           "pipelined "
           "--gradient-accumulation 10 "
           "--memory-per-device 4000000",
           1, "device 0 needs 14.3 MiB but has 3.81 MiB");
    EXPECT("compile --optimizer adamw --lr 0.001 --model mnist-pipeline --batch-size 40 --strategy "
           "pipelined "
           "--gradient-accumulation 10 "
           "--memory-per-device 4000000",
           1, "largest buffers: 'layer1/conv' (pipeline stash)");
    EXPECT("compile --optimizer adamw --lr 0.001 --model mnist-pipeline --batch-size 40 --strategy "
           "pipelined "
           "--gradient-accumulation 10 "
           "--memory-per-device 4000000 --engine-option debug.allowOutOfMemory=true",
           0, "14.3 MiB");
    EXPECT("compile --model mnist-pipeline --batch-size 40 --engine-option nonsense", 1,
           "not KEY=VALUE");
    /* --engine-option given twice: both apply (recomputation brings 14.3 MiB to 5.04 MiB) */
    EXPECT("compile --optimizer adamw --lr 0.001 --model mnist-pipeline --batch-size 40 --strategy "
           "pipelined "
           "--gradient-accumulation 10 "
           "--memory-per-device 4000000 --engine-option debug.allowOutOfMemory=true "
           "--engine-option recomputation=pipeline",
           0, "needs 5.04 MiB of 3.81 MiB");
    /* ...and its flag, generated from the option's row, does the same */
    EXPECT("compile --optimizer adamw --lr 0.001 --model mnist-pipeline --batch-size 40 --strategy "
           "pipelined --gradient-accumulation 10 --memory-per-device 4000000 "
           "--engine-option debug.allowOutOfMemory=true --recomputation pipeline",
           0, "needs 5.04 MiB of 3.81 MiB");
    EXPECT("compile --model mnist-pipeline --batch-size 40 --recomputation always", 1,
           "option 'recomputation': 'always' is not one of none|pipeline");
    EXPECT("train --help", 0, "--recomputation KIND");
    /* over capacity but allowed: the plan and the remedies, each re-planned */
    EXPECT("compile --optimizer adamw --lr 0.001 --model mnist-pipeline --batch-size 40 --strategy "
           "pipelined "
           "--gradient-accumulation 10 "
           "--memory-per-device 8000000 --engine-option debug.allowOutOfMemory=true",
           0,
           /* the saving's last digit follows oneDNN's scratch, which differs by ISA */
           "recomputation (keep only stage inputs)     14.3 MiB -> 5.04 MiB, saves 9.2");
    EXPECT("compile --optimizer adamw --lr 0.001 --model mnist-pipeline --batch-size 40 --strategy "
           "pipelined "
           "--gradient-accumulation 10 "
           "--memory-per-device 8000000 --engine-option debug.allowOutOfMemory=true",
           0, "half the micro-batch");
    EXPECT("compile --optimizer adamw --lr 0.001 --model mnist-pipeline --batch-size 40 --strategy "
           "pipelined "
           "--gradient-accumulation 10 "
           "--memory-per-device 8000000 --engine-option debug.allowOutOfMemory=true",
           0, "fp16 weights, activations, gradients       14.3 MiB -> 9.00 MiB");
    EXPECT("compile --optimizer adamw --lr 0.001 --model mnist-pipeline --batch-size 40 --strategy "
           "pipelined "
           "--gradient-accumulation 10 "
           "--memory-per-device 8000000 --engine-option debug.allowOutOfMemory=true",
           0, "recomputation, a checkpoint per block      14.3 MiB -> 7.01 MiB, saves 7.");
    EXPECT("compile --optimizer adamw --lr 0.001 --model mnist-pipeline --batch-size 40 --strategy "
           "pipelined "
           "--gradient-accumulation 10 "
           "--memory-per-device 8000000 --engine-option debug.allowOutOfMemory=true --replicas 2",
           0,
           "replicated tensor sharding                 14.3 MiB -> 14.3 MiB, saves 1.00 KiB (0%)");
    /* --split alone divides the model over devices (executionStrategy auto) */
    EXPECT("compile --optimizer adamw --lr 0.001 --model resnet18 --input 3x32x32 --split layer3.0 "
           "--batch-size 4 "
           "--gradient-accumulation 2",
           0, "2 devices x 1 replica");
    /* one more stage: the fullest device's layers split where half its bytes lie
     * (layer4 holds most of resnet18's weights, so the split falls inside it) */
    EXPECT("compile --optimizer adamw --lr 0.001 --model resnet18 --input 3x32x32 --split layer3.0 "
           "--batch-size 8 "
           "--gradient-accumulation 4 --memory-per-device 30000000 "
           "--engine-option debug.allowOutOfMemory=true",
           0,
           "one more pipeline stage                    234 MiB -> 149 MiB, saves 85.4 MiB (36%), "
           "still over; split at layer4.1 too");
    unsetenv("TG_KERNELS");
}

static void test_bad_data(void)
{
    char args[1024];
    snprintf(args, sizeof args, "train --data %s/nowhere --train-limit 10", tmpdir);
    EXPECT(args, 1, "nowhere");
    /* a truncated images file: the header promises 60000 images */
    char bad[512];
    snprintf(bad, sizeof bad, "%s/bad", tmpdir);
    mkdir(bad, 0755);
    unsigned char header[16] = {0, 0, 8, 3, 0, 0, 0xea, 0x60, 0, 0, 0, 28, 0, 0, 0, 28};
    write_file("bad/train-images-idx3-ubyte.gz", header, sizeof header);
    write_file("bad/train-labels-idx1-ubyte.gz", header, 8);
    write_file("bad/t10k-images-idx3-ubyte.gz", header, sizeof header);
    write_file("bad/t10k-labels-idx1-ubyte.gz", header, 8);
    snprintf(args, sizeof args, "train --data %s", bad);
    EXPECT(args, 1, "train-images-idx3-ubyte.gz");
    EXPECT(args, 1, "truncated");
}

static void test_data_and_loader_flags(void)
{
    char args[1024];
    snprintf(args, sizeof args, "train --data cifar10:%s/nocifar --model resnet18", tmpdir);
    EXPECT(args, 1, "data_batch_1.bin");
    EXPECT("train --data nosuchkind:/tmp --train-limit 10", 1, "unknown data 'nosuchkind:/tmp'");
    EXPECT("train --loader eager --train-limit 10", 1, "--loader 'eager' is not sync or async");
    EXPECT("train --resize 64 --train-limit 10", 1, "--resize '64' is not HxW");
    EXPECT("train --model fashion-basic --data synthetic", 1, "takes 1x28x28 images");
    /* a ResNet built for the data's shape, on synthetic CIFAR-shaped data, async loading */
    EXPECT(
        "train --model resnet18 --data synthetic --train-limit 32 --test-limit 16 --batch-size 8 "
        "--loader async --workers 2 --flip 0.5 --threads 2 --quiet",
        0, "test accuracy:");
}

static void test_bad_options_file(void)
{
    char args[1024];
    const char *bad = "{\"replicationFactor\": 2,\n \"colour\": \"red\"}";
    write_file("bad.json", bad, strlen(bad));
    snprintf(args, sizeof args, "train --options %s/bad.json --train-limit 100", tmpdir);
    EXPECT(args, 1, "unknown option 'colour'");
    const char *broken = "{\"replicationFactor\": }";
    write_file("broken.json", broken, strlen(broken));
    snprintf(args, sizeof args, "train --options %s/broken.json --train-limit 100", tmpdir);
    EXPECT(args, 1, "broken.json:1:");
}

static void test_corrupt_checkpoint(void)
{
    char args[1024];
    write_file("corrupt.safetensors", "\x40\x00\x00\x00\x00\x00\x00\x00{\"a\":", 13);
    snprintf(args, sizeof args, "infer --model mnist-pipeline --load %s/corrupt.safetensors",
             tmpdir);
    EXPECT(args, 1, "corrupt.safetensors");
    snprintf(args, sizeof args, "infer --model mnist-pipeline --load %s/missing.safetensors",
             tmpdir);
    EXPECT(args, 1, "missing.safetensors");
}

static void test_train_save_infer(void)
{
    char args[1024];
    snprintf(args, sizeof args,
             "train --model fashion-basic --train-limit 2000 --test-limit 500 --epochs 1 "
             "--threads 2 --quiet --save %s/w.safetensors",
             tmpdir);
    EXPECT(args, 0, "test accuracy:");
    snprintf(args, sizeof args,
             "infer --model fashion-basic --load %s/w.safetensors --index 0 --count 3", tmpdir);
    EXPECT(args, 0, "predicted:");
    /* the checkpoint of one model does not load into another */
    snprintf(args, sizeof args, "infer --model mnist-pipeline --load %s/w.safetensors", tmpdir);
    EXPECT(args, 1, "fashion-basic");
    snprintf(args, sizeof args,
             "train --model fashion-basic --train-limit 200 --test-limit 100 --json --threads 1");
    EXPECT(args, 0, "\"test_accuracy\":");
    /* several devices and replicas, end to end through the command */
    EXPECT("train --model mnist-pipeline --strategy pipelined --gradient-accumulation 4 "
           "--device-iterations 2 --batch-size 8 --train-limit 640 --test-limit 200 --quiet",
           0, "test accuracy:");
    EXPECT("train --model mnist-pipeline --strategy sharded --batch-size 8 --train-limit 160 "
           "--test-limit 100 --quiet",
           0, "test accuracy:");
    EXPECT("train --model mnist-pipeline --strategy pipelined --stages 'B1,B2|B3,B4' --replicas 2 "
           "--gradient-accumulation 2 --batch-size 8 --train-limit 320 --test-limit 100 --quiet",
           0, "2 devices x 2 replicas");
}

/* The scores after `infer --json` for image 0 (its first line). */
static void infer_scores(const char *extra, char *out, size_t cap)
{
    char args[1024];
    snprintf(args, sizeof args,
             "infer --model fashion-basic --load %s/w.safetensors --index 0 --json %s", tmpdir,
             extra);
    TG_CHECK(run(args) == 0);
    const char *at = strstr(output, "\"scores\":");
    snprintf(out, cap, "%s", at ? at : "(none)");
}

/* infer normalises and builds the model as training did: --normalize with
 * the model's own values changes nothing, other values change the scores,
 * and a ResNet trained with --stem imagenet loads with the same --stem. */
static void test_infer_follows_training_input(void)
{
    char a[4096], b[4096], c[4096], args[1024];
    infer_scores("", a, sizeof a);
    infer_scores("--normalize 0.2860/0.3530", b, sizeof b);
    infer_scores("--normalize 0.5/0.1", c, sizeof c);
    TG_CHECK(strcmp(a, b) == 0);
    TG_CHECK(strcmp(a, c) != 0);
    snprintf(args, sizeof args,
             "train --model resnet18 --dataset synthetic --stem imagenet --batch-size 4 "
             "--train-limit 8 --test-limit 4 --threads 1 --quiet --save %s/r.safetensors",
             tmpdir);
    EXPECT(args, 0, "test accuracy:");
    snprintf(args, sizeof args,
             "infer --model resnet18 --dataset synthetic --stem imagenet --load %s/r.safetensors",
             tmpdir);
    EXPECT(args, 0, "predicted:");
    /* trained with --resize, inferred with it: the images the model sees
     * change, and a size that is not HxW is refused */
    snprintf(args, sizeof args,
             "train --model resnet18 --dataset synthetic --resize 16x16 --batch-size 4 "
             "--train-limit 8 --test-limit 4 --threads 1 --quiet --save %s/r16.safetensors",
             tmpdir);
    EXPECT(args, 0, "test accuracy:");
    char resized[4096], plain[4096];
    snprintf(args, sizeof args,
             "infer --model resnet18 --dataset synthetic --resize 16x16 --load "
             "%s/r16.safetensors --json",
             tmpdir);
    TG_CHECK(run(args) == 0);
    snprintf(resized, sizeof resized, "%s", output);
    snprintf(args, sizeof args,
             "infer --model resnet18 --dataset synthetic --load %s/r16.safetensors --json", tmpdir);
    TG_CHECK(run(args) == 0);
    snprintf(plain, sizeof plain, "%s", output);
    TG_CHECK(strstr(resized, "\"scores\":") && strcmp(resized, plain) != 0);
    snprintf(args, sizeof args,
             "infer --model resnet18 --dataset synthetic --resize 16 --load %s/r16.safetensors",
             tmpdir);
    EXPECT(args, 1, "--resize '16' is not HxW");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_cli_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_help_everywhere);
    TG_RUN(test_options_documented);
    TG_RUN(test_bad_flags);
    TG_RUN(test_precision_flags);
    TG_RUN(test_journey_memory_story);
    TG_RUN(test_compile_plans_and_reports_out_of_memory);
    TG_RUN(test_bad_data);
    TG_RUN(test_bad_options_file);
    TG_RUN(test_data_and_loader_flags);
    TG_RUN(test_corrupt_checkpoint);
    if (tg_test_fashion_dir()) {
        TG_RUN(test_train_save_infer);
        TG_RUN(test_infer_follows_training_input);
    } else
        printf("  skip test_train_save_infer: Fashion-MNIST not installed\n");
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
