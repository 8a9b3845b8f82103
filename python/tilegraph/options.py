"""tilegraph.options - poptorch.Options and the execution strategies.

Each setter stores tilegraph option values (the C library's table, see
`tilegraph options`) after checking them with the library itself, so a bad
value raises ValueError naming PopTorch's option and the library's reason.
Blocks named in stages are resolved to the library's `split`/`stages`
options when the model is compiled (tilegraph.model), since only then is it
known which layers ran inside which block.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

import copy
import enum
import re

from ._enums import NamedIntEnum
from ._lib import ffi, lib, message


class OutputMode(NamedIntEnum):
    Final = 0
    EveryN = 1
    All = 2
    Sum = 3
    Default = 4


_OUTPUT_MODE = {OutputMode.Final: "final", OutputMode.EveryN: "everyN", OutputMode.All: "all",
                OutputMode.Sum: "sum"}


def _check(key, value, popname):
    """Validate key=value with the C library; ValueError naming popname otherwise."""
    o = lib.tg_options_create()
    try:
        if lib.tg_options_set(o, key.encode(), str(value).encode()) != 0:
            raise ValueError(f"poptorch option {popname}({value!r}): {message()}")
    finally:
        lib.tg_options_destroy(o)


def _positive_int(value, popname):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"poptorch option {popname}: expected a positive integer, got {value!r}")
    return value


class Stage:
    """Blocks grouped into one pipeline stage: Stage("B1", "B2").ipu(0)."""

    def __init__(self, *block_names: str) -> None:
        if not block_names or not all(isinstance(b, str) and b for b in block_names):
            raise ValueError("poptorch.Stage: give one or more block names, e.g. Stage(\"B1\")")
        self.blocks = list(block_names)
        self.ipu_id = None

    def ipu(self, ipu_id: int) -> Stage:
        if isinstance(ipu_id, bool) or not isinstance(ipu_id, int) or ipu_id < 0:
            raise ValueError(f"poptorch.Stage.ipu: expected a device index >= 0, got {ipu_id!r}")
        self.ipu_id = ipu_id
        return self


class _Strategy:
    kind: Optional[str] = None

    def __init__(self, *stages: Any) -> None:
        """Stages (Stage, a block name, or a list of block names), or nothing or
        one poptorch.AutoStage: stages from the blocks' ipu ids (SameAsIpu, the
        default) or one per block in order (AutoIncrement)."""
        from ._surface import AutoStage
        self.auto = None
        if not stages or (len(stages) == 1 and isinstance(stages[0], AutoStage)):
            self.auto = stages[0] if stages else AutoStage.SameAsIpu
            stages = ()
        elif any(isinstance(s, enum.Enum) for s in stages):
            raise ValueError(f"poptorch.{type(self).__name__}: give one poptorch.AutoStage alone, "
                             "or stages and block names")
        self.stages = [s if isinstance(s, Stage) else
                       Stage(*s) if isinstance(s, (list, tuple)) else Stage(s) for s in stages]
        for i, s in enumerate(self.stages):
            if s.ipu_id is None:
                s.ipu_id = i
        ids = [s.ipu_id for s in self.stages]
        if ids != list(range(len(ids))):
            raise ValueError(f"poptorch.{type(self).__name__}: tilegraph places stage i on device i;"
                             f" the stages' ipu ids are {ids}, give them as 0, 1, 2, ... in order")

    def stage(self, block_id: str) -> Stage:
        """The Stage holding block `block_id`."""
        for s in self.stages:
            if block_id in s.blocks:
                return s
        raise ValueError(f"poptorch.{type(self).__name__}.stage: no stage holds block "
                         f"{block_id!r} (stages: {[s.blocks for s in self.stages]})")


class PipelinedExecution(_Strategy):
    kind = "pipelined"


class ShardedExecution(_Strategy):
    kind = "sharded"


class Phase:
    """Stages run together as one phase of poptorch.PhasedExecution: Phase("B1", "B2"), or
    on a device of its own: Phase(Stage("B3").ipu(1)). tilegraph runs a phase on one
    device, so its stages name the same one (or none)."""

    def __init__(self, *stages: Union[Stage, str]) -> None:
        if not stages:
            raise ValueError("poptorch.Phase: give one or more stages or block names, e.g. "
                             "Phase(\"B1\")")
        self.stages = [s if isinstance(s, Stage) else Stage(s) for s in stages]
        ids = {s.ipu_id for s in self.stages if s.ipu_id is not None}
        if len(ids) > 1:
            raise ValueError(f"poptorch.Phase: its stages are on devices {sorted(ids)}; tilegraph "
                             "runs a phase on one device: give its stages one ipu id, or put "
                             "them in phases of their own")
        self.ipu_id: Optional[int] = ids.pop() if ids else None

    def stage(self, idx: int) -> Stage:
        return self.stages[idx]

    def ipus(self, *ipus: int) -> Phase:
        """One device per stage of the phase; tilegraph runs a phase on one device,
        so they must all be the same one."""
        if len(ipus) != len(self.stages):
            raise ValueError(f"poptorch.Phase.ipus: the phase has {len(self.stages)} stages but "
                             f"{len(ipus)} ipus were given")
        if len(set(ipus)) > 1:
            from ._surface import refuse
            refuse("Phase.ipus", f"{ipus}: tilegraph runs a phase on one device; give its stages "
                   "one ipu, or put them in phases of their own")
        for st, ipu in zip(self.stages, ipus):
            st.ipu(ipu)
        self.ipu_id = ipus[0] if ipus else None
        return self


class Liveness:
    """poptorch.Liveness for PhasedExecution.setTensorsLiveness: AlwaysLive keeps activations
    on the device; the OffChip kinds keep those the backward pass needs in streaming memory
    between a phase's forward and its backward (TensorLocations.activation.onChip=false)."""
    AlwaysLive = "AlwaysLive"
    OffChipAfterFwd = "OffChipAfterFwd"
    OffChipAfterFwdNoOverlap = "OffChipAfterFwdNoOverlap"
    OffChipAfterEachPhase = "OffChipAfterEachPhase"


