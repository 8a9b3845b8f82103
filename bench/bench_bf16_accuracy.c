/* bench/bench_bf16_accuracy.c - test accuracy of a short training run in
 * bf16.bf16 and bf16.32 against 32.32, measured in the same run (issue 12:
 * bf16 training must stay within 0.5 points of fp32's accuracy).
 *
 * torchvision's ResNet-18 (ImageNet stem, so that its convolutions are the
 * oneDNN ones that compute in bf16) on Debian's Fashion-MNIST at 1x28x28,
 * batch 64, SGD lr 0.01 momentum 0.9 as bench_resnet with a cosine decay to
 * 0 over the run (so that the last weights are not one noisy step of a
 * constant rate), the same seed and the same shuffled samples for every
 * precision; tested on the whole test set with the training precision. A
 * second 32.32 run with another seed (initialisation and sample order) gives
 * the noise floor: bf16's distance from fp32 means little below the distance
 * between two fp32 seeds. One JSON line: each run's test accuracy, its mean
 * training loss over the last 20 steps, its seconds, and the points each is
 * below fp32.
 *
 * Environment: TG_BENCH_SAMPLES (training samples, default 12800),
 * TG_BENCH_MODEL (default resnet18; mnist-pipeline and fashion-basic take
 * their own input), TG_BENCH_THREADS (default 2), TG_BENCH_SEED (default 1:
 * the seed of the first three runs; the fourth uses the next),
 * TG_BENCH_STOCHASTIC=1 (bf16 runs round updates stochastically),
 * TG_FASHION_MNIST_DIR.
 */
#include "bench_util.h"
#include "tilegraph/data.h"
#include "tilegraph/models.h"
#include "tilegraph/options.h"
#include "tilegraph/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 64
#define EVAL_BATCH 500
#define LAST_STEPS 20

typedef struct acc_config {
    const char *model;
    int threads, seed;
    int64_t train_n;
    const tg_dataset *train, *test;
} acc_config;

typedef struct acc_result {
    double accuracy, last_loss, seconds;
} acc_result;

static void die(const char *what)
{
    fprintf(stderr, "bench_bf16_accuracy: %s: %s\n", what, tg_error_message());
    exit(1);
}

static void build(const acc_config *c, int batch, const tg_optimizer *opt, tg_model_graph *mg)
{
    const tg_model_spec *m = tg_model_find(c->model);
    if (!m)
        die(c->model);
    tg_model_input in = tg_model_default_input(m);
    if (m->build_for) { /* the ResNets: Fashion-MNIST's shape, ImageNet stem */
        in.channels = 1;
        in.height = in.width = 28;
        in.stem = TG_STEM_IMAGENET;
    }
    if (tg_model_graph_create_ex(m, batch, opt, &in, mg) != TG_OK)
        die(c->model);
}

static tg_session *open_session(const acc_config *c, const tg_model_graph *mg,
                                const char *precision)
{
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", c->threads);
    tg_options_set_int(o, "randomSeed", c->seed);
    if (tg_options_set(o, "precision", precision) != TG_OK)
        die(precision);
    /* TG_BENCH_STOCHASTIC=1: half-precision runs round their updates
     * stochastically (Precision.enableStochasticRounding) */
    if (getenv("TG_BENCH_STOCHASTIC") && strcmp(precision, "32.32") != 0 &&
        tg_options_set(o, "Precision.enableStochasticRounding", "true") != TG_OK)
        die("Precision.enableStochasticRounding");
    tg_session *s = NULL;
    if (tg_session_create(mg->graph, o, &s) != TG_OK)
        die(precision);
    tg_options_destroy(o);
    return s;
}

static tg_loader *open_loader(const acc_config *c, const tg_dataset *ds, int batch, bool shuffle)
{
    tg_loader_config lc = tg_loader_defaults(ds, batch);
    lc.seed = (uint64_t)c->seed;
    lc.shuffle = shuffle;
    lc.drop_last = shuffle;
    tg_loader *l = NULL;
    if (tg_loader_create(ds, &lc, &l) != TG_OK)
        die("loader");
    return l;
}

/* Steps over the training samples once; returns the mean loss of the last
 * LAST_STEPS steps. */
static double train(tg_session *s, const tg_model_graph *mg, const acc_config *c)
{
    tg_loader *l = open_loader(c, c->train, BATCH, true);
    float *img = malloc((size_t)BATCH * 784 * sizeof(float));
    int32_t *lab = malloc(BATCH * sizeof(int32_t));
    double recent[LAST_STEPS] = {0};
    int64_t count = 0, steps = 0;
    tg_loader_start_epoch(l, 0);
    while (tg_loader_next(l, img, lab, &count) == TG_OK && count == BATCH) {
        tg_session_write(s, mg->images, img, (size_t)BATCH * 784 * sizeof(float));
        tg_session_write(s, mg->labels, lab, BATCH * sizeof(int32_t));
        if (tg_session_run(s) != TG_OK)
            die("training step");
        float loss = 0;
        tg_session_read(s, mg->loss, &loss, sizeof loss);
        recent[steps++ % LAST_STEPS] = loss;
    }
    double sum = 0;
    int n = steps < LAST_STEPS ? (int)steps : LAST_STEPS;
    for (int i = 0; i < n; i++)
        sum += recent[i];
    tg_loader_destroy(l);
    free(img);
    free(lab);
    return n ? sum / n : -1;
}

