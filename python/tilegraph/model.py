"""tilegraph.model - poptorch.trainingModel and inferenceModel.

A model is compiled on its first call: the torch module runs once on the host
(to record blocks, the outputs' structure and, for training, which output is
the loss), its whole forward - the loss included - is exported to ONNX in a
temporary directory, imported by the C library, given the backward pass of
the loss output and the optimizer by the library, and run in a tilegraph
session. Weights stay in the session between calls; copyWeightsToHost()
writes them back into the torch module under their state_dict names.

A call takes the forward's own signature: every tensor argument (positional
or keyword, also inside tuples, lists and dicts) is a graph input; anything
else (None, numbers, strings) is baked in at compile time.
"""
import collections
import contextlib
import inspect
import linecache
import os
import re
import sys
import tempfile
import time
import warnings
import weakref

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from . import anchors as _anchors
from . import blocks as _blocks
from . import dist
from ._lib import TG_F32, TG_I32, TilegraphError, check, ffi, lib
from .options import Options, make_c_options

_live_training = weakref.WeakSet()
_INT32 = (-2 ** 31, 2 ** 31 - 1)


# ---- identity_loss ---------------------------------------------------------------

_loss_marks = None  # while a host run records: the tensors identity_loss returned
_checkpoints = None  # while exporting: the tensors recomputationCheckpoint marked


def identity_loss(x, reduction):
    """PopTorch's identity_loss: x reduced ("sum", "mean", or "none" for a
    scalar x) and marked as the model's loss, which the backward pass starts
    from. A model returning several scalars names its loss this way."""
    if not torch.is_tensor(x):
        raise ValueError(f"poptorch.identity_loss: expected a tensor, got {type(x).__name__}")
    if reduction == "sum":
        out = x.sum()
    elif reduction == "mean":
        out = x.mean()
    elif reduction == "none":
        out = x * 1  # a tensor of its own, so that marking it marks only the loss
    else:
        raise ValueError(f"poptorch.identity_loss: reduction must be 'sum', 'mean' or 'none', "
                         f"got {reduction!r}")
    if _loss_marks is not None:
        _loss_marks.append(out)
    return out


# ---- arguments and outputs ---------------------------------------------------------

class _Slot:
    """A tensor argument's place in the call: graph input k."""
    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k

    def __eq__(self, other):
        return isinstance(other, _Slot) and other.k == self.k


def _template(value, name, tensors, names):
    """value with each tensor replaced by a _Slot (collected in tensors, named in names)."""
    if torch.is_tensor(value):
        tensors.append(value)
        names.append(name)
        return _Slot(len(tensors) - 1)
    if isinstance(value, (tuple, list)):
        items = [_template(v, f"{name}_{i}", tensors, names) for i, v in enumerate(value)]
        return type(value)(items) if type(value) in (tuple, list) else tuple(items)
    if isinstance(value, dict):
        return {k: _template(v, f"{name}_{k}", tensors, names) for k, v in value.items()}
    return value


def _fill(template, tensors):
    if isinstance(template, _Slot):
        return tensors[template.k]
    if isinstance(template, (tuple, list)):
        return type(template)(_fill(t, tensors) for t in template)
    if isinstance(template, dict):
        return {k: _fill(v, tensors) for k, v in template.items()}
    return template


