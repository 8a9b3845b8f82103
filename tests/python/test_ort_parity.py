"""tests/python/test_ort_parity.py - tilegraph's inference against
onnxruntime's on the same ONNX file and the same inputs (issue 42 part 1).

TG_TEST_LABELS: index

Every model the project keeps as ONNX: the fixtures (tests/onnx/fixtures,
with their saved inputs where they have them), examples/onnx/export.py's
exports (seed004, resnet18), the text models test_hf_models.py builds
(exported here in eval mode) and small torchvision models. tilegraph runs
the file through tilegraph.onnx_session (tg_onnx_build for inference, the
session API); onnxruntime 1.20 runs it on its CPU provider. Both in float32;
the worst output's max |a - b| / max |b| must be within 1e-4.

One preparation is onnxruntime's, not the file's: a file exported with
training=TRAINING (the recipe docs/onnx.md gives for training) keeps
BatchNormalization's optional running-statistics outputs, and onnxruntime
takes a BatchNormalization with those outputs (opset < 14) or
training_mode=1 as training mode (batch statistics). tilegraph, building
for inference, uses the running statistics, as PyTorch's eval() does. So
onnxruntime gets a copy with those outputs removed (inference_copy); the
test shows that copy matches the file's saved eval-mode output.

The larger torchvision models at 224x224 are test_ort_parity_large.py
(label slow). `--markdown` prints the docs/onnx.md table. Runs with the venv
Python (/opt/tilegraph/venv/bin/python); skips (77) without onnxruntime.
"""
import glob
import os
import subprocess
import sys
import tempfile
import unittest

import tg_pytest

ort, transformers = tg_pytest.skip_without_index("onnxruntime", "transformers")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
from onnx import numpy_helper  # noqa: E402

from tilegraph.onnx_session import OnnxSession  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "onnx", "fixtures")
TOL = 1e-4
BATCH = 2


def inference_copy(path):
    """The file's bytes with BatchNormalization in inference form for
    onnxruntime: the optional running-statistics outputs dropped (when nothing
    reads them) and training_mode 0."""
    m = onnx.load(path)
    read = {i for n in m.graph.node for i in n.input} | {o.name for o in m.graph.output}
    for n in m.graph.node:
        if n.op_type != "BatchNormalization":
            continue
        if not any(o in read for o in n.output[1:]):
            del n.output[1:]
        for a in n.attribute:
            if a.name == "training_mode":
                a.i = 0
    return m.SerializeToString()


def filled_copy(path, out, seed=0):
    """The file with every all-zero float initializer filled with seeded
    values (0.02 normal), written to out: a zero-initialised head (torchvision's
    ViT, tiny_vit) makes every output 0 and the comparison shows nothing."""
    m = onnx.load(path)
    g = np.random.default_rng(seed)
    for init in m.graph.initializer:
        a = numpy_helper.to_array(init)
        if a.dtype == np.float32 and a.size and not a.any():
            init.CopyFrom(numpy_helper.from_array((0.02 * g.standard_normal(a.shape)).astype(np.float32),
                                                  init.name))
    onnx.save(m, out)
    return out


def declared_inputs(path):
    """[(name, elem_type, dims with None for a dynamic one)] of the fed inputs."""
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    out = []
    for i in m.graph.input:
        if i.name in inits:
            continue
        t = i.type.tensor_type
        out.append((i.name, t.elem_type, [d.dim_value if d.HasField("dim_value") else None
                                          for d in t.shape.dim]))
    return out


def random_inputs(path, seed=0, batch=BATCH, int_high=2):
    """Seeded inputs for the declared shapes (a dynamic dim is `batch`): floats
    normal, masks ones, other integers below int_high (token ids and types:
    the smallest embedding the fixtures have, token types', has 2 rows)."""
    g = np.random.default_rng(seed)
    feeds = {}
    for name, etype, dims in declared_inputs(path):
        shape = [batch if d is None else d for d in dims]
        if etype == onnx.TensorProto.FLOAT:
            feeds[name] = g.standard_normal(shape).astype(np.float32)
        elif "mask" in name:
            feeds[name] = np.ones(shape, np.int64)
        else:
            feeds[name] = g.integers(0, int_high, shape).astype(np.int64)
    return feeds


def saved_input(name):
    """A fixture's saved input (<name>.input.pb), or None."""
    p = os.path.join(FIXTURES, name + ".input.pb")
    return numpy_helper.to_array(onnx.load_tensor(p)) if os.path.exists(p) else None


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30)) if b.size else 0.0


