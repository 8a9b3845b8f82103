"""tests/python/test_vision_import.py - vision models the importer once refused, against PyTorch.

- A Conv1d net over [B, 8, 100] (1-D Conv, BatchNorm1d, MaxPool1d,
  AvgPool1d, a global average pool): ONNX's 1-D ops run as the 2-D ones
  over [N, C, 1, L].
- A decoder of ConvTranspose2d (stride 2, output_padding, groups) and
  ConvTranspose1d layers, trained with MSELoss.
- torchvision's VisionTransformer, small (image 32, patch 8, 2 layers,
  hidden 64, 4 heads, mlp 128): its class_token.expand(n, -1, -1) exports
  as Equal/Where on the shape (folded at import) and Expand of the token.

Each as test_torch_numerics.py measures: inference against PyTorch's
eval-mode float32 within 1e-4 of the largest output; one SGD step (lr 1,
so the update read back is the gradient) against PyTorch float64 on the
same weights and batch, the worst parameter within 3x PyTorch float32's own
worst (or 1e-5). Refusals (a 3-D convolution, an output_padding not below
the stride) must name the node and the fault.
"""
import copy
import sys
import unittest

import tg_pytest  # noqa: F401  (skips without torch, cffi, onnx)
from tg_pytest import WithLoss, rel  # noqa: E402

try:
    from torchvision.models.vision_transformer import VisionTransformer
except ImportError as e:
    print(f"skipped: {e} (make bench-deps installs python3-torchvision)")
    sys.exit(77)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import tilegraph as poptorch  # noqa: E402

INFER_TOL = 1e-4
TRAIN_FACTOR = 3.0
TRAIN_FLOOR = 1e-5


class Conv1dNet(nn.Module):
    """[B, 8, 100] signals: every 1-D attribute the exporter writes."""

    def __init__(self, classes=5):
        super().__init__()
        self.conv1 = nn.Conv1d(8, 16, 5, stride=2, padding=2)
        self.bn1 = nn.BatchNorm1d(16)
        self.pool1 = nn.MaxPool1d(3, stride=2, padding=1)
        self.conv2 = nn.Conv1d(16, 16, 3, padding=2, dilation=2, groups=4)
        self.pool2 = nn.AvgPool1d(3, stride=2, padding=1, ceil_mode=True)
        self.conv3 = nn.Conv1d(16, 24, 3, padding=1)
        self.fc = nn.Linear(24, classes)

    def forward(self, x):
        x = self.pool1(torch.relu(self.bn1(self.conv1(x))))
        x = self.pool2(torch.relu(self.conv2(x)))
        x = torch.relu(self.conv3(x)).mean(2)
        return self.fc(x)


class Decoder(nn.Module):
    """A latent [B, 6] to [B, 3, 16, 16] images, then a 1-D transposed conv."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 8 * 4 * 4)
        self.up1 = nn.ConvTranspose2d(8, 6, 3, stride=2, padding=1, output_padding=1)
        self.up2 = nn.ConvTranspose2d(6, 4, 4, stride=2, padding=1, groups=2)
        self.up3 = nn.ConvTranspose1d(4, 3, 3, stride=2, dilation=2, output_padding=1, bias=False)

    def forward(self, z):
        h = torch.relu(self.fc(z)).reshape(-1, 8, 4, 4)
        h = torch.tanh(self.up2(torch.relu(self.up1(h))))  # [B, 4, 16, 16]
        return self.up3(h.mean(3))  # [B, 3, 36]


def small_vit():
    """torchvision initialises the head to zeros (every logit 0, no gradient
    below it): a random head, so the comparison sees the whole model."""
    model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64,
                              mlp_dim=128, num_classes=10)
    nn.init.normal_(model.heads.head.weight, std=0.1)
    nn.init.normal_(model.heads.head.bias, std=0.1)
    return model


def make(name, batch=2, seed=0):
    """(model, x, labels, loss module) with random weights and data."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    if name == "conv1d":
        model = Conv1dNet()
        with torch.no_grad():  # statistics of a batch, so eval mode tests something
            model.bn1.running_mean.uniform_(-0.5, 0.5)
            model.bn1.running_var.uniform_(0.5, 1.5)
        x = torch.randn(batch, 8, 100, generator=g)
        return model, x, torch.randint(0, 5, (batch,), generator=g), nn.CrossEntropyLoss()
    if name == "decoder":
        model = Decoder()
        x = torch.randn(batch, 6, generator=g)
        return model, x, torch.randn(batch, 3, 36, generator=g), nn.MSELoss()
    model = small_vit()
    x = torch.randn(batch, 3, 32, 32, generator=g)
    return model, x, torch.randint(0, 10, (batch,), generator=g), nn.CrossEntropyLoss()


