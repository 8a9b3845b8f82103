/* tilegraph/models.h - the built-in model zoo.
 *
 * Each model is a builder function over the graph API, with the input shape,
 * class count, dataset and normalisation it was made for. Models put their
 * layers in named scopes matching PyTorch module names (so checkpoints use
 * PyTorch's parameter names) and in blocks where the reference tutorials do.
 *
 *   fashion-basic   the profiling talk's Fashion-MNIST classifier
 *   mnist-pipeline  the pipelining tutorial's network, blocks B1..B4
 *   resnet18, resnet34, resnet50, resnet101
 *                   torchvision's ResNets (v1.5), for any input shape and
 *                   class count; by default CIFAR-10 (3x32x32, 10 classes)
 *   gpt-tiny        a causal language model (nanoGPT's decoder: 4 layers,
 *                   d 128, 4 heads, pre-LN, learned positions)
 *   bert-tiny       a masked language model (BERT-Tiny: 2 layers, d 128,
 *                   2 heads, post-LN), trained as BERT's pre-training
 *
 * The language models take token ids [batch, seq_len] (i32) instead of
 * images and are labelled per position (tg_model_task); their vocabulary is
 * the spec's class count, their window its seq_len, and they build for any
 * of both (tg_model_input's classes and seq_len).
 *
 * Most models are made for one input shape; models with build_for (the
 * ResNets) build for any input given to tg_model_graph_create_ex, and the
 * spec's channels/height/width/classes are then only their default.
 */
#ifndef TILEGRAPH_MODELS_H
#define TILEGRAPH_MODELS_H

#include "tilegraph/export.h"

#include "tilegraph/graph.h"
#include "tilegraph/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_MODEL_MAX_NORM_CHANNELS 4

/* What a model takes and learns. */
typedef enum tg_model_task {
    /* images [N, C, H, W] -> class scores [N, classes]; labels [N] */
    TG_TASK_CLASSIFY,
    /* token ids [N, S] i32 -> scores of the next token [N, S, classes]
     * (classes = the vocabulary); labels [N, S], the next token at each
     * position; the loss is their mean cross-entropy */
    TG_TASK_CAUSAL_LM,
    /* the same shapes; the input holds masked tokens (the mask token's id
     * is `classes`, so the input vocabulary is classes + 1) and labels are
     * the original tokens at the masked positions, TG_MODEL_IGNORE_LABEL
     * (-100) elsewhere: the loss is over the masked positions only */
    TG_TASK_MASKED_LM,
    /* images [N, C, H, W] -> the scores of every pixel [N, classes, H, W];
     * labels [N, H, W], a class per pixel; the loss is the mean
     * cross-entropy over the pixels. An ONNX model is one when its first
     * output keeps its input's height and width (a U-Net, FCN, DeepLab) */
    TG_TASK_SEGMENT,
} tg_model_task;

/* The label of a position a masked language model is not scored on (the
 * loss's ignore_index; the data loader's TG_LOADER_IGNORE_LABEL). */
#define TG_MODEL_IGNORE_LABEL (-100)

/* Whether the task takes token ids (a language model). */
TG_API bool tg_model_task_tokens(tg_model_task task);

/* The input a model is built for: images C x H x W and the class count;
 * or, for a language model, seq_len tokens (channels and height 1, width
 * seq_len) over a vocabulary of `classes`. */
typedef struct tg_model_input {
    int channels, height, width;
    int classes;
    /* 8-bit input: images arrive as u8 and are normalised on the device
     * (tg_normalize_u8), so the host streams a quarter of the bytes */
    bool eight_bit;
    /* ResNets: which stem (see models/resnet.c); auto picks by image size */
    enum { TG_STEM_AUTO, TG_STEM_IMAGENET, TG_STEM_CIFAR } stem;
    /* The input's normalisation, (x/255 - norm_mean[c]) / norm_std[c], when
     * norm_channels > 0 (1: the same for every channel); 0: the spec's own.
     * An ONNX model's spec has none (images in [0, 1]), so a model trained in
     * PyTorch behind transforms.Normalize needs the same values here. */
    int norm_channels;
    float norm_mean[TG_MODEL_MAX_NORM_CHANNELS], norm_std[TG_MODEL_MAX_NORM_CHANNELS];
    int seq_len; /* language models: tokens per sample (= width); 0 for images */
} tg_model_input;

