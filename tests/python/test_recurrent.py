"""tests/python/test_recurrent.py - nn.LSTM, nn.GRU and nn.RNN through the package, against PyTorch.

PyTorch exports each layer (and each layer of a multi-layer module) as one
ONNX LSTM/GRU/RNN node whose weights are Slices and Concats of the module's
own parameters; the importer unrolls the node over the sequence
(src/onnx/onnx_rnn.c), so the training step is backpropagation through time
built from ordinary ops. Checked, per model:

- inference against PyTorch float32: the largest logit difference within
  1e-4 of the largest |logit|;
- one SGD step (lr 1, so the update read back with copyWeightsToHost() is
  the gradient) against PyTorch float64 on the same weights and batch: the
  worst parameter, relative to that parameter's largest float64 gradient,
  within 3x PyTorch float32's own worst (measured the same way) or 1e-5;
- a short run (Adam, 100 steps) learns a toy task that needs memory (the
  class is the sign of the first step's first feature, read at the last
  step): the loss falls clearly.

The time of a training step of a small LSTM against PyTorch's is printed
(reported, not asserted). TG_RECURRENT_VERBOSE=1 prints every parameter.
"""
import copy
import os
import sys
import time
import unittest

import tg_pytest  # noqa: F401  (skips without torch, cffi, onnx)
from tg_pytest import rel  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import tilegraph as poptorch  # noqa: E402

INFER_TOL = 1e-4
TRAIN_FACTOR = 3.0
TRAIN_FLOOR = 1e-5
BATCH, SEQ, FEATURES, CLASSES = 4, 7, 8, 5


class Classifier(nn.Module):
    """A recurrent layer over [batch, seq, features] (batch_first) and a
    linear head on the last step's output; returns (logits, loss) with labels."""

    def __init__(self, kind, hidden=16, layers=1, bidirectional=False, **kw):
        super().__init__()
        self.rnn = getattr(nn, kind)(FEATURES, hidden, num_layers=layers,
                                     bidirectional=bidirectional, batch_first=True, **kw)
        self.fc = nn.Linear(hidden * (2 if bidirectional else 1), CLASSES)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x, labels=None):
        y, _ = self.rnn(x)
        out = self.fc(y[:, -1])
        return out if labels is None else (out, self.loss(out, labels))


MODELS = {
    "lstm": lambda: Classifier("LSTM"),
    "gru": lambda: Classifier("GRU"),
    "rnn_relu": lambda: Classifier("RNN", nonlinearity="relu"),
    "lstm_2layer_bidirectional": lambda: Classifier("LSTM", layers=2, bidirectional=True),
    "gru_2layer_bidirectional": lambda: Classifier("GRU", layers=2, bidirectional=True),
}


def make(name, seed=0):
    torch.manual_seed(seed)
    model = MODELS[name]()
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(BATCH, SEQ, FEATURES, generator=g)
    y = torch.randint(0, CLASSES, (BATCH,), generator=g)
    return model, x, y


def sgd_update(model, x, y):
    """w0 - w1 per parameter after one torch SGD step at lr 1."""
    w0 = {k: p.detach().clone() for k, p in model.named_parameters()}
    _, loss = model(x, y)
    loss.backward()
    torch.optim.SGD(model.parameters(), lr=1.0).step()
    return {k: (w0[k].double() - p.detach().double()).numpy() for k, p in model.named_parameters()}


