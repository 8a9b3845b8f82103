/* models/transformer.c - the zoo's language models: gpt-tiny, a causal
 * decoder as nanoGPT builds GPT-2 (pre-LN blocks, learned positions, a
 * fused q/k/v projection, exact GELU, an untied head), and bert-tiny, an
 * encoder as BertForMaskedLM (post-LN blocks, separate q/k/v, the
 * transform + decoder head) trained on BERT's masked tokens.
 *
 * The residual stream is kept as [N * S, d] so that every projection is a
 * plain linear layer and every layer norm normalises the last dimension;
 * attention alone reshapes it into heads. The causal mask is a constant
 * added to the scores (0 on and below the diagonal, -1e9 above), so the
 * masked scores' softmax weights are exactly 0 and get no gradient; -1e9
 * rather than -inf keeps the scores finite for the engine's NaN/inf check.
 *
 * Initialisation is nanoGPT's and Hugging Face's for these models:
 * N(0, 0.02) weights and embeddings, zero biases, layer norms 1 and 0, and
 * (GPT) the projections into the residual stream N(0, 0.02 / sqrt(2L)).
 */
#include "transformer.h"

#include "tilegraph/models.h"

#include "core/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define GPT_LN_EPS 1e-5f
#define BERT_LN_EPS 1e-12f
#define INIT_STD 0.02
#define MASKED_SCORE (-1e9f)

static tg_tensor *normal_param(tg_graph *g, const char *name, tg_shape shape, double std)
{
    return tg_param(g, name, shape, (tg_init){TG_INIT_NORMAL, 0.0, std});
}

/* nn.Linear(in, out) in scope `name`: x [M, in] -> [M, out]. */
static tg_tensor *linear(tg_graph *g, tg_tensor *x, const char *name, int in, int out, double std)
{
    tg_scope_push(g, name);
    tg_tensor *w = normal_param(g, "weight", tg_shape2(out, in), std);
    tg_tensor *b = tg_param(g, "bias", tg_shape1(out), (tg_init){TG_INIT_ZEROS, 0, 0});
    tg_scope_pop(g);
    tg_tensor *y = tg_linear(g, x, w, b);
    if (y)
        tg_graph_rename(g, y, name);
    return y;
}

/* nn.LayerNorm(d) over the last dimension, in scope `name`. */
static tg_tensor *layer_norm(tg_graph *g, tg_tensor *x, const char *name, int d, float eps)
{
    tg_scope_push(g, name);
    tg_tensor *w = tg_param(g, "weight", tg_shape1(d), (tg_init){TG_INIT_ONES, 0, 0});
    tg_tensor *b = tg_param(g, "bias", tg_shape1(d), (tg_init){TG_INIT_ZEROS, 0, 0});
    tg_scope_pop(g);
    tg_tensor *y = tg_layer_norm(g, x, 1, w, b, eps);
    if (y)
        tg_graph_rename(g, y, name);
    return y;
}

/* [N * S, H * hd] -> [N, H, S, hd] */
static tg_tensor *split_heads(tg_graph *g, tg_tensor *x, int n, int s, int h, int hd)
{
    x = tg_reshape(g, x, tg_shape4(n, s, h, hd));
    return tg_transpose(g, x, (const int[]){0, 2, 1, 3});
}

/* Scaled dot-product attention of q, k, v [N * S, d] over h heads, with
 * the additive mask [S, S] (NULL: none); -> [N * S, d]. */
static tg_tensor *attention(tg_graph *g, tg_tensor *q, tg_tensor *k, tg_tensor *v, int n, int s,
                            int h, int d, tg_tensor *mask)
{
    int hd = d / h;
    q = split_heads(g, q, n, s, h, hd);
    k = split_heads(g, k, n, s, h, hd);
    v = split_heads(g, v, n, s, h, hd);
    tg_tensor *att = tg_scale(g, tg_matmul(g, q, k, false, true), 1.0f / sqrtf((float)hd), 0.0f);
    if (mask)
        att = tg_add(g, att, mask);
    att = tg_softmax(g, att, 3);
    tg_tensor *y = tg_matmul(g, att, v, false, false); /* [N, H, S, hd] */
    y = tg_transpose(g, y, (const int[]){0, 2, 1, 3});
    return tg_reshape(g, y, tg_shape2((int64_t)n * s, d));
}