class PhasedExecution:
    """poptorch.PhasedExecution(Phase(...), ...): the phases run one after another, each on
    one device: device 0, or the one its stages name (Stage("B3").ipu(1)), consecutive
    phases sharing a device (phased_execution_type "SingleIPU"); or, with "ParallelIPU"
    (ParallelPhasedExecution), alternating over two devices, even phases on device 0 and
    odd ones on device 1, one loading its next phase while the other computes (a stage that
    names another device is refused at compile). A phase may be given as a Phase, a Stage,
    or block names."""
    kind = "phased"

    def __init__(self, *phases: Union[Phase, Stage, str],
                 phased_execution_type: Any = "SingleIPU") -> None:
        if not phases:
            raise ValueError("poptorch.PhasedExecution: give one or more phases, e.g. "
                             "PhasedExecution(Phase(\"B1\"), Phase(\"B2\"))")
        self.phases = [p if isinstance(p, Phase) else
                       Phase(*p) if isinstance(p, (list, tuple)) else Phase(p) for p in phases]
        self.stages = [s for p in self.phases for s in p.stages]
        name = getattr(phased_execution_type, "name", phased_execution_type)
        if name not in ("SingleIPU", "ParallelIPU"):
            raise ValueError("poptorch.PhasedExecution: phased_execution_type is SingleIPU or "
                             f"ParallelIPU, got {phased_execution_type!r}")
        self.phased_execution_type = name
        self.liveness = Liveness.AlwaysLive

    def phase(self, phase: int) -> Phase:
        return self.phases[phase]

    def stage(self, block_id: str) -> Stage:
        for st in self.stages:
            if block_id in st.blocks:
                return st
        raise ValueError(f"poptorch.{type(self).__name__}.stage: no stage holds block {block_id!r}")

    def useSeparateBackwardPhase(self, use: bool = True) -> PhasedExecution:
        if use:
            from ._surface import refuse
            refuse(f"{type(self).__name__}.useSeparateBackwardPhase",
                   "tilegraph runs each phase's backward right after the last forward phase in "
                   "reverse order, sharing the last phase; remove the call")
        return self

    def sendTensorsOffChipAfterFwd(self, off_chip: bool = True) -> PhasedExecution:
        """PopTorch's older form of setTensorsLiveness(OffChipAfterFwd / AlwaysLive)."""
        return self.setTensorsLiveness(Liveness.OffChipAfterFwd if off_chip else Liveness.AlwaysLive)

    def setTensorsLiveness(self, liveness: str) -> PhasedExecution:
        known = (Liveness.AlwaysLive, Liveness.OffChipAfterFwd, Liveness.OffChipAfterFwdNoOverlap,
                 Liveness.OffChipAfterEachPhase)
        if liveness not in known:
            raise ValueError(f"poptorch.PhasedExecution.setTensorsLiveness: expected one of "
                             f"{', '.join('poptorch.Liveness.' + k for k in known)}, got {liveness!r}")
        self.liveness = liveness
        return self


