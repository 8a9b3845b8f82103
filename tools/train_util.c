/* tools/train_util.c - model and data set-up, evaluation, shared by train and infer. */
#include "train_util.h"

#include "cli.h"

#include "tilegraph/checkpoint.h"
#include "tilegraph/dist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void data_args_defaults(data_args *d)
{
    memset(d, 0, sizeof *d);
    d->dataset = "fashion-mnist";
    d->loader = "sync";
    d->workers = -1; /* not given: the loader's default (and an error without --loader async) */
    d->prefetch_depth = -1;
    d->loss = NULL; /* not given: cross-entropy, and no error for a zoo model */
    d->seq_len = -1;
}

int data_flags(data_args *d, cli_flag *f)
{
    cli_flag list[DATA_FLAG_COUNT] = {
        {"--dataset", CLI_STRING, &d->dataset, "NAME", "fashion-mnist, mnist, cifar10 or synthetic",
         1, 0, NULL},
        {"--data", CLI_STRING, &d->data, "SPEC",
         "DIR, cifar10:DIR, mnist:DIR, synthetic, shapes (segmentation) or text:FILE (a language "
         "model on any text)",
         1, 0, "Debian's Fashion-MNIST"},
        {"--tokens", CLI_STRING, &d->tokens, "KIND",
         "text: byte (vocabulary 256) or char (the file's distinct UTF-8 characters)", 1, 0,
         "byte"},
        {"--seq-len", CLI_INT, &d->seq_len, "N", "text: tokens per sample", 1, 65536,
         "the model's, 64"},
        {"--lm", CLI_STRING, &d->lm, "KIND",
         "an ONNX language model's objective: causal (next token) or masked (BERT's 15% of the "
         "tokens; for a model that sees every position)",
         1, 0, "causal"},
        {"--freeze", CLI_STRING, &d->freeze, "REGEX",
         "ONNX models: keep the float initializers whose names match fixed (buffers such as a "
         "causal mask, in a file that does not list its parameters)",
         1, 0, NULL},
        {"--loader", CLI_STRING, &d->loader, "MODE", "sync or async (worker threads prefetch)", 1,
         0, NULL},
        {"--workers", CLI_INT, &d->workers, "N", "async loader: worker threads", 0, 64, "1"},
        {"--prefetch-depth", CLI_INT, &d->prefetch_depth, "N",
         "async loader: host steps prepared ahead", 0, 1024, "3"},
        {"--flip", CLI_FLOAT, &d->flip, "P", CLI_TRAINING "random horizontal flip probability", 0,
         1, NULL},
        {"--resize", CLI_STRING, &d->resize, "HxW", "resize images (bilinear), e.g. 64x64", 1, 0,
         NULL},
        {"--eight-bit-io", CLI_BOOL, &d->eight_bit, NULL,
         "stream images as 8-bit and normalise them on the device (a quarter of the bytes)", 1, 0,
         NULL},
        {"--stem", CLI_STRING, &d->stem, "KIND",
         "ResNets: imagenet (7x7/2 conv + pool), cifar (3x3/1) or auto (by image size)", 1, 0,
         NULL},
        {"--loss", CLI_STRING, &d->loss, "KIND",
         CLI_TRAINING "the loss appended to an ONNX model's logits, cross-entropy or mse", 1, 0,
         "cross-entropy"},
        {"--normalize", CLI_STRING, &d->normalize, "MEAN/STD",
         "normalise images as (x/255 - MEAN) / STD, per channel with commas: 0.1307/0.3081", 1, 0,
         "the zoo model's own; none for ONNX models"},
    };
    memcpy(f, list, sizeof list);
    return DATA_FLAG_COUNT;
}

/* "cifar10:DIR" -> kind and dir; "synthetic" -> kind; "DIR" -> the --dataset kind. */
static const char *data_source(const data_args *d, char *kind, size_t kind_cap, char *dir,
                               size_t cap)
{
    dir[0] = '\0';
    const char *spec = d->data;
    if (!spec)
        return d->dataset;
    const char *colon = strchr(spec, ':');
    if (colon) {
        snprintf(kind, kind_cap, "%.*s", (int)(colon - spec), spec);
        snprintf(dir, cap, "%s", colon + 1);
        return kind;
    }
    if (tg_dataset_kind_known(spec))
        return spec;
    snprintf(dir, cap, "%s", spec);
    return d->dataset;
}

static int parse_size(const char *text, int *h, int *w)
{
    char *end = NULL;
    long a = strtol(text, &end, 10);
    if (!end || *end != 'x')
        return -1;
    long b = strtol(end + 1, &end, 10);
    if (*end || a < 1 || b < 1 || a > 4096 || b > 4096)
        return -1;
    *h = (int)a;
    *w = (int)b;
    return 0;
}

