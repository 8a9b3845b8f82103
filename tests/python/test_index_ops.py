"""tests/python/test_index_ops.py - the integer and mask ops token models export.

Embeddings over int64 ids (Gather with a scatter-add gradient), position ids
from a padding mask (CumSum and integer arithmetic), causal masks (Trilu,
masked_fill: Equal/Not/Where on tensors), predictions (ArgMax), OneHot, and
casts between float, int and bool, each as PyTorch exports it. Inference is
compared with PyTorch, and the weights after SGD steps with PyTorch's.
"""
import copy
import unittest

from tg_pytest import poptorch
import torch
import torch.nn as nn
import torch.nn.functional as F

TOL = 2e-5


def close(test, got, want, what, tol=TOL):
    got, want = torch.as_tensor(got).double(), torch.as_tensor(want).double().detach()
    test.assertEqual(tuple(got.shape), tuple(want.shape), what)
    scale = max(float(want.abs().max()), 1.0)
    err = float((got - want).abs().max()) / scale
    test.assertLessEqual(err, tol, f"{what}: {err:.3g} from PyTorch")


class Tokens(nn.Module):
    """Embeddings of ids and of positions computed from the padding mask as
    RoBERTa does (cumsum of the mask, times the mask, plus the padding id),
    a causal self-attention with a triu mask and masked_fill, and a
    prediction by argmax next to the logits."""

    def __init__(self, vocab=40, d=16, seq=10, pad=1):
        super().__init__()
        self.pad = pad
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq + pad + 1, d)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids, labels=None):
        mask = ids.ne(self.pad).int()
        positions = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + self.pad
        x = self.tok(ids) + self.pos(positions)
        s = x.shape[1]
        scores = self.q(x) @ self.k(x).transpose(1, 2) / 4.0
        causal = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(causal, float("-inf"))
        h = torch.softmax(scores, dim=-1) @ self.v(x)
        logits = self.head(h)
        if labels is None:
            return logits, logits.argmax(-1)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                               ignore_index=-100)
        return logits, loss


class Encoded(nn.Module):
    """OneHot of ids into a linear layer, a bool mask cast to float, and an
    integer division of ids."""

    def __init__(self, classes=7):
        super().__init__()
        self.classes = classes
        self.fc = nn.Linear(classes, 5)

    def forward(self, ids, keep):
        onehot = F.one_hot(ids, self.classes).float()
        y = self.fc(onehot) * keep.unsqueeze(-1).float()
        half = torch.div(ids, 2, rounding_mode="trunc")
        return y, half, torch.tril(y)


def ids_with_padding(batch=4, seq=10, vocab=40, pad=1):
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(2, vocab, (batch, seq), generator=g)
    ids[0, 7:] = pad
    ids[2, 4:] = pad
    return ids


class IndexOpsTest(unittest.TestCase):
    def test_token_model_infers_like_pytorch(self):
        torch.manual_seed(0)
        m = Tokens().eval()
        ids = ids_with_padding()
        want_logits, want_pred = m(ids)
        got_logits, got_pred = poptorch.inferenceModel(m)(ids)
        close(self, got_logits, want_logits, "logits")
        self.assertTrue(torch.equal(got_pred.long(), want_pred), "argmax")

    def test_token_model_trains_like_pytorch(self):
        torch.manual_seed(1)
        m = Tokens()
        ref = copy.deepcopy(m)
        ids = ids_with_padding()
        labels = torch.roll(ids, -1, dims=1)
        labels[:, -1] = -100
        model = poptorch.trainingModel(m, optimizer=poptorch.optim.SGD(m.parameters(), lr=0.5))
        opt = torch.optim.SGD(ref.parameters(), lr=0.5)
        for step in range(3):
            _, loss = model(ids, labels)
            opt.zero_grad()
            _, want = ref(ids, labels)
            want.backward()
            opt.step()
            close(self, loss.reshape(()), want, f"loss at step {step}")
        model.copyWeightsToHost()
        for (name, a), b in zip(m.named_parameters(), ref.parameters()):
            close(self, a, b, name, tol=1e-4)
        # rows of the embedding no id reached keep their values exactly
        unused = sorted(set(range(40)) - set(ids.flatten().tolist()))
        self.assertTrue(torch.equal(m.tok.weight[unused], ref.tok.weight[unused]))

    def test_one_hot_casts_and_integer_division(self):
        torch.manual_seed(2)
        m = Encoded().eval()
        ids = torch.tensor([[0, 3, 6], [5, 2, 1]])
        keep = torch.tensor([[True, False, True], [True, True, False]])
        want = m(ids, keep)
        got = poptorch.inferenceModel(m)(ids, keep)
        close(self, got[0], want[0], "one-hot linear")
        self.assertTrue(torch.equal(got[1].long(), want[1]), "ids // 2")
        close(self, got[2], want[2], "tril")

    def test_ids_out_of_int32_are_refused(self):
        class Big(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 2)

            def forward(self, ids):
                return self.fc((ids > 3).float())

        ids = torch.tensor([[1, 2**40, 3]])
        with self.assertRaises(Exception) as e:
            poptorch.inferenceModel(Big())(ids)
        self.assertIn("int32", str(e.exception))


if __name__ == "__main__":
    torch.set_num_threads(1)
    unittest.main()
