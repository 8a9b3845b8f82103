#!/usr/bin/python3
"""bench/torch_bert.py - the PyTorch side of bench/bench_bert.c.

A BERT-base-shaped encoder written as HuggingFace's BertLayer is (no
transformers package needed): per layer, query/key/value linears, the heads
split by view + transpose, scores = q k^T / sqrt(d) + an additive mask
([B, 1, 1, S], 0 for tokens and -10000 for padding), softmax, dropout,
context = probs v, heads merged, output linear, dropout, residual and
LayerNorm; then the feed-forward block (linear to `intermediate`, exact
GELU, linear back, dropout, residual, LayerNorm). A token-classification
head (linear to --classes) and cross-entropy over every token give the
loss; AdamW (lr 1e-4, weight decay 0.01) updates. Inputs are the embedded
tokens ([B, S, hidden], random), so the encoder is what is timed.

Prints one JSON line with samples_per_s (sequences per second of wall
time), cpu_samples_per_s (per second of the process's CPU time, which a
loaded machine disturbs less at one thread) and the PyTorch version. Warm-up steps are not timed. With --bf16 the forward runs
under torch.autocast's bf16 (for reference; bench_bert.c does not time it).
With --onnx PATH the encoder is exported instead, as a sequence classifier
(mask as a constant, head over the mean of the sequence: one input, for
`tilegraph compile`, which shows its memory plan and liveness).
"""
import argparse
import json
import math
import time

import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self, hidden, heads, inter, p):
        super().__init__()
        self.h, self.d = heads, hidden // heads
        self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
        self.o = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.i = nn.Linear(hidden, inter)
        self.out = nn.Linear(inter, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)
        self.drop = nn.Dropout(p)

    def heads(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.h, self.d).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        b, s, hid = x.shape
        q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d) + mask
        probs = self.drop(torch.softmax(scores, dim=-1))
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(b, s, hid)
        x = self.ln1(x + self.drop(self.o(ctx)))
        return self.ln2(x + self.drop(self.out(nn.functional.gelu(self.i(x)))))


class Encoder(nn.Module):
    def __init__(self, layers, hidden, heads, inter, classes, p):
        super().__init__()
        self.layers = nn.ModuleList(Layer(hidden, heads, inter, p) for _ in range(layers))
        self.head = nn.Linear(hidden, classes)

    def forward(self, x, mask):
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(x)


class Classifier(nn.Module):
    """The encoder as a one-input classifier for `tilegraph compile` and
    `tilegraph train` (which take images or feature vectors to logits): the
    input is [batch, seq * hidden], the mask is a buffer, the head reads the
    mean over the sequence."""

    def __init__(self, encoder, mask):
        super().__init__()
        self.encoder = encoder
        self.register_buffer("mask", mask)

    def forward(self, x):
        x = x.view(x.shape[0], self.mask.shape[-1], -1)
        for layer in self.encoder.layers:
            x = layer(x, self.mask)
        return self.encoder.head(x.mean(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--inter", type=int, default=3072)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--classes", type=int, default=16)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--onnx", metavar="PATH",
                    help="export the model (inputs x and mask) to PATH and exit, no timing")
    ap.add_argument("--opset", type=int, default=14,
                    help="with --onnx: below 17 LayerNorm is exported decomposed")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Encoder(a.layers, a.hidden, a.heads, a.inter, a.classes, a.dropout).train()
    x = torch.randn(a.batch, a.seq, a.hidden)
    # the last eighth of each sequence is padding
    mask = torch.zeros(a.batch, 1, 1, a.seq)
    mask[..., a.seq - a.seq // 8:] = -10000.0
    y = torch.randint(0, a.classes, (a.batch * a.seq,))
    if a.onnx:
        torch.onnx.export(Classifier(model, mask).eval(), (x.reshape(a.batch, -1),), a.onnx,
                          input_names=["x"],
                          output_names=["logits"], opset_version=a.opset)
        return
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = loss_fn(model(x, mask).reshape(-1, a.classes).float(), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(a.steps):
        step()
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"system": "pytorch " + torch.__version__.split("+")[0],
                      "samples_per_s": a.steps * a.batch / dt,
                      "cpu_samples_per_s": a.steps * a.batch / dc}))


if __name__ == "__main__":
    main()
