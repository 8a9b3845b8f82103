#!/usr/bin/python3
"""examples/python/seed003_main.py - seed 003's main.py (ResNet-101 training) on tilegraph.

The hands-on session's script with `import tilegraph as poptorch`: torchvision
ResNet-101 split over two devices at layer3[8], --precision IN.MODEL through
model.half() and half inputs, AdamW with loss scaling and half accumulators
for .16, gradient accumulation, device iterations and the asynchronous data
loader. Data is CIFAR-shaped synthetic images (--synthetic, the default: no
download). The full run is a documented command, not a test:

    PYTHONPATH=python /usr/bin/python3 examples/python/seed003_main.py --batch-size 64 \\
        --precision 16.16 --gradient-accumulation 8 --device-iterations 4 --async-dataloader

--tiny (ResNet-18, small batches) with --steps N is what the test runs.
--eight-bit-io streams uint8 images and normalises them in the model, as the
seed's ModelWithNormalization does (the exported Cast from uint8 becomes an
exact conversion on the device; the host sends a quarter of the bytes).
"""
import argparse
import sys
import time

import torch
import torchvision

import tilegraph as poptorch

CIFAR_STATISTICS = {"mean": (0.4914, 0.4822, 0.4465), "std": (0.2470, 0.2435, 0.2616)}


class ModelWithLoss(torch.nn.Module):
    def __init__(self, model, criterion):
        super().__init__()
        self.model = model
        self.criterion = criterion

    def forward(self, x, labels):
        out = self.model(x)
        return out, self.criterion(out, labels)


class ModelWithNormalization(torch.nn.Module):
    """The seed's 8-bit I/O wrapper: normalise the uint8 images on the device."""

    def __init__(self, model, dtype):
        super().__init__()
        self.model = model
        self.dtype = dtype
        self.mean = torch.tensor(CIFAR_STATISTICS["mean"]).view(3, 1, 1) * 255
        self.std = torch.tensor(CIFAR_STATISTICS["std"]).view(3, 1, 1) * 255

    def forward(self, img):
        return self.model(((img.to(torch.float32) - self.mean) / self.std).to(self.dtype))


class Synthetic(torch.utils.data.Dataset):
    """CIFAR-shaped images (3x32x32, 10 classes), fixed by the index: normalised
    in `dtype`, or as uint8 pixels when dtype is torch.uint8 (--eight-bit-io)."""

    def __init__(self, n, dtype):
        self.n, self.dtype = n, dtype

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        label = i % 10
        img = torch.rand(3, 32, 32, generator=g) * 0.5 + label / 20.0  # learnable: brightness is the class
        if self.dtype == torch.uint8:
            return (img * 255).round().to(torch.uint8), label
        mean = torch.tensor(CIFAR_STATISTICS["mean"]).view(3, 1, 1)
        std = torch.tensor(CIFAR_STATISTICS["std"]).view(3, 1, 1)
        return ((img - mean) / std).to(self.dtype), label


def parse():
    p = argparse.ArgumentParser(description="Seed 003's ResNet-101 training script on tilegraph.")
    p.add_argument("--batch-size", type=int, default=64, help="micro-batch (default 64)")
    p.add_argument("--precision", default="32.32", choices=["32.32", "16.32", "16.16", "32.16"],
                   help="INPUT.MODEL types (default 32.32)")
    p.add_argument("--gradient-accumulation", type=int, default=1)
    p.add_argument("--device-iterations", type=int, default=1)
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--eight-bit-io", action="store_true",
                   help="stream uint8 images, normalised in the model (a quarter of the bytes)")
    p.add_argument("--async-dataloader", action="store_true", help="poptorch.DataLoaderMode.Async")
    p.add_argument("--synthetic", type=int, default=2048, metavar="N", help="N synthetic samples (default 2048)")
    p.add_argument("--steps", type=int, default=0, help="stop after this many host steps (0: all)")
    p.add_argument("--tiny", action="store_true", help="ResNet-18 instead of ResNet-101, one device")
    p.add_argument("--target", default="cpu", choices=["cpu", "mk2"], help="tilegraph target (default cpu)")
    p.add_argument("--compile-only", action="store_true",
                   help="compile for the target and report whether it fits, then stop (the journey's "
                        "memory story on --target mk2)")
    a = p.parse_args()
    for name in ("batch_size", "gradient_accumulation", "device_iterations", "replicas", "epochs",
                 "synthetic"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(a, name)}")
    return a


