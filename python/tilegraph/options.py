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

from ._lib import ffi, lib, message


class OutputMode(enum.IntEnum):
    __str__ = enum.Enum.__str__  # "OutputMode.All" as PopTorch prints it (3.11's IntEnum: "2")
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

    def __init__(self, *stages: Union[Stage, str]) -> None:
        self.stages = [s if isinstance(s, Stage) else Stage(s) for s in stages]
        for i, s in enumerate(self.stages):
            if s.ipu_id is None:
                s.ipu_id = i
        ids = [s.ipu_id for s in self.stages]
        if ids != list(range(len(ids))):
            raise ValueError(f"poptorch.{type(self).__name__}: tilegraph places stage i on device i;"
                             f" the stages' ipu ids are {ids}, give them as 0, 1, 2, ... in order")


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
        self.phases = [p if isinstance(p, Phase) else Phase(p) for p in phases]
        self.stages = [s for p in self.phases for s in p.stages]
        name = getattr(phased_execution_type, "name", phased_execution_type)
        if name not in ("SingleIPU", "ParallelIPU"):
            raise ValueError("poptorch.PhasedExecution: phased_execution_type is SingleIPU or "
                             f"ParallelIPU, got {phased_execution_type!r}")
        self.phased_execution_type = name
        self.liveness = Liveness.AlwaysLive

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
