#!/usr/bin/python3
"""examples/python/seed004_pipelining.py - seed 004's PopTorch pipelining tutorial on tilegraph.

The tutorial's code as written, with two changes only: `import poptorch`
became `import tilegraph as poptorch`, and the dataset is Debian's
Fashion-MNIST (/usr/share/datasets/fashion-mnist, IDX gz files) read by
fashion_mnist() below instead of torchvision's MNIST download. Run from a
checkout after building (the package finds build/libtilegraph.so):

    PYTHONPATH=python /usr/bin/python3 examples/python/seed004_pipelining.py
"""
import os
import json
import argparse
from pkgutil import get_data
import sys
from tqdm import tqdm
import torch
import torch.nn as nn
import torchvision
import tilegraph as poptorch

import gzip
import numpy as np

learning_rate = 0.001
epochs = 3
batch_size = 40
test_batch_size = 8
training_iterations = 10
gradient_accumulation = 10
inference_iterations = 100

# ---- the dataset: Debian's Fashion-MNIST instead of downloading MNIST -------------
FASHION_MNIST = os.environ.get("FASHION_MNIST", "/usr/share/datasets/fashion-mnist")


class fashion_mnist(torch.utils.data.Dataset):
    """Fashion-MNIST from IDX gz files, as torchvision's MNIST gives items."""

    def __init__(self, root, train, download=False, transform=None):
        prefix = "train" if train else "t10k"
        with gzip.open(os.path.join(FASHION_MNIST, f"{prefix}-images-idx3-ubyte.gz")) as f:
            self.images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28).copy()
        with gzip.open(os.path.join(FASHION_MNIST, f"{prefix}-labels-idx1-ubyte.gz")) as f:
            self.labels = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
        self.transform = transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        img = self.images[i]
        if self.transform is not None:
            img = self.transform(img)
        return img, int(self.labels[i])


# ---- from here on, the tutorial ------------------------------------------------------
train_dataset = fashion_mnist(
    "mnist_data/",
    train=True,
    download=True,
    transform=torchvision.transforms.Compose(
        [
            torchvision.transforms.ToTensor(),
            torchvision.transforms.Normalize((0.1307,), (0.3081,)),
        ]
    ),
)

test_dataset = fashion_mnist(
    "mnist_data/",
    train=False,
    download=True,
    transform=torchvision.transforms.Compose(
        [
            torchvision.transforms.ToTensor(),
            torchvision.transforms.Normalize((0.1307,), (0.3081,)),
        ]
    ),
)


class ConvLayer(nn.Module):
    def __init__(self, in_channels, num_filters, kernel_size, pool_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, num_filters, kernel_size=kernel_size)
        self.pool = nn.MaxPool2d(kernel_size=pool_size)
        self.relu = nn.ReLU()

    def forward(self, x):
        x = self.conv(x)
        x = self.pool(x)
        x = self.relu(x)
        return x