/* The image flags a text data set cannot take: the first one given, or NULL. */
static const char *image_flag(const data_args *d)
{
    return d->eight_bit   ? "--eight-bit-io"
           : d->resize    ? "--resize"
           : d->normalize ? "--normalize"
           : d->flip > 0  ? "--flip"
           : d->stem      ? "--stem"
                          : NULL;
}

/* A language model on a text file: both splits tokenised the same way,
 * the model built for the file's vocabulary and --seq-len. */
static int open_text(train_context *ctx, const char *file, const data_args *data,
                     int64_t train_limit, int64_t test_limit)
{
    tg_text_tokens tokens;
    const char *bad = image_flag(data);
    if (tg_text_tokens_parse(data->tokens ? data->tokens : "byte", &tokens) != TG_OK) {
        fprintf(stderr, "tilegraph: --tokens '%s' is not byte or char\n", data->tokens);
        return -1;
    }
    if (!*file) {
        fprintf(stderr, "tilegraph: --data text needs a file: text:FILE (for example "
                        "text:/usr/share/common-licenses/GPL-3)\n");
        return -1;
    }
    if (bad) {
        fprintf(stderr, "tilegraph: %s applies to images, not to the text of --data %s\n", bad,
                data->data);
        return -1;
    }
    tg_model_input in = tg_model_default_input(ctx->model);
    if (data->seq_len > 0)
        in.seq_len = in.width = (int)data->seq_len;
    tg_text_config c = {(tg_text_tokens)tokens, in.seq_len, 0};
    /* both splits from one read of the file: a file replaced between two
     * reads trained on one text and recorded the other's vocabulary */
    tg_status st = train_limit >= 0
                       ? tg_dataset_open_text_splits(file, &c, train_limit, test_limit, &ctx->train,
                                                     &ctx->test)
                       : tg_dataset_open_text(file, &c, TG_SPLIT_TEST, test_limit, &ctx->test);
    if (st != TG_OK) {
        fprintf(stderr, "tilegraph: --data %s: %s\n", data->data, tg_error_message());
        return -1;
    }
    in.classes = tg_dataset_vocab(ctx->test, NULL, NULL);
    if (ctx->model->onnx) {
        /* the file's vocabulary is fixed: the text's tokens (and a masked
         * model's mask token, the id after them) must be ids it has */
        bool masked = ctx->model->task == TG_TASK_MASKED_LM;
        int have = tg_model_default_input(ctx->model).classes, need = in.classes + masked;
        if (need > have) {
            fprintf(stderr,
                    "tilegraph: %s scores %d tokens but --data %s has %d%s: export it with a "
                    "vocabulary of at least %d (or use --tokens char on a smaller alphabet)\n",
                    ctx->model->name, have, data->data, in.classes,
                    masked ? " and --lm masked needs one more for the mask token" : "", need);
            return -1;
        }
        in.classes = have;
    }
    ctx->input = in;
    ctx->text = true;
    return 0;
}

/* --lm causal|masked on an ONNX language model. */
static int set_objective(const tg_model_spec *m, const char *lm)
{
    bool causal = !strcmp(lm, "causal"), masked = !strcmp(lm, "masked");
    if (!causal && !masked) {
        fprintf(stderr, "tilegraph: --lm '%s' is not causal or masked\n", lm);
        return -1;
    }
    if (tg_model_set_task(m, masked ? TG_TASK_MASKED_LM : TG_TASK_CAUSAL_LM) != TG_OK) {
        fprintf(stderr, "tilegraph: --lm: %s\n", tg_error_message());
        return -1;
    }
    return 0;
}

/* A segmentation model needs a data set that labels every pixel, and such
 * a data set a segmentation model; its classes must be scores it has. */
static int check_task(const tg_model_spec *m, const tg_dataset_info *d)
{
    bool segment = m->task == TG_TASK_SEGMENT;
    if (d->segmentation && !segment) {
        fprintf(stderr,
                "tilegraph: %s labels every pixel (segmentation) but model %s classifies whole "
                "images: give a segmentation model, an ONNX file whose first output scores "
                "every pixel, [batch, classes, H, W] at the input's H and W (a U-Net, FCN, "
                "DeepLab)\n",
                d->name, m->name);
        return -1;
    }
    if (segment && !d->segmentation) {
        fprintf(stderr,
                "tilegraph: model %s segments images (its output scores every pixel) but %s "
                "labels whole images: train it on a data set with a class per pixel, --data "
                "shapes\n",
                m->name, d->name);
        return -1;
    }
    if (segment && m->classes < d->classes) {
        fprintf(stderr,
                "tilegraph: model %s scores %d classes per pixel but %s has %d: export it with "
                "at least %d output channels\n",
                m->name, m->classes, d->name, d->classes, d->classes);
        return -1;
    }
    return 0;
}

