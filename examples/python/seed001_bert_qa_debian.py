#!/usr/bin/python3
"""examples/python/seed001_bert_qa_debian.py - seed 001's pipelined BERT question answering with Debian's packages only.

The variant of examples/python/seed001_bert_qa.py (the seed's own script,
with Hugging Face transformers and pretrained weights from Python's package
index) for machines that have Debian's packages only.

The hands-on day's model-parallel example: a BERT question-answering model
whose encoder layers 0, 2 and 4 begin blocks on devices 1, 2 and 3
(`poptorch.BeginBlock(model.bert.encoder.layer[i], ipu_id=...)`; everything
before layer 0 stays on device 0), pipelined over four devices with gradient
accumulation and device iterations, AdamW, and `import tilegraph as poptorch`.

`transformers` is not in Debian, so here BertForQuestionAnswering is
written out below in plain torch with Hugging Face's module tree and names
(`bert.embeddings.word_embeddings`, `bert.encoder.layer.4.attention.self.query`,
`qa_outputs`, ...) and its forward: the additive attention mask made from the
int64 mask, post-LayerNorm residual blocks, GELU, the start and end logits
split from one Linear, positions clamped to the sequence length and two cross
entropies averaged. A `state_dict` of a real BertForQuestionAnswering of the
same configuration loads into it.

The data is a synthetic span task (no download): `[CLS] question [SEP]
context [SEP] padding`, token types 0 then 1, the mask 0 on padding, and the
answer's span in the context starts at the word that equals the question's
first word and ends at the next END marker after it; other context words are
random. Finding the start needs attention from the context to the question.
Scaled down from the seed to run on this machine (6 layers, hidden 64,
sequence 32): run from a checkout after building,

    PYTHONPATH=python /usr/bin/python3 examples/python/seed001_bert_qa_debian.py

and `--compare-torch` trains the same module, from the same weights on the
same batches, with PyTorch on this CPU and prints both samples/s.
"""
import argparse
import copy
import math
import sys
import time

import torch
import torch.nn as nn

import tilegraph as poptorch


# ---- BertForQuestionAnswering in plain torch (Hugging Face's module tree) ------------

class BertConfig:
    def __init__(self, vocab_size=64, hidden_size=64, num_hidden_layers=6, num_attention_heads=4,
                 intermediate_size=256, max_position_embeddings=64, type_vocab_size=2,
                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, layer_norm_eps=1e-12,
                 initializer_range=0.02):
        self.__dict__.update(locals())
        del self.__dict__["self"]


class BertEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=0)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.register_buffer("position_ids", torch.arange(config.max_position_embeddings).expand((1, -1)),
                             persistent=False)

    def forward(self, input_ids, token_type_ids):
        seq_length = input_ids.size(1)
        position_ids = self.position_ids[:, :seq_length]
        embeddings = (self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
                      + self.position_embeddings(position_ids))
        return self.dropout(self.LayerNorm(embeddings))


class BertSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + attention_mask
        attention_probs = self.dropout(nn.functional.softmax(attention_scores, dim=-1))
        context_layer = torch.matmul(attention_probs, value_layer).permute(0, 2, 1, 3).contiguous()
        return context_layer.view(context_layer.size()[:-2] + (self.all_head_size,))


class BertSelfOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(self, hidden_states, attention_mask):
        return self.output(self.self(hidden_states, attention_mask), hidden_states)


class BertIntermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = nn.GELU()

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class BertOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, hidden_states, attention_mask):
        attention_output = self.attention(hidden_states, attention_mask)
        return self.output(self.intermediate(attention_output), attention_output)


class BertEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(config) for _ in range(config.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask):
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, attention_mask)
        return hidden_states


class BertModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)

    def forward(self, input_ids, token_type_ids, attention_mask):
        # [B, S] of 1 (attend) / 0 (padding) -> [B, 1, 1, S] of 0 / dtype's min, added to the scores
        extended = attention_mask[:, None, None, :].to(torch.float32)
        extended = (1.0 - extended) * torch.finfo(torch.float32).min
        return self.encoder(self.embeddings(input_ids, token_type_ids), extended)


