"""tests/python/test_vit_b16.py - torchvision's vit_b_16 (86 M parameters,
random weights, batch 2 at 224x224) imported and run in inference against
PyTorch's float32: within 1e-4 of the largest logit. It takes about 30 s
(the export of 330 MB of weights and the compile dominate), so it is
labelled slow and `make test` leaves it out; test_vision_import.py trains a
small VisionTransformer of the same code in a few seconds.

TG_TEST_LABELS: slow
"""
import copy
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


class VitB16(unittest.TestCase):
    def test_inference_matches_pytorch(self):
        torch.manual_seed(0)
        model = torchvision.models.vit_b_16()
        # torchvision's head starts at zero: every logit would be its bias
        torch.nn.init.normal_(model.heads.head.weight, std=0.02)
        model.eval()
        x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            ref = model(x).numpy()
        out = poptorch.inferenceModel(copy.deepcopy(model), poptorch.Options())(x).numpy()
        scale = float(np.max(np.abs(ref)))
        err = float(np.max(np.abs(out - ref))) / scale
        spread = float(np.max(np.abs(ref[0] - ref[1]))) / scale
        print(f"vit_b_16: inference {err:.2e} of the largest logit", flush=True)
        self.assertGreater(spread, 1e-3, "the two samples' reference logits agree")
        self.assertLessEqual(err, 1e-4, f"vit_b_16 differs from PyTorch by {err:.3g}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    unittest.main()
