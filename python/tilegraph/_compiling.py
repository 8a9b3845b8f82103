"""tilegraph._compiling - how a trainingModel or inferenceModel compiles on
its first call: the host run that records blocks and the loss, the
placement of blocks on devices, the ONNX export, the C library's graph (its
backward and optimizer), and the session."""
from __future__ import annotations

import tempfile

import torch

from . import _export as _export_mod
from . import _marks
from . import anchors as _anchors
from . import blocks as _blocks
from ._export import (_Call, _exportable_losses, _flat_outputs, _float_inputs, _Forward,
                      _quiet_onnx_log, _reset_buffers, _retype_inputs, _where)
from ._lib import TilegraphError, check, ffi, lib
from ._progress import _Progress
from .options import make_c_options


class _Compiling:
    """The compiling part of tilegraph.model._Model (a mixin: the model's
    state is _Model's)."""

    # ---- compiling ----------------------------------------------------------------
    def _record(self, micro_tensors):
        """Run the module once on the host, recording blocks and the loss."""
        rec = _blocks.Recorder(self.model)
        was = self.model.training
        self.model.train(self.training)
        _marks.loss_marks = []
        args, kwargs = self._call.rebuild(micro_tensors)
        try:
            with rec, torch.no_grad():
                result = self.model(*args, **kwargs)
            marks = _marks.loss_marks
        finally:
            _marks.loss_marks = None
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
        for name, first, *_ in blocks:
            if first is None:
                raise ValueError(f"poptorch.Block \"{name}\": tilegraph places blocks by the modules "
                                 "they call, and this block called no torch.nn.Module")
        index = {b[0]: i for i, b in enumerate(blocks)}
        # the scope the importer gives each block's first module: its module
        # path, unless it was called from an ancestor other than its parent
        split = ",".join(b[3] for b in blocks[1:])
        strategy = self.options.strategy
        auto = getattr(strategy, "auto", None)
        if strategy is not None and auto is None:
            groups = [s.blocks for s in strategy.stages]
        elif strategy is None and all(b[2] is None for b in blocks):
            return {}  # blocks without a strategy or ipu ids: one device, as in PopTorch
        elif all(b[2] is None for b in blocks):
            # a strategy naming no stages, blocks naming no devices: a stage per
            # block, in order (PopTorch gives every block a stage of its own)
            groups = [[b[0]] for b in blocks]
        else:
            groups = self._auto_stages(blocks, auto)
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
    def _auto_stages(blocks, auto):
        """The stages of PipelinedExecution()/ShardedExecution() without stages,
        or of blocks with ipu ids and no strategy: AutoStage.SameAsIpu (blocks
        with the same ipu_id share a stage, in device order; a block without
        one stays on the device of the block before it) or AutoIncrement (a
        stage per block, in order, which must then be on devices 0, 1, ...)."""
        from ._surface import AutoStage
        ids, dev = [], 0
        for b in blocks:
            dev = b[2] if b[2] is not None else dev
            ids.append(dev)
        if auto == AutoStage.AutoIncrement:
            if ids != list(range(len(ids))):
                raise TilegraphError(f"poptorch AutoStage.AutoIncrement: the blocks "
                                     f"{', '.join(b[0] for b in blocks)} are on devices {ids}; "
                                     "tilegraph places stage i on device i, so give them ipu ids "
                                     "0, 1, 2, ... in order (or use AutoStage.SameAsIpu)")
            return [[b[0]] for b in blocks]
        return [[b[0] for b, d in zip(blocks, ids) if d == dev] for dev in sorted(set(ids))]

    @staticmethod
    def _phases(strategy, split, index):
        """The phases option of a PhasedExecution: its phases' blocks (with the
        device a phase's stages name, "S0,S1@1"), and where the activations its
        backward needs are kept (setTensorsLiveness)."""
        phases = "|".join(",".join(f"S{index[n]}" for s in p.stages for n in s.blocks) +
                          ("" if p.ipu_id is None else f"@{p.ipu_id}")
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
        # Only what PyTorch would train is trained: parameters with
        # requires_grad that the optimizer holds; buffers (a mask, an
        # offset) and frozen parameters stay fixed, as state of the session.
        trainable = _export_mod.trainable_names(self.model, self.optimizer, "m.") \
            if self.training else None
        _reset_buffers(path, buffers, trainable)
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
            self._add_optimizer(g, optimizer)
        if lib.tg_graph_status(g) != 0:
            raise TilegraphError("poptorch: " + ffi.string(lib.tg_graph_error(g)).decode())
        return g

    def _add_optimizer(self, g, optimizer):
        """The optimizer's update for every trained parameter, with its
        parameter group's settings."""
        opts, group_of = optimizer.c_groups()
        if len(optimizer.param_groups) == 1:
            check(lib.tg_graph_add_optimizer(g, opts), "poptorch: the optimizer")
            return
        keep, groups = [], []
        # every name of a tied parameter: the export keeps one of them, either
        for name, p in self.model.state_dict(keep_vars=True).items():
            k = group_of.get(id(p))
            gt = lib.tg_graph_find(g, f"m.{name}".encode()) if k is not None else ffi.NULL
            if gt != ffi.NULL and lib.tg_tensor_is_param(gt):  # not frozen, used by the loss
                keep.append(ffi.new("char[]", f"m.{name}".encode()))
                groups.append(k)
        check(lib.tg_graph_add_optimizer_groups(g, opts, len(optimizer.param_groups),
                                                ffi.new("char *[]", keep), ffi.new("int[]", groups),
                                                len(keep)),
              "poptorch: the optimizer")

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
        from . import _surface
        _surface.run_hooks(_surface.precompile_hooks)
        self._compile_model(args, kwargs)
        _surface.run_hooks(_surface.postcompile_hooks)

    def _compile_model(self, args, kwargs):
        if self.training and not _export_mod.trainable_names(self.model, self.optimizer):
            raise ValueError(f"{self._what}: no parameter of {type(self.model).__name__} trains: "
                             "each has requires_grad=False or is in none of the optimizer's "
                             "parameter groups; give the optimizer the parameters to train")
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
            progress = _Progress(f"Graph compilation: {type(self.model).__name__}, micro-batch {micro}",
                                 self.options.show_progress)
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
        self._after_compile()

    def _after_compile(self):
        pass

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
