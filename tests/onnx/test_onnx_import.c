/* tests/onnx/test_onnx_import.c - importing the committed PyTorch exports
 * (tests/onnx/fixtures, made by make_fixtures.py): the summary, parameter
 * names, the inference output against PyTorch's, the scopes --split uses,
 * training through the model zoo's ONNX source, and the resulting
 * checkpoint names.
 * TG_TEST_LABELS: quick */
#include "tg_test.h"

#include "onnx_run.h"
#include "ops/unary.h"

#include "tilegraph/checkpoint.h"
#include "tilegraph/models.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIXTURES TG_SOURCE_DIR "/tests/onnx/fixtures/"

static void test_summary(void)
{
    tg_onnx_model *m = NULL;
    TG_CHECK_OK(tg_onnx_load(FIXTURES "tiny_cnn.onnx", &m));
    if (!m)
        return;
    TG_CHECK(tg_onnx_opset(m) == 13);
    TG_CHECK(strstr(tg_onnx_producer(m), "pytorch") != NULL);
    TG_CHECK(tg_onnx_input_count(m) == 1);
    tg_onnx_value in = tg_onnx_input(m, 0);
    TG_CHECK(!strcmp(in.name, "input") && !strcmp(in.dtype, "float"));
    TG_CHECK(in.ndim == 4 && in.dim[0] == -1 && in.dim[1] == 1 && in.dim[2] == 28);
    TG_CHECK(tg_onnx_output_count(m) == 1 && tg_onnx_output(m, 0).dim[1] == 10);
    /* conv1 8x1x3x3+8, bn1 4x8, two blocks of 2 convs 8x8x3x3 and 2 bns, fc 10x8+10 */
    TG_CHECK(tg_onnx_float_elements(m) == 80 + 32 + 2 * (2 * 576 + 2 * 32) + 90);
    int convs = 0;
    for (int i = 0; i < tg_onnx_node_count(m); i++)
        convs += !strcmp(tg_onnx_node_op(m, i), "Conv");
    TG_CHECK(convs == 5);
    TG_CHECK_OK(tg_onnx_check_ops(m));
    tg_onnx_model_destroy(m);
}

/* The inference output equals PyTorch's eval() output for the same input. */
static void check_against_pytorch(const char *name)
{
    char path[512];
    tg_onnx_model *m = NULL;
    snprintf(path, sizeof path, FIXTURES "%s.onnx", name);
    TG_CHECK_OK(tg_onnx_load(path, &m));
    tg_onnx_data in, want, got[TG_ONNX_MAX_IO];
    snprintf(path, sizeof path, FIXTURES "%s.input.pb", name);
    TG_CHECK_OK(tg_onnx_data_read_file(path, &in));
    snprintf(path, sizeof path, FIXTURES "%s.output.pb", name);
    TG_CHECK_OK(tg_onnx_data_read_file(path, &want));
    int n_out = 0;
    bool built;
    if (m && (in.f || in.i) && want.f) { /* integer inputs: token ids, bags */
        TG_CHECK_OK(onnx_run(m, in.dim[0], &in, 1, got, &n_out, &built));
        TG_CHECK(n_out == 1);
        double worst;
        if (n_out == 1 && !onnx_allclose(&got[0], &want, 1e-4, 1e-5, &worst))
            tg_test_fail(__FILE__, __LINE__, "%s: output differs from PyTorch's by %g", name,
                         worst);
    }
    for (int k = 0; k < n_out; k++)
        tg_onnx_data_free(&got[k]);
    tg_onnx_data_free(&in);
    tg_onnx_data_free(&want);
    tg_onnx_model_destroy(m);
}

/* The number of nodes of op kind `op` in g. */
static int count_op(tg_graph *g, tg_op op)
{
    int n = 0;
    for (int i = 0; i < tg_graph_tensor_count(g); i++)
        n += tg_graph_tensor(g, i)->op == op;
    return n;
}

static void test_cnn_matches_pytorch(void)
{
    check_against_pytorch("tiny_cnn");
}
/* the MLP's reshape target is a Shape/Gather/Unsqueeze/Concat chain */
static void test_mlp_matches_pytorch(void)
{
    check_against_pytorch("tiny_mlp");
}

/* 1-D Conv, BatchNorm1d, MaxPool1d, AvgPool1d (ceil_mode, an explicit Pad)
 * and a global pool over [N, 8, 100]: the 2-D ops over [N, C, 1, L]. */
static void test_conv1d_matches_pytorch(void)
{
    check_against_pytorch("tiny_conv1d");
}

/* ConvTranspose2d (stride 2, output_padding, groups) and ConvTranspose1d. */
static void test_decoder_matches_pytorch(void)
{
    check_against_pytorch("tiny_decoder");
}

/* torchvision's VisionTransformer: class_token.expand(n, -1, -1) exports as
 * Equal and Where on constants (folded) and an Expand of the token, which
 * becomes one expand op whose gradient reaches the token in training; its
 * decomposed LayerNorms become layer norms. */
