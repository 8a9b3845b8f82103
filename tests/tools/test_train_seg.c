/* tests/tools/test_train_seg.c - segmentation as a task (issue 30): the
 * U-Net fixture (tests/onnx/fixtures/unet_shapes.onnx, its output keeps the
 * input's size) is taken as a segmentation model, trains on --data shapes
 * with the per-pixel cross-entropy, and its test mean IoU rises well above
 * what predicting the background everywhere scores (a wrong loss gradient
 * learns nothing and stays at or below it); train's --json and text lines
 * and infer carry pixel accuracy and mean IoU; a classifier on the shapes
 * or the U-Net on class labels is an error that says what to give. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include "tilegraph/data.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static char tmpdir[256];

#define UNET TG_SOURCE_DIR "/tests/onnx/fixtures/unet_shapes.onnx"
#define TEST_LIMIT 200
/* 120 host steps of 16 images: seconds, and enough for the shapes to show */
#define TRAIN                                                                                      \
    "train --model " UNET " --data shapes --train-limit 1920 --test-limit 200 --batch-size 16 "    \
    "--optimizer adam --lr 0.01 --seed 1 --quiet --threads 2 "

/* Mean IoU of predicting the background at every pixel of the test images
 * train scores: the background's IoU is its share of the pixels, every
 * shape class's 0, averaged over the 4 classes. */
static double background_baseline(double *share)
{
    tg_dataset *ds = NULL;
    TG_CHECK_OK(tg_dataset_open("shapes", NULL, TG_SPLIT_TEST, TEST_LIMIT, &ds));
    if (!ds)
        return NAN;
    tg_dataset_info d = tg_dataset_describe(ds);
    int64_t bg = 0, all = 0;
    for (int64_t i = 0; i < d.samples; i++) {
        const uint8_t *m = tg_dataset_mask(ds, i);
        for (int p = 0; p < d.height * d.width; p++)
            bg += m[p] == 0, all++;
    }
    tg_dataset_destroy(ds);
    *share = (double)bg / (double)all;
    return *share / 4;
}

static void test_unet_learns_the_shapes(void)
{
    double share = 0, baseline = background_baseline(&share);
    char args[1024];
    snprintf(args, sizeof args, TRAIN "--json --save %s/unet.st", tmpdir);
    tg_arena *arena = tg_arena_create(1 << 16);
    const tg_json *row = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    if (row) {
        double iou = tg_cli_num(row, "test_mean_iou"), acc = tg_cli_num(row, "test_accuracy");
        printf("  background share %.3f, its mean IoU %.3f; trained: pixel accuracy %.2f%%, "
               "mean IoU %.3f (disc %.3f, square %.3f, triangle %.3f)\n",
               share, baseline, acc, iou, tg_cli_num(row, "test_iou_disc"),
               tg_cli_num(row, "test_iou_square"), tg_cli_num(row, "test_iou_triangle"));
        /* 0.97 here; labels read from a pixel 37 further on (a gradient for
         * the wrong pixel) reach 0.44, accuracy 81% */
        if (!(iou > baseline + 0.4))
            tg_test_fail(__FILE__, __LINE__,
                         "test mean IoU %.3f after training; the background everywhere scores "
                         "%.3f",
                         iou, baseline);
        TG_CHECK(acc > 100 * share + 5); /* beyond the background's share of the pixels */
        /* the shape classes are told apart: two of the three at least */
        int found = (tg_cli_num(row, "test_iou_disc") > 0.5) +
                    (tg_cli_num(row, "test_iou_square") > 0.5) +
                    (tg_cli_num(row, "test_iou_triangle") > 0.5);
        TG_CHECK(found >= 2);
        TG_CHECK(tg_cli_num(row, "test_iou_background") > 0.9);
        TG_CHECK(tg_cli_num(row, "train_accuracy") > 50);
    }
    tg_arena_destroy(arena);

    /* infer scores the pixels of each image, then all of them */
    snprintf(args, sizeof args,
             "infer --model " UNET " --data shapes --load %s/unet.st --index 3 --count 4", tmpdir);
    TG_CLI_EXPECT(tmpdir, args, 0, "image 3: pixel accuracy ");
    TG_CHECK(strstr(tg_cli_output, "4 images: pixel accuracy") != NULL);
    TG_CHECK(strstr(tg_cli_output, "triangle ") != NULL);
    snprintf(args, sizeof args,
             "infer --model " UNET " --data shapes --load %s/unet.st --index 0 --count 1 --json",
             tmpdir);
    arena = tg_arena_create(1 << 16);
    row = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    if (row) {
        TG_CHECK(tg_cli_num(row, "index") == 0);
        double iou = tg_cli_num(row, "mean_iou");
        TG_CHECK(iou > 0 && iou <= 1);
        TG_CHECK(tg_cli_num(row, "pixel_accuracy") > 50);
        TG_CHECK(tg_cli_num(row, "iou_background") > 0);
    }
    tg_arena_destroy(arena);
}

static void test_text_lines(void)
{
    TG_CLI_EXPECT(tmpdir,
                  "train --model " UNET " --data shapes --train-limit 32 --test-limit 20 "
                  "--batch-size 16 --quiet",
                  0, "test pixel accuracy: ");
    TG_CHECK(strstr(tg_cli_output, ", mean IoU: ") != NULL);
    TG_CHECK(strstr(tg_cli_output, "test mean IoU ") != NULL);
    TG_CHECK(strstr(tg_cli_output, "(background ") != NULL);
}

static void test_bad_combinations(void)
{
    TG_CLI_EXPECT(tmpdir, "train --model fashion-basic --data shapes --quiet", 1,
                  "shapes/test labels every pixel (segmentation) but model fashion-basic "
                  "classifies whole images");
    TG_CLI_EXPECT(tmpdir, "train --model " UNET " --data synthetic --quiet", 1,
                  "segments images (its output scores every pixel) but synthetic/test labels "
                  "whole images: train it on a data set with a class per pixel, --data shapes");
    TG_CLI_EXPECT(tmpdir, "train --model " UNET " --data shapes --loss mse --quiet", 1,
                  "--loss mse does not apply to a segmentation model");
    TG_CLI_EXPECT(tmpdir,
                  "train --model " UNET " --data shapes --resize 16x16 --quiet --max-steps 1", 1,
                  "takes 3x32x32 images");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_train_seg_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_unet_learns_the_shapes);
    TG_RUN(test_text_lines);
    TG_RUN(test_bad_combinations);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
