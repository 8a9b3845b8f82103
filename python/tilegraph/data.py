"""tilegraph.data - poptorch.DataLoader: host batches as PopTorch combines them.

One item is batch_size x gradientAccumulation x deviceIterations x
replicationFactor samples (gradient accumulation counts for training options
only, as the options say), in the order the session reads them. A torch
DataLoader does the loading underneath.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, Optional

import os

import torch

from ._enums import NamedIntEnum
from . import dist
from .options import Options


class DataLoaderMode(NamedIntEnum):
    Sync = 0
    Async = 1
    AsyncRebatched = 2


class DataLoader(torch.utils.data.DataLoader):
    def __init__(self, options: Options, dataset: torch.utils.data.Dataset, batch_size: int = 1,
                 shuffle: bool = False, num_workers: int = 0, drop_last: bool = True,
                 persistent_workers: Optional[bool] = None,
                 auto_distributed_partitioning: bool = True,
                 mode: DataLoaderMode = DataLoaderMode.Sync,
                 async_options: Optional[Dict[str, Any]] = None,
                 rebatched_worker_size: Optional[int] = None, **kwargs: Any) -> None:
        if not isinstance(options, Options):
            raise ValueError("poptorch.DataLoader: the first argument must be poptorch.Options()")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"poptorch.DataLoader: batch_size must be a positive integer, got {batch_size!r}")
        v = options.values
        replicas = int(v.get("replicationFactor", 1))
        per_replica = int(v.get("Training.gradientAccumulation", 1)) * batch_size
        iterations = int(v.get("deviceIterations", 1))
        self.combinedBatchSize = per_replica * iterations * replicas
        self.options = options
        # A partial host batch cannot be run by a compiled model: always drop it.
        workers = min(int(num_workers), os.cpu_count() or 1)
        persistent = bool(persistent_workers) and workers > 0
        n = dist.instances()
        if n > 1 and auto_distributed_partitioning:
            # this instance's replicas of every device iteration of each host
            # batch, drawn from the order one process would use
            if replicas % n:
                raise ValueError(f"poptorch.DataLoader: replicationFactor {replicas} is not a "
                                 f"multiple of the {n} instances of this MPI job")
            sampler = (_JobRandomSampler(dataset) if shuffle
                       else torch.utils.data.SequentialSampler(dataset))
            chunk = per_replica * (replicas // n)
            batches = _InstanceBatches(sampler, self.combinedBatchSize, chunk, dist.instance(), n)
            super().__init__(dataset, batch_sampler=batches, num_workers=workers,
                             persistent_workers=persistent, **kwargs)
            return
        super().__init__(dataset, batch_size=self.combinedBatchSize, shuffle=shuffle,
                         num_workers=workers, drop_last=True, persistent_workers=persistent,
                         **kwargs)


class _JobRandomSampler(torch.utils.data.RandomSampler):
    """torch's RandomSampler with every instance of a job drawing instance 0's
    permutation: each epoch's seed is drawn from the global torch RNG as
    RandomSampler draws it (so instance 0 shuffles as one process with its
    torch seed would) and then replaced by instance 0's, so instances whose
    torch seeds differ still split one permutation instead of drawing
    overlapping samples."""

    def __iter__(self):
        seed = int(torch.empty((), dtype=torch.int64).random_().item())
        self.generator = torch.Generator()
        self.generator.manual_seed(dist.from_instance_0(seed))
        try:
            yield from super().__iter__()
        finally:
            self.generator = None


class _InstanceBatches(torch.utils.data.Sampler):
    """Host batches of `size` indices from `sampler`, cut into chunks of
    `chunk` (one instance's replicas of one device iteration): instance k of
    n gets chunks k, k + n, ... of each, as the C loader's split does."""

    def __init__(self, sampler, size, chunk, k, n):
        self.sampler, self.size, self.chunk, self.k, self.n = sampler, size, chunk, k, n

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.size:
                yield [i for c in range(self.k * self.chunk, self.size, self.n * self.chunk)
                       for i in batch[c:c + self.chunk]]
                batch = []

    def __len__(self):
        return len(self.sampler) // self.size


class AsynchronousDataAccessor:
    """Iterates a DataLoader; loading already runs in its worker processes."""

    def __init__(self, dataset: DataLoader, **_kwargs: Any) -> None:
        self.dataset = dataset

    def __iter__(self) -> Iterator[Any]:
        return iter(self.dataset)

    def __len__(self) -> int:
        return len(self.dataset)

    def terminate(self) -> None:
        pass
