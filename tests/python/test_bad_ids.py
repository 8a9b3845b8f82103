"""tests/python/test_bad_ids.py - token ids, token types, labels and gather
indices out of range, given from Python, as PyTorch treats them: refused
naming the input, the value, its position and the valid range. (An id of -1
silently picked the last row, an id past the vocabulary gave
"'cross_entropy' is NaN" naming no input, or NaN logits in inference, and
torch.gather's indices past a row read the next row.)

TG_TEST_LABELS: quick
"""
import unittest

from tg_pytest import poptorch
import torch
import torch.nn as nn

from tilegraph import TilegraphError

VOCAB, TYPES, DIM = 11, 2, 8


class TinyLM(nn.Module):
    """Token and token-type embeddings, a head over the vocabulary and,
    given labels, the cross-entropy with torch's ignore_index (-100)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.tok = nn.Embedding(VOCAB, DIM)
        self.typ = nn.Embedding(TYPES, DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids, types, labels=None):
        logits = self.head(torch.tanh(self.tok(ids) + self.typ(types)))
        if labels is None:
            return logits
        return logits, nn.functional.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))


def ids_types(batch=2, seq=5):
    g = torch.Generator().manual_seed(1)
    return (torch.randint(0, VOCAB, (batch, seq), generator=g),
            torch.randint(0, TYPES, (batch, seq), generator=g))


class BadIdsTest(unittest.TestCase):
    def test_inference_refuses_ids_outside_the_vocabulary(self):
        m = TinyLM()
        im = poptorch.inferenceModel(m)
        ids, types = ids_types()
        with torch.no_grad():
            want = m(ids, types)
        self.assertLess(float((im(ids, types) - want).abs().max()), 1e-5)
        for bad, at in ((VOCAB, (1, 2)), (-1, (0, 4)), (-VOCAB, (1, 0))):
            with self.subTest(id=bad):
                wrong = ids.clone()
                wrong[at] = bad
                # PyTorch refuses it too
                with self.assertRaises(IndexError):
                    m(wrong, types)
                with self.assertRaises(TilegraphError) as cm:
                    im(wrong, types)
                text = str(cm.exception)
                self.assertIn(f"ids 'ids' hold {bad} at [{at[0]}, {at[1]}]", text)
                self.assertIn(f"so ids must be in [0, {VOCAB})", text)
        # the model runs again with good ids
        self.assertLess(float((im(ids, types) - want).abs().max()), 1e-5)

    def test_token_types_outside_their_table(self):
        im = poptorch.inferenceModel(TinyLM())
        ids, types = ids_types()
        im(ids, types)  # compiled (the first call runs the model in PyTorch too)
        types[0, 3] = TYPES
        with self.assertRaisesRegex(TilegraphError,
                                    rf"ids 'types' hold {TYPES} at \[0, 3\].* \[0, {TYPES}\)"):
            im(ids, types)

    def test_training_refuses_bad_ids_and_labels(self):
        m = TinyLM()
        tm = poptorch.trainingModel(m, None, poptorch.optim.SGD(m.parameters(), lr=0.1))
        ids, types = ids_types()
        labels = ids.clone()
        labels[0, 0] = -100  # ignored, as torch ignores it
        tm(ids, types, labels)
        wrong = ids.clone()
        wrong[1, 1] = 4000
        with self.assertRaisesRegex(TilegraphError, r"ids 'ids' hold 4000 at \[1, 1\]"):
            tm(wrong, types, labels)
        bad = labels.clone()
        bad[1, 4] = VOCAB
        with self.assertRaises(IndexError):  # torch: "Target 11 is out of bounds"
            nn.functional.cross_entropy(torch.zeros(10, VOCAB), bad.reshape(-1))
        with self.assertRaisesRegex(TilegraphError,
                                    rf"labels '[^']*' hold {VOCAB} at sample 9: there are {VOCAB} "
                                    rf"classes, so labels must be integers in \[0, {VOCAB}\), or "
                                    "the ignore_index -100"):
            tm(ids, types, bad)

    def test_gather_indices_past_a_row(self):
        class Pick(nn.Module):
            def forward(self, x, idx):
                return torch.gather(x, 1, idx)

        x = torch.arange(1.0, 11.0).reshape(2, 5)
        im = poptorch.inferenceModel(Pick())
        good = torch.tensor([[4, 0, 2], [1, 1, 3]])
        self.assertTrue(torch.equal(im(x, good), torch.gather(x, 1, good)))
        past = torch.tensor([[5, 7, 0], [0, 0, 0]])
        with self.assertRaisesRegex(TilegraphError, r"indices 'idx' hold 5 at \[0, 0\].*\[-5, 5\)"):
            im(x, past)


if __name__ == "__main__":
    unittest.main()
