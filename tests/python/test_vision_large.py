"""tests/python/test_vision_large.py - torchvision's larger models against PyTorch (issue 30).

test_vision_breadth.py's checks (its MODELS and check: inference within
1e-4 of the largest output of PyTorch's eval-mode float32; one SGD step at
lr 1 against PyTorch float64 on the same weights and batch, the worst
parameter within 3x PyTorch float32's own worst or 1e-5), batch 2 at 64x64,
random weights, 10 classes:

- convnext_tiny: depthwise 7x7 convs, LayerNorm over channels (permutes
  around it) and layer scale, here 1.0: at its default 1e-6 every block is
  the identity to within 1e-6 and the comparison has no power;
- swin_t: shifted-window attention. Its export computes the padding to
  whole windows and the shifted-window mask from integer constants
  (Transpose, broadcasting Add, Concat of 2-D constants, all folded at
  import) and gathers the relative-position bias by a constant index.
  At 64x64 the maps are 16, 8, 4 and 2 wide: the first stage is padded to
  21 and shifts its windows, the later ones fit in one window (no shift);
- mobilenet_v3_large: as mobilenet_v3_small (HardSigmoid, HardSwish), deeper;
- efficientnet_b0: SiLU, squeeze-and-excitation, stochastic depth (9 masks:
  only the blocks with a residual have one, the first's p is 0).

Dropout is taken out (efficientnet_b0's classifier has one). Stochastic
depth is on, p rising to 0.5 (at torchvision's 0.1-0.2 and batch 2 a step
drops a branch or two: too few to show a wrong mask; the builders'
argument, except swin_t's, which fixes 0.2, so the modules' p are scaled),
and the training step is compared for the masks tilegraph drew, which
PyTorch replays (test_vision_breadth.py's MaskReplay): 17 masks for
convnext_tiny, 22 for swin_t (each block's stochastic depth runs twice; the
first block's p is 0), 9 for efficientnet_b0. The four take about 50 s of
CPU (the first two 37 s), 2 minutes on a loaded 2-core machine, hence a
file of their own, labelled slow.
TG_VISION_MODELS=a,b runs only those models.
TG_TEST_LABELS: slow
"""
import os
import sys
import unittest

import tg_pytest  # noqa: F401  (skips without torch, cffi, onnx)

try:
    import torchvision
except ImportError as e:
    print(f"skipped: {e} (make bench-deps installs python3-torchvision)")
    sys.exit(77)

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_vision_breadth as breadth  # noqa: E402


breadth.MODELS["convnext_tiny"] = (
    lambda: torchvision.models.convnext_tiny(num_classes=10, stochastic_depth_prob=0.5,
                                             layer_scale=1.0), (3, 64, 64), "ce")
breadth.MODELS["swin_t"] = (breadth.stochastic_depth_at(0.5)(
    lambda: torchvision.models.swin_t(num_classes=10)), (3, 64, 64), "ce")
breadth.MODELS["mobilenet_v3_large"] = (
    lambda: torchvision.models.mobilenet_v3_large(num_classes=10), (3, 64, 64), "ce")
breadth.MODELS["efficientnet_b0"] = (
    lambda: torchvision.models.efficientnet_b0(num_classes=10, stochastic_depth_prob=0.5),
    (3, 64, 64), "ce")


class VisionLarge(unittest.TestCase):
    check = breadth.VisionBreadth.check

    def test_convnext_tiny(self):
        self.check("convnext_tiny")

    def test_swin_t(self):
        self.check("swin_t")

    def test_mobilenet_v3_large(self):
        self.check("mobilenet_v3_large")

    def test_efficientnet_b0(self):
        self.check("efficientnet_b0")


if __name__ == "__main__":
    torch.set_num_threads(1)
    unittest.main()
