/* models/transformer.h - the zoo's language models at any size: the
 * builders behind gpt-tiny, bert-tiny and bert-large, for tests that need a smaller
 * configuration (a gradient check) than the zoo's. */
#ifndef TG_MODELS_TRANSFORMER_H
#define TG_MODELS_TRANSFORMER_H

#include "tilegraph/graph.h"

typedef struct tg_transformer_config {
    int layers, d_model, heads;
    int mlp; /* the MLP's hidden width (4 x d_model in both models) */
    int vocab;
    int seq_len;
    int blocks; /* the layers split evenly into blocks B1..Bn (0 or 1: two, as the tiny models) */
} tg_transformer_config;

/* nanoGPT's decoder for ids [N, S] i32: *out [N, S, vocab] next-token
 * scores, and with labels [N, S] the mean cross-entropy (positions labelled
 * -100 left out) in *loss. Parameters as nanoGPT names them
 * (transformer.wte.weight, transformer.h.0.attn.c_attn.weight, ...,
 * lm_head.weight); blocks B1 (the embeddings and the first half of the
 * layers) and B2 (the rest and the head). */
tg_status tg_model_gpt_build(tg_graph *g, const tg_transformer_config *c, tg_tensor *ids,
                             tg_tensor *labels, tg_tensor **out, tg_tensor **loss);

/* BERT's encoder and masked-LM head (BertForMaskedLM's names:
 * bert.embeddings.word_embeddings.weight, ...,
 * bert.encoder.layer.0.attention.self.query.weight, ...,
 * cls.predictions.decoder.weight) for ids over vocab + 1 tokens (the last is
 * the mask token); blocks B1 and B2 as the GPT's, or c->blocks of them
 * (B1 also holds the embeddings, the last one the head). No token type
 * embeddings: every sample is one segment. */
tg_status tg_model_bert_build(tg_graph *g, const tg_transformer_config *c, tg_tensor *ids,
                              tg_tensor *labels, tg_tensor **out, tg_tensor **loss);

#endif
