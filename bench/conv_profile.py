#!/opt/tilegraph/venv/bin/python
"""A convolution network's inference op by op against onnxruntime's, grouped by class.

Interpreter: the venv's (/opt/tilegraph/venv/bin/python: onnxruntime,
numpy); the tilegraph package is this checkout's python/ (the library:
build/libtilegraph.so, or TILEGRAPH_LIBRARY).

Both runtimes run the same ONNX file (one float input, NCHW) on the same
input, each in its own process, one after the other. tilegraph's side:
its execution profile (ops.total_ns) for every op, where one session
profiles the warm-up run alone and another the warm-up and --runs runs,
the difference over --runs being the mean steady time per run (the
warm-up fills the kept weights); and, on one thread, each oneDNN
primitive's own timing (ONEDNN_VERBOSE) in every run, whose fastest is
the "fastest" column. onnxruntime's side: its own profile
(SessionOptions.enable_profiling), each node's kernel_time over the runs
after the warm-up, mean and fastest. On the shared machine a run is often
cut by another process's time slice (4 ms and more), so each node's
fastest run is the figure to compare, the mean says how much the load
took. Nodes are classed by what they compute (the 7x7 stem, 1x1 and 3x3
at stride 1 and 2, pools, the classifier); a convolution onnxruntime
fused with its ReLU or residual add is one node there, as it is one op
here. One JSON line with each class's ms per run on both sides and the
convolutions' GFLOP (onnxruntime's shapes); --table prints it as a
markdown table, --nodes also every convolution's fastest run on both
sides, in the order each runtime ran them (onnxruntime may run a block's
downsample before its last convolution where tilegraph runs it after).

    /opt/tilegraph/venv/bin/python bench/conv_profile.py --model build/bench-onnx/resnet50_224.onnx --batch 8 --table --nodes
"""
import argparse
import glob
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ort_infer import cpu_isa, cpu_model  # noqa: E402

CHILD = r'''
import os, sys
import numpy as np
runtime, model, batch, threads, runs, out = sys.argv[1:7]
batch, threads, runs = int(batch), int(threads), int(runs)
import onnx
inp = onnx.load(model, load_external_data=False).graph.input[0]
dims = [batch] + [d.dim_value for d in inp.type.tensor_type.shape.dim[1:]]
feeds = {inp.name: np.random.default_rng(0).standard_normal(dims, dtype=np.float32)}
if runtime == "tilegraph":
    sys.path.insert(0, sys.argv[7])
    from tilegraph.onnx_session import OnnxSession
    s = OnnxSession(model, batch=batch, threads=threads, options={
        "autoReport.outputExecutionProfile": "true", "autoReport.directory": out,
        "autoReport.executionProfileProgramRunCount": str(runs)})
    for i in range(runs):
        print("=== run", i, flush=True)
        s.run(feeds)
    del s
else:
    import onnxruntime as ort
    o = ort.SessionOptions()
    o.intra_op_num_threads, o.inter_op_num_threads = threads, 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    o.enable_profiling, o.profile_file_prefix = True, os.path.join(out, "ort")
    sess = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
    for _ in range(runs):
        sess.run(None, feeds)
    sess.end_profiling()
'''


def child(runtime, a, runs, out, verbose=False):
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    if verbose:
        env["ONEDNN_VERBOSE"] = env["DNNL_VERBOSE"] = "1"
    r = subprocess.run([sys.executable, "-c", CHILD, runtime, a.model, str(a.batch), str(a.threads),
                        str(runs), out, os.path.join(os.path.dirname(HERE), "python")],
                       env=env, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"conv_profile: the {runtime} run failed:\n{r.stderr[-2000:]}")
    return r.stdout


def conv_class(kernel, stride):
    if kernel >= 7:
        return "conv 7x7 (stem)"
    return f"conv {kernel}x{kernel} stride {stride}"


def tilegraph_ops(directory):
    """[(type, total_ns, kernel)] of the forward ops in program order."""
    db = sqlite3.connect(os.path.join(directory, "inference", "profile.sqlite"))
    return list(db.execute("SELECT type, total_ns, COALESCE(kernel, '') FROM ops "
                           "WHERE phase = 'forward' ORDER BY id"))


