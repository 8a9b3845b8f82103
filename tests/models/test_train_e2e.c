/* tests/models/test_train_e2e.c - both tutorial models learn Fashion-MNIST:
 * trained on a subset, they must clear an accuracy threshold on test data.
 * Skipped (and said so) when Debian's dataset-fashion-mnist is absent. */
#include "tg_test.h"

#include "core/alloc.h"
#include "data/loader.h"
#include "tilegraph/models.h"
#include "tilegraph/session.h"

static double accuracy_after_training(const char *model, const tg_optimizer *opt, int batch,
                                      int64_t train_n, int epochs, int threads)
{
    const char *dir = tg_test_fashion_dir();
    tg_dataset *train = NULL, *test = NULL;
    TG_CHECK_OK(tg_dataset_load(TG_DATASET_FASHION_MNIST, dir, TG_SPLIT_TRAIN, train_n, &train));
    TG_CHECK_OK(tg_dataset_load(TG_DATASET_FASHION_MNIST, dir, TG_SPLIT_TEST, 2000, &test));
    const tg_model_spec *m = tg_model_find(model);
    tg_model_graph tr, inf;
    TG_CHECK_OK(tg_model_graph_create(m, batch, opt, &tr));
    TG_CHECK_OK(tg_model_graph_create(m, 500, NULL, &inf));
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", threads);
    tg_options_set_int(o, "randomSeed", 1);
    tg_session *s = NULL, *si = NULL;
    TG_CHECK_OK(tg_session_create(tr.graph, o, &s));
    TG_CHECK_OK(tg_session_create(inf.graph, o, &si));
    float *img = tg_malloc((size_t)500 * 784 * sizeof(float));
    float *scores = tg_malloc((size_t)500 * 10 * sizeof(float));
    int32_t *lab = tg_malloc(500 * sizeof(int32_t));
    tg_loader_config lc = tg_loader_defaults(train, batch);
    lc.mean = m->mean;
    lc.std = m->std;
    lc.seed = 1;
    tg_loader *l = NULL;
    TG_CHECK_OK(tg_loader_create(train, &lc, &l));
    for (int e = 0; e < epochs && s; e++) {
        tg_loader_start_epoch(l, e);
        int64_t count = 0;
        while (tg_loader_next(l, img, lab, &count) == TG_OK && count > 0) {
            tg_session_write(s, tr.images, img, (size_t)count * 784 * sizeof(float));
            tg_session_write(s, tr.labels, lab, (size_t)count * sizeof(int32_t));
            TG_CHECK_OK(tg_session_run(s));
        }
    }
    tg_loader_destroy(l);
    TG_CHECK_OK(tg_session_copy_weights(si, s));
    lc = tg_loader_defaults(test, 500);
    lc.mean = m->mean;
    lc.std = m->std;
    lc.shuffle = false;
    TG_CHECK_OK(tg_loader_create(test, &lc, &l));
    tg_loader_start_epoch(l, 0);
    int64_t count = 0, correct = 0, seen = 0;
    while (si && tg_loader_next(l, img, lab, &count) == TG_OK && count > 0) {
        tg_session_write(si, inf.images, img, (size_t)500 * 784 * sizeof(float));
        TG_CHECK_OK(tg_session_run(si));
        tg_session_read(si, inf.output, scores, (size_t)500 * 10 * sizeof(float));
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
    tg_free(img);
    tg_free(scores);
    tg_free(lab);
    tg_session_destroy(s);
    tg_session_destroy(si);
    tg_options_destroy(o);
    tg_model_graph_destroy(&tr);
    tg_model_graph_destroy(&inf);
    tg_dataset_destroy(train);
    tg_dataset_destroy(test);
    return seen ? 100.0 * (double)correct / (double)seen : 0;
}

static void test_fashion_basic_learns(void)
{
    tg_optimizer opt = tg_optimizer_sgd(0.05f, 0.0f);
    double acc = accuracy_after_training("fashion-basic", &opt, 16, 6000, 2, 2);
    printf("    fashion-basic, 6000 samples, 2 epochs: %.2f%% on 2000 test images\n", acc);
    TG_CHECK(acc >= 80.0);
}

static void test_mnist_pipeline_learns(void)
{
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    double acc = accuracy_after_training("mnist-pipeline", &opt, 40, 12000, 2, 2);
    printf("    mnist-pipeline, 12000 samples, 2 epochs: %.2f%% on 2000 test images\n", acc);
    TG_CHECK(acc >= 80.0);
}

int main(void)
{
    if (!tg_test_fashion_dir()) {
        printf("skipped: Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)\n");
        return 77;
    }
    TG_RUN(test_fashion_basic_learns);
    TG_RUN(test_mnist_pipeline_learns);
    return tg_test_finish();
}
