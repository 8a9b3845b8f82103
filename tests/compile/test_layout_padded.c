/* tests/compile/test_layout_padded.c - an inference program keeps channel
 * counts that are no whole 16-channel blocks blocked, padded to the next
 * block (compile/layout.c, tg_layout_padded): a mobilenet_v3-shaped block
 * on 24 channels (1x1 expand, depthwise, squeeze-excite with its global
 * pool and per-channel Mul, 1x1 project with a residual add) keeps every
 * 24-channel value blocked in a buffer of the padded size, its values equal
 * the plain program's (f32: within rounding; bf16: within bf16's), at 1 and
 * 2 threads and batch 1 and 2; an element-wise op that writes a non-zero
 * padding (hard sigmoid of the zeros) leaves the real channels alone; the
 * checker reads the padded values and finds a fault put into one; and an
 * executable file keeps the padded buffers and gives the same bits, and is
 * refused where the layout pass would not pad (TG_LAYOUT=plain).
 * TG_TEST_LABELS: isa threads */
#include "tg_fuse_test.h"

#include "compile/layout.h"
#include "compile/program.h"
#include "core/alloc.h"
#include "core/rng.h"
#include "graph/op_rules.h"
#include "runtime/verify.h"

#include <stdlib.h>
#include <unistd.h>

enum { C_IN = 16, C = 24, SQ = 16, HW = 10 };

typedef struct block_net {
    tg_graph *g;
    tg_tensor *x, *y, *expand, *dw, *mul, *project;
    int64_t out_numel;
} block_net;

static tg_tensor *weight(tg_graph *g, const char *name, tg_shape s)
{
    tg_init u = {TG_INIT_UNIFORM, -0.4, 0.4};
    return tg_param(g, name, s, u);
}

/* x -> 1x1 (16 -> 24) + ReLU -> depthwise 3x3 -> [global pool -> 1x1 (24
 * -> 16) + ReLU -> 1x1 (16 -> 24) + hard sigmoid] scale; the depthwise
 * output also through an unfused hard sigmoid (its convolution has two
 * readers), times the scale, plus that hard sigmoid again (padding 0.5 into
 * the next convolution) -> 1x1 (24 -> 24) + residual (the expand's output)
 * -> 1x1 (24 -> 16) = y. */
static block_net build(int batch)
{
    block_net n = {.g = tg_graph_create()};
    tg_graph *g = n.g;
    tg_conv2d_params one = {1, 1, 0, 0, 1, 1, 1}, dw = {1, 1, 1, 1, 1, 1, C};
    n.x = tg_input(g, "x", TG_F32, tg_shape4(batch, C_IN, HW, HW));
    n.expand = tg_conv2d(g, n.x, weight(g, "w_expand", tg_shape4(C, C_IN, 1, 1)),
                         weight(g, "b_expand", tg_shape1(C)), one);
    tg_tensor *h = tg_relu(g, n.expand);
    n.dw = tg_conv2d(g, h, weight(g, "w_dw", tg_shape4(C, 1, 3, 3)), NULL, dw);
    tg_tensor *s = tg_global_avgpool(g, n.dw);
    s = tg_relu(g, tg_conv2d(g, s, weight(g, "w_fc1", tg_shape4(SQ, C, 1, 1)),
                             weight(g, "b_fc1", tg_shape1(SQ)), one));
    s = tg_hard_sigmoid(g,
                        tg_conv2d(g, s, weight(g, "w_fc2", tg_shape4(C, SQ, 1, 1)),
                                  weight(g, "b_fc2", tg_shape1(C)), one),
                        1.0f / 6, 0.5f);
    tg_tensor *gate = tg_hard_sigmoid(g, n.dw, 0.2f, 0.5f);
    n.mul = tg_mul(g, gate, s);
    tg_tensor *m = tg_add(g, n.mul, gate);
    n.project = tg_conv2d(g, m, weight(g, "w_project", tg_shape4(C, C, 1, 1)), NULL, one);
    tg_tensor *r = tg_add(g, n.project, h);
    n.y = tg_conv2d(g, r, weight(g, "w_out", tg_shape4(C_IN, C, 1, 1)), NULL, one);
    tg_tensor_mark_output(n.y);
    TG_CHECK_OK(tg_graph_status(g));
    n.out_numel = tg_numel(n.y);
    return n;
}

