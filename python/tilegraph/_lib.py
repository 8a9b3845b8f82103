"""tilegraph._lib - the C library through cffi in ABI mode.

Only the declarations the package calls are declared here (CDEF); they must
match include/tilegraph/*.h. tests/python/test_abi.py holds them to it: every
struct's size, field names and offsets and every enum's constants against
tests/python/abi_probe.c (compiled against the headers) and the headers' own
field lists, so a field added on one side only fails the suite instead of
corrupting memory at run time.
The library is found through TILEGRAPH_LIBRARY, then, for an installed
package, the library directory `make install` recorded in _installed.py,
then the build tree beside this checkout (../../build), then the system's
loader path.
"""
import os
import re

import cffi

CDEF = """
typedef enum tg_status {
    TG_OK, TG_ERR_INVALID_ARG, TG_ERR_SHAPE, TG_ERR_DTYPE, TG_ERR_NOMEM, TG_ERR_IO,
    TG_ERR_FORMAT, TG_ERR_CONFIG, TG_ERR_NOT_FOUND, TG_ERR_NUMERIC, TG_ERR_UNSUPPORTED,
    TG_ERR_INTERNAL, TG_ERR_CAPACITY, TG_STATUS_COUNT
} tg_status;
typedef enum tg_dtype { TG_F32, TG_F16, TG_BF16, TG_U8, TG_I32, TG_DTYPE_COUNT } tg_dtype;
typedef enum tg_lr_kind { TG_LR_CONSTANT, TG_LR_STEP, TG_LR_COSINE } tg_lr_kind;
typedef enum tg_optimizer_kind { TG_OPT_SGD, TG_OPT_ADAM, TG_OPT_ADAMW, TG_OPT_LAMB } tg_optimizer_kind;
typedef struct tg_graph tg_graph;
typedef struct tg_tensor tg_tensor;
typedef struct tg_options tg_options;
typedef struct tg_session tg_session;
typedef struct tg_onnx_model tg_onnx_model;
typedef struct tg_shape { int ndim; int64_t dim[6]; } tg_shape;

const char *tg_error_message(void);
tg_status tg_dist_init(int *argc, char ***argv);
void tg_dist_finalize(void);
void tg_dist_abort(int code);
bool tg_dist_active(void);
int tg_dist_instance(void);
int tg_dist_instances(void);
tg_status tg_dist_sum_i64(int64_t *values, int n);
const char *tg_status_name(tg_status s);

tg_options *tg_options_create(void);
void tg_options_destroy(tg_options *o);
tg_status tg_options_set(tg_options *o, const char *key, const char *value);
int tg_options_count(void);
const char *tg_options_key(int index);

tg_graph *tg_graph_create(void);
void tg_graph_destroy(tg_graph *g);
tg_status tg_graph_status(const tg_graph *g);
const char *tg_graph_error(const tg_graph *g);
void tg_graph_set_training(tg_graph *g, bool training);
tg_tensor *tg_graph_find(const tg_graph *g, const char *name);
tg_shape tg_tensor_shape(const tg_tensor *t);
tg_dtype tg_tensor_dtype(const tg_tensor *t);
const char *tg_tensor_name(const tg_tensor *t);
void tg_tensor_mark_output(tg_tensor *t);
tg_tensor *tg_input(tg_graph *g, const char *name, tg_dtype dtype, tg_shape shape);
tg_tensor *tg_cross_entropy(tg_graph *g, tg_tensor *logits, tg_tensor *labels);
tg_tensor *tg_nll_loss(tg_graph *g, tg_tensor *log_probs, tg_tensor *labels);
tg_tensor *tg_mse_loss(tg_graph *g, tg_tensor *a, tg_tensor *b);
tg_status tg_graph_backward(tg_graph *g, tg_tensor *loss);
tg_tensor *tg_recomputation_checkpoint(tg_graph *g, tg_tensor *t);

typedef struct tg_lr_schedule {
    tg_lr_kind kind; float lr; int64_t step_size; float gamma; int64_t total_steps;
    float min_lr; int64_t warmup_steps;
} tg_lr_schedule;
typedef struct tg_optimizer {
    tg_optimizer_kind kind; tg_lr_schedule lr; float weight_decay; float momentum, dampening;
    bool nesterov; float beta1, beta2, eps; bool bias_correction;
    float max_weight_norm; float max_grad_norm;
} tg_optimizer;
tg_optimizer tg_optimizer_sgd(float lr, float momentum);
tg_optimizer tg_optimizer_adam(float lr);
tg_optimizer tg_optimizer_adamw(float lr);
tg_optimizer tg_optimizer_lamb(float lr);
tg_status tg_optimizer_validate(const tg_optimizer *opt);
tg_status tg_graph_add_optimizer(tg_graph *g, const tg_optimizer *opt);
tg_status tg_graph_add_optimizer_groups(tg_graph *g, const tg_optimizer *opts, int n_opts,
                                        const char *const *names, const int *group, int n_names);
bool tg_tensor_is_param(const tg_tensor *t);

tg_status tg_onnx_load(const char *path, tg_onnx_model **out);
void tg_onnx_model_destroy(tg_onnx_model *m);
typedef struct tg_onnx_value {
    const char *name; const char *dtype; int ndim; int64_t dim[6];
} tg_onnx_value;
int tg_onnx_input_count(const tg_onnx_model *m);
tg_onnx_value tg_onnx_input(const tg_onnx_model *m, int i);
int tg_onnx_output_count(const tg_onnx_model *m);
tg_onnx_value tg_onnx_output(const tg_onnx_model *m, int i);
typedef struct tg_onnx_build_config {
    int64_t batch; tg_tensor *const *inputs; int n_inputs;
    const int64_t *const *constants; int n_constants; const char *freeze;
} tg_onnx_build_config;
typedef struct tg_onnx_outputs {
    int n_inputs, n_outputs; tg_tensor *inputs[16]; tg_tensor *outputs[16];
} tg_onnx_outputs;
tg_status tg_onnx_build(const tg_onnx_model *m, tg_graph *g, const tg_onnx_build_config *c,
                        tg_onnx_outputs *out);

tg_status tg_session_create(tg_graph *g, const tg_options *opts, tg_session **out);
void tg_session_destroy(tg_session *s);
tg_status tg_session_write(tg_session *s, const tg_tensor *t, const void *data, size_t bytes);
tg_status tg_session_read(tg_session *s, const tg_tensor *t, void *data, size_t bytes);
tg_status tg_session_run(tg_session *s);
int64_t tg_session_output_count(const tg_session *s, const tg_tensor *t);
int64_t tg_session_step(const tg_session *s);
void tg_session_set_step(tg_session *s, int64_t step);
tg_status tg_session_copy_weights(tg_session *dst, const tg_session *src);
size_t tg_session_arena_bytes(const tg_session *s);
tg_status tg_checkpoint_save(const tg_session *s, const char *path, const char *model);
tg_status tg_checkpoint_load(tg_session *s, const char *path, const char *model);
int tg_session_devices(const tg_session *s);

typedef struct tg_eval_io { tg_tensor *input, *labels, *output; } tg_eval_io;
typedef struct tg_eval_result {
    double accuracy, loss; int64_t scored; double mean_iou; int iou_classes; double iou[32];
} tg_eval_result;
typedef tg_status (*tg_eval_next_fn)(void *user, void *input, int32_t *labels, int64_t *count);
typedef struct tg_eval_source {
    int64_t steps; tg_eval_next_fn next; void *user; bool own_share;
} tg_eval_source;
tg_status tg_evaluate_source(tg_session *s, const tg_eval_io *io, const tg_eval_source *src,
                             void (*progress)(void *user, int64_t done, int64_t total), void *user,
                             tg_eval_result *out);
"""
ffi = cffi.FFI()
ffi.cdef(CDEF)

