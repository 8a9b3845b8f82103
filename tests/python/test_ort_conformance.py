"""tests/python/test_ort_conformance.py - ONNX's backend test cases on
tilegraph and on onnxruntime, side by side (issue 42 part 1).

TG_TEST_LABELS: index onnx

tilegraph's column comes from the C conformance test itself
(build/tests/onnx_test_onnx_conformance --results FILE: each case's outcome
and reason); onnxruntime's from running the same case folders of Debian's
libonnx-testdata here, on its CPU provider, with the same comparison (numpy
allclose, rtol 1e-3, atol 1e-7, as onnx/backend/test/loader sets them) and
the same rule for cases whose expected values are random draws (skipped on
both). A case onnxruntime refuses when the session is created (no kernel, an
opset or type it does not take) counts as skipped, with its reason; one it
runs and gets wrong, or fails while running, counts as failed and is listed
by name in docs/onnx.md, not hidden.

Prints the two-column table (passed / failed / skipped per runtime, per
folder) and checks it against docs/onnx.md's "conformance-ort" section;
`--update-docs` rewrites that section, `--verbose` lists every case where
the two runtimes disagree. Fails when a tilegraph case fails, when the two
runtimes were not given the same cases, or when the docs are out of date.
Runs with the venv Python (/opt/tilegraph/venv/bin/python); skips (77)
without onnxruntime or the test data.
"""
import os
import re
import subprocess
import sys
import tempfile
import warnings

import tg_pytest

ort = tg_pytest.skip_without_index("onnxruntime")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DOCS = os.path.join(ROOT, "docs", "onnx.md")
DATA = "/usr/share/libonnx-testdata/data"
FOLDERS = ["node", "pytorch-converted", "pytorch-operator", "simple"]
RTOL, ATOL = 1e-3, 1e-7
SECTION = "conformance-ort"
RANDOM_OPS = {"Bernoulli", "RandomUniformLike", "RandomUniform", "RandomNormalLike", "RandomNormal",
              "Multinomial"}


def conformance_binary():
    path = os.environ.get("TILEGRAPH_CONFORMANCE",
                          os.path.join(ROOT, "build", "tests", "onnx_test_onnx_conformance"))
    if not os.path.exists(path):
        print(f"skipped: no {path} (build the tests, or set TILEGRAPH_CONFORMANCE)")
        sys.exit(77)
    return path


def tilegraph_results():
    """{case: (outcome, reason)} from the C test's --results file."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "results.tsv")
        run = subprocess.run([conformance_binary(), "--results", out], capture_output=True, text=True)
        if not os.path.exists(out):
            raise SystemExit(f"the C conformance test wrote no results (exit {run.returncode}):\n"
                             f"{run.stdout[-2000:]}{run.stderr[-2000:]}")
        with open(out, encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    return {case: (outcome, reason) for case, outcome, reason in rows}


def read_value(path, value_info):
    """A test_data_set's .pb as the model declares it: a tensor, a sequence or an optional."""
    with open(path, "rb") as f:
        data = f.read()
    kind = value_info.type.WhichOneof("value")
    if kind == "sequence_type":
        p = onnx.SequenceProto()
        p.ParseFromString(data)
        return numpy_helper.to_list(p)
    if kind == "optional_type":
        p = onnx.OptionalProto()
        p.ParseFromString(data)
        return numpy_helper.to_optional(p)
    p = onnx.TensorProto()
    p.ParseFromString(data)
    return numpy_helper.to_array(p)


def close(got, want):
    """numpy.allclose per ONNX's backend test (NaN equal NaN), element-wise for sequences."""
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(close, got, want))
    if want is None:
        return got is None
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False
    if want.dtype.kind in "OSU" or want.dtype == bool:
        return bool(np.array_equal(got, want))
    return bool(np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=RTOL, atol=ATOL,
                            equal_nan=True))


def random_case(model, name):
    if "training_dropout" in name:
        return "training-mode Dropout (random masks)"
    if any(n.op_type in RANDOM_OPS for n in model.graph.node):
        return "random outputs (drawn by another generator than numpy's)"
    return None


def script_cannot_feed(model):
    """A case whose data this script cannot hand onnxruntime's Python API."""
    values = list(model.graph.input) + list(model.graph.output)
    if any(v.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16 for v in values):
        return "bfloat16 data (numpy has no bfloat16 for onnxruntime's Python API; not run)"
    return None


def short(message):
    """An onnxruntime message made one reason for all the cases it stands for."""
    m = str(message).replace("\n", " ")
    m = re.sub(r"\[ONNXRuntimeError\] : \d+ : ", "", m)
    m = re.sub(r"/onnxruntime_src/\S+ ", "", m)
    m = re.sub(r"(Node|node) \(?'?[^)' ]*'?\)?", "node", m)
    m = re.sub(r"'[^']*'", "'...'", m)
    return m[:160]


