/* tests/runtime/test_weight_sharding.c - replicated tensor sharding of
 * weights (runtime/rts.c, compile/sharding.c): each replica keeps one shard
 * of every weight and its optimizer state, gathers the whole weight for each
 * pass and updates its shard from the reduce-scattered gradient. Training is
 * bit-identical to unsharded replicas (with the reduce-scatter, and with the
 * whole all-reduce that loss scaling needs), the plan's weights and state
 * halve over 2 replicas, weights read back whole, checkpoints move between
 * sharded and unsharded sessions, and what cannot be sharded is refused.
 * Off chip too: weights and optimizer state in streaming memory, sharded,
 * train the same bits with half the host bytes per replica.
 * TG_TEST_LABELS: threads */
#include "tg_test.h"
#include "tg_test_train.h"

#include "compile/program.h"
#include "core/error.h"
#include "runtime/session_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BATCH = 4 };

#define SHARD "TensorLocations.weight.replicatedTensorSharding", "true"
#define SHARD_ALL "TensorLocations.weight.minElementsForReplicatedTensorSharding", "0"

static size_t region(const tg_test_model *m, tg_region r)
{
    const tg_program *p = tg_session_program(m->s);
    size_t n = 0;
    for (int d = 0; d < p->n_devices; d++)
        n += p->devices[d].region_bytes[r];
    return n;
}

static int sharded_weights(const tg_test_model *m)
{
    const tg_program *p = tg_session_program(m->s);
    int n = 0;
    for (int b = 0; b < p->n_buffers; b++)
        n += tg_sharding_is_weight(p, b); /* on chip or offloaded */
    return n;
}

/* AdamW, 2 replicas x 2 micro-batches: the f32 run reduce-scatters. */
static void test_sharded_matches_unsharded(void)
{
    tg_optimizer opt = tg_optimizer_adamw(0.002f);
    tg_test_model plain, sharded;
    const char *const base[] = {"replicationFactor", "2", "Training.gradientAccumulation", "2",
                                NULL};
    const char *const rts[] = {
        "replicationFactor", "2", "Training.gradientAccumulation", "2", SHARD, SHARD_ALL, NULL};
    tg_test_train(&plain, BATCH, &opt, base, 4, 21, NULL);
    tg_test_train(&sharded, BATCH, &opt, rts, 4, 21, NULL);
    TG_CHECK(tg_test_same_values(&plain, &sharded));
    TG_CHECK(sharded_weights(&sharded) == 8); /* 4 layers' weights and biases */
    size_t wa = region(&plain, TG_REGION_PARAM), wb = region(&sharded, TG_REGION_PARAM);
    size_t sa = region(&plain, TG_REGION_STATE), sb = region(&sharded, TG_REGION_STATE);
    printf("  per replica: weights %zu -> %zu bytes, optimizer state %zu -> %zu bytes\n", wa, wb,
           sa, sb);
    TG_CHECK(wb <= wa / 2 + 8 * TG_ALIGN && wb >= wa / 2 - 8 * TG_ALIGN);
    TG_CHECK(sb <= sa / 2 + 16 * TG_ALIGN && sb >= sa / 2 - 16 * TG_ALIGN);
    /* the control: a different run differs, so tg_test_same_values can fail */
    tg_test_train_more(&plain, 1, 22);
    TG_CHECK(!tg_test_same_values(&plain, &sharded));
    tg_test_model_destroy(&plain);
    tg_test_model_destroy(&sharded);
}

/* Two pipelined stages in f16 with stochastic rounding and SGD momentum:
 * the overflow check reads whole gradients, so the all-reduce stays whole;
 * the default threshold (8192 elements) leaves the small weights whole. */
static void test_sharded_half_pipelined(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.01f, 0.9f);
#define PIPE                                                                                       \
    "replicationFactor", "2", "Training.gradientAccumulation", "4", "executionStrategy",           \
        "pipelined", "stages", "B1,B2|B3,B4", "precision", "16.16",                                \
        "Precision.enableStochasticRounding", "true", "lossScaling", "dynamic"
    const char *const base[] = {PIPE, NULL};
    const char *const rts[] = {PIPE, SHARD, NULL};
#undef PIPE
    tg_test_model plain, sharded;
    tg_test_train(&plain, BATCH, &opt, base, 3, 23, NULL);
    tg_test_train(&sharded, BATCH, &opt, rts, 3, 23, NULL);
    TG_CHECK(tg_test_same_values(&plain, &sharded));
    int n = sharded_weights(&sharded);
    printf("  sharded weights at 8192 elements or more: %d\n", n);
    TG_CHECK(n > 0 && n < 8);
    tg_test_model_destroy(&plain);
    tg_test_model_destroy(&sharded);
}

static void test_checkpoints_cross_sharding(void)
{
    const char *const rts[] = {"replicationFactor", "2", SHARD, SHARD_ALL, NULL};
    tg_test_checkpoints_cross_sharding(rts, 24, NULL);
}

/* Streaming-memory bytes of the plan (per replica). */
static size_t offloaded(const tg_test_model *m)
{
    const tg_program *p = tg_session_program(m->s);
    size_t n = 0;
    for (int d = 0; d < p->n_devices; d++)
        n += p->devices[d].offloaded_bytes;
    return n;
}