/* 0 on and below the diagonal, MASKED_SCORE above: position i sees 0..i. */
static tg_tensor *causal_mask(tg_graph *g, int s)
{
    float *m = malloc((size_t)s * (size_t)s * sizeof *m);
    if (!m)
        return NULL; /* the op given NULL records the failure */
    for (int i = 0; i < s; i++)
        for (int j = 0; j < s; j++)
            m[(size_t)i * s + j] = j > i ? MASKED_SCORE : 0.0f;
    tg_tensor *t = tg_constant_data(g, "bias", tg_shape2(s, s), m);
    free(m);
    return t;
}

/* Scores [N, S, V] = x [N * S, d] times the head's weight [V, d]
 * (transposed), plus bias [V] when given. */
static tg_tensor *head_scores(tg_graph *g, tg_tensor *x, tg_tensor *w, tg_tensor *bias, int n,
                              int s, int d)
{
    x = tg_reshape(g, x, tg_shape3(n, s, d));
    tg_tensor *y = tg_matmul(g, x, w, false, true);
    return bias ? tg_add(g, y, bias) : y;
}

/* The mean cross-entropy over the labelled positions of scores [N, S, V]. */
static tg_tensor *lm_loss(tg_graph *g, tg_tensor *scores, tg_tensor *labels, int n, int s, int v)
{
    tg_tensor *flat = tg_reshape(g, scores, tg_shape2((int64_t)n * s, v));
    tg_tensor *lab = tg_reshape(g, labels, tg_shape1((int64_t)n * s));
    tg_loss_params p = {TG_LOSS_MEAN, true, TG_MODEL_IGNORE_LABEL};
    return tg_cross_entropy_ex(g, flat, lab, NULL, p);
}

/* Layer l opens block B<k+1> when it is the first of the (k+1)-th of
 * c->blocks equal parts (two when unset); B1, open already, holds the
 * embeddings too. */
static void next_block(tg_graph *g, const tg_transformer_config *c, int l)
{
    int blocks = c->blocks > 1 ? c->blocks : 2;
    for (int k = 1; k < blocks; k++)
        if (l == k * c->layers / blocks) {
            char name[16];
            snprintf(name, sizeof name, "B%d", k + 1);
            tg_block_begin(g, name);
        }
}

static tg_status check_config(tg_graph *g, const tg_transformer_config *c, tg_tensor *ids)
{
    if (c->layers < 1 || c->d_model < 1 || c->heads < 1 || c->d_model % c->heads || c->mlp < 1 ||
        c->vocab < 2 || c->seq_len < 1)
        return tg_error(TG_ERR_INVALID_ARG,
                        "transformer: %d layers, d_model %d, %d heads, MLP %d, vocabulary %d, "
                        "sequence %d: each must be positive, d_model a multiple of the heads",
                        c->layers, c->d_model, c->heads, c->mlp, c->vocab, c->seq_len);
    tg_shape s = tg_tensor_shape(ids);
    if (s.ndim != 2 || s.dim[1] != c->seq_len || tg_tensor_dtype(ids) != TG_I32)
        return tg_error(TG_ERR_INVALID_ARG,
                        "transformer: the input must be token ids [batch, %d] (i32)", c->seq_len);
    return tg_graph_status(g);
}

/* One pre-LN decoder block, transformer.h.<l>: x + attn(ln_1(x)), then
 * x + mlp(ln_2(x)). */
static tg_tensor *gpt_block(tg_graph *g, const tg_transformer_config *c, tg_tensor *x, int l, int n)
{
    const int d = c->d_model, s = c->seq_len;
    const double proj_std = INIT_STD / sqrt(2.0 * c->layers);
    char idx[16];
    snprintf(idx, sizeof idx, "%d", l);
    tg_scope_push(g, "transformer.h");
    tg_scope_push(g, idx);
    tg_tensor *h = layer_norm(g, x, "ln_1", d, GPT_LN_EPS);
    tg_scope_push(g, "attn");
    tg_tensor *qkv = linear(g, h, "c_attn", d, 3 * d, INIT_STD);
    tg_tensor *mask = causal_mask(g, s);
    h = attention(g, tg_slice(g, qkv, 1, 0, d), tg_slice(g, qkv, 1, d, 2 * d),
                  tg_slice(g, qkv, 1, 2 * d, 3 * d), n, s, c->heads, d, mask);
    h = linear(g, h, "c_proj", d, d, proj_std);
    tg_scope_pop(g);
    x = tg_add(g, x, h);
    h = layer_norm(g, x, "ln_2", d, GPT_LN_EPS);
    tg_scope_push(g, "mlp");
    h = tg_gelu(g, linear(g, h, "c_fc", d, c->mlp, INIT_STD));
    h = linear(g, h, "c_proj", c->mlp, d, proj_std);
    tg_scope_pop(g);
    x = tg_add(g, x, h);
    tg_scope_pop(g);
    tg_scope_pop(g);
    return x;
}

