"""tests/python/test_api_surface.py - PopTorch's public API (issue 41 item 5).

Walks poptorch_api_names.txt: every name of PopTorch's Options (and its
sub-objects), poptorch.* and the model's methods either works or raises
TilegraphError naming it and saying why; never AttributeError, never another
exception. Every name is in docs/python.md's table.

TG_TEST_LABELS: quick
"""
import os
import tempfile
import unittest

from tg_pytest import poptorch
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x, y):
        o = self.fc(x)
        return o, self.loss(o, y)


def entries():
    with open(os.path.join(HERE, "poptorch_api_names.txt"), encoding="utf-8") as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                name, args = (p.strip() for p in line.split("|", 1))
                yield name, args


def resolve(name, roots):
    """The object `name` names; a call inside it ("poptorch.Phase("B1").ipus")
    is evaluated with the roots in scope."""
    if "(" in name:
        return eval(name, dict(roots))
    first, *rest = name.split(".")
    target = roots[first]
    for part in rest:
        target = getattr(target, part)
    return target


class ApiSurfaceTest(unittest.TestCase):
    def test_every_name_works_or_is_refused_by_name(self):
        X, Y = torch.randn(4, 4), torch.tensor([0, 1, 2, 0])
        module = Net()
        opts = poptorch.Options().anchorTensor("a", "output0")
        opts.showCompilationProgressBar(False)
        model = poptorch.trainingModel(module, opts, poptorch.optim.SGD(module.parameters(), lr=0.1))
        model(X, Y)
        with tempfile.TemporaryDirectory() as d:
            options_file = os.path.join(d, "options.txt")
            with open(options_file, "w") as f:
                f.write("deviceIterations(2)  # a comment\nTraining.gradientAccumulation(4)\n")
            seen = 0
            for name, args in entries():
                roots = {"poptorch": poptorch, "Options": poptorch.Options(), "model": model,
                         "torch": torch}
                with self.subTest(name=name, args=args):
                    target = resolve(name, roots)  # AttributeError fails the test
                    if args == "-":
                        continue
                    env = {"poptorch": poptorch, "torch": torch, "X": X, "Y": Y,
                           "MODULE": module, "OPTIONS_FILE": options_file}
                    call_args = eval(args, env)
                    if not isinstance(call_args, tuple):
                        call_args = (call_args,)
                    try:
                        target(*call_args)
                    except poptorch.TilegraphError as e:
                        short = name.split(".")[-1].split("(")[0]
                        self.assertIn(short, str(e))
                        self.assertIn(": ", str(e))  # and a reason after the name
                    seen += 1
            self.assertGreater(seen, 100)
            loaded = poptorch.Options().loadFromFile(options_file)
            self.assertEqual(loaded.toDict()["deviceIterations"], "2")
            self.assertEqual(loaded.toDict()["Training.gradientAccumulation"], "4")

    def test_documented(self):
        with open(os.path.join(HERE, "..", "..", "docs", "python.md"), encoding="utf-8") as f:
            doc = f.read()
        for name, _ in entries():
            self.assertIn(f"`{name}`", doc, name)


if __name__ == "__main__":
    unittest.main()
