/* tools/cmd_infer.c - `tilegraph infer`: classify test images with a
 * trained checkpoint, as the tutorial's last cell does; a segmentation
 * model's images are scored pixel by pixel against their masks. */
#include "cli.h"
#include "train_util.h"

#include "analyse/analyse.h"
#include "tilegraph/checkpoint.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static tg_options *infer_options(int64_t threads, const char *exe, const char *exe_cache)
{
    device_args dev;
    device_args_defaults(&dev);
    dev.threads = threads;
    dev.executable_cache = exe_cache;
    tg_options *o = device_options(&dev, "infer", true);
    if (o && exe && tg_options_set(o, "executableFile", exe) != TG_OK) {
        fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
        tg_options_destroy(o);
        return NULL;
    }
    return o;
}

/* Pixel counts per class: labelled, predicted, both (train_util's mean_iou). */
typedef struct seg_counts {
    int64_t *truth, *predicted, *both;
    int64_t correct, pixels;
} seg_counts;

/* One line (or JSON record) of pixel accuracy, mean IoU and each class's IoU. */
static void print_seg(const tg_dataset *d, const seg_counts *c, int classes, bool one,
                      int64_t index, int64_t count, bool json)
{
    double iou[EVAL_MAX_IOU_CLASSES];
    int shown = classes < EVAL_MAX_IOU_CLASSES ? classes : EVAL_MAX_IOU_CLASSES;
    double acc = c->pixels ? 100.0 * (double)c->correct / (double)c->pixels : NAN;
    double mean = classes <= EVAL_MAX_IOU_CLASSES
                      ? mean_iou(c->truth, c->predicted, c->both, classes, iou)
                      : mean_iou(c->truth, c->predicted, c->both, classes, NULL);
    if (json) {
        tg_an_field f[4 + EVAL_MAX_IOU_CLASSES];
        char names[EVAL_MAX_IOU_CLASSES][64];
        int n = 0;
        f[n++] = one ? (tg_an_field){"index", TG_AN_FIELD_INT, NULL, index, 0}
                     : (tg_an_field){"images", TG_AN_FIELD_INT, NULL, count, 0};
        f[n++] = (tg_an_field){"pixel_accuracy", TG_AN_FIELD_NUMBER, NULL, 0, acc};
        f[n++] = (tg_an_field){"mean_iou", TG_AN_FIELD_NUMBER, NULL, 0, mean};
        for (int k = 0; classes <= EVAL_MAX_IOU_CLASSES && k < shown; k++) {
            snprintf(names[k], sizeof names[k], "iou_%s", tg_dataset_class_name(d, k));
            f[n++] = (tg_an_field){names[k], TG_AN_FIELD_NUMBER, NULL, 0, iou[k]};
        }
        tg_an_print_record(stdout, f, n);
        return;
    }
    if (one)
        printf("image %lld: ", (long long)index);
    else
        printf("%lld images: ", (long long)count);
    printf("pixel accuracy %.2f%%, mean IoU %.3f", acc, mean);
    for (int k = 0; classes <= EVAL_MAX_IOU_CLASSES && k < shown; k++)
        printf(isnan(iou[k]) ? "%s%s n/a" : "%s%s %.3f", k ? ", " : " (",
               tg_dataset_class_name(d, k), iou[k]);
    printf(classes <= EVAL_MAX_IOU_CLASSES ? ")\n" : "\n");
}

/* A segmentation model on test images index..index+count-1: each image's
 * pixel accuracy and IoU against its mask, then all of them together. */
static int infer_segment(const tg_model_graph *mg, tg_session *s, const tg_loader *loader,
                         const tg_dataset *d, int64_t index, int64_t count, bool json)
{
    tg_shape out = tg_tensor_shape(mg->output);
    int classes = (int)out.dim[1];
    int64_t plane = out.dim[2] * out.dim[3], pixels = tg_shape_numel(tg_tensor_shape(mg->images));
    float *image = malloc((size_t)pixels * sizeof *image);
    float *scores = malloc((size_t)(classes * plane) * sizeof *scores);
    int32_t *labels = malloc((size_t)plane * sizeof *labels);
    int64_t *counts = calloc((size_t)(6 * classes), sizeof *counts);
    int status = 1;
    if (!image || !scores || !labels || !counts) {
        fprintf(stderr, "tilegraph infer: out of memory\n");
        goto done;
    }
    seg_counts one = {counts, counts + classes, counts + 2 * classes, 0, 0};
    seg_counts all = {counts + 3 * classes, counts + 4 * classes, counts + 5 * classes, 0, 0};
    for (int64_t i = index; i < index + count; i++) {
        if (tg_loader_sample(loader, i, image, labels) != TG_OK ||
            tg_session_write(s, mg->images, image, (size_t)pixels * sizeof(float)) != TG_OK ||
            tg_session_run(s) != TG_OK ||
            tg_session_read(s, mg->output, scores, (size_t)(classes * plane) * sizeof(float)) !=
                TG_OK) {
            fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
            goto done;
        }
        memset(counts, 0, (size_t)(3 * classes) * sizeof *counts);
        one.correct = one.pixels = 0;
        for (int64_t p = 0; p < plane; p++) {
            int label = labels[p], pred = 0;
            for (int c = 1; c < classes; c++)
                if (scores[c * plane + p] > scores[pred * plane + p])
                    pred = c;
            if (label < 0 || label >= classes)
                continue;
            one.truth[label]++, one.predicted[pred]++, one.both[label] += pred == label;
            one.correct += pred == label, one.pixels++;
        }
        for (int c = 0; c < classes; c++) {
            all.truth[c] += one.truth[c];
            all.predicted[c] += one.predicted[c];
            all.both[c] += one.both[c];
        }
        all.correct += one.correct, all.pixels += one.pixels;
        print_seg(d, &one, classes, true, i, 1, json);
    }
    if (count > 1)
        print_seg(d, &all, classes, false, index, count, json);
    status = 0;
done:
    free(image);
    free(scores);
    free(labels);
    free(counts);
    return status;
}

