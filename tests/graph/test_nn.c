/* tests/graph/test_nn.c - the PyTorch-style layer helpers: parameter names,
 * shapes and initial value ranges, op names, invalid layers, and the
 * tutorial network built from them (gradients and fast kernels). */
#include "tg_test.h"

#include "graph/init.h"
#include "ops/conv.h"
#include "tilegraph/nn.h"

#include <stdlib.h>
#include <string.h>

static tg_tensor *find(tg_graph *g, const char *name)
{
    tg_tensor *t = tg_graph_find(g, name);
    if (!t)
        fprintf(stderr, "    no tensor named '%s'\n", name);
    return t;
}

/* Fill t from its initialiser and check every value lies in [lo, hi] and
 * that the values spread over most of the range (not all one value). */
static void check_values(const tg_tensor *t, double lo, double hi, bool constant)
{
    int64_t n = tg_numel(t);
    float *v = malloc((size_t)n * sizeof(float));
    tg_init_fill_f32(t, 42, v);
    float mn = v[0], mx = v[0];
    for (int64_t i = 0; i < n; i++) {
        TG_CHECK(v[i] >= lo && v[i] <= hi);
        mn = v[i] < mn ? v[i] : mn;
        mx = v[i] > mx ? v[i] : mx;
    }
    if (constant)
        TG_CHECK(mn == mx);
    else
        TG_CHECK(mx - mn > 0.5 * (hi - lo));
    free(v);
}

static void check_shape(const tg_tensor *t, tg_shape want)
{
    TG_CHECK(t && tg_shape_equal(t->shape, want));
}

static void test_conv_and_linear(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "image", TG_F32, tg_shape4(4, 1, 28, 28));
    tg_scope_push(g, "layer1");
    tg_tensor *y = tg_nn_conv2d(g, x, "conv", 1, 10, 5, 1, 0);
    tg_scope_pop(g);
    tg_tensor *h = tg_flatten(g, y, 1);
    tg_tensor *z = tg_nn_linear(g, h, "fc", 10 * 24 * 24, 7, true);
    tg_tensor *z2 = tg_nn_linear(g, z, "head", 7, 3, false);
    TG_CHECK_OK(tg_graph_status(g));

    tg_tensor *w = find(g, "layer1/conv/weight"), *b = find(g, "layer1/conv/bias");
    check_shape(w, tg_shape4(10, 1, 5, 5));
    check_shape(b, tg_shape1(10));
    TG_CHECK(y && strcmp(tg_tensor_name(y), "layer1/conv") == 0 && y->op == TG_OP_CONV2D);
    TG_CHECK(w && w->op == TG_OP_PARAM && w->init.kind == TG_INIT_FAN_IN_UNIFORM);
    TG_CHECK(w && w->init.a == 25.0 && b && b->init.a == 25.0);
    if (w && b) {
        check_values(w, -0.2, 0.2, false); /* 1 / sqrt(1 * 5 * 5) */
        check_values(b, -0.2, 0.2, false);
    }
    tg_tensor *fw = find(g, "fc/weight"), *fb = find(g, "fc/bias");
    check_shape(fw, tg_shape2(7, 5760));
    check_shape(fb, tg_shape1(7));
    TG_CHECK(z && strcmp(tg_tensor_name(z), "fc") == 0 && z->op == TG_OP_LINEAR);
    if (fw)
        check_values(fw, -1 / sqrt(5760.0), 1 / sqrt(5760.0), false);
    TG_CHECK(find(g, "head/weight") != NULL);
    TG_CHECK(tg_graph_find(g, "head/bias") == NULL);
    TG_CHECK(z2 && z2->n_in == 2);
    check_shape(z2, tg_shape2(4, 3));
    tg_graph_destroy(g);
}

static void test_conv_ex(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(2, 8, 9, 9));
    tg_nn_conv2d_config c = {8, 12, 3, 2, 2, 2, 4, false};
    tg_tensor *y = tg_nn_conv2d_ex(g, x, "grouped", &c);
    TG_CHECK_OK(tg_graph_status(g));
    tg_tensor *w = find(g, "grouped/weight");
    check_shape(w, tg_shape4(12, 2, 3, 3));
    TG_CHECK(tg_graph_find(g, "grouped/bias") == NULL);
    TG_CHECK(w && w->init.a == 18.0); /* fan_in = 8 / 4 * 3 * 3 */
    /* (9 + 2*2 - 2*(3-1) - 1) / 2 + 1 = 5 */
    check_shape(y, tg_shape4(2, 12, 5, 5));
    TG_CHECK(y && tg_conv_groups(y) == 4 && tg_conv_dilation_h(y) == 2 && tg_conv_stride_h(y) == 2);
    tg_graph_destroy(g);
}

