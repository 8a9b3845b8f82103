"""tilegraph.data - poptorch.DataLoader: host batches as PopTorch combines them.

One item is batch_size x gradientAccumulation x deviceIterations x
replicationFactor samples (gradient accumulation counts for training options
only, as the options say), in the order the session reads them. A torch
DataLoader does the loading underneath.
"""
import enum
import os

import torch

from .options import Options


class DataLoaderMode(enum.IntEnum):
    Sync = 0
    Async = 1
    AsyncRebatched = 2


class DataLoader(torch.utils.data.DataLoader):
    def __init__(self, options, dataset, batch_size=1, shuffle=False, num_workers=0, drop_last=True,
                 persistent_workers=None, auto_distributed_partitioning=True,
                 mode=DataLoaderMode.Sync, async_options=None, rebatched_worker_size=None, **kwargs):
        if not isinstance(options, Options):
            raise ValueError("poptorch.DataLoader: the first argument must be poptorch.Options()")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"poptorch.DataLoader: batch_size must be a positive integer, got {batch_size!r}")
        v = options.values
        factor = (int(v.get("Training.gradientAccumulation", 1)) * int(v.get("deviceIterations", 1)) *
                  int(v.get("replicationFactor", 1)))
        self.combinedBatchSize = batch_size * factor
        self.options = options
        # A partial host batch cannot be run by a compiled model: always drop it.
        workers = min(int(num_workers), os.cpu_count() or 1)
        super().__init__(dataset, batch_size=self.combinedBatchSize, shuffle=shuffle,
                         num_workers=workers, drop_last=True,
                         persistent_workers=bool(persistent_workers) and workers > 0, **kwargs)


class AsynchronousDataAccessor:
    """Iterates a DataLoader; loading already runs in its worker processes."""

    def __init__(self, dataset, **_kwargs):
        self.dataset = dataset

    def __iter__(self):
        return iter(self.dataset)

    def __len__(self):
        return len(self.dataset)

    def terminate(self):
        pass
