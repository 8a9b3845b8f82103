"""popdist.poptorch - PopDist's Options for a PopTorch script (tilegraph's
PopTorch: `import tilegraph as poptorch`).

PopDist's Options are PopTorch's with the job's replicas set, the device
iterations and the rest left to the script. PopTorch counts
replicationFactor per instance and names the instance by
Distributed.configureProcessId; tilegraph's replicationFactor counts the
job's replicas (docs/distributed.md, "Python scripts") and the instance is
MPI's rank, so here the replication factor is getNumTotalReplicas(): a
script that reads getNumLocalReplicas() (to size a sharding threshold, as
seed 002 does) gets the instance's share as under PopRun.
"""
import tilegraph

import popdist


class Options(tilegraph.Options):
    def __init__(self, ipus_per_replica=None):
        super().__init__()
        popdist.init()
        if ipus_per_replica is not None and ipus_per_replica != popdist.getNumIpusPerReplica():
            raise ValueError(f"popdist.poptorch.Options(ipus_per_replica={ipus_per_replica}): "
                             f"tilegraph run was given --ipus-per-replica "
                             f"{popdist.getNumIpusPerReplica()}; give run the same number")
        self.replicationFactor(popdist.getNumTotalReplicas())
