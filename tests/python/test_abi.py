"""tests/python/test_abi.py - _lib.py's cdef against the C headers.

TG_TEST_LABELS: quick

python/tilegraph/_lib.py copies structs and enums from include/tilegraph/*.h
by hand, and cffi in ABI mode cannot see the headers: a field added in C only
shifts every field after it and Python reads or writes the wrong bytes.
Three views must agree:
  - the cdef (cffi's sizeof/offsetof and enum values),
  - tests/python/abi_probe.c compiled against the headers (sizeof/offsetof
    of each field, value of each enum constant, as JSON), and
  - the headers' own field and enumerator lists (parsed here), which catch
    a field the probe does not list yet.
The last tests show each check fails on a field added on one side only.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
import unittest

try:
    import cffi
except ImportError as e:
    print(f"skipped: {e} (make deps installs python3-cffi)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
INCLUDE = os.environ.get("TILEGRAPH_INCLUDE", os.path.join(ROOT, "include"))
PROBE = os.environ.get("TILEGRAPH_ABI_PROBE")


def load_lib():
    """_lib.py alone (the package's __init__ would import torch)."""
    spec = importlib.util.spec_from_file_location(
        "tilegraph_lib_abi", os.path.join(ROOT, "python", "tilegraph", "_lib.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_probe():
    if not PROBE:
        raise unittest.SkipTest("TILEGRAPH_ABI_PROBE is not set (run through ctest)")
    return json.loads(subprocess.run([PROBE], check=True, capture_output=True, text=True).stdout)


def strip_comments(text):
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))


def header_text():
    parts = []
    for name in sorted(os.listdir(INCLUDE + "/tilegraph")):
        if name.endswith(".h"):
            with open(os.path.join(INCLUDE, "tilegraph", name)) as f:
                parts.append(strip_comments(f.read()))
    return "\n".join(parts)


def header_structs(text):
    """{struct: [field names in order]} for every `typedef struct T {...} T;`."""
    out = {}
    for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*\1\s*;", text, re.S):
        fields = []
        for decl in m.group(2).split(";"):
            decl = re.sub(r"\[[^\]]*\]", "", decl).strip()
            if not decl:
                continue
            first, *more = decl.split(",")
            fields.append(re.findall(r"\w+", first)[-1])
            fields += [re.findall(r"\w+", d)[-1] for d in more]
        out[m.group(1)] = fields
    return out


def header_enums(text):
    """{enum: [constants in order]} for enums written out (not from an X-macro list)."""
    out = {}
    for m in re.finditer(r"typedef\s+enum\s+(\w+)\s*\{(.*?)\}\s*\1\s*;", text, re.S):
        if "#" in m.group(2):
            continue  # an X-macro list: the probe prints it whole
        out[m.group(1)] = [re.findall(r"\w+", c)[0] for c in m.group(2).split(",") if c.strip()]
    return out


def mismatches(ffi, probe, headers):
    """Every disagreement between the cdef (ffi), the probe's JSON and the headers."""
    bad = []
    typedefs, _, _ = ffi.list_types()
    for name in typedefs:
        t = ffi.typeof(name)
        if t.kind == "struct" and t.fields is None:
            continue  # opaque: Python only holds pointers
        if t.kind == "struct":
            c = probe["structs"].get(name)
            if c is None:
                bad.append(f"{name}: declared in _lib.py but not printed by abi_probe.c (add it)")
                continue
            py_fields = [f for f, _ in t.fields]
            c_fields = [f for f, _ in c["fields"]]
            h_fields = headers.get(name)
            if h_fields is None:
                bad.append(f"{name}: no `typedef struct {name} {{...}} {name};` in the headers")
            elif h_fields != py_fields:
                bad.append(f"{name}: the header's fields {h_fields} != _lib.py's cdef {py_fields}")
            if h_fields is not None and h_fields != c_fields:
                bad.append(f"{name}: the header's fields {h_fields} != abi_probe.c's {c_fields}")
            if ffi.sizeof(name) != c["size"]:
                bad.append(f"{name}: sizeof is {c['size']} in C, {ffi.sizeof(name)} in _lib.py")
            for field, offset in c["fields"]:
                if field in py_fields and ffi.offsetof(name, field) != offset:
                    bad.append(f"{name}.{field}: offset {offset} in C, "
                               f"{ffi.offsetof(name, field)} in _lib.py")
        elif t.kind == "enum":
            c = probe["enums"].get(name)
            if c is None:
                bad.append(f"{name}: enum declared in _lib.py but not printed by abi_probe.c")
                continue
            if dict(t.relements) != c:
                bad.append(f"{name}: _lib.py has {sorted(t.relements.items(), key=lambda kv: kv[1])}, "
                           f"C has {sorted(c.items(), key=lambda kv: kv[1])}")
            if name in headers["enums"] and headers["enums"][name] != list(c):
                bad.append(f"{name}: the header's constants {headers['enums'][name]} != "
                           f"abi_probe.c's {list(c)}")
        if name in probe["sizes"] and ffi.sizeof(name) != probe["sizes"][name]:
            bad.append(f"{name}: sizeof is {probe['sizes'][name]} in C, {ffi.sizeof(name)} in _lib.py")
    return bad


def parsed_headers(text):
    h = header_structs(text)
    h["enums"] = header_enums(text)
    return h


def ffi_of(cdef):
    f = cffi.FFI()
    f.cdef(cdef)
    return f


class AbiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lib = load_lib()
        cls.probe = run_probe()
        cls.text = header_text()
        cls.headers = parsed_headers(cls.text)

    def test_cdef_matches_the_headers(self):
        self.assertEqual(mismatches(self.lib.ffi, self.probe, self.headers), [])

    def test_every_declared_struct_is_checked(self):
        # a check that compared nothing would pass: it must have seen every
        # struct and enum the probe prints
        typedefs, _, _ = self.lib.ffi.list_types()
        for name in list(self.probe["structs"]) + list(self.probe["enums"]):
            self.assertIn(name, typedefs)
        self.assertIn("tg_onnx_build_config", self.probe["structs"])
        self.assertEqual(self.headers["tg_optimizer"][-1], "max_grad_norm")

    def test_python_constants_are_the_c_values(self):
        c = self.probe["enums"]["tg_dtype"]
        self.assertEqual((self.lib.TG_F32, self.lib.TG_I32), (c["TG_F32"], c["TG_I32"]))
        self.assertEqual(self.probe["enums"]["tg_status"]["TG_OK"], 0)  # check() tests != 0

    def test_field_added_in_python_only_fails(self):
        cdef = self.lib.CDEF.replace("int n_constants;", "int n_constants; int extra;")
        self.assertNotEqual(cdef, self.lib.CDEF)
        bad = mismatches(ffi_of(cdef), self.probe, self.headers)
        self.assertTrue(any("tg_onnx_build_config" in b and "extra" in b for b in bad), bad)

    def test_field_added_in_c_only_fails(self):
        # a bool after a bool fits in the padding: sizes agree, the field lists do not
        text = self.text.replace("bool bias_correction;", "bool bias_correction;\n    bool extra;")
        self.assertNotEqual(text, self.text)
        bad = mismatches(self.lib.ffi, self.probe, parsed_headers(text))
        self.assertTrue(any("tg_optimizer" in b and "extra" in b for b in bad), bad)

    def test_layout_change_in_c_fails(self):
        probe = json.loads(json.dumps(self.probe))
        cfg = probe["structs"]["tg_onnx_build_config"]
        cfg["size"] += 8
        cfg["fields"][-1][1] += 8
        bad = mismatches(self.lib.ffi, probe, self.headers)
        self.assertTrue(any("sizeof" in b for b in bad) and any("offset" in b for b in bad), bad)

    def test_enum_constant_added_on_one_side_fails(self):
        probe = json.loads(json.dumps(self.probe))
        probe["enums"]["tg_dtype"]["TG_DTYPE_COUNT"] += 1
        probe["enums"]["tg_dtype"]["TG_F64"] = 5
        bad = mismatches(self.lib.ffi, probe, self.headers)
        self.assertTrue(any("tg_dtype" in b for b in bad), bad)
        cdef = self.lib.CDEF.replace("TG_OPT_LAMB }", "TG_OPT_LAMB, TG_OPT_RMSPROP }")
        bad = mismatches(ffi_of(cdef), self.probe, self.headers)
        self.assertTrue(any("tg_optimizer_kind" in b for b in bad), bad)


if __name__ == "__main__":
    unittest.main()