tg_status tg_model_gpt_build(tg_graph *g, const tg_transformer_config *c, tg_tensor *ids,
                             tg_tensor *labels, tg_tensor **out, tg_tensor **loss)
{
    TG_TRY(check_config(g, c, ids));
    const int n = (int)tg_tensor_shape(ids).dim[0], s = c->seq_len, d = c->d_model;
    tg_block_begin(g, "B1");
    tg_scope_push(g, "transformer.wte");
    tg_tensor *wte = normal_param(g, "weight", tg_shape2(c->vocab, d), INIT_STD);
    tg_scope_pop(g);
    tg_scope_push(g, "transformer.wpe");
    tg_tensor *wpe = normal_param(g, "weight", tg_shape2(s, d), INIT_STD);
    tg_scope_pop(g);
    tg_tensor *x = tg_add(g, tg_embedding(g, wte, ids), wpe); /* [N, S, d] + [S, d] */
    x = tg_reshape(g, x, tg_shape2((int64_t)n * s, d));
    for (int l = 0; l < c->layers; l++) {
        next_block(g, c, l);
        x = gpt_block(g, c, x, l, n);
    }
    x = layer_norm(g, x, "transformer.ln_f", d, GPT_LN_EPS);
    tg_scope_push(g, "lm_head");
    tg_tensor *w = normal_param(g, "weight", tg_shape2(c->vocab, d), INIT_STD);
    tg_scope_pop(g);
    *out = head_scores(g, x, w, NULL, n, s, d);
    if (*out)
        tg_graph_rename(g, *out, "lm_head");
    if (labels)
        *loss = lm_loss(g, *out, labels, n, s, c->vocab);
    tg_block_end(g);
    return tg_graph_status(g);
}

/* One post-LN encoder block, bert.encoder.layer.<l>. */
static tg_tensor *bert_block(tg_graph *g, const tg_transformer_config *c, tg_tensor *x, int l,
                             int n)
{
    const int d = c->d_model, s = c->seq_len;
    char idx[16];
    snprintf(idx, sizeof idx, "%d", l);
    tg_scope_push(g, "bert.encoder.layer");
    tg_scope_push(g, idx);
    tg_scope_push(g, "attention");
    tg_scope_push(g, "self");
    tg_tensor *q = linear(g, x, "query", d, d, INIT_STD);
    tg_tensor *k = linear(g, x, "key", d, d, INIT_STD);
    tg_tensor *v = linear(g, x, "value", d, d, INIT_STD);
    tg_tensor *a = attention(g, q, k, v, n, s, c->heads, d, NULL);
    tg_scope_pop(g);
    tg_scope_push(g, "output");
    a = linear(g, a, "dense", d, d, INIT_STD);
    x = layer_norm(g, tg_add(g, x, a), "LayerNorm", d, BERT_LN_EPS);
    tg_scope_pop(g);
    tg_scope_pop(g);
    tg_scope_push(g, "intermediate");
    tg_tensor *h = tg_gelu(g, linear(g, x, "dense", d, c->mlp, INIT_STD));
    tg_scope_pop(g);
    tg_scope_push(g, "output");
    h = linear(g, h, "dense", c->mlp, d, INIT_STD);
    x = layer_norm(g, tg_add(g, x, h), "LayerNorm", d, BERT_LN_EPS);
    tg_scope_pop(g);
    tg_scope_pop(g);
    tg_scope_pop(g);
    return x;
}

