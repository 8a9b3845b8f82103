"""tests/python/test_unpool.py - MaxPool's Indices output and the scatter
unpooling SegNet exports to (torch 1.13 exports no max_unpool2d, so SegNets
unpool with zeros(...).scatter(2, indices, values)), against PyTorch: the
indices themselves (the first maximum of each window, as PyTorch picks it),
for windows that overlap, pad and take ceil_mode's extra row, and a SegNet
block's inference and its weights after SGD steps (issue 46 row 28).

TG_TEST_LABELS: quick
"""
import copy
import unittest

from tg_pytest import poptorch
import torch
import torch.nn as nn
import torch.nn.functional as F


class Indices(nn.Module):
    def __init__(self, k, s, p, ceil):
        super().__init__()
        self.args = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil)

    def forward(self, x):
        y, i = F.max_pool2d(x, return_indices=True, **self.args)
        return y, i


class SegNetBlock(nn.Module):
    """conv, pool with indices, conv, unpool by scatter, conv to 3 classes."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.enc = nn.Conv2d(3, 4, 3, padding=1)
        self.mid = nn.Conv2d(4, 4, 3, padding=1)
        self.dec = nn.Conv2d(4, 3, 3, padding=1)

    def forward(self, x, labels=None):
        y = F.relu(self.enc(x))
        p, i = F.max_pool2d(y, 2, 2, return_indices=True)
        p = F.relu(self.mid(p))
        n, c, h, w = y.shape
        u = torch.zeros(n, c, h * w).scatter(2, i.flatten(2), p.flatten(2)).view(n, c, h, w)
        out = self.dec(u)
        if labels is None:
            return out
        return out, F.cross_entropy(out, labels)


class UnpoolTest(unittest.TestCase):
    def test_indices_match_pytorch(self):
        g = torch.Generator().manual_seed(3)
        x = torch.randn(2, 3, 7, 9, generator=g)
        x[0, 0, :2, :2] = 5.0  # a tie: the first in scan order wins
        for k, s, p, ceil in ((2, 2, 0, False), (3, 2, 1, False), (3, 2, 0, True), (1, 1, 0, False)):
            with self.subTest(kernel=k, stride=s, pad=p, ceil=ceil):
                m = Indices(k, s, p, ceil)
                want_y, want_i = m(x)
                got_y, got_i = poptorch.inferenceModel(m)(x)
                self.assertTrue(torch.equal(got_y, want_y))
                self.assertTrue(torch.equal(got_i.long(), want_i))

    def test_segnet_block_inference_and_training(self):
        g = torch.Generator().manual_seed(4)
        x = torch.randn(2, 3, 8, 8, generator=g)
        labels = torch.randint(0, 3, (2, 8, 8), generator=g)
        ref = SegNetBlock()
        with torch.no_grad():
            want = ref(x)
        got = poptorch.inferenceModel(copy.deepcopy(ref))(x)
        self.assertLess(float((got - want).abs().max()), 1e-5)
        m = copy.deepcopy(ref)
        opt = torch.optim.SGD(ref.parameters(), lr=0.5)
        for _ in range(3):
            opt.zero_grad()
            ref(x, labels)[1].backward()
            opt.step()
        tm = poptorch.trainingModel(m, None, poptorch.optim.SGD(m.parameters(), lr=0.5))
        for _ in range(3):
            tm(x, labels)
        tm.copyWeightsToHost()
        for (name, a), b in zip(m.named_parameters(), ref.parameters()):
            self.assertLess(float((a.detach() - b.detach()).abs().max()), 2e-5, name)


if __name__ == "__main__":
    unittest.main()
