/* onnx/onnx_internal.h - the loaded model and the tensor decoder, shared by
 * the loader, the graph builder and the conformance test (internal).
 *
 * The model keeps the protobuf-c message tree as parsed; external data is
 * read at load time into one buffer per initializer, so building never
 * touches the file system again.
 */
#ifndef TG_ONNX_INTERNAL_H
#define TG_ONNX_INTERNAL_H

#include "tilegraph/onnx.h"

#include "onnx.pb-c.h"

#include <stdint.h>

struct tg_onnx_model {
    char *path;              /* as given, for messages */
    Onnx__ModelProto *proto; /* protobuf-c owned tree */
    const Onnx__GraphProto *graph;
    int opset;
    /* per initializer: its external data (NULL when stored inline) */
    uint8_t **external;
    size_t *external_size;
    /* graph inputs that are not initializers, as indices into graph->input */
    int *inputs;
    int n_inputs;
    int64_t float_elements;
};

/* Name -> int map (keys borrowed). Capacity is fixed at init: at least
 * the number of keys that will be put. */
typedef struct tg_onnx_names {
    const char **keys;
    int *vals;
    size_t cap;
} tg_onnx_names;
bool tg_onnx_names_init(tg_onnx_names *s, size_t n);
void tg_onnx_names_free(tg_onnx_names *s);
void tg_onnx_names_put(tg_onnx_names *s, const char *key, int val);
/* -1 if absent */
int tg_onnx_names_get(const tg_onnx_names *s, const char *key);

/* forward: see below */
typedef struct tg_onnx_data tg_onnx_data;

/* tg_onnx_build with some inputs known: bound[k] non-NULL gives the values
 * of the model's input k, which is then a constant folded at import (shape
 * and axes inputs, as ONNX's backend tests feed them) and out->inputs[k]
 * is NULL. (Float inputs bound this way are constants, not parameters.) */
tg_status tg_onnx_build_bound(const tg_onnx_model *m, tg_graph *g, const tg_onnx_build_config *c,
                              const tg_onnx_data *const *bound, tg_onnx_outputs *out);

/* A tensor's values decoded into host arrays: floating types into f,
 * integer and boolean types into i (exactly one is non-NULL). */
struct tg_onnx_data {
    int elem_type; /* ONNX TensorProto.DataType */
    int ndim;
    int64_t dim[TG_MAX_DIMS];
    int64_t n;
    float *f;
    int64_t *i;
};

/* Decode t (its external bytes, if any, in ext/ext_size). `what` names it in
 * messages. Checks the declared dims against the data. */
tg_status tg_onnx_data_decode(const Onnx__TensorProto *t, const uint8_t *ext, size_t ext_size,
                              const char *what, tg_onnx_data *out);
void tg_onnx_data_free(tg_onnx_data *d);
/* Bytes per element of an ONNX data type we read (0: not readable). */
size_t tg_onnx_elem_size(int elem_type);
const char *tg_onnx_elem_name(int elem_type);
/* Read a serialised TensorProto file (the backend tests' input_0.pb). */
tg_status tg_onnx_data_read_file(const char *path, tg_onnx_data *out);

#endif