/* The flags of `tilegraph infer`. */
typedef struct infer_args {
    const char *model, *load, *exe, *exe_cache;
    data_args data;
    int64_t index, count, threads;
    bool json, allow_non_finite;
} infer_args;

/* Parse argv into a: 0, 1 after --help, -1 on an error (printed). */
static int infer_parse(infer_args *a, int argc, char **argv)
{
    *a = (infer_args){.model = CLI_DEFAULT_MODEL, .count = 1};
    data_args_defaults(&a->data);
    cli_flag flags[] = {
        {"--model", CLI_STRING, &a->model, "NAME",
         "model from the zoo, or an ONNX file (FILE.onnx)", 1, 0, NULL},
        {"--load", CLI_STRING, &a->load, "FILE", "checkpoint written by tilegraph train --save", 1,
         0, NULL},
        {"--dataset", CLI_STRING, &a->data.dataset, "NAME",
         "fashion-mnist, mnist, cifar10 or synthetic", 1, 0, NULL},
        {"--data", CLI_STRING, &a->data.data, "SPEC",
         "DIR, cifar10:DIR, mnist:DIR, synthetic or shapes (segmentation)", 1, 0, NULL},
        {"--normalize", CLI_STRING, &a->data.normalize, "MEAN/STD",
         "normalise images as (x/255 - MEAN) / STD, as in training", 1, 0, NULL},
        {"--stem", CLI_STRING, &a->data.stem, "KIND",
         "ResNets: imagenet, cifar or auto (by image size), as in training", 1, 0, NULL},
        {"--resize", CLI_STRING, &a->data.resize, "HxW",
         "resize images (bilinear) as in training, e.g. 64x64", 1, 0, NULL},
        {"--index", CLI_INT, &a->index, "N", "first test image to classify", 0, 1e9, NULL},
        {"--count", CLI_INT, &a->count, "N", "number of test images to classify", 1, 1e6, NULL},
        {"--threads", CLI_INT, &a->threads, "N", "threads to compute with (0: the usable cores)", 0,
         1024, NULL},
        {"--executable", CLI_STRING, &a->exe, "FILE",
         "executableFile: load the compiled program from FILE (compiled and written there when "
         "it does not match)",
         1, 0, NULL},
        {"--executable-cache", CLI_STRING, &a->exe_cache, "DIR",
         "enableExecutableCaching: load compiled programs from DIR, store the missing", 1, 0, NULL},
        {"--json", CLI_BOOL, &a->json, NULL, "print JSON lines for scripts", 1, 0, NULL},
        {"--allow-non-finite", CLI_BOOL, &a->allow_non_finite, NULL,
         "load a checkpoint holding NaN or infinity anyway", 1, 0, NULL},
    };
    cli_command cmd = {"infer",
                       "Classify test images with a trained checkpoint (a segmentation model: "
                       "score their pixels).",
                       "tilegraph infer --model NAME --load FILE [--index N] [--count N]",
                       "Example:\n  tilegraph train --model fashion-basic --save w.safetensors\n"
                       "  tilegraph infer --model fashion-basic --load w.safetensors --index 0",
                       flags,
                       (int)(sizeof flags / sizeof flags[0])};
    int r = cli_parse(&cmd, argc, argv);
    if (r == 0 && !a->load) {
        fprintf(stderr, "tilegraph infer: --load FILE is required (a checkpoint from "
                        "tilegraph train --save FILE)\n");
        return -1;
    }
    return r;
}

/* What infer holds (cmd_infer frees it). */
typedef struct infer_run {
    train_context ctx;
    tg_model_graph mg;
    tg_session *s;
    tg_options *o;
    tg_loader *loader;
} infer_run;

