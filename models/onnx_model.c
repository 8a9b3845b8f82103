/* models/onnx_model.c - an ONNX file as a model: the spec made from the
 * file's input and output, and the training graph around the imported
 * network (its output taken as logits, the loss appended).
 *
 * A zoo name and an ONNX path are both "a model" to the commands, so
 * --model FILE.onnx works wherever a zoo name does (train, infer, compile).
 */
#include "onnx_model.h"

#include "tilegraph/onnx.h"

#include "core/alloc.h"
#include "core/error.h"

#include <stdio.h>
#include <string.h>

/* What a language model's input other than the token ids gets: text
 * windows have no padding and one segment, so a tokenizer would give an
 * attention mask of ones, token types of zeros and positions 0..S-1. */
typedef enum input_fill { FILL_TOKENS, FILL_ONES, FILL_ZEROS, FILL_POSITIONS } input_fill;

/* A spec with the strings and the model it owns. */
typedef struct onnx_spec {
    tg_model_spec spec; /* first: tg_model_close casts back */
    tg_onnx_model *model;
    input_fill fill[TG_ONNX_MAX_IO]; /* per input of a language model */
    char name[256];
    char description[768];
    char freeze[1024]; /* tg_model_set_freeze's pattern, "" for none */
} onnx_spec;

static bool is_onnx_path(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n > 5 && !strcmp(s + n - 5, ".onnx");
}

tg_status tg_model_loss_parse(const char *text, tg_model_loss *out)
{
    if (text && !strcmp(text, "cross-entropy"))
        *out = TG_LOSS_CROSS_ENTROPY;
    else if (text && !strcmp(text, "mse"))
        *out = TG_LOSS_MSE;
    else
        return tg_error(TG_ERR_INVALID_ARG, "loss '%s': expected cross-entropy or mse",
                        text ? text : "(null)");
    return TG_OK;
}

static bool is_int(tg_onnx_value v)
{
    return !strcmp(v.dtype, "int64") || !strcmp(v.dtype, "int32");
}

static bool name_has(const char *name, const char *part)
{
    for (const char *p = name; *p; p++) {
        size_t k = 0;
        while (part[k] && p[k] && (p[k] | 0x20) == part[k])
            k++;
        if (!part[k])
            return true;
    }
    return false;
}

/* An input after the token ids, by its name (Hugging Face's and PyTorch's
 * usual ones); FILL_TOKENS: not known. */
static input_fill fill_for(const char *name)
{
    if (name_has(name, "mask"))
        return FILL_ONES;
    if (name_has(name, "type") || name_has(name, "segment"))
        return FILL_ZEROS;
    if (name_has(name, "position"))
        return FILL_POSITIONS;
    return FILL_TOKENS;
}

/* Whether output 0 declares a size it does not know after the batch
 * dimension (a name such as 'Addlogits_dim_1', or no shape at all). */
static bool output_dims_unknown(tg_onnx_value v)
{
    for (int d = 1; d < v.ndim; d++)
        if (v.dim[d] < 0)
            return true;
    return v.ndim < 0;
}

/* Output 0's shape with the sizes the file leaves symbolic taken from the
 * model built at batch 1 (PyTorch's exporter names an output's dims it
 * could not infer, as after Resize or a position embedding of the ids'
 * length: [batch, 'Addlogits_dim_1', 13]); the batch dimension stays
 * dynamic (-1). The declared shape when the model does not build here: the
 * build at training time names the fault then. */
static tg_onnx_value known_output(const tg_onnx_model *m)
{
    tg_onnx_value out = tg_onnx_output(m, 0);
    if (!output_dims_unknown(out))
        return out;
    tg_graph *g = tg_graph_create();
    tg_onnx_build_config c = {.batch = 1};
    tg_onnx_outputs io;
    if (g) /* inference: a batch norm of one value per channel (batch 1 at 1x1) is no error */
        tg_graph_set_training(g, false);
    if (g && tg_onnx_build(m, g, &c, &io) == TG_OK && io.n_outputs >= 1) {
        tg_shape s = tg_tensor_shape(io.outputs[0]);
        if (out.ndim < 0 || out.ndim == s.ndim) {
            out.ndim = s.ndim;
            for (int d = 0; d < s.ndim; d++)
                out.dim[d] = d == 0 ? -1 : s.dim[d];
        }
    }
    tg_error_clear();
    tg_graph_destroy(g);
    return out;
}

/* A language model: integer token ids [N, S] as the first input, scores
 * [N, S, vocab] as the first output (an exported GPT or BERT; the importer
 * maps the embedding's Gather over the ids), and any other input an integer
 * [N, S] the text data fills by its name (fill_for). Causal unless
 * tg_model_set_task says otherwise. Returns false (and sets nothing) when
 * the first input and output are not a language model's; fails naming an
 * input it cannot fill. */
