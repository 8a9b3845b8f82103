"""tests/python/test_precision.py - model.half() and half inputs pick tilegraph's precision."""
import unittest

import tg_pytest  # noqa: F401  (skips without torch)
import torch
import torch.nn as nn

import tilegraph as poptorch


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 6 * 6, 10)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x, y):
        out = self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))
        return out, self.loss(out, y)


def batch(dtype):
    torch.manual_seed(1)
    return torch.rand(8, 3, 8, 8).to(dtype), torch.randint(0, 10, (8,))


class PrecisionTest(unittest.TestCase):
    def train(self, model, x, y, options=None, steps=6):
        tm = poptorch.trainingModel(model, options, poptorch.optim.SGD(model.parameters(), lr=0.1))
        losses = [float(tm(x, y)[1].mean()) for _ in range(steps)]
        return tm, losses

    def test_half_model_trains_in_16_16_and_stays_half(self):
        torch.manual_seed(0)
        m = Net().half()
        before = m.fc.weight.detach().clone()
        tm, losses = self.train(m, *batch(torch.float16))
        self.assertEqual(tm._placement_values.get("precision"), "16.16")
        self.assertLess(losses[-1], 0.5 * losses[0])
        out, loss = tm(*batch(torch.float16))  # as PopTorch: in the model's type
        self.assertEqual((out.dtype, loss.dtype), (torch.float16, torch.float16))
        tm.copyWeightsToHost()
        self.assertEqual(m.fc.weight.dtype, torch.float16)
        self.assertEqual(m.bn.running_mean.dtype, torch.float16)
        self.assertGreater(float((m.fc.weight.float() - before.float()).abs().max()), 1e-3)

    def test_half_input_float_model_is_16_32(self):
        torch.manual_seed(0)
        tm, losses = self.train(Net(), *batch(torch.float16), steps=2)
        self.assertEqual(tm._placement_values.get("precision"), "16.32")
        self.assertEqual(tm.model.fc.weight.dtype, torch.float32)
        self.assertEqual(tm(*batch(torch.float16))[0].dtype, torch.float32)

    def test_explicit_option_wins_and_float_adds_nothing(self):
        torch.manual_seed(0)
        tm, _ = self.train(Net().half(), *batch(torch.float16), poptorch.Options().set("precision", "32.16"),
                           steps=1)
        self.assertNotIn("precision", tm._placement_values)
        self.assertEqual(tm._session_values["precision"], "32.16")
        tm, _ = self.train(Net(), *batch(torch.float32), steps=1)
        self.assertNotIn("precision", tm._placement_values)

    def test_mixed_parameter_types_refused(self):
        m = Net()
        m.fc.half()
        tm = poptorch.trainingModel(m, None, poptorch.optim.SGD(m.parameters(), lr=0.1))
        with self.assertRaisesRegex(ValueError, "mix torch.float16, torch.float32.*model.half"):
            tm(*batch(torch.float32))


if __name__ == "__main__":
    unittest.main()