def compare(path, feeds, threads=1):
    """(worst relative difference over the outputs, onnxruntime's outputs).
    Both runtimes get the same feeds; a dynamic batch is the feeds' first dim."""
    batch = next(iter(feeds.values())).shape[0] if feeds else 1
    with OnnxSession(path, batch=batch, threads=threads) as s:
        ours = s.run(feeds)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(inference_copy(path), opts, providers=["CPUExecutionProvider"])
    theirs = sess.run(None, feeds)
    if len(ours) != len(theirs):
        raise AssertionError(f"{path}: tilegraph gives {len(ours)} outputs, onnxruntime {len(theirs)}")
    worst = 0.0
    for k, (a, b) in enumerate(zip(ours, theirs)):
        if a.shape != b.shape:
            raise AssertionError(f"{path}: output {k} is {a.shape} in tilegraph, {b.shape} in onnxruntime")
        worst = max(worst, rel(a, b))
    return worst, theirs


# fixtures tilegraph refuses on purpose (tests/onnx/test_onnx_rnn.c checks the refusal)
REFUSED = {"rnn_refuse_activation", "rnn_refuse_clip", "rnn_refuse_input_forget",
           "rnn_refuse_seq_lens"}


# fixtures where onnxruntime 1.20 is the one that departs, and how
ORT_REFUSES = {"rnn_gru_reverse_layout1": "layout == 1"}  # batch-major GRU/LSTM/RNN
# AveragePool ceil_mode before opset 19: onnxruntime divides the last, clipped
# window by the whole kernel size (microsoft/onnxruntime#16752 aligned it with
# PyTorch for opset 19 only); PyTorch, the ONNX spec and tilegraph by its size
ORT_DEPARTS = {"tiny_conv1d": "AveragePool ceil_mode (opset < 19) divides the last window by the "
                              "kernel size"}


def fixture_names():
    return sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(FIXTURES, "*.onnx"))
                  if os.path.basename(p)[:-5] not in REFUSED)


def fixture_feeds(name):
    path = os.path.join(FIXTURES, name + ".onnx")
    x = saved_input(name)
    if x is not None:
        return {declared_inputs(path)[0][0]: x}
    return random_inputs(path)


def export_example(model, d, extra=()):
    """examples/onnx/export.py's file for `model` (its training-mode recipe)."""
    out = os.path.join(d, model + ".onnx")
    subprocess.run([sys.executable, os.path.join(ROOT, "examples", "onnx", "export.py"), model,
                    "-o", out, *extra], check=True, capture_output=True)
    return out


class Positional(torch.nn.Module):
    """An HF model called with positional inputs in a fixed order, returning
    its first output (logits)."""

    def __init__(self, m, names):
        super().__init__()
        self.m, self.names = m, names

    def forward(self, *xs):
        return self.m(**dict(zip(self.names, xs)), return_dict=False)[0]


def export_eval(model, feeds, path, opset=13):
    """An eval-mode export with a dynamic batch (what a user exports for inference)."""
    names = list(feeds)
    model.eval()
    torch.onnx.export(model, tuple(torch.as_tensor(feeds[n]) for n in names), path,
                      input_names=names, output_names=["out"], opset_version=opset,
                      dynamic_axes={n: {0: "batch"} for n in names + ["out"]})
    return path


def export_hf(name, d):
    """test_hf_models.py's model `name` (small config, seeded weights), exported
    in eval mode, and its own inputs."""
    import test_hf_models as hf
    m, x, _ = hf.make(name)
    feeds = {k: v.numpy() for k, v in x.items()}
    m.config.return_dict = False
    return export_eval(Positional(m, list(feeds)), feeds, os.path.join(d, name + ".onnx")), feeds


def export_torchvision(name, size, d, seed=0):
    import torchvision
    torch.manual_seed(seed)
    m = getattr(torchvision.models, name)(num_classes=10)
    x = np.random.default_rng(seed).standard_normal((BATCH, 3, size, size)).astype(np.float32)
    return export_eval(m, {"input": x}, os.path.join(d, f"{name}_{size}.onnx")), {"input": x}


HF_MODELS = ["bert_qa", "bert_cls", "distilbert", "roberta", "gpt2", "gpt2_cls", "t5", "bart",
             "vit", "minilm"]
SMALL_VISION = [("resnet18", 64), ("mobilenet_v3_small", 64), ("mnasnet0_5", 64)]
RESULTS = []  # (model, worst relative difference or None, verdict) for --markdown


