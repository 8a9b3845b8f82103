/* tests/models/test_train_e2e.c - both tutorial models learn Fashion-MNIST:
 * trained on a subset, they must clear an accuracy threshold on test data.
 * Skipped (and said so) when Debian's dataset-fashion-mnist is absent.
 * Labelled slow: learning to an accuracy says nothing more under the
 * sanitizers, where it took 200 s (make asan leaves slow tests out).
 * TG_TEST_LABELS: slow */
#include "tg_test.h"
#include "tg_test_train.h"

#include "tilegraph/models.h"

static void test_fashion_basic_learns(void)
{
    tg_test_fashion_run r = {
        "fashion-basic", "32.32", tg_optimizer_sgd(0.05f, 0.0f), 16, 2, 2, 6000};
    double acc = tg_test_fashion_accuracy(&r);
    printf("    fashion-basic, 6000 samples, 2 epochs: %.2f%% on 2000 test images\n", acc);
    TG_CHECK(acc >= 80.0);
}

static void test_mnist_pipeline_learns(void)
{
    tg_test_fashion_run r = {
        "mnist-pipeline", "32.32", tg_optimizer_adamw(0.001f), 40, 2, 2, 12000};
    double acc = tg_test_fashion_accuracy(&r);
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
