#!/bin/sh
# tests/tools/install_test.sh - the library as another C program sees it:
# install into a scratch DESTDIR, check that libtilegraph.so exports only the
# public API (every exported symbol is a TG_API declaration of
# include/tilegraph/), then build examples/c with pkg-config against the
# installed copy and run them: train and save, then load and classify; and
# import the installed Python package, which must load the installed library.
# usage: install_test.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1 build=$2
command -v pkg-config >/dev/null || { echo "pkg-config is missing (make deps)"; exit 77; }
tmp=$(mktemp -d) || { echo "install_test: mktemp failed" >&2; exit 1; }
trap 'rm -rf "$tmp"' EXIT
prefix=$(sed -n 's/^prefix=//p' "$build/tilegraph.pc")
DESTDIR="$tmp/root" cmake --install "$build" >/dev/null
root="$tmp/root$prefix"
lib=$(ls "$root"/lib*/libtilegraph.so* "$root"/lib/*/libtilegraph.so* 2>/dev/null | head -n 1)
[ -n "$lib" ] || { echo "install_test: no libtilegraph.so under $root" >&2; exit 1; }
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
case $soname in libtilegraph.so.[0-9]*) ;; *) echo "install_test: bad soname '$soname'" >&2; exit 1;; esac

# Exported symbols against the declarations in the public headers.
# (a sanitizer build adds its own instrumentation symbols, __odr_asan.* and the like)
nm -D --defined-only "$lib" | awk '$2 ~ /[TDBR]/ {print $3}' |
    grep -vE '^__(odr_asan|asan|ubsan|tsan)' | sort -u >"$tmp/exported"
grep -ohE '\btg_[a-z0-9_]+_?\s*[(;]' "$root"/include/tilegraph/*.h | sed 's/[ (;]*$//' | sort -u >"$tmp/declared"
extra=$(comm -23 "$tmp/exported" "$tmp/declared")
if [ -n "$extra" ]; then
    echo "install_test: libtilegraph.so exports symbols that are not public API:" >&2
    echo "$extra" | head -n 20 >&2
    exit 1
fi
echo "exported: $(wc -l <"$tmp/exported") public symbols, soname $soname"

# The examples, built the way the README says (cc prog.c $(pkg-config
# --cflags --libs tilegraph), nothing added, against the installed copy.
# Libs carries -lm: programs written against the API (the examples) use
# libm next to it, and a dynamic link does not read Libs.private.
pcdir=$(dirname "$(find "$root" -name tilegraph.pc | head -n 1)")
flags=$(PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_SYSROOT_DIR="$tmp/root" pkg-config --cflags --libs tilegraph)
# a sanitizer build of the library needs its runtime linked first
san=""
ldd "$lib" | grep -q libasan && san="$san,address"
ldd "$lib" | grep -q libubsan && san="$san,undefined"
ldd "$lib" | grep -q libtsan && san="$san,thread"
san=${san:+-fsanitize=${san#,}}
for ex in train_spirals run_checkpoint; do
    cc -std=c11 -Wall -Werror $san "$src/examples/c/$ex.c" $flags -o "$tmp/$ex"
done
export LD_LIBRARY_PATH="$(dirname "$lib")"
ldd "$tmp/train_spirals" | grep -q "$(dirname "$lib")/libtilegraph.so" || {
    echo "install_test: the example did not link the installed shared library" >&2; exit 1; }
"$tmp/train_spirals" "$tmp/spirals.safetensors"
out=$("$tmp/run_checkpoint" "$tmp/spirals.safetensors")
echo "$out"
acc=$(echo "$out" | sed -n 's/.*: \([0-9.]*\)%.*/\1/p')
awk -v a="$acc" 'BEGIN { exit !(a >= 90) }' || { echo "install_test: accuracy $acc% < 90%" >&2; exit 1; }
if "$tmp/run_checkpoint" "$tmp/missing.safetensors" 2>"$tmp/err"; then
    echo "install_test: a missing checkpoint was accepted" >&2; exit 1
fi
grep -q missing.safetensors "$tmp/err" || { echo "install_test: error does not name the file" >&2; exit 1; }
# The Python package, as Debian's python3 would see it under this prefix. Not
# with a sanitizer build: an instrumented library cannot load into Python.
pydir="$root/lib/python3/dist-packages"
[ -f "$pydir/tilegraph/__init__.py" ] || { echo "install_test: no Python package in $pydir" >&2; exit 1; }
[ -f "$pydir/tilegraph/_installed.py" ] || { echo "install_test: $pydir/tilegraph/_installed.py missing" >&2; exit 1; }
# PEP 561: the package's type hints are for type checkers to read
[ -f "$pydir/tilegraph/py.typed" ] || { echo "install_test: $pydir/tilegraph/py.typed missing" >&2; exit 1; }
if [ -n "$san" ]; then
    echo "install_test: Python import skipped (sanitizer build)"
elif ! /usr/bin/python3 -c 'import cffi, torch, onnx' 2>/dev/null; then
    echo "install_test: Python import skipped (no python3-cffi/torch/onnx; make deps)"
else
    got=$(cd "$tmp" && env -u TILEGRAPH_LIBRARY -u LD_LIBRARY_PATH PYTHONPATH="$pydir" /usr/bin/python3 -c '
import os, tilegraph
from tilegraph import _lib
assert _lib.lib.tg_options_count() > 0
print(os.path.realpath(tilegraph.__file__)); print(os.path.realpath(_lib.lib_path))') || {
        echo "install_test: import tilegraph failed against the installed copy" >&2; exit 1; }
    real_root=$(realpath "$root")
    echo "$got" | while read -r f; do
        case $f in "$real_root"/*) ;; *) echo "install_test: $f is not the installed copy" >&2; exit 1;; esac
    done
    echo "python: $(echo "$got" | tr '\n' ' ')"
fi
echo "install_test: ok"