def onnx_convs(model):
    """(kernel side, stride) of each Conv node in the file's order, which is
    the order of tilegraph's conv2d ops (the importer keeps it)."""
    import onnx
    m = onnx.load(model, load_external_data=False)
    init = {i.name: list(i.dims) for i in m.graph.initializer}
    convs = []
    for n in m.graph.node:
        if n.op_type == "Conv":
            at = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
            convs.append((init[n.input[1]][2], (at.get("strides") or [1])[0]))
    return convs


def primitive_runs(stdout):
    """oneDNN's own timing of each primitive it executed (ONEDNN_VERBOSE):
    per run, [(kind, implementation, problem, ms)] in execution order."""
    runs = []
    for line in stdout.splitlines():
        if line.startswith("=== run"):
            runs.append([])
        elif line.startswith(("onednn_verbose,exec,", "dnnl_verbose,exec,")) and runs:
            f = line.split(",")
            runs[-1].append((f[3], f[4], f[-2], float(f[-1])))
    return runs


def problem_class(problem):
    """A convolution's class from oneDNN's problem string (mb8_ic64oc64_ih56oh56kh3sh1...)."""
    kh = int(problem.split("kh")[1].split("s")[0])
    sh = int(problem.split("sh")[1].split("d")[0])
    return conv_class(kh, sh)


def tilegraph_classes(a, tmp):
    """Per class: [ops, mean ms per run (profile), fastest ms (oneDNN's timing)]."""
    one, many = os.path.join(tmp, "tg1"), os.path.join(tmp, "tgn")
    child("tilegraph", a, 1, one)
    runs = primitive_runs(child("tilegraph", a, a.runs + 1, many, verbose=a.threads == 1))
    first, all_runs = tilegraph_ops(one), tilegraph_ops(many)
    convs = iter(onnx_convs(a.model))
    classes, kernels = {}, {}
    for (typ, ns, kernel), (_, ns1, _) in zip(all_runs, first):
        if typ == "conv2d":
            cls = conv_class(*next(convs))
            kernels.setdefault(cls, set()).add(kernel.split(",")[0])
        else:
            cls = {"maxpool2d": "maxpool", "avgpool2d": "global average pool",
                   "linear": "classifier (Gemm)"}.get(typ, typ)
        e = classes.setdefault(cls, [0, 0.0, 0.0])
        e[0] += 1
        e[1] += (ns - ns1) / a.runs / 1e6
    # one thread: each primitive's fastest run (position k in every run is
    # the same node); several threads run parts at once: means only
    steady, nodes = runs[1:], []
    if steady and all(len(r) == len(steady[0]) for r in steady):
        for k, (kind, impl, problem, _) in enumerate(steady[0]):
            if kind == "convolution":
                fastest = min(r[k][3] for r in steady)
                classes[problem_class(problem)][2] += fastest
                nodes.append((problem, impl, fastest))
    return classes, kernels, nodes


def onnxruntime_classes(a, tmp):
    out = os.path.join(tmp, "ort")
    os.makedirs(out)
    child("onnxruntime", a, a.runs + 1, out)
    events = json.load(open(glob.glob(os.path.join(out, "ort*.json"))[0]))
    per = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per.setdefault(e["name"], []).append(e)
    classes, nodes = {}, []
    for name, runs in per.items():
        ev = runs[0]["args"]
        steady = [r["dur"] / 1e3 for r in runs[1:]] or [runs[0]["dur"] / 1e3]
        op, gflop = ev["op_name"], 0.0
        if op in ("Conv", "FusedConv") and len(ev["input_type_shape"]) >= 2:
            x = list(ev["input_type_shape"][0].values())[0]
            w = list(ev["input_type_shape"][1].values())[0]
            y = list(ev["output_type_shape"][0].values())[0]
            cls = conv_class(w[2], int(round(x[2] / y[2])))
            gflop = 2.0 * y[0] * y[2] * y[3] * w[0] * w[1] * w[2] * w[3] / 1e9
            nodes.append((f"{w[1]}->{w[0]} {w[2]}x{w[3]} at {x[2]}", min(steady)))
        else:
            cls = {"MaxPool": "maxpool", "GlobalAveragePool": "global average pool",
                   "Gemm": "classifier (Gemm)"}.get(op, op)
        e = classes.setdefault(cls, [0, 0.0, 0.0, 0.0])
        e[0] += 1
        e[1] += sum(steady) / len(steady)
        e[2] += min(steady)
        e[3] += gflop
    return classes, nodes