static tg_status token_spec(onnx_spec *o, tg_onnx_value out, bool *is_lm)
{
    const tg_onnx_model *m = o->model;
    tg_onnx_value in = tg_onnx_input(m, 0);
    *is_lm = is_int(in) && in.ndim == 2 && in.dim[1] > 0 && out.ndim == 3 &&
             out.dim[1] == in.dim[1] && out.dim[2] >= 2;
    if (!*is_lm)
        return TG_OK;
    for (int i = 1; i < tg_onnx_input_count(m); i++) {
        tg_onnx_value v = tg_onnx_input(m, i);
        o->fill[i] = fill_for(v.name);
        if (!is_int(v) || v.ndim != 2 || v.dim[1] != in.dim[1] || o->fill[i] == FILL_TOKENS)
            return tg_error(TG_ERR_UNSUPPORTED,
                            "%s: input %d '%s' (%s, %d dims) is not one the text data can fill: "
                            "after the token ids [batch, %lld], a language model's inputs are "
                            "integer [batch, %lld] named as an attention mask (*mask*: ones), "
                            "token types (*type*, *segment*: zeros) or positions (*position*: "
                            "0..seq_len-1)",
                            tg_onnx_path(m), i, v.name, v.dtype, v.ndim, (long long)in.dim[1],
                            (long long)in.dim[1]);
    }
    tg_model_spec *s = &o->spec;
    s->task = TG_TASK_CAUSAL_LM;
    s->seq_len = s->width = (int)in.dim[1];
    s->channels = s->height = 1;
    s->classes = (int)out.dim[2];
    return TG_OK;
}

/* Image shape and classes from the file: input [N, C, H, W] (or [N, K],
 * taken as K x 1 x 1) and output [N, classes] (its sizes the built
 * model's where the file names them: known_output); or a language
 * model's (token_spec). */
static tg_status spec_shapes(onnx_spec *o)
{
    const tg_onnx_model *m = o->model;
    tg_model_spec *s = &o->spec;
    const char *path = tg_onnx_path(m);
    bool lm = false;
    tg_onnx_value out = {0};
    if (tg_onnx_input_count(m) >= 1 && tg_onnx_output_count(m) >= 1) {
        out = known_output(m);
        TG_TRY(token_spec(o, out, &lm));
    }
    if (lm)
        return TG_OK;
    if (tg_onnx_input_count(m) != 1 || tg_onnx_output_count(m) < 1)
        return tg_error(TG_ERR_UNSUPPORTED,
                        "%s: a model for --model takes one input (images) and gives the logits "
                        "as its first output, or token ids first and scores [batch, seq_len, "
                        "vocab] first (a language model); this one has %d inputs and %d outputs",
                        path, tg_onnx_input_count(m), tg_onnx_output_count(m));
    tg_onnx_value in = tg_onnx_input(m, 0);
    bool ok_in = (in.ndim == 4 || in.ndim == 2) && strcmp(in.dtype, "float") == 0;
    for (int d = 1; ok_in && d < in.ndim; d++)
        ok_in = in.dim[d] > 0;
    if (!ok_in)
        return tg_error(TG_ERR_UNSUPPORTED,
                        "%s: input '%s' must be float [batch, C, H, W] or "
                        "[batch, features] with fixed sizes after the batch dimension, or "
                        "integer token ids [batch, seq_len] with scores [batch, seq_len, vocab] "
                        "out (a causal language model)",
                        path, in.name);
    /* scores of every pixel at the input's size: a segmentation model */
    bool segment = in.ndim == 4 && out.ndim == 4 && out.dim[1] >= 2 && out.dim[2] == in.dim[2] &&
                   out.dim[3] == in.dim[3];
    if (!segment && (out.ndim != 2 || out.dim[1] <= 0)) {
        if (in.ndim == 4 && out.ndim == 4)
            return tg_error(TG_ERR_UNSUPPORTED,
                            "%s: output '%s' is [batch, %lld, %lld, %lld] but the input is "
                            "[batch, %lld, %lld, %lld]: a segmentation model's first output "
                            "scores every pixel of the input, [batch, classes >= 2, %lld, %lld] "
                            "(upsample to the input's size in the model)",
                            path, out.name, (long long)out.dim[1], (long long)out.dim[2],
                            (long long)out.dim[3], (long long)in.dim[1], (long long)in.dim[2],
                            (long long)in.dim[3], (long long)in.dim[2], (long long)in.dim[3]);
        return tg_error(TG_ERR_UNSUPPORTED,
                        "%s: output '%s' must be the logits [batch, classes], or for a "
                        "segmentation model the scores of every pixel [batch, classes, H, W] "
                        "at the input's H and W",
                        path, out.name);
    }
    s->task = segment ? TG_TASK_SEGMENT : TG_TASK_CLASSIFY;
    s->channels = (int)in.dim[1];
    s->height = in.ndim == 4 ? (int)in.dim[2] : 1;
    s->width = in.ndim == 4 ? (int)in.dim[3] : 1;
    s->classes = (int)out.dim[1];
    return TG_OK;
}