class _Call:
    """How a call's arguments become graph inputs: the tensors in order, each
    named after its parameter; the rest of the call is kept as it was."""

    def __init__(self, model, args, kwargs, what):
        self.sig = inspect.signature(model.forward)
        try:
            bound = self.sig.bind(*args, **kwargs)
        except TypeError as e:
            raise ValueError(f"{what}: {type(model).__name__}.forward{self.sig} does not take "
                             f"these arguments ({e})") from None
        self.tensors, self.names = [], []
        self.template = collections.OrderedDict(
            (k, _template(v, k, self.tensors, self.names)) for k, v in bound.arguments.items())
        # the common call, tensors only and positional: no binding per step
        self.plain = not kwargs and all(torch.is_tensor(a) for a in args)
        self.n_args = len(args)

    def rebuild(self, tensors):
        """(args, kwargs) for the module, with these tensors in the slots."""
        b = inspect.BoundArguments(self.sig, collections.OrderedDict(
            (k, _fill(v, tensors)) for k, v in self.template.items()))
        return b.args, b.kwargs

    def flatten(self, model, args, kwargs, what):
        """A later call's tensors, in the compiled order; its other arguments
        must be those compiled in."""
        if self.plain and not kwargs and len(args) == self.n_args and \
                all(torch.is_tensor(a) for a in args):
            return args
        other = _Call(model, args, kwargs, what)
        if other.template != self.template:
            changed = [k for k in self.template if other.template.get(k, None) != self.template[k]]
            changed += [k for k in other.template if k not in self.template]
            raise ValueError(f"{what}: argument(s) {', '.join(changed)} differ from the call the model "
                             "was compiled for; non-tensor arguments (and where tensors are) are "
                             "fixed at compile time: call detachFromDevice() and call again to "
                             "recompile")
        return other.tensors


def _flat_outputs(out, what, path="output"):
    """The model's outputs as a flat list of tensors, and their structure (a
    _Slot per tensor inside the tuples and lists)."""
    flat = []

    def walk(v, p):
        if torch.is_tensor(v):
            flat.append(v)
            return _Slot(len(flat) - 1)
        if isinstance(v, (tuple, list)):
            return type(v)(walk(x, f"{p}[{i}]") for i, x in enumerate(v)) \
                if type(v) in (tuple, list) else tuple(walk(x, f"{p}[{i}]") for i, x in enumerate(v))
        if isinstance(v, dict):
            raise ValueError(f"{what}: {p} is a dict; return the tensors as a tuple (or a list) "
                             "instead")
        raise ValueError(f"{what}: {p} is {type(v).__name__}, not a tensor; the model's outputs "
                         "must be tensors, in tuples or lists")

    structure = walk(out, path)
    return flat, structure


def _reduce(x, reduction, what):
    if reduction == "mean":
        return x.mean()
    if reduction == "sum":
        return x.sum()
    if reduction == "none":
        return x
    raise ValueError(f"{what}: reduction {reduction!r} is not 'mean', 'sum' or 'none'")


def _mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    d = input - target
    return _reduce(d * d, reduction, "mse_loss")


def _l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    return _reduce((input - target).abs(), reduction, "l1_loss")


