/* tools/cmd_infer.c - `tilegraph infer`: classify test images with a
 * trained checkpoint, as the tutorial's last cell does. */
#include "cli.h"
#include "train_util.h"

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

int cmd_infer(int argc, char **argv)
{
    const char *model = "fashion-basic", *load = NULL, *exe = NULL, *exe_cache = NULL;
    data_args data;
    data_args_defaults(&data);
    int64_t index = 0, count = 1, threads = 0;
    bool json = false, allow_non_finite = false;
    cli_flag flags[] = {
        {"--model", CLI_STRING, &model, "NAME", "model from the zoo, or an ONNX file (FILE.onnx)",
         1, 0, NULL},
        {"--load", CLI_STRING, &load, "FILE", "checkpoint written by tilegraph train --save", 1, 0,
         NULL},
        {"--dataset", CLI_STRING, &data.dataset, "NAME",
         "fashion-mnist, mnist, cifar10 or synthetic", 1, 0, NULL},
        {"--data", CLI_STRING, &data.data, "SPEC", "DIR, cifar10:DIR, mnist:DIR or synthetic", 1, 0,
         NULL},
        {"--normalize", CLI_STRING, &data.normalize, "MEAN/STD",
         "normalise images as (x/255 - MEAN) / STD, as in training", 1, 0, NULL},
        {"--stem", CLI_STRING, &data.stem, "KIND",
         "ResNets: imagenet, cifar or auto (by image size), as in training", 1, 0, NULL},
        {"--resize", CLI_STRING, &data.resize, "HxW",
         "resize images (bilinear) as in training, e.g. 64x64", 1, 0, NULL},
        {"--index", CLI_INT, &index, "N", "first test image to classify", 0, 1e9, NULL},
        {"--count", CLI_INT, &count, "N", "number of test images to classify", 1, 1e6, NULL},
        {"--threads", CLI_INT, &threads, "N", "threads to compute with (0: the free cores)", 0,
         1024, NULL},
        {"--executable", CLI_STRING, &exe, "FILE",
         "executableFile: load the compiled program from FILE (compiled and written there when "
         "it does not match)",
         1, 0, NULL},
        {"--executable-cache", CLI_STRING, &exe_cache, "DIR",
         "enableExecutableCaching: load compiled programs from DIR, store the missing", 1, 0, NULL},
        {"--json", CLI_BOOL, &json, NULL, "print JSON lines for scripts", 1, 0, NULL},
        {"--allow-non-finite", CLI_BOOL, &allow_non_finite, NULL,
         "load a checkpoint holding NaN or infinity anyway", 1, 0, NULL},
    };
    cli_command cmd = {"infer",
                       "Classify test images with a trained checkpoint.",
                       "tilegraph infer --model NAME --load FILE [--index N] [--count N]",
                       "Example:\n  tilegraph train --model fashion-basic --save w.safetensors\n"
                       "  tilegraph infer --model fashion-basic --load w.safetensors --index 0",
                       flags,
                       (int)(sizeof flags / sizeof flags[0])};
    int r = cli_parse(&cmd, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;
    if (!load) {
        fprintf(stderr, "tilegraph infer: --load FILE is required (a checkpoint from "
                        "tilegraph train --save FILE)\n");
        return 2;
    }
    train_context ctx;
    /* Read only the images asked for: a huge (or bomb) test split costs
     * nothing beyond them. */
    if (train_context_open(&ctx, model, &data, -1, index + count) != 0)
        return 1;
    int status = 1;
    if (ctx.text) { /* its samples are token windows, not images to classify */
        fprintf(stderr,
                "tilegraph infer: %s is a language model and infer classifies images; "
                "train reports its test loss, perplexity and bits per token\n",
                ctx.model->name);
        train_context_close(&ctx);
        return 1;
    }
    tg_model_graph mg = {0};
    tg_session *s = NULL;
    tg_options *o = NULL;
    float *image = NULL;
    tg_loader *loader = NULL;
    const tg_dataset *d = ctx.test;
    tg_dataset_info info = tg_dataset_describe(d);
    if (index + count > info.samples) { /* at most index + count: the file holds fewer */
        fprintf(stderr, "tilegraph infer: images %lld..%lld do not exist: %s has %lld\n",
                (long long)index, (long long)(index + count - 1), info.name,
                (long long)info.samples);
        goto done;
    }
    if (tg_model_graph_create_ex(ctx.model, 1, NULL, &ctx.input, &mg) != TG_OK ||
        !(o = infer_options(threads, exe, exe_cache)) ||
        tg_session_create(mg.graph, o, &s) != TG_OK ||
        tg_checkpoint_load_ex(s, load, ctx.model->name,
                              allow_non_finite ? TG_CHECKPOINT_ALLOW_NON_FINITE : 0) != TG_OK) {
        fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
        goto done;
    }
    /* The images as training's evaluation sees them: resized and normalised
     * by the same loader code. */
    int64_t pixels = (int64_t)info.channels * ctx.input.height * ctx.input.width;
    int classes = ctx.input.classes;
    tg_loader_config lc;
    if (loader_config(&ctx, d, 1, false, &lc) != TG_OK ||
        tg_loader_create(d, &lc, &loader) != TG_OK) {
        fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
        goto done;
    }
    image = malloc((size_t)pixels * sizeof(float));
    float scores[1024];
    if (!image || classes > 1024) {
        fprintf(stderr, "tilegraph infer: out of memory\n");
        goto done;
    }
    for (int64_t i = index; i < index + count; i++) {
        int32_t label = 0;
        if (tg_loader_sample(loader, i, image, &label) != TG_OK ||
            tg_session_write(s, mg.images, image, (size_t)pixels * sizeof(float)) != TG_OK ||
            tg_session_run(s) != TG_OK ||
            tg_session_read(s, mg.output, scores, (size_t)classes * sizeof(float)) != TG_OK) {
            fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
            goto done;
        }
        int pred = tg_argmax(scores, classes);
        const char *pname = tg_dataset_class_name(d, pred),
                   *lname = tg_dataset_class_name(d, label);
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
    status = 0;
done:
    free(image);
    tg_loader_destroy(loader);
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
    train_context_close(&ctx);
    return status;
}
