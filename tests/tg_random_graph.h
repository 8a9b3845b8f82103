/* tests/tg_random_graph.h - random graphs for differential tests: DAGs of
 * convolutions, pooling, batch norm, views (reshape, flatten), transposes,
 * channel shuffles, slices, concats, element-wise ops and matmuls, with
 * random channel counts (multiples of 16 and not), sizes and batches, ending
 * in a linear classifier and cross-entropy.
 *
 * The choices come from bytes (a fuzzer's input) or, once they run out or
 * without any, from a seeded generator, so a seed names a graph and a
 * prefix of its choices names a smaller one: the shortest failing prefix is
 * the minimal graph a failure prints.
 */
#ifndef TG_TESTS_RANDOM_GRAPH_H
#define TG_TESTS_RANDOM_GRAPH_H

#include "tilegraph/tilegraph.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tg_rg_spec {
    const uint8_t *data; /* choices, or NULL */
    size_t size;
    uint64_t seed;  /* for the choices past the data */
    int max_ops;    /* ops before the classifier head */
    bool training;  /* loss, backward and an SGD update; else inference */
    int blocks;     /* > 1: the ops in this many blocks "B1".. (BeginBlock), one per stage */
    float momentum; /* the SGD update's (0: no optimizer state) */
} tg_rg_spec;

typedef struct tg_random_graph {
    tg_graph *graph;
    tg_tensor *x, *labels, *logits, *loss;
    int classes, ops;
    char listing[8192]; /* one line per op: "t3 = conv2d(t1, 48, k3 s1 p1) [2,48,6,6]" */
} tg_random_graph;

/* Build the graph of spec; TG_OK or the builder's error (a graph the
 * generator should not have made). */
tg_status tg_random_graph_build(const tg_rg_spec *spec, tg_random_graph *out);
void tg_random_graph_destroy(tg_random_graph *rg);

/* Write a random batch (from seed) into rg's inputs for one run of s. */
tg_status tg_random_graph_feed(tg_session *s, const tg_random_graph *rg, uint64_t seed);

/* Run one step of rg's graph with opts, verified (tilegraph/verify.h), on a
 * random batch; *beyond is the first tensor beyond tolerance (row index) or
 * -1. The report's first failing row is printed into why (cap bytes). */
tg_status tg_random_graph_check(tg_random_graph *rg, const tg_options *opts, uint64_t data_seed,
                                int *beyond, char *why, size_t cap);

#endif