# the cdef's constants (the values test_abi.py checks against the C enum)
_DTYPE = ffi.typeof("tg_dtype").relements
TG_F32, TG_F16, TG_BF16, TG_U8, TG_I32 = (_DTYPE[n] for n in ("TG_F32", "TG_F16", "TG_BF16", "TG_U8", "TG_I32"))


def _candidates():
    env = os.environ.get("TILEGRAPH_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from ._installed import LIBDIR
    except ImportError:  # a checkout: the build tree
        LIBDIR = None
    if LIBDIR is not None:
        return [os.path.normpath(os.path.join(here, LIBDIR, "libtilegraph.so.0"))]
    build = os.path.normpath(os.path.join(here, "..", "..", "build"))
    return [os.path.join(build, "libtilegraph.so.0"), os.path.join(build, "libtilegraph.so"),
            "libtilegraph.so.0", "libtilegraph.so"]


def _open():
    tried = []
    global lib_path
    for path in _candidates():
        try:
            handle = ffi.dlopen(path)
            lib_path = path
            return handle
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("tilegraph: cannot load libtilegraph.so; tried " + "; ".join(tried) +
                      ". Build it (cmake --build build) or set TILEGRAPH_LIBRARY to its path.")


lib_path = None  # the file the library was loaded from
lib = _open()


class TilegraphError(RuntimeError):
    """A failure reported by the C library, with its message."""


def message():
    return ffi.string(lib.tg_error_message()).decode()


_WRAPPER_NAMES = re.compile(r"(['\"])/?m([./])")


def user_names(text):
    """The library's message with graph names as the user's module names
    them: without the package's wrapper scope ('m.encoder.layer.1' and
    '/m/head/Gemm' become 'encoder.layer.1' and '/head/Gemm')."""
    return _WRAPPER_NAMES.sub(lambda mo: mo.group(1) + ("/" if mo.group(0)[1] == "/" else ""), text)


def check(status, what):
    """Raise TilegraphError naming `what` and the library's message on failure.

    `what` may be a function giving the text, so that calls made every step
    build no message unless one is needed.
    """
    if status != 0:
        name = ffi.string(lib.tg_status_name(status)).decode()
        if callable(what):
            what = what()
        raise TilegraphError(user_names(f"{what}: {message()} ({name})"))
