"""tests/python/test_training.py - trainingModel/inferenceModel against PyTorch itself.

One SGD step on tilegraph must give PyTorch's loss and weights; output modes
must return the copies the options ask for; copyWeightsToHost must write the
session's weights (and batch-norm statistics) back under their own names.

TG_TEST_LABELS: quick
"""
import copy
import unittest

from tg_pytest import WithLoss, data, net, poptorch
import torch
import torch.nn as nn


def opts(iterations=1, accumulation=1, mode=poptorch.OutputMode.All):
    o = poptorch.Options().deviceIterations(iterations).outputMode(mode)
    o.Training.gradientAccumulation(accumulation)
    return o


class TrainingTest(unittest.TestCase):
    def test_one_sgd_step_matches_pytorch(self):
        m = net()
        ref = copy.deepcopy(m)
        x, y = data(8)
        tm = poptorch.trainingModel(WithLoss(m), opts(), poptorch.optim.SGD(m.parameters(), lr=0.1))
        out, loss = tm(x, y)
        ref_out = ref(x)
        ref_loss = nn.functional.cross_entropy(ref_out, y)
        self.assertTrue(torch.allclose(out, ref_out.detach(), atol=1e-5))
        self.assertAlmostEqual(loss.item(), ref_loss.item(), places=5)
        ref_loss.backward()
        torch.optim.SGD(ref.parameters(), lr=0.1).step()
        tm.copyWeightsToHost()
        for (name, a), b in zip(m.named_parameters(), ref.parameters()):
            self.assertTrue(torch.allclose(a, b, atol=1e-5), name)

    def test_output_modes(self):
        x, y = data(24)  # 2 iterations x 3 micro-batches of 4
        results = {}
        for mode in (poptorch.OutputMode.All, poptorch.OutputMode.Final, poptorch.OutputMode.Sum):
            m = net()
            tm = poptorch.trainingModel(WithLoss(m), opts(2, 3, mode),
                                        poptorch.optim.SGD(m.parameters(), lr=0.05))
            results[mode] = tm(x, y)
        out_all, loss_all = results[poptorch.OutputMode.All]
        self.assertEqual(tuple(out_all.shape), (24, 5))
        self.assertEqual(tuple(loss_all.shape), (6,))
        out_final, loss_final = results[poptorch.OutputMode.Final]
        self.assertEqual(tuple(out_final.shape), (4, 5))
        self.assertTrue(torch.allclose(out_final, out_all[-4:]))
        self.assertAlmostEqual(loss_final.item(), loss_all[-1].item(), places=6)
        _, loss_sum = results[poptorch.OutputMode.Sum]
        self.assertAlmostEqual(loss_sum.sum().item(), loss_all.sum().item(), places=4)

    def test_weights_stay_on_device_and_round_trip(self):
        m = net()
        x, y = data(8)
        tm = poptorch.trainingModel(WithLoss(m), opts(), poptorch.optim.Adam(m.parameters(), lr=0.01))
        before = [p.detach().clone() for p in m.parameters()]
        losses = [tm(x, y)[1].item() for _ in range(5)]
        self.assertLess(losses[-1], losses[0])  # the session kept its weights between calls
        # reading the parameters copies the trained weights to the host, as
        # PopTorch's implicit copy does (test_semantics.py has each read path)
        self.assertFalse(any(torch.equal(a, b) for a, b in zip(before, m.parameters())))
        tm.copyWeightsToHost()
        self.assertFalse(any(torch.equal(a, b) for a, b in zip(before, m.parameters())))
        # the copied weights are the session's: the inference model built from them agrees
        with torch.no_grad():
            host = m.eval()(x)
        im = poptorch.inferenceModel(m, poptorch.Options())
        self.assertTrue(torch.allclose(im(x), host, atol=1e-5))

    def test_batch_norm_statistics_copied(self):
        torch.manual_seed(0)
        m = nn.Sequential(nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(), nn.Linear(108, 5))
        ref = copy.deepcopy(m)
        x, y = data(8)
        tm = poptorch.trainingModel(WithLoss(m), opts(), poptorch.optim.SGD(m.parameters(), lr=0.0))
        tm(x, y)
        tm.copyWeightsToHost()
        ref.train()(x)
        self.assertFalse(torch.allclose(m[1].running_mean, torch.zeros(3)))
        self.assertTrue(torch.allclose(m[1].running_mean, ref[1].running_mean, atol=1e-5))
        self.assertTrue(torch.allclose(m[1].running_var, ref[1].running_var, atol=1e-4))

    def test_set_optimizer_keeps_state(self):
        m = net()
        x, y = data(8)
        tm = poptorch.trainingModel(WithLoss(m), opts(), poptorch.optim.SGD(m.parameters(), lr=0.1))
        tm(x, y)
        tm.setOptimizer(poptorch.optim.SGD(m.parameters(), lr=0.0))
        tm.copyWeightsToHost()
        w = [p.detach().clone() for p in m.parameters()]
        _, loss1 = tm(x, y)
        _, loss2 = tm(x, y)
        tm.copyWeightsToHost()
        self.assertTrue(all(torch.equal(a, b) for a, b in zip(w, m.parameters())))  # lr 0: no change
        self.assertEqual(loss1.item(), loss2.item())

    def test_mse_and_nll_losses(self):
        x, y = data(8)
        for loss, target in ((nn.MSELoss(), nn.functional.one_hot(y, 5).float()), (nn.NLLLoss(), y)):
            m = net()
            ref = copy.deepcopy(m)
            tm = poptorch.trainingModel(WithLoss(m, loss), opts(),
                                        poptorch.optim.SGD(m.parameters(), lr=0.1))
            _, got = tm(x, target)
            self.assertAlmostEqual(got.item(), loss(ref(x), target).item(), places=5, msg=type(loss).__name__)

    def test_executable_cache(self):
        """enableExecutableCaching(dir): the first model writes its program
        there, a second one with the same model and options loads it and
        trains to the same loss."""
        import os
        import tempfile
        x, y = data(8)
        with tempfile.TemporaryDirectory() as d:
            losses = []
            for _ in range(2):
                m = net()
                torch.manual_seed(0)
                m.load_state_dict(net().state_dict())
                o = opts().enableExecutableCaching(d)
                tm = poptorch.trainingModel(WithLoss(m), o, poptorch.optim.SGD(m.parameters(), lr=0.1))
                losses.append(tm(x, y)[1].item())
                tm.detachFromDevice()
            files = [f for f in os.listdir(d) if f.endswith(".tgx")]
            self.assertGreaterEqual(len(files), 1)
            self.assertEqual(losses[0], losses[1])


    def test_torch_optim_optimizers_accepted(self):
        """torch.optim.SGD/Adam/AdamW work as PopTorch's do (issue 32 item 16):
        two steps land where PyTorch's own two steps land."""
        x, y = data(8)
        for make in (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-3),
                     lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99)),
                     lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1)):
            m = net()
            ref = copy.deepcopy(m)
            tm = poptorch.trainingModel(WithLoss(m), opts(), make(m.parameters()))
            ref_opt = make(ref.parameters())
            for _ in range(2):
                tm(x, y)
                ref_opt.zero_grad()
                nn.functional.cross_entropy(ref(x), y).backward()
                ref_opt.step()
            tm.copyWeightsToHost()
            for (name, a), b in zip(m.named_parameters(), ref.parameters()):
                self.assertTrue(torch.allclose(a, b, atol=1e-5),
                                f"{type(ref_opt).__name__}: {name} differs from PyTorch's")
            # and a torch optimizer as the new one: lr 0 leaves the weights
            tm.setOptimizer(type(ref_opt)(m.parameters(), lr=0.0))
            before = [p.detach().clone() for p in m.parameters()]
            tm(x, y)
            tm.copyWeightsToHost()
            self.assertTrue(all(torch.equal(a, b) for a, b in zip(before, m.parameters())))

    def test_torch_optim_settings_not_followed_are_refused(self):
        m = net()
        with self.assertRaisesRegex(ValueError, "amsgrad"):
            poptorch.trainingModel(WithLoss(m), opts(),
                                   torch.optim.Adam(m.parameters(), lr=0.01, amsgrad=True))
        # parameter groups with their own lr are taken now (test_semantics.py GroupsTest)
        with self.assertRaisesRegex(ValueError, "got Adagrad"):
            poptorch.trainingModel(WithLoss(m), opts(), torch.optim.Adagrad(m.parameters()))

    def test_export_prints_no_torch_warnings(self):
        """torch's exporter notes (about twenty UserWarnings/TracerWarnings
        per export) are not shown (issue 32 item 16)."""
        import warnings

        class Encoder(nn.Module):  # batch norm and attention: 8 torch warnings before
            def __init__(self):
                super().__init__()
                self.bn = nn.BatchNorm1d(16)
                self.layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
                self.fc = nn.Linear(16, 5)

            def forward(self, x, y):
                out = self.fc(self.layer(self.bn(x.transpose(1, 2)).transpose(1, 2)).mean(1))
                return out, nn.functional.cross_entropy(out, y)

        m = Encoder()
        x, y = torch.randn(4, 8, 16), torch.randint(0, 5, (4,))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            poptorch.trainingModel(m, opts(), poptorch.optim.SGD(m.parameters(), lr=0.1))(x, y)
        torch_dir = torch.__file__.rsplit("/", 1)[0]
        shown = [f"{w.filename}:{w.lineno}: {w.message}" for w in seen if w.filename.startswith(torch_dir)]
        self.assertEqual(shown, [])

if __name__ == "__main__":
    unittest.main()