class SerialPhasedExecution(PhasedExecution):
    def __init__(self, *phases: Union[Phase, Stage, str]) -> None:
        super().__init__(*phases, phased_execution_type="SingleIPU")


class ParallelPhasedExecution(PhasedExecution):
    def __init__(self, *phases: Union[Phase, Stage, str]) -> None:
        super().__init__(*phases, phased_execution_type="ParallelIPU")


class TensorLocationSettings:
    """Where one kind of tensor lives (poptorch.TensorLocationSettings)."""

    def __init__(self) -> None:
        self.on_chip = True
        self.min_off_chip = None
        self.sharded = False
        self.min_sharded = None

    def useOnChipStorage(self, on_chip: bool = True) -> TensorLocationSettings:
        self.on_chip = bool(on_chip)
        return self

    def minElementsForOffChip(self, n: int) -> TensorLocationSettings:
        self.min_off_chip = _nonnegative_int(n, "TensorLocationSettings.minElementsForOffChip")
        return self

    def useReplicatedTensorSharding(self, on: bool = True) -> TensorLocationSettings:
        self.sharded = bool(on)
        return self

    def useIOTilesToLoad(self, use: bool = True) -> TensorLocationSettings:
        """Accepted: on a tiled target with TensorLocations.numIOTiles set, streamed copies of
        off-chip tensors already run on the I/O tiles (docs/targets.md)."""
        self.io_tiles_load = bool(use)
        return self

    def useIOTilesToStore(self, use: bool = True) -> TensorLocationSettings:
        """Accepted: as useIOTilesToLoad, for the copies back."""
        self.io_tiles_store = bool(use)
        return self

    def minElementsForReplicatedTensorSharding(self, n: int) -> TensorLocationSettings:
        self.min_sharded = _nonnegative_int(
            n, "TensorLocationSettings.minElementsForReplicatedTensorSharding")
        return self


def _nonnegative_int(n, name):
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"poptorch option {name}: expected an integer >= 0, got {n!r}")
    return n


class _Sub:
    def __init__(self, owner):
        self._owner = owner


class _Training(_Sub):
    def gradientAccumulation(self, n: int) -> _Training:
        self._owner._set("Training.gradientAccumulation", _positive_int(n, "Training.gradientAccumulation"),
                         "Training.gradientAccumulation")
        return self

    def accumulationAndReplicationReductionType(self, reduction: Any) -> _Training:
        """Mean only: tilegraph averages accumulated and replicated gradients."""
        from ._surface import ReductionType, refuse
        if reduction != ReductionType.Mean:
            refuse("Options.Training.accumulationAndReplicationReductionType",
                   f"{reduction!r}: tilegraph averages the gradients of accumulated micro-batches "
                   "and replicas (ReductionType.Mean); scale the loss to get a sum")
        return self

    def setMeanAccumulationAndReplicationReductionStrategy(self, strategy: Any) -> _Training:
        from ._surface import MeanReductionStrategy, refuse
        if strategy not in (MeanReductionStrategy.Post, MeanReductionStrategy.Default):
            refuse("Options.Training.setMeanAccumulationAndReplicationReductionStrategy",
                   f"{strategy!r}: tilegraph sums the micro-batches' gradients and divides once "
                   "before the update (MeanReductionStrategy.Post); use Post or Default")
        return self

    def setAutomaticLossScaling(self, enabled: bool) -> _Training:
        """Automatic loss scaling: tilegraph's dynamic loss scaling (lossScaling=dynamic)."""
        self._owner._set("lossScaling", "dynamic" if enabled else "none",
                         "Training.setAutomaticLossScaling")
        return self

    def setConvolutionDithering(self, enabled: bool) -> _Training:
        if enabled:
            from ._surface import refuse
            refuse("Options.Training.setConvolutionDithering",
                   "tilegraph's convolution planning has no dithering (it lays every "
                   "convolution out the same way); remove the call")
        return self


