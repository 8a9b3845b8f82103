#!/bin/sh
# tests/tools/check_call_cycles_test.sh - scripts/check_call_cycles.py fails
# on a cycle of more than two files and passes a chain or a pair: run over
# scratch build trees of tiny runtime objects compiled here, each tree a few
# calls. Must fail, naming the files of the cycle: a -> b -> c -> a (three
# files), and the same cycle through a variable rather than a function.
# Must pass: a -> b -> c (a chain), a <-> b (a pair, allowed), a static
# function of the same name in two files (local symbols are no calls).
# An empty build is an error, not a pass.
# usage: check_call_cycles_test.sh SOURCE_DIR (PYTHON: the interpreter, python3)
set -u
script=$1/scripts/check_call_cycles.py
CC=${CC:-cc}
PY=${PYTHON:-python3}
tmp=$(mktemp -d) || { echo "check_call_cycles_test: mktemp failed" >&2; exit 1; }
trap 'rm -rf "$tmp"' EXIT
command -v "$CC" >/dev/null || { echo "check_call_cycles_test: no C compiler ($CC)"; exit 77; }
fails=0
dir=$tmp/build/CMakeFiles/tilegraph_objects.dir/src/runtime

# obj NAME CODE: the scratch runtime object NAME.c.o
obj() {
    mkdir -p "$dir"
    printf '%s\n' "$2" >"$tmp/one.c"
    "$CC" -c -o "$dir/$1.c.o" "$tmp/one.c" || {
        echo "check_call_cycles_test: cannot compile $1" >&2
        exit 1
    }
}
# expect pass|fail WHAT [FILES...]: run the check; a failure must name FILES.
expect() {
    want=$1 what=$2
    shift 2
    if out=$("$PY" "$script" "$tmp/build" 2>&1); then
        [ "$want" = pass ] && return
        echo "check_call_cycles_test: $what passed, expected a failure: $out" >&2
        fails=$((fails + 1))
        return
    fi
    if [ "$want" = pass ]; then
        echo "check_call_cycles_test: $what failed, expected to pass: $out" >&2
        fails=$((fails + 1))
        return
    fi
    for f in "$@"; do
        echo "$out" | grep "^FAIL cycle of $# files:" | grep -q "src/runtime/$f.c" || {
            echo "check_call_cycles_test: $what failed without naming $f: $out" >&2
            fails=$((fails + 1))
        }
    done
}
fresh() { rm -rf "$tmp/build"; }

fresh
obj a 'int b(void); int a(void); int a(void) { return b(); }'
obj b 'int c(void); int b(void); int b(void) { return c(); }'
obj c 'int a(void); int c(void); int c(void) { return a(); }'
expect fail "a -> b -> c -> a" a b c
fresh
obj a 'extern int b_count; int a(void); int a(void) { return b_count; }'
obj b 'int c(void); int b_count = 1; int b(void); int b(void) { return c(); }'
obj c 'int a(void); int c(void); int c(void) { return a(); }'
expect fail "a reads b's variable, b -> c -> a" a b c
fresh
obj a 'int b(void); int a(void); int a(void) { return b(); }'
obj b 'int c(void); int b(void); int b(void) { return c(); }'
obj c 'int c(void); int c(void) { return 3; }'
expect pass "a -> b -> c"
fresh
obj a 'int b(void); int a(void); int a(void) { return b(); }'
obj b 'int a(void); int b(void); int b(void) { return a(); }'
obj c 'int a(void); int c(void); int c(void) { return a(); }'
expect pass "a <-> b, c -> a"
fresh
obj a 'static int h(void) { return 1; } int a(void); int a(void) { return h(); }'
obj b 'static int h(void) { return 2; } int a(void); int b(void); int b(void) { return h() + a(); }'
obj c 'int b(void); int c(void); int c(void) { return b(); }'
expect pass "static functions of one name"
fresh
mkdir -p "$tmp/build"
if "$PY" "$script" "$tmp/build" >/dev/null 2>&1; then
    echo "check_call_cycles_test: an empty build passed" >&2
    fails=$((fails + 1))
fi
[ "$fails" -eq 0 ] || exit 1
echo "check_call_cycles_test: 6 cases as expected"