def run_ort_case(case_dir, name):
    """(outcome, reason) of one case on onnxruntime."""
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    why = random_case(model, name) or script_cannot_feed(model)
    if why:
        return "skip", why
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 4
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - refused at load: a reason, as tilegraph's skips
        return "skip", "onnxruntime refuses the model: " + short(e)
    inits = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    sets = sorted(d for d in os.listdir(case_dir) if d.startswith("test_data_set_"))
    if not sets:
        return "fail", "no test data"
    for s in sets:
        folder = os.path.join(case_dir, s)
        feeds = {}
        for k, vi in enumerate(inputs):
            path = os.path.join(folder, f"input_{k}.pb")
            if os.path.exists(path):
                feeds[vi.name] = read_value(path, vi)
        try:
            got = sess.run(None, feeds)
        except Exception as e:  # noqa: BLE001 - a model it took and could not run
            return "fail", "run: " + short(e)
        for k, vi in enumerate(model.graph.output):
            path = os.path.join(folder, f"output_{k}.pb")
            if os.path.exists(path) and not close(got[k], read_value(path, vi)):
                return "fail", f"output {k} ('{vi.name}') differs beyond rtol {RTOL}, atol {ATOL}"
    return "pass", ""


def ort_results():
    out = {}
    for folder in FOLDERS:
        base = os.path.join(DATA, folder)
        for name in sorted(os.listdir(base)):
            out[f"{folder}/{name}"] = run_ort_case(os.path.join(base, name), name)
    return out


def counts(results, folder=None):
    c = {"pass": 0, "fail": 0, "skip": 0}
    for case, (outcome, _) in results.items():
        if folder is None or case.startswith(folder + "/"):
            c[outcome] += 1
    return c


def markdown(tg, rt):
    lines = [f"onnxruntime {ort.__version__} (CPU provider) beside tilegraph on the same "
             f"{len(tg)} cases:", "",
             "| cases | tilegraph pass | fail | skip | onnxruntime pass | fail | skip |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for folder in FOLDERS + [None]:
        a, b = counts(tg, folder), counts(rt, folder)
        label = folder or "**all**"
        lines.append(f"| {label} | {a['pass']} | {a['fail']} | {a['skip']} | {b['pass']} | "
                     f"{b['fail']} | {b['skip']} |")
    both = sum(1 for c in tg if tg[c][0] == "pass" and rt[c][0] == "pass")
    only_tg = sorted(c for c in tg if tg[c][0] == "pass" and rt[c][0] != "pass")
    only_rt = sorted(c for c in tg if rt[c][0] == "pass" and tg[c][0] != "pass")
    lines += ["", f"Both pass {both}; tilegraph alone {len(only_tg)}; onnxruntime alone "
                  f"{len(only_rt)}.", ""]
    failed = sorted(c for c in rt if rt[c][0] == "fail")
    if failed:
        lines += ["The cases onnxruntime fails (it runs them and gets another answer, or fails "
                  "while running):", "", "| case | onnxruntime | tilegraph |", "| --- | --- | --- |"]
        lines += [f"| {c} | {rt[c][1].replace('|', '/')} | {tg[c][0]} |" for c in failed]
        lines.append("")
    reasons = {}
    for c in rt:
        if rt[c][0] == "skip":
            reasons[rt[c][1]] = reasons.get(rt[c][1], 0) + 1
    lines += ["| cases | why onnxruntime skips them |", "| ---: | --- |"]
    lines += [f"| {n} | {r.replace('|', '/')} |" for r, n in sorted(reasons.items(), key=lambda x: (-x[1], x[0]))]
    return "\n".join(lines) + "\n"


def docs_section(text, update):
    """Whether docs/onnx.md's section is `text`; with update, rewrite it (atomically)."""
    with open(DOCS, encoding="utf-8") as f:
        doc = f.read()
    begin, end = f"<!-- {SECTION}:begin -->\n", f"<!-- {SECTION}:end -->"
    b, e = doc.find(begin), doc.find(end)
    if b < 0 or e < b:
        print(f"docs/onnx.md has no section '{begin.strip()}' ... '{end}'")
        return False
    current = doc[b + len(begin):e]
    if current == text:
        return True
    if not update:
        print(f"docs/onnx.md's {SECTION} section is out of date: run "
              f"/opt/tilegraph/venv/bin/python tests/python/test_ort_conformance.py --update-docs")
        return False
    tmp = DOCS + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(doc[:b + len(begin)] + text + doc[e:])
    os.replace(tmp, DOCS)
    print(f"rewrote docs/onnx.md's {SECTION} section")
    return True


def main(argv):
    if not os.path.isdir(os.path.join(DATA, "node")):
        print("skipped: ONNX test data not installed (Debian package libonnx-testdata)")
        return 77
    warnings.simplefilter("ignore")
    tg, rt = tilegraph_results(), ort_results()
    problems = []
    if set(tg) != set(rt):
        problems.append(f"the runtimes saw different cases: tilegraph only {sorted(set(tg) - set(rt))[:5]}, "
                        f"onnxruntime only {sorted(set(rt) - set(tg))[:5]}")
    tg_failed = sorted(c for c in tg if tg[c][0] == "fail")
    if tg_failed:
        problems.append(f"tilegraph fails {len(tg_failed)} cases: {tg_failed[:10]}")
    text = markdown(tg, {c: rt.get(c, ("skip", "not run")) for c in tg})
    print(text)
    if "--verbose" in argv:
        for c in sorted(tg):
            if tg[c][0] != rt.get(c, ("?",))[0]:
                print(f"{c}: tilegraph {tg[c][0]} {tg[c][1]}; onnxruntime {rt[c][0]} {rt[c][1]}")
    if not docs_section(text, "--update-docs" in argv):
        problems.append("docs/onnx.md's onnxruntime conformance table is out of date")
    for p in problems:
        print("FAILED:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
