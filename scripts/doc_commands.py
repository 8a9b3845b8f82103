#!/usr/bin/env python3
"""scripts/doc_commands.py - run the `tilegraph ...` command lines of the docs.

Every fenced block of README.md and docs/*.md is read; each line that is a
`tilegraph` command (after an optional `$ `, with `\\` continuations joined
and a trailing `# comment` dropped) is run, file by file in the order the
doc gives them, in one scratch directory per doc (so a `--save` or
`--profile-dir` earlier in a doc serves the commands after it; `/tmp/X` paths
are moved into that directory; a relative path of a file of the source tree,
tests/onnx/fixtures/unet_shapes.onnx, is that file). A doc that was written from a run and never
run again drifts: flags renamed, defaults changed, examples that fail.

A doc's export line (`/usr/bin/python3 examples/onnx/export.py ...`) runs
too, in the same directory, so the ONNX file it writes serves the commands
after it (skipped, and so are they, where Python has no torch).

What is not run, each with its reason in the table: output lines
(`tilegraph compile: ...`), synopses (REPORT, A B, [..]), lines with `...`,
commands that need what a fresh clone does not have (an ONNX file no line
of the doc exports, a data set under /data, a hostfile) and those that never
end (`monitor --watch`). Commands are made cheap without changing what they
check: `train` runs 3 steps (`--max-steps 3`, and 200 test samples unless the
line sets a limit), so every flag is parsed and the run starts, compiles and
steps; nothing else is changed. A line whose comment says it fails must fail;
every other must exit 0. Each command has a time bound.

usage: doc_commands.py TILEGRAPH SOURCE_DIR [--list] [--only DOC]
       doc_commands.py --self-test
"""
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

TIME_BOUND = 120  # seconds per command

# (pattern in the command, reason it is not run here)
NOT_RUN = [
    (r"\.\.\.", "elided ('...')"),
    (r"\bREPORT\b|\bA B\b|\[[a-z|.]+\]|\bFILE\b|\bDIR\b", "a synopsis, not a command"),
    (r"monitor --watch", "runs until interrupted"),
    (r"--hostfile", "needs hosts"),
    (r"analyse (plain|slow)1 ", "reads the profiles tests/dist/slow_link_test.sh makes over its hosts"),
    (r"cifar10:/data|--dataset cifar10", "needs a data set not in Debian"),
    (r"\btrain\b.*\bresnet(50|101|152)\b", "trains a large ResNet: minutes on this machine"),
]


def commands(path):
    """(line number, command, comment) of each tilegraph command in path's
    fenced blocks. A command the doc follows at once with its error line
    (`tilegraph compile: ...`) gets "fails" added to its comment."""
    out, block, pending, start, just_ran = [], False, "", 0, False
    for n, raw in enumerate(open(path, encoding="utf-8"), 1):
        if raw.lstrip().startswith("```"):
            block, pending, just_ran = not block, "", False
            continue
        if not block:
            continue
        line = raw.rstrip("\n")
        if pending:
            line, lineno = pending + " " + line.strip(), start
        else:
            line, lineno = line.strip(), n
            if line.startswith("$ "):
                line = line[2:]
        if line.endswith("\\"):
            pending, start = line[:-1].rstrip(), lineno
            continue
        pending = ""
        if just_ran and re.match(r"tilegraph [a-z]+: ", line):
            out[-1] = (out[-1][0], out[-1][1], out[-1][2] + " fails")
        just_ran = False
        if not (re.match(r"([A-Z_]+=('[^']*'|\S+)\s+)*(\./)?(build/)?tilegraph\s", line)
                or EXPORT.match(line)):
            continue
        comment = ""
        m = re.search(r"\s#\s", line)
        if m:
            line, comment = line[:m.start()].rstrip(), line[m.end():]
        out.append((lineno, line, comment))
        just_ran = True
    return out


def split_env(argv):
    """Leading NAME=VALUE words (the environment the line sets) and the rest."""
    env = {}
    while argv and re.match(r"[A-Z_]+=", argv[0]):
        k, v = argv.pop(0).split("=", 1)
        env[k] = v
    return env, argv


# a doc's line that exports an ONNX file for the commands after it
EXPORT = re.compile(r"(/usr/bin/)?python3 examples/onnx/export\.py\s")

ROOT = "."  # the source tree (main sets it): a doc's tests/... and examples/... paths are its files


def in_tree(path):
    """A relative path of the source tree (tests/onnx/fixtures/x.onnx) made absolute; None otherwise."""
    p = os.path.join(ROOT, path)
    return p if "/" in path and not os.path.isabs(path) and os.path.exists(p) else None


def not_run_reason(cmd, scratch=None):
    """Why cmd is not run (None: it is). scratch: the doc's directory, where
    an earlier export line may have written the ONNX file cmd reads."""
    if EXPORT.match(cmd):
        return None
    words = re.sub(r"^([A-Z_]+=('[^']*'|\S+)\s+)*", "", cmd).split()
    if len(words) < 2 or words[1].endswith(":") or words[1] == "version":
        return "an output line"
    for pattern, reason in NOT_RUN:
        if re.search(pattern, cmd):
            return reason
    if re.search(r"--model \S+\.onnx|\bimport \S+\.onnx", cmd):
        f = re.search(r"(\S+\.onnx)", cmd).group(1)
        made = scratch and os.path.exists(os.path.join(scratch, f))
        return None if made or in_tree(f) else f"needs {f} (exported from PyTorch)"
    return None


