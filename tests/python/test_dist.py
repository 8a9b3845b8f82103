"""tests/python/test_dist.py - a PopTorch script under mpirun (PopDist's role).

The same script, started as 2 instances with replicationFactor 4, must end
with the weights of one process with replicationFactor 4: the DataLoader
gives each instance its replicas' samples of every host batch (shuffled, in
one process's order) and the library sums the gradients over the instances
in replica order, even when the instances' torch seeds differ. Also: an exception in one instance ends the job, non-zero,
within seconds; instances that run different numbers of steps (issue 46,
row 2) end the job with an error naming both instances and where each
waits, instead of waiting for each other for ever; an instance that detaches
its model a step short, and lives on, ends the job at once, named, instead of
when it ends. A test set evaluated after the training (poptorch.evaluate,
from a distributed DataLoader and from a list the instances take turns at)
gives one process's figures.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from tg_pytest import poptorch  # noqa: F401 (skips without torch)

SCRIPT = r'''
import sys, time
sys.path.insert(0, sys.argv[2])
import torch
from tg_pytest import WithLoss, net, poptorch

def main(out, fail, reseed, unequal, detach, crossed):
    torch.manual_seed(3)
    x = torch.randn(192, 1, 8, 8)
    y = torch.randint(0, 5, (192,))
    ds = torch.utils.data.TensorDataset(x, y)
    opts = poptorch.Options().deviceIterations(2).replicationFactor(4)
    opts.Training.gradientAccumulation(2)
    loader = poptorch.DataLoader(opts, ds, batch_size=3, shuffle=True)
    m = net()
    tm = poptorch.trainingModel(WithLoss(m), opts, poptorch.optim.SGD(m.parameters(), lr=0.05))
    if crossed:  # two models, made in the same order, then run in crossed orders
        m2 = net()
        tm2 = poptorch.trainingModel(WithLoss(m2), opts,
                                     poptorch.optim.SGD(m2.parameters(), lr=0.05))
        xb, yb = next(iter(loader))
        tm(xb, yb)
        tm2(xb, yb)
        (tm if poptorch.dist.instance() == 0 else tm2)(xb, yb)
        return
    if reseed:  # instances whose torch seeds differ still shuffle as instance 0
        torch.manual_seed(100 + poptorch.dist.instance())
    for step, (xb, yb) in enumerate(loader):
        if fail and poptorch.dist.instance() == 1 and step == 1:
            raise RuntimeError("instance 1 fails on purpose")
        if detach and poptorch.dist.instance() == 1 and step == 2:
            # one step short: instance 1 puts its model away and goes on with
            # something else for longer than the test waits
            tm.detachFromDevice()
            time.sleep(600)
        tm(xb, yb)
    if unequal and poptorch.dist.instance() == 1:  # one step more than instance 0
        tm(xb, yb)
    tm.copyWeightsToHost()
    sd = m.state_dict()
    if not (fail or detach or unequal):
        sd["eval"] = evaluate(m)
    if poptorch.dist.instance() == 0:
        torch.save(sd, out)

def evaluate(m):
    """The trained model on a test set, scored by tg_evaluate: from a
    poptorch.DataLoader (each instance its share) and from a list every
    instance sees (the instances take turns); the job's figures are one
    process's."""
    g = torch.Generator().manual_seed(9)
    tx, ty = torch.randn(96, 1, 8, 8, generator=g), torch.randint(0, 5, (96,), generator=g)
    eo = poptorch.Options().replicationFactor(4)
    test = poptorch.DataLoader(eo, torch.utils.data.TensorDataset(tx, ty), batch_size=3)
    shared = poptorch.evaluate(poptorch.inferenceModel(m, eo), test)
    turns = poptorch.evaluate(poptorch.inferenceModel(m, eo),
                              [(tx[i:i + 12], ty[i:i + 12]) for i in range(0, 96, 12)])
    assert shared.scored == turns.scored == 96, (shared, turns)
    return torch.tensor([shared.accuracy, turns.accuracy], dtype=torch.float64)

main(sys.argv[1], *(flag in sys.argv[3:] for flag in ("fail", "reseed", "unequal", "detach",
                                                      "crossed")))
if "stop_at_exit" in sys.argv[3:] and poptorch.dist.instance() == 1:
    # lost while ending: registered after the package's tg_dist_finalize,
    # so run before it (atexit is last in, first out)
    import atexit, os, signal
    atexit.register(lambda: os.kill(os.getpid(), signal.SIGSTOP))
