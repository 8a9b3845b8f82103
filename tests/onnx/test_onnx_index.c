/* tests/onnx/test_onnx_index.c - src/onnx/onnx_index.c's GatherElements with
 * indices given at run time (torch.gather of a model input), through the
 * engine: values and the gradient's rows against hand-computed ones,
 * negative indices wrapped along the axis, and an index outside the axis
 * refused by the run naming the indices, the value and its position. (It
 * once read the next row's element: [5, 7, -6] on rows of 5 gave elements
 * of the row below, and the gradient landed there.) And a bool model input,
 * a mask, taken as i32 0/1.
 *
 * TG_TEST_LABELS: onnx
 */
#include "onnx_node_model.h"

#include "tilegraph/optim.h"

#include <string.h>

enum { ROWS = 2, COLS = 5, PICK = 3 };

typedef struct {
    tg_graph *g;
    tg_session *s;
    tg_tensor *data, *idx, *out;
    bool train;
} ge_model;

/* GatherElements(data [2, 5], idx [2, 3], axis 1); with `train`, data is a
 * parameter (1, 2, ..., 10) and the loss sum(out * out) / 2 is minimised by
 * one SGD step of rate 1, so data becomes data - out scattered back. */
static void ge_open(ge_model *r, bool train)
{
    onnx_node nd = {.op_type = "GatherElements",
                    .opset = 13,
                    .n_outputs = 1,
                    .in = {F32("data", 2, ROWS, COLS), I64_IN("idx", 2, ROWS, PICK)},
                    .attr = {INT("axis", 1)}};
    tg_onnx_model *m = onnx_node_model(&nd);
    r->g = tg_graph_create();
    r->train = train;
    float init[ROWS * COLS];
    for (int k = 0; k < ROWS * COLS; k++)
        init[k] = (float)(k + 1);
    tg_tensor *param = tg_param_data(r->g, "data", tg_shape2(ROWS, COLS), init);
    tg_onnx_build_config c = {.batch = 1, .inputs = train ? &param : NULL, .n_inputs = train};
    tg_onnx_outputs io = {0};
    TG_CHECK(m != NULL);
    TG_CHECK_OK(m ? tg_onnx_build(m, r->g, &c, &io) : TG_ERR_INVALID_ARG);
    tg_onnx_model_destroy(m);
    r->data = io.inputs[0];
    r->idx = io.inputs[1];
    r->out = io.outputs[0];
    TG_CHECK(r->idx && tg_tensor_dtype(r->idx) == TG_I32);
    if (train) {
        tg_tensor *zero = tg_constant(r->g, tg_shape2(ROWS, PICK), 0.0f);
        tg_tensor *loss = tg_scale(r->g, tg_mse_loss(r->g, r->out, zero), ROWS * PICK / 2.0f, 0);
        tg_tensor_mark_output(loss);
        TG_CHECK_OK(tg_graph_backward(r->g, loss));
        tg_optimizer opt = tg_optimizer_sgd(1.0f, 0.0f);
        TG_CHECK_OK(tg_graph_add_optimizer(r->g, &opt));
    }
    TG_CHECK_OK(tg_graph_status(r->g));
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_session_create(r->g, o, &r->s));
    tg_options_destroy(o);
}

static void ge_close(ge_model *r)
{
    tg_session_destroy(r->s);
    tg_graph_destroy(r->g);
}

/* Run once with these indices; the run's status. */
static tg_status ge_run(ge_model *r, const int32_t *idx)
{
    if (!r->s)
        return TG_ERR_INVALID_ARG;
    if (!r->train) {
        float data[ROWS * COLS];
        for (int k = 0; k < ROWS * COLS; k++)
            data[k] = (float)(k + 1);
        TG_CHECK_OK(tg_session_write(r->s, r->data, data, sizeof data));
    }
    TG_CHECK_OK(tg_session_write(r->s, r->idx, idx, ROWS * PICK * sizeof *idx));
    return tg_session_run(r->s);
}

static void expect_refused(ge_model *r, const int32_t *idx, const char *part)
{
    tg_status st = ge_run(r, idx);
    const char *msg = tg_error_message();
    TG_CHECK(st != TG_OK);
    if (st == TG_OK || !strstr(msg, part))
        tg_test_fail(__FILE__, __LINE__, "expected a refusal with \"%s\", got \"%s\"", part,
                     st == TG_OK ? "(the run succeeded)" : msg);
}

