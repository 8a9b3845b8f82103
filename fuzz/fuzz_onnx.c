/* fuzz/fuzz_onnx.c - libFuzzer target for the ONNX loader.
 *
 * Any input must load or fail with a message naming the file. What loads
 * must answer every summary accessor, and every initializer must decode or
 * fail with a message (its declared size checked against its data). The
 * graph builder is exercised on mutated models by tests/onnx/test_onnx_errors.c
 * (it needs the whole library, which this target does not link).
 */
#include "core/error.h"
#include "onnx/onnx_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tg_onnx_model *m = NULL;
    if (tg_onnx_load_buffer(data, size, "fuzz.onnx", &m) != TG_OK) {
        if (m || !strstr(tg_error_message(), "fuzz.onnx"))
            abort();
        return 0;
    }
    for (int i = 0; i < tg_onnx_input_count(m); i++)
        if (!tg_onnx_input(m, i).name)
            abort();
    for (int i = 0; i < tg_onnx_output_count(m); i++)
        (void)tg_onnx_output(m, i);
    for (int i = 0; i < tg_onnx_node_count(m); i++)
        if (!tg_onnx_node_op(m, i) || !tg_onnx_node_name(m, i))
            abort();
    (void)tg_onnx_producer(m);
    const Onnx__GraphProto *g = m->graph;
    for (size_t k = 0; k < g->n_initializer; k++) {
        tg_onnx_data d;
        if (tg_onnx_data_decode(g->initializer[k], m->external[k], m->external_size[k], "init",
                                &d) == TG_OK) {
            if (d.n > 0 && !d.f && !d.i)
                abort();
            tg_onnx_data_free(&d);
        } else if (tg_error_message()[0] == '\0') {
            abort();
        }
    }
    tg_onnx_model_destroy(m);
    return 0;
}
