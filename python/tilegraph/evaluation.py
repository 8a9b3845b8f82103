"""tilegraph.evaluation - a model's figures on a test set, scored by the library.

    model = poptorch.inferenceModel(net, opts)
    r = poptorch.evaluate(model, test_loader)
    print(f"{r.accuracy:.2f}%")

(a tilegraph addition; PopTorch has no such call.) The loop over the batches,
the scoring (argmax against the labels, a language model's cross-entropy, a
segmentation's IoU) and an MPI job's summing are tg_evaluate's
(include/tilegraph/evaluate.h), the same code as the command's `train` test
accuracy and `infer`, so the package reports what they report for the same
weights. The model is compiled once, for its batch, on the first batch (or
the call that compiled it before); evaluating again runs that program again.
An inference model of a module a trainingModel trains evaluates the latest
trained weights, as its calls do; the training session is never rebuilt.
A batch of another size than the compiled one compiles the evaluation
program again (for that batch), and only it.
"""
from __future__ import annotations

from typing import Any, Iterable, List, NamedTuple, Optional

import numpy as np
import torch

from ._export import _as_int32
from ._lib import TG_F32, TG_I32, TilegraphError, check, ffi, lib
from .model import InferenceModel

__all__ = ["EvalResult", "evaluate"]


class EvalResult(NamedTuple):
    accuracy: float  # percent of the scored predictions that are right
    loss: float  # a language model's mean cross-entropy (nats); NaN otherwise
    scored: int  # predictions scored (samples, tokens or pixels)
    mean_iou: float  # a segmentation's mean IoU; NaN otherwise
    iou: List[float]  # a segmentation's IoU per class (at most 32); empty otherwise


def _pair(batch):
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise ValueError("poptorch.evaluate: each batch must be (input, labels), got "
                         f"{type(batch).__name__}")
    x, y = batch
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise ValueError("poptorch.evaluate: each batch must be (input tensor, labels tensor)")
    return x, y


class _Source:
    """The batches as tg_evaluate's source: each written straight into the
    library's host buffers. An exception inside the callback is kept and
    raised again once tg_evaluate returns."""

    def __init__(self, model, first, rest, steps):
        self.model, self.first, self.rest = model, first, rest
        self.steps = steps
        self.error = None
        t = model._input
        self.dtype = lib.tg_tensor_dtype(t)
        self.sample = model._dims(t)[1:]
        self.want = model._micro_batch * model._factor()
        out = model._dims(model._output)
        classes = out[1] if len(out) == 4 else out[-1]
        self.rows = int(np.prod(out[1:], dtype=np.int64)) // max(int(classes), 1)

    def next(self, user, input_p, labels_p, count_p):
        try:
            batch = self.first if self.first is not None else next(self.rest)
            self.first = None
            x, y = _pair(batch)
            n = x.shape[0]
            if n > self.want or tuple(x.shape[1:]) != tuple(self.sample):
                raise ValueError(f"poptorch.evaluate: a batch of shape {tuple(x.shape)}; the "
                                 f"evaluation program takes {self.want} samples of shape "
                                 f"{tuple(self.sample)} (the first batch's)")
            if y.shape[0] != n or y.numel() != n * self.rows:
                raise ValueError(f"poptorch.evaluate: {y.numel()} labels for {n} samples; each "
                                 f"sample takes {self.rows}")
            if self.dtype == TG_F32:
                a = x.detach().float().numpy()
            elif self.dtype == TG_I32:
                a = _as_int32(x, "input")
            else:
                a = x.detach().to(torch.uint8).numpy()
            a = np.ascontiguousarray(a)
            ffi.memmove(input_p, ffi.from_buffer(a), a.nbytes)
            if n < self.want:  # a short final batch: padded with zeros, not scored
                pad = a.nbytes // n * (self.want - n)
                ffi.memmove(ffi.cast("char *", input_p) + a.nbytes, bytes(pad), pad)
            labels = np.ascontiguousarray(_as_int32(y.reshape(-1), "labels"))
            ffi.memmove(labels_p, ffi.from_buffer(labels), labels.nbytes)
            count_p[0] = n
            return 0
        except StopIteration:
            self.error = ValueError(f"poptorch.evaluate: the data ended before its {self.steps} "
                                    "batches (its len())")
        except BaseException as e:  # raised again by evaluate()
            self.error = e
        return 1  # TG_ERR_INVALID_ARG: tg_evaluate stops


def _prepare(model, x):
    """Compile for x's batch unless compiled for it; follow a trainer's weights."""
    if model._graph is not None:
        want = model._micro_batch * model._factor()
        if x.shape[0] > want or x.shape[0] % model._factor():
            model.destroy()  # the evaluation program alone, for the new batch
    if model._graph is None:
        model._tensors((x,), {})
    elif InferenceModel._trainer(model) is not None:
        model._follow_training()
    if model._input is None or model._output is None:
        raise TilegraphError("poptorch.evaluate: the model must take the input and return "
                             "scores ([N, classes], [N, S, classes] or [N, classes, H, W])")


def evaluate(model: InferenceModel, data: Iterable[Any], steps: Optional[int] = None) -> EvalResult:
    """Score `model` (a poptorch.inferenceModel whose module takes one input
    and returns scores) on every (input, labels) batch of `data`; `steps`:
    the batches (len(data) by default). Under an MPI job a poptorch.DataLoader
    gives each instance its share; other data is the same on every instance,
    which then take turns at its batches. The figures are the whole set's."""
    if not isinstance(model, InferenceModel):
        raise ValueError("poptorch.evaluate: give a poptorch.inferenceModel, got "
                         f"{type(model).__name__}")
    if steps is None:
        try:
            steps = len(data)
        except TypeError:
            raise ValueError("poptorch.evaluate: the data has no len(); give steps=") from None
    rest = iter(data)
    try:
        first = next(rest)
    except StopIteration:
        raise ValueError("poptorch.evaluate: the data is empty") from None
    x, _ = _pair(first)
    _prepare(model, x)
    src = _Source(model, first, rest, steps)
    callback = ffi.callback("tg_status(void *, void *, int32_t *, int64_t *)", src.next)
    from .data import DataLoader
    c_src = ffi.new("tg_eval_source *", {"steps": steps, "next": callback, "user": ffi.NULL,
                                         "own_share": isinstance(data, DataLoader)})
    io = ffi.new("tg_eval_io *", {"input": model._input, "labels": ffi.NULL,
                                  "output": model._output})
    out = ffi.new("tg_eval_result *")
    status = lib.tg_evaluate_source(model._handle, io, c_src, ffi.NULL, ffi.NULL, out)
    if src.error is not None:
        raise src.error
    check(status, "poptorch.evaluate")
    model._ran()
    return EvalResult(out.accuracy, out.loss, out.scored, out.mean_iou,
                      [out.iou[i] for i in range(out.iou_classes)])