/* The images asked for checked to exist, the inference session with the
 * checkpoint's weights, and the loader that prepares images as training's
 * evaluation does (resized and normalised by the same code); 0 or -1
 * (printed). */
static int infer_prepare(const infer_args *a, infer_run *r)
{
    const tg_dataset *d = r->ctx.test;
    tg_dataset_info info = tg_dataset_describe(d);
    if (a->index + a->count > info.samples) { /* at most index + count: the file holds fewer */
        fprintf(stderr, "tilegraph infer: images %lld..%lld do not exist: %s has %lld\n",
                (long long)a->index, (long long)(a->index + a->count - 1), info.name,
                (long long)info.samples);
        return -1;
    }
    if (tg_model_graph_create_ex(r->ctx.model, 1, NULL, &r->ctx.input, &r->mg) != TG_OK ||
        !(r->o = infer_options(a->threads, a->exe, a->exe_cache)) ||
        tg_session_create(r->mg.graph, r->o, &r->s) != TG_OK ||
        tg_checkpoint_load_ex(r->s, a->load, r->ctx.model->name,
                              a->allow_non_finite ? TG_CHECKPOINT_ALLOW_NON_FINITE : 0) != TG_OK) {
        fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
        return -1;
    }
    tg_loader_config lc;
    if (loader_config(&r->ctx, d, 1, false, &lc) != TG_OK ||
        tg_loader_create(d, &lc, &r->loader) != TG_OK) {
        fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
        return -1;
    }
    return 0;
}

/* One image's prediction, as a line or a JSON record. */
static void print_prediction(const tg_dataset *d, int64_t i, const float *scores, int classes,
                             int label, bool json)
{
    int pred = tg_argmax(scores, classes);
    const char *pname = tg_dataset_class_name(d, pred), *lname = tg_dataset_class_name(d, label);
    if (json) {
        printf("{\"index\":%lld,\"predicted\":%d,\"predicted_name\":\"%s\",\"label\":%d,"
               "\"label_name\":\"%s\",\"scores\":[",
               (long long)i, pred, pname, label, lname);
        for (int c = 0; c < classes; c++) /* JSON has no NaN: null, as JSON.stringify */
            printf(isfinite(scores[c]) ? "%s%.6g" : "%snull", c ? "," : "", scores[c]);
        printf("]}\n");
    } else {
        printf("image %lld: predicted: %s (label: %s)%s\n", (long long)i, pname, lname,
               pred == label ? "" : "  <- wrong");
    }
}

/* Each image asked for classified and printed; the exit code. */
static int infer_classify(const infer_args *a, infer_run *r)
{
    const tg_dataset *d = r->ctx.test;
    int64_t pixels =
        (int64_t)tg_dataset_describe(d).channels * r->ctx.input.height * r->ctx.input.width;
    int classes = r->ctx.input.classes;
    float *image = malloc((size_t)pixels * sizeof(float));
    float scores[1024];
    if (!image || classes > 1024) {
        fprintf(stderr, "tilegraph infer: out of memory\n");
        free(image);
        return 1;
    }
    int status = 0;
    for (int64_t i = a->index; i < a->index + a->count; i++) {
        int32_t label = 0;
        if (tg_loader_sample(r->loader, i, image, &label) != TG_OK ||
            tg_session_write(r->s, r->mg.images, image, (size_t)pixels * sizeof(float)) != TG_OK ||
            tg_session_run(r->s) != TG_OK ||
            tg_session_read(r->s, r->mg.output, scores, (size_t)classes * sizeof(float)) != TG_OK) {
            fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
            status = 1;
            break;
        }
        print_prediction(d, i, scores, classes, label, a->json);
    }
    free(image);
    return status;
}

int cmd_infer(int argc, char **argv)
{
    infer_args a;
    int rc = infer_parse(&a, argc, argv);
    if (rc)
        return rc > 0 ? 0 : 2;
    infer_run r = {0};
    /* Read only the images asked for: a huge (or bomb) test split costs
     * nothing beyond them. */
    if (train_context_open(&r.ctx, a.model, &a.data, -1, a.index + a.count) != 0)
        return 1;
    int status = 1;
    if (r.ctx.text) /* its samples are token windows, not images to classify */
        fprintf(stderr,
                "tilegraph infer: %s is a language model and infer classifies images; "
                "train reports its test loss, perplexity and bits per token\n",
                r.ctx.model->name);
    else if (infer_prepare(&a, &r) == 0)
        status = r.ctx.model->task == TG_TASK_SEGMENT
                     ? infer_segment(&r.mg, r.s, r.loader, r.ctx.test, a.index, a.count, a.json)
                     : infer_classify(&a, &r);
    tg_loader_destroy(r.loader);
    tg_session_destroy(r.s);
    tg_options_destroy(r.o);
    tg_model_graph_destroy(&r.mg);
    train_context_close(&r.ctx);
    return status;
}
