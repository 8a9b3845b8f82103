"""tilegraph._export - from a torch module and a call to the ONNX file the C
library imports: the call's tensors and the outputs' structure, the losses
and ops exported in forms the importer takes, the module wrapped for the
export, and messages that point at the user's code."""
from __future__ import annotations

import collections
import contextlib
import inspect
import linecache
import os
import re
import sys
import warnings

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from . import _marks, dist
from ._lib import ffi, lib

_INT32 = (-2 ** 31, 2 ** 31 - 1)


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


class _Mapping:
    """A dict among the outputs (a Hugging Face ModelOutput, an OrderedDict,
    a dict): its class and its items' structure, so that the outputs come
    back as the same class (out.loss, out.logits, out["logits"], out[0])."""
    __slots__ = ("cls", "items")

    def __init__(self, cls, items):
        self.cls, self.items = cls, items

    def build(self, tensors):
        values = {k: _fill(v, tensors) for k, v in self.items.items()}
        try:
            return self.cls(**values)  # ModelOutput and other dataclasses
        except TypeError:
            return self.cls(values)


def _fill(template, tensors):
    if isinstance(template, _Slot):
        return tensors[template.k]
    if isinstance(template, _Mapping):
        return template.build(tensors)
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
        if bound.arguments.get("past_key_values") is not None:
            raise ValueError(f"{what}: past_key_values is a key/value cache from an earlier call; "
                             "tilegraph compiles one graph of fixed shapes and does not run generation "
                             "with a growing cache: give the whole sequence each call, with "
                             "use_cache=False")
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
            _refuse_cache(v, what, p)
            return _Mapping(type(v), {k: walk(x, f"{p}.{k}") for k, x in v.items()})
        raise ValueError(f"{what}: {p} is {type(v).__name__}, not a tensor; the model's outputs "
                         "must be tensors, in tuples, lists or dicts")

    structure = walk(out, path)
    return flat, structure


def _refuse_cache(out, what, path):
    """A key/value cache among the outputs (a Hugging Face model with
    use_cache=True, as for generate()): tilegraph compiles one fixed graph,
    whose inputs cannot grow with each generated token."""
    if out.get("past_key_values") is not None:
        raise ValueError(f"{what}: {path}.past_key_values is a key/value cache (use_cache=True); "
                         "tilegraph compiles one graph of fixed shapes and does not run generation "
                         "with a growing cache: set model.config.use_cache = False (or pass "
                         "use_cache=False) and give the whole sequence each call")


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
        args, kwargs = self._call.rebuild(tensors)
        _marks.checkpoints = []
        try:
            flat, _ = _flat_outputs(self.m(*args, **kwargs), "poptorch")
            # recomputation checkpoints leave the export as extra outputs,
            # which is how the graph tensors they are become known
            return tuple(flat) + tuple(_marks.checkpoints)
        finally:
            _marks.checkpoints = None


PARAMETERS_KEY = "tilegraph.parameters"  # TG_ONNX_PARAMETERS_KEY of tilegraph/onnx.h


def trainable_names(module, optimizer=None, prefix=""):
    """The state_dict names (with `prefix`) of the parameters PyTorch would
    train: requires_grad, and in one of the optimizer's parameter groups when
    an optimizer is given. Buffers are never among them."""
    held = None
    if optimizer is not None:
        held = {id(p) for g in optimizer.param_groups for p in g["params"]}
    trained = {id(p) for p in module.parameters()
               if p.requires_grad and (held is None or id(p) in held)}
    # every name of a tied parameter (the export keeps one of them, either)
    return [prefix + n for n, t in module.state_dict(keep_vars=True).items() if id(t) in trained]


def set_parameters_list(model_proto, names):
    """Record in the file's metadata which initializers are trainable (the
    importer keeps every other float initializer fixed)."""
    present = {i.name for i in model_proto.graph.initializer}
    value = "\n".join(n for n in names if n in present)
    for prop in model_proto.metadata_props:
        if prop.key == PARAMETERS_KEY:
            prop.value = value
            return
    entry = model_proto.metadata_props.add()
    entry.key, entry.value = PARAMETERS_KEY, value


def _reset_buffers(path, buffers, trainable=None):
    """Put the buffers' values from before the export back into the file,
    and (`trainable`: names) record which initializers are parameters.

    Tracing in training mode runs batch norm once, so the exporter writes
    running statistics already moved by one update; the file must start from
    the module's own.
    """
    model = onnx.load(path)
    changed = trainable is not None
    for init in model.graph.initializer:
        value = buffers.get(init.name[2:]) if init.name.startswith("m.") else None
        if value is not None and value.is_floating_point():
            init.CopyFrom(numpy_helper.from_array(value.detach().cpu().float().numpy(), init.name))
            changed = True
    if trainable is not None:
        set_parameters_list(model, trainable)
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
        # the message may name the node as the user sees it, without the wrapper's "/m"
        node = nodes.get(name) or nodes.get("/m" + name)
        if node is None:
            continue
        name = node.name
        line = f"\n  {node.op_type} ('{name.replace('/m/', '/', 1)}') from {_module_of(name, model)}"
        frame = _user_frame(node.doc_string)
        if frame:
            code = linecache.getline(frame[0], frame[1]).strip()
            line += f", made at {frame[0]}:{frame[1]}" + (f": {code}" if code else "")
        out.append(line)
    return "".join(out)


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
    as the cast would. Other bool inputs stay bool: the importer takes them
    as int32 0/1, and the host sends them so (_as_int32). Returns whether the
    file changed."""
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
    if changed:
        onnx.save(model, path)
    return changed


def mark_parameters(path, model, optimizer=None):
    """Record in the ONNX file at `path`, exported from `model` with
    torch.onnx.export(..., do_constant_folding=False), which initializers
    are trainable: the parameters with requires_grad (and, given an
    optimizer, in its parameter groups). `tilegraph train --model FILE.onnx`
    then keeps every other float initializer - buffers such as a causal mask
    or an offset, frozen parameters - fixed, as PyTorch does. The file is
    rewritten atomically."""
    model_proto = onnx.load(path)
    set_parameters_list(model_proto, trainable_names(model, optimizer))
    tmp = f"{path}.tmp{os.getpid()}"
    onnx.save(model_proto, tmp)
    os.replace(tmp, path)
