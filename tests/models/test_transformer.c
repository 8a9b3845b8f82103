/* tests/models/test_transformer.c - the zoo's language models: gradients
 * of a small gpt and bert against finite differences (double precision),
 * the PyTorch (nanoGPT, BertForMaskedLM) parameter names, the causal mask
 * (a position's scores do not depend on later tokens; BERT's do) and the
 * zoo's input checks.
 * TG_TEST_LABELS: quick */
#include "tg_test.h"

#include "models/transformer.h"
#include "tilegraph/models.h"
#include "tilegraph/session.h"

#include <math.h>
#include <string.h>

enum { BATCH = 2 };

static const tg_transformer_config small = {2, 8, 2, 16, 7, 5, 2};

typedef struct lm_case {
    bool bert;
} lm_case;

static tg_tensor *build_lm(tg_graph *g, void *ctx)
{
    const lm_case *c = ctx;
    tg_tensor *ids = tg_input(g, "tokens", TG_I32, tg_shape2(BATCH, small.seq_len));
    tg_tensor *labels = tg_input(g, "labels", TG_I32, tg_shape2(BATCH, small.seq_len));
    tg_tensor *out = NULL, *loss = NULL;
    tg_status s = c->bert ? tg_model_bert_build(g, &small, ids, labels, &out, &loss)
                          : tg_model_gpt_build(g, &small, ids, labels, &out, &loss);
    TG_CHECK_OK(s);
    /* the scores and the loss both: every parameter's gradient through both */
    return tg_add(g, tg_reduce_sum(g, tg_scale(g, out, 0.1f, 0.0f), 7u, false), loss);
}

static void test_gradients(void)
{
    tg_check_opts o = {.int_range = small.vocab, .tol = 1e-5, .training = true, .max_elems = 12};
    tg_gradcheck("gpt", build_lm, &(lm_case){false}, o);
    tg_gradcheck("bert", build_lm, &(lm_case){true}, o);
}

static bool has_param(const tg_graph *g, const char *name)
{
    tg_tensor *t = tg_graph_find(g, name);
    return t && tg_tensor_is_param(t);
}