static void test_values_and_refusals(void)
{
    ge_model r = {0};
    ge_open(&r, false);
    static const int32_t good[ROWS * PICK] = {4, -1, 0, -5, 2, 4}; /* -1 = 4, -5 = 0 */
    TG_CHECK_OK(ge_run(&r, good));
    float out[ROWS * PICK] = {0};
    TG_CHECK_OK(tg_session_read(r.s, r.out, out, sizeof out));
    static const float want[ROWS * PICK] = {5, 5, 1, 6, 8, 10};
    for (int k = 0; k < ROWS * PICK; k++)
        TG_CHECK_NEAR(out[k], want[k], 0);
    static const int32_t past[ROWS * PICK] = {5, 7, -6, 0, 0, 0};
    expect_refused(&r, past, "indices 'idx' hold 5 at [0, 0]");
    printf("    refused: %s\n", tg_error_message());
    expect_refused(&r, past, "must be in [-5, 5)");
    static const int32_t below[ROWS * PICK] = {0, 1, 2, 3, -6, 0};
    expect_refused(&r, below, "hold -6 at [1, 1]");
    expect_refused(&r, below, "GatherElements");
    TG_CHECK_OK(ge_run(&r, good)); /* the session runs again after a refusal */
    ge_close(&r);
}

/* The gradient of sum(out^2)/2 is out, scattered back into the rows the
 * indices name (wrapped): one SGD step of rate 1 subtracts it there. */
static void test_gradient_rows(void)
{
    ge_model r = {0};
    ge_open(&r, true);
    static const int32_t idx[ROWS * PICK] = {4, -1, 0, -5, 2, 4};
    TG_CHECK_OK(ge_run(&r, idx));
    float data[ROWS * COLS] = {0};
    TG_CHECK_OK(r.s ? tg_session_read(r.s, r.data, data, sizeof data) : TG_ERR_INVALID_ARG);
    /* row 0: column 4 (5) taken twice -> 5 - 10, column 0 (1) once -> 0;
     * row 1: column 0 (6) -> 0, column 2 (8) -> 0, column 4 (10) -> 0 */
    static const float want[ROWS * COLS] = {0, 2, 3, 4, -5, 0, 7, 0, 9, 0};
    for (int k = 0; k < ROWS * COLS; k++)
        TG_CHECK_NEAR(data[k], want[k], 1e-6);
    static const int32_t bad[ROWS * PICK] = {0, 0, 0, 0, 0, 5};
    expect_refused(&r, bad, "hold 5 at [1, 2]");
    ge_close(&r);
}

/* A bool model input (nn.MultiheadAttention's key_padding_mask) is an i32
 * 0/1 tensor in the graph: Where(mask, x, -x) picks by it. (It was refused
 * at import: "float, double, float16, integer and uint8 inputs are
 * taken".) */
static void test_bool_input(void)
{
    onnx_node nd = {.op_type = "Where",
                    .opset = 13,
                    .n_outputs = 1,
                    .in = {BOOL_IN("mask", 2, 2, 3), F32("x", 2, 2, 3), F32("y", 2, 2, 3)}};
    tg_onnx_model *m = onnx_node_model(&nd);
    tg_graph *g = tg_graph_create();
    tg_onnx_build_config c = {.batch = 1};
    tg_onnx_outputs io = {0};
    TG_CHECK_OK(m ? tg_onnx_build(m, g, &c, &io) : TG_ERR_INVALID_ARG);
    tg_onnx_model_destroy(m);
    tg_session *s = NULL;
    if (io.n_inputs == 3 && tg_tensor_dtype(io.inputs[0]) == TG_I32) {
        tg_options *o = tg_options_create();
        TG_CHECK_OK(tg_session_create(g, o, &s));
        tg_options_destroy(o);
    } else {
        tg_test_fail(__FILE__, __LINE__, "the bool input is not an i32 graph input");
    }
    const int32_t mask[6] = {1, 0, 0, 1, 1, 0};
    const float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {-1, -2, -3, -4, -5, -6};
    float out[6] = {0};
    if (s) {
        TG_CHECK_OK(tg_session_write(s, io.inputs[0], mask, sizeof mask));
        TG_CHECK_OK(tg_session_write(s, io.inputs[1], x, sizeof x));
        TG_CHECK_OK(tg_session_write(s, io.inputs[2], y, sizeof y));
        TG_CHECK_OK(tg_session_run(s));
        TG_CHECK_OK(tg_session_read(s, io.outputs[0], out, sizeof out));
    }
    for (int k = 0; k < 6; k++)
        TG_CHECK_NEAR(out[k], mask[k] ? x[k] : y[k], 0);
    tg_session_destroy(s);
    tg_graph_destroy(g);
}

int main(void)
{
    TG_RUN(test_values_and_refusals);
    TG_RUN(test_gradient_rows);
    TG_RUN(test_bool_input);
    return tg_test_finish();
}
