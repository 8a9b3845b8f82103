"""tilegraph.model - poptorch.trainingModel and inferenceModel.

A model is compiled on its first call: the torch module runs once on the host
(to record blocks and, for training, the loss module it returns), is exported
to ONNX in a temporary directory, imported by the C library, given the loss,
backward pass and optimizer by the library, and run in a tilegraph session.
Weights stay in the session between calls; copyWeightsToHost() writes them
back into the torch module under their state_dict names.
"""
import contextlib
import inspect
import linecache
import os
import re
import sys
import tempfile
import time
import weakref

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from . import blocks as _blocks
from . import dist
from ._lib import TG_F32, TG_I32, TG_U8, TilegraphError, check, ffi, lib
from .options import Options, make_c_options

# The losses the wrapper recognises in `return output, loss`, and how to build them.
_LOSSES = {torch.nn.CrossEntropyLoss: "cross_entropy", torch.nn.NLLLoss: "nll",
           torch.nn.MSELoss: "mse"}
_live_training = weakref.WeakSet()


class _Output(torch.nn.Module):
    """The user's module reduced to its first output; it is exported as `m`."""

    def __init__(self, module, labels):
        super().__init__()
        self.m = module
        self._labels = labels

    def forward(self, x):
        if self._labels is None:
            return self.m(x)
        # The loss is tilegraph's (appended to the imported output), so the
        # loss modules give a constant while tracing and leave no nodes.
        losses = [m for m in self.m.modules() if type(m) in _LOSSES]
        for m in losses:
            m.forward = lambda *_a, **_k: torch.zeros(())
        try:
            out = self.m(x, self._labels)
        finally:
            for m in losses:
                del m.forward
        return out[0]


def _reset_buffers(path, buffers):
    """Put the buffers' values from before the export back into the file.

    Tracing in training mode runs batch norm once, so the exporter writes
    running statistics already moved by one update; the file must start from
    the module's own.
    """
    model = onnx.load(path)
    changed = False
    for init in model.graph.initializer:
        value = buffers.get(init.name[2:]) if init.name.startswith("m.") else None
        if value is not None and value.is_floating_point():
            init.CopyFrom(numpy_helper.from_array(value.detach().cpu().float().numpy(), init.name))
            changed = True
    if changed:
        onnx.save(model, path)


@contextlib.contextmanager
def _quiet_onnx_log():
    """Export with verbose=True (source locations kept) without the graph dump.

    torch 1.13 turns its C++ graph log on for verbose exports through
    torch.onnx.utils.setup_onnx_logging; with that replaced for the export,
    doc strings are kept and nothing is printed. Without that hook (another
    torch), export quietly without locations.
    """
    utils = torch.onnx.utils
    original = getattr(utils, "setup_onnx_logging", None)
    if original is None:
        yield False
        return
    utils.setup_onnx_logging = lambda verbose: contextlib.nullcontext()
    try:
        yield True
    finally:
        utils.setup_onnx_logging = original


_TORCH_DIR = os.path.dirname(torch.__file__)
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _user_frame(doc_string):
    """The first (file, line) of a node's recorded stack that is the user's code."""
    for line in doc_string.splitlines():
        m = re.match(r"(.*)\((\d+)\): \S+$", line.strip())
        if m and not m.group(1).startswith((_TORCH_DIR, _PACKAGE_DIR)) and os.path.isfile(m.group(1)):
            return m.group(1), int(m.group(2))
    return None


def _module_of(node_name, model):
    """The user's module a node came from, by the exporter's scope in its name ("/m/layer1/layer1.0/conv1/Conv")."""
    parts = node_name.strip("/").split("/")[1:-1]  # drop the wrapper's "m" and the op
    path, found = "", (model, type(model).__name__ + " (the model)")
    for p in parts:
        path = p if path and p.startswith(path + ".") else (f"{path}.{p}" if path else p)
        try:
            found = (model.get_submodule(path), path)
        except AttributeError:
            break
    mod, name = found
    return f"{name} ({type(mod).__name__})" if mod is not model else name