class _TensorLocations(_Sub):
    """Options.TensorLocations: weights, activations, accumulators and optimizer state on
    the device or in host streaming memory (docs/memory-locations.md)."""

    def _location(self, kind, settings, popname):
        if not isinstance(settings, TensorLocationSettings):
            raise ValueError(f"poptorch option TensorLocations.{popname}: expected a "
                             "poptorch.TensorLocationSettings()")
        key = f"TensorLocations.{kind}"
        self._owner._set(f"{key}.onChip", str(settings.on_chip).lower(),
                         f"TensorLocations.{popname}")
        if settings.min_off_chip is not None:
            self._owner._set(f"{key}.minElementsForOffChip", settings.min_off_chip,
                             f"TensorLocations.{popname}")
        shardable = kind in ("weight", "optimizer")
        if not shardable and (settings.sharded or settings.min_sharded is not None):
            raise ValueError(f"poptorch option TensorLocations.{popname}: replicated tensor "
                             f"sharding of the {kind} tensors is not available yet (weights "
                             "and optimizer state can be sharded: setWeightLocation, "
                             "setOptimizerLocation)")
        if shardable:
            self._owner._set(f"{key}.replicatedTensorSharding", str(settings.sharded).lower(),
                             f"TensorLocations.{popname}")
            if settings.min_sharded is not None:
                self._owner._set(f"{key}.minElementsForReplicatedTensorSharding",
                                 settings.min_sharded, f"TensorLocations.{popname}")
        return self

    def setWeightLocation(self, settings: TensorLocationSettings) -> _TensorLocations:
        return self._location("weight", settings, "setWeightLocation")

    def setActivationLocation(self, settings: TensorLocationSettings) -> _TensorLocations:
        return self._location("activation", settings, "setActivationLocation")

    def setAccumulatorLocation(self, settings: TensorLocationSettings) -> _TensorLocations:
        return self._location("accumulator", settings, "setAccumulatorLocation")

    def setOptimizerLocation(self, settings: TensorLocationSettings) -> _TensorLocations:
        return self._location("optimizer", settings, "setOptimizerLocation")

    def numIOTiles(self, n: int) -> _TensorLocations:
        """Tiles per device reserved for I/O (Poplar's numIOTiles): on a tiled target the
        host streams and the streamed copies of off-chip tensors run there beside the
        compute (docs/targets.md); ignored on cpu."""
        self._owner._set("numIOTiles", _nonnegative_int(n, "TensorLocations.numIOTiles"),
                         "TensorLocations.numIOTiles")
        return self


