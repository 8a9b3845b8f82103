"""tests/python/test_torch_numerics.py - torchvision models against PyTorch, in numbers (issue 28).

Models with random weights (no downloads) run through the package as a new
user would run them (poptorch.inferenceModel, poptorch.trainingModel):

- inference, against PyTorch's eval-mode float32 output: the largest
  difference of a logit within 1e-4 of the largest |logit| (batch-norm
  running statistics are first set from a batch, or a random deep model's
  eval-mode logits are the same for every sample and test nothing);
- one training step (SGD, lr 1, no momentum, no weight decay, so the update
  read back with copyWeightsToHost() is the gradient), against PyTorch in
  float64 on the same weights and batch: per parameter the largest
  difference relative to that parameter's largest float64 gradient, and the
  worst parameter within 3x PyTorch float32's own worst (measured here the
  same way, through an SGD step in float32, so both carry the rounding of
  the stored weight; the larger of PyTorch's default NCHW and its
  channels_last NHWC, two correct summation orders that land up to 230x
  apart on mobilenet_v2 at batch 2, 64x64, whose last batch norms average
  8 values) or 1e-5. A fixed tolerance would be wrong: batch norm
  over a batch of 2 makes PyTorch's own float32 gradients drift far more
  than a plain conv net's. Gradients that are analytically zero (a
  convolution's bias before batch norm) are checked against the largest
  gradient instead, and the loss against float64's.

Dropout is the identity on both sides (nn.Identity in its place); the batch
is 2, as in the issue. vgg11_bn and alexnet run at 64 and 96 with their
adaptive pooling kept at the feature map's size (torch exports adaptive
pooling only to a divisor of its input); every model here except conv_bn,
resnet18, squeezenet1_0 and mobilenet_v2 failed before the layout fix that
keeps a view's input in NCHW. The hand-written models are the issue's
defects at their smallest: a Flatten of a convolution's output (read in the
blocked layout, the old bug), a channel shuffle between convolutions, and
conv-BN; bert_tiny is two BERT layers (attention's batched products with an
additive mask, exact GELU, post-LayerNorm exported decomposed) at small
sizes.

The table (stdout) has per model: inference error, training-step error,
PyTorch float32's own, their ratio, and, reported only, how many parameters
are beyond 3x PyTorch float32's error on that same parameter (the median and
largest of that ratio), which an ill-conditioned parameter cannot hide.
TG_NUMERICS_MODELS=a,b runs only those models; TG_NUMERICS_VERBOSE=1 prints
every parameter's figures (stderr).
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

BATCH = 2
INFER_TOL = 1e-4     # inference: max |tilegraph - torch f32| / max |torch f32 logit|
TRAIN_FACTOR = 3.0   # training step: within 3x torch f32's own distance from f64 ...
TRAIN_FLOOR = 1e-5   # ... or this, whichever is larger (exact-ish cases)


class FlattenConv(nn.Module):
    """nn.Sequential(Conv2d(4, 256, 1), Flatten()): the old bug read the
    convolution's blocked output as NCHW."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(4, 256, 1), nn.Flatten())

    def forward(self, x):
        return self.body(x)


