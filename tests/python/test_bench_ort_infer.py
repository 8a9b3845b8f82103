"""tests/python/test_bench_ort_infer.py - bench/ort_infer.py --quick runs
every variant (tilegraph f32 and bf16, onnxruntime f32) of every row.

TG_TEST_LABELS: index

Not a timing test (the machine may be loaded): it checks that the quick run
prints one JSON line per row with each variant's throughput and latency
ranges, the CPU model and ISA, and tilegraph's f32 outputs within 1e-4 of
onnxruntime's on the same file (bf16 within 5e-2); and that an unknown row
is refused by name. Runs with the venv Python.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import tg_pytest

tg_pytest.skip_without_index("onnxruntime", "transformers")

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "ort_infer.py")


def run(*args):
    return subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True, timeout=280)


class BenchOrtInferTest(unittest.TestCase):
    def test_quick_rows(self):
        with tempfile.TemporaryDirectory() as d:
            r = run("--quick", "--cache", d)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        self.assertEqual([j["model"] for j in rows],
                         ["resnet18_64", "bert_tiny", "bert_tiny_bool", "mobilenet_v3_large_64"])
        inputs = {j["model"]: j["inputs"] for j in rows}
        self.assertEqual(inputs["bert_tiny"], {"input_ids": "int64", "attention_mask": "int64"})
        self.assertEqual(inputs["bert_tiny_bool"], {"input_ids": "int64", "attention_mask": "bool"})
        for j in rows:
            with self.subTest(j["model"]):
                self.assertEqual(j["bench"], "ort_infer")
                self.assertTrue(j["cpu"] and j["isa"])
                for v in ("tilegraph_f32", "tilegraph_bf16", "onnxruntime_f32"):
                    lo, mid, hi = j[v]["samples_per_s"]
                    self.assertTrue(0 < lo <= mid <= hi, j[v])
                    self.assertTrue(0 < j[v]["p50_ms"][1] <= j[v]["p99_ms"][1], j[v])
                self.assertLessEqual(j["max_rel_diff_f32"], 1e-4)
                self.assertLessEqual(j["max_rel_diff_bf16"], 5e-2)

    def test_unknown_row_is_refused(self):
        r = run("--quick", "--rows", "resnet5O")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("resnet5O", r.stderr)


if __name__ == "__main__":
    unittest.main()
