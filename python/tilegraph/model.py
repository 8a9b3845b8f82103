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

The parts: _export.py (the call, the outputs and the ONNX export),
_compiling.py (recording, placement, the library's graph and session),
_host_io.py (host batches, outputs, weights), _marks.py (identity_loss and
recomputationCheckpoint), _progress.py (the progress line).
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Optional, Union

import torch

from ._compiling import _Compiling
from ._host_io import _HostIO
from ._lib import check, lib
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

    @property
    def _what(self):
        return "poptorch.trainingModel" if self.training else "poptorch.inferenceModel"

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
        return self._results()

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

    def _before_compile(self):
        for tm in list(_live_training):  # PopTorch copies trained weights implicitly
            if tm.model is self.model or any(m is self.model for m in tm.model.modules()):
                tm.copyWeightsToHost()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tensors = self._tensors(args, kwargs)
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
