/* models/zoo.c - the table of built-in models and the training-graph builder. */
#include "tilegraph/models.h"

#include "core/error.h"

#include <stdio.h>
#include <string.h>

extern const tg_model_spec tg_model_fashion_basic;
extern const tg_model_spec tg_model_mnist_pipeline;

static const tg_model_spec *const models[] = {
    &tg_model_fashion_basic,
    &tg_model_mnist_pipeline,
};

#define N_MODELS ((int)(sizeof models / sizeof models[0]))

int tg_model_count(void) { return N_MODELS; }

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

tg_status tg_model_graph_create(const tg_model_spec *m, int batch, const tg_optimizer *opt,
                                tg_model_graph *out)
{
    memset(out, 0, sizeof *out);
    if (batch <= 0)
        return tg_error(TG_ERR_INVALID_ARG, "%s: batch size must be positive, not %d", m->name,
                        batch);
    tg_graph *g = tg_graph_create();
    if (!g)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", m->name);
    tg_graph_set_training(g, opt != NULL);
    out->graph = g;
    out->images = tg_input(g, "images", TG_F32, tg_shape4(batch, m->channels, m->height, m->width));
    if (opt)
        out->labels = tg_input(g, "labels", TG_I32, tg_shape1(batch));
    tg_status s = m->build(g, out->images, out->labels, &out->output, opt ? &out->loss : NULL);
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
