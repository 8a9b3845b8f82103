"""popdist - PopDist's Python API for a script that `tilegraph run` starts
(PopRun's role; docs/distributed.md, "PopDist").

`tilegraph run --num-instances N --num-replicas R -- python3 train.py` sets,
in each instance's environment, the POPDIST_* variables PopRun sets:
POPDIST_NUM_TOTAL_REPLICAS, POPDIST_NUM_LOCAL_REPLICAS,
POPDIST_NUM_IPUS_PER_REPLICA, POPDIST_UNIFORM_REPLICAS_PER_INSTANCE,
POPDIST_REPLICA_INDEX_OFFSET and POPDIST_LOCAL_INSTANCE_INDEX (the names of
a PopRun command line, as PopRun prints it). The functions here read them;
the job itself (which samples each instance loads, the gradients summed
over the instances) is tilegraph's own (tilegraph.dist), joined on import
under mpirun.

Outside `tilegraph run`, isPopdistEnvSet() is False and every other call
raises RuntimeError naming itself: PopDist's values outside PopRun are not
something a script should go on with silently.
"""
import os

__all__ = ["init", "isPopdistEnvSet", "getNumTotalReplicas", "getNumLocalReplicas",
           "getNumIpusPerReplica", "getReplicaIndexOffset", "getNumInstances",
           "getInstanceIndex", "getLocalInstanceIndex", "isUniformReplicasPerInstance",
           "getDeviceId"]

_VARS = ("POPDIST_NUM_TOTAL_REPLICAS", "POPDIST_NUM_LOCAL_REPLICAS",
         "POPDIST_NUM_IPUS_PER_REPLICA", "POPDIST_REPLICA_INDEX_OFFSET")


def isPopdistEnvSet() -> bool:
    """True when the script was started by `tilegraph run` (PopRun)."""
    return all(v in os.environ for v in _VARS)


def _get(name: str, call: str) -> int:
    if not isPopdistEnvSet():
        raise RuntimeError(f"popdist.{call}(): this script was not started by tilegraph run "
                           f"(PopRun), so there is no {name}: start it as tilegraph run "
                           "--num-instances N --num-replicas R -- python3 SCRIPT, or check "
                           "popdist.isPopdistEnvSet() first")
    value = os.environ[name]
    try:
        return int(value)
    except ValueError:
        raise RuntimeError(f"popdist.{call}(): {name} is {value!r}, not a whole number "
                           "(set by something other than tilegraph run?)") from None


def getNumTotalReplicas() -> int:
    """The job's replicas (run's --num-replicas)."""
    return _get("POPDIST_NUM_TOTAL_REPLICAS", "getNumTotalReplicas")


def getNumLocalReplicas() -> int:
    """The replicas this instance runs."""
    return _get("POPDIST_NUM_LOCAL_REPLICAS", "getNumLocalReplicas")


def getNumIpusPerReplica() -> int:
    """run's --ipus-per-replica (1 unless given)."""
    return _get("POPDIST_NUM_IPUS_PER_REPLICA", "getNumIpusPerReplica")


def getReplicaIndexOffset() -> int:
    """The index of this instance's first replica in the job."""
    return _get("POPDIST_REPLICA_INDEX_OFFSET", "getReplicaIndexOffset")


def getLocalInstanceIndex() -> int:
    """This instance's index among the instances on its host."""
    return _get("POPDIST_LOCAL_INSTANCE_INDEX", "getLocalInstanceIndex")


def isUniformReplicasPerInstance() -> bool:
    """Every instance runs as many replicas (always, under tilegraph run)."""
    return bool(_get("POPDIST_UNIFORM_REPLICAS_PER_INSTANCE", "isUniformReplicasPerInstance"))


def getNumInstances() -> int:
    """The job's instances: total replicas over local ones (uniform)."""
    return getNumTotalReplicas() // getNumLocalReplicas()


def getInstanceIndex() -> int:
    """This instance's index in the job: its first replica over its replicas."""
    return getReplicaIndexOffset() // getNumLocalReplicas()


def getDeviceId() -> int:
    """PopRun's IPU-over-Fabric device of the instance: none here."""
    raise RuntimeError("popdist.getDeviceId(): tilegraph's instances run on this machine's "
                       "CPUs, not on a partition's IPU-over-Fabric device, so there is no "
                       "device id to give; a script passes none to tilegraph (leave the call out)")


def init() -> None:
    """Join the job: checks that run's variables agree with MPI's (the
    instance's rank and the job's size), which tilegraph.dist joined on
    import. Called by popdist.poptorch.Options() too."""
    if not isPopdistEnvSet():
        _get(_VARS[0], "init")
    from tilegraph import dist
    if (dist.instances(), dist.instance()) != (getNumInstances(), getInstanceIndex()):
        raise RuntimeError(f"popdist.init(): the POPDIST_* variables say instance "
                           f"{getInstanceIndex()} of {getNumInstances()}, MPI says "
                           f"{dist.instance()} of {dist.instances()}: start the script with "
                           "tilegraph run, not with mpirun and variables of another job")


from . import poptorch  # noqa: E402,F401 (popdist.poptorch after `import popdist`)