def _where(path, text, model, limit=3):
    """Lines naming the module and the Python line behind each node an error names."""
    names = list(dict.fromkeys(re.findall(r"node '([^']+)'", text)))[:limit]
    if not names:
        return ""
    try:
        nodes = {n.name: n for n in onnx.load(path).graph.node}
    except Exception:  # the file itself is at fault: the error already says so
        return ""
    out = []
    for name in names:
        node = nodes.get(name)
        if node is None:
            continue
        line = f"\n  {node.op_type} ('{name.replace('/m/', '/', 1)}') from {_module_of(name, model)}"
        frame = _user_frame(node.doc_string)
        if frame:
            code = linecache.getline(frame[0], frame[1]).strip()
            line += f", made at {frame[0]}:{frame[1]}" + (f": {code}" if code else "")
        out.append(line)
    return "".join(out)


class _Progress:
    """Compile progress on stderr, as PopTorch shows it: a bar over the stages
    (export, import, compile) redrawn in place on a terminal, one line per
    stage otherwise, and the time it took."""

    STAGES = 3

    def __init__(self, title):
        self.title, self.t0 = title, time.perf_counter()
        self.tty = sys.stderr.isatty()

    def _bar(self, k, what):
        filled = 20 * k // (self.STAGES + 1)
        return (f"{self.title} [{'#' * filled}{'.' * (20 - filled)}] "
                f"{100 * k // (self.STAGES + 1):3d}% {what} ({time.perf_counter() - self.t0:.1f} s)")

    def stage(self, k, what):
        line = self._bar(k, what)
        print(("\r\033[K" + line) if self.tty else line, end="" if self.tty else "\n",
              file=sys.stderr, flush=True)

    def run(self, fn, *args):
        """fn(*args); on failure the bar's line is ended first, so the error starts its own."""
        try:
            return fn(*args)
        except BaseException:
            if self.tty:
                print(file=sys.stderr, flush=True)
            raise

    def done(self):
        line = f"{self.title} [{'#' * 20}] 100% done in {time.perf_counter() - self.t0:.1f} s"
        print(("\r\033[K" + line) if self.tty else line, file=sys.stderr, flush=True)


def _float_inputs(module, args):
    """Forward pre-hook: half tensors in, float tensors out (the host run of a half model)."""
    half = (torch.float16, torch.bfloat16)
    return tuple(a.float() if torch.is_tensor(a) and a.dtype in half else a for a in args)


def _shape(dims):
    s = ffi.new("tg_shape *")
    s.ndim = len(dims)
    for i in range(6):
        s.dim[i] = dims[i] if i < len(dims) else 1
    return s[0]


def _tensor_dims(t):
    s = lib.tg_tensor_shape(t)
    return tuple(s.dim[i] for i in range(s.ndim))


def _local_replicas(options):
    """replicationFactor, or in an MPI job this instance's share of it."""
    r, n = int(options.values.get("replicationFactor", 1)), dist.instances()
    if r % n:
        raise ValueError(f"poptorch.Options: replicationFactor {r} is not a multiple of the {n} "
                         "instances of this MPI job; each instance runs replicationFactor / "
                         "instances replicas")
    return r // n


