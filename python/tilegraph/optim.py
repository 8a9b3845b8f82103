"""tilegraph.optim - poptorch.optim.SGD/Adam/AdamW/LAMB as tilegraph optimizers.

Each keeps PopTorch's arguments and turns them into the C library's
tg_optimizer (the update rules are the library's) plus the session options
they imply (loss scaling, accumulator and momentum types). Parameter groups
(dicts with "params" and their own lr, weight_decay, ...) become one
tg_optimizer per group (tg_graph_add_optimizer_groups); parameters in no
group are not trained.
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
    # the settings a parameter group may give (PyTorch's per-group options)
    _group_keys: Tuple[str, ...] = ("lr", "weight_decay")

    def __init__(self, params: Iterable[Any], lr: float, weight_decay: float = 0.0,
                 loss_scaling: Optional[float] = None, accum_type: Any = None,
                 first_order_momentum_accum_type: Any = None,
                 second_order_momentum_accum_type: Any = None,
                 max_grad_norm: Optional[float] = None, **_ignored: Any) -> None:
        self.weight_decay = weight_decay
        self.loss_scaling = loss_scaling
        self.max_grad_norm = max_grad_norm
        self.types = {"accumType": _dtype(accum_type, "accum_type"),
                      "firstOrderMomentumAccumType":
                          _dtype(first_order_momentum_accum_type, "first_order_momentum_accum_type"),
                      "secondOrderMomentumAccumType":
                          _dtype(second_order_momentum_accum_type, "second_order_momentum_accum_type")}
        self.param_groups = self._groups(params, lr)
        self.c()  # validate now, so a bad argument fails where it was given

    def _groups(self, params, lr):
        """PyTorch's parameter groups: the parameters, or dicts {"params": [...],
        "lr": ..., ...}; a group's settings default to the constructor's."""
        params = list(params)
        if not params or not isinstance(params[0], dict):
            return [{"params": params, "lr": lr}]
        groups = []
        for k, g in enumerate(params):
            if not isinstance(g, dict) or "params" not in g:
                raise ValueError(f"poptorch.optim.{type(self).__name__}: parameter group {k} is not "
                                 "a dict with \"params\" (give parameters, or only dicts)")
            unknown = sorted(set(g) - {"params"} - set(self._group_keys))
            if unknown:
                raise ValueError(f"poptorch.optim.{type(self).__name__}: parameter group {k} sets "
                                 f"{', '.join(unknown)}, which a group cannot set on tilegraph "
                                 f"(a group may set {', '.join(self._group_keys)}); give it to the "
                                 "optimizer itself")
            ps = g["params"]
            ps = [ps] if torch.is_tensor(ps) else list(ps)
            groups.append({"lr": lr, **{key: v for key, v in g.items() if key != "params"},
                           "params": ps})
        return groups

    @property
    def lr(self) -> float:
        return self.param_groups[0]["lr"]

    def _fill(self, o, group):
        pass

    def _setting(self, group, key):
        return group.get(key, getattr(self, key))

    def _c_group(self, group) -> Any:
        o = ffi.new("tg_optimizer *", type(self)._maker(float(group["lr"])))
        o.weight_decay = float(self._setting(group, "weight_decay"))
        if self.max_grad_norm is not None:
            o.max_grad_norm = float(self.max_grad_norm)
        self._fill(o, group)
        if lib.tg_optimizer_validate(o) != 0:
            which = f" (parameter group {self.param_groups.index(group)})" \
                if len(self.param_groups) > 1 else ""
            raise ValueError(f"poptorch.optim.{type(self).__name__}{which}: {message()}")
        return o

    def c(self) -> Any:
        """The tg_optimizer for the first group's settings (every group's are checked)."""
        return [self._c_group(g) for g in self.param_groups][0]

    def c_groups(self) -> Any:
        """A tg_optimizer array, one per group, and each parameter's group (by id)."""
        opts = ffi.new("tg_optimizer[]", len(self.param_groups))
        for k, g in enumerate(self.param_groups):
            opts[k] = self._c_group(g)[0]
        return opts, {id(p): k for k, g in enumerate(self.param_groups) for p in g["params"]}

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
    _group_keys = ("lr", "weight_decay", "momentum", "dampening", "nesterov")

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                 **kw: Any) -> None:
        self.momentum, self.dampening, self.nesterov = momentum, dampening, nesterov
        super().__init__(params, lr, weight_decay, **kw)

    def _fill(self, o, group):
        o.momentum = self._setting(group, "momentum")
        o.dampening = self._setting(group, "dampening")
        o.nesterov = bool(self._setting(group, "nesterov"))


class _AdamLike(_Optimizer):
    _group_keys = ("lr", "weight_decay", "betas", "eps", "bias_correction")

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float = 0.001,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: Optional[float] = None, bias_correction: bool = True,
                 **kw: Any) -> None:
        self.betas, self.eps, self.bias_correction = betas, eps, bias_correction
        if weight_decay is None:
            weight_decay = self._default_decay
        super().__init__(params, lr, weight_decay, **kw)

    def _fill(self, o, group):
        o.beta1, o.beta2 = self._setting(group, "betas")
        o.eps = self._setting(group, "eps")
        o.bias_correction = bool(self._setting(group, "bias_correction"))


class Adam(_AdamLike):
    _maker = staticmethod(lambda lr: lib.tg_optimizer_adam(lr))
    _default_decay = 0.0


class AdamW(_AdamLike):
    _maker = staticmethod(lambda lr: lib.tg_optimizer_adamw(lr))
    _default_decay = 0.01


class LAMB(_AdamLike):
    _maker = staticmethod(lambda lr: lib.tg_optimizer_lamb(lr))
    _default_decay = 0.01
    _group_keys = _AdamLike._group_keys + ("max_weight_norm",)

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float = 0.001,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: Optional[float] = None, bias_correction: bool = True,
                 max_weight_norm: Optional[float] = None, **kw: Any) -> None:
        self.max_weight_norm = max_weight_norm
        super().__init__(params, lr, betas, eps, weight_decay, bias_correction, **kw)

    def _fill(self, o, group):
        super()._fill(o, group)
        norm = self._setting(group, "max_weight_norm")
        if norm is not None:
            o.max_weight_norm = float(norm)


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
    (PopTorch accepts torch's optimizers too), parameter groups and their
    settings included."""
    name = type(optimizer).__name__
    if name not in _FROM_TORCH or not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(f"poptorch.trainingModel: optimizer must be a poptorch.optim optimizer (SGD, "
                         f"Adam, AdamW, LAMB) or torch.optim.SGD, Adam or AdamW, got {name}")
    groups = optimizer.param_groups
    cls, keys = _FROM_TORCH[name]
    for k, g in enumerate(groups):
        for key, ok in _TORCH_DEFAULTS_OK.items():
            if g.get(key, ok) not in (ok, None, False):
                where = f" (parameter group {k})" if len(groups) > 1 else ""
                raise ValueError(f"poptorch.trainingModel: torch.optim.{name}({key}={g[key]!r})"
                                 f"{where} is not supported; leave {key} at its default")
    first = groups[0]
    return cls([{"params": g["params"], **{k: g[k] for k in keys}} for g in groups],
               **{k: first[k] for k in keys})


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
