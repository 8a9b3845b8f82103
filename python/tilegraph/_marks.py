"""tilegraph._marks - what a model marks while it runs on the host:
poptorch.identity_loss (its loss) and poptorch.recomputationCheckpoint (the
values the backward keeps). The compiling model (tilegraph._compiling,
tilegraph._export) sets the lists for the length of one run."""
from __future__ import annotations

from typing import List, Optional, Tuple, Union

import torch

# ---- identity_loss ---------------------------------------------------------------

loss_marks: Optional[List[torch.Tensor]] = None  # while a host run records: what identity_loss returned
checkpoints: Optional[List[torch.Tensor]] = None  # while exporting: what recomputationCheckpoint marked


def identity_loss(x: torch.Tensor, reduction: str) -> torch.Tensor:
    """PopTorch's identity_loss: x reduced ("sum", "mean", or "none" for a
    scalar x) and marked as the model's loss, which the backward pass starts
    from. A model returning several scalars names its loss this way."""
    if not torch.is_tensor(x):
        raise ValueError(f"poptorch.identity_loss: expected a tensor, got {type(x).__name__}")
    if reduction == "sum":
        out = x.sum()
    elif reduction == "mean":
        out = x.mean()
    elif reduction == "none":
        out = x * 1  # a tensor of its own, so that marking it marks only the loss
    else:
        raise ValueError(f"poptorch.identity_loss: reduction must be 'sum', 'mean' or 'none', "
                         f"got {reduction!r}")
    if loss_marks is not None:
        loss_marks.append(out)
    return out


def recomputationCheckpoint(*tensors: torch.Tensor) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:
    """PopTorch's recomputationCheckpoint: with the option
    recomputation=pipeline the backward pass keeps these values and
    recomputes the activations after them. Returns its arguments."""
    for t in tensors:
        if not torch.is_tensor(t):
            raise ValueError("poptorch.recomputationCheckpoint: expected tensors, got "
                             f"{type(t).__name__}")
    if checkpoints is not None:
        checkpoints.extend(tensors)
    return tensors[0] if len(tensors) == 1 else tensors
