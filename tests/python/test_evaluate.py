"""tests/python/test_evaluate.py - poptorch.evaluate: a test set scored by the
library's tg_evaluate, against PyTorch's own argmax and cross-entropy.

The evaluation program is compiled once (evaluating again runs it again),
follows the trainer's weights without rebuilding the training session, and
a batch of another size recompiles the evaluation program alone. Compiles
are counted at the library's session creation (_open_session).

TG_TEST_LABELS: quick
"""
import unittest

from tg_pytest import WithLoss, data, net, poptorch
import torch
import torch.nn as nn
import torch.utils.data as tud


def batches(x, y, n):
    return [(x[i:i + n], y[i:i + n]) for i in range(0, len(x), n)]


def torch_accuracy(module, x, y):
    with torch.no_grad():
        return 100.0 * (module(x).argmax(1) == y).sum().item() / len(y)


def count_compiles(model):
    """Wrap the model's session creation: the list grows by one per compile."""
    calls, real = [], model._open_session

    def counted(extra):
        calls.append(1)
        return real(extra)
    model._open_session = counted
    return calls


class EvaluateTest(unittest.TestCase):
    def test_accuracy_is_pytorchs_and_compiles_once(self):
        m = net()
        x, y = data(40, seed=3)
        im = poptorch.inferenceModel(m)
        compiles = count_compiles(im)
        r = poptorch.evaluate(im, batches(x, y, 8))
        self.assertEqual(r.scored, 40)
        self.assertAlmostEqual(r.accuracy, torch_accuracy(m, x, y), places=9)
        self.assertTrue(r.loss != r.loss and r.mean_iou != r.mean_iou)  # NaN: a classifier
        again = poptorch.evaluate(im, batches(x, y, 8))
        self.assertEqual((again.accuracy, again.scored), (r.accuracy, r.scored))
        self.assertEqual(len(compiles), 1, "evaluating twice compiled twice")

    def test_short_final_batch_is_padded_not_scored(self):
        m = net()
        x, y = data(21, seed=4)
        im = poptorch.inferenceModel(m)
        r = poptorch.evaluate(im, batches(x, y, 8))  # 8, 8, 5
        self.assertEqual(r.scored, 21)
        self.assertAlmostEqual(r.accuracy, torch_accuracy(m, x, y), places=9)

    def test_torch_dataloader(self):
        m = net()
        x, y = data(24, seed=5)
        loader = tud.DataLoader(tud.TensorDataset(x, y), batch_size=6)
        r = poptorch.evaluate(poptorch.inferenceModel(m), loader)
        self.assertEqual(r.scored, 24)
        self.assertAlmostEqual(r.accuracy, torch_accuracy(m, x, y), places=9)

    def test_follows_training_without_rebuilding_it(self):
        m = net()
        x, y = data(16, seed=6)
        tx, ty = data(32, seed=7)
        tm = poptorch.trainingModel(WithLoss(m), None, poptorch.optim.SGD(m.parameters(), lr=0.5))
        tm(x, y)
        train_compiles = count_compiles(tm)
        session = tm._handle
        im = poptorch.inferenceModel(m)
        eval_compiles = count_compiles(im)
        before = poptorch.evaluate(im, batches(tx, ty, 8))
        for _ in range(3):
            tm(x, y)
        after = poptorch.evaluate(im, batches(tx, ty, 8))
        # the trained weights, read back from the training session
        tm.copyWeightsToHost()
        self.assertAlmostEqual(after.accuracy, torch_accuracy(m, tx, ty), places=9)
        self.assertEqual(len(eval_compiles), 1)
        # another evaluation batch: the evaluation program alone is rebuilt
        other = poptorch.evaluate(im, batches(tx, ty, 16))
        self.assertEqual(other.accuracy, after.accuracy)
        self.assertEqual(len(eval_compiles), 2)
        self.assertEqual(len(train_compiles), 0, "evaluation rebuilt the training session")
        self.assertIs(tm._handle, session)
        tm(x, y)  # and training goes on where it was
        self.assertIsNotNone(before)

    def test_language_model_loss_is_pytorchs_cross_entropy(self):
        torch.manual_seed(0)

        class Tiny(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(11, 6)
                self.out = nn.Linear(6, 11)

            def forward(self, ids):
                return self.out(self.emb(ids))

        m = Tiny()
        g = torch.Generator().manual_seed(2)
        ids = torch.randint(0, 11, (12, 5), generator=g)
        labels = torch.randint(0, 11, (12, 5), generator=g)
        r = poptorch.evaluate(poptorch.inferenceModel(m), batches(ids, labels, 4))
        with torch.no_grad():
            logits = m(ids)
            ref_loss = nn.functional.cross_entropy(logits.reshape(-1, 11), labels.reshape(-1),
                                                   reduction="mean").item()
            ref_acc = 100.0 * (logits.argmax(-1) == labels).sum().item() / labels.numel()
        self.assertEqual(r.scored, 60)
        self.assertAlmostEqual(r.accuracy, ref_acc, places=9)
        self.assertAlmostEqual(r.loss, ref_loss, places=5)

    def test_bad_batches_name_the_fault(self):
        m = net()
        x, y = data(16, seed=8)
        im = poptorch.inferenceModel(m)
        with self.assertRaisesRegex(ValueError, "labels for 8 samples"):
            poptorch.evaluate(im, [(x[:8], y[:4])])
        with self.assertRaisesRegex(ValueError, "batch of shape"):
            poptorch.evaluate(im, [(x[:8], y[:8]), (x[:8, :, :4], y[:8])])
        with self.assertRaisesRegex(ValueError, "inferenceModel"):
            poptorch.evaluate(m, [(x, y)])


if __name__ == "__main__":
    unittest.main()