int train_context_open(train_context *ctx, const char *model, const data_args *data,
                       int64_t train_limit, int64_t test_limit)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->data = *data;
    tg_model_loss loss;
    if (tg_model_loss_parse(data->loss ? data->loss : "cross-entropy", &loss) != TG_OK) {
        fprintf(stderr, "tilegraph: --loss '%s' is not cross-entropy or mse\n", data->loss);
        return -1;
    }
    /* a zoo name or an ONNX file */
    if (tg_model_open(model, (tg_model_loss)loss, &ctx->model) != TG_OK) {
        fprintf(stderr, "tilegraph: %s\n", tg_error_message());
        return -1;
    }
    /* a zoo model brings its own loss: --loss would be ignored */
    if (data->loss && !ctx->model->onnx) {
        fprintf(stderr,
                "tilegraph: --loss applies to ONNX models (the loss appended to their "
                "logits); %s brings its own loss: drop --loss\n",
                ctx->model->name);
        tg_model_close(ctx->model);
        return -1;
    }
    char kind_buf[32], dir[1024];
    const char *kind = data_source(data, kind_buf, sizeof kind_buf, dir, sizeof dir);
    if (!tg_dataset_kind_known(kind)) {
        fprintf(stderr,
                "tilegraph: unknown data '%s' (fashion-mnist, mnist, cifar10, synthetic or "
                "shapes, optionally KIND:DIR; or text:FILE)\n",
                data->data ? data->data : data->dataset);
        tg_model_close(ctx->model);
        return -1;
    }
    if (data->lm && set_objective(ctx->model, data->lm) != 0) {
        tg_model_close(ctx->model);
        return -1;
    }
    if (data->freeze && tg_model_set_freeze(ctx->model, data->freeze) != TG_OK) {
        fprintf(stderr, "tilegraph: --freeze: %s\n", tg_error_message());
        tg_model_close(ctx->model);
        return -1;
    }
    bool text = strcmp(kind, "text") == 0, lm = tg_model_task_tokens(ctx->model->task);
    if (!text && (data->tokens || data->seq_len > 0)) {
        fprintf(stderr, "tilegraph: %s applies to text: give --data text:FILE\n",
                data->tokens ? "--tokens" : "--seq-len");
        tg_model_close(ctx->model);
        return -1;
    }
    if (text != lm) {
        if (lm)
            fprintf(stderr,
                    "tilegraph: model %s is a language model: it trains on text, "
                    "--data text:FILE (for example text:/usr/share/common-licenses/GPL-3)\n",
                    ctx->model->name);
        else
            fprintf(stderr,
                    "tilegraph: model %s classifies images; a language model (gpt-tiny, "
                    "bert-tiny) trains on --data %s\n",
                    ctx->model->name, data->data);
        tg_model_close(ctx->model);
        return -1;
    }
    tg_loader_mode mode;
    if (tg_loader_mode_parse(data->loader, &mode) != TG_OK) {
        fprintf(stderr, "tilegraph: --loader '%s' is not sync or async\n", data->loader);
        return -1;
    }
    /* the sync loader has no workers and prepares nothing ahead: a flag
     * for the async one would be silently ignored */
    if (mode != TG_LOADER_ASYNC && (data->workers >= 0 || data->prefetch_depth >= 0)) {
        fprintf(stderr,
                "tilegraph: %s applies to the async loader only; add --loader async "
                "(or drop %s)\n",
                data->workers >= 0 ? "--workers" : "--prefetch-depth",
                data->workers >= 0 ? "--workers" : "--prefetch-depth");
        return -1;
    }
    if (text) {
        if (open_text(ctx, dir, data, train_limit, test_limit) != 0) {
            train_context_close(ctx);
            return -1;
        }
        return 0;
    }
    tg_status st = TG_OK;
    if (train_limit >= 0)
        st = tg_dataset_open(kind, dir[0] ? dir : NULL, TG_SPLIT_TRAIN, train_limit, &ctx->train);
    if (st == TG_OK)
        st = tg_dataset_open(kind, dir[0] ? dir : NULL, TG_SPLIT_TEST, test_limit, &ctx->test);
    if (st != TG_OK) {
        fprintf(stderr, "tilegraph: %s\n", tg_error_message());
        /* a data set that is not installed: say where to point and what
         * runs without one (a new user's first run of a doc's example) */
        if (st == TG_ERR_IO || st == TG_ERR_NOT_FOUND)
            fprintf(stderr,
                    "tilegraph: give --data %s:DIR where its files are, or --data synthetic "
                    "(a learnable synthetic set of CIFAR's shape, nothing to install)\n",
                    kind);
        train_context_close(ctx);
        return -1;
    }
    tg_dataset_info d = tg_dataset_describe(ctx->test);
    /* The model is built for the test split's images; a train split of
     * another size would be silently resized into garbage. */
    if (ctx->train) {
        tg_dataset_info t = tg_dataset_describe(ctx->train);
        if (t.channels != d.channels || t.height != d.height || t.width != d.width) {
            fprintf(stderr,
                    "tilegraph: the training split %s holds %dx%dx%d images but the test split "
                    "%s %dx%dx%d: give files of one data set\n",
                    t.name, t.channels, t.height, t.width, d.name, d.channels, d.height, d.width);
            train_context_close(ctx);
            return -1;
        }
    }
    tg_model_input in = {d.channels,   d.height, d.width, d.classes, data->eight_bit,
                         TG_STEM_AUTO, 0,        {0},     {0},       0};
    if (data->stem && tg_model_stem_parse(data->stem, &in) != TG_OK) {
        fprintf(stderr, "tilegraph: --stem: %s\n", tg_error_message());
        train_context_close(ctx);
        return -1;
    }
    if (data->resize && parse_size(data->resize, &in.height, &in.width) != 0) {
        fprintf(stderr, "tilegraph: --resize '%s' is not HxW (for example 64x64)\n", data->resize);
        train_context_close(ctx);
        return -1;
    }
    if (data->normalize && (tg_model_normalisation_parse(data->normalize, &in) != TG_OK ||
                            (in.norm_channels != 1 && in.norm_channels != in.channels))) {
        if (in.norm_channels > 1 && in.norm_channels != in.channels)
            fprintf(stderr,
                    "tilegraph: --normalize '%s' gives %d channels but the images have %d\n",
                    data->normalize, in.norm_channels, in.channels);
        else
            fprintf(stderr, "tilegraph: --normalize: %s\n", tg_error_message());
        train_context_close(ctx);
        return -1;
    }
    if (check_task(ctx->model, &d) != 0) {
        train_context_close(ctx);
        return -1;
    }
    if (!tg_model_any_input(ctx->model)) {
        tg_model_input want = tg_model_default_input(ctx->model);
        if (in.channels != want.channels || in.height != want.height || in.width != want.width) {
            fprintf(stderr, "tilegraph: model %s takes %dx%dx%d images but %s gives %dx%dx%d\n",
                    ctx->model->name, want.channels, want.height, want.width, d.name, in.channels,
                    in.height, in.width);
            train_context_close(ctx);
            return -1;
        }
        in.classes = want.classes;
    }
    ctx->input = in;
    return 0;
}

