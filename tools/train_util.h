/* tools/train_util.h - what train and infer share: the model and data they
 * work on, the buffers of one host step and running it, and evaluation on
 * the test set. */
#ifndef TG_TOOLS_TRAIN_UTIL_H
#define TG_TOOLS_TRAIN_UTIL_H

#include "device_flags.h"

#include "tilegraph/data.h"
#include "tilegraph/evaluate.h"
#include "tilegraph/models.h"
#include "tilegraph/session.h"

#include <stdbool.h>

/* Where the data comes from and how it is loaded (the --data and loader flags). */
typedef struct data_args {
    const char *data;    /* "DIR", "KIND:DIR" (cifar10:DIR, text:FILE) or "KIND" (synthetic) */
    const char *dataset; /* the kind when --data is a bare directory */
    const char *loader;  /* "sync" or "async" */
    int64_t workers, prefetch_depth;
    double flip;           /* random horizontal flip probability (training) */
    const char *resize;    /* "HxW": bilinear resize of every image */
    bool eight_bit;        /* stream u8 images, normalise them on the device */
    const char *stem;      /* ResNets: auto, imagenet or cifar */
    const char *loss;      /* ONNX models: the loss appended (cross-entropy or mse) */
    const char *normalize; /* "MEAN/STD": the input's normalisation (default: the model's) */
    const char *tokens;    /* text: "byte" (default) or "char" */
    int64_t seq_len;       /* text: tokens per sample; -1: the model's */
    const char *lm;        /* an ONNX language model's objective: causal or masked */
    const char *freeze;    /* ONNX models: initializers kept fixed (a regular expression) */
} data_args;

void data_args_defaults(data_args *d);
/* The flags that fill d (room for DATA_FLAG_COUNT). */
#define DATA_FLAG_COUNT 15
int data_flags(data_args *d, cli_flag *flags);

typedef struct train_context {
    const tg_model_spec *model;
    tg_model_input input; /* what the model is built for: the data's shape after resizing */
    data_args data;
    tg_dataset *train, *test; /* train is NULL when only testing */
    bool text;                /* a language model on a text data set */
    /* the evaluation graph and session, made on first use */
    tg_model_graph eval_graph;
    tg_session *eval_session;
    int64_t eval_batch;
} train_context;

/* Find the model and load the data (train_limit < 0: no training split).
 * Prints the error and returns -1 on failure. */
int train_context_open(train_context *ctx, const char *model, const data_args *data,
                       int64_t train_limit, int64_t test_limit);
/* The loader settings for this model and data: normalisation, resize, and
 * for training the flips and the loading mode. */
tg_status loader_config(const train_context *ctx, const tg_dataset *ds, int64_t samples_per_step,
                        bool training, tg_loader_config *lc);
void train_context_close(train_context *ctx);

/* Host buffers for one run of a session, and what the last run returned. */
typedef struct step_buffers {
    int64_t samples, batch, classes;
    int64_t rows; /* scored rows per sample: 1, or seq_len for a language model */
    float *images, *scores, *losses;
    uint8_t *images_u8;         /* 8-bit input: what is streamed instead of images */
    int32_t *tokens;            /* a language model's input: token ids [samples, seq_len] */
    int32_t *labels;            /* [samples * rows] */
    int64_t n_scores, n_losses; /* copies returned per run (outputMode) */
    /* results of the last run_step */
    double loss_sum;
    int64_t losses_count; /* micro-batches the returned losses cover */
    int64_t correct, scored;
    /* language models: the returned scores' cross-entropy summed over the
     * scored rows (labels TG_MODEL_IGNORE_LABEL are not scored), in double */
    double nll_sum;
    /* segmentation: scores [batch, classes, H, W], a row is a pixel (rows
     * = H * W, a class's scores rows apart); the last run's pixels per
     * class labelled, predicted, and both (the intersection) */
    bool segment;
    int64_t *truth, *predicted, *both; /* [classes] each */
} step_buffers;

tg_status step_buffers_init(step_buffers *b, const tg_session *s, const tg_model_graph *mg);
void step_buffers_free(step_buffers *b);

/* Fill the buffers with the loader's next step (8-bit or f32, as the model's
 * input is); *count is 0 at the end of the epoch. */
tg_status load_step(tg_loader *loader, step_buffers *b, int64_t *count);

/* Write the step's samples (the first `count` are real, the rest padding),
 * run, and score the returned outputs against the labels. */
tg_status run_step(tg_session *s, const tg_model_graph *mg, step_buffers *b, int64_t count);

/* Compile the evaluation program (the session evaluate uses, kept in ctx)
 * now: `train` calls it before training, so that an evaluation that cannot
 * fit (its own batch, its own memory plan) fails before any work is done
 * rather than after the first epoch. */
tg_status evaluate_prepare(train_context *ctx, const device_args *dev, int64_t batch);

/* Classes whose IoU evaluate keeps one by one (the mean covers all). */
#define EVAL_MAX_IOU_CLASSES TG_EVAL_MAX_IOU_CLASSES

/* What evaluate measures on the test set: the accuracy (percent) of the
 * predictions (for a language model, of every scored token; for a
 * segmentation model, of every pixel), for a language model the mean
 * cross-entropy of the scored tokens (nats), for a segmentation model the
 * intersection over union of each class's pixels and their mean. */
typedef struct eval_result {
    double accuracy, loss;
    int64_t scored;
    /* segmentation: each class's intersection over union (NaN for a class
     * neither labelled nor predicted) and their mean over the classes
     * that were (NaN for other tasks); accuracy is then per pixel */
    double mean_iou;
    int iou_classes; /* entries of iou and iou_name */
    double iou[EVAL_MAX_IOU_CLASSES];
    const char *iou_name[EVAL_MAX_IOU_CLASSES]; /* the data set's class names */
} eval_result;

/* The weights of `trained` on the test set, run with the same device
 * settings (accumulation 1). */
tg_status evaluate(train_context *ctx, const tg_session *trained, const device_args *dev,
                   int64_t batch, bool progress, eval_result *result);

/* The same on the weights the evaluation session holds (evaluate_prepare
 * made it; `tilegraph infer` loads a checkpoint into ctx->eval_session):
 * what training's evaluation reports for those weights. */
tg_status evaluate_loaded(train_context *ctx, bool progress, eval_result *result);

/* A text data set's tokens as a checkpoint records them (metadata
 * "text_tokens"): "byte", or "char:" and the vocabulary's code points in
 * decimal ("char:10,32,33"), token i being the i-th: a model's weights mean
 * nothing under another numbering. Malloc'd; NULL when out of memory. */
char *text_vocab_record(const tg_dataset *ds);
/* The checkpoint at path was trained on the tokens `vocab` records (one
 * without the record, from the API, is taken as it is); -1 after printing
 * why not, as `tilegraph COMMAND`. */
int text_vocab_check(const char *path, const char *vocab, const char *command);

int tg_argmax(const float *v, int n);

void print_setup(const train_context *ctx, const tg_session *s, int64_t batch,
                 int64_t steps_per_epoch);

#endif
