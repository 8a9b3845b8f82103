/* tests/python/abi_probe.c - the C side of the Python package's ABI, as JSON.
 *
 * python/tilegraph/_lib.py declares, by hand, the structs and enums the
 * package passes through cffi. cffi in ABI mode never sees the headers, so a
 * field added in C alone makes Python read and write the wrong bytes (a
 * segfault, or worse a silently wrong value). This program, compiled against
 * the headers, prints the size, field names and offsets of every struct
 * _lib.py declares and the value of every enum constant it declares;
 * tests/python/test_abi.py compares them with cffi's view of the cdef and
 * with the headers' field lists.
 *
 * Enums with an X-macro list (status, dtype) are printed from that list, so a
 * new code is picked up without touching this file; the struct field lists
 * here are checked against the headers by the test, so a field missing here
 * fails there too.
 */
#include <stddef.h>
#include <stdio.h>

#include "tilegraph/tilegraph.h"

static int g_first; /* no comma before the first item of a JSON object */

static void open_object(const char *name)
{
    printf("%s\"%s\": {", g_first ? "" : ", ", name);
    g_first = 1;
}

static void close_object(void)
{
    printf("}");
    g_first = 0;
}

static void item(const char *name, long long value)
{
    printf("%s\"%s\": %lld", g_first ? "" : ", ", name, value);
    g_first = 0;
}

/* A struct: {"size": n, "fields": [["name", offset], ...]} in declaration order. */
static int g_fields; /* fields printed in the current struct */

static void struct_begin(const char *name, size_t size)
{
    printf("%s\"%s\": {\"size\": %zu, \"fields\": [", g_first ? "" : ", ", name, size);
    g_fields = 0;
}

static void field(const char *name, size_t offset)
{
    printf("%s[\"%s\", %zu]", g_fields++ ? ", " : "", name, offset);
}

static void struct_end(void)
{
    printf("]}");
    g_first = 0;
}

#define STRUCT(T) struct_begin(#T, sizeof(T))
#define FIELD(T, f) field(#f, offsetof(T, f))

#define STATUS_ITEM(code, text) item(#code, code);
#define DTYPE_ITEM(code, name, size) item(#code, code);

static void structs(void)
{
    open_object("structs");
    STRUCT(tg_shape);
    FIELD(tg_shape, ndim);
    FIELD(tg_shape, dim);
    struct_end();
    STRUCT(tg_lr_schedule);
    FIELD(tg_lr_schedule, kind);
    FIELD(tg_lr_schedule, lr);
    FIELD(tg_lr_schedule, step_size);
    FIELD(tg_lr_schedule, gamma);
    FIELD(tg_lr_schedule, total_steps);
    FIELD(tg_lr_schedule, min_lr);
    FIELD(tg_lr_schedule, warmup_steps);
    struct_end();
    STRUCT(tg_optimizer);
    FIELD(tg_optimizer, kind);
    FIELD(tg_optimizer, lr);
    FIELD(tg_optimizer, weight_decay);
    FIELD(tg_optimizer, momentum);
    FIELD(tg_optimizer, dampening);
    FIELD(tg_optimizer, nesterov);
    FIELD(tg_optimizer, beta1);
    FIELD(tg_optimizer, beta2);
    FIELD(tg_optimizer, eps);
    FIELD(tg_optimizer, bias_correction);
    FIELD(tg_optimizer, max_weight_norm);
    FIELD(tg_optimizer, max_grad_norm);
    struct_end();
    STRUCT(tg_onnx_value);
    FIELD(tg_onnx_value, name);
    FIELD(tg_onnx_value, dtype);
    FIELD(tg_onnx_value, ndim);
    FIELD(tg_onnx_value, dim);
    struct_end();
    STRUCT(tg_onnx_build_config);
    FIELD(tg_onnx_build_config, batch);
    FIELD(tg_onnx_build_config, inputs);
    FIELD(tg_onnx_build_config, n_inputs);
    FIELD(tg_onnx_build_config, constants);
    FIELD(tg_onnx_build_config, n_constants);
    FIELD(tg_onnx_build_config, freeze);
    struct_end();
    STRUCT(tg_onnx_outputs);
    FIELD(tg_onnx_outputs, n_inputs);
    FIELD(tg_onnx_outputs, n_outputs);
    FIELD(tg_onnx_outputs, inputs);
    FIELD(tg_onnx_outputs, outputs);
    struct_end();
    STRUCT(tg_eval_io);
    FIELD(tg_eval_io, input);
    FIELD(tg_eval_io, labels);
    FIELD(tg_eval_io, output);
    struct_end();
    STRUCT(tg_eval_result);
    FIELD(tg_eval_result, accuracy);
    FIELD(tg_eval_result, loss);
    FIELD(tg_eval_result, scored);
    FIELD(tg_eval_result, mean_iou);
    FIELD(tg_eval_result, iou_classes);
    FIELD(tg_eval_result, iou);
    struct_end();
    STRUCT(tg_eval_source);
    FIELD(tg_eval_source, steps);
    FIELD(tg_eval_source, next);
    FIELD(tg_eval_source, user);
    FIELD(tg_eval_source, own_share);
    struct_end();
    close_object();
}

static void enums(void)
{
    open_object("enums");
    open_object("tg_status");
    TG_STATUS_LIST(STATUS_ITEM)
    item("TG_STATUS_COUNT", TG_STATUS_COUNT);
    close_object();
    open_object("tg_dtype");
    TG_DTYPE_LIST(DTYPE_ITEM)
    item("TG_DTYPE_COUNT", TG_DTYPE_COUNT);
    close_object();
    open_object("tg_lr_kind");
    item("TG_LR_CONSTANT", TG_LR_CONSTANT);
    item("TG_LR_STEP", TG_LR_STEP);
    item("TG_LR_COSINE", TG_LR_COSINE);
    close_object();
    open_object("tg_optimizer_kind");
    item("TG_OPT_SGD", TG_OPT_SGD);
    item("TG_OPT_ADAM", TG_OPT_ADAM);
    item("TG_OPT_ADAMW", TG_OPT_ADAMW);
    item("TG_OPT_LAMB", TG_OPT_LAMB);
    close_object();
    close_object();
}

/* Scalar typedefs the cdef gives a size to (enums: their C size). */
static void sizes(void)
{
    open_object("sizes");
    item("tg_status", (long long)sizeof(tg_status));
    item("tg_dtype", (long long)sizeof(tg_dtype));
    item("tg_lr_kind", (long long)sizeof(tg_lr_kind));
    item("tg_optimizer_kind", (long long)sizeof(tg_optimizer_kind));
    close_object();
}

int main(void)
{
    g_first = 1;
    printf("{");
    structs();
    enums();
    sizes();
    printf("}\n");
    return 0;
}
