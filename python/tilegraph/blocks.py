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


def _unqualified(qualified):
    """The name torch's ONNX export gives a module in node names: its dotted
    path from the last non-numeric part ("encoder.layer.1" -> "layer.1",
    "layer1.0" -> "layer1.0"), as torch.onnx.utils._unqualified_variable_name."""
    atoms = qualified.split(".")
    for i in range(len(atoms) - 1, -1, -1):
        if not atoms[i].isnumeric():
            return ".".join(atoms[i:])
    return qualified


def import_scope(call_stack):
    """The scope the C importer gives the ops of the last module of
    `call_stack` (the qualified names of the modules being called, outermost
    first), dotted: the export names each by _unqualified, and the importer
    (node_scope in src/onnx/onnx_build.c) joins the names, a name that
    extends the path's tail with a '.' ("layer1" then "layer1.0") replacing
    that tail. A module called from its grandparent's forward (nanoGPT's
    transformer.h[i] from the model) has no scope of its module path, but
    this one."""
    path = ""
    for q in call_stack:
        p, tail = _unqualified(q), 0
        for start in range(len(path)):
            if start > 0 and path[start - 1] != ".":
                continue
            t = len(path) - start
            if len(p) > t and p.startswith(path[start:]) and p[t] == ".":
                tail = t
                break
        path = path[:len(path) - tail] + p if tail else (f"{path}.{p}" if path else p)
    return path


class Recorder:
    """The blocks seen during one host run of a module, in order of first use."""

    def __init__(self, module, prefix="m"):
        self.current = None  # (name, ipu_id)
        self.blocks = []  # [name, first module name or None, ipu_id, its import scope]
        self._before = None
        self._names = {id(m): n for n, m in module.named_modules()}
        self._prefix = prefix  # the package's wrapper's name for the module
        self._stack = []  # qualified names (under the wrapper) of the modules being called
        self._handles = [m.register_forward_pre_hook(self._pre) for m in module.modules()]
        self._handles += [m.register_forward_hook(self._post) for m in module.modules()]

    def _post(self, _module, _inputs, _output):
        self._stack.pop()

    def _pre(self, module, _inputs):
        name = self._names.get(id(module), "")
        self._stack.append(f"{self._prefix}.{name}" if name else self._prefix)
        begin = getattr(module, "_tg_begin_block", None)
        if begin is not None:
            self.enter(*begin)
        if self.current is None and not self.blocks and name and self._before is None and \
                next(module.children(), None) is None:
            self._before = (name, import_scope(self._stack))  # the first layer before any block
        for b in self.blocks:
            if self.current and b[0] == self.current[0] and b[1] is None and name:
                b[1], b[3] = name, import_scope(self._stack)

    def enter(self, name, ipu_id):
        if not self.blocks and self._before is not None and name != _auto_name(0):
            # Layers that ran before the first block (a BeginBlock further
            # on) go on device 0, as PopTorch places them.
            self.blocks.append([_auto_name(0), self._before[0], 0, self._before[1]])
        self.current = (name, ipu_id)
        if not any(b[0] == name for b in self.blocks):
            self.blocks.append([name, None, ipu_id, None])

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

    _auto_id: Optional[int] = None  # Block.useAutoId(): the next automatic block id

    @classmethod
    def useAutoId(cls) -> None:
        """PopTorch's Block.useAutoId: blocks made without a name from now on are
        named "0", "1", ... in the order they are made (BeginBlock too)."""
        cls._auto_id = 0

    def __init__(self, user_id: Optional[str] = None, ipu_id: Optional[int] = None) -> None:
        if user_id is None and Block._auto_id is not None:
            user_id, Block._auto_id = str(Block._auto_id), Block._auto_id + 1
        if user_id is None and ipu_id is None:
            raise ValueError("poptorch.Block: give a block name (Block(\"B1\")) or ipu_id, or "
                             "call poptorch.Block.useAutoId() first")
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
