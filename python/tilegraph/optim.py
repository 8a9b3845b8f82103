"""tilegraph.optim - poptorch.optim.SGD/Adam/AdamW/LAMB as tilegraph optimizers.

Each keeps PopTorch's arguments and turns them into the C library's
tg_optimizer (the update rules are the library's) plus the session options
they imply (loss scaling, accumulator and momentum types).
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, Optional, Tuple

import math

import torch

from ._lib import ffi, lib, message

_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", None: None}


def _dtype(value, name):
    if value not in _DTYPES:
        raise ValueError(f"poptorch.optim: {name} must be torch.float32, torch.float16 or "
                         f"torch.bfloat16, got {value!r}")
    return _DTYPES[value]


class _Optimizer:
    _maker = None

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, weight_decay: float = 0.0,
                 loss_scaling: Optional[float] = None, accum_type: Any = None,
                 first_order_momentum_accum_type: Any = None,
                 second_order_momentum_accum_type: Any = None,
                 max_grad_norm: Optional[float] = None, **_ignored: Any) -> None:
        self.param_groups = [{"params": list(params), "lr": lr}]
        self.weight_decay = weight_decay
        self.loss_scaling = loss_scaling
        self.max_grad_norm = max_grad_norm
        self.types = {"accumType": _dtype(accum_type, "accum_type"),
                      "firstOrderMomentumAccumType":
                          _dtype(first_order_momentum_accum_type, "first_order_momentum_accum_type"),
                      "secondOrderMomentumAccumType":
                          _dtype(second_order_momentum_accum_type, "second_order_momentum_accum_type")}
        self.c()  # validate now, so a bad argument fails where it was given

    @property
    def lr(self) -> float:
        return self.param_groups[0]["lr"]

    def _fill(self, o):
        pass

    def c(self) -> Any:
        """The tg_optimizer for the current settings."""
        o = ffi.new("tg_optimizer *", type(self)._maker(float(self.lr)))
        o.weight_decay = float(self.weight_decay)
        if self.max_grad_norm is not None:
            o.max_grad_norm = float(self.max_grad_norm)
        self._fill(o)
        if lib.tg_optimizer_validate(o) != 0:
            raise ValueError(f"poptorch.optim.{type(self).__name__}: {message()}")
        return o

    def options(self) -> Dict[str, str]:
        """Session options the optimizer implies."""
        v = {k: t for k, t in self.types.items() if t is not None}
        if self.loss_scaling not in (None, 1, 1.0):
            if not (self.loss_scaling > 0 and math.isfinite(self.loss_scaling)):
                raise ValueError(f"poptorch.optim: loss_scaling must be positive, got {self.loss_scaling}")
            v["lossScaling"] = "static"
            v["lossScalingFactor"] = str(self.loss_scaling)
        return v

    def state_dict(self) -> Dict[str, Any]:
        return {"lr": self.lr}


class SGD(_Optimizer):
    _maker = staticmethod(lambda lr: lib.tg_optimizer_sgd(lr, 0.0))

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                 **kw: Any) -> None:
        self.momentum, self.dampening, self.nesterov = momentum, dampening, nesterov
        super().__init__(params, lr, weight_decay, **kw)

    def _fill(self, o):
        o.momentum, o.dampening, o.nesterov = self.momentum, self.dampening, bool(self.nesterov)


class _AdamLike(_Optimizer):
    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float = 0.001,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: Optional[float] = None, bias_correction: bool = True,
                 **kw: Any) -> None:
        self.betas, self.eps, self.bias_correction = betas, eps, bias_correction
        if weight_decay is None:
            weight_decay = self._default_decay
        super().__init__(params, lr, weight_decay, **kw)

    def _fill(self, o):
        o.beta1, o.beta2 = self.betas
        o.eps = self.eps
        o.bias_correction = bool(self.bias_correction)


class Adam(_AdamLike):
    _maker = staticmethod(lambda lr: lib.tg_optimizer_adam(lr))
    _default_decay = 0.0


class AdamW(_AdamLike):
    _maker = staticmethod(lambda lr: lib.tg_optimizer_adamw(lr))
    _default_decay = 0.01


class LAMB(_AdamLike):
    _maker = staticmethod(lambda lr: lib.tg_optimizer_lamb(lr))
    _default_decay = 0.01

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float = 0.001,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: Optional[float] = None, bias_correction: bool = True,
                 max_weight_norm: Optional[float] = None, **kw: Any) -> None:
        self.max_weight_norm = max_weight_norm
        super().__init__(params, lr, betas, eps, weight_decay, bias_correction, **kw)

    def _fill(self, o):
        super()._fill(o)
        if self.max_weight_norm is not None:
            o.max_weight_norm = float(self.max_weight_norm)


# torch.optim's classes and the settings each carries that tilegraph's
# update rules follow; any other setting (amsgrad, maximize, ...) left at a
# non-default value is refused rather than silently dropped.
_FROM_TORCH = {
    "SGD": (SGD, ("lr", "momentum", "dampening", "weight_decay", "nesterov")),
    "Adam": (Adam, ("lr", "betas", "eps", "weight_decay")),
    "AdamW": (AdamW, ("lr", "betas", "eps", "weight_decay")),
}
_TORCH_DEFAULTS_OK = {"amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
                      "differentiable": False, "fused": None}


def from_torch(optimizer: torch.optim.Optimizer) -> _Optimizer:
    """A torch.optim SGD, Adam or AdamW as the same poptorch.optim optimizer
    (PopTorch accepts torch's optimizers too). One parameter group: the
    library applies one set of hyperparameters to every weight."""
    name = type(optimizer).__name__
    if name not in _FROM_TORCH or not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(f"poptorch.trainingModel: optimizer must be a poptorch.optim optimizer (SGD, "
                         f"Adam, AdamW, LAMB) or torch.optim.SGD, Adam or AdamW, got {name}")
    groups = optimizer.param_groups
    cls, keys = _FROM_TORCH[name]
    first = groups[0]
    for g in groups[1:]:
        differ = [k for k in keys if g.get(k) != first.get(k)]
        if differ:
            raise ValueError(f"poptorch.trainingModel: torch.optim.{name} has parameter groups with "
                             f"different {', '.join(differ)}; tilegraph applies one setting to every "
                             f"weight: use one group")
    for k, ok in _TORCH_DEFAULTS_OK.items():
        if first.get(k, ok) not in (ok, None, False):
            raise ValueError(f"poptorch.trainingModel: torch.optim.{name}({k}={first[k]!r}) is not "
                             f"supported; leave {k} at its default")
    params = [p for g in groups for p in g["params"]]
    return cls(params, **{k: first[k] for k in keys})


class RMSprop:
    """Refused: the C library's update rules are SGD, Adam, AdamW and LAMB."""

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        from ._surface import refuse
        refuse("optim.RMSprop", "tilegraph's library has no RMSprop update rule (it has SGD, "
               "Adam, AdamW and LAMB); use poptorch.optim.Adam, whose second moment is "
               "RMSprop's with momentum on the gradient")


class VariableAttributes:
    """Refused: tilegraph's optimizers take every setting as a constructor argument."""

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        from ._surface import refuse
        refuse("optim.VariableAttributes", "tilegraph's optimizers have no variable/constant "
               "attribute split: every setting can change with setOptimizer")