static void test_vit_matches_pytorch(void)
{
    check_against_pytorch("tiny_vit");
    tg_onnx_model *m = NULL;
    TG_CHECK_OK(tg_onnx_load(FIXTURES "tiny_vit.onnx", &m));
    if (!m)
        return;
    tg_graph *g = tg_graph_create();
    tg_graph_set_training(g, true);
    tg_onnx_build_config c = {.batch = 3};
    tg_onnx_outputs io;
    TG_CHECK_OK(tg_onnx_build(m, g, &c, &io));
    int expands = 0;
    tg_tensor *token = tg_graph_find(g, "class_token");
    for (int i = 0; i < tg_graph_tensor_count(g); i++) {
        const tg_tensor *t = tg_graph_tensor(g, i);
        if (t->op == TG_OP_EXPAND) {
            expands++;
            TG_CHECK(t->in[0] == token);
            TG_CHECK(tg_shape_equal(t->shape, tg_shape_of(3, (int64_t[]){3, 1, 32})));
        }
    }
    TG_CHECK(token && expands == 1);
    /* its three LayerNorms, exported decomposed at opset 13, are fused */
    TG_CHECK(count_op(g, TG_OP_NORM_APPLY) == 3 && count_op(g, TG_OP_POW) == 0);
    tg_tensor *labels = tg_input(g, "labels", TG_I32, tg_shape1(3));
    TG_CHECK_OK(tg_graph_backward(g, tg_cross_entropy(g, io.outputs[0], labels)));
    TG_CHECK(tg_tensor_grad(token) != NULL);
    tg_graph_destroy(g);
    tg_onnx_model_destroy(m);
}

/* Equal, Where, Expand and Tile on constants, folded at import, and Expand
 * and Tile on the input (make_fixtures.py's broadcast_folds, against
 * numpy). */
static void test_broadcast_folds_match_numpy(void)
{
    check_against_pytorch("broadcast_folds");
}

/* Transpose, broadcasting Add and 2-D Concat of integer constants, folded
 * at import as swin_t's export needs (make_fixtures.py's int_folds, against
 * numpy): a [3, 1] column plus a row of 3 is [3, 3], not 3 sums. */
static void test_int_folds_match_numpy(void)
{
    check_against_pytorch("int_folds");
}

/* nn.EmbeddingBag (mean) on a 2-D input with a dynamic batch: the
 * exporter's Loop over the bags is one op (onnx_loop.c), and its offsets
 * come from Range over ReduceProd(Shape(input)), folded at import
 * (make_fixtures.py's tiny_bag, against PyTorch). */
static void test_embedding_bag_matches_pytorch(void)
{
    check_against_pytorch("tiny_bag");
}

/* nn.GELU's five exported nodes become one gelu op; LayerNorm matches in
 * its fused (opset 17) and decomposed (opset 13) forms, and the decomposed
 * one is one layer norm too (onnx_pattern.c), not its nine nodes. */
static void check_gelu_form(const char *name, int form)
{
    check_against_pytorch(name);
    char path[512];
    snprintf(path, sizeof path, FIXTURES "%s.onnx", name);
    tg_onnx_model *m = NULL;
    TG_CHECK_OK(tg_onnx_load(path, &m));
    if (!m)
        return;
    tg_graph *g = tg_graph_create();
    tg_onnx_build_config c = {.batch = 3};
    tg_onnx_outputs io;
    TG_CHECK_OK(tg_onnx_build(m, g, &c, &io));
    int gelu = 0, erf = 0;
    for (int i = 0; i < tg_graph_tensor_count(g); i++) {
        const tg_tensor *t = tg_graph_tensor(g, i);
        gelu += t->op == TG_OP_GELU && tg_gelu_form(t) == form;
        erf += t->op == TG_OP_ERF;
    }
    TG_CHECK(gelu == 1 && erf == 0);
    TG_CHECK(count_op(g, TG_OP_TANH) == 0);
    TG_CHECK(count_op(g, TG_OP_NORM_APPLY) == 1);
    TG_CHECK(count_op(g, TG_OP_POW) == 0 && count_op(g, TG_OP_SQRT) == 0);
    tg_graph_destroy(g);
    tg_onnx_model_destroy(m);
}

static void check_gelu(const char *name)
{
    check_gelu_form(name, 0);
}

static void test_gelu_layer_norm_opset17(void)
{
    check_gelu("tiny_gelu_ln17");
}
static void test_gelu_layer_norm_decomposed(void)
{
    check_gelu("tiny_gelu_ln13");
}
/* gelu(approximate='tanh')'s nine exported nodes become one tanh-form gelu */
static void test_gelu_tanh_form(void)
{
    check_gelu_form("tiny_gelu_tanh", 1);
}