tg_status loader_config(const train_context *ctx, const tg_dataset *ds, int64_t samples_per_step,
                        bool training, tg_loader_config *lc)
{
    *lc = tg_loader_defaults(ds, samples_per_step);
    tg_dataset_info d = tg_dataset_describe(ds);
    if (d.text) {
        /* BERT's masking: 15% of the tokens, the mask token after the text's
         * vocabulary (a zoo model adds its row; an ONNX model's vocabulary
         * must have room: train_context_open checks) */
        if (ctx->model->task == TG_TASK_MASKED_LM) {
            lc->mask_prob = 0.15f;
            lc->mask_token = ctx->model->onnx ? d.classes : ctx->input.classes;
        }
        if (training) {
            tg_loader_mode_parse(ctx->data.loader, &lc->mode); /* checked by train_context_open */
            lc->num_workers = ctx->data.workers > 0 ? (int)ctx->data.workers : 0;
            lc->prefetch_depth = ctx->data.prefetch_depth > 0 ? (int)ctx->data.prefetch_depth : 0;
        } else {
            lc->shuffle = false;
            lc->drop_last = false;
        }
        return TG_OK;
    }
    float mean[TG_LOADER_MAX_CHANNELS], std[TG_LOADER_MAX_CHANNELS];
    if (d.channels > TG_LOADER_MAX_CHANNELS)
        return tg_error_set(TG_ERR_UNSUPPORTED, "%s: %d channels (at most %d)", d.name, d.channels,
                            TG_LOADER_MAX_CHANNELS);
    tg_model_input_normalisation(ctx->model, &ctx->input, d.channels, mean, std);
    lc->channel_stats = d.channels;
    for (int c = 0; c < d.channels; c++) {
        lc->channel_mean[c] = mean[c];
        lc->channel_std[c] = std[c];
    }
    lc->mean = ctx->model->mean;
    lc->std = ctx->model->std;
    if (ctx->input.norm_channels > 0) { /* the averages, for code that takes one value */
        lc->mean = lc->std = 0;
        for (int c = 0; c < d.channels; c++) {
            lc->mean += mean[c] / (float)d.channels;
            lc->std += std[c] / (float)d.channels;
        }
    }
    if (ctx->input.height != d.height || ctx->input.width != d.width) {
        lc->out_h = ctx->input.height;
        lc->out_w = ctx->input.width;
    }
    lc->output_u8 = ctx->input.eight_bit;
    if (training) {
        lc->flip_prob = (float)ctx->data.flip;
        tg_loader_mode_parse(ctx->data.loader, &lc->mode); /* checked by train_context_open */
        lc->num_workers = ctx->data.workers > 0 ? (int)ctx->data.workers : 0; /* 0: default */
        lc->prefetch_depth = ctx->data.prefetch_depth > 0 ? (int)ctx->data.prefetch_depth : 0;
    } else {
        lc->shuffle = false;
        lc->drop_last = false;
    }
    return TG_OK;
}

