"""tilegraph.options - poptorch.Options and the execution strategies.

Each setter stores tilegraph option values (the C library's table, see
`tilegraph options`) after checking them with the library itself, so a bad
value raises ValueError naming PopTorch's option and the library's reason.
Blocks named in stages are resolved to the library's `split`/`stages`
options when the model is compiled (tilegraph.model), since only then is it
known which layers ran inside which block.
"""
import copy
import enum

from ._lib import ffi, lib, message


class OutputMode(enum.IntEnum):
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

    def __init__(self, *block_names):
        if not block_names or not all(isinstance(b, str) and b for b in block_names):
            raise ValueError("poptorch.Stage: give one or more block names, e.g. Stage(\"B1\")")
        self.blocks = list(block_names)
        self.ipu_id = None

    def ipu(self, ipu_id):
        if isinstance(ipu_id, bool) or not isinstance(ipu_id, int) or ipu_id < 0:
            raise ValueError(f"poptorch.Stage.ipu: expected a device index >= 0, got {ipu_id!r}")
        self.ipu_id = ipu_id
        return self


class _Strategy:
    kind = None

    def __init__(self, *stages):
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


class TensorLocationSettings:
    def __init__(self):
        self.on_chip = True

    def useOnChipStorage(self, on_chip=True):
        self.on_chip = bool(on_chip)
        return self


class _Sub:
    def __init__(self, owner):
        self._owner = owner


class _Training(_Sub):
    def gradientAccumulation(self, n):
        self._owner._set("Training.gradientAccumulation", _positive_int(n, "Training.gradientAccumulation"),
                         "Training.gradientAccumulation")
        return self


class _TensorLocations(_Sub):
    def setOptimizerLocation(self, settings):
        if not isinstance(settings, TensorLocationSettings):
            raise ValueError("poptorch option TensorLocations.setOptimizerLocation: expected a "
                             "poptorch.TensorLocationSettings()")
        self._owner._set("TensorLocations.optimizer.onChip", str(settings.on_chip).lower(),
                         "TensorLocations.setOptimizerLocation")
        return self


class _Precision(_Sub):
    def enableStochasticRounding(self, on=True):
        self._owner._set("Precision.enableStochasticRounding", str(bool(on)).lower(),
                         "Precision.enableStochasticRounding")
        return self


class _Debug(_Sub):
    def verifyAgainstReference(self, on=True, tolerance=None):
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

    def __init__(self):
        self.values = {}
        self.strategy = None
        self.caching_path = None
        self.Training = _Training(self)
        self.TensorLocations = _TensorLocations(self)
        self.Precision = _Precision(self)
        self.Debug = _Debug(self)

    def _set(self, key, value, popname):
        _check(key, value, popname)
        self.values[key] = str(value)

    def get(self, key, default):
        return self.values.get(key, default)

    def deviceIterations(self, n):
        self._set("deviceIterations", _positive_int(n, "deviceIterations"), "deviceIterations")
        return self

    def replicationFactor(self, n):
        self._set("replicationFactor", _positive_int(n, "replicationFactor"), "replicationFactor")
        return self

    def randomSeed(self, seed):
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"poptorch option randomSeed: expected an integer >= 0, got {seed!r}")
        self._set("randomSeed", seed, "randomSeed")
        return self

    def outputMode(self, mode, output_return_period=None):
        if mode == OutputMode.Default:
            mode = OutputMode.Final
        if mode not in _OUTPUT_MODE:
            raise ValueError(f"poptorch option outputMode: expected a poptorch.OutputMode, got {mode!r}")
        self._set("outputMode", _OUTPUT_MODE[OutputMode(mode)], "outputMode")
        if mode == OutputMode.EveryN:
            n = _positive_int(output_return_period, "outputMode(EveryN, output_return_period)")
            self._set("outputReturnPeriod", n, "outputMode(EveryN, output_return_period)")
        return self

    def setExecutionStrategy(self, strategy):
        if not isinstance(strategy, (PipelinedExecution, ShardedExecution)):
            raise ValueError("poptorch option setExecutionStrategy: expected "
                             "poptorch.PipelinedExecution(...) or poptorch.ShardedExecution(...), "
                             f"got {strategy!r}")
        self._set("executionStrategy", strategy.kind, "setExecutionStrategy")
        self.strategy = strategy
        return self

    def setAvailableMemoryProportion(self, proportions):
        if not isinstance(proportions, dict) or not proportions:
            raise ValueError("poptorch option setAvailableMemoryProportion: expected a dict "
                             "{\"IPU0\": 0.6, ...}")
        values = set(proportions.values())
        if len(values) != 1:
            raise ValueError("poptorch option setAvailableMemoryProportion: tilegraph takes one "
                             f"proportion for every device, got {proportions}")
        self._set("availableMemoryProportion", values.pop(), "setAvailableMemoryProportion")
        return self

    def enableExecutableCaching(self, path):
        """Keep compiled programs in the directory `path` and load them on the
        next run with the same model and options (the library's option of the
        same name; docs/executable-cache.md)."""
        self.caching_path = path
        self._set("enableExecutableCaching", str(path), "enableExecutableCaching")
        return self

    def useIpuModel(self, _on=True):
        return self

    def set(self, key, value):
        """Any tilegraph option by its own name (`tilegraph options`)."""
        self._set(key, value, key)
        return self

    def clone(self):
        c = Options()
        c.values = dict(self.values)
        c.strategy = copy.deepcopy(self.strategy)
        c.caching_path = self.caching_path
        return c

    @property
    def engine_options(self):
        return dict(self.values)

    def __repr__(self):
        return f"Options({self.values})"


def make_c_options(values):
    """A tg_options filled with `values` (a dict of tilegraph keys), owned by the result."""
    o = ffi.gc(lib.tg_options_create(), lib.tg_options_destroy)
    for k, v in values.items():
        if lib.tg_options_set(o, k.encode(), str(v).encode()) != 0:
            raise ValueError(f"tilegraph option {k}={v!r}: {message()}")
    return o