def main():
    args = parse()
    print(args)
    torch.manual_seed(0)
    input_dtype = torch.float16 if args.precision[:2] == "16" else torch.float32
    model_dtype = torch.float16 if args.precision[-2:] == "16" else torch.float32

    opts = poptorch.Options()
    opts.replicationFactor(args.replicas)
    opts.deviceIterations(args.device_iterations)
    opts.Training.gradientAccumulation(args.gradient_accumulation)
    opts.set("target", args.target)

    arch = torchvision.models.resnet18 if args.tiny else torchvision.models.resnet101
    model = arch(num_classes=10)
    if not args.tiny:  # ResNet101 pipelined over 2 IPUs, as in the seed
        model.layer3[8] = poptorch.BeginBlock(model.layer3[8], ipu_id=1)
    if args.eight_bit_io:
        model = ModelWithNormalization(model, dtype=input_dtype)
    model = ModelWithLoss(model, torch.nn.CrossEntropyLoss()).to(model_dtype)

    if args.precision[-3:] == ".16":
        optimizer = poptorch.optim.AdamW(model.parameters(), lr=0.001, loss_scaling=1000,
                                         accum_type=torch.float16,
                                         first_order_momentum_accum_type=torch.float16,
                                         second_order_momentum_accum_type=torch.float32)
    else:
        optimizer = poptorch.optim.AdamW(model.parameters(), lr=0.001)

    mode = poptorch.DataLoaderMode.Async if args.async_dataloader else poptorch.DataLoaderMode.Sync
    data_dtype = torch.uint8 if args.eight_bit_io else input_dtype
    loader = poptorch.DataLoader(opts, Synthetic(args.synthetic, data_dtype), batch_size=args.batch_size,
                                 shuffle=True, num_workers=2 if args.async_dataloader else 0, mode=mode)
    if len(loader) == 0:
        sys.exit(f"seed003_main: {args.synthetic} samples make no host batch of {loader.combinedBatchSize}; "
                 "raise --synthetic or lower the batch settings")
    if args.async_dataloader:
        loader = poptorch.AsynchronousDataAccessor(loader)

    training_model = poptorch.trainingModel(model, opts, optimizer=optimizer)
    if args.compile_only:
        data, labels = next(iter(loader))
        if args.async_dataloader:
            loader.terminate()
        try:
            training_model.compile(data, labels)
        except poptorch.TilegraphError as e:
            print(f"does not fit on {args.target}: {e}")
            return 1
        from tilegraph._lib import lib
        mib = lib.tg_session_arena_bytes(training_model._handle) / 2**20
        print(f"fits on {args.target}: {mib:.1f} MiB planned over "
              f"{lib.tg_session_devices(training_model._handle)} device(s)")
        return 0
    steps = 0
    for epoch in range(args.epochs):
        t0, seen = time.perf_counter(), 0
        for data, labels in loader:
            _, loss = training_model(data, labels)
            seen += data.shape[0]
            steps += 1
            print(f"epoch {epoch + 1} step {steps}: loss {float(loss.float().mean()):.4f}", flush=True)
            if args.steps and steps >= args.steps:
                break
        print(f"epoch {epoch + 1}: {seen / (time.perf_counter() - t0):.1f} samples/s "
              "(the first step includes compiling)")
        if args.steps and steps >= args.steps:
            break
    training_model.copyWeightsToHost()
    if args.async_dataloader:
        loader.terminate()


if __name__ == "__main__":
    sys.exit(main())
