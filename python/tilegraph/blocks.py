"""tilegraph.blocks - poptorch.Block and BeginBlock, recorded while the model runs.

Blocks do nothing while the model runs in plain PyTorch. While a trainingModel
or inferenceModel compiles, a Recorder runs the model once on the host with a
forward pre-hook on every module: the first module that starts inside each
block is that block's split point, which tilegraph's `split` option turns
into a block of the imported graph (the importer keeps PyTorch's module names
as scopes). Blocks must therefore each begin with a module call and follow
each other in the model, as pipeline stages do.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, TypeVar

if TYPE_CHECKING:
    import torch

_recorder: Optional[Recorder] = None

M = TypeVar("M", bound="torch.nn.Module")


class Recorder:
    """The blocks seen during one host run of a module, in order of first use."""

    def __init__(self, module):
        self.current = None  # (name, ipu_id)
        self.blocks = []  # [name, first module name or None, ipu_id]
        self._before = None
        self._names = {id(m): n for n, m in module.named_modules()}
        self._handles = [m.register_forward_pre_hook(self._pre) for m in module.modules()]

    def _pre(self, module, _inputs):
        begin = getattr(module, "_tg_begin_block", None)
        if begin is not None:
            self.enter(*begin)
        name = self._names.get(id(module), "")
        if self.current is None and not self.blocks and name and self._before is None and \
                next(module.children(), None) is None:
            self._before = name  # the first layer that runs before any block
        for b in self.blocks:
            if self.current and b[0] == self.current[0] and b[1] is None and name:
                b[1] = name

    def enter(self, name, ipu_id):
        if not self.blocks and self._before is not None and name != _auto_name(0):
            # Layers that ran before the first block (a BeginBlock further
            # on) go on device 0, as PopTorch places them.
            self.blocks.append([_auto_name(0), self._before, 0])
        self.current = (name, ipu_id)
        if not any(b[0] == name for b in self.blocks):
            self.blocks.append([name, None, ipu_id])

    def __enter__(self):
        global _recorder
        _recorder = self
        return self

    def __exit__(self, *exc):
        global _recorder
        _recorder = None
        for h in self._handles:
            h.remove()
        return False


def _auto_name(ipu_id):
    return f"ipu{ipu_id}"


class Block:
    """with poptorch.Block("B1"): ... or with poptorch.Block(ipu_id=1): ..."""

    def __init__(self, user_id: Optional[str] = None, ipu_id: Optional[int] = None) -> None:
        if user_id is None and ipu_id is None:
            raise ValueError("poptorch.Block: give a block name (Block(\"B1\")) or ipu_id")
        if ipu_id is not None and (isinstance(ipu_id, bool) or not isinstance(ipu_id, int) or ipu_id < 0):
            raise ValueError(f"poptorch.Block: ipu_id must be an integer >= 0, got {ipu_id!r}")
        self.name = str(user_id) if user_id is not None else _auto_name(ipu_id)
        self.ipu_id = ipu_id
        self._saved = None

    def __enter__(self) -> Block:
        if _recorder is not None:
            self._saved = _recorder.current
            _recorder.enter(self.name, self.ipu_id)
        return self

    def __exit__(self, *exc: Any) -> bool:
        if _recorder is not None:
            _recorder.current = self._saved
        return False


def BeginBlock(module: M, user_id: Optional[str] = None, ipu_id: Optional[int] = None) -> M:
    """Start block user_id (or the block of ipu_id) at `module`; returns the module."""
    b = Block(user_id, ipu_id)
    module._tg_begin_block = (b.name, b.ipu_id)
    return module
