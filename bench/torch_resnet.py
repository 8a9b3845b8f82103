#!/usr/bin/python3
"""bench/torch_resnet.py - the PyTorch side of bench/bench_resnet.c.

torchvision's ResNet (its own ImageNet stem, 10 classes) trained with SGD
momentum 0.9 (or run in eval mode for inference) on random images of the
given size, on the given number of threads. Prints one JSON line with
samples_per_s and the PyTorch version. Warm-up steps are not timed.
With --losses: training only, no timing; the loss of every step (warm-up
included) in fp32 or, with --bf16, under torch.autocast's bf16 (bf16
convolutions and matmuls, f32 master weights and batch norm), on
bench_resnet's batch (the same generator: uniform pixels in [-0.5, 0.5),
labels 0..9 in turn), as the reference for tilegraph's bf16 losses
(bench/bench_bf16_losses.c).
"""
import argparse
import json
import time

import torch
import torchvision


def lcg_batch(batch, size):
    """bench_resnet.c's images and labels, value for value."""
    r, pixels = 12345, []
    for _ in range(batch * 3 * size * size):
        r = (r * 1664525 + 1013904223) & 0xFFFFFFFF
        pixels.append((r >> 8) / 16777216.0 - 0.5)
    x = torch.tensor(pixels, dtype=torch.float32).reshape(batch, 3, size, size)
    return x, torch.arange(batch) % 10


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--mode", choices=["train", "infer"], default="train")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--losses", action="store_true")
    ap.add_argument("--bf16", action="store_true")
    a = ap.parse_args()
    if a.losses and a.mode != "train":
        ap.error("--losses needs --mode train")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = getattr(torchvision.models, a.model)(num_classes=10)
    if a.losses:
        x, y = lcg_batch(a.batch, a.size)
    else:
        x = torch.randn(a.batch, 3, a.size, a.size)
        y = torch.randint(0, 10, (a.batch,))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    if a.mode == "train":
        model.train()

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
                loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss.item()
    else:
        model.eval()

        def step():
            with torch.no_grad():
                model(x).argmax(1)
    if a.losses:
        losses = [step() for _ in range(a.warmup + a.steps)]
        print(json.dumps({"system": "pytorch " + torch.__version__.split("+")[0],
                          "bf16": a.bf16, "lr": a.lr, "losses": [round(v, 4) for v in losses]}))
        return
    for _ in range(a.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    dt = time.perf_counter() - t0
    print(json.dumps({"system": "pytorch " + torch.__version__.split("+")[0],
                      "samples_per_s": a.steps * a.batch / dt}))


if __name__ == "__main__":
    main()
