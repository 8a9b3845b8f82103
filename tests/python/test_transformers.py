"""tests/python/test_transformers.py - transformer models exported from PyTorch, against PyTorch.

- A tiny BERT over int64 token ids: nn.Embedding for words, positions and
  token types, nn.TransformerEncoder (post-LN, GELU, batch_first) with a key
  padding mask made from an int64 attention mask, a pooled classifier.
- A GPT-style causal LM: learned positions, a causal mask from a
  torch.triu buffer applied with masked_fill(-inf), pre-LN blocks written
  out, the LM head tied to the word embeddings, and the next-token loss
  (token-level cross entropy over shifted labels) inside the model.
- The rest of the issue's set is covered elsewhere: the small ViT
  (torchvision VisionTransformer, image 32 patch 8) and the Conv1d net in
  test_vision_import.py, the LSTM classifier in test_recurrent.py.

Each as test_torch_numerics.py measures: inference against PyTorch's
eval-mode float32 within 1e-4 of the largest output; one SGD step (lr 1, so
the update read back is the gradient) against PyTorch float64 on the same
weights and batch, the worst parameter within 3x PyTorch float32's own worst
(or 1e-5). Analytically zero gradients (an attention key's bias: softmax
does not see a shift shared by all keys) are measured against the largest
gradient. Both models also train a step with
Options().Debug.verifyAgainstReference(True) (docs/numerics.md), which must
pass.
"""
import copy
import math
import unittest

import tg_pytest  # noqa: F401  (skips without torch, cffi, onnx)
from tg_pytest import TRAIN_FACTOR, TRAIN_FLOOR, rel  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tilegraph as poptorch  # noqa: E402

INFER_TOL = 1e-4
ZERO = 1e-9  # a float64 gradient below this fraction of the largest is analytically zero

BATCH, SEQ, VOCAB = 2, 12, 40


