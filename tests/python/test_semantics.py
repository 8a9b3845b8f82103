"""tests/python/test_semantics.py - PyTorch's training semantics kept (issue 41 item 4, issue 46 row 11).

What PyTorch does not train stays fixed and costs no optimizer state:
parameters with requires_grad=False, parameters left out of the optimizer,
registered buffers (an offset, a causal mask) - from Python and from
`tilegraph train --model FILE.onnx` (the file's parameter list, or
--freeze). Trained values are what state_dict(), parameters(), attribute
access and torch.save return after training, without copyWeightsToHost
(PopTorch's implicit copy). detachFromDevice() keeps Adam's moments,
momentum and the step count.

TG_TEST_LABELS: quick
"""
import copy
import io
import json
import os
import struct
import subprocess
import tempfile
import unittest

from tg_pytest import poptorch
import torch
import torch.nn as nn

from tilegraph._lib import check, lib


class Net(nn.Module):
    """Three layers, an offset buffer and a causal mask buffer (added to scores)."""

    def __init__(self):
        super().__init__()
        self.a, self.c, self.b = nn.Linear(6, 5), nn.Linear(5, 5), nn.Linear(5, 3)
        self.register_buffer("offset", torch.full((5,), 0.25))
        self.register_buffer("mask", torch.triu(torch.full((5, 5), -1e4), diagonal=1))
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x, y):
        h = self.a(x) + self.offset
        h = torch.softmax(h.unsqueeze(1) * h.unsqueeze(2) + self.mask, -1).sum(1) + h
        o = self.b(self.c(h))
        return o, self.loss(o, y)


X, Y = torch.randn(4, 6, generator=torch.Generator().manual_seed(3)), torch.tensor([0, 1, 2, 0])


def fresh():
    torch.manual_seed(0)
    return Net()


