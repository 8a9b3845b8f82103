#!/usr/bin/python3
"""bench/torch_resnet.py - the PyTorch side of bench/bench_resnet.c.

torchvision's ResNet (its own ImageNet stem, 10 classes) trained with SGD
momentum 0.9 (or run in eval mode for inference) on random images of the
given size, on the given number of threads. Prints one JSON line with
samples_per_s and the PyTorch version. Warm-up steps are not timed.
"""
import argparse
import json
import time

import torch
import torchvision


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--mode", choices=["train", "infer"], default="train")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = getattr(torchvision.models, a.model)(num_classes=10)
    x = torch.randn(a.batch, 3, a.size, a.size)
    y = torch.randint(0, 10, (a.batch,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    if a.mode == "train":
        model.train()

        def step():
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()
    else:
        model.eval()

        def step():
            with torch.no_grad():
                model(x).argmax(1)
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