def inference(name):
    model, x, _, _ = make(name)
    model.eval()
    with torch.no_grad():
        ref = model(x)
    out = poptorch.inferenceModel(copy.deepcopy(model), poptorch.Options())(x)
    return rel(out.numpy(), ref.numpy()), rel(ref[0].numpy(), ref[1].numpy())


def sgd_updates(model, x, y, loss):
    """w0 - w1 per parameter after one PyTorch SGD step at lr 1."""
    w0 = {k: p.detach().clone() for k, p in model.named_parameters()}
    model.train()
    loss(model(x), y).backward()
    torch.optim.SGD(model.parameters(), lr=1.0).step()
    return {k: (w0[k].double() - p.detach().double()).numpy() for k, p in model.named_parameters()}


def training(name):
    """One SGD step of tilegraph and of PyTorch float32, each against float64:
    (tilegraph's worst, PyTorch float32's worst, the worst parameter)."""
    model, x, y, loss = make(name)
    w0 = {k: p.detach().clone() for k, p in model.named_parameters()}
    y64 = y.double() if y.is_floating_point() else y
    g64 = sgd_updates(copy.deepcopy(model).double(), x.double(), y64, loss)
    g32 = sgd_updates(copy.deepcopy(model), x, y, loss)
    m = copy.deepcopy(model)
    tm = poptorch.trainingModel(WithLoss(m, copy.deepcopy(loss)), poptorch.Options(),
                                poptorch.optim.SGD(m.parameters(), lr=1.0))
    tm(x, y)
    tm.copyWeightsToHost()
    top = max(float(np.max(np.abs(g))) for g in g64.values())
    ours, theirs = [], []
    for k, g in g64.items():
        tg = (w0[k].double() - dict(m.named_parameters())[k].detach().double()).numpy()
        if float(np.max(np.abs(g))) > 1e-9 * top:
            ours.append((rel(tg, g), k))
            theirs.append(rel(g32[k], g))
        else:  # analytically zero (a bias before batch norm): against the largest gradient
            ours.append((float(np.max(np.abs(tg - g))) / top, k))
    worst, where = max(ours)
    return worst, max(theirs), where


class VisionImport(unittest.TestCase):
    def check(self, name):
        err, spread = inference(name)
        print(f"{name}: inference {err:.2e} of the largest output", flush=True)
        self.assertGreater(spread, 1e-3, f"{name}: the two samples' reference outputs agree")
        self.assertLessEqual(err, INFER_TOL, f"{name}: inference differs from PyTorch by {err:.3g}")
        worst, torch32, where = training(name)
        tol = max(TRAIN_FACTOR * torch32, TRAIN_FLOOR)
        print(f"{name}: training step {worst:.2e} from float64 (PyTorch float32 {torch32:.2e}, "
              f"worst parameter {where})", flush=True)
        self.assertLessEqual(worst, tol, f"{name}: the training step's {where} is {worst:.3g} from "
                             f"float64, PyTorch float32's worst is {torch32:.3g}")

    def test_conv1d(self):
        self.check("conv1d")

    def test_conv_transpose_decoder(self):
        self.check("decoder")

    def test_small_vit(self):
        self.check("vit")

    def test_output_padding_beyond_stride_refused(self):
        # PyTorch allows output_padding below the stride or the dilation;
        # only below the stride maps onto the conv's data gradient
        model = nn.ConvTranspose2d(2, 3, 3, stride=1, dilation=2, output_padding=1)
        with self.assertRaises(poptorch.TilegraphError) as cm:
            poptorch.inferenceModel(model, poptorch.Options())(torch.randn(1, 2, 5, 5))
        self.assertIn("ConvTranspose", str(cm.exception))
        self.assertIn("an output padding of 1 with stride 1 (less than the stride is supported)",
                      str(cm.exception))


if __name__ == "__main__":
    torch.set_num_threads(1)
    unittest.main()
