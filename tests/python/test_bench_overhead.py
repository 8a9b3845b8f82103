"""tests/python/test_bench_overhead.py - bench/bench_python_overhead.py runs both sides.

Not a timing test (the machine may be loaded): it checks that one run trains
through the Python layer and through `tilegraph train` and prints both rates
in one JSON line, and that bad arguments are refused by name.
"""
import json
import os
import subprocess
import sys
import unittest

import tg_pytest  # noqa: F401  (skips without torch)

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                     "bench_python_overhead.py")


def run(*args):
    return subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True, timeout=240)


class BenchOverheadTest(unittest.TestCase):
    def test_one_json_line_with_both_sides(self):
        r = run("--steps", "2", "--width", "4", "--batch", "4", "--gradient-accumulation", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
        self.assertEqual(len(lines), 1, r.stdout)
        j = json.loads(lines[0])
        self.assertEqual(j["bench"], "python_overhead")
        self.assertEqual(j["gradient_accumulation"], 2)
        self.assertGreater(j["python_samples_per_s"], 0)
        self.assertGreater(j["cli_samples_per_s"], 0)
        expect = 100 * (j["cli_samples_per_s"] - j["python_samples_per_s"]) / j["cli_samples_per_s"]
        self.assertAlmostEqual(j["overhead_pct"], expect, delta=0.05)

    def test_bad_arguments_named(self):
        r = run("--steps", "0")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--steps must be at least 1", r.stderr)
        r = run("--tilegraph", "/nonexistent/tilegraph")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("/nonexistent/tilegraph: not an executable", r.stderr)


if __name__ == "__main__":
    unittest.main()
