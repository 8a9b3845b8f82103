"""tests/python/test_errors.py - errors a Python user understands.

TG_TEST_LABELS: quick
"""
import inspect
import re
import unittest

from tg_pytest import WithLoss, data, net, poptorch
import torch
import torch.nn as nn

from tilegraph import TilegraphError


def sgd(m):
    return poptorch.optim.SGD(m.parameters(), lr=0.1)


class ErrorsTest(unittest.TestCase):
    def test_model_without_loss(self):
        m = net()
        tm = poptorch.trainingModel(m, poptorch.Options(), sgd(m))
        x, y = data(4)
        with self.assertRaisesRegex(ValueError, r"returned no scalar loss .*returning \(output, loss\)"):
            tm(x)
        # the call must fit the forward's signature, which the error shows
        with self.assertRaisesRegex(ValueError, r"Small.forward\(x\) does not take these arguments"):
            tm(x, y)

    def test_non_scalar_loss(self):
        m = net()
        tm = poptorch.trainingModel(WithLoss(m, nn.CrossEntropyLoss(reduction="none")), None, sgd(m))
        with self.assertRaisesRegex(ValueError, "no scalar loss.*reduction='none' must be reduced"):
            tm(*data(4))

    def test_host_batch_not_a_multiple(self):
        m = net()
        o = poptorch.Options().deviceIterations(3)
        tm = poptorch.trainingModel(WithLoss(m), o, sgd(m))
        with self.assertRaisesRegex(ValueError, "not a multiple of .* = 3"):
            tm(*data(8))

    def test_batch_size_changed_after_compiling(self):
        m = net()
        tm = poptorch.trainingModel(WithLoss(m), None, sgd(m))
        tm(*data(4))
        with self.assertRaisesRegex(ValueError, "compiled for host batches of 4"):
            tm(*data(8))

    def test_labels_required_and_optimizer_type(self):
        m = net()
        # torch.optim's SGD/Adam/AdamW are accepted (test_training.py); others are not
        with self.assertRaisesRegex(ValueError, "poptorch.optim"):
            poptorch.trainingModel(WithLoss(m), None, torch.optim.Adagrad(m.parameters(), lr=0.1))
        tm = poptorch.trainingModel(WithLoss(m), None, sgd(m))
        with self.assertRaisesRegex(ValueError, r"\(input, labels\)"):
            tm(data(4)[0])
        with self.assertRaisesRegex(ValueError, "compiled with SGD"):
            tm.setOptimizer(poptorch.optim.Adam(m.parameters()))

    def test_unsupported_op_names_the_node(self):
        class Wave(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(64, 25)

            def forward(self, x):
                return torch.det(self.fc(x.flatten(1)).view(-1, 5, 5))

        with self.assertRaises(TilegraphError) as cm:
            poptorch.inferenceModel(Wave())(data(4)[0])
        text = str(cm.exception)
        self.assertIn("unsupported op type: Det", text)
        # The module and the Python line that made the node, from the
        # exporter's scope and recorded stack.
        line = inspect.getsourcelines(Wave.forward)[1] + 1
        self.assertIn(f"Det ('/Det') from Wave (the model), made at {__file__}:{line}: "
                      "return torch.det(", text)

    def test_unsupported_op_in_a_submodule_names_it(self):
        class Determinant(nn.Module):
            def forward(self, x):
                return torch.det(x.view(-1, 5, 5))

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(64, 25), Determinant())

            def forward(self, x):
                y = x.flatten(1)
                return self.body(y)

        with self.assertRaises(TilegraphError) as cm:
            poptorch.inferenceModel(Head())(data(4)[0])
        text = str(cm.exception)
        # the deepest Python line that made the node: the submodule's own
        line = inspect.getsourcelines(Determinant.forward)[1] + 1
        self.assertRegex(text, r"Det \('/body/body\.1/[A-Za-z]+'\) from body\.1 \(Determinant\), "
                         f"made at {re.escape(__file__)}:{line}: return torch\\.det\\(x\\.view")

    def test_not_a_module(self):
        with self.assertRaisesRegex(ValueError, "torch.nn.Module"):
            poptorch.inferenceModel(lambda x: x)


if __name__ == "__main__":
    unittest.main()