class _Precision(_Sub):
    def setPartialsType(self, dtype: Any) -> _Precision:
        import torch
        if dtype is not torch.float32:
            from ._surface import refuse
            refuse("Options.Precision.setPartialsType",
                   f"{dtype}: partials are always float32 on tilegraph's CPU kernels; remove the call "
                   "(or pass torch.float32)")
        return self

    def runningStatisticsAlwaysFloat(self, enabled: bool = True) -> _Precision:
        if not enabled:
            from ._surface import refuse
            refuse("Options.Precision.runningStatisticsAlwaysFloat",
                   "False: tilegraph keeps batch-norm running statistics in float32 at every "
                   "precision; remove the call")
        return self

    def enableFloatingPointExceptions(self, enabled: bool) -> _Precision:
        if enabled:
            from ._surface import refuse
            refuse("Options.Precision.enableFloatingPointExceptions",
                   "tilegraph raises no floating-point exceptions; a NaN or infinite loss stops "
                   "training with an error naming it, and Debug.verifyAgainstReference() checks "
                   "every tensor")
        return self

    def halfFloatCasting(self, mode: Any) -> _Precision:
        """HalfUpcastToFloat (PyTorch's promotion) is what tilegraph does."""
        from ._surface import HalfFloatCastingBehavior, refuse
        if mode != HalfFloatCastingBehavior.HalfUpcastToFloat:
            refuse("Options.Precision.halfFloatCasting",
                   f"{mode!r}: tilegraph promotes mixed float16/float32 operands to float32 as "
                   "PyTorch does (HalfFloatCastingBehavior.HalfUpcastToFloat); it has no "
                   "downcasting mode")
        return self

    def autocastEnabled(self, enabled: bool) -> _Precision:
        if enabled:
            from ._surface import refuse
            refuse("Options.Precision.autocastEnabled", "tilegraph casts no op to half on its "
                   "own; convert the model (model.half()) or give half inputs (docs/python.md)")
        return self

    def autocastPolicy(self, policy: Any) -> _Precision:
        from ._surface import refuse
        refuse("Options.Precision.autocastPolicy", "tilegraph has no automatic casting, so no "
               "policy for it; convert the model (model.half())")

    def enableStochasticRounding(self, on: bool = True) -> _Precision:
        self._owner._set("Precision.enableStochasticRounding", str(bool(on)).lower(),
                         "Precision.enableStochasticRounding")
        return self


class _Debug(_Sub):
    def verifyAgainstReference(self, on: bool = True,
                               tolerance: Optional[float] = None) -> _Debug:
        """Check the first step tensor by tensor against the reference kernels (double
        precision, NCHW, no fast path); the step raises naming the first tensor beyond
        tolerance (docs/numerics.md). `tolerance` is the factor on every tolerance (32)."""
        self._owner._set("debug.verifyAgainstReference", str(bool(on)).lower(),
                         "Debug.verifyAgainstReference")
        if tolerance is not None:
            self._owner._set("debug.verifyTolerance", float(tolerance), "Debug.verifyAgainstReference")
        return self


class _Distributed(_Sub):
    """Options.Distributed: the MPI job's processes (tilegraph.dist; docs/distributed.md)."""

    @property
    def processId(self) -> int:
        from . import dist
        return dist.instance()

    @property
    def numProcesses(self) -> int:
        from . import dist
        return dist.instances()

    def configureProcessId(self, process_id: int, num_processes: int) -> _Distributed:
        from . import dist
        if (process_id, num_processes) != (dist.instance(), dist.instances()):
            from ._surface import refuse
            refuse("Options.Distributed.configureProcessId",
                   f"({process_id}, {num_processes}): tilegraph takes the process id and count "
                   f"from MPI (this is process {dist.instance()} of {dist.instances()}); start "
                   "the processes with mpirun")
        return self

    def disable(self) -> _Distributed:
        """Accepted in a single process (nothing is distributed); refused in an MPI job."""
        from . import dist
        if dist.instances() > 1:
            from ._surface import refuse
            refuse("Options.Distributed.disable", f"this process is one of {dist.instances()} of "
                   "an MPI job, which tilegraph joins when it is imported; run without mpirun "
                   "for one process")
        return self

    def setEnvVarNames(self, var_num_processes: str, var_process_id: str) -> _Distributed:
        """PopTorch reads the process id and count from these variables; they must
        agree with the MPI job tilegraph joined (configureProcessId)."""
        import os
        return self.configureProcessId(int(os.environ.get(var_process_id, "0")),
                                       int(os.environ.get(var_num_processes, "1")))


class _Jit(_Sub):
    def traceModel(self, trace: bool = True) -> _Jit:
        if not trace:
            from ._surface import refuse
            refuse("Options.Jit.traceModel", "False: tilegraph always traces the model (it "
                   "exports it to ONNX); remove the call")
        return self


