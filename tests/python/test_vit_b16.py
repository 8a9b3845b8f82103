"""tests/python/test_vit_b16.py - torchvision's vit_b_16 (86 M parameters,
random weights, batch 2 at 224x224) against PyTorch, as issue 29 asks:

- inference against PyTorch's float32: within 1e-4 of the largest logit;
- one training step (SGD at lr 1, so the update is the gradient) against
  PyTorch in float64 on the same weights and batch, within 3x PyTorch
  float32's own distance from float64 (test_torch_numerics.py's measure:
  per parameter, relative to its largest float64 gradient; the worst
  parameter counts). The step runs the same 86 M-parameter encoder at
  64x64 (torchvision's image_size=64: 17 tokens instead of 197): at 224
  PyTorch's float64 step made the test take 5.5 minutes, past its timeout
  on a busy machine, and every layer's code and size is the same.

It is labelled slow (about a minute: the export of 330 MB of weights twice
and PyTorch's float64 step); test_vision_import.py and
test_torch_numerics.py check smaller transformers of the same code in
seconds.

TG_TEST_LABELS: slow
"""
import copy
import os
import sys
import unittest

import tg_pytest  # noqa: F401  (skips without torch, cffi, onnx)

try:
    import torchvision
except ImportError as e:
    print(f"skipped: {e} (make bench-deps installs python3-torchvision)")
    sys.exit(77)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import tilegraph as poptorch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_torch_numerics as numerics  # noqa: E402


def vit_b_16(image_size=224):
    model = torchvision.models.vit_b_16(num_classes=10, image_size=image_size)
    # torchvision's head starts at zero: every logit would be its bias, and
    # no gradient would reach the encoder
    torch.nn.init.normal_(model.heads.head.weight, std=0.02)
    return model


numerics.MODELS["vit_b_16"] = (vit_b_16, (3, 224, 224), 10)
numerics.MODELS["vit_b_16@64"] = (lambda: vit_b_16(64), (3, 64, 64), 10)


class VitB16(unittest.TestCase):
    def test_inference_matches_pytorch(self):
        model, x, _ = numerics.make("vit_b_16")
        model.eval()
        with torch.no_grad():
            ref = model(x).numpy()
        out = poptorch.inferenceModel(copy.deepcopy(model), poptorch.Options())(x).numpy()
        err, spread = numerics.rel(out, ref), numerics.rel(ref[0], ref[1])
        print(f"vit_b_16: inference {err:.2e} of the largest logit", flush=True)
        self.assertGreater(spread, 1e-3, "the two samples' reference logits agree")
        self.assertLessEqual(err, numerics.INFER_TOL, f"vit_b_16 differs from PyTorch by {err:.3g}")

    def test_training_step_matches_float64(self):
        tr = numerics.training("vit_b_16@64")
        print(f"vit_b_16 at 64x64: training step {tr['train']:.2e} from float64 (PyTorch float32 "
              f"{tr['torch32']:.2e}; worst parameter {tr['worst']}; {len(tr['bad'])} of "
              f"{len(tr['params'])} parameters beyond 3x PyTorch's own); loss {tr['loss']:.2e}",
              flush=True)
        self.assertLessEqual(tr["train"], tr["tol"],
                             f"vit_b_16's {tr['worst']} is {tr['train']:.3g} from float64, "
                             f"PyTorch float32's worst is {tr['torch32']:.3g}")
        self.assertLessEqual(tr["zero"], tr["zero_tol"], "analytically zero gradients")
        self.assertLessEqual(tr["loss"], max(numerics.TRAIN_FACTOR * tr["loss32"],
                                             numerics.TRAIN_FLOOR), "the loss")


if __name__ == "__main__":
    torch.set_num_threads(1)
    unittest.main()