class Parity(unittest.TestCase):
    def check(self, label, path, feeds):
        try:
            worst, theirs = compare(path, feeds)
            if not any(np.any(t) for t in theirs):  # nothing to compare: fill the zero weights
                with tempfile.TemporaryDirectory() as d:
                    worst, theirs = compare(filled_copy(path, os.path.join(d, "filled.onnx")), feeds)
                label += " (zero initializers filled)"
                self.assertTrue(any(np.any(t) for t in theirs), f"{label}: every output is 0")
        except Exception as e:  # noqa: BLE001 - recorded, then raised
            RESULTS.append((label, None, f"error: {str(e).splitlines()[0][:120]}"))
            raise
        RESULTS.append((label, worst, "ok" if worst <= TOL else "FAIL"))
        self.assertLessEqual(worst, TOL, f"{label}: tilegraph vs onnxruntime")

    def test_fixtures(self):
        for name in fixture_names():
            if name in ORT_REFUSES or name in ORT_DEPARTS:
                continue
            with self.subTest(name):
                self.check(f"fixture {name}", os.path.join(FIXTURES, name + ".onnx"),
                           fixture_feeds(name))

    def test_fixtures_onnxruntime_departs(self):
        """Where onnxruntime refuses a fixture or departs from PyTorch, it is
        reported (and checked to still do so); tilegraph matches the saved
        PyTorch output there."""
        for name, why in ORT_REFUSES.items():
            with self.subTest(name):
                path = os.path.join(FIXTURES, name + ".onnx")
                with self.assertRaisesRegex(Exception, why):
                    ort.InferenceSession(inference_copy(path), providers=["CPUExecutionProvider"])
                with OnnxSession(path, batch=BATCH) as s:
                    s.run(random_inputs(path))
                RESULTS.append((f"fixture {name}", None, f"onnxruntime refuses ({why})"))
        for name, why in ORT_DEPARTS.items():
            with self.subTest(name):
                path = os.path.join(FIXTURES, name + ".onnx")
                want = numpy_helper.to_array(onnx.load_tensor(os.path.join(FIXTURES, name + ".output.pb")))
                x = fixture_feeds(name)
                worst, (theirs,) = compare(path, x)
                with OnnxSession(path, batch=BATCH) as s:
                    (ours,) = s.run(x)
                self.assertLessEqual(rel(ours, want), TOL, f"{name}: tilegraph vs PyTorch's saved output")
                self.assertGreater(rel(theirs, want), TOL, f"{name}: onnxruntime now agrees: move it back")
                RESULTS.append((f"fixture {name}", worst,
                                f"onnxruntime departs from PyTorch ({why}); tilegraph vs PyTorch "
                                f"{rel(ours, want):.1e}"))

    def test_inference_copy_matches_saved_eval_output(self):
        """onnxruntime on the prepared copy gives the fixture's saved eval-mode
        output; on the file as it is (training-mode BatchNormalization) it does
        not, which is why the copy is made."""
        path = os.path.join(FIXTURES, "tiny_cnn.onnx")
        x = saved_input("tiny_cnn")
        want = numpy_helper.to_array(onnx.load_tensor(os.path.join(FIXTURES, "tiny_cnn.output.pb")))
        as_is = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
        _, (prepared,) = compare(path, {"input": x})
        self.assertLessEqual(rel(prepared, want), TOL)
        self.assertGreater(rel(as_is, want), 1e-2)

    def test_examples_export(self):
        with tempfile.TemporaryDirectory() as d:
            for model, extra in (("seed004", ()), ("resnet18", ("--input", "3x32x32"))):
                with self.subTest(model):
                    path = export_example(model, d, extra)
                    self.check(f"export.py {model}", path, random_inputs(path))

    def test_int64_and_bool_inputs(self):
        """Inputs of ONNX type int64 and bool, fed as numpy int64 and bool
        arrays to both runtimes: a masked mean of embeddings (Gather on the
        int64 ids, the bool mask through Not, Where and Cast) and BERT with
        its attention mask as bool. Half of each mask's rows end in padding,
        so a mask read wrong changes the output."""
        class MaskedMean(torch.nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.emb, self.out = torch.nn.Embedding(50, 16), torch.nn.Linear(16, 4)

            def forward(self, ids, mask):
                h = self.emb(ids).masked_fill(~mask.unsqueeze(-1), 0.0)
                n = mask.to(torch.float32).sum(1, keepdim=True).clamp(min=1.0)
                return self.out(h.sum(1) / n)

        g = np.random.default_rng(3)
        mask = np.ones((BATCH, 12), np.bool_)
        mask[1, 7:] = False
        feeds = {"ids": g.integers(0, 50, (BATCH, 12)).astype(np.int64), "mask": mask}
        import test_hf_models as hf
        m, x, _ = hf.make("bert_cls")
        m.config.return_dict = False
        bert = {k: v.numpy() for k, v in x.items()}
        bert["attention_mask"] = np.ones(bert["attention_mask"].shape, np.bool_)
        bert["attention_mask"][1, bert["attention_mask"].shape[1] // 2:] = False
        with tempfile.TemporaryDirectory() as d:
            for label, model, f in (("int64 ids, bool mask", MaskedMean(), feeds),
                                    ("transformers bert_cls, bool attention mask",
                                     Positional(m, list(bert)), bert)):
                with self.subTest(label):
                    path = export_eval(model, f, os.path.join(d, "typed.onnx"))
                    types = {n: t for n, t, _ in declared_inputs(path)}
                    self.assertIn(onnx.TensorProto.BOOL, types.values(), types)
                    self.assertIn(onnx.TensorProto.INT64, types.values(), types)
                    self.check(label, path, f)
                    # the mask matters: all ones gives another output
                    ones = dict(f, **{k: np.ones_like(v) for k, v in f.items() if v.dtype == np.bool_})
                    with OnnxSession(path, batch=BATCH) as s:
                        self.assertGreater(rel(s.run(ones)[0], s.run(f)[0]), 1e-3, label)

    def test_text_models(self):
        with tempfile.TemporaryDirectory() as d:
            for name in HF_MODELS:
                with self.subTest(name):
                    path, feeds = export_hf(name, d)
                    self.check(f"transformers {name}", path, feeds)

    def test_small_vision(self):
        with tempfile.TemporaryDirectory() as d:
            for name, size in SMALL_VISION:
                with self.subTest(name):
                    path, feeds = export_torchvision(name, size, d)
                    self.check(f"torchvision {name} {size}x{size}", path, feeds)

    def test_small_vision_one_sample_two_threads(self):
        """Batch 1 on two threads: an inference program's convolutions split
        their output channels over the threads (backend/cpu/conv_dnnl.c), or run on
        one; both runtimes at 2 threads."""
        with tempfile.TemporaryDirectory() as d:
            for name, size in SMALL_VISION[:2]:
                with self.subTest(name):
                    path, feeds = export_torchvision(name, size, d)
                    one = {k: v[:1] for k, v in feeds.items()}
                    worst, _ = compare(path, one, threads=2)
                    RESULTS.append((f"torchvision {name} {size}x{size}, batch 1, 2 threads", worst,
                                    "ok" if worst <= TOL else "FAIL"))
                    self.assertLessEqual(worst, TOL, f"{name}, batch 1, 2 threads")

    def test_bad_input_is_named(self):
        """OnnxSession refuses a missing input, a wrong shape and a missing
        file by name, without running."""
        from tilegraph import TilegraphError
        path = os.path.join(FIXTURES, "tiny_mlp.onnx")
        with OnnxSession(path, batch=BATCH) as s:
            with self.assertRaisesRegex(ValueError, "input"):
                s.run({})
            with self.assertRaisesRegex(TilegraphError, "input 'input'"):
                s.run({"input": np.zeros((BATCH + 1, 1, 28, 28), np.float32)})
        with self.assertRaisesRegex(TilegraphError, "no_such.onnx"):
            OnnxSession(os.path.join(FIXTURES, "no_such.onnx"))

    def test_a_wrong_output_is_caught(self):
        """The comparison fails a model whose output differs by more than the
        tolerance: the same file with one weight changed on one side."""
        path = os.path.join(FIXTURES, "tiny_mlp.onnx")
        m = onnx.load(path)
        w = next(i for i in m.graph.initializer if numpy_helper.to_array(i).ndim == 2)
        a = numpy_helper.to_array(w).copy()
        a.flat[0] += 0.5
        w.CopyFrom(numpy_helper.from_array(a, w.name))
        with tempfile.TemporaryDirectory() as d:
            changed = os.path.join(d, "changed.onnx")
            onnx.save(m, changed)
            feeds = {"input": saved_input("tiny_mlp")}
            with OnnxSession(changed, batch=BATCH) as s:
                ours = s.run(feeds)[0]
            theirs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
            self.assertGreater(rel(ours, theirs), TOL)


def print_markdown():
    print("| model | max rel. diff | verdict |\n|---|---|---|")
    for label, worst, verdict in RESULTS:
        print(f"| {label} | {'-' if worst is None else f'{worst:.1e}'} | {verdict} |")


def main(argv):
    markdown = "--markdown" in argv
    argv = [a for a in argv if a != "--markdown"]
    prog = unittest.main(argv=argv, exit=False, verbosity=1)
    if markdown:
        print_markdown()
    sys.exit(0 if prog.result.wasSuccessful() else 1)


if __name__ == "__main__":
    main(sys.argv)