class _Popart(_Sub):
    def set(self, key: str, value: Any) -> _Popart:
        from ._surface import refuse
        refuse(f"Options._Popart.set({key!r})", "there is no PopART under tilegraph; set "
               "tilegraph's own options with Options.set(key, value) (`tilegraph options` lists them)")

    def setEngineOptions(self, engine_options: Dict[str, Any]) -> _Popart:
        """Poplar engine options that tilegraph has (autoReport.*, debug.*, ...) are
        set; any other is refused by name (`tilegraph options` lists them)."""
        for key, value in dict(engine_options).items():
            if lib.tg_options_set(self._probe(), str(key).encode(), str(value).encode()) != 0:
                from ._surface import refuse
                refuse(f"Options._Popart.setEngineOptions({key!r})",
                       f"{message()}; tilegraph takes the engine options `tilegraph options` lists")
            self._owner._set(str(key), str(value), f"_Popart.setEngineOptions({key!r})")
        return self

    def _probe(self):
        return ffi.gc(lib.tg_options_create(), lib.tg_options_destroy)

    def setPatterns(self, patterns: Any, level: Any = None) -> _Popart:
        from ._surface import refuse
        refuse("Options._Popart.setPatterns", "there is no PopART under tilegraph, so no PopART "
               "patterns; remove the call")


def _refuse_option(name, why):
    from ._surface import refuse
    refuse(f"Options.{name}", why)


