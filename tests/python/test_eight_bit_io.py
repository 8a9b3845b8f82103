"""tests/python/test_eight_bit_io.py - seed 003's --eight-bit-io from Python.

The host sends uint8 images and the model normalises them itself, as the
seed's ModelWithNormalization does (torchvision's Normalize after a cast):
the exported graph starts with a Cast from uint8, which tilegraph imports as
an exact u8 -> f32 conversion of the streamed bytes. Training on the 8-bit
input gives the same losses as training the same network on the images
normalised on the host, and the input stream is a quarter of the bytes.
"""
import unittest

import tg_pytest  # noqa: F401  (skips without torch)
import torch
import torch.nn as nn
import torchvision.transforms as transforms

import tilegraph as poptorch

STATS = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


class ModelWithNormalization(nn.Module):
    """Seed 003's wrapper: normalise(img.to(dtype)) on the device."""

    def __init__(self, model, dtype):
        super().__init__()
        self.model, self.dtype = model, dtype
        self.normalize = transforms.Normalize(**STATS)

    def forward(self, img):
        return self.model(self.normalize(img.to(self.dtype)))


class WithLoss(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model, self.loss = model, nn.CrossEntropyLoss()

    def forward(self, x, y):
        out = self.model(x)
        return out, self.loss(out, y)


def data():
    g = torch.Generator().manual_seed(3)
    return torch.randint(0, 256, (8, 3, 8, 8), dtype=torch.uint8, generator=g), torch.arange(8) % 10


def train(model, x, y, steps=5):
    tm = poptorch.trainingModel(model, None, poptorch.optim.SGD(model.parameters(), lr=0.05))
    return tm, [float(tm(x, y)[1].mean()) for _ in range(steps)]


class EightBitIoTest(unittest.TestCase):
    def test_uint8_input_trains_as_host_normalised_floats(self):
        x, y = data()
        torch.manual_seed(0)
        base = Net()
        host = WithLoss(Net())
        host.model.load_state_dict(base.state_dict())
        device = WithLoss(ModelWithNormalization(Net(), torch.float32))
        device.model.model.load_state_dict(base.state_dict())
        _, want = train(host, transforms.Normalize(**STATS)(x.float()), y)
        tm, got = train(device, x, y)
        self.assertTrue(input_is_u8(tm))
        for a, b in zip(got, want):
            self.assertAlmostEqual(a, b, delta=1e-5 * (1 + abs(b)))
        self.assertLess(got[-1], got[0])

    def test_float_input_to_a_uint8_model_is_refused(self):
        x, y = data()
        tm, _ = train(WithLoss(ModelWithNormalization(Net(), torch.float32)), x, y, steps=1)
        with self.assertRaisesRegex(ValueError, "uint8"):
            tm(x.float(), y)


def input_is_u8(tm):
    from tilegraph._lib import TG_U8, lib
    return lib.tg_tensor_dtype(tm._input) == TG_U8


if __name__ == "__main__":
    unittest.main()