class Recurrent(unittest.TestCase):
    def check_model(self, name):
        model, x, y = make(name)
        with torch.no_grad():
            ref = model(x)
        out = poptorch.inferenceModel(copy.deepcopy(model))(x)
        self.assertGreater(rel(ref[0].numpy(), ref[1].numpy()), 1e-3, f"{name}: samples agree")
        inf = rel(out.numpy(), ref.numpy())
        self.assertLessEqual(inf, INFER_TOL, f"{name}: inference differs from PyTorch float32 "
                             f"by {inf:.3g} of the largest logit")

        g64 = sgd_update(copy.deepcopy(model).double(), x.double(), y)
        g32 = sgd_update(copy.deepcopy(model), x, y)
        m = copy.deepcopy(model)
        w0 = {k: p.detach().clone() for k, p in m.named_parameters()}
        tm = poptorch.trainingModel(m, poptorch.Options(), poptorch.optim.SGD(m.parameters(), lr=1.0))
        tm(x, y)
        tm.copyWeightsToHost()
        tg = {k: (w0[k].double() - p.detach().double()).numpy() for k, p in m.named_parameters()}
        errs = {k: (rel(tg[k], g), rel(g32[k], g)) for k, g in g64.items()}
        if os.environ.get("TG_RECURRENT_VERBOSE"):
            for k, (e, e32) in errs.items():
                print(f"  {name} {k:<32} tilegraph {e:8.1e} torch32 {e32:8.1e}", file=sys.stderr)
        worst = max(errs, key=lambda k: errs[k][0])
        torch32 = max(e32 for _, e32 in errs.values())
        print(f"{name:<28} infer {inf:8.1e} train {errs[worst][0]:8.1e} torch32 {torch32:8.1e}")
        # every parameter with a gradient must have moved: a weight the import
        # froze into a constant has no update (the last layer's reverse R
        # has none: the head reads the reverse direction's first step)
        top = max(float(np.max(np.abs(g))) for g in g64.values())
        for k, g in tg.items():
            if float(np.max(np.abs(g64[k]))) > 1e-9 * top:
                self.assertGreater(float(np.max(np.abs(g))), 0.0, f"{name}: {k} was not trained")
        self.assertLessEqual(errs[worst][0], max(TRAIN_FACTOR * torch32, TRAIN_FLOOR),
                             f"{name}: the training step's {worst} is {errs[worst][0]:.3g} from "
                             f"float64; PyTorch float32's worst is {torch32:.3g}")

    def test_lstm(self):
        self.check_model("lstm")

    def test_gru(self):
        self.check_model("gru")

    def test_rnn_relu(self):
        self.check_model("rnn_relu")

    def test_lstm_2layer_bidirectional(self):
        self.check_model("lstm_2layer_bidirectional")

    def test_gru_2layer_bidirectional(self):
        self.check_model("gru_2layer_bidirectional")

    def test_opset17(self):
        """The package exports at opset 13; the same model at opset 17 (LSTM and
        GRU nodes are unchanged there, the shape arithmetic around them is not)."""
        export = torch.onnx.export

        def at17(*args, **kw):
            kw["opset_version"] = 17
            return export(*args, **kw)

        torch.onnx.export = at17
        try:
            self.check_model("lstm_2layer_bidirectional")
            self.check_model("gru")
        finally:
            torch.onnx.export = export

    def test_learns_to_remember(self):
        """The class is the sign of the first step's first feature; the head
        reads only the last step, so the LSTM must carry it through 4 steps.
        PyTorch on the same batches, from the same weights, goes from 0.68
        to 0.12 (printed beside)."""
        def run(step):
            g = torch.Generator().manual_seed(1)
            losses = []
            for _ in range(100):
                x = torch.randn(32, 4, FEATURES, generator=g)
                losses.append(step(x, (x[:, 0, 0] > 0).long()))
            return np.mean(losses[:10]), np.mean(losses[-10:])

        torch.manual_seed(0)
        model = Classifier("LSTM", hidden=16)
        model.fc = nn.Linear(16, 2)
        ref = copy.deepcopy(model)
        tm = poptorch.trainingModel(model, poptorch.Options(),
                                    poptorch.optim.Adam(model.parameters(), lr=0.03))
        first, last = run(lambda x, y: float(tm(x, y)[1].reshape(-1)[0]))
        opt = torch.optim.Adam(ref.parameters(), lr=0.03)

        def torch_step(x, y):
            opt.zero_grad()
            loss = ref(x, y)[1]
            loss.backward()
            opt.step()
            return float(loss)

        t_first, t_last = run(torch_step)
        print(f"toy task: loss {first:.3f} -> {last:.3f} (PyTorch {t_first:.3f} -> {t_last:.3f})")
        self.assertGreater(first, 0.6, "the task starts near chance (ln 2)")
        self.assertLess(last, 0.35 * first, f"the loss fell only from {first:.3f} to {last:.3f}")

    def test_step_time(self):
        """A small LSTM's training step against PyTorch's (printed only)."""
        torch.manual_seed(0)
        model = Classifier("LSTM", hidden=32)
        x, y = torch.randn(32, 20, FEATURES), torch.randint(0, CLASSES, (32,))
        m = copy.deepcopy(model)
        tm = poptorch.trainingModel(m, poptorch.Options(), poptorch.optim.SGD(m.parameters(), lr=0.01))
        tm(x, y)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

        def torch_step():
            opt.zero_grad()
            model(x, y)[1].backward()
            opt.step()

        def times(step, n=20):
            t = []
            for _ in range(n):
                t0 = time.perf_counter()
                step()
                t.append(1e3 * (time.perf_counter() - t0))
            return min(t), float(np.median(t))

        torch_step()
        threads = torch.get_num_threads()
        print(f"LSTM(8, 32), batch 32, 20 steps, training step ms (min/median): "
              "tilegraph %.2f/%.2f, PyTorch (%d threads) %.2f/%.2f"
              % (*times(lambda: tm(x, y)), threads, *times(torch_step)))


if __name__ == "__main__":
    unittest.main(verbosity=2)
