#!/usr/bin/env python3
"""scripts/options_doc.py TILEGRAPH DOC [--write] - docs/options.md's table is
`tilegraph options --markdown`, the option table of the library itself.

Without --write: exit 1, printing the rows that differ, when the page's table
(the run of `|` lines from `| option | default | meaning |`) is not the
command's output; with --write: replace it (`make options-doc`). The page
once drifted from the library in five rows.
"""
import subprocess
import sys


def main():
    args = [a for a in sys.argv[1:] if a != "--write"]
    if len(args) != 2:
        print(__doc__)
        return 2
    tilegraph, doc = args
    table = subprocess.run([tilegraph, "options", "--markdown"], check=True, capture_output=True,
                           text=True).stdout.splitlines()
    lines = open(doc, encoding="utf-8").read().splitlines()
    try:
        first = lines.index(table[0])
    except ValueError:
        print(f"{doc}: no table starting '{table[0]}'")
        return 1
    last = first
    while last < len(lines) and lines[last].startswith("|"):
        last += 1
    if lines[first:last] == table:
        print(f"{doc}: the options table matches `tilegraph options --markdown` ({len(table) - 2} options)")
        return 0
    if "--write" in sys.argv:
        lines[first:last] = table
        with open(doc + ".tmp", "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        import os
        os.replace(doc + ".tmp", doc)
        print(f"{doc}: options table rewritten ({len(table) - 2} options)")
        return 0
    old, new = set(lines[first:last]), set(table)
    for row in sorted(old - new):
        print(f"- page:    {row}")
    for row in sorted(new - old):
        print(f"+ library: {row}")
    print(f"{doc}: the options table differs from `tilegraph options --markdown` "
          f"(make options-doc rewrites it)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