tg_status tg_model_open(const char *name, tg_model_loss loss, const tg_model_spec **out)
{
    *out = NULL;
    if (!is_onnx_path(name)) {
        *out = tg_model_find(name);
        return *out ? TG_OK : TG_ERR_NOT_FOUND;
    }
    onnx_spec *o = tg_calloc(1, sizeof *o);
    if (!o)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", name);
    tg_status s = tg_onnx_load(name, &o->model);
    if (s == TG_OK)
        s = tg_onnx_check_ops(o->model);
    if (s == TG_OK)
        s = spec_shapes(o);
    if (s != TG_OK) {
        tg_onnx_model_destroy(o->model);
        tg_free(o);
        return s;
    }
    const char *base = strrchr(name, '/');
    snprintf(o->name, sizeof o->name, "%s", base ? base + 1 : name);
    const char *note = tg_onnx_reduced_note(o->model);
    snprintf(o->description, sizeof o->description, "imported from %s (opset %d%s%s)%s%s", name,
             tg_onnx_opset(o->model), *tg_onnx_producer(o->model) ? ", " : "",
             tg_onnx_producer(o->model), *note ? "; note: " : "", note);
    o->spec.name = o->name;
    o->spec.description = o->description;
    o->spec.mean = 0.0f; /* images in [0, 1]: the exported model's own scaling applies */
    o->spec.std = 1.0f;
    o->spec.onnx = o->model;
    o->spec.loss = loss;
    *out = &o->spec;
    return TG_OK;
}

void tg_model_close(const tg_model_spec *m)
{
    if (!m || !m->onnx)
        return;
    onnx_spec *o = (onnx_spec *)(void *)m;
    tg_onnx_model_destroy(o->model);
    tg_free(o);
}

/* A language model's scores [N, S, V] and, for training, the mean
 * cross-entropy of the labelled positions (as the zoo's). */
static tg_status lm_loss(const tg_model_spec *m, tg_graph *g, tg_tensor *out, tg_tensor *labels,
                         int64_t batch, tg_tensor **loss)
{
    tg_shape s = tg_tensor_shape(out);
    if (s.ndim != 3 || s.dim[0] != batch || s.dim[1] != m->seq_len || s.dim[2] != m->classes)
        return tg_error(TG_ERR_SHAPE,
                        "%s: the first output has %d dims, not the scores [batch, %d, %d]", m->name,
                        s.ndim, m->seq_len, m->classes);
    if (!loss)
        return TG_OK;
    if (m->loss == TG_LOSS_MSE)
        return tg_error(TG_ERR_UNSUPPORTED,
                        "%s: --loss mse does not apply to a language model; use cross-entropy",
                        m->name);
    int64_t rows = batch * s.dim[1];
    tg_loss_params p = {TG_LOSS_MEAN, true, TG_MODEL_IGNORE_LABEL};
    *loss = tg_cross_entropy_ex(g, tg_reshape(g, out, tg_shape2(rows, s.dim[2])),
                                tg_reshape(g, labels, tg_shape1(rows)), NULL, p);
    return *loss ? TG_OK : tg_error(tg_graph_status(g), "%s", tg_graph_error(g));
}

/* A segmentation model's scores [N, classes, H, W] at the input's H and W
 * and, for training, the mean cross-entropy over every pixel (PyTorch's
 * CrossEntropyLoss over [N, C, H, W] and labels [N, H, W]). */
static tg_status segment_loss(const tg_model_spec *m, tg_graph *g, tg_tensor *out, tg_tensor *x,
                              tg_tensor *labels, tg_tensor **loss)
{
    tg_shape s = tg_tensor_shape(out), in = tg_tensor_shape(x);
    if (s.ndim != 4 || s.dim[0] != in.dim[0] || s.dim[1] != m->classes || s.dim[2] != in.dim[2] ||
        s.dim[3] != in.dim[3])
        return tg_error(TG_ERR_SHAPE,
                        "%s: the first output has %d dims, not the scores of every pixel "
                        "[batch, %d, %lld, %lld]",
                        m->name, s.ndim, m->classes, (long long)in.dim[2], (long long)in.dim[3]);
    if (!loss)
        return TG_OK;
    if (m->loss == TG_LOSS_MSE)
        return tg_error(TG_ERR_UNSUPPORTED,
                        "%s: --loss mse does not apply to a segmentation model, whose labels are "
                        "a class per pixel; use cross-entropy",
                        m->name);
    *loss = tg_cross_entropy(g, out, labels);
    return *loss ? TG_OK : tg_error(tg_graph_status(g), "%s", tg_graph_error(g));
}

