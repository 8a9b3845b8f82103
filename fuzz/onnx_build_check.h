/* fuzz/onnx_build_check.h - what fuzz_onnx_build checks of one input, shared
 * with the suite's replay of its corpus (tests/onnx/test_onnx_fuzz_build.c).
 *
 * Any input that loads is built into a graph (dynamic batch 2), for
 * inference, then for training with the backward pass and SGD, and what
 * builds is compiled (schedule, layout, memory plan) on one device with a
 * 256 MiB memory limit. Each step must succeed or fail with a message
 * (abort() otherwise, which both the fuzzer and the test report).
 */
#ifndef TG_FUZZ_ONNX_BUILD_CHECK_H
#define TG_FUZZ_ONNX_BUILD_CHECK_H

#include "compile/program.h"
#include "core/error.h"
#include "onnx/onnx_internal.h"
#include "tilegraph/graph.h"
#include "tilegraph/optim.h"
#include "tilegraph/options.h"

#include <stdlib.h>
#include <string.h>

static void refused_with_message(tg_status s)
{
    if (s != TG_OK && !*tg_error_message())
        abort();
}

static void build_and_compile(const tg_onnx_model *m, bool training)
{
    tg_graph *g = tg_graph_create();
    if (!g)
        return;
    tg_graph_set_training(g, training);
    tg_onnx_build_config c = {.batch = 2};
    tg_onnx_outputs io;
    tg_status s = tg_onnx_build(m, g, &c, &io);
    refused_with_message(s);
    if (s == TG_OK && training) {
        /* the first scalar float output, as the Python package takes the loss */
        tg_tensor *loss = NULL;
        for (int i = 0; i < io.n_outputs && !loss; i++)
            if (io.outputs[i] && tg_shape_numel(tg_tensor_shape(io.outputs[i])) == 1 &&
                tg_tensor_dtype(io.outputs[i]) == TG_F32)
                loss = io.outputs[i];
        if (loss) {
            s = tg_graph_backward(g, loss);
            refused_with_message(s);
            tg_optimizer opt = tg_optimizer_sgd(0.01f, 0.0f);
            if (s == TG_OK)
                refused_with_message(s = tg_graph_add_optimizer(g, &opt));
        }
    }
    if (s == TG_OK) {
        tg_options *o = tg_options_create();
        tg_program *p = NULL;
        if (o && tg_options_set(o, "memoryPerDevice", "268435456") == TG_OK &&
            tg_options_set(o, "threadsPerDevice", "1") == TG_OK) {
            s = tg_program_compile(g, o, &p);
            refused_with_message(s);
            if (s == TG_OK)
                tg_program_destroy(p);
        }
        tg_options_destroy(o);
    }
    tg_graph_destroy(g);
}

/* Load, build and compile data; a refused file must name itself. */
static void tg_fuzz_onnx_build_one(const uint8_t *data, size_t size)
{
    tg_onnx_model *m = NULL;
    if (tg_onnx_load_buffer(data, size, "fuzz.onnx", &m) != TG_OK) {
        if (m || !strstr(tg_error_message(), "fuzz.onnx"))
            abort();
        return;
    }
    build_and_compile(m, false);
    build_and_compile(m, true);
    tg_onnx_model_destroy(m);
}

#endif
