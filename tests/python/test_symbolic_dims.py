"""tests/python/test_symbolic_dims.py - models exported with docs/onnx.md's recipe
whose output dims PyTorch's exporter declares by name, through the command
(`tilegraph import` and `train --model FILE.onnx`): a causal language model
built on nn.TransformerEncoderLayer (scores declared [batch,
'Addlogits_dim_1', 256]) and torchvision's lraspp_mobilenet_v3_large at 32x32
(scores declared [batch, 'Resizelogits_dim_1', ...], as fcn_resnet50's and
deeplabv3's). Both were refused: the command read the declared dims as
unknown; it now takes the built model's (issue 46 rows 9 and 26).

TG_TEST_LABELS: quick
"""
import os
import subprocess
import tempfile
import unittest

from tg_pytest import skip_without_deps  # noqa: F401  (exits 77 without torch)
import sys

import torch
import torch.nn as nn

# The language model is the one the C tests' fixture is exported from.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "onnx",
                                "fixtures"))
from make_symbolic_fixtures import SEQ, VOCAB, CausalLM  # noqa: E402

CORPUS = "/usr/share/common-licenses/GPL-3"


def export(model, example, path, opset=13):
    """docs/onnx.md's recipe."""
    torch.onnx.export(model, example, path, opset_version=opset, input_names=["input"],
                      output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)


class Out(nn.Module):
    """torchvision's segmentation models return a dict: export its "out"."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


@unittest.skipUnless(os.environ.get("TILEGRAPH_CLI"), "TILEGRAPH_CLI is not set")
class SymbolicDimsTest(unittest.TestCase):
    def run_cli(self, *args):
        r = subprocess.run([os.environ["TILEGRAPH_CLI"], *args], capture_output=True, text=True,
                           timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-2000:])
        return r.stdout

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def test_transformer_language_model(self):
        torch.manual_seed(0)
        path = os.path.join(self.dir.name, "lm.onnx")
        export(CausalLM(), torch.randint(0, VOCAB, (2, SEQ)), path, opset=14)  # Trilu
        out = self.run_cli("import", path)
        self.assertIn("[batch, Addlogits_dim_1, 256] (built: [1, 16, 256])", out)
        if os.path.exists(CORPUS):
            out = self.run_cli("train", "--model", path, "--data", "text:" + CORPUS, "--epochs", "1",
                               "--train-limit", "32", "--test-limit", "16", "--batch-size", "8")
            self.assertIn("perplexity", out)

    def test_torchvision_lraspp(self):
        try:
            import torchvision
        except ImportError:
            self.skipTest("torchvision is not installed")
        torch.manual_seed(0)
        m = torchvision.models.segmentation.lraspp_mobilenet_v3_large(
            weights=None, weights_backbone=None, num_classes=4)
        path = os.path.join(self.dir.name, "lraspp.onnx")
        export(Out(m).eval(), torch.randn(1, 3, 32, 32), path)
        out = self.run_cli("import", path)
        self.assertRegex(out, r"\[batch, Resizelogits_dim_1, Resizelogits_dim_2, "
                              r"Resizelogits_dim_3\] \(built: \[1, 4, 32, 32\]\)")
        out = self.run_cli("train", "--model", path, "--data", "shapes", "--epochs", "1",
                           "--train-limit", "16", "--test-limit", "8", "--batch-size", "8")
        self.assertIn("test mean IoU", out)


if __name__ == "__main__":
    unittest.main()
