"""tilegraph - PopTorch's Python API over the tilegraph C library.

    import tilegraph as poptorch

runs PopTorch scripts: Options, Block/BeginBlock, PipelinedExecution,
ShardedExecution and PhasedExecution, TensorLocations, trainingModel/inferenceModel, poptorch.optim and
DataLoader. Graphs, compilation and execution are the C library's
(libtilegraph.so through cffi); docs/python.md says what is supported.
"""
from . import dist, optim
from ._export import mark_parameters
from ._lib import TilegraphError
from .blocks import BeginBlock, Block
from .data import AsynchronousDataAccessor, DataLoader, DataLoaderMode
from .evaluation import EvalResult, evaluate
from .model import (InferenceModel, TrainingModel, identity_loss, inferenceModel,
                    recomputationCheckpoint, trainingModel)
from ._surface import (CPU, Attribute, AutoStage, BlockFunction, CommGroupType, ConnectionType,
                       HalfFloatCastingBehavior, MatMulSerializationMode, MeanReductionStrategy,
                       MultiConv, NameScope, OverlapMode, ReductionType, SyncPattern,
                       VariableRetrievalMode, cond,
                       ctc_beam_search_decoder, custom_op, for_loop, ipu_print_tensor,
                       ipuHardwareIsAvailable, ipuHardwareVersion, isRunningOnIpu, load, nop,
                       registerPostCompileHook, registerPreCompileHook, removeBlocks,
                       serializedMatMul, set_available_memory, set_overlap_for_input,
                       set_overlap_for_output, setLogLevel)
from .options import (Liveness, OutputMode, Options, ParallelPhasedExecution, Phase,
                      PhasedExecution, PipelinedExecution, SerialPhasedExecution, ShardedExecution,
                      Stage, TensorLocationSettings)

__version__ = "0.1.0"
__all__ = ["dist", "optim", "mark_parameters", "TilegraphError", "BeginBlock", "Block",
           "AsynchronousDataAccessor", "DataLoader", "DataLoaderMode", "EvalResult", "evaluate",
           "InferenceModel",
           "TrainingModel", "identity_loss", "inferenceModel", "recomputationCheckpoint",
           "trainingModel", "Liveness", "OutputMode", "Options", "ParallelPhasedExecution", "Phase",
           "PhasedExecution", "PipelinedExecution", "SerialPhasedExecution", "ShardedExecution",
           "Stage", "TensorLocationSettings", "CPU", "AutoStage", "BlockFunction", "CommGroupType",
           "ConnectionType", "HalfFloatCastingBehavior", "MatMulSerializationMode",
           "MeanReductionStrategy", "MultiConv", "ReductionType", "SyncPattern",
           "VariableRetrievalMode", "cond", "ctc_beam_search_decoder", "custom_op", "for_loop",
           "ipu_print_tensor", "ipuHardwareIsAvailable", "ipuHardwareVersion", "isRunningOnIpu",
           "load", "nop", "registerPostCompileHook", "registerPreCompileHook", "removeBlocks",
           "serializedMatMul", "set_available_memory", "setLogLevel", "Attribute", "NameScope",
           "OverlapMode", "set_overlap_for_input", "set_overlap_for_output"]
