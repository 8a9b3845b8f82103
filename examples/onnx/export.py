#!/usr/bin/python3
"""Export a PyTorch model to ONNX the way tilegraph trains it best.

    /usr/bin/python3 examples/onnx/export.py resnet18 -o resnet18.onnx --input 3x32x32 --classes 10
    /usr/bin/python3 examples/onnx/export.py seed004 -o seed004.onnx
    tilegraph import resnet18.onnx
    tilegraph train --model resnet18.onnx --data synthetic --split layer3.0

What matters for training (docs/onnx.md):
  - training=TrainingMode.TRAINING keeps BatchNormalization's running
    statistics and Dropout in the graph (an eval-mode export folds them away);
  - do_constant_folding=False keeps every initializer under its state_dict
    name, so tilegraph's checkpoints load back into the module;
  - a dynamic batch axis lets tilegraph build for any --batch-size;
  - the file's tilegraph.parameters metadata lists the trainable
    initializers, so buffers and frozen parameters stay fixed.
Models: seed004 (the pipelining tutorial's network) or any torchvision
classification model by name (resnet18, resnet50, mobilenet_v2, ...).
Needs Debian's python3-torch and python3-torchvision.
"""
import argparse
import sys

import torch
import torch.nn as nn


class ConvLayer(nn.Module):
    def __init__(self, cin, cout, k, pool):
        super().__init__()
        self.conv, self.pool, self.relu = nn.Conv2d(cin, cout, k), nn.MaxPool2d(pool), nn.ReLU()

    def forward(self, x):
        return self.relu(self.pool(self.conv(x)))


class Seed004Network(nn.Module):
    """Conv 1->10 k5, pool 2, ReLU; Conv 10->20 k5, pool 2, ReLU; Linear 320->256, ReLU; Linear 256->10."""

    def __init__(self):
        super().__init__()
        self.layer1, self.layer2 = ConvLayer(1, 10, 5, 2), ConvLayer(10, 20, 5, 2)
        self.layer3, self.layer3_act, self.layer4 = nn.Linear(320, 256), nn.ReLU(), nn.Linear(256, 10)

    def forward(self, x):
        x = self.layer2(self.layer1(x)).view(-1, 320)
        return self.layer4(self.layer3_act(self.layer3(x)))


def mark_parameters(path, model):
    """List the trainable initializers in the file's metadata
    (tilegraph.parameters, one a line: what tilegraph.mark_parameters
    writes), so that tilegraph keeps buffers and frozen parameters fixed."""
    import onnx
    proto = onnx.load(path)
    present = {i.name for i in proto.graph.initializer}
    entry = proto.metadata_props.add()
    entry.key = "tilegraph.parameters"
    entry.value = "\n".join(n for n, p in model.named_parameters() if p.requires_grad and n in present)
    onnx.save(proto, path)


def build(name, classes):
    if name == "seed004":
        return Seed004Network(), (1, 28, 28)
    import torchvision
    if not hasattr(torchvision.models, name):
        sys.exit(f"export.py: no model '{name}' in torchvision {torchvision.__version__}")
    return getattr(torchvision.models, name)(num_classes=classes), (3, 224, 224)


def main():
    ap = argparse.ArgumentParser(description="Export a PyTorch model to ONNX for tilegraph.")
    ap.add_argument("model", help="seed004, or a torchvision model name (resnet18, resnet50, ...)")
    ap.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    ap.add_argument("--input", help="CxHxW of one sample (default: the model's own)")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0, help="initial weights' seed")
    ap.add_argument("--opset", type=int, default=13)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    model, shape = build(a.model, a.classes)
    if a.input:
        shape = tuple(int(v) for v in a.input.split("x"))
    model.train()
    # batch 2: batch norm in training mode needs more than one value per channel
    torch.onnx.export(model, torch.zeros((2,) + shape), a.output,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                      opset_version=a.opset)
    mark_parameters(a.output, model)
    print(f"wrote {a.output}: {a.model}, input {'x'.join(map(str, shape))}, opset {a.opset}")


if __name__ == "__main__":
    main()
