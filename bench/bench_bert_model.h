/* bench/bench_bert_model.h - the BERT-base-shaped encoder of
 * bench/torch_bert.py built with the graph API (bench_bert.c's model, see
 * there), shared by bench_bert.c and bench_pipeline_table.c (pipelined
 * over two devices). Header-only, as bench_util.h: every bench is one
 * executable. */
#ifndef TG_BENCH_BERT_MODEL_H
#define TG_BENCH_BERT_MODEL_H

#include "tilegraph/status.h"
#include "tilegraph/graph.h"
#include "tilegraph/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct bert_shape {
    int layers, hidden, heads, inter, seq, batch, classes;
    float dropout;
    /* a mask input of each layer's own ("mask.L", the same values): a
     * pipeline stage cannot read an input another stage reads too */
    int mask_per_layer;
} bert_shape;

enum { BERT_MAX_LAYERS = 24 };

typedef struct bert_graph {
    tg_graph *g;
    tg_tensor *x, *mask, *labels, *loss;
    tg_tensor *masks[BERT_MAX_LAYERS]; /* mask_per_layer: layer L's; else every one is `mask` */
} bert_graph;

static inline void bert_die(const char *what)
{
    fprintf(stderr, "bench: %s: %s\n", what, tg_error_message());
    exit(1);
}

static inline tg_tensor *linear(tg_graph *g, const char *name, tg_tensor *x, int in, int out)
{
    char n[64];
    tg_scope_push(g, name);
    snprintf(n, sizeof n, "weight");
    tg_tensor *w = tg_param(g, n, tg_shape2(out, in), (tg_init){TG_INIT_FAN_IN_UNIFORM, in, 0});
    tg_tensor *b = tg_param(g, "bias", tg_shape1(out), (tg_init){TG_INIT_FAN_IN_UNIFORM, in, 0});
    tg_scope_pop(g);
    return tg_linear(g, x, w, b);
}

static inline tg_tensor *layer_norm(tg_graph *g, const char *name, tg_tensor *x, int hidden)
{
    tg_scope_push(g, name);
    tg_tensor *gamma = tg_param(g, "weight", tg_shape1(hidden), (tg_init){TG_INIT_ONES, 0, 0});
    tg_tensor *beta = tg_param(g, "bias", tg_shape1(hidden), (tg_init){TG_INIT_ZEROS, 0, 0});
    tg_scope_pop(g);
    return tg_layer_norm(g, x, 1, gamma, beta, 1e-12f);
}

/* [B, S, H] -> [B, heads, S, H / heads] */
static inline tg_tensor *split_heads(tg_graph *g, tg_tensor *t, const bert_shape *m)
{
    static const int perm[4] = {0, 2, 1, 3};
    tg_tensor *r = tg_reshape(g, t, tg_shape4(m->batch, m->seq, m->heads, m->hidden / m->heads));
    return tg_transpose(g, r, perm);
}

/* One encoder layer, as torch_bert.py's Layer.forward. */
static inline tg_tensor *encoder_layer(tg_graph *g, tg_tensor *x, tg_tensor *mask,
                                       const bert_shape *m)
{
    static const int perm[4] = {0, 2, 1, 3};
    int H = m->hidden, d = m->hidden / m->heads;
    tg_tensor *q = split_heads(g, linear(g, "q", x, H, H), m);
    tg_tensor *k = split_heads(g, linear(g, "k", x, H, H), m);
    tg_tensor *v = split_heads(g, linear(g, "v", x, H, H), m);
    tg_tensor *scores = tg_scale(g, tg_matmul(g, q, k, false, true), 1.0f / sqrtf((float)d), 0.0f);
    tg_tensor *probs = tg_dropout(g, tg_softmax(g, tg_add(g, scores, mask), -1), m->dropout);
    tg_tensor *ctx = tg_transpose(g, tg_matmul(g, probs, v, false, false), perm);
    ctx = tg_reshape(g, ctx, tg_shape3(m->batch, m->seq, H));
    tg_tensor *attn = tg_dropout(g, linear(g, "o", ctx, H, H), m->dropout);
    x = layer_norm(g, "ln1", tg_add(g, x, attn), H);
    tg_tensor *inter = tg_gelu(g, linear(g, "i", x, H, m->inter));
    tg_tensor *out = tg_dropout(g, linear(g, "out", inter, m->inter, H), m->dropout);
    return layer_norm(g, "ln2", tg_add(g, x, out), H);
}

static inline bert_graph build_bert(const bert_shape *m)
{
    bert_graph b;
    b.g = tg_graph_create();
    tg_graph *g = b.g;
    b.x = tg_input(g, "x", TG_F32, tg_shape3(m->batch, m->seq, m->hidden));
    b.mask = tg_input(g, m->mask_per_layer ? "mask.0" : "mask", TG_F32,
                      tg_shape4(m->batch, 1, 1, m->seq));
    b.labels = tg_input(g, "labels", TG_I32, tg_shape1((int64_t)m->batch * m->seq));
    tg_tensor *h = b.x;
    for (int l = 0; l < m->layers; l++) {
        char name[32];
        snprintf(name, sizeof name, "mask.%d", l);
        b.masks[l] = l == 0 || !m->mask_per_layer
                         ? b.mask
                         : tg_input(g, name, TG_F32, tg_shape4(m->batch, 1, 1, m->seq));
        snprintf(name, sizeof name, "layers.%d", l);
        tg_scope_push(g, name);
        h = encoder_layer(g, h, b.masks[l], m);
        tg_scope_pop(g);
    }
    tg_tensor *logits = linear(g, "head", h, m->hidden, m->classes);
    logits = tg_reshape(g, logits, tg_shape2((int64_t)m->batch * m->seq, m->classes));
    b.loss = tg_cross_entropy(g, logits, b.labels);
    if (!b.loss)
        bert_die("building the encoder");
    tg_tensor_mark_output(b.loss);
    if (tg_graph_backward(g, b.loss) != TG_OK)
        bert_die("backward");
    tg_optimizer opt = tg_optimizer_adamw(1e-4f);
    if (tg_graph_add_optimizer(g, &opt) != TG_OK)
        bert_die("optimizer");
    return b;
}

#endif
