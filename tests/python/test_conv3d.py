"""tests/python/test_conv3d.py - 3-D convolution and pooling (torchvision's
video models) against PyTorch: a small Conv3d net (strides, dilation,
asymmetric padding, groups, batch norm over [N, C, D, H, W], MaxPool3d and
AvgPool3d with padding) in inference and after SGD steps, and torchvision's
r3d_18 in inference at 4x16x16 clips (issue 46 row 28). They are built from
2-D convolutions and poolings over the depth slices
(src/onnx/onnx_conv3d.c).

TG_TEST_LABELS: quick
"""
import copy
import unittest

from tg_pytest import poptorch
import torch
import torch.nn as nn


def rel(a, b):
    return float((a - b).abs().max()) / max(float(b.abs().max()), 1.0)


class Net3d(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.c1 = nn.Conv3d(3, 4, 3, stride=(1, 2, 2), padding=(1, 0, 1))
        self.bn = nn.BatchNorm3d(4)
        self.c2 = nn.Conv3d(4, 6, (2, 3, 1), dilation=(2, 1, 1), groups=2, bias=False)
        self.maxp = nn.MaxPool3d((2, 3, 3), stride=(1, 2, 2), padding=(1, 1, 1))
        self.avgp = nn.AvgPool3d((3, 2, 2), stride=(1, 1, 2), padding=(1, 0, 1))
        self.pool = nn.AdaptiveAvgPool3d(1)
        self.fc = nn.Linear(6, 3)

    def forward(self, x, labels=None):
        h = self.avgp(self.maxp(self.c2(torch.relu(self.bn(self.c1(x))))))
        out = self.fc(self.pool(h).flatten(1))
        if labels is None:
            return out
        return out, nn.functional.cross_entropy(out, labels)


class Conv3dTest(unittest.TestCase):
    def test_small_net_inference_and_training(self):
        g = torch.Generator().manual_seed(1)
        x = torch.randn(2, 3, 5, 13, 12, generator=g)
        y = torch.tensor([0, 2])
        ref = Net3d()
        ev = copy.deepcopy(ref).eval()
        with torch.no_grad():
            want = ev(x)
        self.assertLess(rel(poptorch.inferenceModel(copy.deepcopy(ev))(x), want), 1e-5)
        m = copy.deepcopy(ref)
        opt = torch.optim.SGD(ref.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            ref(x, y)[1].backward()
            opt.step()
        tm = poptorch.trainingModel(m, None, poptorch.optim.SGD(m.parameters(), lr=0.1))
        for _ in range(3):
            tm(x, y)
        tm.copyWeightsToHost()
        for (name, a), b in zip(m.named_parameters(), ref.parameters()):
            self.assertLess(float((a.detach() - b.detach()).abs().max()), 2e-5, name)

    def test_r3d_18_inference(self):
        try:
            import torchvision
        except ImportError:
            self.skipTest("torchvision is not installed")
        torch.manual_seed(0)
        m = torchvision.models.video.r3d_18(weights=None, num_classes=5)
        x = torch.randn(2, 3, 4, 16, 16, generator=torch.Generator().manual_seed(2))
        with torch.no_grad():
            m.train()
            m(x)  # running statistics from a batch, so eval mode is not the identity
        m.eval()
        with torch.no_grad():
            want = m(x)
        got = poptorch.inferenceModel(copy.deepcopy(m))(x)
        self.assertLess(rel(got, want), 1e-4)


if __name__ == "__main__":
    unittest.main()