class ChannelShuffle(nn.Module):
    """ShuffleNet's channel shuffle between two convolutions."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 48, 3, padding=1)
        self.conv2 = nn.Conv2d(48, 64, 1)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = self.conv1(x)
        n, c, h, w = x.shape
        x = x.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)
        x = self.conv2(x)
        return self.fc(x.mean((2, 3)))


class ConvBN(nn.Module):
    """A small conv-BN-ReLU stack with a pooled linear head."""

    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        return self.fc(self.features(x).mean((2, 3)))


class BertTiny(nn.Module):
    """Two BERT layers as bench/torch_bert.py writes them (separate q/k/v
    linears, heads split by view + permute, scores / sqrt(d) + an additive
    mask that pads the last 4 tokens, softmax, exact GELU, post-LayerNorm,
    eps 1e-12) at hidden 32, 4 heads, intermediate 64, 16 tokens, and a head
    over the mean of the sequence: attention's batched products, the mask's
    broadcast add, softmax and layer norm in one training step."""

    def __init__(self, classes=10, hidden=32, heads=4, inter=64, seq=16, layers=2):
        super().__init__()
        self.h, self.d = heads, hidden // heads
        mask = torch.zeros(1, 1, 1, seq)
        mask[..., seq - 4:] = -10000.0
        self.register_buffer("mask", mask)
        self.layers = nn.ModuleList(nn.ModuleDict({
            "q": nn.Linear(hidden, hidden), "k": nn.Linear(hidden, hidden),
            "v": nn.Linear(hidden, hidden), "o": nn.Linear(hidden, hidden),
            "ln1": nn.LayerNorm(hidden, eps=1e-12), "i": nn.Linear(hidden, inter),
            "out": nn.Linear(inter, hidden), "ln2": nn.LayerNorm(hidden, eps=1e-12)})
            for _ in range(layers))
        self.fc = nn.Linear(hidden, classes)

    def heads(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.h, self.d).permute(0, 2, 1, 3)

    def forward(self, x):
        b, s, hid = x.shape
        for m in self.layers:
            q, k, v = self.heads(m["q"](x)), self.heads(m["k"](x)), self.heads(m["v"](x))
            p = torch.softmax(q @ k.transpose(-1, -2) / self.d ** 0.5 + self.mask, dim=-1)
            ctx = (p @ v).permute(0, 2, 1, 3).reshape(b, s, hid)
            x = m["ln1"](x + m["o"](ctx))
            x = m["ln2"](x + m["out"](nn.functional.gelu(m["i"](x))))
        return self.fc(x.mean(1))


def tv(name, pooled=None):
    """torchvision's model `name` with 10 classes. pooled=(k, channels, index):
    its AdaptiveAvgPool2d(7 or 6) made AdaptiveAvgPool2d(k) and classifier[index]
    resized to match, so that a small input (a k x k feature map) can be
    exported (torch exports adaptive pooling only to a divisor of the input)
    while the head keeps the structure it has at 224: the features, a pooling
    that keeps their k x k map, Flatten, the Linear layers."""
    def build():
        model = getattr(torchvision.models, name)(num_classes=10)
        if pooled:
            k, channels, index = pooled
            model.avgpool = nn.AdaptiveAvgPool2d(k)
            model.classifier[index] = nn.Linear(channels * k * k, model.classifier[index].out_features)
        return model
    return build


# name -> (constructor, sample shape C,H,W, classes)
MODELS = {
    "flatten_conv": (FlattenConv, (4, 6, 6), 256 * 36),
    "channel_shuffle": (ChannelShuffle, (3, 12, 12), 10),
    "conv_bn": (ConvBN, (3, 16, 16), 10),
    "vgg11_bn": (tv("vgg11_bn", pooled=(2, 512, 0)), (3, 64, 64), 10),
    "alexnet": (tv("alexnet", pooled=(2, 256, 1)), (3, 96, 96), 10),
    "shufflenet_v2_x0_5": (tv("shufflenet_v2_x0_5"), (3, 64, 64), 10),
    "mobilenet_v2": (tv("mobilenet_v2"), (3, 64, 64), 10),
    "resnet18": (tv("resnet18"), (3, 64, 64), 10),
    "squeezenet1_0": (tv("squeezenet1_0"), (3, 64, 64), 10),
    "bert_tiny": (BertTiny, (16, 32), 10),
}


# Seeds of the weights and the batch; mobilenet_v2 also at seed 3, where
# before the batch-norm summation work its training step was 24x further
# from float64 than PyTorch float32's (the issue's 1.5e-3 against 9.7e-5),
# while at seed 0 the worst parameters are ill-conditioned ones on which
# PyTorch float32 is as far off and hide it.
SEEDS = {"mobilenet_v2": (0, 3)}


def no_dropout(model):
    """Dropout replaced by nn.Identity, so both sides compute the same function."""
    for name, mod in list(model.named_modules()):
        for child_name, child in list(mod.named_children()):
            if isinstance(child, nn.modules.dropout._DropoutNd):
                setattr(mod, child_name, nn.Identity())
    return model


def calibrate(model, x):
    """Batch-norm running statistics of the batch x (momentum 1 for one
    training-mode pass): with the initial ones (mean 0, variance 1) a random
    deep model's eval-mode features vanish and every sample gets the same
    logits, which would test nothing."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    saved = [m.momentum for m in bns]
    for m in bns:
        m.momentum = 1.0
    model.train()
    with torch.no_grad():
        model(x)
    for m, momentum in zip(bns, saved):
        m.momentum = momentum


def make(name, seed=0):
    ctor, shape, classes = MODELS[name]
    torch.manual_seed(seed)
    model = no_dropout(ctor())
    g = torch.Generator().manual_seed(seed + 1)
    calibrate(model, torch.randn((8,) + shape, generator=g))
    x = torch.randn((BATCH,) + shape, generator=g)
    y = torch.randint(0, classes, (BATCH,), generator=g)
    return model, x, y


