"""tilegraph._host_io - a compiled model's traffic with the host: host
batches cut into micro-batches, inputs written, outputs read back in the
structure the module returned, and the weights copied between the session
and the torch module."""
from __future__ import annotations

import collections

import numpy as np
import torch

from ._export import _as_int32, _fill, _local_replicas, _tensor_dims
from ._lib import TG_F32, TG_I32, check, ffi, lib


class _HostIO:
    """The host side of tilegraph.model._Model (a mixin: the model's state
    is _Model's)."""

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

    def getAnchoredTensors(self, short_name: str) -> "collections.OrderedDict[str, torch.Tensor]":
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

    def getAnchoredTensor(self, short_name: str) -> torch.Tensor:
        """PopTorch's getAnchoredTensor: the anchored value from the latest
        run (getAnchoredTensors when the pattern matched several)."""
        values = self.getAnchoredTensors(short_name)
        if len(values) != 1:
            raise ValueError(f"{self._what}.getAnchoredTensor('{short_name}'): the pattern matched "
                             f"{len(values)} values; getAnchoredTensors('{short_name}') returns "
                             "them all by name")
        return next(iter(values.values()))

    def copyWeightsToHost(self):
        self._weights_dirty = False  # first: the reads below must not copy again
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
        """Write the weights back to the module and free the session; the next
        call (or attachToDevice) recompiles. A training model keeps its
        optimizer state and step count on the host meanwhile (TrainingModel._keep_state)."""
        if self._graph is None:
            raise ValueError(f"{self._what}.detachFromDevice: the model is not attached (it has "
                             "not been called since it was made or last detached)")
        self.copyWeightsToHost()
        self._keep_state()
        self._handle = self._graph = None
        self._tmp = None

    def _keep_state(self):
        pass

    def isAttachedToDevice(self):
        return self._graph is not None
