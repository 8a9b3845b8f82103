"""tilegraph._surface - the rest of PopTorch's public API: each name either
works or raises TilegraphError naming it and saying why and what to do
(tests/python/poptorch_api_names.txt lists them; docs/python.md has the
table). A call is accepted without effect only where PopTorch's meaning
holds on tilegraph as it is (setPartialsType(torch.float32): partials are
float32 here)."""
from __future__ import annotations

import collections
import enum
import functools
import logging
from typing import Any, Callable, Optional

from ._enums import NamedIntEnum
from ._lib import TilegraphError


def refuse(name: str, why: str) -> None:
    raise TilegraphError(f"poptorch.{name}: {why}")


class ReductionType(NamedIntEnum):
    Sum = 0
    Mean = 1
    NoReduction = 2


class MeanReductionStrategy(NamedIntEnum):
    Running = 0
    Post = 1
    Default = 2


class AutoStage(NamedIntEnum):
    SameAsIpu = 0
    AutoIncrement = 1


class SyncPattern(NamedIntEnum):
    Full = 0
    SinglePipeline = 1
    ReplicaAndLadder = 2


class ConnectionType(NamedIntEnum):
    Always = 0
    OnDemand = 1
    Never = 2


class CommGroupType(NamedIntEnum):
    All = 0
    Consecutive = 1
    Orthogonal = 2
    NoGrouping = 3


class VariableRetrievalMode(NamedIntEnum):
    OnePerGroup = 0
    AllReduceReplicas = 1
    AllReplicas = 2


class HalfFloatCastingBehavior(NamedIntEnum):
    FloatDowncastToHalf = 0
    HalfUpcastToFloat = 1
    Default = 2


class MatMulSerializationMode(enum.Enum):
    InputChannels = "input_channels"
    ReducingDim = "reducing_dim"
    OutputChannels = "output_channels"
    Disabled = "none"


_NO_IPU = "there is no IPU hardware under tilegraph: it runs the model on the CPU"
_NO_EXECUTABLE = ("tilegraph writes no PopTorch executable files; Options.enableExecutableCaching(dir) "
                  "keeps compiled programs and loads them on the next run instead")


def ipuHardwareIsAvailable(num_ipus: int = 1) -> bool:
    """False: tilegraph runs on the CPU, never on IPU hardware."""
    return False


def ipuHardwareVersion() -> int:
    refuse("ipuHardwareVersion", _NO_IPU + "; branch on poptorch.ipuHardwareIsAvailable() instead")


_LOG_LEVELS = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
               "ERR": logging.ERROR, "OFF": logging.CRITICAL + 10}


def setLogLevel(level: Any) -> None:
    """The package logger's level ("tilegraph"): TRACE, DEBUG, INFO, WARN, ERR, OFF or 0..5."""
    names = list(_LOG_LEVELS)
    if isinstance(level, int) and not isinstance(level, bool) and 0 <= level < len(names):
        level = names[level]
    if not isinstance(level, str) or level.upper() not in _LOG_LEVELS:
        refuse("setLogLevel", f"level {level!r} is not one of {', '.join(names)} (or 0..5)")
    logging.getLogger("tilegraph").setLevel(_LOG_LEVELS[level.upper()])


def isRunningOnIpu() -> bool:
    """True while the model runs to be compiled (the host run and the export), as
    PopTorch's is True while it traces; False when it runs in plain PyTorch."""
    from . import _marks, blocks
    return blocks._recorder is not None or _marks.checkpoints is not None


def nop(tensor: Any) -> Any:
    """PopTorch's nop: the tensor itself (an identity the compiler keeps)."""
    return tensor


def serializedMatMul(lhs: Any, rhs: Any, mode: MatMulSerializationMode, factor: int = 0,
                     keep_precision: bool = False) -> Any:
    """lhs @ rhs: serialising a matmul splits its memory, not its result; tilegraph plans
    its memory itself, so the product is the same one matmul."""
    import torch
    if not isinstance(mode, MatMulSerializationMode):
        refuse("serializedMatMul", f"mode must be a poptorch.MatMulSerializationMode, got {mode!r}")
    return torch.matmul(lhs, rhs)