def table(line):
    rows = ["| class | nodes (ours / theirs) | GFLOP | tilegraph ms (mean / fastest) | GFLOP/s | onnxruntime ms (mean / fastest) | GFLOP/s | ours / theirs (fastest) |",
            "| --- | ---: | ---: | --- | ---: | --- | ---: | ---: |"]
    for cls, c in line["classes"].items():
        t, o = c.get("tilegraph"), c.get("onnxruntime")
        tms = (t["ms_mean"] or 0.0) if t else 0.0
        tfast = t.get("ms_fastest", tms) if t else 0.0
        oms = o["ms_mean"] if o else 0.0
        ofast = o["ms_fastest"] if o else 0.0
        if abs(tms) < 0.01 and oms < 0.01:
            continue  # fused away on both sides (ReLU, the residual Add, Flatten)
        if t and t.get("warm_up_noise"):
            rows.append(f"| {cls} | {t['nodes']} / {o['nodes'] if o else 0} | | n/a (warm-up noise: more --runs) | | "
                        f"{oms:.2f} / {ofast:.2f} | | |")
            continue
        gflop = o["gflop"] if o else 0.0
        rate = lambda ms: f"{gflop / ms * 1e3:.1f}" if gflop and ms > 0 else ""  # noqa: E731
        rows.append(f"| {cls} | {t['nodes'] if t else 0} / {o['nodes'] if o else 0} | {gflop:.2f} | {tms:.2f} / {tfast:.2f} | {rate(tfast)} | "
                    f"{oms:.2f} / {ofast:.2f} | {rate(ofast)} | "
                    f"{tfast / ofast if ofast else float('nan'):.2f} |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="an ONNX file with one float NCHW input")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3,
                    help="profiled runs after the warm-up (a class whose warm-up varied by more than "
                         "these runs take is reported as warm-up noise: give more)")
    ap.add_argument("--table", action="store_true", help="also print a markdown table")
    ap.add_argument("--nodes", action="store_true",
                    help="and one row per convolution (one thread: each one's fastest run)")
    a = ap.parse_args()
    if not os.path.isfile(a.model):
        sys.exit(f"conv_profile: no model at {a.model} (bench/ort_infer.py exports them into build/bench-onnx)")
    if a.runs < 1:
        sys.exit("conv_profile: --runs must be at least 1")
    with tempfile.TemporaryDirectory(prefix="conv_profile") as tmp:
        tg, kernels, tg_nodes = tilegraph_classes(a, tmp)
        ort, ort_nodes = onnxruntime_classes(a, tmp)
    classes = {}
    for cls in sorted(set(tg) | set(ort)):
        c = classes[cls] = {}
        if cls in tg:
            c["tilegraph"] = {"nodes": tg[cls][0], "ms_mean": round(tg[cls][1], 3)}
            if tg[cls][1] < 0:
                # the two sessions' warm-up runs (weights packed, pages first
                # touched) differed by more than --runs steady runs take
                c["tilegraph"].update(ms_mean=None, warm_up_noise=True)
            if tg[cls][2]:
                c["tilegraph"]["ms_fastest"] = round(tg[cls][2], 3)
            if cls in kernels:
                c["tilegraph"]["kernels"] = sorted(kernels[cls])
        if cls in ort:
            c["onnxruntime"] = {"nodes": ort[cls][0], "ms_mean": round(ort[cls][1], 3),
                                "ms_fastest": round(ort[cls][2], 3), "gflop": round(ort[cls][3], 3)}
    line = {"bench": "conv_profile", "model": os.path.basename(a.model), "batch": a.batch,
            "threads": a.threads, "runs": a.runs, "cpu": cpu_model(), "isa": cpu_isa(),
            "load_average": os.getloadavg()[0], "classes": classes,
            "tilegraph_ms_mean": round(sum(v[1] for v in tg.values()), 2),
            "onnxruntime_ms_mean": round(sum(v[1] for v in ort.values()), 2),
            "onnxruntime_ms_fastest": round(sum(v[2] for v in ort.values()), 2)}
    print(json.dumps(line))
    if a.table:
        print(table(line))
    if a.nodes and len(tg_nodes) == len(ort_nodes):
        print("| convolution | our kernel | ours, fastest ms | onnxruntime's | ours / theirs |")
        print("| --- | --- | ---: | ---: | ---: |")
        for (problem, impl, ms), (shape, oms) in zip(tg_nodes, ort_nodes):
            print(f"| {shape} ({problem.split('_')[0]}) | {impl} | {ms:.2f} | {oms:.2f} | {ms / oms:.2f} |")


if __name__ == "__main__":
    main()
