/* tests/tools/test_phased.c - `--strategy phased --phases` and `--offload`
 * from the command (issue 31): the phased run with weights and optimizer
 * state in streaming memory writes the same checkpoint bytes as the
 * one-device run; compile shows the offloaded bytes and each phase's
 * memory; what cannot apply is refused by name. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[256];

#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)
/* One thread per device in every run: kernels sum in an order that depends
 * on their thread count, and the default gives one device both cores but
 * each of two devices one (docs/numerics.md, "Bit-reproducibility"). */
#define TRAIN                                                                                      \
    "train --model mnist-pipeline --train-limit 800 --test-limit 100 --quiet "                     \
    "--threads-per-device 1 "
#define PHASED "--strategy phased --phases \"B1|B2|B3|B4\" "

static void train_both(const char *flags, const char *offload)
{
    char args[800];
    snprintf(args, sizeof args, TRAIN "%s --save %s/one.safetensors", flags, tmpdir);
    EXPECT(args, 0, "saved:");
    snprintf(args, sizeof args, TRAIN PHASED "%s --offload %s --save %s/phased.safetensors", flags,
             offload, tmpdir);
    EXPECT(args, 0, "saved:");
    TG_CHECK(tg_cli_same_file(tmpdir, "one.safetensors", "phased.safetensors"));
}

static void test_phased_writes_the_one_device_checkpoint(void)
{
    train_both("", "weights,optimizer");
    train_both("--optimizer adamw --lr 0.001 --gradient-accumulation 2", "all");
}

/* The phases spread over devices in order (two each on two devices, one
 * each on four): still the one-device run's bytes. */
static void test_phases_over_several_devices(void)
{
    char args[800];
    snprintf(args, sizeof args,
             TRAIN PHASED "--devices 2 --offload weights,optimizer --save %s/two.safetensors",
             tmpdir);
    EXPECT(args, 0, "saved:");
    snprintf(args, sizeof args, TRAIN "--save %s/one.safetensors", tmpdir);
    EXPECT(args, 0, "saved:");
    TG_CHECK(tg_cli_same_file(tmpdir, "one.safetensors", "two.safetensors"));
    EXPECT("compile --model mnist-pipeline --batch-size 40 " PHASED "--devices 4 --offload all", 0,
           "phases: 4 run one after another on 4 devices");
    TG_CHECK(strstr(tg_cli_output, "      3       3 ") != NULL); /* phase 3 on device 3 */
    EXPECT("compile --model mnist-pipeline --batch-size 40 --phases \"B1,B2|B3,B4\" --devices 3", 1,
           "each device needs a phase of its own");
    /* phases from the blocks, no --phases: spread too (an empty spec once
     * read as device 0 for every phase) */
    EXPECT("compile --model mnist-pipeline --batch-size 40 --strategy phased --devices 2", 0,
           "phases: 4 run one after another on 2 devices");
    TG_CHECK(strstr(tg_cli_output, "      3       1 ") != NULL);
}

/* ParallelIPU: the phases alternate over two devices (0, 1, 0, 1), so
 * values cross between them inside each pass, in both directions. Still
 * the one-device run's bytes: on chip, with everything in streaming
 * memory copied on demand and preloaded on the I/O thread, and with AdamW
 * over two micro-batches. */
#define PARALLEL PHASED "--phased-execution-type ParallelIPU "
static void test_parallel_ipu_writes_the_one_device_checkpoint(void)
{
    static const char *const runs[][2] = {
        {"", ""},
        {"", "--offload all"},
        {"", "--offload all --engine-option TensorLocations.ioSchedule=preload"},
        {"--optimizer adamw --lr 0.001 --gradient-accumulation 2 ",
         "--offload weights,optimizer --engine-option TensorLocations.ioSchedule=preload"},
    };
    char args[800];
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        if (i == 0 || strcmp(runs[i][0], runs[i - 1][0]) != 0) {
            snprintf(args, sizeof args, TRAIN "%s--save %s/one.safetensors", runs[i][0], tmpdir);
            EXPECT(args, 0, "saved:");
        }
        snprintf(args, sizeof args, TRAIN PARALLEL "%s%s --save %s/par.safetensors", runs[i][0],
                 runs[i][1], tmpdir);
        EXPECT(args, 0, "saved:");
        TG_CHECK(tg_cli_same_file(tmpdir, "one.safetensors", "par.safetensors"));
    }
}