static void test_names_and_shapes(void)
{
    tg_optimizer opt = tg_optimizer_adam(1e-3f);
    tg_model_graph mg;
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("gpt-tiny"), 3, &opt, &mg));
    if (mg.graph) {
        const char *names[] = {"transformer.wte/weight",
                               "transformer.wpe/weight",
                               "transformer.h/0/ln_1/weight",
                               "transformer.h/0/attn/c_attn/weight",
                               "transformer.h/0/attn/c_attn/bias",
                               "transformer.h/0/attn/c_proj/weight",
                               "transformer.h/3/ln_2/bias",
                               "transformer.h/3/mlp/c_fc/weight",
                               "transformer.h/3/mlp/c_proj/weight",
                               "transformer.ln_f/weight",
                               "lm_head/weight"};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (!has_param(mg.graph, names[i]))
                tg_test_fail(__FILE__, __LINE__, "gpt-tiny has no parameter %s", names[i]);
        TG_CHECK(!has_param(mg.graph, "transformer.h/4/ln_1/weight"));
        tg_shape in = tg_tensor_shape(mg.images), out = tg_tensor_shape(mg.output);
        TG_CHECK(tg_tensor_dtype(mg.images) == TG_I32 && in.ndim == 2 && in.dim[1] == 64);
        TG_CHECK(out.ndim == 3 && out.dim[0] == 3 && out.dim[1] == 64 && out.dim[2] == 256);
        TG_CHECK(tg_tensor_shape(mg.labels).ndim == 2);
        tg_shape w = tg_tensor_shape(tg_graph_find(mg.graph, "transformer.h/0/attn/c_attn/weight"));
        TG_CHECK(w.dim[0] == 384 && w.dim[1] == 128); /* nn.Linear's [out, in] */
    }
    tg_model_graph_destroy(&mg);
    tg_model_input in = tg_model_default_input(tg_model_find("bert-tiny"));
    in.classes = 80;
    in.seq_len = in.width = 16;
    TG_CHECK_OK(tg_model_graph_create_ex(tg_model_find("bert-tiny"), 2, &opt, &in, &mg));
    if (mg.graph) {
        const char *names[] = {"bert.embeddings/word_embeddings/weight",
                               "bert.embeddings/position_embeddings/weight",
                               "bert.embeddings/LayerNorm/weight",
                               "bert.encoder.layer/0/attention/self/query/weight",
                               "bert.encoder.layer/0/attention/self/key/bias",
                               "bert.encoder.layer/1/attention/output/dense/weight",
                               "bert.encoder.layer/1/attention/output/LayerNorm/bias",
                               "bert.encoder.layer/1/intermediate/dense/weight",
                               "bert.encoder.layer/1/output/dense/weight",
                               "bert.encoder.layer/1/output/LayerNorm/weight",
                               "cls.predictions.transform/dense/weight",
                               "cls.predictions.transform/LayerNorm/weight",
                               "cls.predictions/decoder/weight",
                               "cls.predictions/bias"};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (!has_param(mg.graph, names[i]))
                tg_test_fail(__FILE__, __LINE__, "bert-tiny has no parameter %s", names[i]);
        /* the mask token is one more input token than the vocabulary */
        tg_shape e =
            tg_tensor_shape(tg_graph_find(mg.graph, "bert.embeddings/word_embeddings/weight"));
        TG_CHECK(e.dim[0] == 81 && e.dim[1] == 128);
        TG_CHECK(tg_tensor_shape(mg.output).dim[2] == 80);
    }
    tg_model_graph_destroy(&mg);
    /* a language model takes no images and no 8-bit input */
    in.eight_bit = true;
    TG_CHECK(tg_model_graph_create_ex(tg_model_find("gpt-tiny"), 2, NULL, &in, &mg) ==
             TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_error_message(), "token ids") != NULL);
}

/* Scores of batch 1 for `ids` from an inference session of the small model. */
static void forward(bool bert, const int32_t *ids, float *scores)
{
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, false);
    tg_tensor *x = tg_input(g, "tokens", TG_I32, tg_shape2(1, small.seq_len)), *out = NULL;
    TG_CHECK_OK(bert ? tg_model_bert_build(g, &small, x, NULL, &out, NULL)
                     : tg_model_gpt_build(g, &small, x, NULL, &out, NULL));
    tg_tensor_mark_output(out);
    tg_options *o = tg_options_create();
    tg_options_set(o, "randomSeed", "7");
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    if (s) {
        TG_CHECK_OK(tg_session_write(s, x, ids, (size_t)small.seq_len * sizeof(int32_t)));
        TG_CHECK_OK(tg_session_run(s));
        TG_CHECK_OK(
            tg_session_read(s, out, scores, (size_t)(small.seq_len * small.vocab) * sizeof(float)));
    }
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_graph_destroy(g);
}

/* Changing the last token changes no earlier position's scores in the GPT
 * (and its own position's, being its input); in BERT it changes them all. */
static void test_causal_mask(void)
{
    int32_t a[5] = {1, 2, 3, 4, 5}, b[5] = {1, 2, 3, 4, 0};
    float sa[5 * 7], sb[5 * 7];
    forward(false, a, sa);
    forward(false, b, sb);
    TG_CHECK(memcmp(sa, sb, 4 * 7 * sizeof(float)) == 0);
    TG_CHECK(memcmp(sa + 4 * 7, sb + 4 * 7, 7 * sizeof(float)) != 0);
    forward(true, a, sa);
    forward(true, b, sb);
    TG_CHECK(memcmp(sa, sb, 7 * sizeof(float)) != 0);
}

int main(void)
{
    TG_RUN(test_gradients);
    TG_RUN(test_names_and_shapes);
    TG_RUN(test_causal_mask);
    return tg_test_finish();
}
