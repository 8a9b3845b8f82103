/* tests/tools/test_weight_sharding.c - `--shard weights` from the command
 * (issue 31 item 2): mnist-pipeline and fashion-basic (a small conv net with
 * group norm) over 2 replicas write the same checkpoint bytes sharded as
 * unsharded; compile's memory table shows the weights per replica halved;
 * the profile holds the gathers and reduce-scatters; the remedies of a model
 * that does not fit name it; what cannot apply is refused by name. Weights
 * and optimizer state both offloaded and sharded write the same bytes, with
 * half the host (streaming-memory) bytes per replica. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[256];

#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)
#define ALL " --engine-option TensorLocations.weight.minElementsForReplicatedTensorSharding=0 "

/* Train `train` (flags) unsharded and with `shard` added: the same bytes. */
static void train_both(const char *train, const char *shard)
{
    char args[900];
    snprintf(args, sizeof args, "train %s --quiet --save %s/plain.safetensors", train, tmpdir);
    EXPECT(args, 0, "saved:");
    snprintf(args, sizeof args, "train %s %s --quiet --save %s/sharded.safetensors", train, shard,
             tmpdir);
    EXPECT(args, 0, "saved:");
    TG_CHECK(tg_cli_same_file(tmpdir, "plain.safetensors", "sharded.safetensors"));
}

static void test_sharded_writes_the_unsharded_checkpoint(void)
{
    train_both("--model mnist-pipeline --replicas 2 --train-limit 400 --test-limit 16 "
               "--optimizer adamw --lr 0.001 --gradient-accumulation 2",
               "--shard weights" ALL);
    /* the control: another learning rate gives other bytes, so cmp can fail */
    char args[900];
    snprintf(args, sizeof args,
             "train --model mnist-pipeline --replicas 2 --train-limit 400 --test-limit 16 "
             "--optimizer adamw --lr 0.002 --gradient-accumulation 2 --quiet --save "
             "%s/other.safetensors",
             tmpdir);
    EXPECT(args, 0, "saved:");
    TG_CHECK(!tg_cli_same_file(tmpdir, "plain.safetensors", "other.safetensors"));
    train_both("--model fashion-basic --replicas 2 --train-limit 400 --test-limit 16 "
               "--optimizer sgd --momentum 0.9",
               "--shard weights,optimizer" ALL);
}

/* Off chip and sharded at once: the small conv net's weights and momentum
 * in streaming memory, one shard per replica, copied on demand and
 * preloaded, write the on-chip unsharded run's bytes. */
static void test_sharded_offloaded_writes_the_same_checkpoint(void)
{
    const char *train = "--model fashion-basic --replicas 2 --train-limit 400 --test-limit 16 "
                        "--optimizer sgd --momentum 0.9 --gradient-accumulation 2";
    train_both(train, "--shard weights,optimizer --offload weights,optimizer" ALL
                      "--engine-option TensorLocations.optimizer."
                      "minElementsForReplicatedTensorSharding=0");
    train_both(train, "--shard weights,optimizer --offload weights,optimizer,accumulators" ALL
                      "--engine-option TensorLocations.ioSchedule=preload");
}

/* compile's "offloaded to host" row, per replica, halves when the
 * offloaded weights and their state are sharded over 2 replicas. */
static void test_compile_shows_half_the_host_bytes(void)
{
    char args[400];
    EXPECT("compile --model fashion-basic --batch-size 40 --replicas 2 --optimizer adamw --offload "
           "weights,optimizer",
           0, "Memory per device");
    double whole = tg_cli_row_bytes(tg_cli_output, "\n  offloaded to host ");
    snprintf(
        args, sizeof args,
        "compile --model fashion-basic --batch-size 40 --replicas 2 --optimizer adamw --offload "
        "weights,optimizer --shard weights" ALL);
    EXPECT(args, 0, "Memory per device");
    double sharded = tg_cli_row_bytes(tg_cli_output, "\n  offloaded to host ");
    printf("  fashion-basic per replica: offloaded to host %.0f -> %.0f bytes\n", whole, sharded);
    TG_CHECK(whole > 0 && sharded > 0.49 * whole && sharded < 0.51 * whole);
}

/* A sharded program survives the executable file: the second run loads it
 * (a file that did not load is a warning, then a compile) and trains the
 * same bytes. */
