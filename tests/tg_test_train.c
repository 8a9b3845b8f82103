/* tests/tg_test_train.c - the shared training run of tg_test_train.h. */
#include "tg_test_train.h"

#include "tg_test.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/rng.h"
#include "data/loader.h"
#include "runtime/session_internal.h"
#include "tilegraph/checkpoint.h"
#include "tilegraph/nn.h"
#include "tilegraph/optim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The model for Fashion-MNIST: the tutorial models take 1x28x28 as they are;
 * a ResNet is built for it with the ImageNet stem, whose convolutions run on
 * oneDNN (in bf16 under --precision bf16.*). */
static tg_status build_for_fashion(const tg_test_fashion_run *r, int batch, const tg_optimizer *opt,
                                   tg_model_graph *mg)
{
    const tg_model_spec *m = tg_model_find(r->model);
    tg_model_input in = tg_model_default_input(m);
    if (m->build_for) {
        in.channels = 1;
        in.height = in.width = 28;
        in.stem = TG_STEM_IMAGENET;
    }
    return tg_model_graph_create_ex(m, batch, opt, &in, mg);
}

/* The tutorial models normalise with their own statistics; a ResNet built
 * for Fashion-MNIST with the data set's (the loader's default). */
static tg_loader *fashion_loader(const tg_test_fashion_run *r, const tg_dataset *ds, int batch,
                                 bool shuffle)
{
    tg_loader_config lc = tg_loader_defaults(ds, batch);
    const tg_model_spec *m = tg_model_find(r->model);
    if (!m->build_for) {
        lc.mean = m->mean;
        lc.std = m->std;
    }
    lc.seed = 1;
    lc.shuffle = shuffle;
    tg_loader *l = NULL;
    TG_CHECK_OK(tg_loader_create(ds, &lc, &l));
    return l;
}

static void train_epochs(tg_session *s, const tg_model_graph *mg, const tg_test_fashion_run *r,
                         const tg_dataset *train, float *img, int32_t *lab)
{
    tg_loader *l = fashion_loader(r, train, r->batch, true);
    for (int e = 0; e < r->epochs && s && l; e++) {
        tg_loader_start_epoch(l, e);
        int64_t count = 0;
        while (tg_loader_next(l, img, lab, &count) == TG_OK && count > 0) {
            tg_session_write(s, mg->images, img, (size_t)count * 784 * sizeof(float));
            tg_session_write(s, mg->labels, lab, (size_t)count * sizeof(int32_t));
            TG_CHECK_OK(tg_session_run(s));
        }
    }
    tg_loader_destroy(l);
}

static double test_accuracy(tg_session *si, const tg_model_graph *inf, const tg_test_fashion_run *r,
                            const tg_dataset *test, float *img, int32_t *lab)
{
    float *scores = tg_malloc((size_t)500 * 10 * sizeof(float));
    tg_loader *l = fashion_loader(r, test, 500, false);
    tg_loader_start_epoch(l, 0);
    int64_t count = 0, correct = 0, seen = 0;
    while (si && l && tg_loader_next(l, img, lab, &count) == TG_OK && count > 0) {
        tg_session_write(si, inf->images, img, (size_t)500 * 784 * sizeof(float));
        TG_CHECK_OK(tg_session_run(si));
        tg_session_read(si, inf->output, scores, (size_t)500 * 10 * sizeof(float));
        for (int64_t i = 0; i < count; i++) {
            int best = 0;
            for (int c = 1; c < 10; c++)
                if (scores[i * 10 + c] > scores[i * 10 + best])
                    best = c;
            correct += best == lab[i];
        }
        seen += count;
    }
    tg_loader_destroy(l);
    tg_free(scores);
    return seen ? 100.0 * (double)correct / (double)seen : 0;
}

