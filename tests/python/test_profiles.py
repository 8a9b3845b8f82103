"""tests/python/test_profiles.py - profiles from Python through POPLAR_ENGINE_OPTIONS.

As with the command, the library reads POPLAR_ENGINE_OPTIONS (and
TILEGRAPH_ENGINE_OPTIONS) when the session is made: a PopTorch script run
with autoReport.all writes the training profile, which `tilegraph analyse`
reads, and the compile progress shows each stage. The script runs in a
child process so the variable is its own.
"""
import os
import subprocess
import sys
import tempfile
import unittest

import tg_pytest  # noqa: F401  (skips without torch)

SCRIPT = r"""
import torch, torch.nn as nn
import tilegraph as poptorch
class M(nn.Module):
    def __init__(s):
        super().__init__(); s.fc = nn.Linear(8, 3); s.loss = nn.CrossEntropyLoss()
    def forward(s, x, y):
        o = s.fc(x); return o, s.loss(o, y)
m = M()
tm = poptorch.trainingModel(m, None, poptorch.optim.SGD(m.parameters(), lr=0.1))
for _ in range(3):
    tm(torch.rand(4, 8), torch.tensor([0, 1, 2, 0]))
tm.detachFromDevice()
"""


class ProfilesTest(unittest.TestCase):
    def test_poplar_engine_options_write_a_profile_analyse_reads(self):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true","autoReport.directory":"%s"}' % d)
            env.pop("TILEGRAPH_ENGINE_OPTIONS", None)
            r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            # the compile progress, one line per stage when stderr is no terminal
            for stage in ("25% exporting to ONNX", "50% importing", "75% compiling", "100% done in"):
                self.assertIn(stage, r.stderr)
            path = os.path.join(d, "training", "profile.sqlite")
            self.assertTrue(os.path.isfile(path), os.listdir(d))
            cli = os.environ.get("TILEGRAPH_CLI")
            if cli:
                a = subprocess.run([cli, "analyse", d, "summary"], capture_output=True, text=True, timeout=60)
                self.assertEqual(a.returncode, 0, a.stderr)
                self.assertIn("training", a.stdout)


if __name__ == "__main__":
    unittest.main()
