/* tests/tg_test_train.c - the shared training run of tg_test_train.h. */
#include "tg_test_train.h"

#include "tg_test.h"

#include "core/error.h"
#include "core/rng.h"
#include "runtime/session_internal.h"

#include <stdlib.h>
#include <string.h>

void tg_test_train_more(tg_test_model *c, int runs, uint64_t seed)
{
    int64_t n = c->s ? tg_session_samples_per_run(c->s, c->mg.images) : 0;
    float *img = malloc((size_t)(n ? n : 1) * 784 * sizeof(float));
    int32_t *lab = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    tg_rng r;
    tg_rng_seed(&r, seed);
    for (int k = 0; c->s && k < runs; k++) {
        for (int64_t i = 0; i < n * 784; i++)
            img[i] = (float)tg_rng_uniform(&r);
        for (int64_t i = 0; i < n; i++)
            lab[i] = (int32_t)tg_rng_below(&r, 10);
        TG_CHECK_OK(tg_session_write(c->s, c->mg.images, img, (size_t)n * 784 * sizeof(float)));
        TG_CHECK_OK(tg_session_write(c->s, c->mg.labels, lab, (size_t)n * sizeof(int32_t)));
        TG_CHECK_OK(tg_session_run(c->s));
    }
    free(img);
    free(lab);
}

tg_status tg_test_model_create(tg_test_model *c, int batch, const tg_optimizer *opt,
                               const char *const *kv, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    TG_TRY(tg_model_graph_create(tg_model_find("mnist-pipeline"), batch, opt, &c->mg));
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "threadsPerDevice", "1"));
    TG_CHECK_OK(tg_options_set_int(o, "randomSeed", (int64_t)seed));
    tg_test_options_set(o, kv);
    tg_status s = tg_session_create(c->mg.graph, o, &c->s);
    tg_options_destroy(o);
    return s;
}

void tg_test_samples(int64_t first, int64_t samples, float *images, int32_t *labels)
{
    for (int64_t i = 0; i < samples; i++) {
        tg_rng r;
        tg_rng_seed(&r, (uint64_t)(first + i));
        for (int k = 0; k < 784; k++)
            images[i * 784 + k] = (float)(2.0 * tg_rng_uniform(&r) - 1.0);
        labels[i] = (int32_t)tg_rng_below(&r, 10);
    }
}

void tg_test_train(tg_test_model *c, int batch, const tg_optimizer *opt, const char *const *kv,
                   int runs, uint64_t seed, void (*prepare)(tg_graph *g))
{
    memset(c, 0, sizeof *c);
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), batch, opt, &c->mg));
    if (prepare && c->mg.graph)
        prepare(c->mg.graph);
    tg_options *o = tg_options_create();
    tg_options_set(o, "threadsPerDevice", "1");
    tg_test_options_set(o, kv);
    if (c->mg.graph)
        TG_CHECK_OK(tg_session_create(c->mg.graph, o, &c->s));
    tg_options_destroy(o);
    tg_test_train_more(c, runs, seed);
}

void tg_test_model_destroy(tg_test_model *c)
{
    tg_session_destroy(c->s);
    tg_model_graph_destroy(&c->mg);
    memset(c, 0, sizeof *c);
}

bool tg_test_same_weights(const tg_test_model *a, const tg_test_model *b, bool state)
{
    if (!a->s || !b->s)
        return false;
    const tg_graph *g = a->mg.graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->op != TG_OP_PARAM && !(state && t->op == TG_OP_STATE))
            continue;
        const tg_tensor *u = tg_graph_find(b->mg.graph, t->name);
        size_t bytes = (size_t)tg_numel(t) * tg_dtype_size(tg_session_storage_dtype(a->s, t));
        if (!u || tg_session_storage_dtype(b->s, u) != tg_session_storage_dtype(a->s, t) ||
            memcmp(tg_session_data(a->s, t), tg_session_data(b->s, u), bytes) != 0)
            return false;
    }
    return true;
}
