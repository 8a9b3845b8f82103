"""tests/python/test_vision_breadth.py - torchvision models the importer once refused at the door (issue 30).

- densenet121 (64x32): concats of up to 32 maps (tg_concat's tree beyond 8
  inputs), and an inference export that shares every zero running mean
  through Identity nodes. Not 32x32: there the last block's maps are 1x1, so
  its batch norms over a batch of 2 normalise two values to +-1 and PyTorch
  float32's own training step lands 69x the largest gradient away from
  float64 (tilegraph's 286x): a comparison of noise. At 64x32 (2x1 maps,
  4 values) PyTorch float32 is within 1e-1 and tilegraph within 1.2e-2;
- mobilenet_v3_small (64x64): HardSigmoid, HardSwish;
- mnasnet0_5 (64x32, as densenet121) in training: BatchNorm momentum
  0.0003, exported as ONNX's 0.9997: the running statistics after one step
  are compared too, their error relative to their change (momentum 0.1
  would be 333x off);
- a small U-Net: ConvTranspose2d, skip concats, F.interpolate nearest
  (scale 2, asymmetric + floor), bilinear (pytorch_half_pixel) and bilinear
  with align_corners to a size, trained with MSELoss;
- an activation zoo: PReLU (one slope per channel), ELU, SELU, CELU,
  Softplus, Mish, SiLU, Hardswish, Hardsigmoid, Softsign, PixelShuffle
  (DepthToSpace CRD) and PixelUnshuffle (SpaceToDepth);
- GroupNorm and InstanceNorm2d (InstanceNormalization);
- an op zoo: Einsum, Asin, Acos, Atan, TopK's values, ReduceLogSumExp and
  ScatterElements (reduction add);
- torchvision's StochasticDepth in training: per-sample masks, new ones each
  step, and the step's gradient for the mask drawn; the masks read back
  (anchors) 0 or 1 / (1 - p), different for each replica and each step; no
  random op in an eval-mode export (checked for every model: a Dropout of
  ratio 0 draws nothing); torch.bernoulli's frequency, and new draws each
  run.

A model with stochastic depth on (test_vision_large.py's) trains with the
masks tilegraph drew: the step's masks are read back (Options.anchorTensor
on the dropout of ones each StochasticDepth exports as) and PyTorch's
float32 and float64 steps replay them (MaskReplay), which also checks that
each kept sample's scale is its layer's 1 / (1 - p) and that the forward
used every mask; the step must drop some samples and keep others, and some
layer only one of its two.

Each as test_torch_numerics.py measures: inference against PyTorch's
eval-mode float32 within 1e-4 of the largest output (batch-norm running
statistics first set from a batch, or a random deep model's eval-mode
outputs are the same for every sample); one SGD step (lr 1: the update read
back is the gradient) against PyTorch float64 on the same weights and batch,
the worst parameter within 3x PyTorch float32's own worst (the larger of its
NCHW and channels_last orders) or 1e-5; gradients that are analytically zero
(a conv bias before batch norm) against the largest gradient. Batch 2.
TG_VISION_MODELS=a,b runs only those models.
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
import torch.nn.functional as F  # noqa: E402

import tilegraph as poptorch  # noqa: E402

BATCH = 2
INFER_TOL = 1e-4
TRAIN_FACTOR = 3.0
TRAIN_FLOOR = 1e-5
ZERO = 1e-9         # a float64 gradient below this fraction of the largest is analytically zero
ZERO_FLOOR = 1e-6   # its noise, relative to the largest gradient
SEED = 1            # tilegraph's randomSeed for the training steps


class UNet(nn.Module):
    """Two levels, a transposed-conv up path with a skip concat, then the three
    ways torch's F.interpolate exports: nearest x2, bilinear x2, bilinear
    align_corners to a size that is not a multiple."""

    def __init__(self):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.enc2 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.dec = nn.Sequential(nn.Conv2d(16, 8, 3, padding=1), nn.ReLU())
        self.head1 = nn.Conv2d(8, 6, 3, padding=1)
        self.head2 = nn.Conv2d(6, 4, 1)
        self.out = nn.Conv2d(4, 2, 1)

    def forward(self, x):
        e1 = self.enc1(x)                                        # [B, 8, 16, 16]
        e2 = self.enc2(F.max_pool2d(e1, 2))                      # [B, 16, 8, 8]
        d = self.dec(torch.cat([self.up(e2), e1], 1))            # [B, 8, 16, 16]
        d = F.interpolate(d, scale_factor=2, mode="nearest")     # [B, 8, 32, 32]
        d = torch.tanh(self.head1(F.max_pool2d(d, 2)))           # [B, 6, 16, 16]
        d = F.interpolate(d, scale_factor=2, mode="bilinear", align_corners=False)
        d = self.head2(d)                                        # [B, 4, 32, 32]
        d = F.interpolate(d, size=(21, 27), mode="bilinear", align_corners=True)
        return self.out(d)                                       # [B, 2, 21, 27]


class ActZoo(nn.Module):
    """Every new activation between convolutions, and the pixel shuffles."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.prelu = nn.PReLU(16, init=0.2)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.conv3 = nn.Conv2d(4, 16, 3, padding=1)
        self.conv4 = nn.Conv2d(64, 16, 1)
        self.fc = nn.Linear(64, classes)
        nn.init.zeros_(self.fc.bias)  # the logits are then the features' alone: samples differ
        self.acts = [nn.ELU(0.7), nn.SELU(), nn.CELU(1.3), nn.Softplus(), nn.Mish(), nn.SiLU(),
                     nn.Hardswish(), nn.Hardsigmoid(), nn.Softsign()]

    def forward(self, x):
        h = self.prelu(self.conv1(x))
        for k, act in enumerate(self.acts[:5]):
            h = act(h) if k % 2 else act(h) * 0.5 + h * 0.5
        h = F.pixel_shuffle(self.conv2(h), 2)                    # [B, 4, 32, 32]
        h = self.conv3(h)
        for act in self.acts[5:]:
            h = act(h) + 0.1 * h
        h = self.conv4(F.pixel_unshuffle(h, 2))                  # [B, 16, 16, 16]
        return self.fc(F.max_pool2d(h, 8).flatten(1))


