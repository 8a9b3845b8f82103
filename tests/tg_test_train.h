/* tests/tg_test_train.h - a small training run for tests that compare two
 * ways of running the same model (offloading, recomputation, profiling,
 * several devices): the tutorial's mnist-pipeline, random but reproducible
 * data, a session with one thread per device and the given options; and a
 * zoo model trained on Fashion-MNIST and tested, for tests of what it
 * learns. */
#ifndef TG_TEST_TRAIN_H
#define TG_TEST_TRAIN_H

#include "tilegraph/models.h"
#include "tilegraph/session.h"
#include "tilegraph/status.h"

#include "tilegraph/graph.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct tg_test_model {
    tg_model_graph mg;
    tg_session *s;
} tg_test_model;

/* Build mnist-pipeline for `batch` with `opt`, apply `prepare` to the graph
 * (may be NULL), create a session with threadsPerDevice=1 and the key/value
 * options `kv` (NULL-terminated, may be NULL), and run `runs` host steps of
 * data drawn from `seed`. Failures are test failures. */
void tg_test_train(tg_test_model *c, int batch, const tg_optimizer *opt, const char *const *kv,
                   int runs, uint64_t seed, void (*prepare)(tg_graph *g));
/* mnist-pipeline for `batch` with `opt` and a session with
 * threadsPerDevice=1, randomSeed=seed and the key/value options `kv`
 * (NULL-terminated, may be NULL; a key the options refuse is a test
 * failure). Returns the session's status, for tests that expect a refusal;
 * *c is then safe to destroy. */
tg_status tg_test_model_create(tg_test_model *c, int batch, const tg_optimizer *opt,
                               const char *const *kv, uint64_t seed);
/* Reproducible mnist-shaped samples first .. first + samples - 1: pixels
 * uniform in [-1, 1) and labels in [0, 10), each a function of its index
 * alone, so any cut into host steps sees the same data. */
void tg_test_samples(int64_t first, int64_t samples, float *images, int32_t *labels);
/* More host steps of the same kind of data. */
void tg_test_train_more(tg_test_model *c, int runs, uint64_t seed);
void tg_test_model_destroy(tg_test_model *c);
/* Whether every parameter (and, with state, every state tensor) of a and b
 * holds the same bytes. */
bool tg_test_same_weights(const tg_test_model *a, const tg_test_model *b, bool state);
/* Every parameter and state tensor of a and b holds the same values, read
 * whole through tg_session_read (which gathers a sharded one); prints the
 * first that differs. */
bool tg_test_same_values(const tg_test_model *a, const tg_test_model *b);
/* Checkpoints cross between sharded and unsharded sessions: mnist-pipeline
 * (batch 4, AdamW) trained 3 host steps with the options `sharded` (two
 * replicas and some replicatedTensorSharding) is saved and loaded into a
 * fresh session of two unsharded replicas, which then holds the same
 * values (and passes `loaded`, when given); both train 2 more steps alike;
 * and the unsharded one's checkpoint loaded back into the sharded session
 * gives every replica its shard. `seed` draws the data (seed + 1 for the
 * more steps). Failures are test failures. */
void tg_test_checkpoints_cross_sharding(const char *const *sharded, uint64_t seed,
                                        void (*loaded)(const tg_test_model *plain));

/* One Fashion-MNIST training run: the model, its optimizer and batch, how many training
 * samples for how many epochs, and the storage precision (32.32, bf16.bf16). */
typedef struct tg_test_fashion_run {
    const char *model, *precision;
    tg_optimizer opt;
    int batch, epochs, threads;
    int64_t train_n;
} tg_test_fashion_run;

/* Percent of the first 2000 Fashion-MNIST test images a run classifies right
 * after training on the first r->train_n training samples (the tutorial
 * models normalised with their own statistics, a ResNet with the data set's
 * and built for 1x28x28 with the ImageNet stem, whose convolutions run on
 * oneDNN), tested in the training's precision; randomSeed 1 and sample
 * order seed 1. Needs tg_test_fashion_dir(); failures are test failures. */
double tg_test_fashion_accuracy(const tg_test_fashion_run *r);

/* Four ReLU'd Linear 1024->1024 and a 10-class head on a batch x 1024
 * input, cross entropy, SGD: a graph whose host streams and weights are
 * large against its compute (the cycle models' tests). */
tg_graph *tg_test_linear_stack(int64_t batch);

#endif
