#!/usr/bin/env python3
"""Public API annotations: every function and variable declared in
include/tilegraph/*.h is marked TG_API, so that the shared library exports it
and nothing else (the library is built with -fvisibility=hidden).

    scripts/api_annotate.py          add TG_API where it is missing (in place)
    scripts/api_annotate.py --check  list the declarations without it; exit 1 if any

A declaration is a line at column 0 that names a tg_ function or an extern
variable and is not a typedef, a static inline definition or a macro. The
check runs in the test suite (tools/api_check), so a new public function
without TG_API fails CI instead of silently missing from libtilegraph.so.
"""
import pathlib, re, sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DECL = re.compile(r"^(?!typedef|static|#|TG_API|return|extern \"C\")[a-z][^(;{=]*\btg_[a-z0-9_]+_?\s*\(")
VAR = re.compile(r"^extern (?!\"C\"|TG_API)[^(]*\btg_[a-z0-9_]+\s*;")


def headers():
    return sorted((ROOT / "include" / "tilegraph").glob("*.h"))


def missing(lines):
    return [i for i, line in enumerate(lines) if DECL.match(line) or VAR.match(line)]


def main():
    check = "--check" in sys.argv[1:]
    bad = 0
    for h in headers():
        if h.name == "export.h":
            continue
        lines = h.read_text().split("\n")
        idx = missing(lines)
        if check:
            for i in idx:
                print(f"{h.relative_to(ROOT)}:{i + 1}: public declaration without TG_API: {lines[i].strip()}")
            bad += len(idx)
            if idx and '#include "tilegraph/export.h"' not in lines:
                print(f"{h.relative_to(ROOT)}: declares TG_API functions but does not include tilegraph/export.h")
                bad += 1
            continue
        for i in idx:
            lines[i] = ("extern TG_API " + lines[i][len("extern "):]) if lines[i].startswith("extern ") \
                else "TG_API " + lines[i]
        if idx and '#include "tilegraph/export.h"' not in lines:
            guard = next(i for i, line in enumerate(lines) if line.startswith("#define TILEGRAPH_"))
            lines.insert(guard + 1, "")
            lines.insert(guard + 2, '#include "tilegraph/export.h"')
        if idx:
            h.write_text("\n".join(lines))
    if check:
        print(f"api_check: {bad} public declarations without TG_API" if bad else "api_check: every public declaration has TG_API")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
