"""tests/python/test_popdist.py - a PopTorch script written for PopDist
(`import popdist`, popdist.poptorch.Options()) started by `tilegraph run
--num-instances 2 --num-replicas 4 -- python3 train.py` ends with the
weights of one process with replicationFactor 4; each instance sees the
POPDIST_* values PopRun gives it; outside run, popdist says so by name.
Interpreter: Debian's /usr/bin/python3 (torch 1.13), as CTest runs it.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tg_pytest import poptorch  # noqa: F401 (skips without torch)

SCRIPT = r'''
import json, sys
sys.path.insert(0, sys.argv[2])
import torch
import popdist
import popdist.poptorch
from tg_pytest import WithLoss, net, poptorch

torch.manual_seed(3)
x = torch.randn(96, 1, 8, 8)
y = torch.randint(0, 5, (96,))
ds = torch.utils.data.TensorDataset(x, y)
if popdist.isPopdistEnvSet():
    opts = popdist.poptorch.Options(ipus_per_replica=1)
    seen = {f: getattr(popdist, f)() for f in ("getNumTotalReplicas", "getNumLocalReplicas",
            "getReplicaIndexOffset", "getNumInstances", "getInstanceIndex",
            "getLocalInstanceIndex", "getNumIpusPerReplica")}
    with open(f"{sys.argv[1]}.{popdist.getInstanceIndex()}.json", "w") as f:
        json.dump(seen, f)
else:
    opts = poptorch.Options().replicationFactor(4)
opts.deviceIterations(2)
opts.Training.gradientAccumulation(2)
loader = poptorch.DataLoader(opts, ds, batch_size=3, shuffle=True)
m = net()
tm = poptorch.trainingModel(WithLoss(m), opts, poptorch.optim.SGD(m.parameters(), lr=0.05))
for xb, yb in loader:
    tm(xb, yb)
tm.copyWeightsToHost()
if not popdist.isPopdistEnvSet() or popdist.getInstanceIndex() == 0:
    torch.save(m.state_dict(), sys.argv[1])
'''


class PopdistTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not shutil.which("mpirun") or not os.environ.get("TILEGRAPH_CLI"):
            print("skipped: no mpirun (openmpi-bin) or no TILEGRAPH_CLI")
            sys.exit(77)
        cls.dir = tempfile.mkdtemp(prefix="tg_popdist_")
        cls.script = os.path.join(cls.dir, "train.py")
        with open(cls.script, "w") as f:
            f.write(SCRIPT)
        cls.here = os.path.dirname(os.path.abspath(__file__))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_outside_run_popdist_names_the_call(self):
        import popdist
        env = {k: v for k, v in os.environ.items() if not k.startswith("POPDIST_")}
        r = subprocess.run([sys.executable, "-c", "import popdist, popdist.poptorch\n"
                            "assert not popdist.isPopdistEnvSet()\npopdist.getNumLocalReplicas()"],
                           env=env, capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("popdist.getNumLocalReplicas(): this script was not started by tilegraph "
                      "run", r.stderr)
        self.assertTrue(hasattr(popdist.poptorch, "Options"))

    def test_two_instances_under_run_train_as_one_process(self):
        import torch
        one, two = os.path.join(self.dir, "one.pt"), os.path.join(self.dir, "two.pt")
        r = subprocess.run([sys.executable, self.script, one, self.here], capture_output=True,
                           text=True, timeout=240)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([os.environ["TILEGRAPH_CLI"], "run", "--num-instances", "2",
                            "--num-replicas", "4", "--", sys.executable, self.script, two,
                            self.here], capture_output=True, text=True, timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        a, b = torch.load(one), torch.load(two)
        self.assertEqual(a.keys(), b.keys())
        for name in a:
            self.assertTrue(torch.equal(a[name], b[name]), name)
        from tg_pytest import net
        self.assertTrue(any(not torch.equal(t, a[k]) for k, t in net().state_dict().items()))
        for k in (0, 1):
            with open(f"{two}.{k}.json") as f:
                seen = json.load(f)
            self.assertEqual(seen, {"getNumTotalReplicas": 4, "getNumLocalReplicas": 2,
                                    "getReplicaIndexOffset": 2 * k, "getNumInstances": 2,
                                    "getInstanceIndex": k, "getLocalInstanceIndex": k,
                                    "getNumIpusPerReplica": 1})


if __name__ == "__main__":
    unittest.main()
