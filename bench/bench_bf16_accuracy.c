/* bench/bench_bf16_accuracy.c - test accuracy of a short training run in
 * bf16.bf16 and bf16.32 against 32.32, measured in the same run (issue 12:
 * bf16 training must stay within 0.5 points of fp32's accuracy).
 *
 * torchvision's ResNet-18 (ImageNet stem, so that its convolutions are the
 * oneDNN ones that compute in bf16) on Debian's Fashion-MNIST at 1x28x28,
 * batch 64, SGD lr 0.01 momentum 0.9 as bench_resnet with a cosine decay to
 * 0 over the run (so that the last weights are not one noisy step of a
 * constant rate), the same seed and the same shuffled samples for every
 * precision; tested on the whole test set with the training precision.
 * bf16.bf16 runs twice: as by default (its updates rounded stochastically,
 * Precision.enableStochasticRounding auto) and rounded to nearest.
 *
 * One seed decides little: two fp32 runs with different seeds
 * (initialisation and sample order) end up to 0.5 points apart at 25,600
 * samples. So every precision runs with TG_BENCH_SEEDS seeds, and the
 * comparison is between means; the fp32 runs' spread (highest minus
 * lowest) is printed as the noise floor. One JSON line: each run's test
 * accuracy per seed, the means, the points each precision's mean is below
 * fp32's, the mean loss over the last 20 steps, the seconds.
 *
 * Environment: TG_BENCH_SAMPLES (training samples, default 25600),
 * TG_BENCH_SEEDS (default 3), TG_BENCH_SEED (the first, default 1),
 * TG_BENCH_MODEL (default resnet18; mnist-pipeline and fashion-basic take
 * their own input), TG_BENCH_THREADS (default 2), TG_FASHION_MNIST_DIR.
 */
#include "bench_util.h"
#include "tilegraph/data.h"
#include "tilegraph/evaluate.h"
#include "tilegraph/models.h"
#include "tilegraph/options.h"
#include "tilegraph/session.h"

#include <stddef.h>
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

/* One training run: its precision, its rounding (NULL: the default) and
 * its JSON key. */
typedef struct acc_run {
    const char *precision, *rounding, *key;
} acc_run;

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

