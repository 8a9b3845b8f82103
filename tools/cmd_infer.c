/* tools/cmd_infer.c - `tilegraph infer`: its flags, which choose the mode
 * (throughput and latency, a language model's scoring or generation, or
 * classifying test images), and the last: test images classified with a
 * trained checkpoint, as the tutorial's last cell does; a segmentation
 * model's images are scored pixel by pixel against their masks. */
#include "infer_cmd.h"

#include "tilegraph/analyse.h"
#include "tilegraph/checkpoint.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

tg_options *infer_options(const infer_args *a)
{
    device_args dev = a->dev;
    /* an inference program's deviceIterations: --device-iterations, which
     * the device flags give a training program, as --eval-device-iterations */
    if (dev.eval_iterations < 0)
        dev.eval_iterations = *device_int(&dev, "deviceIterations");
    tg_options *o = device_options(&dev, "infer", true);
    char num[32];
    const char *executable = device_given(&dev, "executableFile", num, sizeof num);
    if (o && executable && tg_options_set(o, "executableFile", executable) != TG_OK) {
        fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
        tg_options_destroy(o);
        return NULL;
    }
    return o;
}

uint64_t infer_seed(const infer_args *a)
{
    char num[32];
    const char *seed = device_given(&a->dev, "randomSeed", num, sizeof num);
    return seed ? strtoull(seed, NULL, 10) : 0;
}

const char *infer_weights(const infer_args *a, const tg_model_spec *m, char *buf, size_t cap)
{
    if (a->load)
        snprintf(buf, cap, "%s", a->load);
    else if (m->onnx)
        snprintf(buf, cap, "the ONNX file's initializers");
    else
        snprintf(buf, cap, "the model's initialisation (--seed %llu)",
                 (unsigned long long)infer_seed(a));
    return buf;
}

const char *infer_weights_kind(const infer_args *a, const tg_model_spec *m)
{
    return a->load ? "load" : m->onnx ? "onnx" : "init";
}