def cheap(argv, scratch):
    """The command made cheap (train: 3 steps) with the doc's /tmp paths in the
    scratch directory. argv[0] is the tilegraph binary, which stays as it is:
    a checkout under /tmp has its binary there too."""
    argv = argv[:1] + [in_tree(a) or re.sub(r"^/tmp/", scratch + "/", a) for a in argv[1:]]
    if len(argv) > 1 and argv[1] == "train" and "--help" not in argv:
        if "--max-steps" not in argv:
            argv += ["--max-steps", "3"]
        if "--test-limit" not in argv:
            argv += ["--test-limit", "200"]
    if len(argv) > 1 and argv[1] == "run" and "--" in argv:
        i = argv.index("--")
        if argv[i + 1:i + 2] == ["train"]:
            argv += ["--max-steps", "3", "--test-limit", "200"]
    return argv


def run_doc(tilegraph, doc, rows):
    scratch = tempfile.mkdtemp(prefix="tg-doc-")
    env = dict(os.environ, HOME=scratch)  # ~/.cache/tilegraph lands in the scratch directory
    try:
        for lineno, cmd, comment in commands(doc):
            where = f"{os.path.basename(doc)}:{lineno}"
            reason = not_run_reason(cmd, scratch)
            if reason:
                rows.append((where, cmd, "skip", reason))
                continue
            try:
                argv = shlex.split(cmd)
            except ValueError as e:
                rows.append((where, cmd, "FAIL", f"cannot be split as a shell line: {e}"))
                continue
            line_env, argv = split_env(argv)
            line_env = {k: v.replace("/tmp/", scratch + "/") for k, v in line_env.items()}
            if EXPORT.match(cmd):
                if subprocess.run([argv[0], "-c", "import torch, torchvision"],
                                  capture_output=True).returncode != 0:
                    rows.append((where, cmd, "skip", "needs Python with torch and torchvision"))
                    continue
                argv = [in_tree(a) or a for a in argv]
            else:
                argv = cheap([tilegraph] + argv[1:], scratch)
            argv = [scratch + a[1:] if a.startswith("~/") else a for a in argv]
            expect_fail = bool(re.search(r"\bfails\b|\berror\b", comment))
            t0 = time.monotonic()
            try:
                p = subprocess.run(argv, cwd=scratch, env=dict(env, **line_env), stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True, timeout=TIME_BOUND)
                rc, err = p.returncode, (p.stderr.strip().splitlines() or [""])[-1]
            except subprocess.TimeoutExpired:
                rc, err = None, f"still running after {TIME_BOUND} s"
            secs = time.monotonic() - t0
            ok = rc is not None and ((rc != 0) if expect_fail else (rc == 0))
            what = (f"exit {rc}" if rc is not None else "timeout") + f", {secs:.1f} s"
            if expect_fail:
                what += " (expected to fail)"
            rows.append((where, cmd, "ok" if ok else "FAIL", what if ok else f"{what}: {err}"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def self_test():
    """The runner's own rules, checked without running a doc."""
    # a checkout under /tmp: the binary keeps its path, the doc's /tmp paths move
    argv = cheap(["/tmp/x/build/tilegraph", "train", "--save", "/tmp/w.st"], "/s")
    assert argv[0] == "/tmp/x/build/tilegraph", argv
    assert argv[3] == "/s/w.st" and argv[-4:] == ["--max-steps", "3", "--test-limit", "200"], argv
    # an export line is a command, and the ONNX file it writes serves the next
    with tempfile.TemporaryDirectory() as d:
        doc = os.path.join(d, "doc.md")
        with open(doc, "w") as f:
            f.write("```\n/usr/bin/python3 examples/onnx/export.py resnet18 -o r.onnx\n"
                    "tilegraph import r.onnx\n```\n")
        cmds = [c for _, c, _ in commands(doc)]
        assert len(cmds) == 2 and EXPORT.match(cmds[0]), cmds
        assert not_run_reason(cmds[1], d) == "needs r.onnx (exported from PyTorch)"
        open(os.path.join(d, "r.onnx"), "w").close()
        assert not_run_reason(cmds[1], d) is None
    print("doc_commands.py: self-test ok")
    return 0


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        return self_test()
    if len(args) < 2 or "--help" in args:
        print(__doc__)
        return 0 if "--help" in args else 2
    global ROOT
    tilegraph, root = os.path.abspath(args[0]), args[1]
    ROOT = os.path.abspath(root)
    docs = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    if "--only" in args:
        only = args[args.index("--only") + 1]
        docs = [d for d in docs if os.path.basename(d) == only]
    if "--list" in args:
        for d in docs:
            for lineno, cmd, comment in commands(d):
                print(f"{os.path.basename(d)}:{lineno}: {cmd}   [{not_run_reason(cmd) or 'run'}]")
        return 0
    rows = []
    for d in docs:
        run_doc(tilegraph, d, rows)
    width = max(len(r[0]) for r in rows)
    for where, cmd, status, what in rows:
        short = cmd if len(cmd) <= 90 else cmd[:87] + "..."
        print(f"{status:<4}  {where:<{width}}  {short}\n      {'':<{width}}  {what}")
    ran = sum(r[2] != "skip" for r in rows)
    failed = [r for r in rows if r[2] == "FAIL"]
    print(f"{len(rows)} command lines in the docs: {ran} run, {ran - len(failed)} ok, "
          f"{len(failed)} failed, {len(rows) - ran} not run (reasons above)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