static int64_t count_correct(const float *scores, const int32_t *lab, int64_t count)
{
    int64_t correct = 0;
    for (int64_t i = 0; i < count; i++) {
        int best = 0;
        for (int k = 1; k < 10; k++)
            if (scores[i * 10 + k] > scores[i * 10 + best])
                best = k;
        correct += best == lab[i];
    }
    return correct;
}

/* Percent of the test set the trained weights classify right. */
static double evaluate(const tg_session *trained, const acc_config *c, const char *precision)
{
    tg_model_graph mg;
    build(c, EVAL_BATCH, NULL, &mg);
    tg_session *s = open_session(c, &mg, precision);
    if (tg_session_copy_weights(s, trained) != TG_OK)
        die("copy weights");
    tg_loader *l = open_loader(c, c->test, EVAL_BATCH, false);
    float *img = calloc((size_t)EVAL_BATCH * 784, sizeof(float));
    float *scores = malloc((size_t)EVAL_BATCH * 10 * sizeof(float));
    int32_t *lab = malloc(EVAL_BATCH * sizeof(int32_t));
    int64_t count = 0, correct = 0, seen = 0;
    tg_loader_start_epoch(l, 0);
    while (tg_loader_next(l, img, lab, &count) == TG_OK && count > 0) {
        tg_session_write(s, mg.images, img, (size_t)EVAL_BATCH * 784 * sizeof(float));
        if (tg_session_run(s) != TG_OK)
            die("evaluation step");
        tg_session_read(s, mg.output, scores, (size_t)EVAL_BATCH * 10 * sizeof(float));
        correct += count_correct(scores, lab, count);
        seen += count;
    }
    tg_loader_destroy(l);
    free(img);
    free(scores);
    free(lab);
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    return seen ? 100.0 * (double)correct / (double)seen : 0;
}

static acc_result run(const acc_config *c, const char *precision)
{
    tg_optimizer opt = tg_optimizer_sgd(0.01f, 0.9f);
    opt.lr.kind = TG_LR_COSINE;
    opt.lr.total_steps = c->train_n / BATCH;
    tg_model_graph mg;
    build(c, BATCH, &opt, &mg);
    tg_session *s = open_session(c, &mg, precision);
    acc_result r;
    double t0 = bench_now();
    r.last_loss = train(s, &mg, c);
    r.seconds = bench_now() - t0;
    r.accuracy = evaluate(s, c, precision);
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    return r;
}

static const tg_dataset *load_split(tg_split split, int64_t n)
{
    tg_dataset *ds = NULL;
    if (tg_dataset_open("fashion-mnist", NULL, split, n, &ds) != TG_OK)
        die("Fashion-MNIST (apt-get install dataset-fashion-mnist, or set TG_FASHION_MNIST_DIR)");
    return ds;
}

int main(int argc, char **argv)
{
    int usage = bench_usage(
        argc, argv, 0,
        "usage: bench_bf16_accuracy\nTest accuracy of a short ResNet-18 training run on "
        "Fashion-MNIST in 32.32, bf16.32 and bf16.bf16, and 32.32 with another seed (the noise "
        "floor), in the same run. One JSON line.\n"
        "environment: TG_BENCH_SAMPLES (12800), TG_BENCH_MODEL (resnet18), TG_BENCH_THREADS (2), "
        "TG_BENCH_SEED (1), TG_BENCH_STOCHASTIC, TG_FASHION_MNIST_DIR\n");
    if (usage >= 0)
        return usage;
    bench_passive_omp(argv);
    const char *samples = getenv("TG_BENCH_SAMPLES");
    acc_config c = {getenv("TG_BENCH_MODEL") ? getenv("TG_BENCH_MODEL") : "resnet18",
                    bench_env_int("TG_BENCH_THREADS", 2, 1, 64),
                    1,
                    samples ? atoll(samples) : 12800,
                    NULL,
                    NULL};
    c.train = load_split(TG_SPLIT_TRAIN, c.train_n);
    c.test = load_split(TG_SPLIT_TEST, 0);
    static const char *const precisions[] = {"32.32", "bf16.32", "bf16.bf16", "32.32"};
    static const char *const keys[] = {"32_32", "bf16_32", "bf16_bf16", "32_32_seed2"};
    acc_result r[4];
    int seed = bench_env_int("TG_BENCH_SEED", 1, 0, 1000000);
    for (int i = 0; i < 4; i++) {
        c.seed = i < 3 ? seed : seed + 1;
        r[i] = run(&c, precisions[i]);
    }
    printf("{\"bench\":\"bf16_accuracy\",\"model\":\"%s\",\"dataset\":\"fashion-mnist\","
           "\"train_samples\":%lld,\"test_samples\":%lld,\"batch\":%d,\"optimizer\":\"sgd lr 0.01 "
           "momentum 0.9 cosine\",\"threads\":%d,\"seed\":%d",
           c.model, (long long)c.train_n, (long long)tg_dataset_describe(c.test).samples, BATCH,
           c.threads, seed);
    for (int i = 0; i < 4; i++)
        printf(",\"accuracy_%s\":%.2f,\"last_loss_%s\":%.4f,\"seconds_%s\":%.1f", keys[i],
               r[i].accuracy, keys[i], r[i].last_loss, keys[i], r[i].seconds);
    for (int i = 1; i < 4; i++)
        printf(",\"points_below_fp32_%s\":%.2f", keys[i], r[0].accuracy - r[i].accuracy);
    printf(",\"target_points\":0.5,\"load_average\":%.2f}\n", bench_load_average());
    tg_dataset_destroy((tg_dataset *)c.train);
    tg_dataset_destroy((tg_dataset *)c.test);
    return 0;
}
