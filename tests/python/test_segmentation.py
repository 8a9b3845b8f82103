"""tests/python/test_segmentation.py - torchvision's segmentation models against PyTorch (issue 30).

fcn_resnet50 (a dilated ResNet-50, output stride 8, and the FCN head) and
deeplabv3_mobilenet_v3_large (MobileNetV3 with dilation, output stride 16,
ASPP with its image-pooling branch), random weights, 4 classes, no
auxiliary head. Both return a dict; the model exported is its "out" (the
scores of every pixel, upsampled to the input's size by Resize).

As test_vision_breadth.py measures: inference against PyTorch's eval-mode
float32 within 1e-4 of the largest output (running statistics first set
from a batch); one SGD step at lr 1 with CrossEntropyLoss over [N, C, H, W]
and labels [N, H, W] (the per-pixel loss: SoftmaxCrossEntropyLoss in the
exported file) against PyTorch float64 on the same weights and batch, the
worst parameter within 3x PyTorch float32's own worst (NCHW) or 1e-5.
Batch 2 at 32x32, small enough for the whole file to take seconds: at
32x32 fcn_resnet50's last maps are 4x4 and deeplabv3's 2x2.

deeplabv3's image-pooling branch normalises the batch's 2 pooled vectors
(a batch norm over [2, 256, 1, 1]): each channel's two values become +-1,
and float32's step there is as far from float64 as the pair is close, for
PyTorch as for tilegraph; the comparison against PyTorch float32's own
error covers it, as it does densenet121's 2x1 maps.
TG_VISION_MODELS=a,b runs only those models.
TG_TEST_LABELS: slow
"""
import copy
import os
import sys
import time
import unittest

import tg_pytest  # noqa: F401  (skips without torch, cffi, onnx)
from tg_pytest import WithLoss, rel  # noqa: E402

try:
    import torchvision
except ImportError as e:
    print(f"skipped: {e} (make bench-deps installs python3-torchvision)")
    sys.exit(77)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import tilegraph as poptorch  # noqa: E402
from test_vision_breadth import calibrate, no_dropout, selected  # noqa: E402

BATCH = 2
SIZE = 32
CLASSES = 4
INFER_TOL = 1e-4
TRAIN_FACTOR = 3.0
TRAIN_FLOOR = 1e-5
ZERO = 1e-9  # a float64 gradient below this fraction of the largest is analytically zero


class Out(nn.Module):
    """The "out" entry of a torchvision segmentation model's dict."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def segmentation_model(name):
    ctor = getattr(torchvision.models.segmentation, name)
    return Out(ctor(weights=None, weights_backbone=None, num_classes=CLASSES, aux_loss=False))


MODELS = ["fcn_resnet50", "deeplabv3_mobilenet_v3_large"]


def make(name, seed=0):
    torch.manual_seed(seed)
    model = no_dropout(segmentation_model(name))
    g = torch.Generator().manual_seed(seed + 1)
    calibrate(model, torch.randn(8, 3, SIZE, SIZE, generator=g))
    x = torch.randn(BATCH, 3, SIZE, SIZE, generator=g)
    y = torch.randint(0, CLASSES, (BATCH, SIZE, SIZE), generator=g)
    return model, x, y


def sgd_step(model, x, y):
    """w0 - w1 per parameter after one SGD step at lr 1 on the per-pixel cross-entropy."""
    w0 = {k: p.detach().clone() for k, p in model.named_parameters()}
    model.train()
    nn.functional.cross_entropy(model(x), y).backward()
    torch.optim.SGD(model.parameters(), lr=1.0).step()
    return {k: (w0[k].double() - p.detach().double()).numpy()
            for k, p in model.named_parameters()}


class Segmentation(unittest.TestCase):
    def check(self, name):
        if not selected(name):
            self.skipTest("not in TG_VISION_MODELS")
        t0 = time.time()
        model, x, y = make(name)
        model.eval()
        with torch.no_grad():
            ref = model(x)
        self.assertEqual(tuple(ref.shape), (BATCH, CLASSES, SIZE, SIZE))
        out = poptorch.inferenceModel(copy.deepcopy(model), poptorch.Options())(x)
        err = rel(out.numpy(), ref.numpy())
        print(f"{name}: inference {err:.2e} of the largest output ({time.time() - t0:.1f} s)",
              flush=True)
        self.assertGreater(rel(ref[0].numpy(), ref[1].numpy()), 1e-3,
                           f"{name}: the two samples' reference outputs agree")
        self.assertLessEqual(err, INFER_TOL, f"{name}: inference differs from PyTorch by {err:.3g}")

        t0 = time.time()
        w0 = {k: p.detach().clone() for k, p in model.named_parameters()}
        g64 = sgd_step(copy.deepcopy(model).double(), x.double(), y)
        g32 = sgd_step(copy.deepcopy(model), x, y)
        m = copy.deepcopy(model)
        tm = poptorch.trainingModel(WithLoss(m, nn.CrossEntropyLoss()), poptorch.Options(),
                                    poptorch.optim.SGD(m.parameters(), lr=1.0))
        _, loss = tm(x, y)
        tm.copyWeightsToHost()
        with torch.no_grad():
            model.train()
            ref_loss = float(nn.functional.cross_entropy(copy.deepcopy(model).double()(x.double()),
                                                         y))
        tg = {k: (w0[k].double() - p.detach().double()).numpy() for k, p in m.named_parameters()}
        top = max(float(np.max(np.abs(g))) for g in g64.values())
        ours, theirs = [], []
        for k, g in g64.items():
            if float(np.max(np.abs(g))) > ZERO * top:
                ours.append((rel(tg[k], g), k))
                theirs.append(rel(g32[k], g))
        worst, where = max(ours)
        torch32 = max(theirs)
        tol = max(TRAIN_FACTOR * torch32, TRAIN_FLOOR)
        print(f"{name}: loss {float(loss):.6f} (float64 {ref_loss:.6f}); training step "
              f"{worst:.2e} from float64 (PyTorch float32 {torch32:.2e}, worst parameter {where}; "
              f"{time.time() - t0:.1f} s)", flush=True)
        self.assertLessEqual(abs(float(loss) - ref_loss), 1e-4 * abs(ref_loss))
        self.assertLessEqual(worst, tol, f"{name}: the training step's {where} is {worst:.3g} from "
                             f"float64, PyTorch float32's worst is {torch32:.3g}")

    def test_fcn_resnet50(self):
        self.check("fcn_resnet50")

    def test_deeplabv3_mobilenet_v3_large(self):
        self.check("deeplabv3_mobilenet_v3_large")


if __name__ == "__main__":
    torch.set_num_threads(1)
    unittest.main()
