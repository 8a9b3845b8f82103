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

static void open_object(const char *name) {
    printf("%s\"%s\": {", g_first ? "" : ", ", name);
    g_first = 1;
}

static void close_object(void) {
    printf("}");
    g_first = 0;
}

static void item(const char *name, long long value) {
    printf("%s\"%s\": %lld", g_first ? "" : ", ", name, value);
    g_first = 0;
}

/* A struct: {"size": n, "fields": [["name", offset], ...]} in declaration order. */
#define STRUCT_BEGIN(T)                                                                            \
    do {                                                                                           \
        typedef T probe_t;                                                                         \
        printf("%s\"%s\": {\"size\": %zu, \"fields\": [", g_first ? "" : ", ", #T, sizeof(T));    \
        const char *sep = "";
#define FIELD(f)                                                                                   \
    printf("%s[\"%s\", %zu]", sep, #f, offsetof(probe_t, f));                                      \
    sep = ", ";
#define STRUCT_END()                                                                               \
    printf("]}");                                                                                  \
    g_first = 0;                                                                                   \
    }                                                                                              \
    while (0)

#define STATUS_ITEM(code, text) item(#code, code);
#define DTYPE_ITEM(code, name, size) item(#code, code);

static void structs(void) {
    open_object("structs");
    STRUCT_BEGIN(tg_shape)
    FIELD(ndim) FIELD(dim) STRUCT_END();
    STRUCT_BEGIN(tg_lr_schedule)
    FIELD(kind) FIELD(lr) FIELD(step_size) FIELD(gamma) FIELD(total_steps) FIELD(min_lr)
        FIELD(warmup_steps) STRUCT_END();
    STRUCT_BEGIN(tg_optimizer)
    FIELD(kind) FIELD(lr) FIELD(weight_decay) FIELD(momentum) FIELD(dampening) FIELD(nesterov)
        FIELD(beta1) FIELD(beta2) FIELD(eps) FIELD(bias_correction) FIELD(max_weight_norm)
            FIELD(max_grad_norm) STRUCT_END();
    STRUCT_BEGIN(tg_onnx_value)
    FIELD(name) FIELD(dtype) FIELD(ndim) FIELD(dim) STRUCT_END();
    STRUCT_BEGIN(tg_onnx_build_config)
    FIELD(batch) FIELD(inputs) FIELD(n_inputs) FIELD(constants) FIELD(n_constants) STRUCT_END();
    STRUCT_BEGIN(tg_onnx_outputs)
    FIELD(n_inputs) FIELD(n_outputs) FIELD(inputs) FIELD(outputs) STRUCT_END();
    close_object();
}

static void enums(void) {
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
static void sizes(void) {
    open_object("sizes");
    item("tg_status", (long long)sizeof(tg_status));
    item("tg_dtype", (long long)sizeof(tg_dtype));
    item("tg_lr_kind", (long long)sizeof(tg_lr_kind));
    item("tg_optimizer_kind", (long long)sizeof(tg_optimizer_kind));
    close_object();
}

int main(void) {
    g_first = 1;
    printf("{");
    structs();
    enums();
    sizes();
    printf("}\n");
    return 0;
}