def inference(name, seed=0):
    """tilegraph's eval-mode logits against PyTorch's float32 ones."""
    model, x, _ = make(name, seed)
    model.eval()
    with torch.no_grad():
        ref = model(x)
    out = poptorch.inferenceModel(copy.deepcopy(model), poptorch.Options())(x)
    # the samples' logits must differ, or the comparison says nothing
    spread = rel(ref[0].numpy(), ref[1].numpy()) if BATCH > 1 else 1.0
    return rel(out.numpy(), ref.numpy()), spread


def sgd_updates(model, x, y, channels_last=False):
    """w0 - w1 per parameter after one torch SGD step at lr 1, and the loss;
    with channels_last in PyTorch's NHWC memory format (another summation
    order, as tilegraph's blocked layout is one)."""
    w0 = {k: p.detach().clone() for k, p in model.named_parameters()}
    if channels_last and x.dim() == 4:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    model.train()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    torch.optim.SGD(model.parameters(), lr=1.0).step()
    return {k: (w0[k].double() - p.detach().double()).numpy() for k, p in model.named_parameters()}, \
        float(loss)


# A parameter whose float64 gradient is below this fraction of the model's
# largest is analytically zero (a convolution's bias before training-mode
# batch norm, a batch-norm bias whose shift the next batch norm removes):
# float64 gives 1e-16 of the largest and less, float32 its rounding noise,
# which is checked against the largest gradient instead of its own.
ZERO = 1e-9
ZERO_FLOOR = 1e-6  # noise of an analytically zero gradient, relative to the largest gradient


def training(name, seed=0):
    """One SGD step (lr 1) on tilegraph and on PyTorch float32, against PyTorch float64."""
    model, x, y = make(name, seed)
    w0 = {k: p.detach().clone() for k, p in model.named_parameters()}
    g64, loss64 = sgd_updates(copy.deepcopy(model).double(), x.double(), y)
    g32, loss32 = sgd_updates(copy.deepcopy(model), x, y)
    # PyTorch's own float32 in NHWC: as correct, summed in another order. Where
    # the model amplifies rounding (batch norm over a batch of 2 and 2x2 maps)
    # the two land up to 230x apart (mobilenet_v2, seeds 0 and 2): PyTorch
    # float32's own error is the larger of the two, per parameter.
    g32cl, _ = sgd_updates(copy.deepcopy(model), x, y, channels_last=True)
    m = copy.deepcopy(model)
    tm = poptorch.trainingModel(WithLoss(m), poptorch.Options(),
                                poptorch.optim.SGD(m.parameters(), lr=1.0))
    _, loss = tm(x, y)
    tm.copyWeightsToHost()
    tg = {k: (w0[k].double() - p.detach().double()).numpy() for k, p in m.named_parameters()}
    top = max(float(np.max(np.abs(g))) for g in g64.values())
    params, zeros = [], []
    for k, g in g64.items():
        scale = float(np.max(np.abs(g)))
        if scale > ZERO * top:
            params.append((k, scale, rel(tg[k], g), max(rel(g32[k], g), rel(g32cl[k], g))))
        else:  # the noise, relative to the largest gradient
            zeros.append((k, scale, float(np.max(np.abs(tg[k] - g))) / top,
                          float(max(np.max(np.abs(g32[k] - g)), np.max(np.abs(g32cl[k] - g)))) / top))
    r = {"params": params, "zeros": zeros,
         "loss": rel(float(loss.reshape(-1)[0]), loss64), "loss32": rel(loss32, loss64)}
    r["train"], r["worst"] = max((e, k) for k, _, e, _ in params)
    r["torch32"] = max(e for _, _, _, e in params)
    r["tol"] = max(TRAIN_FACTOR * r["torch32"], TRAIN_FLOOR)
    # per parameter, against torch float32's error on that same parameter (reported, not asserted)
    r["bad"] = [k for k, _, e, e32 in params if e > max(TRAIN_FACTOR * e32, TRAIN_FLOOR)]
    ratios = [max(e, TRAIN_FLOOR) / max(e32, TRAIN_FLOOR) for _, _, e, e32 in params]
    r["median"], r["max_ratio"] = float(np.median(ratios)), max(ratios)
    r["zero"] = max((e for _, _, e, _ in zeros), default=0.0)
    r["zero32"] = max((e for _, _, _, e in zeros), default=0.0)
    r["zero_tol"] = max(TRAIN_FACTOR * r["zero32"], ZERO_FLOOR)
    return r