class Network(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = ConvLayer(1, 10, 5, 2)
        self.layer2 = ConvLayer(10, 20, 5, 2)
        self.layer3 = nn.Linear(320, 256)
        self.layer3_act = nn.ReLU()
        self.layer4 = nn.Linear(256, 10)

    def forward(self, x):
        with poptorch.Block("B1"):
            x = self.layer1(x)
        with poptorch.Block("B2"):
            x = self.layer2(x)
        with poptorch.Block("B3"):
            x = x.view(-1, 320)
            x = self.layer3_act(self.layer3(x))
        with poptorch.Block("B4"):
            x = self.layer4(x)
        return x


class TrainingModelWithLoss(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, args, labels=None):
        output = self.model(args)
        if labels is None:
            return output
        with poptorch.Block("B4"):
            loss = self.loss(output, labels)
        return output, loss


def get_training_model(opts, model):
    """Wrap a model with the loss and the optimiser into a poptorch.trainingModel"""
    model_with_loss = TrainingModelWithLoss(model)
    training_model = poptorch.trainingModel(
        model_with_loss,
        opts,
        optimizer=poptorch.optim.AdamW(model.parameters(), lr=learning_rate),
    )
    return training_model


def train(training_model, training_data):
    nr_steps = len(training_data)
    for epoch in range(1, epochs + 1):
        print(f"Epoch {epoch}/{epochs}")
        bar = tqdm(training_data, total=nr_steps)
        for data, labels in bar:
            preds, losses = training_model(data, labels)
            mean_loss = torch.mean(losses).item()
            acc = accuracy(preds, labels)
            bar.set_description(f"Loss:{mean_loss:0.4f} | Accuracy:{acc:0.2f}%")


def accuracy(predictions, labels):
    _, ind = torch.max(predictions, 1)
    labels = labels[-predictions.size()[0] :]
    accuracy = torch.sum(torch.eq(ind, labels)).item() / labels.size()[0] * 100.0
    return accuracy


def test(inference_model, test_data):
    nr_steps = len(test_data)
    sum_acc = 0.0
    for data, labels in tqdm(test_data, total=nr_steps):
        output = inference_model(data)
        sum_acc += accuracy(output, labels)
    print(f"Accuracy on test set: {sum_acc / len(test_data):0.2f}%")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="seed 004's pipelining tutorial on tilegraph")
    parser.add_argument("--strategy", choices=["pipelined", "sharded", "phased", "parallel-phased"],
                        default="pipelined",
                        help="execution strategy (default: pipelined; parallel-phased: the phases "
                             "alternating over two devices, ParallelPhasedExecution)")
    parser.add_argument("--epochs", type=int, default=epochs, help="epochs (default: 3)")
    parser.add_argument("--offload-optimiser", action="store_true",
                        help="keep the optimiser state in host memory")
    parser.add_argument("--offload", default="",
                        help="also keep these in host streaming memory: weights, activations, "
                             "accumulators (comma-separated)")
    args = parser.parse_args()
    epochs = args.epochs

    train_opts = poptorch.Options()
    train_opts.deviceIterations(training_iterations)
    train_opts.Training.gradientAccumulation(gradient_accumulation)

    training_data = poptorch.DataLoader(
        train_opts,
        train_dataset,
        batch_size=batch_size,
        shuffle=True,
        mode=poptorch.DataLoaderMode.Async,
        num_workers=16,
    )

    test_data = poptorch.DataLoader(
        poptorch.Options().deviceIterations(inference_iterations),
        test_dataset,
        batch_size=test_batch_size,
        shuffle=True,
        drop_last=True,
        mode=poptorch.DataLoaderMode.Async,
        num_workers=16,
    )

    model = Network()

    if args.strategy == "pipelined":
        strategy = poptorch.PipelinedExecution(
            poptorch.Stage("B1").ipu(0),
            poptorch.Stage("B2").ipu(1),
            poptorch.Stage("B3").ipu(2),
            poptorch.Stage("B4").ipu(3),
        )
    elif args.strategy == "phased":
        strategy = poptorch.PhasedExecution(
            poptorch.Phase("B1"), poptorch.Phase("B2"), poptorch.Phase("B3"), poptorch.Phase("B4")
        )
    elif args.strategy == "parallel-phased":
        strategy = poptorch.ParallelPhasedExecution(
            poptorch.Phase("B1"), poptorch.Phase("B2"), poptorch.Phase("B3"), poptorch.Phase("B4")
        )
    else:
        strategy = poptorch.ShardedExecution(
            poptorch.Stage("B1").ipu(0),
            poptorch.Stage("B2").ipu(1),
            poptorch.Stage("B3").ipu(2),
            poptorch.Stage("B4").ipu(3),
        )
    train_opts.setExecutionStrategy(strategy)
    if args.offload_optimiser:
        train_opts.TensorLocations.setOptimizerLocation(
            poptorch.TensorLocationSettings().useOnChipStorage(False)
        )

    off_chip = poptorch.TensorLocationSettings().useOnChipStorage(False)
    kinds = {k for k in args.offload.split(",") if k}
    if "weights" in kinds:
        train_opts.TensorLocations.setWeightLocation(off_chip)
    if "activations" in kinds:
        train_opts.TensorLocations.setActivationLocation(off_chip)
    if "accumulators" in kinds:
        train_opts.TensorLocations.setAccumulatorLocation(off_chip)

    # Warning: impacts performance
    train_opts.outputMode(poptorch.OutputMode.All)

    training_model = get_training_model(train_opts, model)
    train(training_model, training_data)

    inf_options = train_opts.clone()
    inf_options.Training.gradientAccumulation(1)
    inf_options.deviceIterations(inference_iterations)
    inference_model = poptorch.inferenceModel(model, inf_options)

    test(inference_model, test_data)