double tg_test_fashion_accuracy(const tg_test_fashion_run *r)
{
    const char *dir = tg_test_fashion_dir();
    tg_dataset *train = NULL, *test = NULL;
    TG_CHECK_OK(tg_dataset_load(TG_DATASET_FASHION_MNIST, dir, TG_SPLIT_TRAIN, r->train_n, &train));
    TG_CHECK_OK(tg_dataset_load(TG_DATASET_FASHION_MNIST, dir, TG_SPLIT_TEST, 2000, &test));
    tg_model_graph tr, inf;
    TG_CHECK_OK(build_for_fashion(r, r->batch, &r->opt, &tr));
    TG_CHECK_OK(build_for_fashion(r, 500, NULL, &inf));
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", r->threads);
    tg_options_set_int(o, "randomSeed", 1);
    TG_CHECK_OK(tg_options_set(o, "precision", r->precision));
    tg_session *s = NULL, *si = NULL;
    TG_CHECK_OK(tg_session_create(tr.graph, o, &s));
    TG_CHECK_OK(tg_session_create(inf.graph, o, &si));
    float *img = tg_malloc((size_t)500 * 784 * sizeof(float));
    int32_t *lab = tg_malloc(500 * sizeof(int32_t));
    train_epochs(s, &tr, r, train, img, lab);
    TG_CHECK_OK(tg_session_copy_weights(si, s));
    double acc = test_accuracy(si, &inf, r, test, img, lab);
    tg_free(img);
    tg_free(lab);
    tg_session_destroy(s);
    tg_session_destroy(si);
    tg_options_destroy(o);
    tg_model_graph_destroy(&tr);
    tg_model_graph_destroy(&inf);
    tg_dataset_destroy(train);
    tg_dataset_destroy(test);
    return acc;
}

/* Every parameter and state tensor of a and b holds the same values, read
 * whole (tg_session_read gathers a sharded one). */
bool tg_test_same_values(const tg_test_model *a, const tg_test_model *b)
{
    const tg_graph *g = a->mg.graph;
    bool same = true;
    for (int i = 0; i < g->n_nodes && same; i++) {
        const tg_tensor *t = g->nodes[i];
        if ((t->op != TG_OP_PARAM && t->op != TG_OP_STATE) || !tg_session_data(a->s, t))
            continue;
        const tg_tensor *u = tg_graph_find(b->mg.graph, t->name);
        float *x = malloc(tg_nbytes(t)), *y = malloc(tg_nbytes(t));
        same = u && tg_session_read(a->s, t, x, tg_nbytes(t)) == TG_OK &&
               tg_session_read(b->s, u, y, tg_nbytes(t)) == TG_OK &&
               memcmp(x, y, tg_nbytes(t)) == 0;
        if (!same)
            printf("  differs: %s\n", t->name);
        free(x);
        free(y);
    }
    return same;
}

void tg_test_checkpoints_cross_sharding(const char *const *sharded_kv, uint64_t seed,
                                        void (*loaded)(const tg_test_model *plain))
{
    tg_optimizer opt = tg_optimizer_adamw(0.002f);
    tg_test_model sharded, plain;
    tg_test_train(&sharded, 4, &opt, sharded_kv, 3, seed, NULL);
    tg_test_train(&plain, 4, &opt, (const char *const[]){"replicationFactor", "2", NULL}, 0, seed,
                  NULL);
    char path[] = "/tmp/tg_sharding_ckpt_XXXXXX";
    int fd = mkstemp(path);
    TG_CHECK(fd >= 0);
    close(fd);
    TG_CHECK_OK(tg_checkpoint_save(sharded.s, path, "mnist-pipeline"));
    TG_CHECK_OK(tg_checkpoint_load(plain.s, path, "mnist-pipeline"));
    TG_CHECK(tg_test_same_values(&sharded, &plain));
    if (loaded)
        loaded(&plain);
    /* and both continue identically */
    tg_test_train_more(&sharded, 2, seed + 1);
    tg_test_train_more(&plain, 2, seed + 1);
    TG_CHECK(tg_test_same_values(&sharded, &plain));
    /* back into the sharded session: every replica's shard comes from the file */
    TG_CHECK_OK(tg_checkpoint_save(plain.s, path, "mnist-pipeline"));
    TG_CHECK_OK(tg_checkpoint_load(sharded.s, path, "mnist-pipeline"));
    TG_CHECK(tg_test_same_values(&sharded, &plain));
    remove(path);
    tg_test_model_destroy(&sharded);
    tg_test_model_destroy(&plain);
}

tg_graph *tg_test_linear_stack(int64_t batch)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(batch, 1024));
    tg_tensor *labels = tg_input(g, "labels", TG_I32, tg_shape1(batch));
    tg_tensor *h = x;
    for (int k = 0; k < 4; k++) {
        char name[8];
        snprintf(name, sizeof name, "fc%d", k);
        h = tg_relu(g, tg_nn_linear(g, h, name, 1024, 1024, true));
    }
    tg_tensor *loss = tg_cross_entropy(g, tg_nn_linear(g, h, "head", 1024, 10, true), labels);
    tg_tensor_mark_output(loss);
    TG_CHECK_OK(tg_graph_backward(g, loss));
    tg_optimizer opt = tg_optimizer_sgd(0.01f, 0.0f);
    TG_CHECK_OK(tg_graph_add_optimizer(g, &opt));
    return g;
}
