#!/usr/bin/python3
"""scripts/check_matrix.py - `tilegraph check` on every zoo model under every
precision and every loss scaling (issue 46: "check passes every zoo model
under every precision and loss-scaling setting"), one row per run with its
time and peak memory, and the table's verdict as the exit code (0: every run
within tolerance).

Interpreter: Debian's /usr/bin/python3 (the standard library only).

    scripts/check_matrix.py --tilegraph build/tilegraph            # small sizes
    scripts/check_matrix.py --tilegraph build/tilegraph --size full --models bert-large \\
        --precisions 32.32 --scalings none

Sizes: `small` (the suite's: ResNets at 3x16x16, the language models at 8
tokens, BERT-large at 8 tokens, batch 2 or 1) or `full` (each model's own
input and `check`'s default batch of 4; BERT-large at 128 tokens holds about
10 GB). Runs go one at a time: the machine is shared, and a run's time is
its own.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

PRECISIONS = ["32.32", "16.32", "16.16", "bf16.32", "bf16.bf16", "32.16", "32.bf16"]
SCALINGS = ["none", "static", "dynamic"]

# model -> (small-size arguments, full-size arguments)
MODELS = {
    "fashion-basic": ("--batch-size 2", ""),
    "mnist-pipeline": ("--batch-size 2", ""),
    "resnet18": ("--input 3x16x16 --stem imagenet --batch-size 2", "--stem imagenet"),
    "resnet34": ("--input 3x16x16 --stem imagenet --batch-size 2", "--stem imagenet"),
    "resnet50": ("--input 3x16x16 --stem imagenet --batch-size 2", "--stem imagenet"),
    "resnet101": ("--input 3x16x16 --stem imagenet --batch-size 2", "--stem imagenet"),
    "gpt-tiny": ("--input 1x1x8 --batch-size 2", ""),
    "bert-tiny": ("--input 1x1x8 --batch-size 2", ""),
    "bert-large": ("--input 1x1x8 --batch-size 1", ""),
}


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tilegraph", default="build/tilegraph", help="the command (build/tilegraph)")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated (default: all)")
    ap.add_argument("--precisions", default=",".join(PRECISIONS))
    ap.add_argument("--scalings", default=",".join(SCALINGS))
    ap.add_argument("--size", choices=["small", "full"], default="small")
    ap.add_argument("--extra", default="", help="more arguments for every run")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    return ap.parse_args()


def run_one(a, model, precision, scaling):
    """(verdict, seconds, peak MiB of the run, first line of the failure)."""
    small, full = MODELS[model]
    args = [a.tilegraph, "check", "--model", model] + (small if a.size == "small" else full).split()
    args += ["--precision", precision, "--loss-scaling", scaling] + a.extra.split()
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.monotonic()
        p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        deadline = t0 + a.timeout
        while True:  # os.wait4: this run's own peak resident memory
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                os.wait4(p.pid, 0)
                return "TIMEOUT", time.monotonic() - t0, float("nan"), f"over {a.timeout:.0f} s"
            time.sleep(0.05)
        seconds = time.monotonic() - t0
        out.seek(0)
        text = out.read()
    code = os.waitstatus_to_exitcode(status)
    peak = usage.ru_maxrss / 1024
    if code == 0 and "ok: every tensor within tolerance" in text:
        return "ok", seconds, peak, ""
    lines = [l for l in text.splitlines() if l.startswith("FAILED") or
             (l.startswith("tilegraph check:") and "one training step" not in l)]
    tail = text.strip().splitlines()[-1:] or [f"exit code {code}"]
    return "FAILED", seconds, peak, (lines or tail)[0]


def main():
    a = parse()
    if not os.access(a.tilegraph, os.X_OK):
        sys.exit(f"check_matrix: {a.tilegraph} is not an executable (--tilegraph build/tilegraph)")
    models = a.models.split(",")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        sys.exit(f"check_matrix: unknown model {unknown[0]} (one of {', '.join(MODELS)})")
    print(f"{'model':<15} {'precision':<10} {'scaling':<8} {'verdict':<8} {'seconds':>8} "
          f"{'peak MiB':>9}  note", flush=True)
    failed = total = 0
    t0 = time.monotonic()
    for model in models:
        for precision in a.precisions.split(","):
            for scaling in a.scalings.split(","):
                verdict, seconds, peak, why = run_one(a, model, precision, scaling)
                total += 1
                failed += verdict != "ok"
                mib = "-" if peak != peak else f"{peak:.0f}"  # NaN: timed out
                print(f"{model:<15} {precision:<10} {scaling:<8} {verdict:<8} {seconds:8.1f} "
                      f"{mib:>9}  {why}", flush=True)
    print(f"{total - failed} of {total} runs within tolerance, {failed} not, in "
          f"{time.monotonic() - t0:.0f} s ({a.size} sizes)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
