#!/usr/bin/python3
"""bench/bench_python_overhead.py - the Python layer's cost over `tilegraph train`.

One model, one set of settings, trained twice in the same run: through the
Python package (poptorch.trainingModel called in a loop on host batches that
are already in memory) and through the CLI (`tilegraph train` on the very
ONNX file the Python layer exported, synthetic CIFAR-shaped data, the same
micro-batch, gradient accumulation, device iterations and optimizer). Both
sides time the host steps only, after compiling. Prints one JSON line:

    {"bench": "python_overhead", ..., "python_samples_per_s": P,
     "cli_samples_per_s": C, "overhead_pct": 100 * (C - P) / C, ...}

A negative overhead means the Python side was faster: it loads no data
inside its loop, while the CLI's timed loop includes its loader, its
per-step accuracy and its first (warm-up) step, so use enough steps (50+)
for that first step not to dominate. The like-for-like figure is
"layer_overhead_pct": the same compiled session driven through the C API
(write, run, read: what `tilegraph train`'s step does without its loader)
against trainingModel's call, on batches made before timing, alternating.
`--check` exits 1 when that is over --limit percent (5 by default). Figures from a loaded machine are
not claims: run it on a quiet one.

    PYTHONPATH=python /usr/bin/python3 bench/bench_python_overhead.py --steps 50
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import tilegraph as poptorch  # noqa: E402


class Cifar(nn.Module):
    """A small CIFAR-shaped conv net: two conv/BN/ReLU/pool stages and a classifier."""

    def __init__(self, width):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(),
            nn.MaxPool2d(2))
        self.fc = nn.Linear(2 * width * 8 * 8, 10)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


class WithLoss(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x, y):
        out = self.net(x)
        return out, self.loss(out, y)


def make_model(name, width):
    if name == "cnn":
        return Cifar(width)
    import torchvision
    return getattr(torchvision.models, name)(num_classes=10)


def run_python(args, host_batch):
    torch.manual_seed(0)
    net = make_model(args.model, args.width)
    opts = poptorch.Options().deviceIterations(args.device_iterations)
    opts.Training.gradientAccumulation(args.gradient_accumulation)
    tm = poptorch.trainingModel(WithLoss(net), opts, poptorch.optim.SGD(net.parameters(), lr=args.lr))
    # A few distinct host batches, made before timing: the loop measures the
    # layer's per-call work and the session, not a data pipeline.
    batches = [(torch.rand(host_batch, 3, 32, 32), torch.randint(0, 10, (host_batch,)))
               for _ in range(4)]
    tm.compile(*batches[0])
    # The package's file holds the whole forward, loss included; the command
    # takes the network alone and appends its own loss: export that beside it.
    onnx_path = os.path.join(tm._tmp.name, "net.onnx")
    torch.onnx.export(net, batches[0][0][:args.batch], onnx_path, input_names=["input"],
                      output_names=["output"], opset_version=13, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING)
    t0 = time.perf_counter()
    for k in range(args.steps):
        tm(*batches[k % len(batches)])
    seconds = time.perf_counter() - t0
    return args.steps * host_batch / seconds, tm, onnx_path


def run_session(args, tm, host_batch):
    """The same compiled session driven as a C program drives it through the
    public API (write the input and labels, run, read the output and loss),
    on batches converted before timing: the like-for-like base of the layer's
    per-step cost."""
    import numpy as np
    from tilegraph._lib import ffi, lib
    h = tm._handle
    batches = [(np.ascontiguousarray(torch.rand(host_batch, 3, 32, 32).numpy()),
                np.ascontiguousarray(torch.randint(0, 10, (host_batch,)).numpy().astype(np.int32)))
               for _ in range(4)]
    outs = [np.empty(lib.tg_session_output_count(h, t) * int(np.prod(tm._dims(t))), np.float32)
            for t in (tm._output, tm._loss)]
    t0 = time.perf_counter()
    for k in range(args.steps):
        x, y = batches[k % len(batches)]
        lib.tg_session_write(h, tm._input, ffi.from_buffer(x), x.nbytes)
        lib.tg_session_write(h, tm._labels, ffi.from_buffer(y), y.nbytes)
        if lib.tg_session_run(h) != 0:
            sys.exit("bench_python_overhead: the session's run failed")
        for t, o in zip((tm._output, tm._loss), outs):
            lib.tg_session_read(h, t, ffi.from_buffer(o), o.nbytes)
    return args.steps * host_batch / (time.perf_counter() - t0)


def run_cli(args, onnx_path, host_batch):
    cmd = [args.tilegraph, "train", "--model", onnx_path, "--dataset", "synthetic", "--json",
           "--quiet", "--epochs", "1", "--batch-size", str(args.batch),
           "--gradient-accumulation", str(args.gradient_accumulation),
           "--device-iterations", str(args.device_iterations), "--optimizer", "sgd",
           "--lr", str(args.lr), "--train-limit", str(args.steps * host_batch),
           "--test-limit", str(args.batch), "--eval-batch-size", str(args.batch)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_python_overhead: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    if not lines or "samples_per_s" not in lines[-1]:
        sys.exit(f"bench_python_overhead: no samples_per_s in tilegraph train's output: {r.stdout!r}")
    return float(lines[-1]["samples_per_s"])


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="cnn", help="cnn (built in) or a torchvision model, e.g. resnet18")
    p.add_argument("--width", type=int, default=16, help="cnn: channels of the first conv (default 16)")
    p.add_argument("--batch", type=int, default=16, help="micro-batch (default 16)")
    p.add_argument("--gradient-accumulation", type=int, default=1)
    p.add_argument("--device-iterations", type=int, default=1)
    p.add_argument("--steps", type=int, default=50, help="timed host steps per side (default 50)")
    p.add_argument("--repeats", type=int, default=1, help="alternate the sides this many times; medians")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--limit", type=float, default=5.0, help="--check: largest overhead in percent")
    p.add_argument("--check", action="store_true", help="exit 1 when the overhead is over --limit")
    default_cli = os.path.join(HERE, "..", "build", "tilegraph")
    p.add_argument("--tilegraph", default=os.environ.get("TILEGRAPH_CLI", default_cli),
                   help="the tilegraph CLI (default build/tilegraph, or $TILEGRAPH_CLI)")
    a = p.parse_args()
    for name in ("width", "batch", "gradient_accumulation", "device_iterations", "steps", "repeats"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(a, name)}")
    if not os.access(a.tilegraph, os.X_OK):
        p.error(f"--tilegraph {a.tilegraph}: not an executable; build it (cmake --build build "
                "--target tilegraph) or pass its path")
    return a


def main():
    args = parse()
    host_batch = args.batch * args.gradient_accumulation * args.device_iterations
    py, cli, api = [], [], []
    for _ in range(args.repeats):
        sps, tm, onnx_path = run_python(args, host_batch)
        py.append(sps)
        api.append(run_session(args, tm, host_batch))
        cli.append(run_cli(args, onnx_path, host_batch))
        del tm  # the temporary ONNX file goes with the model
    p, c, a = statistics.median(py), statistics.median(cli), statistics.median(api)
    overhead = 100.0 * (c - p) / c
    # what the layer adds to a step: trainingModel's call against the same
    # session driven through the C API, both in this process, same batches
    layer = 100.0 * (a - p) / a
    print(json.dumps({"bench": "python_overhead", "model": args.model, "batch": args.batch,
                      "gradient_accumulation": args.gradient_accumulation,
                      "device_iterations": args.device_iterations, "steps": args.steps,
                      "repeats": args.repeats, "python_samples_per_s": round(p, 3),
                      "cli_samples_per_s": round(c, 3), "overhead_pct": round(overhead, 2),
                      "c_api_samples_per_s": round(a, 3), "layer_overhead_pct": round(layer, 2),
                      "python_range": [round(min(py), 1), round(max(py), 1)],
                      "c_api_range": [round(min(api), 1), round(max(api), 1)],
                      "limit_pct": args.limit}))
    return 1 if args.check and layer > args.limit else 0


if __name__ == "__main__":
    sys.exit(main())