tg_status tg_model_bert_build(tg_graph *g, const tg_transformer_config *c, tg_tensor *ids,
                              tg_tensor *labels, tg_tensor **out, tg_tensor **loss)
{
    TG_TRY(check_config(g, c, ids));
    const int n = (int)tg_tensor_shape(ids).dim[0], s = c->seq_len, d = c->d_model;
    tg_block_begin(g, "B1");
    tg_scope_push(g, "bert.embeddings");
    tg_scope_push(g, "word_embeddings"); /* the vocabulary and the mask token */
    tg_tensor *wte = normal_param(g, "weight", tg_shape2(c->vocab + 1, d), INIT_STD);
    tg_scope_pop(g);
    tg_scope_push(g, "position_embeddings");
    tg_tensor *wpe = normal_param(g, "weight", tg_shape2(s, d), INIT_STD);
    tg_scope_pop(g);
    tg_tensor *x = tg_add(g, tg_embedding(g, wte, ids), wpe);
    x = tg_reshape(g, x, tg_shape2((int64_t)n * s, d));
    x = layer_norm(g, x, "LayerNorm", d, BERT_LN_EPS);
    tg_scope_pop(g);
    for (int l = 0; l < c->layers; l++) {
        next_block(g, c, l);
        x = bert_block(g, c, x, l, n);
    }
    tg_scope_push(g, "cls.predictions.transform");
    x = tg_gelu(g, linear(g, x, "dense", d, d, INIT_STD));
    x = layer_norm(g, x, "LayerNorm", d, BERT_LN_EPS);
    tg_scope_pop(g);
    tg_scope_push(g, "cls.predictions");
    tg_scope_push(g, "decoder");
    tg_tensor *w = normal_param(g, "weight", tg_shape2(c->vocab, d), INIT_STD);
    tg_scope_pop(g);
    tg_tensor *b = tg_param(g, "bias", tg_shape1(c->vocab), (tg_init){TG_INIT_ZEROS, 0, 0});
    tg_scope_pop(g);
    *out = head_scores(g, x, w, b, n, s, d);
    if (*out)
        tg_graph_rename(g, *out, "cls.predictions");
    if (labels)
        *loss = lm_loss(g, *out, labels, n, s, c->vocab);
    tg_block_end(g);
    return tg_graph_status(g);
}

/* The zoo's sizes, for the vocabulary and window of `in`. */
static tg_transformer_config zoo_config(const tg_model_input *in, int layers, int heads)
{
    return (tg_transformer_config){layers, 128, heads, 4 * 128, in->classes, in->seq_len, 2};
}

static tg_status gpt_tiny(tg_graph *g, const tg_model_input *in, tg_tensor *x, tg_tensor *labels,
                          tg_tensor **out, tg_tensor **loss)
{
    tg_transformer_config c = zoo_config(in, 4, 4);
    return tg_model_gpt_build(g, &c, x, labels, out, loss);
}

static tg_status bert_tiny(tg_graph *g, const tg_model_input *in, tg_tensor *x, tg_tensor *labels,
                           tg_tensor **out, tg_tensor **loss)
{
    tg_transformer_config c = zoo_config(in, 2, 2);
    return tg_model_bert_build(g, &c, x, labels, out, loss);
}

/* BERT-large's shape (24 layers, d 1024, 16 heads, MLP 4096; 335 M
 * parameters at its 30,522-token vocabulary) in four blocks of six layers:
 * the model larger than a device (docs/memory-locations.md). */
static tg_status bert_large(tg_graph *g, const tg_model_input *in, tg_tensor *x, tg_tensor *labels,
                            tg_tensor **out, tg_tensor **loss)
{
    tg_transformer_config c = {24, 1024, 16, 4096, in->classes, in->seq_len, 4};
    return tg_model_bert_build(g, &c, x, labels, out, loss);
}

const tg_model_spec tg_model_gpt_tiny = {
    .name = "gpt-tiny",
    .description = "causal language model (nanoGPT's decoder: 4 layers, d 128, 4 heads, pre-LN)",
    .task = TG_TASK_CAUSAL_LM,
    .seq_len = 64,
    .channels = 1,
    .height = 1,
    .width = 64,
    .classes = 256,
    .mean = 0.0f,
    .std = 1.0f,
    .build_for = gpt_tiny,
};

const tg_model_spec tg_model_bert_tiny = {
    .name = "bert-tiny",
    .description = "masked language model (BERT-Tiny: 2 layers, d 128, 2 heads, post-LN)",
    .task = TG_TASK_MASKED_LM,
    .seq_len = 64,
    .channels = 1,
    .height = 1,
    .width = 64,
    .classes = 256,
    .mean = 0.0f,
    .std = 1.0f,
    .build_for = bert_tiny,
};

const tg_model_spec tg_model_bert_large = {
    .name = "bert-large",
    .description = "masked language model (BERT-large: 24 layers, d 1024, 16 heads, post-LN) "
                   "in blocks B1..B4",
    .task = TG_TASK_MASKED_LM,
    .seq_len = 128,
    .channels = 1,
    .height = 1,
    .width = 128,
    .classes = 30522,
    .mean = 0.0f,
    .std = 1.0f,
    .build_for = bert_large,
};