def checkpoint_keys(tm):
    """The tensor names a checkpoint of the model's session holds."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.safetensors")
        check(lib.tg_checkpoint_save(tm._handle, path.encode(), b"test"), "saving")
        return set(read_safetensors(path))


def read_safetensors(path):
    import numpy as np
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]],
                             np.float32) for k, v in head.items() if k != "__metadata__"}


def torch_steps(m, params, steps, make=lambda p: torch.optim.Adam(p, lr=0.05)):
    opt = make(params)
    for _ in range(steps):
        opt.zero_grad()
        m(X, Y)[1].backward()
        opt.step()


class FrozenTest(unittest.TestCase):
    def test_frozen_and_outside_optimizer_stay_fixed_and_hold_no_state(self):
        m, ref = fresh(), fresh()
        for net in (m, ref):
            net.a.weight.requires_grad_(False)
        held = lambda net: [p for n, p in net.named_parameters() if not n.startswith("c.")]
        init = copy.deepcopy(m.state_dict())
        tm = poptorch.trainingModel(m, None, poptorch.optim.Adam(held(m), lr=0.05))
        for _ in range(3):
            tm(X, Y)
        torch_steps(ref, [p for p in held(ref) if p.requires_grad], 3)
        sd, want = m.state_dict(), ref.state_dict()
        for k in ("a.weight", "c.weight", "c.bias", "offset", "mask"):
            self.assertTrue(torch.equal(sd[k], init[k]), k)
        for k in ("a.bias", "b.weight", "b.bias"):
            self.assertFalse(torch.equal(sd[k], init[k]), k)
            self.assertLess((sd[k] - want[k]).abs().max().item(), 1e-5, k)
        keys = checkpoint_keys(tm)
        for k in ("a.weight", "c.weight", "c.bias", "offset", "mask"):
            self.assertIn("m." + k, keys)  # a graph tensor still, under its name
            self.assertFalse(any(n.startswith(f"m.{k}.exp_avg") for n in keys), (k, sorted(keys)))
        self.assertIn("m.b.weight.exp_avg", keys)

    def test_frozen_weights_cost_no_optimizer_memory(self):
        """The session's arena is smaller by at least the frozen layer's
        gradient and Adam moments (3 x 64 x 64 floats)."""
        sizes = []
        for freeze in (False, True):
            torch.manual_seed(0)
            m = nn.Sequential(nn.Linear(6, 64), nn.Linear(64, 64), nn.Linear(64, 3))
            m[1].weight.requires_grad_(not freeze)

            class WithLoss(nn.Module):
                def __init__(self, net):
                    super().__init__()
                    self.net = net

                def forward(self, x, y):
                    o = self.net(x)
                    return o, nn.functional.cross_entropy(o, y)

            tm = poptorch.trainingModel(WithLoss(m), None, poptorch.optim.Adam(m.parameters(), lr=0.01))
            tm(X, Y)
            sizes.append(lib.tg_session_arena_bytes(tm._handle))
        self.assertGreaterEqual(sizes[0] - sizes[1], 3 * 64 * 64 * 4, sizes)

    def test_nothing_to_train_is_refused_by_name(self):
        m = fresh()
        for p in m.parameters():
            p.requires_grad_(False)
        for opt in (poptorch.optim.SGD(m.parameters(), lr=0.1), poptorch.optim.SGD([], lr=0.1)):
            tm = poptorch.trainingModel(m, None, opt)
            with self.assertRaisesRegex(ValueError, "no parameter of Net trains: each has "
                                        "requires_grad=False or is in none of the optimizer's"):
                tm(X, Y)

    def test_torch_optimizer_groups_leave_the_rest_fixed(self):
        m = fresh()
        init = copy.deepcopy(m.state_dict())
        tm = poptorch.trainingModel(m, None, torch.optim.SGD(m.b.parameters(), lr=0.1))
        tm(X, Y)
        sd = m.state_dict()
        self.assertTrue(torch.equal(sd["a.weight"], init["a.weight"]))
        self.assertFalse(torch.equal(sd["b.weight"], init["b.weight"]))


class GroupsTest(unittest.TestCase):
    """PyTorch's parameter groups with their own settings (the usual
    fine-tuning split: no weight decay for biases and norms, another lr)."""

    class Normed(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.n, self.b = nn.Linear(6, 8), nn.LayerNorm(8), nn.Linear(8, 3)
            self.loss = nn.CrossEntropyLoss()

        def forward(self, x, y):
            o = self.b(torch.relu(self.n(self.a(x))))
            return o, self.loss(o, y)

    @staticmethod
    def groups(m):
        decay = [p for n, p in m.named_parameters() if n in ("a.weight", "b.weight")]
        rest = [p for n, p in m.named_parameters() if n not in ("a.weight", "b.weight")]
        return [{"params": decay, "weight_decay": 0.1},
                {"params": rest, "weight_decay": 0.0, "lr": 0.02}]

    def test_groups_match_pytorch(self):
        x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
        cases = ((lambda g: torch.optim.AdamW(g, lr=0.05), lambda g: torch.optim.AdamW(g, lr=0.05)),
                 (lambda g: poptorch.optim.SGD(g, lr=0.05, momentum=0.9),
                  lambda g: torch.optim.SGD(g, lr=0.05, momentum=0.9)))
        for mine, theirs in cases:
            torch.manual_seed(0)
            m = self.Normed()
            ref = copy.deepcopy(m)
            tm = poptorch.trainingModel(m, None, mine(self.groups(m)))
            opt = theirs(self.groups(ref))
            for _ in range(3):
                tm(x, y)
                opt.zero_grad()
                ref(x, y)[1].backward()
                opt.step()
            for k, v in ref.state_dict().items():
                self.assertLess((m.state_dict()[k] - v).abs().max().item(), 1e-6, k)

    def test_group_settings_tilegraph_cannot_take_are_refused(self):
        m = self.Normed()
        with self.assertRaisesRegex(ValueError, "parameter group 1 sets amsgrad"):
            poptorch.optim.Adam([{"params": [m.a.weight]}, {"params": [m.b.weight], "amsgrad": True}])
        with self.assertRaisesRegex(ValueError, "parameter group 0.*amsgrad"):
            poptorch.trainingModel(m, None, torch.optim.Adam(
                [{"params": [m.a.weight], "amsgrad": True}, {"params": [m.b.weight]}]))


class HostCopyTest(unittest.TestCase):
    def test_reads_after_training_return_trained_values(self):
        """Each read path, first after a step, returns what PyTorch trained in
        lockstep: attribute access, named_parameters() through the wrapper,
        parameters(), torch.save(state_dict()) and torch.save(module)."""
        m, ref = fresh(), fresh()
        tm = poptorch.trainingModel(m, None, poptorch.optim.Adam(m.parameters(), lr=0.05))
        opt = torch.optim.Adam(ref.parameters(), lr=0.05)

        def step():
            tm(X, Y)
            opt.zero_grad()
            ref(X, Y)[1].backward()
            opt.step()
            return ref.b.weight.detach().clone()

        def close(got, want):
            return (got.detach() - want).abs().max().item() < 1e-5

        want = step()
        self.assertTrue(close(m.b.weight, want))
        want = step()
        self.assertTrue(close(dict(tm.named_parameters())["b.weight"], want))
        want = step()
        self.assertTrue(close(list(m.parameters())[-2], want))
        want = step()
        buf = io.BytesIO()
        torch.save(m.state_dict(), buf)
        buf.seek(0)
        self.assertTrue(close(torch.load(buf)["b.weight"], want))
        want = step()
        buf = io.BytesIO()
        torch.save(m, buf)  # the module pickles as its own class
        buf.seek(0)
        loaded = torch.load(buf)
        self.assertIs(type(loaded), Net)
        self.assertIs(type(loaded.b), nn.Linear)
        self.assertTrue(close(loaded.b.weight, want))

    def test_load_state_dict_after_training_reaches_the_session(self):
        m = fresh()
        start = copy.deepcopy(m.state_dict())
        tm = poptorch.trainingModel(m, None, poptorch.optim.SGD(m.parameters(), lr=0.1))
        first = tm(X, Y)[1].item()
        tm(X, Y)
        m.load_state_dict(start)  # back to the start: the next step's loss is the first's again
        self.assertTrue(torch.equal(m.b.weight, start["b.weight"]))
        self.assertEqual(tm(X, Y)[1].item(), first)

    def test_inference_model_follows_training(self):
        """An inferenceModel of a module a trainingModel trains runs with the
        latest trained weights on every call, as PopTorch's does."""
        m = fresh()
        tm = poptorch.trainingModel(m, None, poptorch.optim.SGD(m.parameters(), lr=0.1))
        tm(X, Y)
        im = poptorch.inferenceModel(m)
        for _ in range(2):
            out = im(X, Y)[0]
            with torch.no_grad():
                self.assertTrue(torch.allclose(out, m(X, Y)[0], atol=1e-6))
            tm(X, Y)
            tm(X, Y)