void train_context_close(train_context *ctx)
{
    tg_session_destroy(ctx->eval_session);
    tg_model_graph_destroy(&ctx->eval_graph);
    tg_dataset_destroy(ctx->train);
    tg_dataset_destroy(ctx->test);
    tg_model_close(ctx->model);
    memset(ctx, 0, sizeof *ctx);
}

/* A text data set's tokens as the checkpoint records them: "byte", or
 * "char:" and the vocabulary's code points in decimal ("char:10,32,33"),
 * token i being the i-th: a model's weights mean nothing under another
 * numbering. Malloc'd; NULL when out of memory. */
char *text_vocab_record(const tg_dataset *ds)
{
    tg_text_tokens kind;
    const int32_t *cps;
    int v = tg_dataset_vocab(ds, &kind, &cps);
    size_t cap = 8 + (size_t)v * 8;
    char *r = malloc(cap);
    if (!r)
        return NULL;
    if (kind != TG_TOKENS_CHAR) {
        snprintf(r, cap, "byte");
        return r;
    }
    size_t used = (size_t)snprintf(r, cap, "char:");
    for (int i = 0; i < v; i++)
        used += (size_t)snprintf(r + used, cap - used, "%s%d", i ? "," : "", (int)cps[i]);
    return r;
}

/* --load/--resume of a language model: the checkpoint's tokens must be this
 * run's (a checkpoint without the record, from the API, is taken as it is). */
int text_vocab_check(const char *path, const char *vocab, const char *command)
{
    size_t cap = strlen(vocab) + (1 << 20); /* room for any record to show */
    char *had = malloc(cap);
    if (!had)
        return -1;
    int r = 0;
    tg_status st = tg_checkpoint_read_meta(path, "text_tokens", had, cap);
    if (st == TG_OK && strcmp(had, vocab)) {
        fprintf(stderr,
                "tilegraph %s: %s was trained on other tokens (%.40s%s) than this data "
                "gives (%.40s%s): give the same --tokens and a text with the same characters\n",
                command, path, had, strlen(had) > 40 ? "..." : "", vocab,
                strlen(vocab) > 40 ? "..." : "");
        r = -1;
    }
    free(had);
    return r;
}

