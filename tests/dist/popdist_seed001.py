"""tests/dist/popdist_seed001.py - seed 001's pipelined BERT question
answering (examples/python/seed001_bert_qa_debian.py: its model, blocks at
encoder layers 0, 2 and 4 on devices 1-3, AdamW, its span task) at a small
size, with PopDist's options when `tilegraph run` started it and
replicationFactor 4 otherwise: 5 layers, hidden 32, sequence 16, dropout
0.1, micro-batch 2, gradient accumulation 4, 3 host steps of 32 samples.
Instance 0 (or the one process) saves the weights to OUT; the one process
also saves the weights it starts from to OUT.start.
Interpreter: Debian's /usr/bin/python3 (torch 1.13).
usage: popdist_seed001.py OUT EXAMPLES_DIR
"""
import sys
sys.path.insert(0, sys.argv[2])
import torch
import seed001_bert_qa_debian as seed
import popdist
import popdist.poptorch
poptorch = seed.poptorch

OUT = sys.argv[1]
sys.argv = [sys.argv[0], "--layers", "5", "--hidden", "32", "--heads", "2", "--seq-len", "16",
            "--batch-size", "2", "--gradient-accumulation", "4", "--device-iterations", "1",
            "--train-samples", "96", "--steps", "3"]

args = seed.parse()
model = seed.build(args)
seed.place(model, args.strategy)
if popdist.isPopdistEnvSet():
    opts = popdist.poptorch.Options(ipus_per_replica=4)
else:
    opts = poptorch.Options().replicationFactor(4)
opts.deviceIterations(args.device_iterations)
opts.Training.gradientAccumulation(args.gradient_accumulation)
opts.randomSeed(args.seed)
data = seed.SpanTask(args.train_samples, args.seq_len, args.vocab, seed=args.seed + 1, task=args.task)
loader = poptorch.DataLoader(opts, data, batch_size=args.batch_size, shuffle=True, drop_last=True)
optimizer = poptorch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, eps=1e-8)
if not popdist.isPopdistEnvSet():  # the weights the training starts from
    torch.save({k: v.clone() for k, v in model.state_dict().items()}, OUT + ".start")
tm = poptorch.trainingModel(model, opts, optimizer=optimizer)
steps = 0
for ids, types, mask, start, end in loader:
    loss = tm(ids, types, mask, start, end)[0]
    steps += 1
    print(f"step {steps}: loss {float(loss.mean()):.6f}", flush=True)
tm.copyWeightsToHost()
if not popdist.isPopdistEnvSet() or popdist.getInstanceIndex() == 0:
    torch.save(model.state_dict(), OUT)
