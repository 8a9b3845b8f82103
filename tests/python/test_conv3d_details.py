"""tests/python/test_conv3d_details.py - the rest of 3-D convolution and
pooling against PyTorch (issue 46 row 28): nn.ConvTranspose3d (strides,
padding, output_padding, groups, dilation) in inference and after SGD
steps; MaxPool3d and AvgPool3d with ceil_mode, padding and
count_include_pad either way; MaxPool3d's return_indices (the first
maximum of each window, ties included) and the scatter unpooling that
torch 1.13 exports for them. All built from the 2-D ops over depth slices
(src/onnx/onnx_conv3d.c). Interpreter: Debian's /usr/bin/python3 (torch).

TG_TEST_LABELS: quick
"""
import copy
import unittest

from tg_pytest import poptorch
import torch
import torch.nn as nn
import torch.nn.functional as F


def rel(a, b):
    return float((a - b).abs().max()) / max(float(b.abs().max()), 1.0)


class Decoder3d(nn.Module):
    """Two transposed 3-D convolutions with every attribute PyTorch has."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.t1 = nn.ConvTranspose3d(4, 6, (3, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1),
                                     output_padding=(1, 0, 1), groups=2)
        self.t2 = nn.ConvTranspose3d(6, 3, 2, stride=(1, 2, 3), dilation=(2, 1, 1),
                                     output_padding=(0, 1, 2), bias=False)

    def forward(self, x, target=None):
        out = self.t2(torch.tanh(self.t1(x)))
        if target is None:
            return out
        return out, F.mse_loss(out, target)


class Pool(nn.Module):
    def __init__(self, pool):
        super().__init__()
        self.pool = pool

    def forward(self, x):
        return self.pool(x)


class Unpool3d(nn.Module):
    """conv, MaxPool3d with indices, unpooling by scatter, conv."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.enc = nn.Conv3d(2, 3, 3, padding=1)
        self.dec = nn.Conv3d(3, 2, 3, padding=1)

    def forward(self, x, target=None):
        y = torch.relu(self.enc(x))
        p, i = F.max_pool3d(y, 2, 2, return_indices=True)
        n, c = y.shape[:2]
        u = torch.zeros(n, c, y[0, 0].numel()).scatter(2, i.flatten(2), p.flatten(2))
        out = self.dec(u.view_as(y))
        if target is None:
            return out
        return out, F.mse_loss(out, target)


def train_both(test, ref, x, target, lr, tol):
    m = copy.deepcopy(ref)
    opt = torch.optim.SGD(ref.parameters(), lr=lr)
    for _ in range(3):
        opt.zero_grad()
        ref(x, target)[1].backward()
        opt.step()
    tm = poptorch.trainingModel(m, None, poptorch.optim.SGD(m.parameters(), lr=lr))
    for _ in range(3):
        tm(x, target)
    tm.copyWeightsToHost()
    for (name, a), b in zip(m.named_parameters(), ref.parameters()):
        test.assertLess(float((a.detach() - b.detach()).abs().max()), tol, name)


class ConvTranspose3dTest(unittest.TestCase):
    def test_inference_and_training(self):
        g = torch.Generator().manual_seed(1)
        x = torch.randn(2, 4, 3, 4, 3, generator=g)
        ref = Decoder3d()
        with torch.no_grad():
            want = ref(x)
            want64 = copy.deepcopy(ref).double()(x.double())
        got = poptorch.inferenceModel(copy.deepcopy(ref))(x)
        self.assertEqual(got.shape, want.shape)
        self.assertLess(rel(got, want), 1e-5)
        self.assertLess(rel(got.double(), want64), 1e-5)
        target = torch.randn(want.shape, generator=g)
        train_both(self, ref, x, target, 0.5, 2e-5)


class Pool3dTest(unittest.TestCase):
    CASES = (
        ("max ceil", nn.MaxPool3d((2, 3, 2), stride=(2, 2, 3), ceil_mode=True)),
        ("max ceil padded dilated", nn.MaxPool3d(3, stride=2, padding=1, dilation=(2, 1, 1),
                                                 ceil_mode=True)),
        ("avg ceil", nn.AvgPool3d((2, 3, 2), stride=(2, 2, 3), ceil_mode=True)),
        ("avg padded without pads", nn.AvgPool3d(3, stride=(1, 2, 2), padding=1,
                                                 count_include_pad=False)),
        ("avg ceil padded with pads", nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True)),
        ("avg ceil padded without pads", nn.AvgPool3d((3, 2, 3), stride=2, padding=(1, 1, 0),
                                                      ceil_mode=True, count_include_pad=False)),
    )

    def test_against_pytorch(self):
        g = torch.Generator().manual_seed(2)
        x = torch.randn(2, 3, 6, 7, 8, generator=g)
        for name, pool in self.CASES:
            with self.subTest(name):
                want = pool(x)
                got = poptorch.inferenceModel(Pool(pool))(x)
                self.assertEqual(got.shape, want.shape)
                self.assertLess(rel(got, want), 1e-6)

    def test_indices_and_unpooling(self):
        g = torch.Generator().manual_seed(3)
        x = torch.randn(2, 2, 5, 7, 6, generator=g)
        x[0, 0, :2, :2, :2] = 5.0  # a tie: the first in scan order wins
        x[1, 1, 1, 3:5, 2] = 4.0  # a tie across depth taps
        for k, s, p, ceil in ((2, 2, 0, False), (3, 2, 1, False), ((2, 3, 2), 2, 0, True)):
            with self.subTest(kernel=k, stride=s, pad=p, ceil=ceil):
                m = Pool(nn.MaxPool3d(k, s, p, ceil_mode=ceil, return_indices=True))
                want_y, want_i = m(x)
                got_y, got_i = poptorch.inferenceModel(m)(x)
                self.assertTrue(torch.equal(got_y, want_y))
                self.assertTrue(torch.equal(got_i.long(), want_i))
        x = torch.randn(2, 2, 4, 6, 6, generator=g)
        ref = Unpool3d()
        with torch.no_grad():
            want = ref(x)
        self.assertLess(rel(poptorch.inferenceModel(copy.deepcopy(ref))(x), want), 1e-5)
        train_both(self, ref, x, torch.randn(want.shape, generator=g), 0.5, 2e-5)


if __name__ == "__main__":
    unittest.main()