/* Parameters keep the state_dict names; ops sit in module scopes. */
static void test_names_and_scopes(void)
{
    tg_onnx_model *m = NULL;
    TG_CHECK_OK(tg_onnx_load(FIXTURES "tiny_cnn.onnx", &m));
    if (!m)
        return;
    tg_graph *g = tg_graph_create();
    tg_onnx_build_config c = {.batch = 4};
    tg_onnx_outputs io;
    TG_CHECK_OK(tg_onnx_build(m, g, &c, &io));
    TG_CHECK(io.n_inputs == 1 && tg_tensor_shape(io.inputs[0]).dim[0] == 4);
    tg_tensor *w = tg_graph_find(g, "layer1.0.conv1.weight");
    TG_CHECK(w && w->role == TG_ROLE_PARAM && tg_tensor_shape(w).dim[0] == 8);
    tg_tensor *stats = tg_graph_find(g, "layer2.0.bn2.running_stats");
    TG_CHECK(stats && stats->role == TG_ROLE_STATE && tg_tensor_shape(stats).dim[0] == 2);
    bool scoped = false;
    for (int i = 0; i < tg_graph_tensor_count(g); i++)
        scoped |= !strncmp(tg_tensor_name(tg_graph_tensor(g, i)), "layer2/0/conv1/", 15);
    TG_CHECK(scoped);
    TG_CHECK(tg_graph_find(g, "layer2.0.bn2.num_batches_tracked") == NULL);
    tg_graph_destroy(g);
    tg_onnx_model_destroy(m);
}

/* --model FILE.onnx: the zoo's ONNX source trains, and a checkpoint of it
 * carries the PyTorch names. */
static void test_train_through_model_source(void)
{
    const tg_model_spec *spec = NULL;
    TG_CHECK_OK(tg_model_open(FIXTURES "tiny_cnn.onnx", TG_LOSS_CROSS_ENTROPY, &spec));
    if (!spec)
        return;
    TG_CHECK(spec->channels == 1 && spec->height == 28 && spec->classes == 10);
    tg_optimizer opt = tg_optimizer_sgd(0.05f, 0.0f);
    tg_model_graph mg;
    TG_CHECK_OK(tg_model_graph_create(spec, 8, &opt, &mg));
    tg_session *s = NULL;
    if (mg.graph)
        TG_CHECK_OK(tg_session_create(mg.graph, NULL, &s));
    if (s) {
        float x[8 * 28 * 28], loss[2];
        int32_t y[8];
        for (int i = 0; i < 8 * 28 * 28; i++)
            x[i] = (float)((i * 7919) % 255) / 255.0f;
        for (int i = 0; i < 8; i++)
            y[i] = i % 10;
        /* batch norm trains with batch statistics and updates its running
         * statistics (PyTorch: new = 0.9 old + 0.1 batch) */
        tg_tensor *stats = tg_graph_find(mg.graph, "layer1.0.bn1.running_stats");
        float before[16], after[16];
        TG_CHECK(stats && tg_shape_numel(tg_tensor_shape(stats)) == 16);
        if (stats)
            TG_CHECK_OK(tg_session_read(s, stats, before, sizeof before));
        for (int step = 0; step < 2; step++) {
            TG_CHECK_OK(tg_session_write(s, mg.images, x, sizeof x));
            TG_CHECK_OK(tg_session_write(s, mg.labels, y, sizeof y));
            TG_CHECK_OK(tg_session_run(s));
            TG_CHECK_OK(tg_session_read(s, mg.loss, &loss[step], sizeof(float)));
        }
        /* a second step on the same batch has a lower loss */
        TG_CHECK(isfinite(loss[0]) && loss[1] < loss[0]);
        if (stats) {
            TG_CHECK_OK(tg_session_read(s, stats, after, sizeof after));
            int changed = 0;
            for (int i = 0; i < 16; i++)
                changed += after[i] != before[i];
            TG_CHECK(changed == 16);
        }
        char path[] = "/tmp/tg_onnx_ckpt_XXXXXX";
        int fd = mkstemp(path);
        TG_CHECK(fd >= 0); /* else the save below fails, naming the path */
        if (fd >= 0)
            close(fd);
        TG_CHECK_OK(tg_checkpoint_save(s, path, spec->name));
        FILE *f = fopen(path, "rb");
        char head[8192] = "";
        if (f) {
            size_t got = fread(head, 1, sizeof head - 1, f);
            head[got] = '\0';
            fclose(f);
        }
        TG_CHECK(strstr(head + 8, "\"layer1.0.conv1.weight\"") != NULL);
        TG_CHECK(strstr(head + 8, "\"fc.bias\"") != NULL);
        unlink(path);
    }
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
    tg_model_close(spec);
}

int main(void)
{
    TG_RUN(test_summary);
    TG_RUN(test_cnn_matches_pytorch);
    TG_RUN(test_mlp_matches_pytorch);
    TG_RUN(test_conv1d_matches_pytorch);
    TG_RUN(test_decoder_matches_pytorch);
    TG_RUN(test_vit_matches_pytorch);
    TG_RUN(test_broadcast_folds_match_numpy);
    TG_RUN(test_int_folds_match_numpy);
    TG_RUN(test_embedding_bag_matches_pytorch);
    TG_RUN(test_gelu_layer_norm_opset17);
    TG_RUN(test_gelu_layer_norm_decomposed);
    TG_RUN(test_gelu_tanh_form);
    TG_RUN(test_names_and_scopes);
    TG_RUN(test_train_through_model_source);
    return tg_test_finish();
}
