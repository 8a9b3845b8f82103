/* tests/onnx/test_onnx_rnn.c - the unrolled recurrent ops (src/onnx/onnx_rnn.c)
 * against finite differences, and their refusals.
 *
 * The fixtures (tests/onnx/fixtures/rnn_*.onnx, made by
 * make_rnn_fixtures.py) are one LSTM, GRU or RNN node each, with W, R, B,
 * peepholes and initial states as initializers, so they become parameters
 * and the double-precision gradient check probes every one of them through
 * backpropagation through time: bidirectional LSTM with peepholes and
 * initial states, LSTM from a zero state without biases, reverse GRU in
 * layout 1, bidirectional GRU with linear_before_reset, a ReLU RNN. ONNX's
 * own cases (the conformance test) check the forward values.
 */
#include "tg_test.h"

#include "tilegraph/onnx.h"

#include "core/error.h"

#include <stdio.h>
#include <string.h>

#define FIXTURES TG_SOURCE_DIR "/tests/onnx/fixtures/"

/* All of the model's outputs, flattened and joined: the gradient check
 * weighs every element of Y, Y_h and Y_c. */
static tg_tensor *build_model(tg_graph *g, void *ctx)
{
    char path[512];
    snprintf(path, sizeof path, FIXTURES "%s.onnx", (const char *)ctx);
    tg_onnx_model *m = NULL;
    if (tg_onnx_load(path, &m) != TG_OK) {
        tg_test_fail(__FILE__, __LINE__, "%s", tg_error_message());
        return NULL;
    }
    tg_onnx_outputs io;
    tg_status s = tg_onnx_build(m, g, NULL, &io);
    tg_onnx_model_destroy(m);
    if (s != TG_OK) {
        tg_test_fail(__FILE__, __LINE__, "%s", tg_error_message());
        return NULL;
    }
    tg_tensor *flat[TG_ONNX_MAX_IO];
    for (int k = 0; k < io.n_outputs; k++)
        flat[k] = tg_reshape(g, io.outputs[k], tg_shape2(1, -1));
    return tg_concat(g, flat, io.n_outputs, 1);
}

static void gradcheck(const char *name)
{
    tg_check_opts o = {.training = true, .tol = 1e-6};
    TG_CHECK(tg_gradcheck(name, build_model, (void *)name, o));
}

static void test_lstm_bidirectional_peepholes(void)
{
    gradcheck("rnn_lstm_bidir_peep");
}

static void test_lstm_zero_state_no_bias(void)
{
    gradcheck("rnn_lstm_zero_state");
}

static void test_gru_reverse_layout1(void)
{
    gradcheck("rnn_gru_reverse_layout1");
}

static void test_gru_bidirectional_linear_before_reset(void)
{
    gradcheck("rnn_gru_bidir_lbr");
}

static void test_rnn_relu(void)
{
    gradcheck("rnn_relu");
}

/* Each refusal is TG_ERR_UNSUPPORTED naming what is refused. */
static void expect_refusal(const char *name, const char *names)
{
    char path[512];
    snprintf(path, sizeof path, FIXTURES "%s.onnx", name);
    tg_onnx_model *m = NULL;
    TG_CHECK_OK(tg_onnx_load(path, &m));
    if (!m)
        return;
    tg_graph *g = tg_graph_create();
    tg_onnx_outputs io;
    tg_status s = tg_onnx_build(m, g, NULL, &io);
    if (s != TG_ERR_UNSUPPORTED || !strstr(tg_error_message(), names))
        tg_test_fail(__FILE__, __LINE__, "%s: got %s: %s (wanted unsupported, naming '%s')", name,
                     tg_status_name(s), tg_error_message(), names);
    tg_graph_destroy(g);
    tg_onnx_model_destroy(m);
}

static void test_refusals_name_the_attribute(void)
{
    expect_refusal("rnn_refuse_clip", "'clip'");
    expect_refusal("rnn_refuse_activation", "'Elu'");
    expect_refusal("rnn_refuse_seq_lens", "sequence_lens[1] is 2");
    expect_refusal("rnn_refuse_input_forget", "'input_forget'");
}

int main(void)
{
    TG_RUN(test_lstm_bidirectional_peepholes);
    TG_RUN(test_lstm_zero_state_no_bias);
    TG_RUN(test_gru_reverse_layout1);
    TG_RUN(test_gru_bidirectional_linear_before_reset);
    TG_RUN(test_rnn_relu);
    TG_RUN(test_refusals_name_the_attribute);
    return tg_test_finish();
}