static void test_norm_layers(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(4, 6, 5, 5));
    tg_scope_push(g, "block");
    tg_tensor *bn = tg_nn_batch_norm2d(g, x, "bn", 6);
    tg_tensor *gn = tg_nn_group_norm(g, bn, "gn", 3, 6);
    tg_scope_pop(g);
    tg_tensor *t = tg_input(g, "tokens", TG_F32, tg_shape3(2, 7, 16));
    tg_tensor *ln = tg_nn_layer_norm(g, t, "ln", 16);
    TG_CHECK_OK(tg_graph_status(g));

    tg_tensor *bw = find(g, "block/bn/weight"), *bb = find(g, "block/bn/bias");
    tg_tensor *rs = find(g, "block/bn/running_stats");
    check_shape(bw, tg_shape1(6));
    check_shape(bb, tg_shape1(6));
    check_shape(rs, tg_shape2(2, 6));
    TG_CHECK(rs && rs->op == TG_OP_STATE && rs->role == TG_ROLE_STATE);
    if (bw && bb && rs) {
        check_values(bw, 1, 1, true);
        check_values(bb, 0, 0, true);
        float v[12];
        tg_init_fill_f32(rs, 1, v);
        for (int i = 0; i < 6; i++) {
            TG_CHECK(v[i] == 0.0f);     /* running mean */
            TG_CHECK(v[6 + i] == 1.0f); /* running variance */
        }
    }
    TG_CHECK(bn && strcmp(tg_tensor_name(bn), "block/bn") == 0 && bn->op == TG_OP_NORM_APPLY);
    TG_CHECK(gn && strcmp(tg_tensor_name(gn), "block/gn") == 0);
    check_shape(find(g, "block/gn/weight"), tg_shape1(6));
    TG_CHECK(ln && strcmp(tg_tensor_name(ln), "ln") == 0);
    check_shape(find(g, "ln/weight"), tg_shape1(16));
    check_shape(find(g, "ln/bias"), tg_shape1(16));
    check_shape(ln, tg_shape3(2, 7, 16));
    /* training mode: the batch norm updates its running statistics */
    int updates = 0;
    for (int i = 0; i < tg_graph_tensor_count(g); i++) {
        tg_tensor *n = tg_graph_tensor(g, i);
        if (n->op == TG_OP_RUNNING_STATS_UPDATE) {
            updates++;
            TG_CHECK(n->in[0] == rs);
        }
    }
    TG_CHECK(updates == 1);
    tg_graph_destroy(g);
}

static void test_invalid_layers(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(4, 8));
    TG_CHECK(tg_nn_linear(g, x, "fc", 0, 5, true) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "fc") != NULL);
    tg_graph_destroy(g);

    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape2(4, 8));
    TG_CHECK(tg_nn_linear(g, x, "fc", 9, 5, true) == NULL); /* 9 inputs declared, x has 8 */
    TG_CHECK(strstr(tg_graph_error(g), "fc/linear") != NULL && strstr(tg_graph_error(g), "[4, 8]"));
    tg_graph_destroy(g);

    g = tg_graph_create();
    x = tg_input(g, "x", TG_F32, tg_shape4(1, 6, 8, 8));
    tg_nn_conv2d_config c = {6, 8, 3, 1, 0, 1, 4, true};
    TG_CHECK(tg_nn_conv2d_ex(g, x, "bad", &c) == NULL);
    TG_CHECK(strstr(tg_graph_error(g), "bad") != NULL);
    tg_graph_destroy(g);
}

/* The tutorial network (tiny batch): every layer type from the helpers,
 * through autodiff, in double precision and through the fast kernels. */
static tg_tensor *build_tutorial(tg_graph *g, void *ctx)
{
    int batch = *(int *)ctx;
    tg_tensor *x = tg_input(g, "image", TG_F32, tg_shape4(batch, 1, 28, 28));
    tg_scope_push(g, "layer1");
    tg_tensor *h = tg_nn_conv2d(g, x, "conv", 1, 10, 5, 1, 0);
    h = tg_relu(g, tg_maxpool2d(g, h, 2, 2, 0));
    tg_scope_pop(g);
    tg_scope_push(g, "layer2");
    h = tg_nn_conv2d(g, h, "conv", 10, 20, 5, 1, 0);
    h = tg_relu(g, tg_maxpool2d(g, h, 2, 2, 0));
    tg_scope_pop(g);
    h = tg_flatten(g, h, 1);
    h = tg_relu(g, tg_nn_linear(g, h, "layer3", 320, 256, true));
    return tg_nn_linear(g, h, "layer4", 256, 10, true);
}

static void test_tutorial_network(void)
{
    int batch = 3;
    tg_check_opts o = {0};
    o.max_elems = 6;
    o.tol = 1e-5;
    TG_CHECK(tg_gradcheck("tutorial network", build_tutorial, &batch, o));
    for (int t = 1; t <= 2; t++)
        TG_CHECK(tg_check_kernels("tutorial network", build_tutorial, &batch, t, 2e-4, o));
}

int main(void)
{
    TG_RUN(test_conv_and_linear);
    TG_RUN(test_conv_ex);
    TG_RUN(test_norm_layers);
    TG_RUN(test_invalid_layers);
    TG_RUN(test_tutorial_network);
    return tg_test_finish();
}
