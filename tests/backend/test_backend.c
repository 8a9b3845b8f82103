/* tests/backend/test_backend.c - a backend apart from the ops
 * (backend/backend.h): its kernel table, supports_op sending a node to the
 * op's reference kernel, the engine's questions (scratch, layout, bf16)
 * answered for such a node as for an op with no fast kernel, the layout
 * and bf16 answers coming from the backend's kernels, not the ops, and
 * every target naming its backend. */
#include "backend/backend.h"
#include "tg_test.h"

#include "ops/conv.h"
#include "target/target.h"
#include "tilegraph/tilegraph.h"

#include <stdlib.h>
#include <string.h>

/* A backend whose one kernel, for every op, writes 42 everywhere and says
 * it takes oneDNN-like layouts, and whose supports_op refuses CONV2D: what
 * runs a node shows which kernel the dispatch chose. */
static void fill_42(const tg_kernel_args *a)
{
    for (int64_t i = 0; i < tg_numel(a->node); i++)
        ((float *)a->out)[i] = 42.0f;
}

static tg_op_layout own_layout(const tg_tensor *node, int n_threads, bool inference)
{
    (void)node, (void)n_threads, (void)inference;
    return TG_LAYOUT_OWN;
}

static tg_status fill_plan(const tg_tensor *node, const tg_plan_opts *opts, tg_kernel_plan *plan)
{
    (void)node, (void)opts, (void)plan;
    return TG_OK;
}

static void fill_plan_free(void *state)
{
    (void)state;
}

static const tg_op_planner fill_planner = {fill_plan, fill_plan_free};
static const tg_kernel_def fill_kernel = {
    .forward = fill_42, .layout = own_layout, .planner = &fill_planner};

static const tg_kernel_def *fill_any(tg_op op)
{
    (void)op;
    return &fill_kernel;
}

static bool no_conv(const tg_tensor *node)
{
    return node->op != TG_OP_CONV2D;
}

static const tg_backend refuse_conv = {
    .name = "no-conv", .kernel = fill_any, .supports_op = no_conv};

/* A backend whose kernels say nothing but how to run (no layout, no bf16
 * hook): it takes no operand blocked and reads none in bf16, whatever the
 * cpu backend's kernels for the same ops do. */
static const tg_kernel_def forward_only_kernel = {.forward = fill_42};

static const tg_kernel_def *forward_only_any(tg_op op)
{
    (void)op;
    return &forward_only_kernel;
}

static const tg_backend forward_only = {.name = "forward-only", .kernel = forward_only_any};

static void test_table(void)
{
    for (int op = 0; op < TG_OP_COUNT; op++) {
        const tg_kernel_def *k = tg_backend_cpu.kernel((tg_op)op);
        TG_CHECK(!k || k->forward); /* an entry runs something */
    }
    TG_CHECK(tg_backend_cpu.kernel(TG_OP_CONV2D) != NULL);
    TG_CHECK(tg_backend_cpu.kernel(TG_OP_CONV2D)->planner != NULL);
    /* an op defined with only its reference kernel has no entry (commit 1382ab1) */
    TG_CHECK(tg_backend_cpu.kernel(TG_OP_REVERSE_SEQUENCE) == NULL);
    TG_CHECK(tg_backend_cpu.kernel(TG_OP_COUNT) == NULL);
    TG_CHECK(tg_backend_host() == &tg_backend_cpu);
}

static void run(const tg_tensor *t, void *in0, void *in1, float *out)
{
    size_t bytes = tg_op_scratch(t, 1);
    void *scratch = bytes ? malloc(bytes) : NULL;
    tg_kernel_args a = {
        .node = t, .in = {in0, in1}, .out = out, .scratch = scratch, .scratch_bytes = bytes};
    tg_op_forward(&a);
    free(scratch);
}

/* x [1, 3, 5, 5] * w [4, 3, 3, 3], pad 1, then ReLU: under a backend
 * whose supports_op refuses the convolution, the convolution runs the op's
 * reference kernel (the cpu backend's values; NCHW, no bf16, the
 * reference's scratch) and ReLU the backend's own kernel. */
