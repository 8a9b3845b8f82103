#!/usr/bin/python3
# scripts/check_switches.py ROOT - every switch in ROOT/src ends in an abort
# or an error, never silently in its last case (issue 43, item 5).
#
# Interpreter: Debian's /usr/bin/python3, standard library only.
#
# A switch's `default:` must do one of:
#   - abort: TG_UNREACHABLE(what, value) or TG_UNREACHABLE_OP(op)
#     (core/check.h, ops/op.h), for a value the code owns (an enum);
#   - fail with a clear error (tg_error, ob_fail, a TG_ERR_ status, the
#     JSON parser's fail_at), for a value that comes from input.
# A switch over an op (`switch (...->op)`, `switch (op)`) must abort: it
# may not end in an error, and it must have its default (an op it has no
# case for would fall out of the switch with its output unwritten), unless
# it is listed below as handing the op to another switch that aborts.
#
# The catch-alls that are the meaning, not a forgotten case (an unknown
# ISA level is "base", every other JSON byte is copied), are listed below
# by file and switched expression with the reason; a listed switch that no
# longer has such a default fails too, so the list only shrinks.
#
# `--self-test` checks the checker on small sources of its own (a last case
# that computes, an op switch without a default: both must fail).
import glob
import os
import re
import sys

KNOWN = {
    ("src/analyse/report_data.c", "sqlite3_column_type(st, i)"): "text and blobs both as strings",
    ("src/compile/layout.c", "tg_op_layout_of(t, p->plan_threads, !p->training)"): "TG_LAYOUT_PLAIN is the safe default",
    ("src/compile/precision.c", "t->role"): "constants and running statistics keep their type",
    ("src/compile/program_steps.c", "t->role"): "every other role is a host input",
    ("src/compile/streaming.c", "buf->region"): "a region with no streaming slot",
    ("src/core/json.c", "a->type"): "a scalar has no children",
    ("src/runtime/evaluate.c", "l->dtype"): "every other input type is read as floats (the loader converts)",
    ("src/core/json_write.c", "c"): "every other control byte as \\u00XX",
    ("src/data/safetensors.c", "t"): "dtype mappings: the others refused by the caller",
    ("src/onnx/onnx_fold.c", "t"): "an element type with no integer reading",
    ("src/onnx/onnx_tensor.c", "t"): "element sizes: unknown types refused by the caller",
    ("src/onnx/onnx_tensor.c", "d->elem_type"): "integer types read from int32_data",
    ("src/onnx/onnx_tensor.c", "e"): "integer types read from int32_data",
    ("src/backend/cpu/activation_kernels.c", "f"): "the other functions run one element at a time below",
    ("src/backend/cpu/dnnl_util.c", "tg_dnnl_isa()"): "oneDNN without JIT",
    ("src/backend/cpu/simd.c", "level"): "the base ISA level",
    ("src/backend/cpu/unary_kernels.c", "j->op"): "map_math's own op switch aborts",
    ("src/ops/unary.c", "node->op"): "ref_math's own op switch aborts",
    ("src/profile/profile.c", "types[i]"): "NULL columns",
    ("src/report/table.c", "k"): "plain numbers",
    ("src/runtime/session_io.c", "s->output_mode"): "output modes: every other mode streams",
    ("src/runtime/session_io.c", "(tg_cache_result)s->cache"): "no cache result yet",
    ("src/runtime/verify_check.c", "t"): "per-dtype figures: integers exact, f32's range",
    ("src/trace/chrome_trace.c", "e->kind"): "heatmap samples are written per slice",
}

ABORT = re.compile(r"\bTG_UNREACHABLE(_OP)?\s*\(")
ERROR = re.compile(r"\btg_error\s*\(|\bob_fail\s*\(|\bfail_at\s*\(|\bTG_ERR_[A-Z]+")
OP_SWITCH = re.compile(r"(->op|\bop)\s*$")


