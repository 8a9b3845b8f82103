/* tests/compile/test_layout.c - the blocked-layout pass (compile/layout.c):
 * which tensors of a ResNet it keeps in nChw16c, that the host never sees
 * them so, that the convolutions between them reorder nothing, and that
 * training with it equals training on NCHW within rounding.
 * TG_TEST_LABELS: isa */
#include "tg_test.h"

#include "compile/layout.h"
#include "compile/program.h"
#include "core/process.h"
#include "ops/conv.h"
#include "backend/cpu/dnnl_util.h"
#include "ops/op.h"
#include "tilegraph/models.h"
#include "tilegraph/session.h"

#include <stdlib.h>
#include <string.h>

/* ResNet-18 with the ImageNet stem on 3x32x32 images, batch 16 (with
 * fewer samples, batch norm over layer4's 1x1 maps divides by the spread
 * of a handful of values, and rounding differences grow step by step). */
enum { BATCH = 16, SIZE = 32 };

static void resnet(tg_model_graph *mg, bool train)
{
    const tg_model_spec *m = tg_model_find("resnet18");
    tg_model_input in = tg_model_default_input(m);
    in.height = in.width = SIZE;
    in.stem = TG_STEM_IMAGENET;
    tg_optimizer opt = tg_optimizer_sgd(0.01f, 0.0f);
    TG_CHECK_OK(tg_model_graph_create_ex(m, BATCH, train ? &opt : NULL, &in, mg));
}

static tg_program *compile_with(const tg_graph *g, const char *layout)
{
    setenv("TG_LAYOUT", layout, 1);
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", 1);
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(g, o, &p));
    tg_options_destroy(o);
    unsetenv("TG_LAYOUT");
    return p;
}

static bool is_conv(tg_op op)
{
    return op == TG_OP_CONV2D || op == TG_OP_CONV2D_BWD_DATA || op == TG_OP_CONV2D_BWD_WEIGHT;
}

static void test_resnet_layout(void)
{
    tg_model_graph mg;
    resnet(&mg, true);
    tg_program *p = compile_with(mg.graph, "blocked"), *q = compile_with(mg.graph, "plain");
    if (!p || !q)
        goto out;
    int tensors, ops;
    tg_layout_counts(p, &tensors, &ops);
    /* layer1..3's activations and their gradients, batch norm and pooling */
    TG_CHECK(tensors > 100);
    TG_CHECK(ops > 60);
    int plain_tensors, plain_ops;
    tg_layout_counts(q, &plain_tensors, &plain_ops);
    TG_CHECK(plain_tensors == 0 && plain_ops == 0);
    const tg_graph *g = mg.graph;
    int convs_blocked = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        bool blocked = p->layout[i] & TG_LAYOUT_BLOCKED;
        /* nothing the host reads or writes, nor weights or their gradients */
        if (t->role != TG_ROLE_ACTIVATION || (t->flags & TG_NODE_OUTPUT))
            TG_CHECK(!blocked);
        if (blocked)
            TG_CHECK(t->shape.ndim == 4 && t->shape.dim[1] % TG_CHANNEL_BLOCK == 0);
        /* a blocked tensor is read and written only by ops that can */
        if (blocked && !is_conv(t->op))
            TG_CHECK(p->layout[i] & TG_LAYOUT_OP_BLOCKED);
        if (is_conv(t->op) && strstr(p->plans[i].kernel, "nChw16c"))
            convs_blocked++;
    }
    /* every conv but the stem's reads or writes some blocked operand */
    TG_CHECK(convs_blocked >= 55);
    /* no reorder buffers for the blocked operands: less scratch, where
     * nChw16c is oneDNN's own layout (AVX-512; with AVX2 its kernels work
     * in 8-channel blocks and reorder either way) */
    if (strncmp(tg_dnnl_isa_name(), "avx512", 6) == 0)
        TG_CHECK(p->arena_bytes < q->arena_bytes);
out:
    tg_program_destroy(p);
    tg_program_destroy(q);
    tg_model_graph_destroy(&mg);
}

/* The math functions share ReLU's element-wise kernel, so between two
 * oneDNN convolutions they keep their operands blocked as ReLU does (their
 * defs say TG_OPF_ELEMENTWISE; the layout pass had a list that left them
 * out, and each reordered back to NCHW). runtime/verify checks their values
 * blocked against the reference kernels in its random graphs. */