def removeBlocks(module: Any) -> Any:
    """Remove BeginBlock marks from module and its submodules."""
    for m in module.modules():
        m.__dict__.pop("_tg_begin_block", None)
    return module


def BlockFunction(user_id: Optional[str] = None, ipu_id: Optional[int] = None) -> Callable:
    """A decorator running the function inside poptorch.Block(user_id, ipu_id)."""
    from .blocks import Block

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            with Block(user_id, ipu_id):
                return fn(*args, **kwargs)
        return inner
    return wrap


def _refusing(name, why):
    def f(*_args, **_kwargs):
        refuse(name, why)
    f.__name__ = name
    f.__doc__ = f"Refused on tilegraph: {why}"
    return f


set_available_memory = _refusing(
    "set_available_memory", "tilegraph takes the available memory proportion per model, not per "
    "op: use Options.setAvailableMemoryProportion({'IPU0': p})")
ipu_print_tensor = _refusing(
    "ipu_print_tensor", "tilegraph cannot print from inside the compiled graph; return the tensor "
    "as an output, or anchor it (Options.anchorTensor) and read it with getAnchoredTensor")
custom_op = _refusing("custom_op", "tilegraph has no custom-op interface for PopART ops; write "
                      "the op in torch operations that export to ONNX")
for_loop = _refusing("for_loop", "tilegraph unrolls nothing at run time; write the loop in Python "
                     "(it is unrolled when the model is exported)")
cond = _refusing("cond", "tilegraph has no run-time branch; compute both branches and select with "
                 "torch.where")
ctc_beam_search_decoder = _refusing("ctc_beam_search_decoder", "not implemented by tilegraph; "
                                    "decode on the host from the returned log probabilities")
load = _refusing("load", _NO_EXECUTABLE)


class OverlapMode(enum.Enum):
    NoOverlap = "no_overlap"
    OverlapAccumulationLoop = "overlap_accumulation_loop"
    OverlapDeviceIterationLoop = "overlap_device_iteration_loop"


set_overlap_for_input = _refusing(
    "set_overlap_for_input", "tilegraph streams inputs itself (the host step's batches are "
    "written before the run); there are no I/O tiles to overlap on the CPU; remove the call")
set_overlap_for_output = _refusing(
    "set_overlap_for_output", "tilegraph copies outputs out after the run; there are no I/O tiles "
    "to overlap on the CPU; remove the call")


class NameScope:
    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        refuse("NameScope", "tilegraph names ops by the exporter's module scopes "
               "(/encoder/layer.1/...), which anchorTensor patterns match; remove the context")


class Attribute:
    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        refuse("Attribute", "there is no PopART under tilegraph, so no PopART op attributes; "
               "remove the context")


class MultiConv:
    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        refuse("MultiConv", "tilegraph plans each convolution on its own; remove the "
               "poptorch.MultiConv() context (the convolutions compute the same without it)")


class CPU:
    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        refuse("CPU", "tilegraph runs the whole model in its graph; there is no host callback: "
               "run that layer before or after the model in plain PyTorch")


# registerPreCompileHook / registerPostCompileHook: called around every compile
precompile_hooks: "collections.OrderedDict[int, Callable]" = collections.OrderedDict()
postcompile_hooks: "collections.OrderedDict[int, Callable]" = collections.OrderedDict()


def _register(hooks, hook, which):
    import torch.utils.hooks
    if not callable(hook):
        refuse(which, f"the hook must be callable, got {type(hook).__name__}")
    handle = torch.utils.hooks.RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def registerPreCompileHook(hook: Callable) -> Any:
    """Call hook() before each model compiles; returns a handle with remove()."""
    return _register(precompile_hooks, hook, "registerPreCompileHook")


def registerPostCompileHook(hook: Callable) -> Any:
    """Call hook() after each model compiles; returns a handle with remove()."""
    return _register(postcompile_hooks, hook, "registerPostCompileHook")


def run_hooks(hooks):
    for hook in list(hooks.values()):
        hook()