int tg_argmax(const float *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

tg_status step_buffers_init(step_buffers *b, const tg_session *s, const tg_model_graph *mg)
{
    memset(b, 0, sizeof *b);
    b->batch = tg_tensor_shape(mg->images).dim[0];
    b->samples = tg_session_samples_per_run(s, mg->images);
    tg_shape out = tg_tensor_shape(mg->output);
    /* [N, classes], [N, S, classes], or a segmentation's [N, classes, H, W] */
    b->segment = out.ndim == 4;
    b->classes = b->segment ? out.dim[1] : out.dim[out.ndim - 1];
    b->rows = tg_shape_numel(out) / b->batch / b->classes; /* positions or pixels */
    b->n_scores = tg_session_output_count(s, mg->output);
    b->n_losses = mg->loss ? tg_session_output_count(s, mg->loss) : 0;
    int64_t pixels = tg_shape_numel(tg_tensor_shape(mg->images)) / b->batch;
    if (tg_tensor_dtype(mg->images) == TG_I32)
        b->tokens = calloc((size_t)(b->samples * pixels), sizeof(int32_t));
    else if (tg_tensor_dtype(mg->images) == TG_U8)
        b->images_u8 = calloc((size_t)(b->samples * pixels), 1);
    else
        b->images = calloc((size_t)(b->samples * pixels), sizeof(float));
    b->labels = calloc((size_t)(b->samples * b->rows), sizeof(int32_t));
    b->scores = malloc((size_t)(b->n_scores * b->batch * b->rows * b->classes) * sizeof(float));
    b->losses = malloc((size_t)(b->n_losses + 1) * sizeof(float));
    if (b->segment) {
        b->truth = calloc((size_t)(3 * b->classes), sizeof(int64_t));
        b->predicted = b->truth ? b->truth + b->classes : NULL;
        b->both = b->truth ? b->truth + 2 * b->classes : NULL;
    }
    if ((!b->images && !b->images_u8 && !b->tokens) || !b->labels || !b->scores || !b->losses ||
        (b->segment && !b->truth))
        return tg_error_set(TG_ERR_NOMEM, "out of memory for the host buffers");
    return TG_OK;
}

void step_buffers_free(step_buffers *b)
{
    free(b->images);
    free(b->images_u8);
    free(b->tokens);
    free(b->labels);
    free(b->scores);
    free(b->losses);
    free(b->truth); /* predicted and both live in the same block */
    memset(b, 0, sizeof *b);
}

tg_status load_step(tg_loader *loader, step_buffers *b, int64_t *count)
{
    if (b->tokens)
        return tg_loader_next_tokens(loader, b->tokens, b->labels, count);
    return b->images_u8 ? tg_loader_next_u8(loader, b->images_u8, b->labels, count)
                        : tg_loader_next(loader, b->images, b->labels, count);
}

/* -log softmax(scores)[label], in double. */
static double row_nll(const float *scores, int n, int label)
{
    double max = scores[0], sum = 0;
    for (int c = 1; c < n; c++)
        max = scores[c] > max ? scores[c] : max;
    for (int c = 0; c < n; c++)
        sum += exp((double)scores[c] - max);
    return log(sum) + max - (double)scores[label];
}

/* The class of the largest of n scores `stride` apart (the first of equals). */
static int argmax_strided(const float *v, int n, int64_t stride)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i * stride] > v[best * stride])
            best = i;
    return best;
}

/* One prediction against its label; a masked language model's unmasked
 * positions (TG_MODEL_IGNORE_LABEL) are not scored. A segmentation's row
 * is a pixel, its class scores `stride` apart, and counts towards the IoU. */
static void score_row(step_buffers *b, const float *scores, int64_t stride, int32_t label)
{
    if (label < 0 || label >= b->classes)
        return;
    int pred = argmax_strided(scores, (int)b->classes, stride);
    b->correct += pred == label;
    if (b->tokens)
        b->nll_sum += row_nll(scores, (int)b->classes, label);
    if (b->segment) {
        b->truth[label]++;
        b->predicted[pred]++;
        b->both[label] += pred == label;
    }
    b->scored++;
}

double mean_iou(const int64_t *truth, const int64_t *predicted, const int64_t *both, int classes,
                double *iou)
{
    double sum = 0;
    int counted = 0;
    for (int c = 0; c < classes; c++) {
        int64_t uni = truth[c] + predicted[c] - both[c];
        double v = uni > 0 ? (double)both[c] / (double)uni : NAN;
        if (iou)
            iou[c] = v;
        if (uni > 0)
            sum += v, counted++;
    }
    return counted ? sum / counted : NAN;
}

tg_status run_step(tg_session *s, const tg_model_graph *mg, step_buffers *b, int64_t count)
{
    int64_t pixels = tg_shape_numel(tg_tensor_shape(mg->images)) / b->batch;
    if (b->tokens)
        CLI_TRY(tg_session_write(s, mg->images, b->tokens,
                                 (size_t)(b->samples * pixels) * sizeof(int32_t)));
    else if (b->images_u8)
        CLI_TRY(tg_session_write(s, mg->images, b->images_u8, (size_t)(b->samples * pixels)));
    else
        CLI_TRY(tg_session_write(s, mg->images, b->images,
                                 (size_t)(b->samples * pixels) * sizeof(float)));
    if (mg->labels)
        CLI_TRY(tg_session_write(s, mg->labels, b->labels,
                                 (size_t)(b->samples * b->rows) * sizeof(int32_t)));
    CLI_TRY(tg_session_run(s));
    CLI_TRY(
        tg_session_read(s, mg->output, b->scores,
                        (size_t)(b->n_scores * b->batch * b->rows * b->classes) * sizeof(float)));
    b->loss_sum = 0;
    b->losses_count = 0;
    if (mg->loss) {
        CLI_TRY(tg_session_read(s, mg->loss, b->losses, (size_t)b->n_losses * sizeof(float)));
        for (int64_t k = 0; k < b->n_losses; k++)
            b->loss_sum += b->losses[k];
        /* outputMode sum returns a sum over micro-batches per replica */
        b->losses_count = tg_session_output_index(s, mg->loss, 0) < 0 && b->n_losses
                              ? b->samples / b->batch
                              : b->n_losses;
    }
    b->correct = b->scored = 0;
    b->nll_sum = 0;
    if (b->segment)
        memset(b->truth, 0, (size_t)(3 * b->classes) * sizeof(int64_t));
    /* a row's scores: classes apart rows (segmentation), or one after another */
    int64_t stride = b->segment ? b->rows : 1, row_step = b->segment ? 1 : b->classes;
    for (int64_t k = 0; k < b->n_scores; k++) {
        int64_t h = tg_session_output_index(s, mg->output, k);
        for (int64_t i = 0; h >= 0 && i < b->batch; i++) {
            int64_t sample = h * b->batch + i;
            if (sample >= count)
                continue; /* padding of a short final step */
            const float *scores = b->scores + (k * b->batch + i) * b->rows * b->classes;
            for (int64_t r = 0; r < b->rows; r++)
                score_row(b, scores + r * row_step, stride, b->labels[sample * b->rows + r]);
        }
    }
    return TG_OK;
}

