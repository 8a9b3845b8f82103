"""tests/python/test_seed001_debian.py - examples/python/seed001_bert_qa_debian.py runs at small size.

The Debian-only variant of seed 001 (BERT written out in plain torch, no
transformers; tests/python/test_seed001.py runs the seed's own script with
transformers and the pretrained weights). Seed 001's BertForQuestionAnswering with BeginBlock at encoder layers 0, 2
and 4 on devices 1, 2 and 3, pipelined over four devices with gradient
accumulation and device iterations, int64 ids, token types and mask, AdamW:
5 layers, sequence 24, 2,048 samples of the synthetic span task (about 10 s
of training). The start of the answer must be found on at least 95% of
held-out samples; the span's end (which needs more training) is reported.
"""
import os
import re
import subprocess
import sys
import unittest

import tg_pytest  # noqa: F401  (skips without torch)

MAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python",
                    "seed001_bert_qa_debian.py")


def run(*args):
    return subprocess.run([sys.executable, MAIN, *args], capture_output=True, text=True, timeout=280)


class Seed001Test(unittest.TestCase):
    def test_pipelined_bert_qa_learns_the_start(self):
        r = run("--layers", "5", "--seq-len", "24", "--batch-size", "4", "--gradient-accumulation", "4",
                "--device-iterations", "4", "--train-samples", "2048", "--test-samples", "256")
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        losses = [float(v) for v in re.findall(r"step \d+: loss (\S+)", r.stdout)]
        self.assertEqual(len(losses), 2048 // 64, r.stdout[-2000:])
        self.assertLess(losses[-1], losses[0], losses)
        m = re.search(r"held-out: start accuracy ([0-9.]+)% end accuracy ([0-9.]+)%", r.stdout)
        self.assertIsNotNone(m, r.stdout[-2000:])
        print(r.stdout.strip().splitlines()[-1], flush=True)
        self.assertGreaterEqual(float(m.group(1)), 95.0, r.stdout[-2000:])

    def test_refusals_name_the_flag(self):
        r = run("--gradient-accumulation", "2")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--gradient-accumulation must be at least 4", r.stderr)
        r = run("--layers", "4")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--layers must be at least 5", r.stderr)


if __name__ == "__main__":
    unittest.main()