def _stochastic_depth(input, p, mode, training=True):
    """torchvision.ops.stochastic_depth as dropout of ones: a sample's (row)
    or the batch's keep mask, Bernoulli(1 - p) / (1 - p), is exactly
    F.dropout of a ones tensor of shape [N, 1, ...] (or [1, ...]), which
    exports as ONNX Dropout; torch 1.13 cannot export bernoulli_(p) at all.
    tilegraph's dropout draws from the session seed, the step, the
    micro-batch and the replica, so each replica drops its own samples."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"drop probability has to be between 0 and 1, but got {p}")
    if mode not in ("batch", "row"):
        raise ValueError(f"mode has to be either 'batch' or 'row', but got {mode}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    size = [input.shape[0] if mode == "row" else 1] + [1] * (input.ndim - 1)
    ones = torch.ones(size, dtype=input.dtype, device=input.device)
    return input * torch.nn.functional.dropout(ones, p, training=True)


@contextlib.contextmanager
def _exportable_losses():
    """torch 1.13 exports no ONNX for mse_loss and l1_loss (nn.MSELoss,
    nn.L1Loss): while exporting they are their elementwise definitions, which
    export as Sub, Mul or Abs and a reduction. torchvision's stochastic depth
    (EfficientNet, ConvNeXt, Swin in training) is dropout of ones the same
    way."""
    F = torch.nn.functional
    saved = F.mse_loss, F.l1_loss
    F.mse_loss, F.l1_loss = _mse_loss, _l1_loss
    # only if the model's code has imported it: never import torchvision here
    sd = sys.modules.get("torchvision.ops.stochastic_depth")
    saved_sd = getattr(sd, "stochastic_depth", None)
    if saved_sd is not None:
        sd.stochastic_depth = _stochastic_depth
    try:
        yield
    finally:
        F.mse_loss, F.l1_loss = saved
        if saved_sd is not None:
            sd.stochastic_depth = saved_sd


class _Forward(torch.nn.Module):
    """The user's module taking the call's tensors and returning its outputs
    flat; it is exported as `m` (so that weights keep their names after "m.")."""

    def __init__(self, module, call):
        super().__init__()
        self.m = module
        self._call = call

    def forward(self, *tensors):
        global _checkpoints
        args, kwargs = self._call.rebuild(tensors)
        _checkpoints = []
        try:
            flat, _ = _flat_outputs(self.m(*args, **kwargs), "poptorch")
            # recomputation checkpoints leave the export as extra outputs,
            # which is how the graph tensors they are become known
            return tuple(flat) + tuple(_checkpoints)
        finally:
            _checkpoints = None


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
    with warnings.catch_warnings():
        # torch's own notes on the export (about twenty UserWarnings and
        # TracerWarnings from torch's modules: training-mode export, constant
        # folding, shapes traced as constants) say nothing the user can act
        # on; warnings raised by the user's own code still show.
        warnings.filterwarnings("ignore", module=r"torch(\.|$)")
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


def _as_int32(x, name):
    """An integer (or bool) tensor as int32 for an i32 graph input: int64 is
    narrowed after checking that every value fits."""
    if x.is_floating_point() or x.is_complex():
        raise ValueError(f"poptorch: input '{name}' is {x.dtype}, but the model was compiled for "
                         "integers there; pass an integer tensor")
    a = x.detach().numpy()
    if a.dtype == np.int32:
        return a
    if a.dtype != np.bool_ and a.size:
        lo, hi = a.min(), a.max()
        if lo < _INT32[0] or hi > _INT32[1]:
            bad = int(lo if lo < _INT32[0] else hi)
            raise ValueError(f"poptorch: input '{name}' holds {bad}, outside int32's range "
                             f"[{_INT32[0]}, {_INT32[1]}]: tilegraph computes with int32, to which "
                             "int64 inputs are narrowed")
    return a.astype(np.int32)


# ONNX element types of inputs the host may give as float when the model only
# casts them to float (a mask given as int or bool, used as mask.float()).
_INT_TYPES = {onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.BOOL,
              onnx.TensorProto.INT16, onnx.TensorProto.INT8}
_FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
_VIEWS = {"Unsqueeze", "Squeeze", "Reshape", "Flatten", "Identity", "Transpose"}


def _retype_inputs(path):
    """Integer and bool inputs the model only casts to float (through views)
    become float inputs, their Casts Identity: the host converts them, exactly
    as the cast would. Other bool inputs become int32 (0/1). Returns whether
    the file changed."""
    model = onnx.load(path)
    graph = model.graph
    inits = {i.name for i in graph.initializer}
    users = collections.defaultdict(list)
    for node in graph.node:
        for name in node.input:
            users[name].append(node)
    changed = False
    for inp in graph.input:
        tt = inp.type.tensor_type
        if inp.name in inits or tt.elem_type not in _INT_TYPES:
            continue
        casts, stack, only_casts = [], [inp.name], True
        while stack and only_casts:
            value = stack.pop()
            for node in users[value]:
                to = next((a.i for a in node.attribute if a.name == "to"), None)
                if node.op_type == "Cast" and to in _FLOAT_TYPES:
                    casts.append(node)
                elif node.op_type in _VIEWS and node.input[0] == value:
                    stack.extend(node.output)
                else:
                    only_casts = False
        if only_casts and casts:
            tt.elem_type = onnx.TensorProto.FLOAT
            for node in casts:
                if next(a.i for a in node.attribute if a.name == "to") == onnx.TensorProto.FLOAT:
                    node.op_type = "Identity"
                    del node.attribute[:]
            changed = True
        elif tt.elem_type == onnx.TensorProto.BOOL:
            tt.elem_type = onnx.TensorProto.INT32
            changed = True
    if changed:
        onnx.save(model, path)
    return changed


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
        self._call = None
        self._anchors = []
        self._anchor_values = None

    @property
    def _what(self):
        return "poptorch.trainingModel" if self.training else "poptorch.inferenceModel"

    # ---- host batches -------------------------------------------------------------
    def _factor(self):
        """Samples of a host batch per sample of a micro-batch: in an MPI job
        this instance's replicas only (replicationFactor / instances)."""
        v = self.options.values
        acc = int(v.get("Training.gradientAccumulation", 1)) if self.training else 1
        return acc * int(v.get("deviceIterations", 1)) * _local_replicas(self.options)

    def _micro(self, tensors, names):
        """The micro-batch: every tensor input's first dimension is the host
        batch, split as every other input's."""
        if not tensors:
            raise ValueError(f"{self._what}: the call gives the model no tensor")
        f = self._factor()
        n = None
        for t, name in zip(tensors, names):
            if t.dim() < 1:
                raise ValueError(f"poptorch: input '{name}' is a 0-dim tensor; every tensor input "
                                 "needs a batch dimension (pass constants as Python numbers)")
            if n is None:
                n, first = t.shape[0], name
            elif t.shape[0] != n:
                raise ValueError(f"poptorch: input '{name}' has {t.shape[0]} samples but "
                                 f"'{first}' has {n}; every tensor input is split along its first "
                                 "(batch) dimension")
        if n % f:
            raise ValueError(f"poptorch: the host batch of {n} samples is not a multiple of "
                             f"gradientAccumulation x deviceIterations x replicationFactor = {f}; use "
                             "poptorch.DataLoader with the same options, or resize the batch")
        return n // f

    # ---- compiling ----------------------------------------------------------------
    def _record(self, micro_tensors):
        """Run the module once on the host, recording blocks and the loss."""
        global _loss_marks
        rec = _blocks.Recorder(self.model)
        was = self.model.training
        self.model.train(self.training)
        _loss_marks = []
        args, kwargs = self._call.rebuild(micro_tensors)
        try:
            with rec, torch.no_grad():
                result = self.model(*args, **kwargs)
            marks = _loss_marks
        finally:
            _loss_marks = None
            self.model.train(was)
        flat, structure = _flat_outputs(result, self._what)
        return flat, structure, marks, rec.blocks

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
        if getattr(strategy, "kind", None) == "phased":
            return self._phases(strategy, split, index)
        stages = "|".join(",".join(f"S{index[n]}" for n in g) for g in groups)
        v = {"split": split, "stages": stages}
        if strategy is None and len(groups) > 1:
            v["executionStrategy"] = "pipelined"
        return v


    @staticmethod
    def _phases(strategy, split, index):
        """The phases option of a PhasedExecution: its phases' blocks, and where the
        activations its backward needs are kept (setTensorsLiveness)."""
        phases = "|".join(",".join(f"S{index[n]}" for s in p.stages for n in s.blocks)
                          for p in strategy.phases)
        v = {"split": split, "phases": phases, "executionStrategy": "phased",
             "phasedExecutionType": strategy.phased_execution_type}
        if strategy.liveness != "AlwaysLive":
            v["TensorLocations.activation.onChip"] = "false"
        return v

    def _restore(self, buffers):
        with torch.no_grad():
            for k, v in self.model.named_buffers():
                v.copy_(buffers[k])

    def _export(self, micro_tensors, n_outputs, buffers):
        self._tmp = tempfile.TemporaryDirectory(prefix="tilegraph-")
        path = f"{self._tmp.name}/model.onnx"
        wrapper = _Forward(self.model, self._call)
        self._restore(buffers)
        was = self.model.training
        try:
            mode = torch.onnx.TrainingMode.TRAINING if self.training else torch.onnx.TrainingMode.EVAL
            with _quiet_onnx_log() as verbose, _exportable_losses():
                # verbose=True is what makes torch keep each node's Python
                # stack in its doc_string, which errors then point at. Opset 17
                # (the newest both torch 1.13 and the importer take) exports
                # torch's class losses as SoftmaxCrossEntropyLoss and
                # NegativeLogLikelihoodLoss, triu/tril as Trilu (opset 14) and
                # LayerNorm as one LayerNormalization, all of which the
                # importer maps.
                torch.onnx.export(wrapper, tuple(micro_tensors), path, training=mode,
                                  do_constant_folding=False, input_names=list(self._call.names),
                                  output_names=[f"output{i}" for i in range(n_outputs)],
                                  opset_version=17, verbose=verbose)
        except Exception as e:
            raise TilegraphError(f"poptorch: exporting {type(self.model).__name__} to ONNX failed: {e}") from e
        finally:
            self.model.train(was)
        _reset_buffers(path, buffers)
        _retype_inputs(path)
        self._anchors = _anchors.add_to_file(path, self.options.anchors, self._what)
        return path

    def _build(self, path, optimizer):
        """The graph: the imported model, and for training the backward pass of its loss output and the optimizer."""
        g = ffi.gc(lib.tg_graph_create(), lib.tg_graph_destroy)
        lib.tg_graph_set_training(g, self.training)
        m = ffi.new("tg_onnx_model **")
        try:
            check(lib.tg_onnx_load(path.encode(), m), f"poptorch: importing {type(self.model).__name__}")
            try:
                names = [ffi.string(lib.tg_onnx_input(m[0], i).name).decode()
                         for i in range(lib.tg_onnx_input_count(m[0]))]
                cfg = ffi.new("tg_onnx_build_config *", {"batch": self._micro_batch})
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
        # Graph inputs by the call's tensor they take; an input the model
        # does not use is not in the file and is not written.
        index = {n: k for k, n in enumerate(self._call.names)}
        self._inputs = [(index[n], io.inputs[i]) for i, n in enumerate(names) if n in index]
        self._plan = None
        self._outputs = [io.outputs[i] for i in range(min(io.n_outputs, self._n_outputs))]
        # the export's outputs, then recomputation checkpoints, then the anchors added to the file
        n_anchors = len(self._anchors)
        self._checkpoints = [io.outputs[i] for i in range(self._n_outputs, io.n_outputs - n_anchors)]
        self._anchor_outputs = [io.outputs[i] for i in range(io.n_outputs - n_anchors, io.n_outputs)]
        self._anchor_values = None
        for t in self._checkpoints:
            lib.tg_recomputation_checkpoint(g, t)
        by_k = dict(self._inputs)
        # The first two inputs and outputs under the names the C-API bench drives.
        self._input, self._labels = by_k.get(0), by_k.get(1)
        self._loss = self._outputs[self._loss_index] if self._loss_index is not None else None
        self._output = next((t for i, t in enumerate(self._outputs) if i != self._loss_index), None)
        if self.training:
            check(lib.tg_graph_backward(g, self._loss), "poptorch: the backward pass of the loss")
            check(lib.tg_graph_add_optimizer(g, optimizer.c()), "poptorch: the optimizer")
        if lib.tg_graph_status(g) != 0:
            raise TilegraphError("poptorch: " + ffi.string(lib.tg_graph_error(g)).decode())
        return g

    def _open_session(self, extra):
        values = dict(self.options.values)
        values.update(extra)
        self._session_values = values  # what the session was made with
        self._c_options = make_c_options(values)
        s = ffi.new("tg_session **")
        check(lib.tg_session_create(self._graph, self._c_options, s),
              f"poptorch: compiling {type(self.model).__name__}")
        # The graph must outlive the session (tilegraph/session.h): its
        # destructor holds the graph, so a model dropped at once (a
        # temporary) cannot free the graph first, whatever order Python
        # clears the model's attributes in.
        graph = self._graph
        return ffi.gc(s[0], lambda session: (lib.tg_session_destroy(session), graph))

    def _compile(self, args, kwargs):
        self._call = _Call(self.model, args, kwargs, self._what)
        tensors, names = self._call.tensors, self._call.names
        micro = self._micro(tensors, names)
        self._micro_batch = micro
        # The host run and the export run the module in training mode, which
        # moves batch-norm statistics: keep the buffers as they were.
        buffers = {k: v.clone() for k, v in self.model.named_buffers()}
        floats = [t for t in tensors if t.is_floating_point()]
        precision = self._precision(floats[0] if floats else tensors[0])
        if self._host_float:
            # model.half(): torch 1.13 has no half kernels on the CPU, so the
            # host run and the export use the module in float (exact for
            # half values); tilegraph stores it in half by `precision`.
            self.model.float()
            tensors = [t.float() if t.dtype in (torch.float16, torch.bfloat16) else t for t in tensors]
        micro_tensors = [t[:micro] for t in tensors]
        # A half cast inside the model (seed 003's ModelWithNormalization casts
        # 8-bit images to the input dtype) meets float modules in the host run:
        # every module takes half inputs as float there, as the export then shows.
        hooks = [m.register_forward_pre_hook(_float_inputs) for m in self.model.modules()
                 ] if self._host_float else []
        try:
            flat, self._structure, marks, recorded = self._record(micro_tensors)
            self._n_outputs = len(flat)
            self._loss_index = self._find_loss(flat, marks) if self.training else None
            placement = self._placement(recorded)
            progress = _Progress(f"Graph compilation: {type(self.model).__name__}, micro-batch {micro}")
            progress.stage(1, "exporting to ONNX")
            path = progress.run(self._export, micro_tensors, len(flat), buffers)
        finally:
            for h in hooks:
                h.remove()
            if self._host_float:
                self.model.to(self._model_dtype)
            self._restore(buffers)
        if precision is not None:
            placement = {**placement, "precision": precision}
        self._placement_values = placement
        progress.stage(2, "importing and building the graph")
        self._graph = progress.run(self._build, path, self.optimizer if self.training else None)
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

    def compile(self, *args, **kwargs):
        if self._graph is None:
            self._compile(args, kwargs)

    # ---- running ------------------------------------------------------------------
    def _tensors(self, args, kwargs):
        """The call's tensors, compiling on the first call."""
        if self._graph is None:
            self._before_compile()
            self._compile(args, kwargs)
            return self._call.tensors
        tensors = self._call.flatten(self.model, args, kwargs, self._what)
        return tensors

    def _before_compile(self):
        pass

    def _write_inputs(self, tensors):
        """Each graph input as the graph takes it: f32, i32 (int64 narrowed
        with a range check) or u8 (8-bit images, a quarter of the bytes)."""
        if self._plan is None:  # what each call checks, asked of the library once
            self._plan = [(k, t, self._call.names[k], self._dims(t)[1:], lib.tg_tensor_dtype(t))
                          for k, t in self._inputs]
            self._want = self._micro_batch * self._factor()
        for k, t, name, sample, dt in self._plan:
            x = tensors[k]
            if x.shape[0] != self._want:
                raise ValueError(f"poptorch: the model was compiled for host batches of {self._want} "
                                 f"samples, got {x.shape[0]} in input '{name}'")
            if x.shape[1:] != sample:
                raise ValueError(f"poptorch: input '{name}' has the sample shape {tuple(x.shape[1:])}, "
                                 f"not the compiled one {sample}")
            if dt == TG_F32:
                if x.is_complex():
                    raise ValueError(f"poptorch: input '{name}' is {x.dtype}, which the model cannot take")
                self._write(t, x.detach().float().numpy())
            elif dt == TG_I32:
                self._write(t, _as_int32(x, name))
            else:
                if x.dtype != torch.uint8:
                    raise ValueError(f"poptorch: the model was compiled for uint8 input '{name}', "
                                     f"got {x.dtype}")
                self._write(t, x.detach().numpy())

    def _write(self, t, array):
        a = np.ascontiguousarray(array)
        # Zero-copy: the session copies straight from the array's own memory.
        check(lib.tg_session_write(self._handle, t, ffi.from_buffer(a), a.nbytes),
              lambda: f"poptorch: writing {ffi.string(lib.tg_tensor_name(t)).decode()}")

    def _read_output(self, t):
        count = lib.tg_session_output_count(self._handle, t)
        dims = self._dims(t)
        # A new array per call: the returned tensor is the caller's to keep.
        integer = lib.tg_tensor_dtype(t) == TG_I32
        a = np.empty((count,) + dims, dtype=np.int32 if integer else np.float32)
        check(lib.tg_session_read(self._handle, t, ffi.from_buffer(a), a.nbytes),
              lambda: f"poptorch: reading {ffi.string(lib.tg_tensor_name(t)).decode()}")
        out = torch.from_numpy(a if len(dims) == 0 else a.reshape((count * dims[0],) + dims[1:]))
        # As PopTorch: a half model's outputs (and loss) come back in its type.
        if not integer and getattr(self, "_host_float", False) and self._model_dtype != torch.float32:
            out = out.to(self._model_dtype)
        return out

    def _results(self):
        """The outputs read back, in the structure the model returned them."""
        return _fill(self._structure, [self._read_output(t) for t in self._outputs])

    def _dims(self, t):
        """A graph tensor's dims, asked of the library once per compiled graph."""
        key = (self._graph, t)
        if self._dims_cache.get("graph") is not self._graph:
            self._dims_cache = {"graph": self._graph}
        dims = self._dims_cache.get(key)
        if dims is None:
            dims = self._dims_cache[key] = _tensor_dims(t)
        return dims

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

    def _ran(self):
        """After each run: the anchors' values are those of this run (read when asked)."""
        self._anchor_values = {}

    def getAnchoredTensors(self, short_name):
        """The values Options.anchorTensor(short_name, pattern) matched, as
        {name: tensor} in the graph's order, from the latest run; each shaped
        as an output is under outputMode."""
        anchor = next((a for a in self._anchors if a.short_name == short_name), None)
        if anchor is None:
            known = ", ".join(a.short_name for a in self._anchors) or "none"
            raise ValueError(f"{self._what}.getAnchoredTensor: no anchor '{short_name}' (anchored: "
                             f"{known}); name it with Options.anchorTensor before the first call")
        if self._anchor_values is None or self._handle is None:
            raise ValueError(f"{self._what}.getAnchoredTensor('{short_name}'): the model has not run "
                             "since it was compiled; call it first")
        if short_name not in self._anchor_values:
            t = self._anchor_outputs[self._anchors.index(anchor)]
            count = lib.tg_session_output_count(self._handle, t)
            flat = self._read_output(t).numpy()
            self._anchor_values[short_name] = collections.OrderedDict(
                (k, torch.from_numpy(np.ascontiguousarray(v)))
                for k, v in anchor.split(flat, count).items())
        return collections.OrderedDict(self._anchor_values[short_name])

    def getAnchoredTensor(self, short_name):
        """PopTorch's getAnchoredTensor: the anchored value from the latest
        run (getAnchoredTensors when the pattern matched several)."""
        values = self.getAnchoredTensors(short_name)
        if len(values) != 1:
            raise ValueError(f"{self._what}.getAnchoredTensor('{short_name}'): the pattern matched "
                             f"{len(values)} values; getAnchoredTensors('{short_name}') returns "
                             "them all by name")
        return next(iter(values.values()))

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
            from .optim import from_torch
            optimizer = from_torch(optimizer)
        self.optimizer = optimizer
        self._handle = None
        _live_training.add(self)

    def _extra_options(self):
        return self.optimizer.options()

    def _find_loss(self, flat, marks):
        """The index of the loss among the flat outputs: the one
        poptorch.identity_loss returned, else the only scalar."""
        shapes = ", ".join(str(tuple(t.shape)) for t in flat)
        how = ("compute the loss inside the model, e.g. forward(input, labels) returning "
               "(output, loss) with a torch loss (CrossEntropyLoss, NLLLoss, MSELoss, ...; reduction "
               "'mean' or 'sum') or poptorch.identity_loss(x, reduction)")
        marked = [i for i, t in enumerate(flat) if any(t is m for m in marks)]
        if marked:
            i = marked[0]
            if flat[i].dim() != 0:
                raise ValueError(f"{self._what}: the loss (poptorch.identity_loss, output {i}) has "
                                 f"shape {tuple(flat[i].shape)}; the loss must be a scalar: reduce "
                                 "it with reduction='sum' or 'mean'")
            return i
        if marks:
            raise ValueError(f"{self._what}: the model called poptorch.identity_loss but does not "
                             f"return its result (outputs: {shapes}); return it")
        scalars = [i for i, t in enumerate(flat) if t.dim() == 0 and t.is_floating_point()]
        if len(scalars) == 1:
            return scalars[0]
        if not scalars:
            raise ValueError(f"{self._what}: the model returned no scalar loss (outputs: {shapes}); "
                             f"{how}. A loss with reduction='none' must be reduced first")
        raise ValueError(f"{self._what}: the model returned {len(scalars)} scalars (outputs "
                         f"{', '.join(map(str, scalars))}); mark the loss with "
                         "poptorch.identity_loss(loss, 'none')")

    def __call__(self, *args, **kwargs):
        tensors = self._tensors(args, kwargs)
        self._write_inputs(tensors)
        check(lib.tg_session_run(self._handle), "poptorch: running the training step")
        self._ran()
        return self._results()

    def setOptimizer(self, optimizer):
        """A new optimizer (a new learning rate); the session keeps weights and state."""
        from .optim import _Optimizer, from_torch
        if not isinstance(optimizer, _Optimizer):
            optimizer = from_torch(optimizer)
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
        self._graph = self._build(f"{self._tmp.name}/model.onnx", optimizer)
        self._handle = self._open_session({**self._placement_values, **self._extra_options()})
        self._anchor_values = None
        check(lib.tg_session_copy_weights(self._handle, old), "poptorch.setOptimizer")
        lib.tg_session_set_step(self._handle, lib.tg_session_step(old))
        del old, old_graph


class InferenceModel(_Model):
    def __init__(self, model, options):
        super().__init__(model, options)
        self._handle = None

    def _before_compile(self):
        for tm in list(_live_training):  # PopTorch copies trained weights implicitly
            if tm.model is self.model or any(m is self.model for m in tm.model.modules()):
                tm.copyWeightsToHost()

    def __call__(self, *args, **kwargs):
        tensors = self._tensors(args, kwargs)
        self._write_inputs(tensors)
        check(lib.tg_session_run(self._handle), "poptorch: running inference")
        self._ran()
        return self._results()


def trainingModel(model, options=None, optimizer=None):
    return TrainingModel(model, options, optimizer)


def inferenceModel(model, options=None):
    return InferenceModel(model, options)


def recomputationCheckpoint(*tensors):
    """PopTorch's recomputationCheckpoint: with the option
    recomputation=pipeline the backward pass keeps these values and
    recomputes the activations after them. Returns its arguments."""
    for t in tensors:
        if not torch.is_tensor(t):
            raise ValueError("poptorch.recomputationCheckpoint: expected tensors, got "
                             f"{type(t).__name__}")
    if _checkpoints is not None:
        _checkpoints.extend(tensors)
    return tensors[0] if len(tensors) == 1 else tensors