static tg_status eval_session(train_context *ctx, const device_args *dev, int64_t batch)
{
    if (ctx->eval_session && ctx->eval_batch == batch)
        return TG_OK;
    tg_session_destroy(ctx->eval_session);
    tg_model_graph_destroy(&ctx->eval_graph);
    ctx->eval_session = NULL;
    ctx->eval_batch = batch;
    CLI_TRY(tg_model_graph_create_ex(ctx->model, (int)batch, NULL, &ctx->input, &ctx->eval_graph));
    tg_options *o = device_options(dev, "evaluate", true);
    if (!o)
        return tg_error_set(TG_ERR_CONFIG, "evaluation options are not valid");
    tg_status s = tg_session_create(ctx->eval_graph.graph, o, &ctx->eval_session);
    tg_options_destroy(o);
    return s;
}

/* The evaluation batch: --eval-batch-size, at most the test set. */
static int64_t eval_batch(const train_context *ctx, int64_t batch)
{
    int64_t test_samples = tg_dataset_describe(ctx->test).samples;
    return batch > test_samples ? test_samples : batch;
}

tg_status evaluate_prepare(train_context *ctx, const device_args *dev, int64_t batch)
{
    return eval_session(ctx, dev, eval_batch(ctx, batch));
}

tg_status evaluate(train_context *ctx, const tg_session *trained, const device_args *dev,
                   int64_t batch, bool progress, eval_result *result)
{
    CLI_TRY(eval_session(ctx, dev, eval_batch(ctx, batch)));
    CLI_TRY(tg_session_copy_weights(ctx->eval_session, trained));
    return evaluate_loaded(ctx, progress, result);
}

tg_status evaluate_loaded(train_context *ctx, bool progress, eval_result *result)
{
    tg_session *s = ctx->eval_session;
    const tg_model_graph *mg = &ctx->eval_graph;
    if (!s)
        return tg_error_set(TG_ERR_INVALID_ARG, "evaluate_loaded before evaluate_prepare");
    step_buffers b;
    tg_status st = step_buffers_init(&b, s, mg);
    tg_loader_config lc;
    tg_loader *loader = NULL;
    if (st == TG_OK)
        st = loader_config(ctx, ctx->test, b.samples, false, &lc);
    if (st == TG_OK)
        st = tg_loader_create(ctx->test, &lc, &loader);
    int64_t correct = 0, scored = 0, steps = loader ? tg_loader_steps_per_epoch(loader) : 0;
    double nll = 0;
    /* correct, scored, then a segmentation's truth, predicted and both per class */
    int64_t *counts = calloc((size_t)(2 + 3 * b.classes), sizeof *counts);
    if (!counts && st == TG_OK)
        st = tg_error_set(TG_ERR_NOMEM, "out of memory for the evaluation's counts");
    cli_progress bar;
    cli_progress_start(&bar, "evaluate", steps, progress && isatty(STDERR_FILENO));
    /* an MPI job's instances take turns at the test set's steps and add up
     * their counts: every sample is scored once, as in one process */
    int N = tg_dist_instances(), me = tg_dist_instance();
    for (int64_t k = 0; st == TG_OK && k < steps; k++) {
        int64_t count = 0;
        st = load_step(loader, &b, &count);
        if (k % N != me)
            continue;
        if (st == TG_OK)
            st = run_step(s, mg, &b, count);
        counts[0] += b.correct;
        counts[1] += b.scored;
        for (int64_t c = 0; b.segment && c < b.classes; c++) {
            counts[2 + c] += b.truth[c];
            counts[2 + b.classes + c] += b.predicted[c];
            counts[2 + 2 * b.classes + c] += b.both[c];
        }
        nll += b.nll_sum;
        cli_progress_update(&bar, k + 1, NULL);
    }
    int n_counts = 2 + (b.segment ? 3 * (int)b.classes : 0);
    if (st == TG_OK && (st = tg_dist_sum_i64(counts, n_counts)) == TG_OK)
        correct = counts[0], scored = counts[1];
    if (st == TG_OK && tg_dist_active())
        st = tg_dist_sum_f64(&nll, 1);
    if (progress && bar.tty && bar.enabled)
        fprintf(stderr, "\r\033[K"); /* the epoch line that follows says the result */
    result->accuracy = scored ? 100.0 * (double)correct / (double)scored : 0.0;
    result->loss = scored ? nll / (double)scored : NAN;
    result->scored = scored;
    result->mean_iou = NAN;
    result->iou_classes = 0;
    if (st == TG_OK && b.segment) {
        int classes = (int)b.classes;
        double iou[EVAL_MAX_IOU_CLASSES];
        int keep = classes < EVAL_MAX_IOU_CLASSES ? classes : EVAL_MAX_IOU_CLASSES;
        double *all = classes <= EVAL_MAX_IOU_CLASSES ? iou : malloc((size_t)classes * sizeof *all);
        result->mean_iou =
            all ? mean_iou(counts + 2, counts + 2 + classes, counts + 2 + 2 * classes, classes, all)
                : NAN;
        for (int c = 0; all && c < keep; c++) {
            result->iou[c] = all[c];
            result->iou_name[c] = tg_dataset_class_name(ctx->test, c);
        }
        result->iou_classes = all ? keep : 0;
        if (all != iou)
            free(all);
    }
    free(counts);
    step_buffers_free(&b);
    tg_loader_destroy(loader);
    return st;
}

