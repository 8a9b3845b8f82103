"""tests/python/test_verify.py - Options().Debug.verifyAgainstReference: the first
step checked tensor by tensor against the reference kernels (docs/numerics.md)."""
import unittest

from tg_pytest import WithLoss, poptorch
import torch
import torch.nn as nn

from tilegraph import TilegraphError


def conv_flatten():
    """The graph issue 28 found wrong: a 1x1 convolution to 32 channels, flattened."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(4, 32, 1), nn.BatchNorm2d(32), nn.ReLU(), nn.Flatten(),
                         nn.Linear(32 * 6 * 6, 3))


def batch():
    torch.manual_seed(1)
    return torch.rand(2, 4, 6, 6), torch.tensor([0, 2])


class VerifyTest(unittest.TestCase):
    def test_step_within_tolerance(self):
        m = conv_flatten()
        opts = poptorch.Options()
        opts.Debug.verifyAgainstReference(True)
        tm = poptorch.trainingModel(WithLoss(m), opts, poptorch.optim.SGD(m.parameters(), lr=0.1))
        out, loss = tm(*batch())
        self.assertTrue(torch.isfinite(loss).all())
        tm(*batch())  # only the first step is checked

    def test_beyond_tolerance_names_the_tensor(self):
        # a factor far below f32's own rounding: some convolution or sum must exceed it
        m = conv_flatten()
        opts = poptorch.Options()
        opts.Debug.verifyAgainstReference(True, tolerance=0.001)
        tm = poptorch.trainingModel(WithLoss(m), opts, poptorch.optim.SGD(m.parameters(), lr=0.1))
        with self.assertRaisesRegex(TilegraphError, r"verify: '.+' \(.+\) differs from the reference"):
            tm(*batch())

    def test_inference(self):
        m = conv_flatten().eval()
        opts = poptorch.Options()
        opts.Debug.verifyAgainstReference(True)
        im = poptorch.inferenceModel(m, opts)
        x, _ = batch()
        self.assertTrue(torch.allclose(im(x), m(x), rtol=1e-4, atol=1e-5))

    def test_bad_tolerance(self):
        with self.assertRaisesRegex(ValueError, "debug.verifyTolerance"):
            poptorch.Options().Debug.verifyAgainstReference(True, tolerance=-1)


if __name__ == "__main__":
    unittest.main()
