"""tests/python/test_model_lifetime.py - a model used once and dropped at once.

`poptorch.inferenceModel(model, opts)(x)` leaves the model a temporary:
Python frees it as soon as the call returns, clearing its attributes in
their own order. The session must go before the graph it was compiled from
(tilegraph/session.h); when the graph went first, destroying a program
with planned kernels read the freed graph and crashed (torchvision's
resnet18 and convnext_tiny did, every time). The session's destructor now
holds the graph.
"""
import unittest

import tg_pytest  # noqa: F401  (skips without torch, cffi, onnx)

try:
    import torchvision
except ImportError as e:
    import sys
    print(f"skipped: {e} (make bench-deps installs python3-torchvision)")
    sys.exit(77)

import gc  # noqa: E402

import torch  # noqa: E402

import tilegraph as poptorch  # noqa: E402


class Lifetime(unittest.TestCase):
    def test_temporary_models(self):
        torch.manual_seed(0)
        x = torch.randn(2, 3, 16, 16)
        for _ in range(2):  # the freed graph's memory reused by the next one
            model = torchvision.models.resnet18(num_classes=10).eval()
            with torch.no_grad():
                ref = model(x)
            out = poptorch.inferenceModel(model, poptorch.Options())(x)
            del model
            gc.collect()
            self.assertLess(float((out - ref).abs().max()), 1e-4 * float(ref.abs().max()))


if __name__ == "__main__":
    torch.set_num_threads(1)
    unittest.main()