/* The values of a language model's inputs after the token ids (fill_for),
 * for `batch` samples; NULL entries where the data gives the input. */
static tg_status fill_inputs(const onnx_spec *o, int64_t batch, int64_t *values[TG_ONNX_MAX_IO])
{
    int64_t S = o->spec.seq_len, n = batch * S;
    for (int i = 1; i < tg_onnx_input_count(o->model); i++) {
        values[i] = tg_malloc((size_t)n * sizeof(int64_t));
        if (!values[i])
            return tg_error(TG_ERR_NOMEM, "%s: out of memory", o->name);
        for (int64_t k = 0; k < n; k++)
            values[i][k] = o->fill[i] == FILL_ONES ? 1 : o->fill[i] == FILL_POSITIONS ? k % S : 0;
    }
    return TG_OK;
}

tg_status tg_model_set_task(const tg_model_spec *m, tg_model_task task)
{
    if (!m || !m->onnx || !tg_model_task_tokens(m->task) || !tg_model_task_tokens(task))
        return tg_error(TG_ERR_INVALID_ARG,
                        "%s: only an ONNX language model's objective can be chosen (causal or "
                        "masked); a zoo model has its own",
                        m ? m->name : "(no model)");
    ((onnx_spec *)(void *)m)->spec.task = task;
    return TG_OK;
}

tg_status tg_model_set_freeze(const tg_model_spec *m, const char *pattern)
{
    if (!m || !m->onnx)
        return tg_error(TG_ERR_INVALID_ARG,
                        "%s: freezing initializers applies to an ONNX file (--model FILE.onnx); "
                        "a zoo model has no buffers to freeze",
                        m ? m->name : "(no model)");
    if (!pattern || strlen(pattern) >= sizeof((onnx_spec *)0)->freeze)
        return tg_error(TG_ERR_INVALID_ARG, "%s: the freeze pattern is missing or over 1023 bytes",
                        m->name);
    TG_TRY(tg_onnx_check_freeze(m->onnx, pattern));
    onnx_spec *o = (onnx_spec *)(void *)m;
    snprintf(o->freeze, sizeof o->freeze, "%s", pattern);
    return TG_OK;
}

tg_status tg_model_onnx_build(const tg_model_spec *m, tg_graph *g, tg_tensor *x, tg_tensor *labels,
                              tg_tensor **out, tg_tensor **loss)
{
    const onnx_spec *o = (const onnx_spec *)(const void *)m;
    int64_t *values[TG_ONNX_MAX_IO] = {0};
    tg_onnx_build_config c = {.batch = tg_tensor_shape(x).dim[0], .inputs = &x, .n_inputs = 1};
    tg_onnx_outputs io;
    tg_status st = tg_model_task_tokens(m->task) ? fill_inputs(o, c.batch, values) : TG_OK;
    c.constants = (const int64_t *const *)values;
    c.n_constants = TG_ONNX_MAX_IO;
    c.freeze = o->freeze[0] ? o->freeze : NULL;
    if (st == TG_OK)
        st = tg_onnx_build(m->onnx, g, &c, &io);
    for (int i = 0; i < TG_ONNX_MAX_IO; i++)
        tg_free(values[i]);
    TG_TRY(st);
    *out = io.outputs[0];
    tg_shape s = tg_tensor_shape(*out);
    if (tg_model_task_tokens(m->task))
        return lm_loss(m, g, *out, labels, c.batch, loss);
    if (m->task == TG_TASK_SEGMENT)
        return segment_loss(m, g, *out, x, labels, loss);
    if (s.ndim != 2 || s.dim[0] != c.batch)
        return tg_error(TG_ERR_SHAPE,
                        "%s: the first output has shape [%lld...] (%d dims), not "
                        "the logits [batch, classes]",
                        m->name, (long long)s.dim[0], s.ndim);
    if (!loss)
        return TG_OK;
    /* the data sets here label classes; mse needs value targets */
    if (m->loss == TG_LOSS_MSE)
        return tg_error(TG_ERR_UNSUPPORTED,
                        "%s: --loss mse needs value labels, which the "
                        "classification data sets do not have; use cross-entropy",
                        m->name);
    *loss = tg_cross_entropy(g, *out, labels);
    return *loss ? TG_OK : tg_error(tg_graph_status(g), "%s", tg_graph_error(g));
}