class DetachTest(unittest.TestCase):
    def run_steps(self, make, detach):
        m = fresh()
        tm = poptorch.trainingModel(m, None, make(m.parameters()))
        for i in range(6):
            tm(X, Y)
            if detach and i in (1, 3):
                tm.detachFromDevice()
        return {k: v.clone() for k, v in m.state_dict().items()}

    def test_detach_keeps_optimizer_state_and_step(self):
        for make in (lambda p: poptorch.optim.Adam(p, lr=0.05),
                     lambda p: poptorch.optim.SGD(p, lr=0.1, momentum=0.9)):
            a, b = self.run_steps(make, False), self.run_steps(make, True)
            for k in a:
                self.assertTrue(torch.equal(a[k], b[k]), k)


class CommandTest(unittest.TestCase):
    """`tilegraph train --model FILE.onnx`: buffers stay fixed by the file's
    parameter list (tilegraph.mark_parameters) or by --freeze."""

    class Image(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3 * 32 * 32, 10)
            self.register_buffer("offset", torch.full((3 * 32 * 32,), 0.5))

        def forward(self, x):
            return self.fc(x.flatten(1) + self.offset)

    def train(self, d, name, *flags):
        cli = os.environ.get("TILEGRAPH_CLI")
        if not cli:
            self.skipTest("TILEGRAPH_CLI is not set (CTest sets it)")
        st = os.path.join(d, name + ".st")
        r = subprocess.run([cli, "train", "--model", os.path.join(d, name + ".onnx"), "--data",
                            "synthetic", "--train-limit", "32", "--test-limit", "8",
                            "--batch-size", "8", "--optimizer", "adam", "--lr", "0.05", "--save",
                            st, "--quiet", *flags], capture_output=True, text=True, timeout=120)
        return r, (read_safetensors(st) if r.returncode == 0 else None)

    def test_parameters_list_and_freeze(self):
        torch.manual_seed(0)
        m = self.Image()
        with tempfile.TemporaryDirectory() as d:
            for name in ("plain", "marked"):
                torch.onnx.export(m, torch.zeros(2, 3, 32, 32), os.path.join(d, name + ".onnx"),
                                  training=torch.onnx.TrainingMode.TRAINING,
                                  do_constant_folding=False, input_names=["input"],
                                  output_names=["logits"], opset_version=13,
                                  dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
            poptorch.mark_parameters(os.path.join(d, "marked.onnx"), m)
            for name, flags in (("marked", ()), ("plain", ("--freeze", "^offset$"))):
                r, st = self.train(d, name, *flags)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue((st["offset"] == 0.5).all(), name)
                self.assertNotIn("offset.exp_avg", st)
                self.assertIn("fc.weight.exp_avg", st)
            r, st = self.train(d, "plain")  # without either, as before: the file says nothing
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("offset.exp_avg", st)
            r, _ = self.train(d, "plain", "--freeze", "^ofset$")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("freeze pattern '^ofset$' matches no float initializer", r.stderr)
            for cmd in ("compile", "check"):  # the same flag, checked the same way
                r = subprocess.run([os.environ["TILEGRAPH_CLI"], cmd, "--model",
                                    os.path.join(d, "plain.onnx"), "--freeze", "^ofset$"],
                                   capture_output=True, text=True, timeout=120)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("freeze pattern '^ofset$' matches no float initializer", r.stderr)


if __name__ == "__main__":
    unittest.main()
