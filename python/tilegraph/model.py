"""tilegraph.model - poptorch.trainingModel and inferenceModel.

A model is compiled on its first call: the torch module runs once on the host
(to record blocks, the outputs' structure and, for training, which output is
the loss), its whole forward - the loss included - is exported to ONNX in a
temporary directory, imported by the C library, given the backward pass of
the loss output and the optimizer by the library, and run in a tilegraph
session. Weights stay in the session between calls; copyWeightsToHost()
writes them back into the torch module under their state_dict names, and
reading the module after a step does so implicitly (_host_sync.py). Only
what PyTorch trains is trained: parameters with requires_grad in the
optimizer's groups; buffers and the rest stay fixed.

A call takes the forward's own signature: every tensor argument (positional
or keyword, also inside tuples, lists and dicts) is a graph input; anything
else (None, numbers, strings) is baked in at compile time.

The parts: _export.py (the call, the outputs and the ONNX export),
_compiling.py (recording, placement, the library's graph and session),
_host_io.py (host batches, outputs, weights), _marks.py (identity_loss and
recomputationCheckpoint), _progress.py (the progress line).
"""
from __future__ import annotations

import tempfile
import weakref
from typing import TYPE_CHECKING, Any, Optional, Union

import torch

from . import _host_sync, _surface
from ._compiling import _Compiling
from ._host_io import _HostIO
from ._lib import TilegraphError, check, lib
from ._marks import identity_loss, recomputationCheckpoint
from .options import Options

if TYPE_CHECKING:
    from .optim import _Optimizer

__all__ = ["InferenceModel", "TrainingModel", "identity_loss", "inferenceModel",
           "recomputationCheckpoint", "trainingModel"]

_live_training: "weakref.WeakSet[TrainingModel]" = weakref.WeakSet()


class _Model(_Compiling, _HostIO):
    training = False

    def __init__(self, model: torch.nn.Module, options: Optional[Options]) -> None:
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
        self._weights_dirty = False  # a step has run since the weights were copied to the host

    @property
    def _what(self):
        return "poptorch.trainingModel" if self.training else "poptorch.inferenceModel"

    def isCompiled(self) -> bool:
        """Whether the model has been compiled and not destroyed (it stays so when
        detached)."""
        return self._call is not None

    def copyWeightsToHostIfNeeded(self) -> bool:
        """Copy the weights to the host if a training step has run since the last
        copy; whether it copied."""
        if not self._weights_dirty:
            return False
        self.copyWeightsToHost()
        return True

    def attachToDevice(self) -> None:
        """Attach again after detachFromDevice: recompile for the call it was compiled
        for (a training model with the optimizer state it was detached with)."""
        if self._call is None:
            raise TilegraphError(f"{self._what}.attachToDevice: the model has not been compiled; "
                                 "call it (or its compile()) first")
        if self._graph is not None:
            raise TilegraphError(f"{self._what}.attachToDevice: the model is attached already")
        args, kwargs = self._call.rebuild(self._call.tensors)
        self._before_compile()
        self._compile(args, kwargs)

    def destroy(self) -> None:
        """PopTorch's destroy: free the session and everything it holds; the next
        call compiles again."""
        self._handle = self._graph = None
        self._tmp = self._call = None

    def save(self, filename: str, export_model: bool = True, save_rng_state: bool = True) -> None:
        raise TilegraphError(f"{self._what}.save: {_surface._NO_EXECUTABLE}; torch.save("
                             "model.state_dict()) keeps the trained weights")

    def compileAndExport(self, filename: str, *args: Any, **kwargs: Any) -> None:
        raise TilegraphError(f"{self._what}.compileAndExport: {_surface._NO_EXECUTABLE}")

    def loadExecutable(self, filename: str) -> None:
        raise TilegraphError(f"{self._what}.loadExecutable: {_surface._NO_EXECUTABLE}")

    def cycleCount(self) -> int:
        raise TilegraphError(f"{self._what}.cycleCount: tilegraph's devices count no cycles; "
                             "the execution profile (Options.enableProfiling()) times each step")

    def getPerfCounters(self) -> Any:
        raise TilegraphError(f"{self._what}.getPerfCounters: tilegraph records no per-call host "
                             "I/O counters; the execution profile (Options.enableProfiling()) "
                             "times each step's stages")

    def _latency(self, name):
        raise TilegraphError(f"{self._what}.{name}: tilegraph records no per-call host I/O "
                             "timestamps (see getPerfCounters); the execution profile "
                             "(Options.enableProfiling()) times each step")

    def getComputeLatency(self) -> Any:
        self._latency("getComputeLatency")

    def getHostIpuLatency(self) -> Any:
        self._latency("getHostIpuLatency")

    def getIpuHostLatency(self) -> Any:
        self._latency("getIpuHostLatency")

    def getLatency(self) -> Any:
        self._latency("getLatency")

    def getTensorNames(self) -> Any:
        raise TilegraphError(f"{self._what}.getTensorNames: tilegraph names the exported graph's "
                             "values by regular expression: Options.anchorTensor(name, pattern) "
                             "lists what a pattern matches when it matches none")

    def __getattr__(self, name: str) -> Any:
        # Like PopTorch's wrapper, the rest is the torch module's (model.eval(), ...).
        model = self.__dict__.get("model")
        if model is None:
            raise AttributeError(name)
        if name == "generate" and hasattr(model, "generate"):
            # Hugging Face's generate() would run the torch module on the host,
            # silently, with a key/value cache whose shapes grow every token.
            raise AttributeError(f"poptorch: {type(model).__name__}.generate() is not run by tilegraph "
                                 "(it decodes with a growing key/value cache; tilegraph compiles fixed "
                                 "shapes): call the model on the whole, padded sequence with "
                                 "use_cache=False and pick the next token from out.logits")
        return getattr(model, name)


