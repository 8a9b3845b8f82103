"""tilegraph.onnx_session - inference on an ONNX file through the C library's
public API (tg_onnx_load, tg_onnx_build, tg_session_*), shaped like
onnxruntime's InferenceSession so the two run side by side on the same file:

    from tilegraph.onnx_session import OnnxSession
    s = OnnxSession("resnet50.onnx", batch=32, threads=2)
    (logits,) = s.run({"input": images})        # numpy in, numpy out

The graph is built for inference (no backward, no optimizer), so whatever
the compiler plans for inference programs applies. Float inputs are fed as
float32, integer ones (token ids, masks) as int32, as tg_onnx_build makes
them. `precision` is the session option (docs/options.md): "32.32" (f32) or
"32.bf16" (f32 inputs, bf16 weights and activations). Used by the
onnxruntime parity test (tests/python/test_ort_parity.py) and benchmark
(bench/ort_infer.py).
"""
import numpy as np

from ._lib import check, ffi, lib, TG_I32


class OnnxSession:
    """One compiled inference program of an ONNX file for a fixed batch."""

    def __init__(self, path, batch=1, threads=1, precision="32.32", options=None):
        self.path = str(path)
        self._graph = self._session = None
        model = ffi.new("tg_onnx_model **")
        check(lib.tg_onnx_load(self.path.encode(), model), f"tilegraph: loading {self.path}")
        try:
            self.input_names = [_name(lib.tg_onnx_input(model[0], i))
                                for i in range(lib.tg_onnx_input_count(model[0]))]
            self.output_names = [_name(lib.tg_onnx_output(model[0], i))
                                 for i in range(lib.tg_onnx_output_count(model[0]))]
            self._build(model[0], batch)
        finally:
            lib.tg_onnx_model_destroy(model[0])
        opts = {"threadsPerDevice": str(threads), "precision": precision}
        opts.update({k: str(v) for k, v in (options or {}).items()})
        self._open(opts)

    def _build(self, model, batch):
        self._graph = lib.tg_graph_create()
        lib.tg_graph_set_training(self._graph, False)
        self._io = ffi.new("tg_onnx_outputs *")
        cfg = ffi.new("tg_onnx_build_config *", {"batch": batch})
        check(lib.tg_onnx_build(model, self._graph, cfg, self._io),
              f"tilegraph: building {self.path} for inference")

    def _open(self, opts):
        o = lib.tg_options_create()
        try:
            for k, v in opts.items():
                check(lib.tg_options_set(o, k.encode(), v.encode()), f"tilegraph: option {k}={v}")
            s = ffi.new("tg_session **")
            check(lib.tg_session_create(self._graph, o, s), f"tilegraph: compiling {self.path}")
            self._session = s[0]
        finally:
            lib.tg_options_destroy(o)

    def run(self, feeds):
        """feeds: {input name: array} (every input); the outputs in file order."""
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise ValueError(f"OnnxSession.run: {self.path} needs input(s) {missing}")
        for k, name in enumerate(self.input_names):
            self._write(self._io.inputs[k], name, feeds[name])
        check(lib.tg_session_run(self._session), lambda: f"tilegraph: running {self.path}")
        return [self._read(self._io.outputs[k]) for k in range(self._io.n_outputs)]

    def _write(self, t, name, value):
        if t == ffi.NULL:
            return
        dtype = np.int32 if lib.tg_tensor_dtype(t) == TG_I32 else np.float32
        a = np.ascontiguousarray(value, dtype=dtype)
        check(lib.tg_session_write(self._session, t, ffi.from_buffer(a), a.nbytes),
              lambda: f"tilegraph: input '{name}' of {self.path} (shape {a.shape})")

    def _read(self, t):
        sh = lib.tg_tensor_shape(t)
        shape = [sh.dim[d] for d in range(sh.ndim)]
        count = lib.tg_session_output_count(self._session, t)
        if count > 1:
            shape = [count] + shape
        dtype = np.int32 if lib.tg_tensor_dtype(t) == TG_I32 else np.float32
        out = np.empty(shape, dtype=dtype)
        if out.size:
            check(lib.tg_session_read(self._session, t, ffi.from_buffer(out), out.nbytes),
                  lambda: f"tilegraph: output '{_tensor_name(t)}' of {self.path}")
        return out

    def close(self):
        if self._session is not None:
            lib.tg_session_destroy(self._session)
            self._session = None
        if self._graph is not None:
            lib.tg_graph_destroy(self._graph)
            self._graph = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


def _name(value):
    return ffi.string(value.name).decode()


def _tensor_name(t):
    return ffi.string(lib.tg_tensor_name(t)).decode()