class Options:
    """poptorch.Options: the settings a model is compiled and run with."""

    def __init__(self) -> None:
        self.values: Dict[str, str] = {}
        self.strategy: Optional[Union[PipelinedExecution, ShardedExecution, PhasedExecution]] = None
        self.caching_path: Optional[str] = None
        # (short_name, long_name pattern), in the order given
        self.anchors: List[Tuple[str, str]] = []
        self.Training = _Training(self)
        self.TensorLocations = _TensorLocations(self)
        self.Precision = _Precision(self)
        self.Debug = _Debug(self)
        self.Distributed = _Distributed(self)
        self.Jit = _Jit(self)
        self._Popart = _Popart(self)
        self.model_name: Optional[str] = None
        self.show_progress = True

    def _set(self, key, value, popname):
        _check(key, value, popname)
        self.values[key] = str(value)

    def get(self, key: str, default: Any) -> Any:
        return self.values.get(key, default)

    def deviceIterations(self, n: int) -> Options:
        self._set("deviceIterations", _positive_int(n, "deviceIterations"), "deviceIterations")
        return self

    def replicationFactor(self, n: int) -> Options:
        self._set("replicationFactor", _positive_int(n, "replicationFactor"), "replicationFactor")
        return self

    def randomSeed(self, seed: int) -> Options:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"poptorch option randomSeed: expected an integer >= 0, got {seed!r}")
        self._set("randomSeed", seed, "randomSeed")
        return self

    def outputMode(self, mode: OutputMode, output_return_period: Optional[int] = None) -> Options:
        if mode == OutputMode.Default:
            mode = OutputMode.Final
        if mode not in _OUTPUT_MODE:
            raise ValueError(f"poptorch option outputMode: expected a poptorch.OutputMode, got {mode!r}")
        self._set("outputMode", _OUTPUT_MODE[OutputMode(mode)], "outputMode")
        if mode == OutputMode.EveryN:
            n = _positive_int(output_return_period, "outputMode(EveryN, output_return_period)")
            self._set("outputReturnPeriod", n, "outputMode(EveryN, output_return_period)")
        return self

    def setExecutionStrategy(
            self, strategy: Union[PipelinedExecution, ShardedExecution, PhasedExecution]) -> Options:
        if not isinstance(strategy, (PipelinedExecution, ShardedExecution, PhasedExecution)):
            raise ValueError("poptorch option setExecutionStrategy: expected "
                             "poptorch.PipelinedExecution(...), poptorch.ShardedExecution(...) or "
                             f"poptorch.PhasedExecution(...), got {strategy!r}")
        self._set("executionStrategy", strategy.kind, "setExecutionStrategy")
        self.strategy = strategy
        return self

    def setAvailableMemoryProportion(self, proportions: Dict[str, float]) -> Options:
        if not isinstance(proportions, dict) or not proportions:
            raise ValueError("poptorch option setAvailableMemoryProportion: expected a dict "
                             "{\"IPU0\": 0.6, ...}")
        values = set(proportions.values())
        if len(values) != 1:
            raise ValueError("poptorch option setAvailableMemoryProportion: tilegraph takes one "
                             f"proportion for every device, got {proportions}")
        self._set("availableMemoryProportion", values.pop(), "setAvailableMemoryProportion")
        return self

    def enableExecutableCaching(self, path: str) -> Options:
        """Keep compiled programs in the directory `path` and load them on the
        next run with the same model and options (the library's option of the
        same name; docs/executable-cache.md)."""
        self.caching_path = path
        self._set("enableExecutableCaching", str(path), "enableExecutableCaching")
        return self

    def anchorTensor(self, short_name: str, long_name: str, output_mode: Any = None,
                     output_return_period: Any = None) -> Options:
        """PopTorch's anchorTensor: values inside the graph that the model's
        getAnchoredTensor(short_name) reads back after each run. long_name is a
        regular expression matched in full against the exported graph's value
        names (tilegraph.anchors); anchors follow the model's outputMode."""
        if not isinstance(short_name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", short_name):
            raise ValueError(f"poptorch option anchorTensor: short name {short_name!r} must be a "
                             "non-empty string of letters, digits, '_', '.' or '-'")
        if any(a[0] == short_name for a in self.anchors):
            raise ValueError(f"poptorch option anchorTensor: '{short_name}' is anchored already")
        try:
            re.compile(long_name)
        except (re.error, TypeError) as e:
            raise ValueError(f"poptorch option anchorTensor('{short_name}'): {long_name!r} is not a "
                             f"regular expression ({e})") from None
        if output_mode is not None or output_return_period is not None:
            raise ValueError(f"poptorch option anchorTensor('{short_name}'): anchors follow the "
                             "model's outputMode; set it with Options.outputMode instead of per anchor")
        self.anchors.append((short_name, long_name))
        return self

    def useIpuModel(self, _on: bool = True) -> Options:
        return self

    def anchorMode(self, mode: OutputMode, anchor_return_period: Optional[int] = None) -> Options:
        """PopTorch's older name of outputMode."""
        return self.outputMode(mode, anchor_return_period)

    def broadcastBuffers(self, broadcast_buffers: bool = True) -> Options:
        """False is what tilegraph does: each replica keeps its own buffers (batch-norm
        running statistics); they are not broadcast from replica 0."""
        if broadcast_buffers:
            _refuse_option("broadcastBuffers", "True: tilegraph keeps each replica's buffers "
                           "(batch-norm running statistics) its own and does not broadcast them; "
                           "use broadcastBuffers(False)")
        return self

    def defaultOutputMode(self) -> bool:
        """Whether outputMode is still the default (not set)."""
        return "outputMode" not in self.values

    def autoRoundNumIPUs(self, enabled: bool = True) -> Options:
        """Accepted: rounding the devices up to a power of two adds idle devices, which
        change nothing on tilegraph's simulated devices."""
        return self

    def useIpuId(self, ipu_id: int) -> Options:
        """Accepted: tilegraph's devices are simulated, so which one runs is no choice."""
        _nonnegative_int(ipu_id, "useIpuId")
        return self

    def useOfflineIpuTarget(self, ipu_version: int = 2) -> Options:
        _refuse_option("useOfflineIpuTarget", "tilegraph compiles for the CPU it runs on; "
                       "remove the call (Options.set('target', ...) picks a simulated target)")

    def logDir(self, log_dir: str) -> Options:
        _refuse_option("logDir", "tilegraph writes no PopART log files; profiles go where "
                       "Options.set('autoReport.directory', dir) says")

    def logCycleCount(self, enabled: bool) -> Options:
        if enabled:
            _refuse_option("logCycleCount", "tilegraph's devices count no cycles; the execution "
                           "profile (Options.set('autoReport.all', 'true')) times each step")
        return self

    def enableSyntheticData(self, enabled: bool) -> Options:
        if enabled:
            _refuse_option("enableSyntheticData", "tilegraph always streams the inputs you give; "
                           "to time without host I/O, pass the same tensors every call")
        return self

    def enableProfiling(self, profile_dir: Optional[str] = None) -> Options:
        self._set("autoReport.all", "true", "enableProfiling")
        if profile_dir is not None:
            self._set("autoReport.directory", profile_dir, "enableProfiling")
        return self

    def enableStableNorm(self, enabled: bool) -> Options:
        if not enabled:
            _refuse_option("enableStableNorm", "False: tilegraph's norms always compute the "
                           "variance from centred values (the stable form); remove the call")
        return self

    def modelName(self, name: str) -> Options:
        self.model_name = str(name)
        return self

    def connectionType(self, connection_type: Any) -> Options:
        from ._surface import ConnectionType
        if connection_type != ConnectionType.Always:
            _refuse_option("connectionType", f"{connection_type!r}: tilegraph's devices are "
                           "always attached (simulated on the CPU); use ConnectionType.Always")
        return self

    def syncPattern(self, sync_pattern: Any) -> Options:
        from ._surface import SyncPattern
        if sync_pattern != SyncPattern.Full:
            _refuse_option("syncPattern", f"{sync_pattern!r}: tilegraph synchronises every "
                           "device each step (SyncPattern.Full)")
        return self

    def inputReplicaGrouping(self, input_group_size: int, input_group_type: Any) -> Options:
        _refuse_option("inputReplicaGrouping", "every tilegraph replica takes its own slice of "
                       "the host batch; replica groups sharing inputs are not implemented")

    def disableModuleNamescope(self) -> Options:
        _refuse_option("disableModuleNamescope", "tilegraph places blocks by the module scopes "
                       "of the exported graph; keep them")

    def maxRepeatLogs(self, number: int) -> Options:
        """Accepted: tilegraph repeats no log lines."""
        return self

    def relaxOptimizerAttributesChecks(self, relax: bool = True) -> Options:
        """Accepted: setOptimizer already takes any value of the compiled optimizer's settings."""
        return self

    def showCompilationProgressBar(self, show: bool = True) -> Options:
        self.show_progress = bool(show)
        return self

    def sourceLocationExcludes(self, excludes: Any) -> Options:
        """Accepted: errors point at the first frame outside torch and tilegraph."""
        return self

    def appendToLocationExcludes(self, *excludes: str) -> Options:
        """Accepted: errors point at the first frame outside torch and tilegraph."""
        return self

    def toDict(self) -> Dict[str, str]:
        return dict(self.values)

    def loadFromFile(self, filepath: str) -> Options:
        """Options from a file, one call a line as PopTorch writes them
        ("deviceIterations(4)", "Training.gradientAccumulation(8)"); # comments.
        Arguments must be Python literals."""
        import ast
        with open(filepath, encoding="utf-8") as f:
            lines = f.read().splitlines()
        for n, line in enumerate(lines, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            where = f"Options.loadFromFile: {filepath}:{n}: {text!r}"
            m = re.fullmatch(r"([A-Za-z_][\w.]*)\((.*)\)", text)
            if not m:
                raise ValueError(f"{where}: expected a call such as deviceIterations(4)")
            target = self
            for part in m.group(1).split("."):
                target = getattr(target, part, None)
                if target is None or part.startswith("__"):
                    raise ValueError(f"{where}: Options has no {m.group(1)}")
            try:
                call = ast.parse(f"f({m.group(2)})", mode="eval").body
                args = [ast.literal_eval(a) for a in call.args]
                kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
            except (SyntaxError, ValueError) as e:
                raise ValueError(f"{where}: arguments must be Python literals ({e})") from None
            target(*args, **kwargs)
        return self

    def set(self, key: str, value: Any) -> Options:
        """Any tilegraph option by its own name (`tilegraph options`)."""
        self._set(key, value, key)
        return self

    def clone(self) -> Options:
        c = Options()
        c.values = dict(self.values)
        c.strategy = copy.deepcopy(self.strategy)
        c.caching_path = self.caching_path
        c.anchors = list(self.anchors)
        c.model_name, c.show_progress = self.model_name, self.show_progress
        return c

    @property
    def engine_options(self) -> Dict[str, str]:
        return dict(self.values)

    def __repr__(self) -> str:
        return f"Options({self.values})"


def make_c_options(values: Dict[str, Any]) -> Any:
    """A tg_options filled with `values` (a dict of tilegraph keys), owned by the result."""
    o = ffi.gc(lib.tg_options_create(), lib.tg_options_destroy)
    for k, v in values.items():
        if lib.tg_options_set(o, k.encode(), str(v).encode()) != 0:
            raise ValueError(f"tilegraph option {k}={v!r}: {message()}")
    return o