void print_setup(const train_context *ctx, const tg_session *s, int64_t batch,
                 int64_t steps_per_epoch)
{
    char arena[32];
    printf("model %s: %s\n", ctx->model->name, ctx->model->description);
    tg_dataset_info train = tg_dataset_describe(ctx->train), test = tg_dataset_describe(ctx->test);
    printf("data: %s (%lld samples), %s (%lld samples)\n", train.name, (long long)train.samples,
           test.name, (long long)test.samples);
    /* an MPI job's instance prints the job's whole, as one process of R
     * replicas would (docs/distributed.md); its own share after it */
    int devices = tg_session_devices(s), local = tg_session_replicas(s);
    int replicas = tg_session_global_replicas(s), instances = tg_dist_instances();
    double whole = local > 0 ? (double)replicas / local : 1;
    char share[96] = "";
    if (instances > 1)
        snprintf(share, sizeof share, " over %d instances (%d replica%s each)", instances, local,
                 local == 1 ? "" : "s");
    printf("micro-batch %lld, %lld samples and %lld host steps per epoch, %d device%s x %d "
           "replica%s%s, %d thread%s per device\n",
           (long long)batch,
           (long long)(steps_per_epoch * tg_session_samples_per_run(s, NULL) * batch * whole),
           (long long)steps_per_epoch, devices, devices == 1 ? "" : "s", replicas,
           replicas == 1 ? "" : "s", share, tg_session_threads(s),
           tg_session_threads(s) == 1 ? "" : "s");
    char mine[32] = "";
    if (instances > 1)
        snprintf(share, sizeof share, " (%s on each instance)",
                 cli_bytes((double)tg_session_arena_bytes(s), mine, sizeof mine));
    printf("device memory %s%s, %.2f MFLOP per host step\n",
           cli_bytes((double)tg_session_arena_bytes(s) * whole, arena, sizeof arena),
           instances > 1 ? share : "", tg_session_flops(s) * whole / 1e6);
    const char *option, *split = tg_session_auto_stages(s, &option);
    if (*split) /* the cost model's choice, which differs between strategies */
        printf("%s auto: %s (%d device%s)\n", option, split, devices, devices == 1 ? "" : "s");
    char kernels[160];
    printf("kernels: %s\n", tg_session_kernels(s, kernels, sizeof kernels));
    char precision[160];
    printf("precision: %s\n", tg_session_precision(s, precision, sizeof precision));
    /* hit or miss, for each program (the evaluation one is keyed apart) */
    const char *train_cache = tg_session_cache(s);
    const char *eval_cache = ctx->eval_session ? tg_session_cache(ctx->eval_session) : NULL;
    if (train_cache)
        printf("executable cache: training program %s", train_cache);
    if (eval_cache)
        printf("%sevaluation program %s", train_cache ? "; " : "executable cache: ", eval_cache);
    if (train_cache || eval_cache)
        printf("\n");
    fflush(stdout);
}