class _Model:
    training = False

    def __init__(self, model, options):
        if not isinstance(model, torch.nn.Module):
            raise ValueError(f"poptorch: expected a torch.nn.Module, got {type(model).__name__}")
        self.model = model
        self.options = options.clone() if options is not None else Options()
        self._graph = self._session = None
        self._tmp = None
        self._dims_cache = {}

    # ---- host batches -------------------------------------------------------------
    def _factor(self):
        """Samples of a host batch per sample of a micro-batch: in an MPI job
        this instance's replicas only (replicationFactor / instances)."""
        v = self.options.values
        acc = int(v.get("Training.gradientAccumulation", 1)) if self.training else 1
        return acc * int(v.get("deviceIterations", 1)) * _local_replicas(self.options)

    def _micro(self, x):
        if not isinstance(x, torch.Tensor) or x.dim() < 1:
            raise ValueError("poptorch: the model's input must be a torch.Tensor with a batch dimension")
        f = self._factor()
        if x.shape[0] % f:
            raise ValueError(f"poptorch: the host batch of {x.shape[0]} samples is not a multiple of "
                             f"gradientAccumulation x deviceIterations x replicationFactor = {f}; use "
                             "poptorch.DataLoader with the same options, or resize the batch")
        return x.shape[0] // f

    # ---- compiling ----------------------------------------------------------------
    def _record(self, x, labels):
        """Run the module once on the host, recording blocks and loss modules."""
        seen = []
        hooks = [m.register_forward_hook(lambda mod, inp, out: seen.append((mod, inp)))
                 for m in self.model.modules() if type(m) in _LOSSES]
        if labels is not None:
            try:
                inspect.signature(self.model.forward).bind(x, labels)
            except TypeError as e:
                raise ValueError(f"poptorch.trainingModel: {type(self.model).__name__}.forward must "
                                 "take (input, labels) and return (output, loss) with loss from "
                                 f"torch.nn.CrossEntropyLoss, NLLLoss or MSELoss ({e})") from None
        rec = _blocks.Recorder(self.model)
        was = self.model.training
        self.model.train(self.training)
        try:
            with rec, torch.no_grad():
                result = self.model(x) if labels is None else self.model(x, labels)
        finally:
            self.model.train(was)
            for h in hooks:
                h.remove()
        return result, seen, rec.blocks

    def _placement(self, blocks):
        """tilegraph's split/stages options for the recorded blocks and the strategy."""
        if not blocks:
            if self.options.strategy is not None:
                raise ValueError("poptorch: an execution strategy names blocks, but the model ran "
                                 "no poptorch.Block or BeginBlock")
            return {}
        for name, first, _ in blocks:
            if first is None:
                raise ValueError(f"poptorch.Block \"{name}\": tilegraph places blocks by the modules "
                                 "they call, and this block called no torch.nn.Module")
        index = {b[0]: i for i, b in enumerate(blocks)}
        split = ",".join("m." + b[1] for b in blocks[1:])
        strategy = self.options.strategy
        if strategy is not None:
            groups = [s.blocks for s in strategy.stages]
        elif all(b[2] is None for b in blocks):
            return {}  # blocks without a strategy or ipu ids: one device, as in PopTorch
        else:  # auto-staging: blocks with the same ipu_id share a stage, in device order;
            # a block without one stays on the device of the block before it
            ids, dev = [], 0
            for b in blocks:
                dev = b[2] if b[2] is not None else dev
                ids.append(dev)
            groups = [[b[0] for b, d in zip(blocks, ids) if d == dev] for dev in sorted(set(ids))]
        named = [n for g in groups for n in g]
        for n in named:
            if n not in index:
                raise ValueError(f"poptorch.Stage: block \"{n}\" is not used by the model (it ran "
                                 f"blocks {', '.join(b[0] for b in blocks)})")
        missing = [b[0] for b in blocks if b[0] not in named]
        if missing:
            raise ValueError(f"poptorch execution strategy: block(s) {', '.join(missing)} are in no "
                             "poptorch.Stage")
        stages = "|".join(",".join(f"S{index[n]}" for n in g) for g in groups)
        v = {"split": split, "stages": stages}
        if strategy is None and len(groups) > 1:
            v["executionStrategy"] = "pipelined"
        return v

    def _restore(self, buffers):
        with torch.no_grad():
            for k, v in self.model.named_buffers():
                v.copy_(buffers[k])

    def _export(self, x, labels, micro, buffers):
        self._tmp = tempfile.TemporaryDirectory(prefix="tilegraph-")
        path = f"{self._tmp.name}/model.onnx"
        wrapper = _Output(self.model, labels)
        self._restore(buffers)
        was = self.model.training
        try:
            mode = torch.onnx.TrainingMode.TRAINING if self.training else torch.onnx.TrainingMode.EVAL
            with _quiet_onnx_log() as verbose:
                # verbose=True is what makes torch keep each node's Python
                # stack in its doc_string, which errors then point at.
                torch.onnx.export(wrapper, x[:micro], path, training=mode, do_constant_folding=False,
                                  input_names=["input"], output_names=["output"], opset_version=13,
                                  verbose=verbose)
        except Exception as e:
            raise TilegraphError(f"poptorch: exporting {type(self.model).__name__} to ONNX failed: {e}") from e
        finally:
            self.model.train(was)
        _reset_buffers(path, buffers)
        return path

    def _build(self, path, micro, loss_kind, optimizer):
        """The graph: the imported model, and for training its loss, backward and optimizer."""
        g = ffi.gc(lib.tg_graph_create(), lib.tg_graph_destroy)
        lib.tg_graph_set_training(g, self.training)
        m = ffi.new("tg_onnx_model **")
        try:
            check(lib.tg_onnx_load(path.encode(), m), f"poptorch: importing {type(self.model).__name__}")
            try:
                cfg = ffi.new("tg_onnx_build_config *", {"batch": micro})
                io = ffi.new("tg_onnx_outputs *")
                check(lib.tg_onnx_build(m[0], g, cfg, io), f"poptorch: building {type(self.model).__name__}")
            finally:
                lib.tg_onnx_model_destroy(m[0])
        except TilegraphError as e:
            # Speak of the user's module: not of the temporary file, nor of the
            # wrapper's "/m" scope that every node name starts with.
            where = _where(path, str(e), self.model)
            text = str(e).replace(path + ": ", "").replace("'/m/", "'/")
            raise TilegraphError(text + where) from None
        self._input, self._output, self._labels, self._loss = io.inputs[0], io.outputs[0], None, None
        if self.training:
            self._add_loss(g, micro, loss_kind)
            check(lib.tg_graph_backward(g, self._loss), "poptorch: the backward pass")
            check(lib.tg_graph_add_optimizer(g, optimizer.c()), "poptorch: the optimizer")
        if lib.tg_graph_status(g) != 0:
            raise TilegraphError("poptorch: " + ffi.string(lib.tg_graph_error(g)).decode())
        return g

    def _add_loss(self, g, micro, kind):
        out_dims = _tensor_dims(self._output)
        if kind == "mse":
            self._labels = lib.tg_input(g, b"labels", TG_F32, _shape(out_dims))
            self._loss = lib.tg_mse_loss(g, self._output, self._labels)
        else:
            self._labels = lib.tg_input(g, b"labels", TG_I32, _shape((micro,)))
            build = lib.tg_cross_entropy if kind == "cross_entropy" else lib.tg_nll_loss
            self._loss = build(g, self._output, self._labels)
        if self._loss != ffi.NULL:
            lib.tg_tensor_mark_output(self._loss)

    def _open_session(self, extra):
        values = dict(self.options.values)
        values.update(extra)
        self._session_values = values  # what the session was made with
        self._c_options = make_c_options(values)
        s = ffi.new("tg_session **")
        check(lib.tg_session_create(self._graph, self._c_options, s),
              f"poptorch: compiling {type(self.model).__name__}")
        return ffi.gc(s[0], lib.tg_session_destroy)

    def _compile(self, x, labels):
        micro = self._micro(x)
        xm = x[:micro]
        lm = None if labels is None else labels[:micro]
        # The host run and the export run the module in training mode, which
        # moves batch-norm statistics: keep the buffers as they were.
        buffers = {k: v.clone() for k, v in self.model.named_buffers()}
        precision = self._precision(x)
        if self._host_float:
            # model.half(): torch 1.13 has no half kernels on the CPU, so the
            # host run and the export use the module in float (exact for
            # half values); tilegraph stores it in half by `precision`.
            self.model.float()
            if x.dtype != torch.uint8:  # 8-bit images stay 8-bit: the model casts them
                x, xm = x.float(), xm.float()
        # A half cast inside the model (seed 003's ModelWithNormalization casts
        # 8-bit images to the input dtype) meets float modules in the host run:
        # every module takes half inputs as float there, as the export then shows.
        hooks = [m.register_forward_pre_hook(_float_inputs) for m in self.model.modules()
                 ] if self._host_float else []
        try:
            result, losses, recorded = self._record(xm, lm)
            loss_kind = self._loss_kind(result, losses) if self.training else None
            placement = self._placement(recorded)
            progress = _Progress(f"Graph compilation: {type(self.model).__name__}, micro-batch {micro}")
            progress.stage(1, "exporting to ONNX")
            path = progress.run(self._export, x, lm, micro, buffers)
        finally:
            for h in hooks:
                h.remove()
            if self._host_float:
                self.model.to(self._model_dtype)
            self._restore(buffers)
        self._micro_batch = micro
        self._loss_kind_name = loss_kind
        if precision is not None:
            placement = {**placement, "precision": precision}
        self._placement_values = placement
        progress.stage(2, "importing and building the graph")
        self._graph = progress.run(self._build, path, micro, loss_kind,
                                   self.optimizer if self.training else None)
        progress.stage(3, "compiling")
        self._handle = progress.run(self._open_session, {**placement, **self._extra_options()})
        progress.done()

    def _extra_options(self):
        return {}

    def _precision(self, x):
        """tilegraph's `precision` IN.MODEL for a half model or half input, else None.

        PopTorch takes half precision from the tensors (model.half(), a half
        input); an explicit precision option set by the user wins.
        """
        names = {torch.float16: "16", torch.bfloat16: "bf16"}
        dtypes = {p.dtype for p in self.model.parameters()}
        self._host_float = False
        if not dtypes & set(names) and x.dtype not in names:
            return None
        if len(dtypes) > 1:
            raise ValueError(f"poptorch: {type(self.model).__name__}'s parameters mix "
                             f"{', '.join(sorted(str(d) for d in dtypes))}; convert the whole model "
                             "(model.half() or model.float())")
        self._model_dtype = dtypes.pop() if dtypes else torch.float32
        self._host_float = True
        if "precision" in self.options.values:
            return None
        return f"{names.get(x.dtype, '32')}.{names.get(self._model_dtype, '32')}"

    def compile(self, *args):
        if self._graph is None:
            self._compile(*self._args(*args))

    # ---- running ------------------------------------------------------------------
    def _write_input(self, x):
        """The model's input as the graph takes it: u8 for 8-bit images (a quarter of the bytes), else f32."""
        if lib.tg_tensor_dtype(self._input) == TG_U8:
            if x.dtype != torch.uint8:
                raise ValueError(f"poptorch: the model was compiled for uint8 input, got {x.dtype}")
            self._write(self._input, x.detach().numpy())
        elif lib.tg_tensor_dtype(self._input) == TG_I32:
            self._write(self._input, x.detach().numpy().astype(np.int32))
        else:
            self._write(self._input, x.detach().float().numpy())

    def _write(self, t, array):
        a = np.ascontiguousarray(array)
        # Zero-copy: the session copies straight from the array's own memory.
        check(lib.tg_session_write(self._handle, t, ffi.from_buffer(a), a.nbytes),
              lambda: f"poptorch: writing {ffi.string(lib.tg_tensor_name(t)).decode()}")

    def _read_output(self, t):
        count = lib.tg_session_output_count(self._handle, t)
        dims = self._dims(t)
        # A new array per call: the returned tensor is the caller's to keep.
        a = np.empty((count,) + dims, dtype=np.float32)
        check(lib.tg_session_read(self._handle, t, ffi.from_buffer(a), a.nbytes),
              lambda: f"poptorch: reading {ffi.string(lib.tg_tensor_name(t)).decode()}")
        out = torch.from_numpy(a if len(dims) == 0 else a.reshape((count * dims[0],) + dims[1:]))
        # As PopTorch: a half model's outputs (and loss) come back in its type.
        if getattr(self, "_host_float", False) and self._model_dtype != torch.float32:
            out = out.to(self._model_dtype)
        return out

    def _dims(self, t):
        """A graph tensor's dims, asked of the library once per compiled graph."""
        key = (self._graph, t)
        if self._dims_cache.get("graph") is not self._graph:
            self._dims_cache = {"graph": self._graph}
        dims = self._dims_cache.get(key)
        if dims is None:
            dims = self._dims_cache[key] = _tensor_dims(t)
        return dims

    def _check_input(self, x):
        if self._graph is not None and x.shape[0] != self._micro_batch * self._factor():
            raise ValueError(f"poptorch: the model was compiled for host batches of "
                             f"{self._micro_batch * self._factor()} samples, got {x.shape[0]}")
        dims = self._dims(self._input)
        if tuple(x.shape[1:]) != dims[1:]:
            raise ValueError(f"poptorch: the input's sample shape {tuple(x.shape[1:])} is not the "
                             f"compiled one {dims[1:]}")

    # ---- weights ------------------------------------------------------------------
    def _weights(self):
        """(torch tensors to fill, graph tensor) pairs for the module's state."""
        pairs = []
        for name, t in self.model.state_dict().items():
            gt = lib.tg_graph_find(self._graph, ("m." + name).encode())
            if gt != ffi.NULL and lib.tg_tensor_dtype(gt) == TG_F32:
                pairs.append(([t], gt))
        for name, mod in self.model.named_modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm) and mod.track_running_stats:
                gt = lib.tg_graph_find(self._graph, f"m.{name}.running_stats".encode())
                if gt != ffi.NULL:
                    pairs.append(([mod.running_mean, mod.running_var], gt))
        return pairs

    def copyWeightsToHost(self):
        if self._graph is None or self._handle is None:
            return
        for targets, gt in self._weights():
            dims = _tensor_dims(gt)
            a = np.empty(dims, dtype=np.float32)
            check(lib.tg_session_read(self._handle, gt, ffi.from_buffer(a), a.nbytes),
                  f"poptorch.copyWeightsToHost: {ffi.string(lib.tg_tensor_name(gt)).decode()}")
            rows = a.reshape(len(targets), -1) if len(targets) > 1 else [a]
            with torch.no_grad():
                for t, r in zip(targets, rows):
                    t.copy_(torch.from_numpy(np.ascontiguousarray(r)).reshape(t.shape))

    def copyWeightsToDevice(self):
        if self._graph is None or self._handle is None:
            return
        for targets, gt in self._weights():
            a = np.concatenate([t.detach().cpu().float().numpy().reshape(-1) for t in targets])
            self._write(gt, a)

    def detachFromDevice(self):
        """Write the weights back to the module and free the session; the next call recompiles."""
        self.copyWeightsToHost()
        self._handle = self._graph = None
        self._tmp = None

    def isAttachedToDevice(self):
        return self._graph is not None

    def __getattr__(self, name):
        # Like PopTorch's wrapper, the rest is the torch module's (model.eval(), ...).
        model = self.__dict__.get("model")
        if model is None:
            raise AttributeError(name)
        return getattr(model, name)


