/* tests/models/test_train_bf16.c - a ResNet-18 trained in bf16.bf16 on
 * Fashion-MNIST learns. Its own file, labelled slow, because a ResNet
 * training takes minutes under the sanitizers
 * (make asan leaves slow tests out). Skipped (and said so) when Debian's
 * dataset-fashion-mnist is absent.
 * TG_TEST_LABELS: slow */
#include "tg_test.h"
#include "tg_test_train.h"

#include "tilegraph/models.h"

/* bf16 training (bf16 weights, activations and gradients; convolutions
 * multiplying in bf16 on oneDNN) of a ResNet-18 must learn: a broken bf16
 * path (a wrong conversion, a lost update, a diverging run) stays near the
 * 10% of chance. 2400 samples take this run to 72% (32.32 reaches 66% on
 * the same samples: one seed at 75 steps says little about which learns
 * better). bench/bench_bf16_accuracy compares the precisions' means over
 * seeds on the whole test set; tests/runtime/test_precision checks that a
 * bf16 trajectory follows f32's. Only the bf16 run is made here: it was two
 * ResNet trainings at 4800 samples, the slowest test of the suite. */
static void test_resnet18_bf16_learns(void)
{
    tg_test_fashion_run r = {"resnet18", "bf16.bf16", tg_optimizer_sgd(0.01f, 0.9f), 32, 1,
                             2,          2400};
    double bf16 = tg_test_fashion_accuracy(&r);
    printf("    resnet18 1x28x28, 2400 samples: %.2f%% in bf16.bf16\n", bf16);
    TG_CHECK(bf16 >= 60.0);
}

int main(void)
{
    if (!tg_test_fashion_dir()) {
        printf("skipped: Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)\n");
        return 77;
    }
    TG_RUN(test_resnet18_bf16_learns);
    return tg_test_finish();
}
