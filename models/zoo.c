/* models/zoo.c - the table of built-in models, their inputs and
 * normalisation, and the training-graph builder. */
#include "tilegraph/models.h"

#include "core/error.h"
#include "onnx_model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const tg_model_spec tg_model_fashion_basic;
extern const tg_model_spec tg_model_mnist_pipeline;
extern const tg_model_spec tg_model_resnet18;
extern const tg_model_spec tg_model_resnet34;
extern const tg_model_spec tg_model_resnet50;
extern const tg_model_spec tg_model_resnet101;
extern const tg_model_spec tg_model_gpt_tiny;
extern const tg_model_spec tg_model_bert_tiny;
extern const tg_model_spec tg_model_bert_large;

static const tg_model_spec *const models[] = {
    &tg_model_fashion_basic, &tg_model_mnist_pipeline, &tg_model_resnet18,
    &tg_model_resnet34,      &tg_model_resnet50,       &tg_model_resnet101,
    &tg_model_gpt_tiny,      &tg_model_bert_tiny,      &tg_model_bert_large,
};

#define N_MODELS ((int)(sizeof models / sizeof models[0]))

int tg_model_count(void)
{
    return N_MODELS;
}

const tg_model_spec *tg_model_at(int index)
{
    return index >= 0 && index < N_MODELS ? models[index] : NULL;
}

const tg_model_spec *tg_model_find(const char *name)
{
    char list[512];
    size_t used = 0;
    list[0] = '\0';
    for (int i = 0; i < N_MODELS; i++) {
        if (name && strcmp(models[i]->name, name) == 0)
            return models[i];
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 models[i]->name);
    }
    tg_error(TG_ERR_NOT_FOUND, "unknown model '%s'; the models are: %s", name ? name : "(null)",
             list);
    return NULL;
}

bool tg_model_task_tokens(tg_model_task task)
{
    return task == TG_TASK_CAUSAL_LM || task == TG_TASK_MASKED_LM;
}

tg_model_input tg_model_default_input(const tg_model_spec *m)
{
    if (tg_model_task_tokens(m->task))
        return (tg_model_input){.channels = 1,
                                .height = 1,
                                .width = m->seq_len,
                                .classes = m->classes,
                                .seq_len = m->seq_len};
    return (tg_model_input){m->channels,  m->height, m->width, m->classes, false,
                            TG_STEM_AUTO, 0,         {0},      {0},        0};
}

bool tg_model_any_input(const tg_model_spec *m)
{
    return m->build_for != NULL;
}

/* One positive int of "CxHxW" at *p, advancing *p past it. */
static bool parse_dim(const char **p, int *out)
{
    if (**p < '0' || **p > '9')
        return false; /* strtol would take a sign or spaces */
    char *end;
    errno = 0;
    long v = strtol(*p, &end, 10);
    if (errno || v <= 0 || v > 1000000)
        return false;
    *out = (int)v;
    *p = end;
    return true;
}

tg_status tg_model_input_parse(const char *text, tg_model_input *in)
{
    const char *p = text ? text : "";
    int d[3];
    for (int i = 0; i < 3; i++) {
        if (!parse_dim(&p, &d[i]) || *p != (i < 2 ? 'x' : '\0'))
            return tg_error(TG_ERR_INVALID_ARG,
                            "input shape '%s': expected CxHxW with positive integers, like 3x64x64",
                            text ? text : "(null)");
        p += i < 2;
    }
    in->channels = d[0];
    in->height = d[1];
    in->width = d[2];
    return TG_OK;
}

tg_status tg_model_stem_parse(const char *text, tg_model_input *in)
{
    static const char *const names[] = {"auto", "imagenet", "cifar"};
    for (int i = 0; i < 3; i++)
        if (text && strcmp(text, names[i]) == 0) {
            in->stem = i;
            return TG_OK;
        }
    return tg_error(TG_ERR_INVALID_ARG, "stem '%s': expected auto, imagenet or cifar",
                    text ? text : "(null)");
}

void tg_model_normalisation(const tg_model_spec *m, int channels, float *mean, float *std)
{
    bool per_channel = m->channel_mean && m->channel_std && channels == m->channels;
    for (int c = 0; c < channels; c++) {
        mean[c] = per_channel ? m->channel_mean[c] : m->mean;
        std[c] = per_channel ? m->channel_std[c] : m->std;
    }
}

void tg_model_input_normalisation(const tg_model_spec *m, const tg_model_input *in, int channels,
                                  float *mean, float *std)
{
    if (!in || in->norm_channels <= 0) {
        tg_model_normalisation(m, channels, mean, std);
        return;
    }
    for (int c = 0; c < channels; c++) {
        int k = in->norm_channels == 1 ? 0 : c % in->norm_channels;
        mean[c] = in->norm_mean[k];
        std[c] = in->norm_std[k];
    }
}

/* "a,b,c" into v[]; the count, or -1 for anything else. */
static int parse_floats(const char *text, const char *end, float *v, int cap)
{
    int n = 0;
    while (text < end) {
        char *stop;
        errno = 0;
        double x = strtod(text, &stop);
        if (stop == text || errno || !isfinite((float)x) || n == cap || stop > end)
            return -1;
        v[n++] = (float)x;
        text = stop;
        if (text < end && *text++ != ',')
            return -1;
        if (text == end && text[-1] == ',')
            return -1;
    }
    return n;
}