static tg_session *open_session(const acc_config *c, const tg_model_graph *mg, const acc_run *spec)
{
    const char *precision = spec->precision;
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", c->threads);
    tg_options_set_int(o, "randomSeed", c->seed);
    if (tg_options_set(o, "precision", precision) != TG_OK)
        die(precision);
    if (spec->rounding &&
        tg_options_set(o, "Precision.enableStochasticRounding", spec->rounding) != TG_OK)
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

/* Percent of the test set the trained weights classify right. */
static double evaluate(const tg_session *trained, const acc_config *c, const acc_run *spec)
{
    tg_model_graph mg;
    build(c, EVAL_BATCH, NULL, &mg);
    tg_session *s = open_session(c, &mg, spec);
    if (tg_session_copy_weights(s, trained) != TG_OK)
        die("copy weights");
    tg_loader *l = open_loader(c, c->test, EVAL_BATCH, false);
    tg_loader_start_epoch(l, 0);
    /* the library's evaluation, as the command's: the same figure */
    tg_eval_io io = {mg.images, NULL, mg.output};
    tg_eval_result r;
    if (tg_evaluate(s, &io, l, NULL, NULL, &r) != TG_OK)
        die("evaluation");
    tg_loader_destroy(l);
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    return r.accuracy;
}

static acc_result run(const acc_config *c, const acc_run *spec)
{
    tg_optimizer opt = tg_optimizer_sgd(0.01f, 0.9f);
    opt.lr.kind = TG_LR_COSINE;
    opt.lr.total_steps = c->train_n / BATCH;
    tg_model_graph mg;
    build(c, BATCH, &opt, &mg);
    tg_session *s = open_session(c, &mg, spec);
    acc_result r;
    double t0 = bench_now();
    r.last_loss = train(s, &mg, c);
    r.seconds = bench_now() - t0;
    r.accuracy = evaluate(s, c, spec);
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

#define MAX_SEEDS 16

static const acc_run runs[] = {
    {"32.32", NULL, "32_32"},
    {"bf16.32", NULL, "bf16_32"},
    {"bf16.bf16", NULL, "bf16_bf16"},
    {"bf16.bf16", "false", "bf16_bf16_nearest"},
};
enum { RUNS = sizeof runs / sizeof runs[0] };

/* The mean of run i's field over n seeds (offset: which acc_result field). */
static double mean_of(acc_result r[][RUNS], int n, int i, size_t offset)
{
    double sum = 0;
    for (int k = 0; k < n; k++)
        sum += *(const double *)((const char *)&r[k][i] + offset);
    return sum / n;
}

static void print_line(const acc_config *c, acc_result r[][RUNS], int first_seed, int seeds)
{
    printf("{\"bench\":\"bf16_accuracy\",\"model\":\"%s\",\"dataset\":\"fashion-mnist\","
           "\"train_samples\":%lld,\"test_samples\":%lld,\"batch\":%d,\"optimizer\":\"sgd lr 0.01 "
           "momentum 0.9 cosine\",\"threads\":%d,\"seeds\":[",
           c->model, (long long)c->train_n, (long long)tg_dataset_describe(c->test).samples, BATCH,
           c->threads);
    for (int k = 0; k < seeds; k++)
        printf("%s%d", k ? "," : "", first_seed + k);
    printf("]");
    double fp32 = mean_of(r, seeds, 0, offsetof(acc_result, accuracy));
    double lo = r[0][0].accuracy, hi = lo;
    for (int k = 0; k < seeds; k++) {
        lo = r[k][0].accuracy < lo ? r[k][0].accuracy : lo;
        hi = r[k][0].accuracy > hi ? r[k][0].accuracy : hi;
    }
    for (int i = 0; i < RUNS; i++) {
        printf(",\"accuracy_%s\":[", runs[i].key);
        for (int k = 0; k < seeds; k++)
            printf("%s%.2f", k ? "," : "", r[k][i].accuracy);
        double acc = mean_of(r, seeds, i, offsetof(acc_result, accuracy));
        printf("],\"mean_accuracy_%s\":%.2f", runs[i].key, acc);
        if (i > 0)
            printf(",\"points_below_fp32_%s\":%.2f", runs[i].key, fp32 - acc);
        printf(",\"last_loss_%s\":%.4f,\"seconds_%s\":%.1f", runs[i].key,
               mean_of(r, seeds, i, offsetof(acc_result, last_loss)), runs[i].key,
               mean_of(r, seeds, i, offsetof(acc_result, seconds)));
    }
    printf(",\"fp32_seed_spread_points\":%.2f,\"target_points\":0.5,\"load_average\":%.2f}\n",
           hi - lo, bench_load_average());
}

int main(int argc, char **argv)
{
    int usage = bench_usage(
        argc, argv, 0,
        "usage: bench_bf16_accuracy\nTest accuracy of a short ResNet-18 training run on "
        "Fashion-MNIST in 32.32, bf16.32 and bf16.bf16 (stochastic rounding, its default, and to "
        "nearest), each with several seeds, in the same run; the means compared. One JSON "
        "line.\n"
        "environment: TG_BENCH_SAMPLES (25600), TG_BENCH_SEEDS (3), TG_BENCH_SEED (1), "
        "TG_BENCH_MODEL (resnet18), TG_BENCH_THREADS (2), TG_FASHION_MNIST_DIR\n");
    if (usage >= 0)
        return usage;
    bench_passive_omp(argv);
    const char *samples = getenv("TG_BENCH_SAMPLES");
    acc_config c = {getenv("TG_BENCH_MODEL") ? getenv("TG_BENCH_MODEL") : "resnet18",
                    bench_env_int("TG_BENCH_THREADS", 2, 1, 64),
                    1,
                    samples ? atoll(samples) : 25600,
                    NULL,
                    NULL};
    c.train = load_split(TG_SPLIT_TRAIN, c.train_n);
    c.test = load_split(TG_SPLIT_TEST, 0);
    int first_seed = bench_env_int("TG_BENCH_SEED", 1, 0, 1000000);
    int seeds = bench_env_int("TG_BENCH_SEEDS", 3, 1, MAX_SEEDS);
    static acc_result r[MAX_SEEDS][RUNS];
    for (int k = 0; k < seeds; k++)
        for (int i = 0; i < RUNS; i++) {
            c.seed = first_seed + k;
            r[k][i] = run(&c, &runs[i]);
        }
    print_line(&c, r, first_seed, seeds);
    tg_dataset_destroy((tg_dataset *)c.train);
    tg_dataset_destroy((tg_dataset *)c.test);
    return 0;
}
