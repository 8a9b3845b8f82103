"""tilegraph.dist - a script started under mpirun is one instance of a job
(PopDist's role; docs/distributed.md).

`mpirun -np N python3 train.py` (or `tilegraph run --instances N --replicas R
-- ...` for the command) starts N processes of the script. On import, the
package joins the job when MPI's environment says it runs under mpirun; each
instance then runs replicationFactor / N of the replicas, poptorch.DataLoader
gives it only its replicas' samples of every host batch, and the C library
sums the gradients over all replicas of all instances in replica order, so
the job trains as one process of replicationFactor replicas would. An
exception in one instance ends the whole job instead of leaving the others
waiting for its gradients.
"""
from __future__ import annotations

import atexit
import os
import sys

from ._lib import check, lib


def _under_mpirun():
    # as the library decides (runtime/dist.c): MPI's environment is there;
    # the job's size is MPI's to tell, not a number parsed here
    return bool(os.environ.get("OMPI_COMM_WORLD_SIZE") or os.environ.get("PMI_SIZE"))


def instance() -> int:
    """This process's index in the job (0 outside one)."""
    return lib.tg_dist_instance()


def instances() -> int:
    """The number of instances of the job (1 outside one)."""
    return lib.tg_dist_instances()


def from_instance_0(value: int) -> int:
    """Instance 0's `value` on every instance (an integer; a collective: every
    instance of the job must call it at the same point). `value` itself
    outside a job."""
    if instances() <= 1:
        return value
    from ._lib import ffi
    v = ffi.new("int64_t[1]", [value if instance() == 0 else 0])
    check(lib.tg_dist_sum_i64(v, 1), "tilegraph: sharing instance 0's value with the job")
    return int(v[0])


def _abort_on_exception(hook):
    def handler(kind, value, tb):
        hook(kind, value, tb)
        sys.stderr.write(f"tilegraph: instance {instance()} of {instances()} failed: ending the job\n")
        sys.stderr.flush()
        lib.tg_dist_abort(1)
    return handler


def _join():
    if not _under_mpirun() or lib.tg_dist_active():
        return
    from ._lib import ffi
    check(lib.tg_dist_init(ffi.NULL, ffi.NULL), "tilegraph: joining the MPI job")
    atexit.register(lib.tg_dist_finalize)
    sys.excepthook = _abort_on_exception(sys.excepthook)


_join()
