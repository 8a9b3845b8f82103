/* tests/ops/test_reverse_sequence.c - REVERSE_SEQUENCE (ops/reverse_sequence.c),
 * the op defined with only its meaning and reference kernel: ONNX's
 * values, its gradient by finite differences, the engine's run of the
 * reference (tg_op_forward), and one verified training step
 * (tilegraph check's test) on every target in f32 and bf16. */
#include "backend/backend.h"
#include "tg_test.h"

#include "ops/reverse_sequence.h"
#include "tilegraph/tilegraph.h"
#include "tilegraph/verify.h"

#include <stdlib.h>
#include <string.h>

/* onnx/backend/test/case/node/reversesequence.py: time-major [4, 4],
 * batch_axis 1, time_axis 0, lens (4, 3, 2, 1); and batch-major, axes
 * swapped, lens (1, 2, 3, 4). */
static void test_onnx_values(void)
{
    static const double x[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
    static const double time_major[16] = {3, 6, 9, 12, 2, 5, 8, 13, 1, 4, 10, 14, 0, 7, 11, 15};
    static const double xb[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    static const double batch_major[16] = {0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12};
    for (int batch_major_case = 0; batch_major_case < 2; batch_major_case++) {
        tg_graph *g = tg_graph_create();
        tg_tensor *in = tg_input(g, "x", TG_F32, tg_shape2(4, 4));
        tg_tensor *lens = tg_input(g, "lens", TG_I32, tg_shape1(4));
        tg_tensor *y =
            tg_reverse_sequence(g, in, lens, batch_major_case ? 0 : 1, batch_major_case ? 1 : 0);
        TG_CHECK_OK(tg_graph_status(g));
        double l[4], out[16] = {0};
        for (int b = 0; b < 4; b++)
            l[b] = batch_major_case ? b + 1 : 4 - b;
        tg_ref_args a = {.node = y, .in = {(double *)(batch_major_case ? xb : x), l}, .out = out};
        tg_op_get(y->op)->reference(&a);
        const double *want = batch_major_case ? batch_major : time_major;
        for (int i = 0; i < 16; i++)
            TG_CHECK_NEAR(out[i], want[i], 0);
        /* the engine's kernel for an op with no fast kernel: the reference */
        float xf[16], yf[16];
        int32_t li[4];
        for (int i = 0; i < 16; i++)
            xf[i] = (float)(batch_major_case ? xb : x)[i];
        for (int b = 0; b < 4; b++)
            li[b] = (int32_t)l[b];
        size_t bytes = tg_op_scratch(y, 2);
        TG_CHECK(bytes >= (16 + 4 + 16) * sizeof(double));
        void *scratch = malloc(bytes);
        tg_kernel_args k = {
            .node = y, .in = {xf, li}, .out = yf, .scratch = scratch, .scratch_bytes = bytes};
        tg_op_forward(&k);
        for (int i = 0; i < 16; i++)
            TG_CHECK_NEAR(yf[i], want[i], 0);
        /* a length outside [0, T] is named before any kernel runs */
        char msg[256] = "";
        li[2] = 5;
        TG_CHECK(!tg_op_get(y->op)->check(&k, msg, sizeof msg));
        TG_CHECK(strstr(msg, "holds 5 at [2]") && strstr(msg, "[0, 4]"));
        free(scratch);
        tg_graph_destroy(g);
    }
}

static tg_tensor *build_rs(tg_graph *g, void *ctx)
{
    (void)ctx;
    tg_tensor *x = tg_param(g, "x", tg_shape3(5, 3, 2), (tg_init){TG_INIT_UNIFORM, -1, 1});
    tg_tensor *lens = tg_input(g, "lens", TG_I32, tg_shape1(3));
    return tg_reverse_sequence(g, x, lens, 1, 0);
}

static void test_gradient(void)
{
    /* lengths (7k + 3) mod 6: 3, 4, 5 */
    tg_gradcheck("reverse_sequence", build_rs, NULL, (tg_check_opts){.int_range = 6});
    /* forward and gradient through the engine's kernel (the reference run
     * as one), against the interpreter's */
    for (int threads = 1; threads <= 2; threads++)
        tg_check_kernels("reverse_sequence", build_rs, NULL, threads, 1e-6,
                         (tg_check_opts){.int_range = 6});
}

/* x [T=6, B=4, 3] (time-major) -> * w -> reverse_sequence -> linear -> MSE
 * against a target: one SGD step verified tensor by tensor against the
 * reference (tilegraph check), on a target at a precision. */
static void verified_step(const char *target, const char *precision)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape3(6, 4, 3));
    tg_tensor *lens = tg_input(g, "lens", TG_I32, tg_shape1(4));
    tg_tensor *target_y = tg_input(g, "target", TG_F32, tg_shape2(24, 2));
    tg_tensor *w = tg_param(g, "w", tg_shape3(6, 4, 3), (tg_init){TG_INIT_UNIFORM, -1, 1});
    tg_tensor *h = tg_reverse_sequence(g, tg_mul(g, x, w), lens, 1, 0);
    h = tg_nn_linear(g, tg_reshape(g, h, tg_shape2(24, 3)), "fc", 3, 2, true);
    tg_tensor *loss = tg_mse_loss(g, h, target_y);
    tg_tensor_mark_output(loss);
    TG_CHECK_OK(tg_graph_backward(g, loss));
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.0f);
    TG_CHECK_OK(tg_graph_add_optimizer(g, &opt));
    TG_CHECK_OK(tg_graph_status(g));
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "target", target));
    TG_CHECK_OK(tg_options_set(o, "precision", precision));
    tg_options_set_int(o, "randomSeed", 3);
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    if (s) {
        float xv[72], tv[48];
        int32_t lv[4] = {6, 0, 3, 1};
        for (int i = 0; i < 72; i++)
            xv[i] = (float)((i * 37) % 29) / 14.0f - 1.0f;
        for (int i = 0; i < 48; i++)
            tv[i] = (float)((i * 11) % 7) / 3.0f - 1.0f;
        TG_CHECK_OK(tg_session_write(s, x, xv, sizeof xv));
        TG_CHECK_OK(tg_session_write(s, lens, lv, sizeof lv));
        TG_CHECK_OK(tg_session_write(s, target_y, tv, sizeof tv));
        TG_CHECK_OK(tg_session_verify_next_run(s));
        TG_CHECK_OK(tg_session_run(s));
        const tg_verify_report *r = tg_session_verify_report(s);
        TG_CHECK(r && tg_verify_rows(r) > 0);
        int checked = 0;
        for (int i = 0; r && i < tg_verify_rows(r); i++) {
            const tg_verify_row *row = tg_verify_row_at(r, i);
            if (!strcmp(row->op, "reverse_sequence") && row->verdict == TG_VERIFY_OK)
                checked++;
        }
        TG_CHECK(checked == 2); /* the forward and its gradient */
        int first = r ? tg_verify_first_beyond(r) : 0;
        if (first >= 0 && r)
            printf("  %s %s: %s beyond tolerance\n", target, precision,
                   tg_verify_row_at(r, first)->name);
        TG_CHECK(first < 0);
        /* a second step runs unverified, and a bad length stops it by name */
        lv[3] = 7;
        TG_CHECK_OK(tg_session_write(s, lens, lv, sizeof lv));
        TG_CHECK(tg_session_run(s) != TG_OK);
        TG_CHECK(strstr(tg_error_message(), "holds 7 at [3]") != NULL);
    }
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_graph_destroy(g);
}

static void test_every_target_and_precision(void)
{
    static const char *targets[] = {"cpu", "mk2", "tiny"};
    static const char *precisions[] = {"32.32", "bf16.32", "bf16.bf16"};
    for (int t = 0; t < 3; t++)
        for (int p = 0; p < 3; p++)
            verified_step(targets[t], precisions[p]);
}

int main(void)
{
    TG_RUN(test_onnx_values);
    TG_RUN(test_gradient);
    TG_RUN(test_every_target_and_precision);
    return tg_test_finish();
}