class TinyBert(nn.Module):
    """BERT's embeddings and nn.TransformerEncoder over int64 ids, a mask of
    1 (token) / 0 (padding), and a classifier on the first token."""

    def __init__(self, hidden=32, heads=4, layers=2, classes=3):
        super().__init__()
        self.word = nn.Embedding(VOCAB, hidden)
        self.position = nn.Embedding(SEQ, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.norm = nn.LayerNorm(hidden)
        layer = nn.TransformerEncoderLayer(hidden, heads, dim_feedforward=4 * hidden, dropout=0.0,
                                           activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pooler = nn.Linear(hidden, hidden)
        self.classifier = nn.Linear(hidden, classes)
        self.register_buffer("position_ids", torch.arange(SEQ).unsqueeze(0), persistent=False)

    def forward(self, input_ids, token_type_ids, attention_mask, labels=None):
        positions = self.position_ids[:, : input_ids.shape[1]]
        h = self.norm(self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids))
        h = self.encoder(h, src_key_padding_mask=attention_mask == 0)
        logits = self.classifier(torch.tanh(self.pooler(h[:, 0])))
        if labels is None:
            return logits
        return F.cross_entropy(logits, labels), logits


class CausalSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)
        self.register_buffer("bias", torch.triu(torch.ones(SEQ, SEQ, dtype=torch.bool), diagonal=1)
                             .view(1, 1, SEQ, SEQ), persistent=False)

    def forward(self, x):
        b, s, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (t.view(b, s, self.heads, c // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
        att = att.masked_fill(self.bias[:, :, :s, :s], float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, s, c))


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden)
        self.attn = CausalSelfAttention(hidden, heads)
        self.ln_2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TinyGPT(nn.Module):
    """nanoGPT's shape: learned positions, pre-LN blocks, a tied LM head."""

    def __init__(self, hidden=32, heads=4, layers=2):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, hidden)
        self.wpe = nn.Embedding(SEQ, hidden)
        self.h = nn.ModuleList([Block(hidden, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight  # tied

    def forward(self, idx, targets=None):
        pos = torch.arange(0, idx.shape[1], dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return loss, logits


def perturb(model, scale=0.1):
    """Every parameter moved off its initial value (LayerNorm's 1 and 0,
    zero biases), so that no gradient is zero by construction."""
    g = torch.Generator().manual_seed(123)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
    return model


def make(name, seed=0):
    """(model, inputs without labels, labels) with random weights and data."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(1, VOCAB, (BATCH, SEQ), generator=g)
    if name == "bert":
        model = perturb(TinyBert())
        types = torch.zeros(BATCH, SEQ, dtype=torch.int64)
        types[:, SEQ // 2:] = 1
        mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
        mask[1, -3:] = 0  # the second sample is padded
        return model, (ids, types, mask), torch.tensor([0, 2])
    model = perturb(TinyGPT())
    targets = torch.roll(ids, -1, dims=1)
    targets[:, -1] = -1  # no next token
    return model, (ids,), targets


def inference(name):
    model, inputs, _ = make(name)
    model.eval()
    with torch.no_grad():
        ref = model(*inputs)
    out = poptorch.inferenceModel(copy.deepcopy(model), poptorch.Options())(*inputs)
    return rel(out.numpy(), ref.numpy()), rel(ref[0].numpy(), ref[1].numpy())


def sgd_updates(model, inputs, labels):
    """w0 - w1 per parameter after one PyTorch SGD step at lr 1, and the loss."""
    w0 = {k: p.detach().clone() for k, p in model.named_parameters()}
    model.train()
    loss, _ = model(*inputs, labels)
    loss.backward()
    torch.optim.SGD(model.parameters(), lr=1.0).step()
    return {k: (w0[k].double() - p.detach().double()).numpy() for k, p in model.named_parameters()}, \
        float(loss)


def training(name, options=None):
    """One SGD step of tilegraph and of PyTorch float32, each against float64."""
    model, inputs, labels = make(name)
    w0 = {k: p.detach().clone() for k, p in model.named_parameters()}
    g64, loss64 = sgd_updates(copy.deepcopy(model).double(), inputs, labels)
    g32, loss32 = sgd_updates(copy.deepcopy(model), inputs, labels)
    m = copy.deepcopy(model)
    tm = poptorch.trainingModel(m, options or poptorch.Options(), poptorch.optim.SGD(m.parameters(), lr=1.0))
    loss, _ = tm(*inputs, labels)
    tm.copyWeightsToHost()
    trained = dict(m.named_parameters())
    top = max(float(np.max(np.abs(g))) for g in g64.values())
    ours, theirs, zeros = [], [], []
    for k, g in g64.items():
        tg = (w0[k].double() - trained[k].detach().double()).numpy()
        if float(np.max(np.abs(g))) > ZERO * top:
            ours.append((rel(tg, g), k))
            theirs.append(rel(g32[k], g))
        else:  # analytically zero: the noise against the largest gradient
            zeros.append((float(np.max(np.abs(tg - g))) / top, float(np.max(np.abs(g32[k] - g))) / top, k))
    worst, where = max(ours)
    return {"worst": worst, "where": where, "torch32": max(theirs), "zeros": zeros,
            "loss": abs(float(loss) - loss64) / abs(loss64), "loss32": abs(loss32 - loss64) / abs(loss64),
            "params": len(g64)}


class Transformers(unittest.TestCase):
    def check(self, name):
        err, spread = inference(name)
        print(f"{name}: inference {err:.2e} of the largest output", flush=True)
        self.assertGreater(spread, 1e-3, f"{name}: the two samples' reference outputs agree")
        self.assertLessEqual(err, INFER_TOL, f"{name}: inference differs from PyTorch by {err:.3g}")
        tg_pytest.assert_training_step(self, name, training(name))

    def verify(self, name):
        """The differential checker on the first training step: passes, and
        the step still matches PyTorch."""
        opts = poptorch.Options()
        opts.Debug.verifyAgainstReference(True)
        r = training(name, opts)
        self.assertLessEqual(r["worst"], max(TRAIN_FACTOR * r["torch32"], TRAIN_FLOOR), name)

    def test_tiny_bert(self):
        self.check("bert")

    def test_gpt(self):
        self.check("gpt")

    def test_tiny_bert_verified(self):
        self.verify("bert")

    def test_gpt_verified(self):
        self.verify("gpt")


if __name__ == "__main__":
    torch.set_num_threads(1)
    unittest.main()