class TrainingModel(_Model):
    training = True

    def __init__(self, model, options, optimizer):
        super().__init__(model, options)
        from .optim import _Optimizer
        if optimizer is None:
            from .optim import SGD
            optimizer = SGD(model.parameters(), lr=0.01)
        if not isinstance(optimizer, _Optimizer):
            raise ValueError("poptorch.trainingModel: optimizer must be a poptorch.optim optimizer "
                             f"(SGD, Adam, AdamW, LAMB), got {type(optimizer).__name__}")
        self.optimizer = optimizer
        self._handle = None
        _live_training.add(self)

    def _extra_options(self):
        return self.optimizer.options()

    def _loss_kind(self, result, losses):
        accepted = "return (output, loss) with loss from torch.nn.CrossEntropyLoss, NLLLoss or MSELoss"
        if not isinstance(result, (tuple, list)) or len(result) < 2:
            raise ValueError(f"poptorch.trainingModel: the model must {accepted}")
        if len(losses) != 1:
            raise ValueError(f"poptorch.trainingModel: the model ran {len(losses)} loss modules; it "
                             f"must {accepted}, exactly one")
        mod, inp = losses[0]
        if inp[0] is not result[0]:
            raise ValueError(f"poptorch.trainingModel: {type(mod).__name__} must take the model's "
                             "returned output as its first argument")
        if getattr(mod, "reduction", "mean") != "mean":
            raise ValueError(f"poptorch.trainingModel: {type(mod).__name__}(reduction="
                             f"'{mod.reduction}') is not supported; use reduction='mean'")
        return _LOSSES[type(mod)]

    def _args(self, x, labels=None):
        if labels is None:
            raise ValueError("poptorch.trainingModel: call it with (input, labels)")
        return x, labels

    def __call__(self, x, labels=None):
        x, labels = self._args(x, labels)
        if self._graph is None:
            self._compile(x, labels)
        self._check_input(x)
        if labels.shape[0] != x.shape[0]:
            raise ValueError(f"poptorch: {labels.shape[0]} labels for {x.shape[0]} inputs")
        self._write_input(x)
        lab = labels.detach().numpy()
        self._write(self._labels, lab.astype(np.float32 if self._loss_kind_name == "mse" else np.int32))
        check(lib.tg_session_run(self._handle), "poptorch: running the training step")
        return self._read_output(self._output), self._read_output(self._loss)

    def setOptimizer(self, optimizer):
        """A new optimizer (a new learning rate); the session keeps weights and state."""
        if type(optimizer) is not type(self.optimizer):
            raise ValueError(f"poptorch.setOptimizer: the model was compiled with "
                             f"{type(self.optimizer).__name__}, got {type(optimizer).__name__}")
        optimizer.c()
        self.optimizer = optimizer
        if self._graph is None:
            return
        # The update rule is part of the compiled graph: rebuild it with the new
        # settings and carry weights, optimizer state and the step count over.
        old_graph, old = self._graph, self._handle
        self._graph = self._build(f"{self._tmp.name}/model.onnx", self._micro_batch,
                                  self._loss_kind_name, optimizer)
        self._handle = self._open_session({**self._placement_values, **self._extra_options()})
        check(lib.tg_session_copy_weights(self._handle, old), "poptorch.setOptimizer")
        lib.tg_session_set_step(self._handle, lib.tg_session_step(old))
        del old, old_graph


class InferenceModel(_Model):
    def __init__(self, model, options):
        super().__init__(model, options)
        self._handle = None

    def _args(self, x):
        return x, None

    def __call__(self, x):
        if self._graph is None:
            for tm in list(_live_training):  # PopTorch copies trained weights implicitly
                if tm.model is self.model or any(m is self.model for m in tm.model.modules()):
                    tm.copyWeightsToHost()
            self._compile(x, None)
        self._check_input(x)
        self._write_input(x)
        check(lib.tg_session_run(self._handle), "poptorch: running inference")
        return self._read_output(self._output)


def trainingModel(model, options=None, optimizer=None):
    return TrainingModel(model, options, optimizer)


def inferenceModel(model, options=None):
    return InferenceModel(model, options)
