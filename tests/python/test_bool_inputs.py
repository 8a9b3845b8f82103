"""tests/python/test_bool_inputs.py - a bool model input, nn.MultiheadAttention's
usual key_padding_mask, against PyTorch: inference, and the weights after
SGD steps. The importer takes a bool input as an int32 0/1 tensor (it was
refused: "float, double, float16, integer and uint8 inputs are taken"), and
the host sends the bool tensor as 0/1 (issue 46 row 27).

TG_TEST_LABELS: quick
"""
import copy
import unittest

from tg_pytest import poptorch
import torch
import torch.nn as nn

import tilegraph._compiling as compiling

B, S, D = 4, 6, 8


class Attend(nn.Module):
    """Self-attention over tokens with padded positions masked out, then the
    mean over the kept positions into two classes."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.attn = nn.MultiheadAttention(D, 2, batch_first=True)
        self.head = nn.Linear(D, 2)

    def forward(self, x, pad, labels=None):
        h, _ = self.attn(x, x, x, key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).float()
        out = self.head((h * keep).sum(1) / keep.sum(1))
        if labels is None:
            return out
        return out, nn.functional.cross_entropy(out, labels)


def batch():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(B, S, D, generator=g)
    pad = torch.zeros(B, S, dtype=torch.bool)
    for i, n in enumerate((6, 4, 5, 2)):  # valid lengths
        pad[i, n:] = True
    return x, pad, torch.tensor([0, 1, 1, 0])


class BoolInputTest(unittest.TestCase):
    def test_the_file_keeps_the_bool_input(self):
        # the mask reaches the importer as bool, not rewritten to int32
        seen = []
        real = compiling._retype_inputs

        def spy(path):
            import onnx
            changed = real(path)
            seen.extend(i.type.tensor_type.elem_type for i in onnx.load(path).graph.input)
            return changed

        compiling._retype_inputs = spy
        try:
            x, pad, _ = batch()
            poptorch.inferenceModel(Attend())(x, pad)
        finally:
            compiling._retype_inputs = real
        import onnx
        self.assertIn(onnx.TensorProto.BOOL, seen)

    def test_inference_matches_pytorch(self):
        m = Attend().eval()
        x, pad, _ = batch()
        with torch.no_grad():
            want = m(x, pad)
        got = poptorch.inferenceModel(copy.deepcopy(m))(x, pad)
        self.assertLess(float((got - want).abs().max()), 1e-5)
        # a different mask gives PyTorch's different answer
        pad2 = pad.clone()
        pad2[0, 3:] = True
        with torch.no_grad():
            want2 = m(x, pad2)
        self.assertGreater(float((want2 - want).abs().max()), 1e-3)
        got2 = poptorch.inferenceModel(copy.deepcopy(m))(x, pad2)
        self.assertLess(float((got2 - want2).abs().max()), 1e-5)

    def test_training_matches_pytorch(self):
        ref = Attend()
        m = copy.deepcopy(ref)
        x, pad, y = batch()
        opt = torch.optim.SGD(ref.parameters(), lr=0.5)
        for _ in range(3):
            opt.zero_grad()
            ref(x, pad, y)[1].backward()
            opt.step()
        tm = poptorch.trainingModel(m, None, poptorch.optim.SGD(m.parameters(), lr=0.5))
        for _ in range(3):
            tm(x, pad, y)
        tm.copyWeightsToHost()
        for (name, a), b in zip(m.named_parameters(), ref.parameters()):
            err = float((a.detach() - b.detach()).abs().max())
            self.assertLess(err, 1e-5, name)


if __name__ == "__main__":
    unittest.main()
