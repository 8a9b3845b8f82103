"""tests/python/test_errors.py - errors a Python user understands."""
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
        with self.assertRaisesRegex(ValueError, r"return \(output, loss\)"):
            tm(x, y)

    def test_unsupported_loss_reduction(self):
        m = net()
        tm = poptorch.trainingModel(WithLoss(m, nn.CrossEntropyLoss(reduction="sum")), None, sgd(m))
        with self.assertRaisesRegex(ValueError, "reduction='sum'"):
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
        with self.assertRaisesRegex(ValueError, "poptorch.optim"):
            poptorch.trainingModel(WithLoss(m), None, torch.optim.SGD(m.parameters(), lr=0.1))
        tm = poptorch.trainingModel(WithLoss(m), None, sgd(m))
        with self.assertRaisesRegex(ValueError, r"\(input, labels\)"):
            tm(data(4)[0])
        with self.assertRaisesRegex(ValueError, "compiled with SGD"):
            tm.setOptimizer(poptorch.optim.Adam(m.parameters()))

    def test_unsupported_op_names_the_node(self):
        class Cum(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(64, 5)

            def forward(self, x):
                return torch.cumsum(self.fc(x.flatten(1)), 1)

        with self.assertRaisesRegex(TilegraphError, "CumSum"):
            poptorch.inferenceModel(Cum())(data(4)[0])

    def test_not_a_module(self):
        with self.assertRaisesRegex(ValueError, "torch.nn.Module"):
            poptorch.inferenceModel(lambda x: x)


if __name__ == "__main__":
    unittest.main()