/* A convolutional net in four phases (ResNet-18 split at its layers),
 * alternating, everything in streaming memory, preloaded: the one-device
 * bytes. */
static void test_parallel_ipu_resnet18(void)
{
    char args[800];
#define R18                                                                                        \
    "train --model resnet18 --batch-size 2 --max-steps 2 --train-limit 4 --test-limit 2 "          \
    "--optimizer adamw --lr 0.001 --quiet --threads-per-device 1 "
    snprintf(args, sizeof args, R18 "--save %s/r18_one.safetensors", tmpdir);
    EXPECT(args, 0, "r18_one.safetensors");
    snprintf(args, sizeof args,
             R18 "--split layer2.0,layer3.0,layer4.0 --strategy phased --phased-execution-type "
                 "ParallelIPU --offload all --engine-option TensorLocations.ioSchedule=preload "
                 "--save %s/r18_par.safetensors",
             tmpdir);
    EXPECT(args, 0, "r18_par.safetensors");
    TG_CHECK(tg_cli_same_file(tmpdir, "r18_one.safetensors", "r18_par.safetensors"));
#undef R18
}

/* compile shows the alternation per phase; devices that contradict it
 * are refused by name. */
static void test_parallel_ipu_compile_and_refusals(void)
{
    EXPECT("compile --model mnist-pipeline --batch-size 40 " PARALLEL "--offload all", 0,
           "phases: 4 alternate over 2 devices (ParallelIPU");
    TG_CHECK(strstr(tg_cli_output, "      2       0 ") != NULL); /* phase 2 on device 0 */
    TG_CHECK(strstr(tg_cli_output, "      3       1 ") != NULL); /* phase 3 on device 1 */
    EXPECT("compile --model mnist-pipeline --batch-size 40 --phases \"B1|B2@0|B3|B4\" "
           "--phased-execution-type ParallelIPU",
           1, "phase 1 names device 0, but phasedExecutionType ParallelIPU runs even phases");
    EXPECT("compile --model mnist-pipeline --batch-size 40 " PARALLEL "--devices 4", 1,
           "give --devices 2 or none");
    EXPECT("compile --model mnist-pipeline --batch-size 40 --phases \"B1,B2,B3,B4\" "
           "--phased-execution-type ParallelIPU",
           1, "give two or more");
    EXPECT("compile --model mnist-pipeline --batch-size 40 " PARALLEL
           "--phased-execution-type DoubleIPU",
           1, "DoubleIPU");
    EXPECT("compile --model mnist-pipeline --batch-size 40 --phases auto --phased-execution-type "
           "ParallelIPU",
           1, "automatic phases give each device consecutive phases (SingleIPU)");
}

/* BERT-large (335 M parameters, 1.25 GiB of f32 weights) on mk2: out of
 * memory pipelined over four devices even with everything off chip; phased
 * over four devices with weights, optimizer state and accumulators in
 * streaming memory it fits, and compile says what a step costs. */
static void test_bert_large_fits_mk2_phased(void)
{
#define BERT "compile --model bert-large --target mk2 --batch-size 1 --optimizer adamw "
    EXPECT(BERT "--stages \"B1|B2|B3|B4\" --gradient-accumulation 4", 1, "out of memory: device 0");
    EXPECT(BERT "--phases \"B1|B2|B3|B4\" --devices 4 --offload all", 0, "simulated host step: ");
    TG_CHECK(strstr(tg_cli_output, "OUT OF MEMORY") == NULL);
    TG_CHECK(strstr(tg_cli_output, "phases: 4 run one after another on 4 devices") != NULL);
    EXPECT(BERT "--phases \"B1|B2|B3|B4\" --offload all", 1, "out of memory: device 0");
#undef BERT
}

/* The control: a different run gives different bytes, so cmp can fail. */
static void test_the_comparison_can_fail(void)
{
    char args[800];
    snprintf(args, sizeof args, TRAIN "--lr 0.04 --save %s/other.safetensors", tmpdir);
    EXPECT(args, 0, "saved:");
    TG_CHECK(!tg_cli_same_file(tmpdir, "one.safetensors", "other.safetensors"));
}

