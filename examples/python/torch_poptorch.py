"""examples/python/torch_poptorch.py - the few PopTorch names seed001_bert_qa.py uses, in plain PyTorch.

`seed001_bert_qa.py --torch` imports this module as `poptorch`, so the
same script trains the same model on PyTorch on this CPU: the yardstick
for tilegraph's numbers and speed. Each name does what PopTorch (and
tilegraph) define, on the host:

- `Options`: deviceIterations, replicationFactor,
  Training.gradientAccumulation and randomSeed are recorded (dropout here
  draws from torch's generator: only runs without dropout match tilegraph
  step for step);
- `DataLoader(options, dataset, batch_size)`: torch's loader with host
  batches of batch_size x accumulation x iterations x replicas samples;
- `BeginBlock(module, ipu_id=...)`: the module unchanged (one CPU);
- `trainingModel(model, options, optimizer)`: each call cuts the host batch
  in the session's order, `[device iteration][replica][micro-batch]`, and
  for each device iteration sums the gradients of its micro-batches and
  replicas, each loss divided by their number (PopTorch's mean reduction),
  then takes one optimizer step. It returns the last micro-batch's output
  of each replica (OutputMode.Final, training's default): the losses
  stacked, the other tensors concatenated, in the model's own output class;
- `inferenceModel(model, options)`: the model in eval mode without
  gradients, on the whole host batch;
- `optim.AdamW`: torch.optim.AdamW with PopTorch's default weight decay
  (0.01).

Nothing else of PopTorch is here: a name the script does not use is an
AttributeError, not a silent no-op.
"""
import types

import torch


class _Training:
    def __init__(self, values):
        self._values = values

    def gradientAccumulation(self, n):
        self._values["gradientAccumulation"] = int(n)
        return self


class Options:
    def __init__(self):
        self.values = {"deviceIterations": 1, "replicationFactor": 1, "gradientAccumulation": 1}
        self.Training = _Training(self.values)

    def deviceIterations(self, n):
        self.values["deviceIterations"] = int(n)
        return self

    def replicationFactor(self, n):
        self.values["replicationFactor"] = int(n)
        return self

    def randomSeed(self, seed):
        # the device's generator (dropout), as in PopTorch: torch's own
        # generator, which the host's shuffling draws from, is left alone
        self.values["randomSeed"] = int(seed)
        return self


def BeginBlock(module, user_id=None, ipu_id=None):
    return module


class DataLoader(torch.utils.data.DataLoader):
    def __init__(self, options, dataset, batch_size=1, shuffle=False, drop_last=True, **kwargs):
        v = options.values
        self.combinedBatchSize = (batch_size * v["gradientAccumulation"] * v["deviceIterations"]
                                  * v["replicationFactor"])
        super().__init__(dataset, batch_size=self.combinedBatchSize, shuffle=shuffle, drop_last=True,
                         **kwargs)


def _final(outputs):
    """The replicas' last outputs as one output of the model's class."""
    first = outputs[0]
    fields = {}
    for key in first.keys():
        values = [o[key] for o in outputs]
        fields[key] = torch.stack(values) if values[0].dim() == 0 else torch.cat(values)
        fields[key] = fields[key].detach()
    return type(first)(**fields)


class _TrainingModel:
    def __init__(self, model, options, optimizer):
        self.model, self.optimizer = model, optimizer
        v = options.values
        self.iterations, self.replicas, self.accumulation = (
            v["deviceIterations"], v["replicationFactor"], v["gradientAccumulation"])

    def __call__(self, **batch):
        self.model.train()
        n = next(iter(batch.values())).shape[0]
        micro = n // (self.iterations * self.replicas * self.accumulation)
        parts = self.replicas * self.accumulation
        j, last = 0, []
        for _ in range(self.iterations):
            self.optimizer.zero_grad()
            last = []
            for _ in range(self.replicas):
                for _ in range(self.accumulation):
                    out = self.model(**{k: v[j:j + micro] for k, v in batch.items()})
                    (out.loss / parts).backward()
                    j += micro
                last.append(out)
            self.optimizer.step()
        return _final(last)

    def copyWeightsToHost(self):
        pass

    def detachFromDevice(self):
        pass


class _InferenceModel:
    def __init__(self, model, options):
        self.model = model

    def __call__(self, **batch):
        self.model.eval()
        with torch.no_grad():
            return self.model(**batch)

    def detachFromDevice(self):
        pass


def trainingModel(model, options=None, optimizer=None):
    return _TrainingModel(model, options or Options(), optimizer)


def inferenceModel(model, options=None):
    return _InferenceModel(model, options or Options())


def _adamw(params, lr=0.001, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


optim = types.SimpleNamespace(AdamW=_adamw)