'''


class DistTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not shutil.which("mpirun"):
            print("skipped: no mpirun (openmpi-bin)")
            sys.exit(77)
        cls.dir = tempfile.mkdtemp(prefix="tg_pydist_")
        cls.script = os.path.join(cls.dir, "train.py")
        with open(cls.script, "w") as f:
            f.write(SCRIPT)
        cls.env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                       OMPI_MCA_rmaps_base_oversubscribe="1")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def run_script(self, out, mpi, *extra, env=None, timeout=240):
        here = os.path.dirname(os.path.abspath(__file__))
        cmd = [sys.executable, self.script, out, here, *extra]
        if mpi:
            cmd = ["mpirun", "-np", "2", "--bind-to", "none"] + cmd
        return subprocess.run(cmd, env=dict(self.env, **(env or {})), capture_output=True,
                              text=True, timeout=timeout)

    def test_two_instances_train_as_one_process(self):
        self.check_as_one_process("one.pt", "two.pt")

    def test_instances_with_other_torch_seeds_shuffle_as_instance_0(self):
        self.check_as_one_process("one_reseed.pt", "two_reseed.pt", "reseed")

    def check_as_one_process(self, one, two, *extra):
        import torch
        one, two = os.path.join(self.dir, one), os.path.join(self.dir, two)
        r = self.run_script(one, False, *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_script(two, True, *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        a, b = torch.load(one), torch.load(two)
        moved = False
        for name in a:
            self.assertTrue(torch.equal(a[name], b[name]), name)
        from tg_pytest import net
        for name, t in net().state_dict().items():  # the training changed something
            moved = moved or not torch.equal(t, a[name])
        self.assertTrue(moved)

    def test_a_failing_instance_ends_the_job(self):
        start = time.time()
        r = self.run_script(os.path.join(self.dir, "fail.pt"), True, "fail")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("instance 1 fails on purpose", r.stderr)
        self.assertIn("instance 1 of 2 failed", r.stderr)
        self.assertLess(time.time() - start, 60)

    def test_instances_running_other_step_counts_fail_not_hang(self):
        # the subprocess timeout is the hang's bound: it used to spin for ever
        r = self.run_script(os.path.join(self.dir, "unequal.pt"), True, "unequal")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("instance 0 has ended after", r.stderr)
        self.assertIn("waits in the gradient exchange of its training run", r.stderr)
        self.assertIn("same number of times", r.stderr)

    def test_an_instance_lost_while_the_job_ends_fails_not_hangs(self):
        # instance 1 stops (as a lost host falls silent) after its last step,
        # before it leaves the job: instance 0, leaving (the watch's end,
        # MPI_Finalize), waited for it for ever; the heartbeat now ends it.
        # The subprocess timeout is the hang's bound.
        start = time.time()
        r = self.run_script(os.path.join(self.dir, "ending.pt"), True, "stop_at_exit",
                            env={"TILEGRAPH_DIST_TIMEOUT": "2"}, timeout=120)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("instance 1 on host", r.stderr)
        self.assertIn("while every instance was leaving the job", r.stderr)
        self.assertLess(time.time() - start, 100)

    def test_instances_in_two_models_exchanges_fail_not_hang(self):
        # both at their third training run, one in model 1's exchange, the
        # other in model 2's: the same count, but they never meet (these
        # counted as one wait and spun for ever; the timeout is the bound)
        r = self.run_script(os.path.join(self.dir, "crossed.pt"), True, "crossed", timeout=120)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("of training model 2)", r.stderr)
        self.assertIn("of training model 1)", r.stderr)
        self.assertIn("they can never meet", r.stderr)

    def test_an_instance_that_detaches_early_ends_the_job_while_it_lives(self):
        # instance 1 detaches one step short and sleeps 600 s: instance 0,
        # waiting in the exchange of a step instance 1 will never run, used
        # to wait until instance 1 ended (the subprocess timeout is the bound)
        r = self.run_script(os.path.join(self.dir, "detach.pt"), True, "detach", timeout=120)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("instance 1 closed its training model 1", r.stderr)
        self.assertIn("after 2 training runs of it", r.stderr)
        self.assertIn("this instance (0) waits in the gradient exchange of its training run 3",
                      r.stderr)
        self.assertIn("different numbers of steps", r.stderr)


if __name__ == "__main__":
    unittest.main()