class NormNet(nn.Module):
    """GroupNorm (exported as InstanceNormalization over [N, G, -1] with constant
    ones and zeros, then its own affine) and InstanceNorm2d with and without
    affine: the normalisations beside BatchNorm."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.gn = nn.GroupNorm(4, 16)
        self.conv2 = nn.Conv2d(16, 8, 3, padding=1)
        self.inorm = nn.InstanceNorm2d(8, affine=True)
        self.conv3 = nn.Conv2d(8, 8, 3, padding=1)
        self.inorm_plain = nn.InstanceNorm2d(8)
        self.fc = nn.Linear(8 * 4 * 4, classes)

    def forward(self, x):
        h = torch.relu(self.gn(self.conv1(x)))
        h = torch.relu(self.inorm(self.conv2(h)))
        h = self.inorm_plain(self.conv3(h)) * 0.5 + h
        return self.fc(F.max_pool2d(h, 4).flatten(1))


class OpZoo(nn.Module):
    """The ops of the importer's second round that torch 1.13 exports: Einsum,
    Asin, Acos, Atan, TopK's values, ReduceLogSumExp and ScatterElements with
    reduction add (static indices, some repeated). (It exports no sinh or
    cosh; softshrink and hardshrink as Where, the norm as ReduceSum and
    Sqrt.)"""

    def __init__(self, classes=10):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.mix = nn.Parameter(torch.randn(8, 6) * 0.4)
        self.fc = nn.Linear(6 * 12 + 8, classes)
        self.register_buffer("idx", torch.tensor([[0, 2, 5, 7, 1, 3], [7, 5, 5, 1, 0, 2]]))

    def forward(self, x):
        h = torch.tanh(self.conv(x)).flatten(2)                  # [B, 8, 64]
        m = torch.einsum("bcl,cd->bdl", h, self.mix)             # [B, 6, 64]
        t = torch.tanh(m)
        a = torch.asin(0.9 * t) + 0.3 * torch.acos(0.8 * t) + torch.atan(m)
        a = F.softshrink(a, 0.3) + 0.5 * F.hardshrink(a, 0.2)
        top = torch.topk(a, 12, dim=2).values                    # [B, 6, 12]
        lse = torch.logsumexp(a, dim=2)                          # [B, 6]
        l2 = torch.norm(a, dim=2)                                # [B, 6]
        # scatter_add of static shapes (the export needs them): weights
        w = torch.zeros(8, 6, dtype=self.mix.dtype).scatter_add(0, self.idx, self.mix[:2] * self.mix[2:4])
        spread = (lse * l2) @ w.t()                              # [B, 8]
        return self.fc(torch.cat([top.flatten(1), spread], 1))


class DepthNet(nn.Module):
    """A residual branch under torchvision's StochasticDepth (row mode, p 0.5):
    forward_masked replays a given per-sample keep mask (0 or 2)."""

    def __init__(self, classes=5):
        super().__init__()
        self.lin1 = nn.Linear(8, 16)
        self.lin2 = nn.Linear(16, 16)
        self.stochastic_depth = torchvision.ops.StochasticDepth(0.5, "row")
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        h = torch.relu(self.lin1(x))
        return self.head(h + self.stochastic_depth(self.lin2(h)))

    def forward_masked(self, x, mask):
        h = torch.relu(self.lin1(x))
        return self.head(h + self.lin2(h) * mask[:, None])


# tilegraph exports torchvision's stochastic depth as dropout of ones
# (tilegraph.model._stochastic_depth): each Dropout's output is a layer's mask,
# 0 or 1 / (1 - p), which an anchor reads back after the step
SD_ANCHOR = r".*/stochastic_depth(_[0-9]+)?/Dropout(_[0-9]+)?_output_0"  # a second call: "stochastic_depth_1"
RANDOM_OPS = {"Dropout", "Bernoulli", "RandomUniformLike", "RandomNormalLike", "RandomUniform",
              "RandomNormal"}


def stochastic_depths(model):
    """The StochasticDepth modules that draw in training (p > 0), in model order."""
    return [m for m in model.modules()
            if isinstance(m, torchvision.ops.StochasticDepth) and m.p > 0.0]


def stochastic_depth_at(p_max):
    """A constructor's wrapper: every StochasticDepth's p scaled so that the
    last is p_max (torchvision's linear rule kept). At torchvision's 0.1-0.2
    and batch 2 a step drops one or two branches: too few to test the masks."""
    def wrap(ctor):
        def make_model():
            model = ctor()
            mods = [m for m in model.modules() if isinstance(m, torchvision.ops.StochasticDepth)]
            top = max(m.p for m in mods)
            for m in mods:
                m.p = m.p * p_max / top
            return model
        return make_model
    return wrap


class MaskReplay:
    """torchvision's stochastic_depth replaced, for one forward, by the masks a
    tilegraph step drew (its anchors, in graph order, which is call order):
    each layer keeps the samples tilegraph kept and scales them by 1 / (1 - p)
    in the forward's own dtype, as torchvision does. Checks that each mask is
    one value per sample (row mode), every kept value exactly tilegraph's
    1 / (1 - p) for that layer's p, and that the forward used every mask."""

    def __init__(self, masks):
        self.masks = masks

    def __enter__(self):
        self.module = sys.modules["torchvision.ops.stochastic_depth"]
        self.saved, self.k = self.module.stochastic_depth, 0
        self.module.stochastic_depth = self.apply
        return self

    def apply(self, input, p, mode, training=True):
        if not training or p == 0.0:
            return input
        if self.k >= len(self.masks):
            raise AssertionError(f"the forward has more stochastic depths than tilegraph's "
                                 f"{len(self.masks)} masks")
        name, m = self.masks[self.k]
        self.k += 1
        want = (input.shape[0],) + (1,) * (input.dim() - 1) if mode == "row" else (1,) * input.dim()
        if tuple(m.shape) != want:
            raise AssertionError(f"{name}: mask of shape {tuple(m.shape)}, not {want}")
        kept = m[m != 0].double()
        scale = 1.0 / (1.0 - p)
        if kept.numel() and float((kept - scale).abs().max()) > 1e-6 * scale:
            raise AssertionError(f"{name}: kept samples scaled by {sorted(set(kept.tolist()))}, "
                                 f"not 1 / (1 - {p:.4g}) = {scale:.6g}")
        return input * ((m != 0).to(input.dtype) / (1.0 - p))

    def __exit__(self, kind, *rest):
        self.module.stochastic_depth = self.saved
        if kind is None and self.k != len(self.masks):
            raise AssertionError(f"the forward used {self.k} of tilegraph's {len(self.masks)} masks")


def mask_counts(masks):
    """(samples dropped, samples in all masks, layers whose samples differ)."""
    dropped = sum(int((m == 0).sum()) for _, m in masks)
    total = sum(m.numel() for _, m in masks)
    mixed = sum(1 for _, m in masks if len(set(m.flatten().tolist())) > 1)
    return dropped, total, mixed


def no_dropout(model):
    for name, mod in model.named_children():
        if isinstance(mod, nn.Dropout):
            setattr(model, name, nn.Identity())
        else:
            no_dropout(mod)
    return model


def calibrate(model, x):
    """Running statistics of the batch x (momentum 1 for one training-mode pass)."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    saved = [m.momentum for m in bns]
    for m in bns:
        m.momentum = 1.0
    model.train()
    with torch.no_grad():
        model(x)
    for m, momentum in zip(bns, saved):
        m.momentum = momentum


# name: (constructor, input shape, loss, target)
MODELS = {
    "densenet121": (lambda: torchvision.models.densenet121(num_classes=10), (3, 64, 32), "ce"),
    "mobilenet_v3_small": (lambda: torchvision.models.mobilenet_v3_small(num_classes=10),
                           (3, 64, 64), "ce"),
    "mnasnet0_5": (lambda: torchvision.models.mnasnet0_5(num_classes=10), (3, 64, 32), "ce"),
    "unet": (UNet, (3, 16, 16), "mse"),
    "act_zoo": (ActZoo, (3, 16, 16), "ce"),
    "norms": (NormNet, (3, 16, 16), "ce"),
    "op_zoo": (OpZoo, (3, 8, 8), "ce"),
}


def make(name, seed=0):
    ctor, shape, loss = MODELS[name]
    torch.manual_seed(seed)
    model = no_dropout(ctor())
    g = torch.Generator().manual_seed(seed + 1)
    calibrate(model, torch.randn((8,) + shape, generator=g))
    x = torch.randn((BATCH,) + shape, generator=g)
    if loss == "mse":
        with torch.no_grad():
            y = torch.randn(model.eval()(x).shape, generator=g)
        return model, x, y, nn.MSELoss()
    return model, x, torch.randint(0, 10, (BATCH,), generator=g), nn.CrossEntropyLoss()


def bn_stats(model):
    return {k: v.detach().double().clone() for k, v in model.named_buffers() if "running" in k}


def sgd_updates(model, x, y, loss, channels_last=False):
    """w0 - w1 per parameter after one SGD step at lr 1, and the running statistics after it."""
    w0 = {k: p.detach().clone() for k, p in model.named_parameters()}
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    model.train()
    loss(model(x), y).backward()
    torch.optim.SGD(model.parameters(), lr=1.0).step()
    return {k: (w0[k].double() - p.detach().double()).numpy()
            for k, p in model.named_parameters()}, bn_stats(model)


def random_ops(poptorch_model):
    """The ops of the file a compiled model imported that draw random numbers:
    a Dropout of ratio 0 draws none (swin_t's attention calls F.dropout
    without training=, which exports one even in eval mode)."""
    import onnx
    from onnx import numpy_helper
    g = onnx.load(os.path.join(poptorch_model._tmp.name, "model.onnx")).graph
    consts = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    consts.update({n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in g.node
                   if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"})

    def draws(n):
        ratio = consts.get(n.input[1]) if n.op_type == "Dropout" and len(n.input) > 1 else None
        return not (ratio is not None and float(np.max(np.abs(ratio))) == 0.0)
    return sorted({n.op_type for n in g.node if n.op_type in RANDOM_OPS and draws(n)})


def inference(name):
    """The error against PyTorch's eval mode, the two samples' spread, and the
    random ops of the imported file (none: eval mode draws nothing)."""
    model, x, _, _ = make(name)
    model.eval()
    with torch.no_grad():
        ref = model(x)
    im = poptorch.inferenceModel(copy.deepcopy(model), poptorch.Options())
    out = im(x)
    return rel(out.numpy(), ref.numpy()), rel(ref[0].numpy(), ref[1].numpy()), random_ops(im)


def training(name):
    """tilegraph's and PyTorch float32's worst parameter against float64, the worst
    parameter's name, the analytically zero gradients' noise (ours, PyTorch's), the
    running statistics' change against float64's (relative to the largest change),
    and the stochastic-depth masks tilegraph drew (PyTorch's steps replay them)."""
    model, x, y, loss = make(name)
    w0 = {k: p.detach().clone() for k, p in model.named_parameters()}
    s0 = bn_stats(model)
    m = copy.deepcopy(model)
    opts = poptorch.Options().randomSeed(SEED)  # the same masks at each run of the test
    if stochastic_depths(model):
        opts.anchorTensor("sd", SD_ANCHOR)
    tm = poptorch.trainingModel(WithLoss(m, copy.deepcopy(loss)), opts,
                                poptorch.optim.SGD(m.parameters(), lr=1.0))
    tm(x, y)
    tm.copyWeightsToHost()
    masks = list(tm.getAnchoredTensors("sd").items()) if stochastic_depths(model) else []
    y64 = y.double() if y.is_floating_point() else y
    with MaskReplay(masks):
        g64, s64 = sgd_updates(copy.deepcopy(model).double(), x.double(), y64, loss)
    with MaskReplay(masks):
        g32, s32 = sgd_updates(copy.deepcopy(model), x, y, loss)
    with MaskReplay(masks):
        g32cl, _ = sgd_updates(copy.deepcopy(model), x, y, loss, channels_last=True)
    tg = {k: (w0[k].double() - p.detach().double()).numpy() for k, p in m.named_parameters()}
    top = max(float(np.max(np.abs(g))) for g in g64.values())
    ours, theirs, zero, zero32 = [], [], [0.0], [0.0]
    for k, g in g64.items():
        if float(np.max(np.abs(g))) > ZERO * top:
            ours.append((rel(tg[k], g), k))
            theirs.append(max(rel(g32[k], g), rel(g32cl[k], g)))
        else:
            zero.append(float(np.max(np.abs(tg[k] - g))) / top)
            zero32.append(float(max(np.max(np.abs(g32[k] - g)), np.max(np.abs(g32cl[k] - g)))) / top)
    stats = stats32 = 0.0
    if s0:
        st = bn_stats(m)
        change = max(float(torch.max(torch.abs(s64[k] - s0[k]))) for k in s0)

        def stats_error(s):
            return max(float(torch.max(torch.abs(s[k] - s64[k]))) for k in s0) / change
        stats, stats32 = stats_error(st), stats_error(s32)
    worst, where = max(ours)
    return worst, max(theirs), where, max(zero), max(zero32), stats, stats32, masks


def selected(name):
    only = os.environ.get("TG_VISION_MODELS")
    return not only or name in only.split(",")


class VisionBreadth(unittest.TestCase):
    def check(self, name, train=True):
        if not selected(name):
            self.skipTest("not in TG_VISION_MODELS")
        t0 = time.time()
        err, spread, drawn = inference(name)
        print(f"{name}: inference {err:.2e} of the largest output ({time.time() - t0:.1f} s)",
              flush=True)
        self.assertEqual(drawn, [], f"{name}: the eval-mode export draws random numbers")
        self.assertGreater(spread, 1e-3, f"{name}: the two samples' reference outputs agree")
        self.assertLessEqual(err, INFER_TOL, f"{name}: inference differs from PyTorch by {err:.3g}")
        if not train:
            return
        t0 = time.time()
        worst, torch32, where, zero, zero32, stats, stats32, masks = training(name)
        tol = max(TRAIN_FACTOR * torch32, TRAIN_FLOOR)
        if masks:
            # the comparison has power only if the step dropped some branches,
            # kept others, and dropped some samples of a layer but not all
            dropped, total, mixed = mask_counts(masks)
            print(f"{name}: stochastic depth: {len(masks)} masks, {dropped} of {total} samples "
                  f"dropped, {mixed} layers dropping only some samples", flush=True)
            self.assertTrue(0 < dropped < total and mixed > 0,
                            f"{name}: {dropped} of {total} samples dropped ({mixed} layers mixed): "
                            "the masks cannot show a wrong one")
        print(f"{name}: training step {worst:.2e} from float64 (PyTorch float32 {torch32:.2e}, "
              f"worst parameter {where}); zero gradients {zero:.1e} (PyTorch {zero32:.1e}); "
              f"running statistics {stats:.1e} of their change (PyTorch {stats32:.1e}; "
              f"{time.time() - t0:.1f} s)", flush=True)
        self.assertLessEqual(worst, tol, f"{name}: the training step's {where} is {worst:.3g} from "
                             f"float64, PyTorch float32's worst is {torch32:.3g}")
        self.assertLessEqual(zero, max(TRAIN_FACTOR * zero32, ZERO_FLOOR),
                             f"{name}: analytically zero gradients are {zero:.3g} of the largest")
        # the statistics' update: momentum 0.0003 read as 0.1 would be 333x off
        self.assertLessEqual(stats, max(TRAIN_FACTOR * stats32, 1e-4),
                             f"{name}: running statistics {stats:.3g} of their change from "
                             f"float64's (PyTorch float32 {stats32:.3g})")

    def test_densenet121(self):
        self.check("densenet121")

    def test_mobilenet_v3_small(self):
        self.check("mobilenet_v3_small")

    def test_mnasnet0_5_training(self):
        self.check("mnasnet0_5")

    def test_unet(self):
        self.check("unet")

    def test_activation_zoo(self):
        self.check("act_zoo")

    def test_group_and_instance_norm(self):
        self.check("norms")

    def test_op_zoo(self):
        self.check("op_zoo")

    def test_stochastic_depth_trains(self):
        """Each sample's branch is dropped or doubled (torch 1.13 cannot export
        bernoulli_: the package exports it as dropout of ones), the masks
        differ between steps, and the step's gradient is PyTorch float64's
        for the mask the forward drew."""
        torch.manual_seed(0)
        model = DepthNet()
        g = torch.Generator().manual_seed(1)
        x, y = torch.randn(16, 8, generator=g), torch.randint(0, 5, (16,), generator=g)
        m = copy.deepcopy(model)
        tm = poptorch.trainingModel(WithLoss(m, nn.CrossEntropyLoss()), poptorch.Options(),
                                    poptorch.optim.SGD(m.parameters(), lr=1.0))

        def mask_of(out, weights):
            ref = copy.deepcopy(weights).double().eval()
            with torch.no_grad():
                o0 = ref.forward_masked(x.double(), torch.zeros(16, dtype=torch.float64))
                o2 = ref.forward_masked(x.double(), torch.full((16,), 2.0, dtype=torch.float64))
            d0 = (out.double() - o0).abs().amax(1)
            d2 = (out.double() - o2).abs().amax(1)
            gap = (o0 - o2).abs().amax(1)
            self.assertTrue(bool(torch.all(torch.minimum(d0, d2) < 1e-4 * gap)),
                            "a sample's output is neither the dropped nor the kept branch's")
            return torch.where(d2 < d0, 2.0, 0.0).double()

        w0 = copy.deepcopy(model)
        out, _ = tm(x, y)
        mask = mask_of(out, w0)
        kept = int((mask > 0).sum())
        self.assertTrue(0 < kept < 16, f"{kept} of 16 samples kept: the mask is not per sample")
        tm.copyWeightsToHost()
        ref = copy.deepcopy(w0).double()
        nn.functional.cross_entropy(ref.forward_masked(x.double(), mask), y).backward()
        worst = max(rel(p0.detach().double() - p1.detach().double(), pr.grad)
                    for p0, p1, pr in zip(w0.parameters(), m.parameters(), ref.parameters()))
        print(f"stochastic depth: {kept} of 16 kept; training step {worst:.2e} from float64 "
              "for that mask", flush=True)
        self.assertLessEqual(worst, 1e-5)
        w1 = copy.deepcopy(m)
        out2, _ = tm(x, y)
        self.assertFalse(bool(torch.equal(mask_of(out2, w1), mask)), "the same mask twice")

    def test_stochastic_depth_masks(self):
        """The masks read back (anchorTensor on the stochastic depths' dropout
        of ones) are 0 or 1 / (1 - p) per sample, differ between replicas and
        between steps, and the eval-mode export draws nothing."""
        torch.manual_seed(0)
        model = DepthNet()
        g = torch.Generator().manual_seed(1)
        x, y = torch.randn(32, 8, generator=g), torch.randint(0, 5, (32,), generator=g)
        opts = poptorch.Options().replicationFactor(2).anchorTensor("sd", SD_ANCHOR)
        tm = poptorch.trainingModel(WithLoss(model, nn.CrossEntropyLoss()), opts,
                                    poptorch.optim.SGD(model.parameters(), lr=0.1))
        tm(x, y)
        (name, first), = tm.getAnchoredTensors("sd").items()
        self.assertEqual(name, "/model/stochastic_depth/Dropout_output_0")
        self.assertTrue(torch.equal(tm.getAnchoredTensor("sd"), first))
        self.assertEqual(tuple(first.shape), (32, 1), "one value per sample of each replica")
        self.assertEqual(sorted(set(first.flatten().tolist())), [0.0, 2.0])
        self.assertFalse(bool(torch.equal(first[:16], first[16:])), "both replicas drew one mask")
        tm(x, y)
        self.assertFalse(bool(torch.equal(tm.getAnchoredTensor("sd"), first)), "the same mask twice")
        # each micro-batch of an accumulated step draws its own (outputMode All: all of them)
        opts = poptorch.Options().anchorTensor("sd", SD_ANCHOR).outputMode(poptorch.OutputMode.All)
        opts.Training.gradientAccumulation(2)
        tm = poptorch.trainingModel(WithLoss(DepthNet(), nn.CrossEntropyLoss()), opts)
        tm(x, y)
        both = tm.getAnchoredTensor("sd")
        self.assertEqual(tuple(both.shape), (32, 1))
        self.assertFalse(bool(torch.equal(both[:16], both[16:])), "both micro-batches drew one mask")
        im = poptorch.inferenceModel(DepthNet(), poptorch.Options())
        im(x[:2])
        self.assertEqual(random_ops(im), [])
        with self.assertRaises(ValueError) as cm:
            poptorch.inferenceModel(DepthNet(), poptorch.Options().anchorTensor("sd", SD_ANCHOR))(x[:2])
        self.assertIn("matches no value of the exported graph", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            tm.getAnchoredTensor("nothing")
        self.assertIn("no anchor 'nothing' (anchored: sd)", str(cm.exception))

    def test_bernoulli_draws(self):
        """torch.bernoulli(p) exports as RandomUniformLike, Less and Cast: the
        mask is 0 or 1 with the right frequency, new at each run."""
        class Mask(nn.Module):
            def forward(self, x):
                return x * torch.bernoulli(torch.full_like(x, 0.7))

        x = torch.full((4, 1024), 3.0)
        model = poptorch.inferenceModel(Mask(), poptorch.Options())
        a, b = model(x), model(x)
        self.assertEqual(sorted(set(a.flatten().tolist())), [0.0, 3.0])
        kept = float((a != 0).double().mean())
        self.assertLess(abs(kept - 0.7), 0.04, f"{kept:.3f} of the elements kept, not 0.7")
        self.assertFalse(bool(torch.equal(a, b)), "two runs drew the same mask")

    def test_cubic_refused(self):
        class Up(nn.Module):
            def forward(self, x):
                return F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False)

        with self.assertRaises(poptorch.TilegraphError) as cm:
            poptorch.inferenceModel(Up(), poptorch.Options())(torch.randn(1, 2, 4, 4))
        self.assertIn("Resize", str(cm.exception))
        self.assertIn("mode 'cubic' is not implemented (nearest and linear are)", str(cm.exception))

    def test_antialias_refused(self):
        class Down(nn.Module):
            def forward(self, x):
                return F.interpolate(x, size=(3, 3), mode="bilinear", antialias=True)

        try:
            poptorch.inferenceModel(Down(), poptorch.Options())(torch.randn(1, 2, 8, 8))
            self.fail("antialiased Resize was accepted")
        except poptorch.TilegraphError as e:
            msg = str(e)
        if "exporting Down to ONNX failed" in msg:
            self.skipTest(f"this torch does not export antialias: {msg}")
        self.assertIn("antialias: antialiased downsampling is not implemented", msg)

if __name__ == "__main__":
    torch.set_num_threads(1)
    unittest.main()