int infer_load(const infer_args *a, tg_session *s, const tg_model_spec *m)
{
    if (!a->load)
        return 0;
    if (tg_checkpoint_load_ex(s, a->load, m->name,
                              a->allow_non_finite ? TG_CHECKPOINT_ALLOW_NON_FINITE : 0) != TG_OK) {
        fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
        return -1;
    }
    return 0;
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
                      ? tg_eval_mean_iou(c->truth, c->predicted, c->both, classes, iou)
                      : tg_eval_mean_iou(c->truth, c->predicted, c->both, classes, NULL);
    if (json) {
        tg_record_field f[4 + EVAL_MAX_IOU_CLASSES];
        char names[EVAL_MAX_IOU_CLASSES][64];
        int n = 0;
        f[n++] = one ? (tg_record_field){"index", TG_RECORD_INT, NULL, index, 0}
                     : (tg_record_field){"images", TG_RECORD_INT, NULL, count, 0};
        f[n++] = (tg_record_field){"pixel_accuracy", TG_RECORD_NUMBER, NULL, 0, acc};
        f[n++] = (tg_record_field){"mean_iou", TG_RECORD_NUMBER, NULL, 0, mean};
        for (int k = 0; classes <= EVAL_MAX_IOU_CLASSES && k < shown; k++) {
            snprintf(names[k], sizeof names[k], "iou_%s", tg_dataset_class_name(d, k));
            f[n++] = (tg_record_field){names[k], TG_RECORD_NUMBER, NULL, 0, iou[k]};
        }
        tg_print_record(stdout, f, n);
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

#define INFER_EXAMPLES                                                                             \
    "Examples:\n"                                                                                  \
    "  tilegraph train --model fashion-basic --save w.safetensors\n"                               \
    "  tilegraph infer --model fashion-basic --load w.safetensors --index 0 --count 3\n"           \
    "  tilegraph infer --model resnet18 --batch-size 8 --iterations 20     # images/s, p50, p99\n" \
    "  tilegraph infer --model gpt-tiny --load g.safetensors --data text:FILE   # bits per byte\n" \
    "  tilegraph infer --model gpt-tiny --load g.safetensors --generate 80 --prompt \"The \"\n"    \
    "Modes: --generate N generates; a language model on --data text:FILE is scored; "              \
    "--iterations, --batch-size or no --load measure throughput and latency on synthetic "         \
    "inputs (or --data's); otherwise the test images --index.. are classified."

/* Parse argv into a: 0, 1 after --help, -1 on an error (printed). */
static int infer_parse(infer_args *a, int argc, char **argv)
{
    *a = (infer_args){.model = CLI_DEFAULT_MODEL,
                      .index = -1,
                      .count = 1,
                      .batch = -1,
                      .iterations = -1,
                      .warmup = -1,
                      .temperature = 0,
                      .top_k = 0};
    data_args_defaults(&a->data);
    device_args_defaults(&a->dev);
    cli_flag flags[24 + DATA_FLAG_COUNT + 40] = {
        {"--model", CLI_STRING, &a->model, "NAME",
         "model from the zoo, or an ONNX file (FILE.onnx)", 1, 0, NULL},
        {"--load", CLI_STRING, &a->load, "FILE",
         "checkpoint written by tilegraph train --save (without it: the model's initialisation, "
         "seeded by --seed)",
         1, 0, NULL},
        {"--index", CLI_INT, &a->index, "N", "first test image to classify", 0, 1e9, "0"},
        {"--count", CLI_INT, &a->count, "N", "number of test images to classify", 1, 1e6, NULL},
        {"--batch-size", CLI_INT, &a->batch, "N",
         "throughput: samples per micro-batch (language models: sequences); scoring: samples per "
         "evaluation step",
         1, 65536, "1; scoring 500"},
        {"--iterations", CLI_INT, &a->iterations, "N",
         "throughput: host steps timed (each runs --device-iterations x --replicas micro-batches)",
         1, 100000, "20"},
        {"--warmup", CLI_INT, &a->warmup, "N", "throughput: host steps run before timing", 0, 10000,
         "2"},
        {"--test-limit", CLI_INT, &a->test_limit, "N",
         "scoring: use only the first N held-out samples (0: all), as train's --test-limit", 0, 1e9,
         NULL},
        {"--generate", CLI_INT, &a->generate, "N",
         "a causal language model (gpt-tiny) continues --prompt by N tokens", 1, 100000, NULL},
        {"--prompt", CLI_STRING, &a->prompt, "TEXT",
         "generation: the text to continue (cut to its last --seq-len tokens, the context)", 1, 0,
         NULL},
        {"--temperature", CLI_FLOAT, &a->temperature, "T",
         "generation: sample from softmax(logits / T) (0: greedy, the most likely token)", 0, 100,
         NULL},
        {"--top-k", CLI_INT, &a->top_k, "K",
         "generation: sample only among the K most likely tokens (0: all)", 0, 1e6, NULL},
        {"--seed", CLI_INT, device_int(&a->dev, "randomSeed"), "N",
         "randomSeed: the initialisation without --load, and sampling", 0, 9e18, "0"},
        {"--json", CLI_BOOL, &a->json, NULL, "print JSON lines for scripts", 1, 0, NULL},
        {"--allow-non-finite", CLI_BOOL, &a->allow_non_finite, NULL,
         "load a checkpoint holding NaN or infinity anyway", 1, 0, NULL},
    };
    int n = 15;
    n += data_flags(&a->data, flags + n);
    n += device_flags(&a->dev, flags + n, (int)(sizeof flags / sizeof flags[0]) - n);
    cli_command cmd = {"infer",
                       "Measure a model's inference throughput and latency, score text with a "
                       "language model, generate text, or classify test images with a trained "
                       "checkpoint (a segmentation model: score their pixels).",
                       "tilegraph infer --model NAME [--load FILE] [--batch-size N] "
                       "[--iterations N] [--data text:FILE] [--generate N --prompt TEXT] "
                       "[--index N] [--count N]",
                       INFER_EXAMPLES,
                       flags,
                       n};
    /* unset, to see whether they were given (synthetic inputs without them) */
    a->data.dataset = a->data.loader = NULL;
    /* training-only flags (CLI_TRAINING) are refused by name, not listed */
    int r = cli_parse_inference(&cmd, argc, argv);
    if (r)
        return r;
    a->data_given = a->data.data || a->data.dataset;
    a->loader_given = a->data.loader != NULL;
    if (!a->data.dataset)
        a->data.dataset = "fashion-mnist";
    if (!a->data.loader)
        a->data.loader = "sync";
    a->index_given = a->index >= 0;
    a->batch_given = a->batch > 0;
    a->iterations_given = a->iterations > 0;
    if (!a->generate && (a->prompt || a->temperature > 0 || a->top_k > 0)) {
        fprintf(stderr, "tilegraph infer: %s applies to generation: add --generate N\n",
                a->prompt            ? "--prompt"
                : a->temperature > 0 ? "--temperature"
                                     : "--top-k");
        return -1;
    }
    if (a->generate && !a->prompt) {
        fprintf(stderr, "tilegraph infer: --generate needs --prompt TEXT (the text to "
                        "continue)\n");
        return -1;
    }
    return 0;
}

/* A --data text:FILE (a language model's text to score). */
static bool text_data(const infer_args *a)
{
    return a->data.data && !strncmp(a->data.data, "text:", 5);
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
        !(r->o = infer_options(a)) || tg_session_create(r->mg.graph, r->o, &r->s) != TG_OK) {
        if (r->o)
            fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
        return -1;
    }
    if (infer_load(a, r->s, r->ctx.model) != 0)
        return -1;
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

/* Test images --index.. classified (or segmented) with --load's weights. */
static int infer_images(infer_args *a)
{
    if (a->index < 0)
        a->index = 0;
    infer_run r = {0};
    /* Read only the images asked for: a huge (or bomb) test split costs
     * nothing beyond them. */
    if (train_context_open(&r.ctx, a->model, &a->data, -1, a->index + a->count) != 0)
        return 1;
    int status = 1;
    if (infer_prepare(a, &r) == 0)
        status = r.ctx.model->task == TG_TASK_SEGMENT
                     ? infer_segment(&r.mg, r.s, r.loader, r.ctx.test, a->index, a->count, a->json)
                     : infer_classify(a, &r);
    tg_loader_destroy(r.loader);
    tg_session_destroy(r.s);
    tg_options_destroy(r.o);
    tg_model_graph_destroy(&r.mg);
    train_context_close(&r.ctx);
    return status;
}

/* A language model's checkpoint holds positions for the window it was
 * trained on: without --seq-len, that one (train records it). */
static void seq_len_from_checkpoint(infer_args *a)
{
    char buf[32], *end = NULL;
    if (!a->load || a->data.seq_len > 0 ||
        tg_checkpoint_read_meta(a->load, "text_seq_len", buf, sizeof buf) != TG_OK)
        return;
    long v = strtol(buf, &end, 10);
    if (end != buf && !*end && v > 0 && v <= 65536)
        a->data.seq_len = v;
}

int cmd_infer(int argc, char **argv)
{
    infer_args a;
    int rc = infer_parse(&a, argc, argv);
    if (rc)
        return rc > 0 ? 0 : 2;
    seq_len_from_checkpoint(&a);
    if (a.generate)
        return infer_generate(&a);
    bool bench = a.iterations_given || a.batch_given || a.warmup >= 0;
    if (text_data(&a) && !bench)
        return infer_score(&a);
    if (bench || !a.load) {
        if (a.index_given) {
            fprintf(stderr, "tilegraph infer: --index chooses test images to classify, which "
                            "needs --load FILE and no --iterations/--batch-size (those measure "
                            "throughput)\n");
            return 2;
        }
        return infer_bench(&a);
    }
    return infer_images(&a);
}
