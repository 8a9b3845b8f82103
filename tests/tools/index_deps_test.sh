#!/bin/sh
# tests/tools/index_deps_test.sh SOURCE_DIR - scripts/index_deps.sh, the
# package index's share of `make deps`, where the index cannot be reached:
# it makes the virtual environment, warns naming the pinned packages, exits 0
# (the build goes on) and writes no stamp, so the next `make deps` tries
# again. And the two files it reads are what docs/dependencies.md promises:
# every requirement pinned with ==, numpy and torch among Debian's pins.
src=${1:?usage: index_deps_test.sh SOURCE_DIR}
if ! /usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null; then
  echo "skipped: /usr/bin/python3 has no venv/ensurepip (Debian package python3-venv)"
  exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }
req=$src/python/requirements-index.txt
cons=$src/python/constraints-debian.txt
unpinned=$(sed 's/#.*//' "$req" | grep -v '^[[:space:]]*$' | grep -v '==')
[ -z "$unpinned" ] || fail "not pinned with == in $req: $unpinned"
for p in numpy torch onnx protobuf; do
  grep -q "^$p==" "$cons" || fail "$cons does not pin Debian's $p"
done

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# an index that refuses connections, no local wheels, no user pip config
PIP_INDEX_URL=http://127.0.0.1:9/ PIP_FIND_LINKS= PIP_CONFIG_FILE=/dev/null \
  TG_VENV=$tmp/venv sh "$src/scripts/index_deps.sh" "$src" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
[ $rc = 0 ] || fail "index_deps.sh exited $rc with the index unreachable (must warn and go on)"
grep -q "warning: Python index packages not installed in $tmp/venv" "$tmp/out" ||
  fail "no warning naming the environment"
grep -q "transformers==" "$tmp/out" || fail "the warning does not name the packages"
grep -q "will be skipped" "$tmp/out" || fail "the warning does not say the tests skip"
[ -x "$tmp/venv/bin/python3" ] || fail "the virtual environment was not made"
[ ! -e "$tmp/venv/.tilegraph-index-stamp" ] || fail "a stamp was written though nothing was installed"
"$tmp/venv/bin/python3" -c 'import torch, numpy, sys; sys.exit(0 if torch.__file__.startswith("/usr/lib/python3/") else 1)' ||
  fail "the environment does not see Debian's torch"
echo "ok: index unreachable -> warning, exit 0, no stamp; the environment sees Debian's torch"
