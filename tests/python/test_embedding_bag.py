"""tests/python/test_embedding_bag.py - nn.EmbeddingBag, which torch 1.13
exports as a Loop over the bags (src/onnx/onnx_loop.c builds it as one
op), against PyTorch (float32 and float64): modes sum, mean and max, with
offsets (an empty bag among them; include_last_offset too), with a 2-D
input, and with per_sample_weights; and the table after SGD steps, trained from Python as
PyTorch trains it (issue 46 row 28). Interpreter: Debian's /usr/bin/python3.

TG_TEST_LABELS: quick
"""
import copy
import unittest

from tg_pytest import poptorch
import torch
import torch.nn as nn
import torch.nn.functional as F


class Bags(nn.Module):
    def __init__(self, mode, last=False):
        super().__init__()
        torch.manual_seed(0)
        self.bag = nn.EmbeddingBag(11, 4, mode=mode, include_last_offset=last)
        self.fc = nn.Linear(4, 3)

    def forward(self, x, offsets=None, weights=None, labels=None):
        if offsets is None:  # a 2-D input: one bag per row, the rows the batch
            out = self.fc(self.bag(x, per_sample_weights=weights))
            return out if labels is None else (out, F.cross_entropy(out, labels))
        # 1-D indices with run-time offsets: one sample of a batch of one
        # (PopTorch splits every input along its first dimension)
        w = None if weights is None else weights[0]
        out = self.fc(self.bag(x[0], offsets[0], per_sample_weights=w))
        if labels is None:
            return out.unsqueeze(0)
        return out.unsqueeze(0), F.cross_entropy(out, labels[0])


IDS = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 10, 0])
OFFSETS = torch.tensor([0, 3, 3, 5])  # bag 1 is empty
LABELS = torch.tensor([0, 2, 1, 1])


def cases():
    g = torch.Generator().manual_seed(1)
    weights = torch.rand(len(IDS), generator=g)
    ids, offsets = IDS.unsqueeze(0), OFFSETS.unsqueeze(0)
    yield "sum", (ids, offsets, None), LABELS.unsqueeze(0)
    yield "mean", (ids, offsets, None), LABELS.unsqueeze(0)
    yield "max", (ids, offsets, None), LABELS.unsqueeze(0)
    yield "sum", (ids, offsets, weights.unsqueeze(0)), LABELS.unsqueeze(0)
    yield "mean", (IDS[:8].view(2, 4), None, None), LABELS[:2]
    yield "max", (IDS[:9].view(3, 3), None, None), LABELS[:3]
    yield "sum", (IDS[:8].view(4, 2), None, weights[:8].view(4, 2)), LABELS
    # include_last_offset: the last offset ends the last bag
    yield "mean last", (ids, torch.tensor([[0, 3, 3, 5, 10]]), None), LABELS.unsqueeze(0)


class EmbeddingBagTest(unittest.TestCase):
    def test_inference(self):
        for mode, args, _ in cases():
            with self.subTest(mode=mode, offsets=args[1] is not None, weights=args[2] is not None):
                ref = Bags(mode.split()[0], mode.endswith("last"))
                with torch.no_grad():
                    want = ref(*args)
                    args64 = [a.double() if a is not None and a.is_floating_point() else a
                              for a in args]
                    want64 = copy.deepcopy(ref).double()(*args64)
                got = poptorch.inferenceModel(copy.deepcopy(ref))(*args)
                self.assertEqual(got.shape, want.shape)
                self.assertLess(float((got - want).abs().max()), 1e-6)
                self.assertLess(float((got.double() - want64).abs().max()), 1e-6)

    def test_training(self):
        for mode, args, labels in cases():
            with self.subTest(mode=mode, offsets=args[1] is not None, weights=args[2] is not None):
                ref = Bags(mode.split()[0], mode.endswith("last"))
                m = copy.deepcopy(ref)
                opt = torch.optim.SGD(ref.parameters(), lr=0.5)
                for _ in range(3):
                    opt.zero_grad()
                    ref(*args, labels)[1].backward()
                    opt.step()
                tm = poptorch.trainingModel(m, None, poptorch.optim.SGD(m.parameters(), lr=0.5))
                for _ in range(3):
                    tm(*args, labels)
                tm.copyWeightsToHost()
                for (name, a), b in zip(m.named_parameters(), ref.parameters()):
                    self.assertLess(float((a.detach() - b.detach()).abs().max()), 2e-6, name)

    def test_other_loops_refused_by_name(self):
        @torch.jit.script
        def running_sum(x):
            y = torch.zeros_like(x[0])
            for i in range(x.shape[0]):
                y = y + x[i]
            return y

        class Loop(nn.Module):
            def forward(self, x):
                return running_sum(x.transpose(0, 1)).unsqueeze(1)

        with self.assertRaises(Exception) as cm:
            poptorch.inferenceModel(Loop())(torch.randn(2, 3))
        msg = str(cm.exception)
        self.assertIn("(Loop)", msg)
        self.assertIn("only nn.EmbeddingBag's export is taken", msg)
        self.assertIn("a general Loop with carried values is not supported", msg)


if __name__ == "__main__":
    unittest.main()
