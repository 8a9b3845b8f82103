"""tests/python/test_ort_parity_large.py - test_ort_parity.py's comparison
(tilegraph's inference against onnxruntime's, same file, same inputs, f32,
1e-4 relative) on the torchvision models the Python tests import at their
full size (test_vision_breadth.py, test_vision_large.py, test_vit_b16.py):
eval-mode exports at 224x224, batch 2. About two minutes under load.

TG_TEST_LABELS: index slow

Runs with the venv Python (/opt/tilegraph/venv/bin/python); `--markdown`
prints the docs/onnx.md rows.
"""
import os
import sys
import tempfile

import test_ort_parity as parity

LARGE_VISION = ["resnet50", "mobilenet_v3_large", "efficientnet_b0", "densenet121", "convnext_tiny",
                "swin_t", "vit_b_16"]


class ParityLarge(parity.Parity):
    def test_large_vision(self):
        with tempfile.TemporaryDirectory() as d:
            for name in LARGE_VISION:
                with self.subTest(name):
                    path, feeds = parity.export_torchvision(name, 224, d)
                    self.check(f"torchvision {name} 224x224", path, feeds)
                    os.remove(path)


if __name__ == "__main__":
    # only this file's test, not the small ones it inherits
    sys.argv[1:1] = [] if any(a.startswith("ParityLarge") for a in sys.argv[1:]) else \
        ["ParityLarge.test_large_vision"]
    parity.main(sys.argv)