class TrainingModel(_Model):
    training = True

    def __init__(self, model: torch.nn.Module, options: Optional[Options],
                 optimizer: Optional[Union[_Optimizer, torch.optim.Optimizer]]) -> None:
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
        self._sync_installed = False
        self._kept = None  # while detached: the session's state, saved on the host
        self._host_weights_version = 0  # copies to the host so far (inference models follow it)
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

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tensors = self._tensors(args, kwargs)
        self._write_inputs(tensors)
        check(lib.tg_session_run(self._handle), "poptorch: running the training step")
        self._ran()
        if not self._sync_installed:
            _host_sync.install(self)
            self._sync_installed = True
        self._weights_dirty = True
        return self._results()

    def copyWeightsToHost(self) -> None:
        super().copyWeightsToHost()
        self._host_weights_version += 1

    def _keep_state(self):
        """Detaching: the optimizer state (Adam's moments, momentum), the step
        count and the loss-scale state, saved to a host file until the model
        is attached again (PopTorch keeps them too)."""
        _host_sync.uninstall(self)
        self._sync_installed = False
        self._kept = tempfile.TemporaryDirectory(prefix="tilegraph-detached-")
        path = f"{self._kept.name}/state.safetensors"
        check(lib.tg_checkpoint_save(self._handle, path.encode(), b"poptorch"),
              f"{self._what}.detachFromDevice: keeping the optimizer state")

    def _after_compile(self):
        if not self._sync_installed:  # reads of the module copy trained weights from now on
            _host_sync.install(self)
            self._sync_installed = True
        if self._kept is None:
            return
        kept, self._kept = self._kept, None
        path = f"{kept.name}/state.safetensors"
        check(lib.tg_checkpoint_load(self._handle, path.encode(), b"poptorch"),
              f"{self._what}: restoring the optimizer state kept when it was detached "
              "(the model's parameters must be those it was detached with)")
        # The host's weights win: they are what the user sees (and may have set).
        self.copyWeightsToDevice()
        kept.cleanup()

    def destroy(self) -> None:
        """PopTorch's destroy: free the session and everything it holds; the
        module keeps the weights of the latest step."""
        if self._graph is not None:
            self.copyWeightsToHost()
        _host_sync.uninstall(self)
        self._sync_installed = False
        self._handle = self._graph = None
        self._tmp = self._kept = self._call = None

    def setOptimizer(self, optimizer: Union[_Optimizer, torch.optim.Optimizer]) -> None:
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
    def __init__(self, model: torch.nn.Module, options: Optional[Options]) -> None:
        super().__init__(model, options)
        self._handle = None
        self._seen = (None, None)  # (training model, its weights version) last copied here

    def _trainer(self):
        for tm in list(_live_training):
            if tm.model is self.model or any(m is self.model for m in tm.model.modules()):
                return tm
        return None

    def _before_compile(self):
        tm = self._trainer()  # PopTorch copies trained weights implicitly
        if tm is not None:
            tm.copyWeightsToHost()
            self._seen = (weakref.ref(tm), tm._host_weights_version)

    def _follow_training(self):
        """As PopTorch: an inference model of a module that a trainingModel trains
        runs with the latest trained weights (copied when a step has run since)."""
        tm = self._trainer()
        if tm is None:
            return
        tm.copyWeightsToHostIfNeeded()
        ref, version = self._seen
        if ref is None or ref() is not tm or version != tm._host_weights_version:
            self.copyWeightsToDevice()
            self._seen = (weakref.ref(tm), tm._host_weights_version)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        compiled = self._graph is not None
        tensors = self._tensors(args, kwargs)
        if compiled and _live_training:
            self._follow_training()
        self._write_inputs(tensors)
        check(lib.tg_session_run(self._handle), "poptorch: running inference")
        self._ran()
        return self._results()


def trainingModel(model: torch.nn.Module, options: Optional[Options] = None,
                  optimizer: Optional[Union[_Optimizer, torch.optim.Optimizer]] = None
                  ) -> TrainingModel:
    return TrainingModel(model, options, optimizer)


def inferenceModel(model: torch.nn.Module, options: Optional[Options] = None) -> InferenceModel:
    return InferenceModel(model, options)
