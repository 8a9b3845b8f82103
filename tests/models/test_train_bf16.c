/* tests/models/test_train_bf16.c - a ResNet-18 trained in bf16.bf16 on
 * Fashion-MNIST learns as the same run in 32.32 does. Its own file, labelled
 * slow, because two ResNet trainings take minutes under the sanitizers
 * (make asan leaves slow tests out). Skipped (and said so) when Debian's
 * dataset-fashion-mnist is absent.
 * TG_TEST_LABELS: slow */
#include "tg_test.h"
#include "tg_test_train.h"

#include "tilegraph/models.h"

/* bf16 training (bf16 weights, activations and gradients; convolutions
 * multiplying in bf16 on oneDNN) of a ResNet-18 must learn as fp32 does:
 * a broken bf16 path (a wrong conversion, a lost update, a diverging run)
 * lands far below fp32, while rounding alone costs a point or less here
 * (bench/bench_bf16_accuracy measures the difference on the whole test set). */
static void test_resnet18_bf16_learns_as_fp32(void)
{
    tg_test_fashion_run r = {"resnet18", "32.32", tg_optimizer_sgd(0.01f, 0.9f), 32, 1, 2, 4800};
    double fp32 = tg_test_fashion_accuracy(&r);
    r.precision = "bf16.bf16";
    double bf16 = tg_test_fashion_accuracy(&r);
    printf("    resnet18 1x28x28, 4800 samples: %.2f%% in 32.32, %.2f%% in bf16.bf16\n", fp32,
           bf16);
    TG_CHECK(fp32 >= 70.0);
    TG_CHECK(bf16 >= fp32 - 3.0);
}

int main(void)
{
    if (!tg_test_fashion_dir()) {
        printf("skipped: Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)\n");
        return 77;
    }
    TG_RUN(test_resnet18_bf16_learns_as_fp32);
    return tg_test_finish();
}
