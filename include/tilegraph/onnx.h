/* tilegraph/onnx.h - importing an ONNX model into a graph.
 *
 * Loading parses the file with protobuf-c (onnx.proto compiled at build
 * time), checks the default-domain opset (11 to 17), reads external data
 * beside the model and validates the graph: every declared tensor size
 * against its data, no dangling inputs, no cycles. Building then appends the
 * model to a tg_graph through the public builder API:
 *
 *     tg_onnx_model *m;
 *     if (tg_onnx_load("resnet18.onnx", &m) != TG_OK) puts(tg_error_message());
 *     tg_graph *g = tg_graph_create();
 *     tg_onnx_build_config c = {.batch = 32};
 *     tg_onnx_outputs io;
 *     if (tg_onnx_build(m, g, &c, &io) != TG_OK) puts(tg_error_message());
 *     tg_onnx_model_destroy(m);        // the graph keeps copies of the weights
 *
 * Float initializers that feed trainable positions (conv and linear weights,
 * norm scales and biases...) become parameters named as in the file (unless
 * the file lists its parameters or the caller freezes them, below), which
 * for a PyTorch export are the state_dict names ("layer1.0.conv1.weight"),
 * so checkpoints keep them. Batch norm running statistics become state
 * "<module>.running_stats" ([2, C], as tg_batch_norm keeps them); integer
 * initializers (num_batches_tracked) are not parameters. Nodes are built in
 * scopes from their PyTorch names ("/layer3/layer3.0/conv1/Conv" in scope
 * "layer3/0/conv1"), so --split layer3.0 finds them. Shape arithmetic
 * (Shape, Gather, Concat, Unsqueeze, Cast, Constant...) is folded at import.
 * The graph's training mode (tg_graph_set_training) decides what batch norm
 * and Dropout build.
 *
 * Errors name the file, the node (name and op type) and the fault; all
 * unsupported ops are listed at once with the supported set.
 * A model is immutable after loading: reading it from several threads is
 * safe; building into a graph follows the graph's rules (one thread).
 */
#ifndef TILEGRAPH_ONNX_H
#define TILEGRAPH_ONNX_H

#include "tilegraph/export.h"

#include "tilegraph/graph.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_onnx_model tg_onnx_model;

/* Parse and validate `path`. On success *out is owned by the caller
 * (tg_onnx_model_destroy). External data is read relative to the file's
 * directory; a location escaping it is refused. */
TG_API tg_status tg_onnx_load(const char *path, tg_onnx_model **out);
/* The same from memory (`name` is used in messages); a model with external
 * data is refused (there is no directory to read it from). The bytes are
 * copied: `data` may be freed after the call. */
TG_API tg_status tg_onnx_load_buffer(const void *data, size_t size, const char *name,
                                     tg_onnx_model **out);
TG_API void tg_onnx_model_destroy(tg_onnx_model *m);

/* ---- summary -------------------------------------------------------------- */

/* A graph input or output as the file declares it. */
typedef struct tg_onnx_value {
    const char *name;
    const char *dtype; /* ONNX's name: "float", "int64", ... */
    int ndim;          /* -1: the file gives no shape */
    /* -1 for a dynamic dimension (dim_param, e.g. "batch_size") */
    int64_t dim[TG_MAX_DIMS];
} tg_onnx_value;

TG_API const char *tg_onnx_path(const tg_onnx_model *m);
/* The default-domain ("ai.onnx") opset the model imports. */
TG_API int tg_onnx_opset(const tg_onnx_model *m);
/* "pytorch 1.13.1" and the like; "" if the file does not say. */
TG_API const char *tg_onnx_producer(const tg_onnx_model *m);
/* Graph inputs that are not initializers (what the user feeds). */
TG_API int tg_onnx_input_count(const tg_onnx_model *m);
TG_API tg_onnx_value tg_onnx_input(const tg_onnx_model *m, int i);
TG_API int tg_onnx_output_count(const tg_onnx_model *m);
TG_API tg_onnx_value tg_onnx_output(const tg_onnx_model *m, int i);
/* The name the file gives dynamic dimension d of input i (output i when
 * `output`): its dim_param ("batch", "Addlogits_dim_1"), or "" when the
 * dimension is fixed, unnamed or out of range. Exporters declare an
 * output's dims they could not work out by such names; the sizes a build
 * gives them are the built graph's (tg_onnx_build's outputs). */