/* "auto", "imagenet" (torchvision's 7x7/2 conv and max pool) or "cifar"
 * (3x3/1 conv, no pool) into in->stem. */
TG_API tg_status tg_model_stem_parse(const char *text, tg_model_input *in);

/* The loss appended to an imported model's logits. */
typedef enum tg_model_loss {
    TG_LOSS_CROSS_ENTROPY, /* labels are class indices (the default) */
    TG_LOSS_MSE,           /* against the one-hot labels */
} tg_model_loss;

typedef struct tg_model_spec {
    const char *name;
    const char *description;
    tg_model_task task;          /* TG_TASK_CLASSIFY (0) for the image models */
    int seq_len;                 /* language models: the default tokens per sample */
    int channels, height, width; /* input image shape (the default, with build_for) */
    int classes;
    /* Input normalisation: (x/255 - mean) / std. With channel_mean and
     * channel_std (`channels` entries each) the normalisation is per channel
     * and mean/std are their averages, for code that takes one value. */
    float mean, std;
    const float *channel_mean, *channel_std; /* NULL: mean/std for every channel */
    /* x: [N, C, H, W] f32 (language models: token ids [N, S] i32, labels
     * [N, S], *out [N, S, classes]). Sets *out to the class scores (logits or log
     * probabilities: argmax is the prediction either way); when labels is
     * non-NULL also sets *loss to the model's training loss, in the block of
     * the last layer. NULL for models with build_for. */
    tg_status (*build)(tg_graph *g, tg_tensor *x, tg_tensor *labels, tg_tensor **out,
                       tg_tensor **loss);
    /* The same for models that build for any input: `in` gives the shape
     * (x's shape too) and the class count. NULL for fixed-input models. */
    tg_status (*build_for)(tg_graph *g, const tg_model_input *in, tg_tensor *x, tg_tensor *labels,
                           tg_tensor **out, tg_tensor **loss);
    /* Set for a model read from an ONNX file (tg_model_open): the importer
     * builds it, its first output taken as the logits; NULL for the zoo. */
    const struct tg_onnx_model *onnx;
    tg_model_loss loss; /* ONNX models: the loss appended for training */
} tg_model_spec;

TG_API int tg_model_count(void);
TG_API const tg_model_spec *tg_model_at(int index);
/* NULL (and a message listing the models) if there is no such model. */
TG_API const tg_model_spec *tg_model_find(const char *name);

/* A zoo name or the path of an ONNX file ("model.onnx"): *out is the zoo's
 * spec, or a spec made for the file (input shape and classes from its
 * first input and output, a dynamic batch dimension allowed, normalisation
 * x/255 since an exported model's own preprocessing is not in the file).
 * The file's shapes choose the task: logits [N, classes] classify, scores
 * [N, classes, H, W] at the input's H and W segment (TG_TASK_SEGMENT),
 * token ids in and [N, S, vocab] out make a language model.
 * Release it with tg_model_close (a no-op for zoo specs). Fails naming the
 * model or the file (an unsupported op, opset or input shape...). */
TG_API tg_status tg_model_open(const char *name_or_path, tg_model_loss loss,
                               const tg_model_spec **out);
TG_API void tg_model_close(const tg_model_spec *m);
/* An ONNX language model opens as causal (next-token targets); a BERT-like
 * one, which sees every position, trains on masked tokens instead: set
 * TG_TASK_MASKED_LM before building. Fails for any other model. Inputs
 * after its token ids (attention mask, token types, positions) are filled
 * by their names, as a tokenizer would fill them for unpadded text. */