static void test_math_functions_stay_blocked(void)
{
    tg_graph *g = tg_graph_create();
    tg_init u = {TG_INIT_UNIFORM, -0.1, 0.1};
    tg_conv2d_params cp = {1, 1, 1, 1, 1, 1, 1};
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(2, 64, 8, 8));
    tg_tensor *w1 = tg_param(g, "w1", tg_shape4(64, 64, 3, 3), u);
    tg_tensor *w2 = tg_param(g, "w2", tg_shape4(64, 64, 3, 3), u);
    tg_tensor *c1 = tg_conv2d(g, x, w1, NULL, cp);
    tg_tensor *fs[5];
    fs[0] = tg_erf(g, c1);
    fs[1] = tg_abs(g, fs[0]);
    fs[2] = tg_exp(g, fs[1]);
    fs[3] = tg_sqrt(g, fs[2]);
    fs[4] = tg_log(g, fs[3]);
    tg_tensor *y = tg_conv2d(g, fs[4], w2, NULL, cp);
    tg_tensor_mark_output(y);
    TG_CHECK_OK(tg_graph_status(g));
    tg_program *p = tg_graph_status(g) == TG_OK ? compile_with(g, "blocked") : NULL;
    /* (the layout pass blocks activations only between oneDNN convolutions) */
    bool dnnl = tg_conv_dnnl_chosen(c1, 1, false) && tg_conv_dnnl_chosen(y, 1, false);
    if (p && dnnl) {
        TG_CHECK(p->layout[c1->id] & TG_LAYOUT_BLOCKED);
        for (int k = 0; k < 5; k++) {
            if (!(p->layout[fs[k]->id] & TG_LAYOUT_BLOCKED))
                printf("  %s is not kept blocked\n", fs[k]->name);
            TG_CHECK((p->layout[fs[k]->id] & TG_LAYOUT_BLOCKED) &&
                     (p->layout[fs[k]->id] & TG_LAYOUT_OP_BLOCKED));
        }
    } else if (p) {
        printf("  (no oneDNN convolutions here: nothing to keep blocked)\n");
    }
    tg_program_destroy(p);
    tg_graph_destroy(g);
}

/* A training step blocked and NCHW from one initialisation: the same
 * sums in another order, so weights agree within rounding (and a kernel
 * reading the wrong layout would be off by far more). */
static void train(const char *layout, const char *precision, int threads, float **weights,
                  size_t *n_weights, float *loss)
{
    setenv("TG_LAYOUT", layout, 1);
    tg_model_graph mg;
    resnet(&mg, true);
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", threads);
    TG_CHECK_OK(tg_options_set(o, "precision", precision));
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(mg.graph, o, &s));
    unsetenv("TG_LAYOUT");
    size_t n = BATCH * 3 * SIZE * SIZE;
    float *img = malloc(n * sizeof *img);
    int32_t lab[BATCH];
    for (int k = 0; k < BATCH; k++)
        lab[k] = k % 10;
    for (size_t i = 0; i < n; i++)
        img[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    for (int k = 0; s && k < 1; k++) {
        TG_CHECK_OK(tg_session_write(s, mg.images, img, n * sizeof *img));
        TG_CHECK_OK(tg_session_write(s, mg.labels, lab, sizeof lab));
        TG_CHECK_OK(tg_session_run(s));
    }
    if (s)
        TG_CHECK_OK(tg_session_read(s, mg.loss, loss, sizeof *loss));
    size_t total = 0;
    const tg_graph *g = mg.graph;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->role == TG_ROLE_PARAM)
            total += (size_t)tg_numel(g->nodes[i]);
    *weights = malloc(total * sizeof **weights);
    *n_weights = total;
    size_t at = 0;
    for (int i = 0; s && i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->role != TG_ROLE_PARAM)
            continue;
        size_t k = (size_t)tg_numel(t);
        TG_CHECK_OK(tg_session_read(s, t, *weights + at, k * sizeof(float)));
        at += k;
    }
    free(img);
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

static double worst_difference(const float *a, const float *b, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (fabs((double)b[i]) + 1e-2);
        worst = d > worst ? d : worst;
    }
    return worst;
}

/* At 1 thread, and at 2 (each oneDNN convolution then runs over two halves
 * of the batch, each half a contiguous part of the blocked tensor). */
static void test_training_matches_nchw(void)
{
    for (int threads = 1; threads <= 2; threads++) {
        float *a = NULL, *b = NULL, la = 0, lb = 0;
        size_t na = 0, nb = 0;
        train("blocked", "32.32", threads, &a, &na, &la);
        train("plain", "32.32", threads, &b, &nb, &lb);
        TG_CHECK(na == nb && na > 1000000);
        if (na == nb)
            TG_CHECK(worst_difference(a, b, na) < 1e-3);
        TG_CHECK_NEAR(la, lb, 1e-3 * fabs(lb) + 1e-4);
        free(a);
        free(b);
    }
}

/* In bf16.bf16 the blocked batch-norm kernels read and write bf16 pieces
 * themselves and element-wise steps convert chunks: the same bits as
 * staging every operand whole through f32. */
static void test_bf16_native_matches_staged(void)
{
    float *a = NULL, *b = NULL, la = 0, lb = 0;
    size_t na = 0, nb = 0;
    train("blocked", "bf16.bf16", 1, &a, &na, &la);
    tg_process_set_whole_staging(1);
    train("blocked", "bf16.bf16", 1, &b, &nb, &lb);
    tg_process_set_whole_staging(0);
    TG_CHECK(na == nb && na > 0 && memcmp(a, b, na * sizeof *a) == 0);
    TG_CHECK(memcmp(&la, &lb, sizeof la) == 0);
    free(a);
    free(b);
}

int main(void)
{
    TG_RUN(test_resnet_layout);
    TG_RUN(test_math_functions_stay_blocked);
    TG_RUN(test_training_matches_nchw);
    TG_RUN(test_bf16_native_matches_staged);
    return tg_test_finish();
}