TG_API const char *tg_onnx_dim_name(const tg_onnx_model *m, bool output, int i, int d);
/* Initializers: all of them, and the elements of the float ones. */
TG_API int tg_onnx_initializer_count(const tg_onnx_model *m);
TG_API int64_t tg_onnx_float_elements(const tg_onnx_model *m);
/* Nodes in file order: name ("" if none) and op type. */
TG_API int tg_onnx_node_count(const tg_onnx_model *m);
TG_API const char *tg_onnx_node_name(const tg_onnx_model *m, int i);
TG_API const char *tg_onnx_node_op(const tg_onnx_model *m, int i);

/* Whether values of ONNX type `dtype` ("double", "float16") are taken and
 * computed in float32: the devices have no f64 arithmetic, as accelerators
 * without it; results differ from a float64 run by float32's rounding. */
TG_API bool tg_onnx_computed_in_f32(const char *dtype);
/* "input 'x' (double), output 'y' (double) computed in float32" naming each
 * input and output declared double or float16, or "" when there is none
 * (a note for the user; thread-local storage, valid until the next call). */
TG_API const char *tg_onnx_reduced_note(const tg_onnx_model *m);

/* TG_OK if every node's op type is one the importer maps; otherwise
 * TG_ERR_UNSUPPORTED with a message listing every unsupported op type (with
 * a node of each) and the supported set. Attributes are checked by
 * tg_onnx_build, which names the node and attribute. */
TG_API tg_status tg_onnx_check_ops(const tg_onnx_model *m);
/* The op types the importer maps, comma-separated. */
TG_API const char *tg_onnx_supported_ops(void);

/* ---- building ------------------------------------------------------------- */

typedef struct tg_onnx_build_config {
    /* the size of a dynamic first (batch) dimension of the inputs; 0: refuse
     * dynamic dimensions */
    int64_t batch;
    /* non-NULL: use these graph tensors (f32) for the model's first
     * n_inputs inputs instead of making them; each must have the input's
     * shape, or its element count per sample (it is then reshaped) */
    tg_tensor *const *inputs;
    int n_inputs;
    /* non-NULL: per model input (the first n_constants), the values of an
     * integer input the caller fixes (row-major, the batch dimension filled
     * in), or NULL. Such an input is a constant folded at import, not a
     * graph input: an attention mask of ones, token types of zeros. */
    const int64_t *const *constants;
    int n_constants;
    /* non-NULL: a POSIX extended regular expression; float initializers
     * whose name it matches (anywhere: anchor with ^ and $) are kept fixed
     * (state, not parameters: no gradient, no optimizer state), for files
     * that do not list their parameters (below). A pattern matching no
     * float initializer is an error, as a mistyped one would be. */
    const char *freeze;
} tg_onnx_build_config;

/* The metadata key (ModelProto.metadata_props) under which an exporter lists
 * the trainable initializers, one name a line (tilegraph.mark_parameters in
 * the Python package writes it): float initializers not listed are kept
 * fixed, as PyTorch keeps buffers (a causal mask, an offset) and parameters
 * with requires_grad=False. Batch norm running statistics are state either way. */
#define TG_ONNX_PARAMETERS_KEY "tilegraph.parameters"

/* TG_OK if `pattern` (as tg_onnx_build_config.freeze) compiles and matches
 * at least one float initializer of m; otherwise an error naming the pattern
 * (a command checks its --freeze before loading data). */
TG_API tg_status tg_onnx_check_freeze(const tg_onnx_model *m, const char *pattern);

#define TG_ONNX_MAX_IO 16

/* The graph tensors made for the model's inputs and outputs, in file order.
 * Graph-owned. Outputs are marked with tg_tensor_mark_output. */
typedef struct tg_onnx_outputs {
    int n_inputs, n_outputs;
    tg_tensor *inputs[TG_ONNX_MAX_IO];
    tg_tensor *outputs[TG_ONNX_MAX_IO];
} tg_onnx_outputs;

/* Append the model to g: inputs (float inputs as TG_F32, integer ones as
 * TG_I32), parameters and state with the file's values (copied into the
 * graph), the nodes. Fails naming the file, the node and the fault (an
 * unsupported op or attribute, a shape the ops refuse). */
TG_API tg_status tg_onnx_build(const tg_onnx_model *m, tg_graph *g, const tg_onnx_build_config *c,
                               tg_onnx_outputs *out);

#ifdef __cplusplus
}
#endif
#endif