def strip(src):
    """Comments and string/char literals blanked, lengths kept (so braces
    and the word default inside them do not count)."""
    pat = re.compile(r'//[^\n]*|/\*.*?\*/|"(\\.|[^"\\\n])*"|\'(\\.|[^\'\\\n])*\'', re.S)
    return pat.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), src)


def close(s, i, o, c):
    depth = 1
    while depth:
        depth += (s[i] == o) - (s[i] == c)
        i += 1
    return i


def switches(src):
    """(offset, expression, body) of every switch in src (stripped)."""
    for m in re.finditer(r"\bswitch\s*\(", src):
        e = close(src, m.end(), "(", ")")
        b = src.index("{", e)
        end = close(src, b + 1, "{", "}")
        yield m.start(), src[m.end() : e - 1].strip(), src[b + 1 : end - 1]


def default_of(body):
    """The body's own default: up to its next case (nested blocks skipped)."""
    depth, i = 0, 0
    while i < len(body):
        c = body[i]
        if c in "{(":
            depth += 1
        elif c in "})":
            depth -= 1
        elif depth == 0 and re.match(r"default\s*:", body[i:]):
            nxt = re.compile(r"\bcase\b")
            j, d = i, 0
            while j < len(body):
                d += body[j] in "{(" and 1 or body[j] in "})" and -1 or 0
                if d == 0 and nxt.match(body, j):
                    break
                j += 1
            return body[i:j]
        i += 1
    return None


def check_source(path, text, known_seen):
    """The faults of one file, as 'path:line: ...' strings."""
    faults = []
    src = strip(text)
    for pos, expr, body in switches(src):
        line = src.count("\n", 0, pos) + 1
        d = default_of(body)
        where = "%s:%d: switch (%s)" % (path, line, expr)
        if OP_SWITCH.search(expr):
            if d is not None and not ABORT.search(d) and (path, expr) in KNOWN:
                known_seen.add((path, expr))  # it hands the op to a switch that aborts
            elif d is None or not ABORT.search(d):
                faults.append(where + " over ops must end in default: TG_UNREACHABLE_OP(op)")
            continue
        if d is None or ABORT.search(d) or ERROR.search(d):
            continue
        if (path, expr) in KNOWN:
            known_seen.add((path, expr))
            continue
        faults.append(
            where + " falls into a last case: end it in TG_UNREACHABLE(\"what\", value) for a "
            "value the code owns, or a clear error for one from input"
        )
    return faults


def self_test():
    bad = "int f(int k) { switch (k) { case 0: return 1; default: return 2; } }\n"
    bad_op = "void g(const tg_tensor *t) { switch (t->op) { case TG_OP_RELU: break; } }\n"
    good = (
        "int h(int k) { switch (k) { case 0: return 1; /* default: x */\n"
        "default: TG_UNREACHABLE(\"k\", k); } }\n"
        'int e(int k) { switch (k) { case 1: return 0; default: return tg_error(TG_ERR_FORMAT, "k"); } }\n'
    )
    seen = set()
    ok = len(check_source("bad.c", bad, seen)) == 1
    ok = ok and "over ops" in "".join(check_source("op.c", bad_op, seen))
    ok = ok and check_source("good.c", good, seen) == []
    print("check_switches self-test:", "ok" if ok else "FAILED")
    return 0 if ok else 1


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    root = argv[1] if len(argv) > 1 else "."
    faults, seen = [], set()
    for f in sorted(glob.glob(os.path.join(root, "src", "**", "*.c"), recursive=True)):
        rel = os.path.relpath(f, root)
        with open(f, encoding="utf-8") as fh:
            faults += check_source(rel, fh.read(), seen)
    for stale in sorted(set(KNOWN) - seen):
        faults.append(
            "%s: switch (%s) is listed in scripts/check_switches.py's KNOWN but no longer "
            "ends in a last case: remove it from the list" % stale
        )
    for f in faults:
        print(f)
    if faults:
        print("%d switch(es) at fault (scripts/check_switches.py says what each needs)" % len(faults))
        return 1
    print("every switch in %s/src ends in an abort, an error or a listed catch-all" % root)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