class BertForQuestionAnswering(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.bert = BertModel(config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.apply(lambda m: self._init_weights(m, config.initializer_range))

    @staticmethod
    def _init_weights(module, std):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                module.bias.data.zero_()
            if isinstance(module, nn.Embedding) and module.padding_idx is not None:
                module.weight.data[module.padding_idx].zero_()

    def forward(self, input_ids, token_type_ids, attention_mask, start_positions=None, end_positions=None):
        sequence_output = self.bert(input_ids, token_type_ids, attention_mask)
        logits = self.qa_outputs(sequence_output)
        start_logits, end_logits = logits.split(1, dim=-1)
        start_logits = start_logits.squeeze(-1).contiguous()
        end_logits = end_logits.squeeze(-1).contiguous()
        if start_positions is None:
            return start_logits, end_logits
        # positions outside the sequence are ignored, as Hugging Face's head does
        ignored_index = start_logits.size(1)
        start_positions = start_positions.clamp(0, ignored_index)
        end_positions = end_positions.clamp(0, ignored_index)
        loss_fct = nn.CrossEntropyLoss(ignore_index=ignored_index)
        total_loss = (loss_fct(start_logits, start_positions) + loss_fct(end_logits, end_positions)) / 2
        return total_loss, start_logits, end_logits


# ---- the synthetic span task -------------------------------------------------------------

PAD, CLS, SEP, END = 0, 1, 2, 3
SPANS = 4  # marked spans per context; the marker words are FIRST_MARKER ..
FIRST_MARKER = 4
ANSWER = FIRST_MARKER + SPANS  # --task marker: the word that marks the answer's start
FIRST_WORD = ANSWER + 1


class SpanTask(torch.utils.data.Dataset):
    """`[CLS] q words [SEP] context [SEP] PAD...` where the context holds
    four marked spans (a marker word, up to two words, END) among random
    words, in random order and places, and the question's first word q is
    one of the four markers. The answer is the span q marks:

    - task "lookup": it starts at the context word equal to q, which needs
      attention between the context and the question (every context has all
      four markers), and ends at that span's END;
    - task "marker" (the default): the asked span's marker is the ANSWER
      word instead, so its start is marked, and it ends at the first END
      after it (attention within the context: another span's END may come
      before).

    Sample i is fixed by i; contexts have random lengths, so the mask and
    the padding vary."""

    def __init__(self, n, seq_len, vocab_size, seed=0, question_len=3, task="marker"):
        self.n, self.seq_len, self.vocab, self.seed, self.qlen = n, seq_len, vocab_size, seed, question_len
        self.task = task
        self.ctx_start = question_len + 2
        self.ctx_max = seq_len - self.ctx_start - 1
        if self.ctx_max < SPANS * 2 or vocab_size <= FIRST_WORD or task not in ("lookup", "marker"):
            raise ValueError(f"SpanTask: sequence length {seq_len} leaves {self.ctx_max} context words, "
                             f"fewer than {SPANS * 2}, vocabulary {vocab_size} has no ordinary words, or "
                             f"task {task!r} is not 'lookup' or 'marker'")

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
        words = self.vocab - FIRST_WORD

        def randwords(k):
            return (FIRST_WORD + torch.randint(0, words, (k,), generator=g)).tolist()

        ask = int(torch.randint(0, SPANS, (1,), generator=g))
        ctx_len = int(torch.randint(max(SPANS * 2, self.ctx_max * 3 // 4), self.ctx_max + 1, (1,), generator=g))
        # the spans' lengths (marker + 0-2 words + END), then the filler shared out between them
        inner = torch.randint(0, 3, (SPANS,), generator=g).tolist()
        while sum(inner) + 2 * SPANS > ctx_len:
            inner[inner.index(max(inner))] -= 1
        filler = ctx_len - sum(inner) - 2 * SPANS
        cuts = sorted(torch.randint(0, filler + 1, (SPANS,), generator=g).tolist())
        gaps = [b - a for a, b in zip([0] + cuts, cuts + [filler])]
        order = torch.randperm(SPANS, generator=g).tolist()
        context, start = [], 0
        for k, gap in zip(order, gaps):
            context += randwords(gap)
            if k == ask:
                start = len(context)
            marker = ANSWER if k == ask and self.task == "marker" else FIRST_MARKER + k
            context += [marker] + randwords(inner[k]) + [END]
            if k == ask:
                end = len(context) - 1
        context += randwords(gaps[-1])
        ids = torch.full((self.seq_len,), PAD, dtype=torch.int64)
        ids[0] = CLS
        ids[1 : 1 + self.qlen] = torch.tensor([FIRST_MARKER + ask] + randwords(self.qlen - 1))
        ids[1 + self.qlen] = SEP
        c0 = self.ctx_start
        ids[c0 : c0 + ctx_len] = torch.tensor(context)
        ids[c0 + ctx_len] = SEP
        types = torch.zeros(self.seq_len, dtype=torch.int64)
        types[c0 : c0 + ctx_len + 1] = 1
        mask = (ids != PAD).to(torch.int64)
        return ids, types, mask, torch.tensor(c0 + start), torch.tensor(c0 + end)


# ---- the seed's script ---------------------------------------------------------------------

def parse():
    p = argparse.ArgumentParser(description="Seed 001's pipelined BertForQuestionAnswering on tilegraph.")
    p.add_argument("--layers", type=int, default=6, help="encoder layers (default 6; at least 5 for the "
                   "seed's blocks at layers 0, 2, 4)")
    p.add_argument("--hidden", type=int, default=64, help="hidden size (default 64)")
    p.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    p.add_argument("--intermediate", type=int, default=0, help="intermediate size (default 4 x hidden)")
    p.add_argument("--seq-len", type=int, default=32, help="sequence length (default 32)")
    p.add_argument("--vocab", type=int, default=64, help="vocabulary size (default 64)")
    p.add_argument("--dropout", type=float, default=0.1, help="hidden and attention dropout (default 0.1)")
    p.add_argument("--batch-size", type=int, default=8, help="micro-batch (default 8)")
    p.add_argument("--gradient-accumulation", type=int, default=4,
                   help="micro-batches per weight update (default 4; at least the 4 pipeline stages)")
    p.add_argument("--device-iterations", type=int, default=4,
                   help="weight updates per host call (default 4; the seed's 100, scaled down)")
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate (default 1e-3)")
    p.add_argument("--train-samples", type=int, default=8192, help="training samples (default 8192)")
    p.add_argument("--test-samples", type=int, default=512, help="held-out samples (default 512)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=0, help="stop after this many host steps (0: all)")
    p.add_argument("--strategy", default="pipelined", choices=["pipelined", "sharded", "single"],
                   help="the seed's 4-device pipeline (default), sharded, or one device without blocks")
    p.add_argument("--compare-torch", action="store_true",
                   help="also train the same module with PyTorch on this CPU and print both samples/s")
    p.add_argument("--task", default="marker", choices=["marker", "lookup"],
                   help="the answer's start marked by a word (default), or the context word equal to the "
                        "question's first word (needs more samples; see SpanTask)")
    p.add_argument("--target", default="cpu", choices=["cpu", "mk2"], help="tilegraph target (default cpu)")
    p.add_argument("--compile-only", action="store_true",
                   help="compile the training program for the target and report whether it fits, then stop "
                        "(with --target mk2: the seed's BERT on the simulated tile processor)")
    p.add_argument("--torch-threads", type=int, default=0,
                   help="PyTorch's threads for --compare-torch (default: PyTorch's own default)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    for name in ("layers", "hidden", "heads", "seq_len", "vocab", "batch_size", "gradient_accumulation",
                 "device_iterations", "train_samples", "test_samples", "epochs"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(a, name)}")
    if a.strategy != "single" and a.layers < 5:
        p.error(f"--layers must be at least 5 for blocks at layers 0, 2 and 4, got {a.layers}")
    if a.strategy == "pipelined" and a.gradient_accumulation < 4:
        p.error("--gradient-accumulation must be at least 4 (the pipeline's stages) with --strategy pipelined")
    if a.hidden % a.heads:
        p.error(f"--hidden {a.hidden} must be a multiple of --heads {a.heads}")
    if a.vocab < FIRST_WORD + 8 or a.seq_len < 14:
        p.error(f"--vocab must be at least {FIRST_WORD + 8} and --seq-len at least 14")
    return a


def build(args):
    torch.manual_seed(args.seed)
    config = BertConfig(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                        num_attention_heads=args.heads, intermediate_size=args.intermediate or 4 * args.hidden,
                        max_position_embeddings=args.seq_len, hidden_dropout_prob=args.dropout,
                        attention_probs_dropout_prob=args.dropout)
    return BertForQuestionAnswering(config)


def place(model, strategy):
    """The seed's blocks: everything before layer 0 on device 0, layers 0-1 on
    device 1, 2-3 on device 2, 4 onwards on device 3."""
    if strategy == "single":
        return
    model.bert.encoder.layer[0] = poptorch.BeginBlock(model.bert.encoder.layer[0], ipu_id=1)
    model.bert.encoder.layer[2] = poptorch.BeginBlock(model.bert.encoder.layer[2], ipu_id=2)
    model.bert.encoder.layer[4] = poptorch.BeginBlock(model.bert.encoder.layer[4], ipu_id=3)


def options(args):
    opts = poptorch.Options()
    opts.deviceIterations(args.device_iterations)
    opts.Training.gradientAccumulation(args.gradient_accumulation)
    opts.randomSeed(args.seed)
    opts.set("target", args.target)
    if args.strategy == "sharded":
        opts.setExecutionStrategy(poptorch.ShardedExecution())
    return opts


def evaluate(model, args, samples):
    """Start, end and exact-span accuracy (%) of an inferenceModel on held-out samples."""
    opts = poptorch.Options().deviceIterations(args.device_iterations)
    loader = poptorch.DataLoader(opts, samples, batch_size=args.batch_size, shuffle=False)
    inference_model = poptorch.inferenceModel(model, opts)
    start_ok = end_ok = both_ok = n = 0
    for ids, types, mask, start, end in loader:
        start_logits, end_logits = inference_model(ids, types, mask)
        s, e = start_logits.argmax(1) == start, end_logits.argmax(1) == end
        start_ok += int(s.sum())
        end_ok += int(e.sum())
        both_ok += int((s & e).sum())
        n += ids.shape[0]
    inference_model.detachFromDevice()
    return 100.0 * start_ok / n, 100.0 * end_ok / n, 100.0 * both_ok / n, n


class TorchTrainer:
    """The same module trained by PyTorch on this CPU: each host batch cut
    into the same micro-batches, accumulated the same way, AdamW with the
    same settings, one update per gradient-accumulation group."""

    def __init__(self, model, args):
        self.model, self.args = model, args
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, eps=1e-8)
        model.train()

    def step(self, ids, types, mask, start, end):
        a = self.args
        micro = a.batch_size
        for it in range(a.device_iterations):
            self.optimizer.zero_grad()
            for k in range(a.gradient_accumulation):
                j = (it * a.gradient_accumulation + k) * micro
                sl = slice(j, j + micro)
                loss = self.model(ids[sl], types[sl], mask[sl], start[sl], end[sl])[0]
                (loss / a.gradient_accumulation).backward()
            self.optimizer.step()
        return loss


def compile_only(training_model, args, batch):
    """Compile for --target and say whether the plan fits (seed003_main.py's
    --compile-only): the memory per device, or the library's reason."""
    try:
        training_model.compile(*batch)
    except poptorch.TilegraphError as e:
        print(f"does not fit on {args.target}: {e}")
        return 1
    from tilegraph._lib import lib
    mib = lib.tg_session_arena_bytes(training_model._handle) / 2**20
    print(f"fits on {args.target}: {mib:.1f} MiB planned over {lib.tg_session_devices(training_model._handle)} "
          "device(s)")
    return 0


def main():
    args = parse()
    print(args)
    model = build(args)
    reference = TorchTrainer(copy.deepcopy(model), args) if args.compare_torch else None
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    place(model, args.strategy)

    opts = options(args)
    train_data = SpanTask(args.train_samples, args.seq_len, args.vocab, seed=args.seed + 1, task=args.task)
    test_data = SpanTask(args.test_samples, args.seq_len, args.vocab, seed=args.seed + 1000, task=args.task)
    loader = poptorch.DataLoader(opts, train_data, batch_size=args.batch_size, shuffle=True, drop_last=True)
    if len(loader) == 0:
        sys.exit(f"seed001_bert_qa_debian: {args.train_samples} samples make no host batch of "
                 f"{loader.combinedBatchSize}; raise --train-samples or lower the batch settings")

    optimizer = poptorch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, eps=1e-8)
    training_model = poptorch.trainingModel(model, opts, optimizer=optimizer)

    if args.compile_only:
        return compile_only(training_model, args, next(iter(loader)))

    # With --compare-torch each host batch trains both, one after the other,
    # so that both see the same load on a shared machine.
    steps, timed, tg_seconds, torch_seconds = 0, 0, 0.0, 0.0
    for epoch in range(args.epochs):
        for ids, types, mask, start, end in loader:
            t0 = time.perf_counter()
            loss, start_logits, _ = training_model(ids, types, mask, start, end)
            t1 = time.perf_counter()
            if reference is not None:
                torch_loss = reference.step(ids, types, mask, start, end)
            t2 = time.perf_counter()
            if steps > 0:  # the first call compiles
                tg_seconds += t1 - t0
                torch_seconds += t2 - t1
                timed += ids.shape[0]
            steps += 1
            # the output is the last micro-batch's (OutputMode.Final, training's default)
            acc = 100.0 * float((start_logits.argmax(1) == start[-start_logits.shape[0]:]).float().mean())
            line = f"epoch {epoch + 1} step {steps}: loss {float(loss.mean()):.4f} start accuracy {acc:.1f}%"
            if reference is not None:
                line += f" (pytorch: loss {float(torch_loss):.4f})"
            print(line, flush=True)
            if args.steps and steps >= args.steps:
                break
        if args.steps and steps >= args.steps:
            break
    tg_rate = timed / tg_seconds if tg_seconds else float("nan")
    print(f"tilegraph: {tg_rate:.1f} samples/s ({args.strategy}, {timed} samples after the compiling step)")
    if reference is not None:
        torch_rate = timed / torch_seconds if torch_seconds else float("nan")
        print(f"pytorch: {torch_rate:.1f} samples/s ({torch.get_num_threads()} threads, the same samples)")
        print(f"tilegraph / pytorch: {tg_rate / torch_rate:.2f}x")
    training_model.copyWeightsToHost()
    training_model.detachFromDevice()

    start_acc, end_acc, span_acc, n = evaluate(model, args, test_data)
    print(f"held-out: start accuracy {start_acc:.2f}% end accuracy {end_acc:.2f}% "
          f"exact span {span_acc:.2f}% ({n} samples)")
    if reference is not None:
        reference.model.eval()
        with torch.no_grad():
            ids, types, mask, start, end = (torch.stack(t) for t in zip(*(test_data[i] for i in range(n))))
            s, e = reference.model(ids, types, mask)
        print(f"held-out (pytorch-trained): start accuracy {100.0 * float((s.argmax(1) == start).float().mean()):.2f}% "
              f"end accuracy {100.0 * float((e.argmax(1) == end).float().mean()):.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
