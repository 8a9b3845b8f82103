"""tests/python/test_seed003.py - examples/python/seed003_main.py runs at small size.

ResNet-18 (--tiny) for two host steps with the seed's flags (--precision
16.16, gradient accumulation, device iterations, 8-bit I/O, the async loader); the
ResNet-101 run is a documented command (docs/python.md), too slow for a test.
"""
import math
import os
import re
import subprocess
import sys
import unittest

import tg_pytest  # noqa: F401  (skips without torch)

MAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python",
                    "seed003_main.py")


def run(*args):
    return subprocess.run([sys.executable, MAIN, *args], capture_output=True, text=True, timeout=280)


class Seed003Test(unittest.TestCase):
    def test_tiny_half_run_with_the_seeds_flags(self):
        r = run("--tiny", "--batch-size", "2", "--precision", "16.16", "--gradient-accumulation", "2",
                "--device-iterations", "2", "--eight-bit-io", "--async-dataloader", "--synthetic",
                "64", "--steps", "2")
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        losses = [float(v) for v in re.findall(r"step \d+: loss (\S+)", r.stdout)]
        self.assertEqual(len(losses), 2, r.stdout)
        self.assertTrue(all(math.isfinite(v) and v > 0 for v in losses), losses)
        self.assertIn("precision='16.16'", r.stdout)
        self.assertIn("eight_bit_io=True", r.stdout)

    def test_mk2_memory_story_matches_the_command(self):
        """Seed 003's ResNet-101 on mk2 from Python: 32.32 does not fit, 16.16 fits
        with the memory `tilegraph compile` plans for the same model (the
        journey's first two steps, examples/journey/mk2.sh)."""
        base = ("--target", "mk2", "--gradient-accumulation", "3", "--batch-size", "64",
                "--synthetic", "256", "--compile-only")
        r = run(*base, "--precision", "32.32")
        self.assertEqual(r.returncode, 1, r.stderr[-2000:])
        self.assertIn("does not fit on mk2", r.stdout)
        self.assertIn("needs", r.stdout)
        r = run(*base, "--precision", "16.16")
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        mib = float(re.search(r"fits on mk2: ([0-9.]+) MiB planned over 2 device", r.stdout).group(1))
        cli = os.environ.get("TILEGRAPH_CLI")
        if not cli:
            return
        # AdamW at 0.001, as the script trains (compile's own default is train's SGD)
        c = subprocess.run([cli, "compile", "--optimizer", "adamw", "--lr", "0.001", "--target", "mk2", "--model", "resnet101", "--input", "3x32x32",
                            "--stem", "imagenet", "--split", "layer3.8", "--batch-size", "64",
                            "--precision", "16.16", "--loss-scaling", "static", "--loss-scale", "1000",
                            "--accum-type", "f16", "--first-moment-type", "f16",
                            "--gradient-accumulation", "3", "--json"], capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(c.returncode, 0, c.stderr)
        import json
        doc = json.loads(c.stdout)
        total = doc["arena_bytes"] / 2**20
        self.assertAlmostEqual(mib, total, delta=0.02 * total)

    def test_refusals_name_the_flag(self):
        r = run("--tiny", "--batch-size", "0")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--batch-size must be at least 1", r.stderr)


if __name__ == "__main__":
    unittest.main()