TG_API tg_status tg_model_set_task(const tg_model_spec *m, tg_model_task task);
/* Keep an ONNX model's float initializers matching `pattern` (a POSIX
 * extended regular expression, tg_onnx_build_config.freeze) fixed when it is
 * built: buffers of a file that does not list its parameters. Fails naming
 * the pattern if it is malformed or matches none, or for a zoo model. The
 * pattern is copied (at most 1023 bytes). */
TG_API tg_status tg_model_set_freeze(const tg_model_spec *m, const char *pattern);
/* "cross-entropy" or "mse" into *out; TG_ERR_INVALID_ARG otherwise. */
TG_API tg_status tg_model_loss_parse(const char *text, tg_model_loss *out);

/* The spec's own input shape and class count. */
TG_API tg_model_input tg_model_default_input(const tg_model_spec *m);
/* Whether the model builds for inputs other than its default. */
TG_API bool tg_model_any_input(const tg_model_spec *m);
/* Parse "CxHxW" ("3x64x64") into in->channels, height and width (classes is
 * left alone); each a positive integer. Fails (TG_ERR_INVALID_ARG) naming
 * the text otherwise. */
TG_API tg_status tg_model_input_parse(const char *text, tg_model_input *in);
/* The per-channel normalisation for `channels` channels into mean[] and
 * std[]: the spec's per-channel values when it has them for that many
 * channels, else its mean and std for every channel. */
TG_API void tg_model_normalisation(const tg_model_spec *m, int channels, float *mean, float *std);
/* Parse "MEAN/STD" ("0.1307/0.3081") or per channel
 * ("0.485,0.456,0.406/0.229,0.224,0.225") into in->norm_*: 1 to
 * TG_MODEL_MAX_NORM_CHANNELS values each, the same count, every std
 * positive. Fails (TG_ERR_INVALID_ARG) naming the text otherwise. */
TG_API tg_status tg_model_normalisation_parse(const char *text, tg_model_input *in);
/* The normalisation of `channels` channels for input `in` of model m:
 * in's own when it has one, else the spec's (tg_model_normalisation). */
TG_API void tg_model_input_normalisation(const tg_model_spec *m, const tg_model_input *in,
                                         int channels, float *mean, float *std);

/* A model's graph with its inputs and outputs. */
typedef struct tg_model_graph {
    tg_graph *graph;      /* owned: tg_model_graph_destroy frees it */
    tg_model_input input; /* what it was built for */
    /* The input: [batch, C, H, W] f32 (u8 with input.eight_bit), or for a
     * language model the token ids [batch, seq_len] i32 */
    tg_tensor *images;
    /* input [batch] i32, language models [batch, seq_len], segmentation
     * [batch, H, W] (training only) */
    tg_tensor *labels;
    /* scores [batch, classes], language models [batch, seq_len, classes],
     * segmentation [batch, classes, H, W]; marked as output */
    tg_tensor *output;
    tg_tensor *loss; /* scalar, marked as output (training only) */
} tg_model_graph;

/* Build the model for `batch` samples of its default input. With opt
 * non-NULL: a training graph (loss, backward pass, optimizer updates); with
 * NULL: inference. */
TG_API tg_status tg_model_graph_create(const tg_model_spec *m, int batch, const tg_optimizer *opt,
                                       tg_model_graph *out);
/* The same for the input `in` (NULL: the default). A fixed-input model
 * accepts only its default input; a model with build_for any positive shape
 * and class count (its own shape rules may still refuse one, naming the
 * layer). */
TG_API tg_status tg_model_graph_create_ex(const tg_model_spec *m, int batch,
                                          const tg_optimizer *opt, const tg_model_input *in,
                                          tg_model_graph *out);
TG_API void tg_model_graph_destroy(tg_model_graph *mg);

#ifdef __cplusplus
}
#endif
#endif