static void test_supports_op_falls_back_to_reference(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(1, 3, 5, 5));
    tg_tensor *w = tg_input(g, "w", TG_F32, tg_shape4(4, 3, 3, 3));
    tg_conv2d_params cp = {1, 1, 1, 1, 1, 1, 1}; /* stride 1, pad 1: 3x3 keeps the size */
    tg_tensor *y = tg_conv2d(g, x, w, NULL, cp);
    tg_tensor *r = tg_relu(g, y);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(tg_backend_kernel(&tg_backend_cpu, y) == tg_backend_cpu.kernel(TG_OP_CONV2D));
    TG_CHECK(tg_backend_kernel(&refuse_conv, y) == NULL);
    TG_CHECK(tg_backend_kernel(&refuse_conv, r) == &fill_kernel);

    float xf[75], wf[108], fast[100], slow[100], relu[100];
    for (int i = 0; i < 75; i++)
        xf[i] = (float)((i * 7) % 11) / 11.0f - 0.4f;
    for (int i = 0; i < 108; i++)
        wf[i] = (float)((i * 5) % 13) / 13.0f - 0.5f;
    run(y, xf, wf, fast); /* the cpu backend's kernel */
    TG_CHECK(tg_node_planner(y) == tg_backend_cpu.kernel(TG_OP_CONV2D)->planner);
    tg_backend_use_host(&refuse_conv);
    TG_CHECK(tg_op_layout_of(y, 1, true) == TG_LAYOUT_PLAIN);
    TG_CHECK(tg_node_planner(y) == NULL); /* no plan for a node run by reference */
    TG_CHECK(tg_node_planner(r) == &fill_planner);
    TG_CHECK(tg_op_layout_of(r, 1, true) == TG_LAYOUT_OWN);
    TG_CHECK(!tg_op_reads_bf16(y, false));
    TG_CHECK(tg_op_scratch(y, 1) >= (75 + 108 + 100) * sizeof(double));
    run(y, xf, wf, slow);
    run(r, slow, NULL, relu);
    tg_backend_use_host(NULL);
    TG_CHECK(tg_backend_host() == &tg_backend_cpu);
    for (int i = 0; i < 100; i++) {
        TG_CHECK_NEAR(slow[i], fast[i], 1e-5);
        TG_CHECK(relu[i] == 42.0f);
    }
    tg_graph_destroy(g);
}

/* A target is a backend plus a cost model: each names its backend. */
static void test_targets_name_their_backend(void)
{
    for (int i = 0; tg_target_at(i); i++)
        TG_CHECK(tg_target_at(i)->backend == &tg_backend_cpu);
}

/* Pooling's blocked layout and ReLU's and add's bf16 operands are the cpu
 * backend's kernels' answers, read from its table; another backend's
 * kernels, saying nothing, take NCHW and staged f32 (an element-wise node
 * still follows its operands' layout: its formula has no position in it).
 * They were flags on the ops' defs, and so the answers of every backend. */
static void test_kernel_questions_are_the_backends(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(2, 16, 4, 4));
    tg_tensor *mp = tg_maxpool2d(g, x, 2, 2, 0);
    tg_tensor *r = tg_relu(g, x);
    tg_tensor *sum = tg_add(g, x, r);
    TG_CHECK_OK(tg_graph_status(g));
    TG_CHECK(tg_op_layout_of(mp, 1, false) == TG_LAYOUT_TIED);
    TG_CHECK(tg_op_reads_bf16(r, false) && tg_elementwise_bf16_supported(r));
    TG_CHECK(tg_op_reads_bf16(sum, true) && tg_elementwise_bf16_supported(sum));
    tg_backend_use_host(&forward_only);
    TG_CHECK(tg_op_layout_of(mp, 1, false) == TG_LAYOUT_PLAIN);
    TG_CHECK(tg_op_layout_of(r, 1, false) == TG_LAYOUT_TIED);
    TG_CHECK(!tg_op_reads_bf16(r, false) && !tg_elementwise_bf16_supported(r));
    TG_CHECK(!tg_op_reads_bf16(sum, true) && !tg_elementwise_bf16_supported(sum));
    tg_backend_use_host(NULL);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_table);
    TG_RUN(test_supports_op_falls_back_to_reference);
    TG_RUN(test_kernel_questions_are_the_backends);
    TG_RUN(test_targets_name_their_backend);
    return tg_test_finish();
}