static tg_session *open_session(block_net *n, int threads, const char *layout,
                                const char *precision, const char *exe)
{
    if (layout)
        setenv("TG_LAYOUT", layout, 1);
    tg_session *s = tg_fuse_test_open_with(n->g, threads, true, precision, exe);
    unsetenv("TG_LAYOUT");
    return s;
}

static void run(tg_session *s, const block_net *n, float *out)
{
    tg_rng r;
    tg_rng_seed(&r, 5);
    tg_fuse_test_run_x(s, &r, n->x, n->y, out);
}

/* Every 4-D 24-channel value a step computes is kept blocked and padded,
 * in a buffer of 32 channels; returns how many. */
static int padded_values(tg_session *s, const char *label)
{
    const tg_program *p = tg_session_program(s);
    int k = 0;
    for (int i = 0; i < p->graph->n_nodes; i++) {
        const tg_tensor *t = p->graph->nodes[i];
        if (t->shape.ndim != 4 || t->shape.dim[1] != C || t->role != TG_ROLE_ACTIVATION)
            continue;
        if (!tg_layout_padded(p, t)) {
            tg_test_fail(__FILE__, __LINE__, "%s: '%s' (%s) is not kept padded", label, t->name,
                         tg_op_name(t->op));
            continue;
        }
        int b = p->home[i];
        size_t want = (size_t)(tg_numel(t) / C * 32) * tg_dtype_size(p->buffers[b].dtype);
        if (p->buffers[b].bytes != want)
            tg_test_fail(__FILE__, __LINE__, "%s: '%s' has %zu bytes, padded %zu", label, t->name,
                         p->buffers[b].bytes, want);
        k++;
    }
    return k;
}

static void test_padded_block_matches_plain(void)
{
    const char *precisions[] = {NULL, "32.bf16"};
    for (int batch = 1; batch <= 2; batch++)
        for (int threads = 1; threads <= 2; threads++)
            for (int pr = 0; pr < 2; pr++) {
                char label[64];
                snprintf(label, sizeof label, "batch %d, %d threads, %s", batch, threads,
                         precisions[pr] ? precisions[pr] : "f32");
                block_net n = build(batch);
                tg_session *s = open_session(&n, threads, NULL, precisions[pr], NULL);
                tg_session *q = open_session(&n, threads, "plain", precisions[pr], NULL);
                TG_CHECK(s && q);
                if (s && q) {
                    /* expand, its ReLU, the depthwise output, the gate, the
                     * Mul, the add, the project and its residual add, less
                     * the fused ones */
                    TG_CHECK(padded_values(s, label) >= 5);
                    size_t bytes = (size_t)n.out_numel * sizeof(float);
                    float *a = tg_malloc(bytes), *b = tg_malloc(bytes);
                    run(s, &n, a);
                    run(q, &n, b);
                    double d = tg_fuse_test_difference(a, b, n.out_numel);
                    if (d > (precisions[pr] ? 2e-2 : 1e-5))
                        tg_test_fail(__FILE__, __LINE__, "%s: padded against plain %.3g", label, d);
                    tg_free(a), tg_free(b);
                }
                tg_session_destroy(s), tg_session_destroy(q);
                tg_graph_destroy(n.g);
            }
}

/* The checker compares the padded values (less their padding) with the
 * reference: all within tolerance, and a fault put into the Mul's found. */
static void test_checker_reads_padded(void)
{
    for (int fault = 0; fault <= 1; fault++) {
        block_net n = build(2);
        tg_session *s = open_session(&n, 1, NULL, NULL, NULL);
        TG_CHECK(s != NULL);
        if (!s) {
            tg_graph_destroy(n.g);
            continue;
        }
        float *out = tg_malloc((size_t)n.out_numel * sizeof(float));
        TG_CHECK_OK(tg_session_verify_next_run(s));
        tg_verify_test_fault_node = fault ? tg_tensor_id(n.mul) : -1;
        tg_verify_test_fault_from = 0;
        run(s, &n, out);
        tg_verify_test_fault_node = -1;
        const tg_verify_report *r = tg_session_verify_report(s);
        int beyond = 0, ok = 0;
        for (int i = 0; r && i < tg_verify_rows(r); i++) {
            const tg_verify_row *row = tg_verify_row_at(r, i);
            beyond += row->verdict == TG_VERIFY_BEYOND;
            ok += row->verdict == TG_VERIFY_OK;
            if (row->verdict == TG_VERIFY_SKIPPED)
                tg_test_fail(__FILE__, __LINE__, "%s skipped: %s", row->name, row->note);
        }
        TG_CHECK(ok >= 5);
        if (fault ? beyond == 0 : beyond != 0)
            tg_test_fail(__FILE__, __LINE__, "fault %d: %d rows beyond", fault, beyond);
        tg_free(out);
        tg_session_destroy(s);
        tg_graph_destroy(n.g);
    }
}

