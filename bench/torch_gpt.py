"""PyTorch reference for tilegraph's gpt-tiny (models/transformer.c), timed
by bench/bench_gpt.c in the same run: nanoGPT's decoder (pre-LN blocks, a
fused q/k/v projection, learned positions, exact GELU, an untied head
without bias), 4 layers, d 128, 4 heads, MLP 512, vocabulary 256, 64
tokens a sample, no dropout; Adam at 1e-3 on next-token cross-entropy.
Random token windows: the speed does not depend on the text.

Prints one JSON line: samples (windows) per second of wall and CPU time.
Usage: /usr/bin/python3 torch_gpt.py [--threads 1] [--batch 16] [--steps 20]
"""
import argparse
import json
import time

import torch
import torch.nn as nn

VOCAB, SEQ, D, HEADS, LAYERS, MLP = 256, 64, 128, 4, 4, 512


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.c_attn, self.c_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.c_fc, self.mlp_proj = nn.Linear(D, MLP), nn.Linear(MLP, D)
        self.register_buffer("mask", torch.triu(torch.full((SEQ, SEQ), -1e9), 1))

    def forward(self, x):
        n = x.shape[0]
        q, k, v = self.c_attn(self.ln_1(x)).split(D, dim=2)
        q, k, v = (t.view(n, SEQ, HEADS, D // HEADS).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(-1, -2) / (D // HEADS) ** 0.5 + self.mask, dim=-1)
        x = x + self.c_proj((att @ v).transpose(1, 2).reshape(n, SEQ, D))
        return x + self.mlp_proj(nn.functional.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, D), nn.Parameter(torch.randn(SEQ, D) * 0.02)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = GPT().train()
    ids = torch.randint(0, VOCAB, (a.batch, SEQ + 1))
    x, y = ids[:, :-1], ids[:, 1:].reshape(-1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x).reshape(-1, VOCAB), y)
        loss.backward()
        opt.step()

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
