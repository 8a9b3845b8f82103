"""tests/dist/popdist_tutorial.py - the seed-004 tutorial's model
(examples/python/seed004_pipelining.py: Network, its loss, AdamW) pipelined
over 4 devices, with PopDist's options when `tilegraph run` started it and
replicationFactor 4 otherwise; 128 Fashion-MNIST images, 8 host steps.
Instance 0 (or the one process) saves the weights to OUT; the one process
also saves the weights it starts from to OUT.start.
Interpreter: Debian's /usr/bin/python3 (torch 1.13).
usage: popdist_tutorial.py OUT EXAMPLES_DIR
"""
import sys
sys.path.insert(0, sys.argv[2])
import torch
import seed004_pipelining as tutorial
import popdist
import popdist.poptorch
poptorch = tutorial.poptorch

torch.manual_seed(0)
ds = torch.utils.data.Subset(tutorial.train_dataset, range(128))
if popdist.isPopdistEnvSet():
    opts = popdist.poptorch.Options(ipus_per_replica=4)
else:
    opts = poptorch.Options().replicationFactor(4)
opts.deviceIterations(2)
opts.Training.gradientAccumulation(4)
opts.setExecutionStrategy(poptorch.PipelinedExecution(*(poptorch.Stage(f"B{k + 1}").ipu(k)
                                                        for k in range(4))))
loader = poptorch.DataLoader(opts, ds, batch_size=2, shuffle=True)
model = tutorial.Network()
if not popdist.isPopdistEnvSet():  # the weights the training starts from
    torch.save({k: v.clone() for k, v in model.state_dict().items()}, sys.argv[1] + ".start")
tm = tutorial.get_training_model(opts, model)
for x, y in loader:
    tm(x, y)
tm.copyWeightsToHost()
if not popdist.isPopdistEnvSet() or popdist.getInstanceIndex() == 0:
    torch.save(model.state_dict(), sys.argv[1])