RESULTS = {}
HEADER = (f"{'model':<20} {'input':>5} {'infer':>8} {'train':>8} {'torch32':>8} {'ratio':>6} "
          f"{'zero-grad':>17} {'loss':>8} {'torch32':>8} {'>3x':>7} {'median':>6} {'max':>7} "
          f"{'time':>6}  worst parameter")


def row(label, name, inf, tr, seconds):
    shape = "x".join(str(d) for d in MODELS[name][1][1:])
    ratio = tr["train"] / max(tr["torch32"], 1e-30)
    nbad = f"{len(tr['bad'])}/{len(tr['params'])}"
    return (f"{label:<20} {shape:>5} {inf:8.1e} {tr['train']:8.1e} {tr['torch32']:8.1e} {ratio:6.2f} "
            f"{tr['zero']:8.1e}/{tr['zero32']:8.1e} {tr['loss']:8.1e} {tr['loss32']:8.1e} {nbad:>7} "
            f"{tr['median']:6.2f} {tr['max_ratio']:7.1f} {seconds:5.1f}s  {tr['worst']}")


class TorchNumerics(unittest.TestCase):
    def run_model(self, name, seed):
        label = name if seed == 0 else f"{name}/seed{seed}"
        t0 = time.perf_counter()
        inf, spread = inference(name, seed)
        tr = training(name, seed)
        RESULTS[label] = row(label, name, inf, tr, time.perf_counter() - t0)
        if os.environ.get("TG_NUMERICS_VERBOSE"):
            print(f"\n{label}:", file=sys.stderr)
            for k, scale, e, e32 in tr["params"] + tr["zeros"]:
                zero = " (zero: relative to the largest)" if (k, scale, e, e32) in tr["zeros"] else ""
                flag = "  <-- beyond 3x torch f32" if k in tr["bad"] else ""
                print(f"  {k:<40} |g| {scale:8.1e} tilegraph {e:8.1e} torch32 {e32:8.1e}{zero}{flag}",
                      file=sys.stderr)
        self.assertGreater(spread, 1e-3, f"{label}: the reference logits of the two samples agree")
        self.assertLessEqual(inf, INFER_TOL, f"{label}: inference differs from PyTorch float32 by "
                             f"{inf:.3g} of the largest logit")
        self.assertLessEqual(tr["train"], tr["tol"],
                             f"{label}: the training step's {tr['worst']} is {tr['train']:.3g} from float64, "
                             f"PyTorch float32's worst is {tr['torch32']:.3g} (parameters beyond 3x "
                             f"PyTorch's own: {', '.join(tr['bad'][:8])})")
        self.assertLessEqual(tr["zero"], tr["zero_tol"],
                             f"{label}: analytically zero gradients come out at {tr['zero']:.3g} of the "
                             f"largest gradient, PyTorch float32's at {tr['zero32']:.3g}")
        self.assertLessEqual(tr["loss"], max(TRAIN_FACTOR * tr["loss32"], TRAIN_FLOOR),
                             f"{label}: the loss is {tr['loss']:.3g} from float64's")

    @classmethod
    def tearDownClass(cls):
        print("\n" + HEADER)
        for label in sorted(RESULTS, key=lambda k: (list(MODELS).index(k.split("/")[0]), k)):
            print(RESULTS[label])
        print("infer: max |tilegraph - torch f32| / max |logit| (eval mode); train: worst parameter's "
              "max |update - float64 gradient| / max |float64 gradient| after SGD lr 1; torch32: the "
              "same for PyTorch float32; zero-grad: analytically zero gradients' noise / largest "
              "gradient (tilegraph/torch32); loss: relative to float64; >3x: parameters beyond 3x "
              "torch32's own error on them (and 1e-5) / all, median and max of that ratio over the "
              "parameters (reported, not asserted)", flush=True)


def _add_tests():
    only = os.environ.get("TG_NUMERICS_MODELS")
    for name in (only.split(",") if only else MODELS):
        if name not in MODELS:
            raise SystemExit(f"TG_NUMERICS_MODELS: no model {name} (models: {', '.join(MODELS)})")
        for seed in SEEDS.get(name, (0,)):
            test = f"test_{name}" + (f"_seed{seed}" if seed else "")
            setattr(TorchNumerics, test, lambda self, n=name, s=seed: self.run_model(n, s))


_add_tests()

if __name__ == "__main__":
    torch.set_num_threads(1)
    unittest.main()
