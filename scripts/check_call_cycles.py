#!/usr/bin/env python3
"""scripts/check_call_cycles.py - the file-level call graph of one source
folder (src/runtime by default), read from the compiled objects.

Each object's defined and undefined global symbols come from nm; file A
calls file B when A uses a symbol B defines (a function or a variable;
static functions are local and do not count). The graph's strongly
connected components are the groups of files that call each other round a
cycle: nobody can change one of them without reading all of them
(docs/architecture.md, "How the runtime's call graph is measured"). A
component of more than --max files (2: a pair that calls both ways, such as
a part and its caller's callback, is allowed) fails the check (exit 1),
naming its files and, for each, the calls that keep it in.

Interpreter: any python3 (standard library only); nm from binutils.

usage: scripts/check_call_cycles.py BUILD_DIR [--dir src/runtime] [--max 2]
       [--edges] [--source SOURCE_DIR] (BUILD_DIR: a CMake build of the library, made first; NM
       overrides nm)
"""
import argparse
import os
import subprocess
import sys

OBJ_DIR = "CMakeFiles/tilegraph_objects.dir"


def read_symbols(objects, nm):
    """{file: (defined set, undefined set)} from one nm over the objects."""
    out = subprocess.run([nm, "-P", "-A"] + objects, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("check_call_cycles: %s failed: %s" % (nm, out.stderr.strip()))
    syms = {o: (set(), set()) for o in objects}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        obj, name, kind = parts[0].rstrip(":"), parts[1], parts[2]
        if obj.endswith("]"):  # an archive member, obj[member]
            obj = obj[: obj.index("[")]
        if obj not in syms:
            continue
        if kind in "TDBRCVWG":
            syms[obj][0].add(name)
        elif kind == "U":
            syms[obj][1].add(name)
    return syms


def edges_of(syms):
    """{caller: {callee: sorted symbols}} between the files."""
    owner = {}
    for f, (defined, _) in syms.items():
        for s in defined:
            owner[s] = f
    edges = {f: {} for f in syms}
    for f, (_, undefined) in syms.items():
        for s in undefined:
            g = owner.get(s)
            if g is not None and g != f:
                edges[f].setdefault(g, []).append(s)
    for f in edges:
        for g in edges[f]:
            edges[f][g].sort()
    return edges


def components(nodes, edges):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--dir", default="src/runtime")
    ap.add_argument("--max", type=int, default=2)
    ap.add_argument("--edges", action="store_true", help="print every edge too")
    ap.add_argument(
        "--source",
        help="the source tree: objects whose source file is gone (left in the build) are skipped",
    )
    a = ap.parse_args()
    base = os.path.join(a.build, OBJ_DIR, a.dir)
    if not os.path.isdir(base):
        sys.exit("check_call_cycles: no objects in %s: build the library first" % base)
    objects = sorted(
        os.path.join(base, n) for n in os.listdir(base) if n.endswith(".o")
    )
    if a.source:
        objects = [
            o
            for o in objects
            if os.path.exists(os.path.join(a.source, a.dir, os.path.basename(o)[: -len(".o")]))
        ]
    if not objects:
        sys.exit("check_call_cycles: no objects in %s: build the library first" % base)
    syms = read_symbols(objects, os.environ.get("NM", "nm"))
    name = {o: os.path.join(a.dir, os.path.basename(o)[: -len(".o")]) for o in objects}
    syms = {name[o]: v for o, v in syms.items()}
    edges = edges_of(syms)
    n_edges = sum(len(v) for v in edges.values())
    if a.edges:
        for f in sorted(edges):
            for g in sorted(edges[f]):
                print("%s -> %s: %s" % (f, g, " ".join(edges[f][g])))
    comps = [c for c in components(list(edges), edges) if len(c) > 1]
    comps.sort(key=lambda c: (-len(c), c))
    bad = 0
    for c in comps:
        long = len(c) > a.max
        bad += long
        print("%s cycle of %d files: %s" % ("FAIL" if long else "ok:", len(c), " ".join(c)))
        if long:
            inside = set(c)
            for f in c:
                for g in sorted(edges[f]):
                    if g in inside:
                        print("    %s -> %s: %s" % (f, g, " ".join(edges[f][g])))
    print(
        "check_call_cycles: %d files, %d edges in %s; %d cycle(s) of more than %d files"
        % (len(edges), n_edges, a.dir, bad, a.max)
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