/* ResNet-50 (89.7 MiB of weights) on a 90 MB device (85.8 MiB): out of
 * memory on chip; in four phases with everything in streaming memory it
 * trains, bit for bit as on an unlimited device, and so it does with the
 * copies preloaded four steps ahead on the I/O thread (a run that caught a
 * missing wait for earlier stores). The threads are given: ResNet-50's
 * convolutions sum in another order over another thread count, so the
 * runs compare the same bits on any machine (docs/numerics.md,
 * Bit-reproducibility). */
static void test_resnet50_trains_phased_on_a_device_smaller_than_its_weights(void)
{
    char args[800];
#define R50                                                                                        \
    "train --model resnet50 --batch-size 4 --max-steps 2 --train-limit 200 --test-limit 8 "        \
    "--optimizer adamw --lr 0.001 --quiet --threads-per-device 1 "
#define PHASES "--split layer2.0,layer3.0,layer4.0 --strategy phased --offload all "
    snprintf(args, sizeof args, R50 "--save %s/r_on.safetensors", tmpdir);
    EXPECT(args, 0, "r_on.safetensors");
    EXPECT(R50 "--memory-per-device 90000000", 1, "but has 85.8 MiB (memoryPerDevice)");
    snprintf(args, sizeof args,
             R50 PHASES "--memory-per-device 90000000 --save %s/r_off.safetensors", tmpdir);
    EXPECT(args, 0, "r_off.safetensors");
    TG_CHECK(tg_cli_same_file(tmpdir, "r_on.safetensors", "r_off.safetensors"));
    snprintf(args, sizeof args,
             R50 PHASES "--engine-option TensorLocations.ioSchedule=preload "
                        "--save %s/r_pre.safetensors",
             tmpdir);
    EXPECT(args, 0, "r_pre.safetensors");
    TG_CHECK(tg_cli_same_file(tmpdir, "r_on.safetensors", "r_pre.safetensors"));
#undef PHASES
#undef R50
}

static void test_compile_shows_streaming_memory_and_phases(void)
{
    EXPECT("compile --model mnist-pipeline --batch-size 40 " PHASED "--offload weights,optimizer",
           0, "Memory per phase");
    TG_CHECK(tg_cli_row_bytes(tg_cli_output, "\n  weights ") == 0);
    double host = tg_cli_row_bytes(tg_cli_output, "offloaded to host");
    EXPECT("compile --model mnist-pipeline --batch-size 40", 0, "Memory per device");
    double weights = tg_cli_row_bytes(tg_cli_output, "\n  weights ");
    TG_CHECK(weights > 300 * 1024 && host >= weights);
    EXPECT("compile --model mnist-pipeline --batch-size 40 " PHASED "--offload weights --json", 0,
           "\"offloaded_bytes\"");
}

static void test_what_cannot_apply_is_refused(void)
{
    EXPECT("compile --model mnist-pipeline --batch-size 40 --strategy pipelined --phases \"B1|B2\"",
           1, "drop --phases, or use --strategy phased");
    EXPECT("compile --model mnist-pipeline --batch-size 40 " PHASED "--stages \"B1|B2\"", 1,
           "give the blocks per phase with --phases");
    EXPECT("compile --model mnist-pipeline --batch-size 40 --offload wieghts", 1,
           "'wieghts' is not a kind");
    EXPECT("compile --model mnist-pipeline --batch-size 40 --phases \"B1|B9\"", 1, "B9");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_phased_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return tg_test_finish();
    TG_RUN(test_phased_writes_the_one_device_checkpoint);
    TG_RUN(test_the_comparison_can_fail);
    TG_RUN(test_phases_over_several_devices);
    TG_RUN(test_parallel_ipu_writes_the_one_device_checkpoint);
    TG_RUN(test_parallel_ipu_resnet18);
    TG_RUN(test_parallel_ipu_compile_and_refusals);
    TG_RUN(test_bert_large_fits_mk2_phased);
    TG_RUN(test_compile_shows_streaming_memory_and_phases);
    TG_RUN(test_resnet50_trains_phased_on_a_device_smaller_than_its_weights);
    TG_RUN(test_what_cannot_apply_is_refused);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