/* Weights and optimizer state both off chip and sharded (seed 002 §4.4's
 * RTS "off chip"): each replica's streaming memory holds one shard, the
 * passes gather from the replicas' shards, the update streams the shard in
 * and out; bit for bit the on-chip unsharded run, with the copies on the
 * device's thread and on the I/O thread (preload), and per-replica host
 * bytes half the unsharded offloaded run's. */
static void test_sharded_offloaded_matches_unsharded(void)
{
    tg_optimizer opt = tg_optimizer_adamw(0.002f);
#define BASE "replicationFactor", "2", "Training.gradientAccumulation", "2"
#define OFF "TensorLocations.weight.onChip", "false", "TensorLocations.optimizer.onChip", "false"
#define SHARD_OPT                                                                                  \
    "TensorLocations.optimizer.replicatedTensorSharding", "true",                                  \
        "TensorLocations.optimizer.minElementsForReplicatedTensorSharding", "0"
    const char *const base[] = {BASE, NULL};
    const char *const off[] = {BASE, OFF, NULL};
    tg_test_model plain, whole_off;
    tg_test_train(&plain, BATCH, &opt, base, 4, 31, NULL);
    tg_test_train(&whole_off, BATCH, &opt, off, 0, 31, NULL);
    for (int preload = 0; preload < 2; preload++) {
        const char *const rts[] = {BASE,
                                   OFF,
                                   SHARD,
                                   SHARD_ALL,
                                   SHARD_OPT,
                                   "TensorLocations.ioSchedule",
                                   preload ? "preload" : "onDemand",
                                   NULL};
        tg_test_model sharded;
        tg_test_train(&sharded, BATCH, &opt, rts, 4, 31, NULL);
        TG_CHECK(tg_test_same_values(&plain, &sharded));
        TG_CHECK(sharded_weights(&sharded) == 8);
        size_t a = offloaded(&whole_off), b = offloaded(&sharded);
        printf("  %s: streaming memory per replica %zu -> %zu bytes, weights on chip %zu\n",
               preload ? "preload" : "onDemand", a, b, region(&sharded, TG_REGION_PARAM));
        TG_CHECK(a > 0 && b <= a / 2 + 24 * TG_ALIGN && b >= a / 2 - 24 * TG_ALIGN);
        TG_CHECK(region(&sharded, TG_REGION_PARAM) == 0);
        tg_test_model_destroy(&sharded);
    }
    tg_test_model_destroy(&plain);
    tg_test_model_destroy(&whole_off);
}

/* Optimizer state sharded and offloaded with whole weights, also off chip:
 * each replica updates its share of the weight in its streamed copy, which
 * is stored back whole, so the shares go to the others' host copies only
 * after every replica's stores (runtime/allreduce.c). */
static void test_offloaded_weights_sharded_state(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.01f, 0.9f);
    const char *const base[] = {BASE, NULL};
    const char *const rts[] = {BASE, OFF, SHARD_OPT, "TensorLocations.ioSchedule", "preload", NULL};
    tg_test_model plain, sharded;
    tg_test_train(&plain, BATCH, &opt, base, 4, 32, NULL);
    tg_test_train(&sharded, BATCH, &opt, rts, 4, 32, NULL);
    TG_CHECK(tg_test_same_values(&plain, &sharded));
    tg_test_model_destroy(&plain);
    tg_test_model_destroy(&sharded);
#undef BASE
#undef OFF
#undef SHARD_OPT
}

/* With one replica there is nothing to shard over: ignored, as PopART does. */
static void test_one_replica_is_unsharded(void)
{
    tg_optimizer opt = tg_optimizer_adamw(0.002f);
    tg_test_model m;
    const char *const rts[] = {SHARD, SHARD_ALL, NULL};
    TG_CHECK_OK(tg_test_model_create(&m, BATCH, &opt, rts, 26));
    TG_CHECK(sharded_weights(&m) == 0);
    tg_test_model_destroy(&m);
}

static void expect_refused(const tg_optimizer *opt, const char *const *kv, const char *text)
{
    tg_test_model m;
    TG_CHECK(tg_test_model_create(&m, BATCH, opt, kv, 27) == TG_ERR_CONFIG);
    if (!strstr(tg_error_message(), text))
        printf("  message: %s\n", tg_error_message());
    TG_CHECK(strstr(tg_error_message(), text) != NULL);
    tg_test_model_destroy(&m);
}

static void test_what_cannot_be_sharded_is_refused(void)
{
    tg_optimizer lamb = tg_optimizer_lamb(0.002f);
    expect_refused(&lamb, (const char *const[]){"replicationFactor", "2", SHARD, NULL},
                   "TensorLocations.weight.replicatedTensorSharding: the lamb optimizer");
}

int main(void)
{
    TG_RUN(test_sharded_matches_unsharded);
    TG_RUN(test_sharded_half_pipelined);
    TG_RUN(test_sharded_offloaded_matches_unsharded);
    TG_RUN(test_offloaded_weights_sharded_state);
    TG_RUN(test_checkpoints_cross_sharding);
    TG_RUN(test_one_replica_is_unsharded);
    TG_RUN(test_what_cannot_be_sharded_is_refused);
    return tg_test_finish();
}