tg_status tg_model_normalisation_parse(const char *text, tg_model_input *in)
{
    const char *slash = text ? strchr(text, '/') : NULL;
    float mean[TG_MODEL_MAX_NORM_CHANNELS], std[TG_MODEL_MAX_NORM_CHANNELS];
    int nm = slash ? parse_floats(text, slash, mean, TG_MODEL_MAX_NORM_CHANNELS) : -1;
    int ns = slash ? parse_floats(slash + 1, slash + strlen(slash), std, TG_MODEL_MAX_NORM_CHANNELS)
                   : -1;
    bool ok = nm > 0 && nm == ns;
    for (int c = 0; ok && c < ns; c++)
        ok = std[c] > 0;
    if (!ok)
        return tg_error(TG_ERR_INVALID_ARG,
                        "normalisation '%s': expected MEAN/STD with 1 to %d comma-separated "
                        "values each, the same count, every std positive (for example "
                        "0.1307/0.3081 or 0.485,0.456,0.406/0.229,0.224,0.225)",
                        text ? text : "(null)", TG_MODEL_MAX_NORM_CHANNELS);
    in->norm_channels = nm;
    memcpy(in->norm_mean, mean, sizeof(float) * (size_t)nm);
    memcpy(in->norm_std, std, sizeof(float) * (size_t)nm);
    return TG_OK;
}

tg_status tg_model_graph_create(const tg_model_spec *m, int batch, const tg_optimizer *opt,
                                tg_model_graph *out)
{
    return tg_model_graph_create_ex(m, batch, opt, NULL, out);
}

/* Whether `in` is an input the model can be built for; sets the message. */
static tg_status check_input(const tg_model_spec *m, const tg_model_input *in)
{
    if (tg_model_task_tokens(m->task)) {
        if (in->seq_len <= 0 || in->classes < 2 || in->eight_bit)
            return tg_error(TG_ERR_INVALID_ARG,
                            "%s: a language model takes token ids: the sequence length (%d) must "
                            "be positive, the vocabulary (%d) at least 2, and 8-bit image input "
                            "does not apply",
                            m->name, in->seq_len, in->classes);
        return TG_OK;
    }
    if (in->channels <= 0 || in->height <= 0 || in->width <= 0 || in->classes <= 0)
        return tg_error(TG_ERR_INVALID_ARG,
                        "%s: input %dx%dx%d with %d classes: every size must be positive", m->name,
                        in->channels, in->height, in->width, in->classes);
    tg_model_input d = tg_model_default_input(m);
    if (!m->build_for && (in->channels != d.channels || in->height != d.height ||
                          in->width != d.width || in->classes != d.classes))
        return tg_error(TG_ERR_INVALID_ARG,
                        "%s is built for %dx%dx%d inputs and %d classes only, not %dx%dx%d and %d",
                        m->name, d.channels, d.height, d.width, d.classes, in->channels, in->height,
                        in->width, in->classes);
    return TG_OK;
}

tg_status tg_model_graph_create_ex(const tg_model_spec *m, int batch, const tg_optimizer *opt,
                                   const tg_model_input *in, tg_model_graph *out)
{
    memset(out, 0, sizeof *out);
    if (batch <= 0)
        return tg_error(TG_ERR_INVALID_ARG, "%s: batch size must be positive, not %d", m->name,
                        batch);
    tg_model_input shape = in ? *in : tg_model_default_input(m);
    TG_TRY(check_input(m, &shape));
    tg_graph *g = tg_graph_create();
    if (!g)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", m->name);
    tg_graph_set_training(g, opt != NULL);
    out->graph = g;
    out->input = shape;
    if (tg_model_task_tokens(m->task)) {
        out->images = tg_input(g, "tokens", TG_I32, tg_shape2(batch, shape.seq_len));
        if (opt)
            out->labels = tg_input(g, "labels", TG_I32, tg_shape2(batch, shape.seq_len));
    } else {
        out->images = tg_input(g, "images", shape.eight_bit ? TG_U8 : TG_F32,
                               tg_shape4(batch, shape.channels, shape.height, shape.width));
        if (opt)
            out->labels =
                tg_input(g, "labels", TG_I32,
                         m->task == TG_TASK_SEGMENT ? tg_shape3(batch, shape.height, shape.width)
                                                    : tg_shape1(batch));
    }
    tg_tensor *x = out->images;
    if (shape.eight_bit) {
        float mean[16], std[16];
        if (shape.channels > 16)
            return tg_error(TG_ERR_INVALID_ARG, "%s: 8-bit input of %d channels", m->name,
                            shape.channels);
        tg_model_input_normalisation(m, &shape, shape.channels, mean, std);
        x = tg_normalize_u8(g, x, mean, std);
    }
    tg_tensor **loss = opt ? &out->loss : NULL;
    tg_status s = m->onnx        ? tg_model_onnx_build(m, g, x, out->labels, &out->output, loss)
                  : m->build_for ? m->build_for(g, &shape, x, out->labels, &out->output, loss)
                                 : m->build(g, x, out->labels, &out->output, loss);
    if (s == TG_OK && tg_graph_status(g) != TG_OK)
        s = tg_error(tg_graph_status(g), "%s", tg_graph_error(g));
    if (s == TG_OK) {
        tg_tensor_mark_output(out->output);
        if (opt) {
            tg_tensor_mark_output(out->loss);
            s = tg_graph_backward(g, out->loss);
            if (s == TG_OK)
                s = tg_graph_add_optimizer(g, opt);
        }
    }
    if (s != TG_OK) {
        tg_model_graph_destroy(out);
        return tg_error_prefix(s, "model %s", m->name);
    }
    return TG_OK;
}

void tg_model_graph_destroy(tg_model_graph *mg)
{
    if (!mg)
        return;
    tg_graph_destroy(mg->graph);
    memset(mg, 0, sizeof *mg);
}
