/* tests/runtime/test_sharding.c - replicated tensor sharding: each replica
 * keeps a share of the optimizer state and updates that share of the
 * weights; training is bit-identical to unsharded replicas, the plan's
 * optimizer state shrinks by the replica count, the state reads back whole,
 * and checkpoints move between sharded and unsharded sessions.
 * TG_TEST_LABELS: threads */
#include "tg_test.h"
#include "tg_test_train.h"

#include "core/error.h"
#include "runtime/session_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BATCH = 4 };

static void check_replicas_agree(const tg_test_model *m)
{
    const tg_graph *g = m->mg.graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->op != TG_OP_PARAM)
            continue;
        size_t bytes = (size_t)tg_numel(t) * tg_dtype_size(tg_session_storage_dtype(m->s, t));
        TG_CHECK(memcmp(tg_session_replica_data(m->s, 0, t), tg_session_replica_data(m->s, 1, t),
                        bytes) == 0);
    }
}

static void test_sharded_matches_unsharded(void)
{
    tg_optimizer opt = tg_optimizer_adamw(0.002f);
    tg_test_model plain, sharded;
    const char *const base[] = {"replicationFactor", "2", "Training.gradientAccumulation", "2",
                                NULL};
    const char *const rts[] = {"replicationFactor",
                               "2",
                               "Training.gradientAccumulation",
                               "2",
                               "TensorLocations.optimizer.replicatedTensorSharding",
                               "true",
                               NULL};
    tg_test_train(&plain, BATCH, &opt, base, 4, 11, NULL);
    tg_test_train(&sharded, BATCH, &opt, rts, 4, 11, NULL);
    TG_CHECK(tg_test_same_values(&plain, &sharded));
    check_replicas_agree(&sharded);
    const tg_program *a = tg_session_program(plain.s), *b = tg_session_program(sharded.s);
    size_t sa = a->devices[0].region_bytes[TG_REGION_STATE],
           sb = b->devices[0].region_bytes[TG_REGION_STATE];
    printf("  optimizer state per replica: %zu -> %zu bytes\n", sa, sb);
    TG_CHECK(sb < sa * 0.55 && sb > sa * 0.4);
    tg_test_model_destroy(&plain);
    tg_test_model_destroy(&sharded);
}

static void test_sharded_half_pipelined(void)
{
    tg_optimizer opt = tg_optimizer_adamw(0.002f);
    tg_test_model plain, sharded;
    const char *const base[] = {"replicationFactor",
                                "2",
                                "Training.gradientAccumulation",
                                "4",
                                "executionStrategy",
                                "pipelined",
                                "stages",
                                "B1,B2|B3,B4",
                                "precision",
                                "16.16",
                                "Precision.enableStochasticRounding",
                                "true",
                                "firstOrderMomentumAccumType",
                                "f16",
                                NULL};
    const char *const rts[] = {"replicationFactor",
                               "2",
                               "Training.gradientAccumulation",
                               "4",
                               "executionStrategy",
                               "pipelined",
                               "stages",
                               "B1,B2|B3,B4",
                               "precision",
                               "16.16",
                               "Precision.enableStochasticRounding",
                               "true",
                               "firstOrderMomentumAccumType",
                               "f16",
                               "TensorLocations.optimizer.replicatedTensorSharding",
                               "true",
                               NULL};
    tg_test_train(&plain, BATCH, &opt, base, 3, 12, NULL);
    tg_test_train(&sharded, BATCH, &opt, rts, 3, 12, NULL);
    TG_CHECK(tg_test_same_values(&plain, &sharded));
    check_replicas_agree(&sharded);
    tg_test_model_destroy(&plain);
    tg_test_model_destroy(&sharded);
}

/* The load reaches every replica of the unsharded session. */
static void test_checkpoints_cross_sharding(void)
{
    const char *const rts[] = {"replicationFactor", "2",
                               "TensorLocations.optimizer.replicatedTensorSharding", "true", NULL};
    tg_test_checkpoints_cross_sharding(rts, 13, check_replicas_agree);
}

/* Sharded and off chip at once (refused until issue 31's RTS off chip):
 * each replica's streaming memory holds its shard of the state, and the
 * training matches unsharded replicas with the state on chip
 * (tests/runtime/test_weight_sharding.c checks more). */
static void test_sharding_and_offload_together(void)
{
    tg_optimizer opt = tg_optimizer_adamw(0.002f);
    tg_test_model plain, both;
    const char *const base[] = {"replicationFactor", "2", NULL};
    const char *const kv[] = {"replicationFactor",
                              "2",
                              "TensorLocations.optimizer.replicatedTensorSharding",
                              "true",
                              "TensorLocations.optimizer.onChip",
                              "false",
                              NULL};
    tg_test_train(&plain, BATCH, &opt, base, 3, 15, NULL);
    tg_test_train(&both, BATCH, &opt, kv, 3, 15, NULL);
    const tg_program *p = tg_session_program(both.s);
    int n = 0;
    for (int b = 0; b < p->n_buffers; b++)
        n += p->buffers[b].sharded && p->buffers[b].offloaded;
    TG_CHECK(n > 0);
    TG_CHECK(tg_test_same_values(&plain, &both));
    tg_test_model_destroy(&plain);
    tg_test_model_destroy(&both);
}

int main(void)
{
    TG_RUN(test_sharded_matches_unsharded);
    TG_RUN(test_sharded_half_pipelined);
    TG_RUN(test_checkpoints_cross_sharding);
    TG_RUN(test_sharding_and_offload_together);
    return tg_test_finish();
}
