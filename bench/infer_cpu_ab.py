#!/opt/tilegraph/venv/bin/python
"""Two or more builds of libtilegraph.so on one ONNX model's inference: CPU time per run.

Interpreter: the venv's (/opt/tilegraph/venv/bin/python, numpy and the
package's dependencies); the tilegraph package is this checkout's python/.

On the shared machine wall time spreads by 30% and more between turns; the
CPU time of the process per run (time.process_time) is what the load
disturbs least (the caches it shares still count, so alternate). The text
models' int64 token ids and attention mask are fed as bench/ort_infer.py
feeds them. `onnxruntime` in place of a library times onnxruntime's CPU
provider (f32) on the same file and inputs (at more than one thread its
spinning pool threads count in its CPU time). Each library runs in its own process, one after another, `--rounds` times
(A, B, ..., A, B, ...); each process builds the session, runs once, then
`--runs` timed runs. One JSON line per library: [min-max] over the rounds
of each round's median (and minimum), each round's median in order (to
compare the libraries round by round), with the CPU model and ISA.

    /opt/tilegraph/venv/bin/python bench/infer_cpu_ab.py \\
        --model build/bench-onnx/resnet50_224.onnx OLD/libtilegraph.so build/libtilegraph.so
    /opt/tilegraph/venv/bin/python bench/infer_cpu_ab.py --batch 8 \
        --model build/bench-onnx/minilm_l6_s128.onnx build/libtilegraph.so onnxruntime

`--onnxruntime` is the same as naming `onnxruntime` last. A library
followed by `,VAR=VALUE` (one or more) runs with those in its environment,
so one build compares with itself under a setting:

    /opt/tilegraph/venv/bin/python bench/infer_cpu_ab.py --batch 32 --model \
        build/bench-onnx/resnet50_224.onnx build/libtilegraph.so \
        build/libtilegraph.so,TG_CONV_WINOGRAD=0 onnxruntime
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ORT = "onnxruntime"  # in place of a library: onnxruntime's CPU provider, f32, on the same file
sys.path.insert(0, HERE)
from ort_infer import cpu_isa, cpu_model  # noqa: E402

CHILD = r'''
import json, os, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
model, batch, runs, threads, precision = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
if os.environ.get("TILEGRAPH_LIBRARY") == "onnxruntime":  # the yardstick, f32 on its CPU provider
    import onnxruntime as ort
    o = ort.SessionOptions()
    o.intra_op_num_threads, o.inter_op_num_threads = threads, 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
    class S:
        run = staticmethod(lambda f: sess.run(None, f))
    s = S()
else:
    from tilegraph.onnx_session import OnnxSession
    s = OnnxSession(model, batch=batch, threads=threads, precision=precision)
import onnx
g = np.random.default_rng(0)
feeds = {}
for inp in onnx.load(model, load_external_data=False).graph.input:
    dims = [batch] + [d.dim_value for d in inp.type.tensor_type.shape.dim[1:]]
    kind = inp.type.tensor_type.elem_type
    if kind == onnx.TensorProto.FLOAT:
        feeds[inp.name] = g.standard_normal(dims, dtype=np.float32)
    elif "mask" in inp.name:  # an attention mask: the last eighth padded, as bench/ort_infer.py's
        m = np.ones(dims, np.bool_ if kind == onnx.TensorProto.BOOL else np.int64)
        m[..., dims[-1] - dims[-1] // 8:] = 0
        feeds[inp.name] = m
    else:  # token ids
        feeds[inp.name] = g.integers(100, 1000, dims).astype(np.int64)
s.run(feeds)
wall, cpu = [], []
for _ in range(runs):
    t, p = time.perf_counter(), time.process_time()
    s.run(feeds)
    wall.append(time.perf_counter() - t)
    cpu.append(time.process_time() - p)
wall.sort(); cpu.sort()
print(json.dumps({"cpu_ms": [cpu[0] * 1e3, cpu[len(cpu) // 2] * 1e3],
                  "wall_ms": [wall[0] * 1e3, wall[len(wall) // 2] * 1e3]}))
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("libraries", nargs="+",
                    help="paths of libtilegraph.so builds to compare ('onnxruntime': onnxruntime's "
                         "CPU provider in f32 on the same file, --threads intra-op threads)")
    ap.add_argument("--model", required=True,
                    help="an ONNX file: float inputs get normal values, int64 ones token ids "
                         "(an input named *mask*: ones, the last eighth 0)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--precision", default="32.32")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--onnxruntime", action="store_true", help="onnxruntime too, one more turn a round")
    a = ap.parse_args()
    if a.onnxruntime and ORT not in a.libraries:
        a.libraries.append(ORT)
    for lib in a.libraries:
        path, *settings = lib.split(",")
        if any("=" not in v for v in settings):
            sys.exit(f"infer_cpu_ab: {lib}: what follows the library's path must be VAR=VALUE settings")
        if path != ORT and not os.path.isfile(path):
            sys.exit(f"infer_cpu_ab: no library at {lib}: give the path of a built libtilegraph.so")
    if not os.path.isfile(a.model):
        sys.exit(f"infer_cpu_ab: no model at {a.model} (bench/ort_infer.py exports them into build/bench-onnx)")
    python = os.path.join(os.path.dirname(HERE), "python")
    got = {lib: [] for lib in a.libraries}
    for _ in range(a.rounds):
        for lib in a.libraries:
            path, *settings = lib.split(",")
            env = dict(os.environ, TILEGRAPH_LIBRARY=path, OMP_NUM_THREADS=str(a.threads))
            env.update(v.split("=", 1) for v in settings)
            out = subprocess.run([sys.executable, "-c", CHILD, python, a.model, str(a.batch), str(a.runs),
                                  str(a.threads), a.precision],
                                 env=env, capture_output=True, text=True)
            if out.returncode:
                sys.exit(f"infer_cpu_ab: {lib} failed:\n{out.stderr[-2000:]}")
            got[lib].append(json.loads(out.stdout.strip().splitlines()[-1]))
    span = lambda v: [round(min(v), 2), round(max(v), 2)]  # noqa: E731
    for lib, turns in got.items():
        print(json.dumps({"bench": "infer_cpu_ab", "library": lib, "model": os.path.basename(a.model),
                          "batch": a.batch, "threads": a.threads,
                          "precision": "32.32" if lib == ORT else a.precision,
                          "runs": a.runs, "rounds": a.rounds, "cpu": cpu_model(), "isa": cpu_isa(),
                          "load_average": os.getloadavg()[0],
                          "cpu_ms_median": span([t["cpu_ms"][1] for t in turns]),
                          # each round's, in order: rounds alternate the libraries, so
                          # one round's medians side by side share the load of that moment
                          "cpu_ms_median_by_round": [round(t["cpu_ms"][1], 2) for t in turns],
                          "cpu_ms_min": span([t["cpu_ms"][0] for t in turns]),
                          "wall_ms_median": span([t["wall_ms"][1] for t in turns]),
                          # the latency at several threads, where CPU time counts
                          # the work and not how it overlaps
                          "wall_ms_median_by_round": [round(t["wall_ms"][1], 2) for t in turns]}))


if __name__ == "__main__":
    main()