static void test_executable_file_keeps_padding(void)
{
    char exe[64];
    snprintf(exe, sizeof exe, "/tmp/test_layout_padded.%d.tgx", (int)getpid());
    unlink(exe);
    block_net n = build(2);
    tg_session *fresh = open_session(&n, 1, NULL, NULL, NULL);
    tg_session *written = open_session(&n, 1, NULL, NULL, exe);
    tg_session *loaded = open_session(&n, 1, NULL, NULL, exe);
    TG_CHECK(fresh && written && loaded);
    if (fresh && written && loaded) {
        if (!strstr(tg_session_cache(loaded), "hit"))
            tg_test_fail(__FILE__, __LINE__, "not loaded: %s", tg_session_cache(loaded));
        TG_CHECK(padded_values(loaded, "loaded") >= 5);
        size_t bytes = (size_t)n.out_numel * sizeof(float);
        float *a = tg_malloc(bytes), *b = tg_malloc(bytes);
        run(fresh, &n, a);
        run(loaded, &n, b);
        TG_CHECK(memcmp(a, b, bytes) == 0);
        tg_free(a), tg_free(b);
    }
    tg_session_destroy(fresh), tg_session_destroy(written), tg_session_destroy(loaded);
    tg_graph_destroy(n.g);
    unlink(exe);
}

/* x -> 1x1 (16 -> 24) + ReLU -> 1x1 (24 -> 16) = y: fused alike in both
 * layouts. Loaded with the layout pass off (TG_LAYOUT=plain) the file is
 * refused as stale and compiled again, the values the same. (The padded
 * buffer's size, tg_layout_size_buffers, says so, naming the value; so
 * does the plain convolutions' reorder scratch, which the loader checks
 * too: without the size check this still passes.) */
static void test_stale_padding_refused(void)
{
    char exe[64];
    snprintf(exe, sizeof exe, "/tmp/test_layout_padded_stale.%d.tgx", (int)getpid());
    unlink(exe);
    block_net n = {.g = tg_graph_create()};
    tg_conv2d_params one = {1, 1, 0, 0, 1, 1, 1};
    n.x = tg_input(n.g, "x", TG_F32, tg_shape4(2, C_IN, HW, HW));
    tg_tensor *h =
        tg_relu(n.g, tg_conv2d(n.g, n.x, weight(n.g, "w1", tg_shape4(C, C_IN, 1, 1)), NULL, one));
    n.y = tg_conv2d(n.g, h, weight(n.g, "w2", tg_shape4(C_IN, C, 1, 1)), NULL, one);
    tg_tensor_mark_output(n.y);
    TG_CHECK_OK(tg_graph_status(n.g));
    n.out_numel = tg_numel(n.y);
    tg_session *written = open_session(&n, 1, NULL, NULL, exe);
    TG_CHECK(written && padded_values(written, "written") >= 1);
    size_t bytes = (size_t)n.out_numel * sizeof(float);
    float *a = tg_malloc(bytes), *b = tg_malloc(bytes);
    if (written)
        run(written, &n, a);
    tg_session *plain = open_session(&n, 1, "plain", NULL, exe);
    TG_CHECK(plain != NULL);
    if (plain) {
        if (!strstr(tg_session_cache(plain), "unusable"))
            tg_test_fail(__FILE__, __LINE__, "plain over a padded file: %s",
                         tg_session_cache(plain));
        run(plain, &n, b);
        TG_CHECK(tg_fuse_test_difference(a, b, n.out_numel) < 1e-5);
    }
    tg_free(a), tg_free(b);
    tg_session_destroy(written), tg_session_destroy(plain);
    tg_graph_destroy(n.g);
    unlink(exe);
}

int main(void)
{
    TG_RUN(test_padded_block_matches_plain);
    TG_RUN(test_checker_reads_padded);
    TG_RUN(test_executable_file_keeps_padding);
    TG_RUN(test_stale_padding_refused);
    return tg_test_finish();
}