static void test_executable_round_trip(void)
{
    char args[900];
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args,
                 "train --model mnist-pipeline --replicas 2 --train-limit 64 --test-limit 16 "
                 "--quiet --shard weights" ALL
                 "--executable %s/rts.tgx --save %s/exe%d.safetensors",
                 tmpdir, tmpdir, i);
        EXPECT(args, 0, "saved:");
        TG_CHECK(!strstr(tg_cli_output, "warning: executable"));
    }
    TG_CHECK(tg_cli_same_file(tmpdir, "exe0.safetensors", "exe1.safetensors"));
}

static void test_compile_shows_half_the_weights(void)
{
    const char *models[] = {"mnist-pipeline", "fashion-basic"};
    for (int i = 0; i < 2; i++) {
        char args[400];
        snprintf(args, sizeof args,
                 "compile --model %s --batch-size 40 --replicas 2 --optimizer adamw", models[i]);
        EXPECT(args, 0, "Memory per device");
        double w = tg_cli_row_bytes(tg_cli_output, "\n  weights "),
               s = tg_cli_row_bytes(tg_cli_output, "\n  optimizer state ");
        snprintf(
            args, sizeof args,
            "compile --model %s --batch-size 40 --replicas 2 --optimizer adamw --shard weights" ALL,
            models[i]);
        EXPECT(args, 0, "Memory per device");
        double ws = tg_cli_row_bytes(tg_cli_output, "\n  weights "),
               ss = tg_cli_row_bytes(tg_cli_output, "\n  optimizer state ");
        printf("  %s per replica: weights %.0f -> %.0f bytes, optimizer state %.0f -> %.0f\n",
               models[i], w, ws, s, ss);
        TG_CHECK(w > 0 && ws > 0.49 * w && ws < 0.51 * w);
        TG_CHECK(s > 0 && ss > 0.49 * s && ss < 0.51 * s);
    }
}

/* The profile records the gathers (bytes from the other replica's shards)
 * and the reduce-scatter; analyse counts the latter as the all-reduce. */
static void test_profile_shows_gathers(void)
{
    char args[900];
    snprintf(args, sizeof args,
             "train --model mnist-pipeline --replicas 2 --train-limit 64 --test-limit 16 "
             "--quiet --shard weights" ALL "--profile-dir %s/prof",
             tmpdir);
    EXPECT(args, 0, "");
    snprintf(args, sizeof args, "analyse %s/prof trace", tmpdir);
    EXPECT(args, 0, "all-gather");
    TG_CHECK(strstr(tg_cli_output, "reduce-scatter") != NULL);
    /* device 0's row: compute, copies, host streams, then the all-reduce */
    const char *row = strstr(tg_cli_output, "\n       0 ");
    double v[4] = {0};
    char u[4][8];
    TG_CHECK(row && sscanf(row, " 0 %lf %7s %lf %7s %lf %7s %lf %7s", &v[0], u[0], &v[1], u[1],
                           &v[2], u[2], &v[3], u[3]) == 8);
    TG_CHECK(v[3] > 0);
}

/* A model that does not fit names weight sharding among the remedies, with
 * the bytes it saves: half the weights and half their AdamW state. */
static void test_remedies_name_weight_sharding(void)
{
    EXPECT("compile --model mnist-pipeline --batch-size 40 --optimizer adamw --replicas 2 "
           "--memory-per-device "
           "2000000 --engine-option debug.allowOutOfMemory=true",
           0, "weights sharded over the replicas          4.25 MiB -> 3.74 MiB, saves 527 KiB");
    EXPECT("compile --model mnist-pipeline --batch-size 40 --optimizer adamw --replicas 2 "
           "--memory-per-device "
           "2000000 --engine-option debug.allowOutOfMemory=true --shard weights",
           0, "weights sharded over the replicas          already sharded");
}

static void test_what_cannot_apply_is_refused(void)
{
    EXPECT("compile --model mnist-pipeline --batch-size 40 --replicas 2 --shard activations", 1,
           "'activations' cannot be sharded");
    EXPECT("compile --model mnist-pipeline --batch-size 40 --replicas 2 --shard weights "
           "--optimizer lamb",
           1, "the lamb optimizer");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_weight_sharding_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return tg_test_finish();
    TG_RUN(test_sharded_writes_the_unsharded_checkpoint);
    TG_RUN(test_sharded_offloaded_writes_the_same_checkpoint);
    TG_RUN(test_compile_shows_half_the_host_bytes);
    TG_RUN(test_executable_round_trip);
    TG_RUN(test_compile_shows_half_the_weights);
    TG_RUN(test_profile_shows_gathers);
    TG_RUN(test_remedies_name_weight_sharding);
    TG_RUN(test_what_cannot_apply_is_refused);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
